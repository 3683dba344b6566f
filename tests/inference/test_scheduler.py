"""Scheduler identification on simulated cells it was not trained on, and on real per-UE data."""
import numpy as np
import pandas as pd
import pytest

sim = pytest.importorskip("airlink.sim", reason="the simulator (airlink.sim) is not available")
from airlink.inference import scheduler as S  # noqa: E402


@pytest.fixture(scope="module")
def model():
    # trained once (about a minute on 2 cores) and cached under $AIRLINK_CACHE or ~/.cache/airlink
    return S.load_scheduler_model()


def test_model_reports_heldout_accuracy(model):
    assert set(model["models"]) == {"cell", "user"}
    assert model["heldout_by_kind"]["cell"]["native+backlog"] >= 0.9
    assert model["heldout_accuracy"]["cell"] >= 0.85


def test_at_least_90_percent_on_unseen_runs(model):
    # one run per (scheduler, preset, load, cell size) of the training grid, with seeds never used
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
    """Real per-UE PRB allocations (Purdue iCellSpeed): the single-user view gives an answer
    with probabilities; what it says is reported in docs/inference.md."""
    files = icellspeed_files(shared_data)
    if not files:
        pytest.skip("no iCellSpeed D1_static files in ../shared/data/icellspeed")
    frame = pd.read_csv(files[0], na_values=["None"])
    frame["time"] = frame["seconds_since_epoch"]
    res = S.identify_scheduler(frame, model=model, alloc="pcell_sum_nRB", channel="pcell_snr")
    assert res["view"] == "user" and res["users"] == 1
    assert res["scheduler"] in S.CLASSES
    assert res["samples"] == len(frame)


def test_confidence_flag(model):
    mac = sim.simulate("quick", seed=3, duration="4s", scheduler="rr", n_users=4, snr_db=[18, 10, 4, -2]).mac
    res = S.identify_scheduler(mac, model=model)
    assert res["confident"] == (res["probability"] >= S.CONFIDENT_PROBABILITY)
    assert res["scheduler"] == "rr"
