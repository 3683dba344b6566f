"""Scheduler identification on simulated cells it was not trained on, and on real per-UE data."""
import numpy as np
import pandas as pd
import pytest

from airlink import sim
from airlink.inference import scheduler as S


@pytest.fixture(scope="module")
def model():
    # trained once (about a minute on 2 cores) and cached under $AIRLINK_CACHE or ~/.cache/airlink
    return S.load_scheduler_model()


def test_at_least_90_percent_on_unseen_runs(model):
    """Accuracy measured here, on cells simulated with seeds the training never used (one
    run per scheduler, preset, load and cell size of the training grid), not the accuracy
    the model reports about itself."""
    assert set(model["models"]) == {"cell", "user"}
    runs = S.training_runs(n_seeds=1)[::2]
    hits = []
    for label, preset, seed, duration, ov in runs:
        mac = sim.simulate(preset, seed=seed + 777_000, duration=duration, **ov).mac
        res = S.identify_scheduler(mac, model=model)
        assert 0 <= res["probability"] <= 1 and abs(sum(res["probabilities"].values()) - 1) < 1e-9
        hits.append(res["scheduler"] == label)
    assert np.mean(hits) >= 0.9, f"{sum(hits)}/{len(hits)} correct"


@pytest.mark.parametrize("a,expected", [(0.01, 100), (0.001, 1000)])
def test_pf_time_constant(model, a, expected):
    mac = sim.simulate("quick", seed=7, duration="6s", scheduler="pf", pf_window=0, pf_a=a, n_users=4,
                       snr_db=[15, 8, 2, -4]).mac
    res = S.identify_scheduler(mac, model=model)
    assert res["scheduler"] == "pf"
    assert res["pf_time_constant_tti"] == expected
    assert res["pf_time_constant_s"] == pytest.approx(expected * 1e-3)
    assert res["pf_time_constant_resolved"] is True


def test_pf_time_constant_unresolved_when_flat():
    mac = sim.simulate("quick", seed=7, duration="6s", scheduler="pf", pf_window=0, pf_a=0.1, n_users=4,
                       snr_db=[15, 8, 2, -4]).mac
    est = S.estimate_pf_time_constant(S.observe(mac))
    assert est["resolved"] is False and est["margin"] < S.PF_RESOLVED_MARGIN


def test_cli_scheduler_json(run_airlink, tmp_path, model):
    import json
    mac = sim.simulate("quick", seed=99, duration="4s", scheduler="maxcir", n_users=4,
                       snr_db=[18, 10, 4, -2]).mac
    path = tmp_path / "mac.parquet"
    mac.to_parquet(path)
    status, out, err = run_airlink("infer", "scheduler", path, "--json")
    assert status == 0, err
    res = json.loads(out)
    assert res["scheduler"] == "maxcir" and res["view"] == "cell"
    assert "heldout_accuracy" in res["model"]


def icellspeed_files(root):
    return sorted((root / "icellspeed" / "D1_static").rglob("data_*.csv"))


def test_icellspeed_per_carrier_prbs(shared_data, model):
    """Real per-UE PRB allocations (Purdue iCellSpeed), one row per second: far from the per-TTI
    cells the model knows, so the answer is "unknown" with the reason, the model's best guess
    and its probabilities still shown."""
    files = icellspeed_files(shared_data)
    if not files:
        pytest.skip("no iCellSpeed D1_static files in ../shared/data/icellspeed")
    frame = pd.read_csv(files[0], na_values=["None"])
    frame["time"] = frame["seconds_since_epoch"]
    res = S.identify_scheduler(frame, model=model, alloc="pcell_sum_nRB", channel="pcell_snr")
    assert res["view"] == "user" and res["users"] == 1 and res["users_used"] == ["pcell_sum_nRB"]
    assert res["scheduler"] == "unknown" and res["confident"] is False
    assert res["best_guess"] in S.CLASSES and abs(sum(res["probabilities"].values()) - 1) < 1e-9
    assert any("one sample per 1 s" in r for r in res["reasons"])
    assert res["samples"] == frame["seconds_since_epoch"].max() - frame["seconds_since_epoch"].min() + 1
    assert res["sample_period_s"] == 1.0


def test_every_icellspeed_file_gets_an_answer(shared_data, model):
    """Every iCellSpeed file in ../shared/data (static and driving), read by the collector:
    never a crash (short carriers once broke the feature code with a shape error); carriers of
    the one phone are never taken as competing users; per-second data is never confident."""
    from airlink import collectors as C
    files = sorted((shared_data / "icellspeed").rglob("data_*.csv"))
    if not files:
        pytest.skip("no iCellSpeed files in ../shared/data/icellspeed")
    for f in files:
        frame = C.read(f)
        res = S.identify_scheduler(frame, model=model)
        assert res["scheduler"] == "unknown" and res["confident"] is False and res["reasons"], f
        assert res["view"] == "user" and len(res["users_used"]) == 1, f
        assert len(res["ignored"]) == max(frame["carrier"].nunique() - 1, 0), f
        assert all("carrier aggregation" in g["reason"] for g in res["ignored"]), f
        assert res["users_used"][0].split("/")[0] == "ue", f        # the one phone, one of its carriers


def test_scheduler_cli_says_cannot_tell_on_icellspeed(run_airlink, shared_data, model):
    files = icellspeed_files(shared_data)
    if not files:
        pytest.skip("no iCellSpeed D1_static files in ../shared/data/icellspeed")
    status, out, err = run_airlink("infer", "scheduler", files[0], "--alloc", "pcell_sum_nRB", "--channel",
                                   "pcell_snr")
    assert status == 0, err
    assert out.startswith("scheduler: cannot tell") and "one sample per 1 s" in out and "users: pcell_sum_nRB" in out


def test_out_of_distribution_reasons(model):
    """Too few users for the cell model, no channel column: an honest unknown, with reasons."""
    mac = sim.simulate("quick", seed=5, duration="2s", scheduler="rr", n_users=4, snr_db=[18, 10, 4, -2]).mac
    res = S.identify_scheduler(mac.drop(columns=["sinr_db", "sinr_reported_db", "mcs"]), model=model)
    assert res["scheduler"] == "unknown" and any("channel" in r for r in res["reasons"])
    two = mac[mac["user"].isin(["1", "2"])]
    res = S.identify_scheduler(two, model=model)
    assert res["view"] == "cell" and res["scheduler"] == "unknown"
    assert any("2 users" in r for r in res["reasons"])
    assert res["users_used"] == ["1", "2"]


def test_classifier_is_a_scikit_learn_estimator():
    """get_params/set_params/clone work, learned attributes end with _, and scikit-learn's own
    estimator checks pass (all of check_estimator's checks that apply; array-API input is skipped
    by scikit-learn itself without SCIPY_ARRAY_API)."""
    from sklearn.base import clone
    from sklearn.utils.estimator_checks import check_estimator
    est = S.SchedulerClassifier(n_estimators=10, random_state=3)
    assert est.get_params() == dict(view="cell", n_estimators=10, min_samples_leaf=2, random_state=3)
    assert clone(est.set_params(n_estimators=12)).n_estimators == 12
    results = check_estimator(S.SchedulerClassifier(n_estimators=10), on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert not failed and len(results) > 40
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.array(["rr", "pf"] * 20)
    fitted = S.SchedulerClassifier(n_estimators=5).fit(X, y)
    assert list(fitted.classes_) == ["pf", "rr"] and fitted.n_features_in_ == 3
    assert {k for k in vars(fitted) if k.endswith("_")} >= {"forest_", "classes_", "n_features_in_"}


def test_confidence_flag(model):
    mac = sim.simulate("quick", seed=3, duration="4s", scheduler="rr", n_users=4, snr_db=[18, 10, 4, -2]).mac
    res = S.identify_scheduler(mac, model=model)
    assert res["confident"] == (res["probability"] >= S.CONFIDENT_PROBABILITY)
    assert res["scheduler"] == "rr"


def test_one_user_holding_the_carrier_cannot_tell_rr_from_pf(tmp_path, run_airlink):
    # one phone's 20 ms log: it holds 206 of the carrier's 215 RBs whenever served
    rng = np.random.default_rng(3)
    n = 500
    frame = pd.DataFrame({"time": 1_700_000_000_000 + 20 * np.arange(n),          # epoch ms
                          "prbs": np.where(rng.random(n) < 0.9, 206, 0), "prbs_max": 215,
                          "snr_db": rng.normal(15, 4, n)})
    path = tmp_path / "ue.csv"
    frame.to_csv(path, index=False)
    from airlink.inference.scheduler import identify_scheduler
    res = identify_scheduler(frame.assign(time=pd.to_datetime(frame["time"], unit="ms", utc=True)), model={})
    assert res["scheduler"] == "unknown" and res["probabilities"] == {} and res["best_guess"] is None
    assert res["cannot_tell"].startswith("one user cannot distinguish RR from PF")
    assert f"{206 / 215:.0%}" in res["cannot_tell"] and "206 of 215" in res["cannot_tell"]
    status, out, err = run_airlink("infer", "scheduler", path)
    assert status == 0, err
    assert "scheduler: cannot tell: one user cannot distinguish RR from PF" in out and "probability" not in out
