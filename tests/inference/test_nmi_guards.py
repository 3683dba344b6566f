"""NMI answers only what its pairs support: too few pairs per bin is "cannot tell" (never a
significant result), small --by groups leave the pooled test with a note, and a factor's
result does not depend on the other factors or their order."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlink import inference as inf
from airlink.inference.surrogates import MIN_PAIRS_PER_CELL


def frame_of(columns: dict, period_s: float = 1.0) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    return pd.DataFrame({"time": pd.to_datetime(1_700_000_000 + period_s * np.arange(n), unit="s", utc=True),
                         **columns})


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 40), seed=st.integers(0, 2**32 - 1), lag=st.integers(0, 2))
def test_independent_series_with_few_pairs_are_never_significant(n, seed, lag):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=n), rng.normal(size=n)
    sig = inf.peak_significance(x, y, max_lag=lag, bins=16, surrogates=19, bootstrap=0, seed=seed)
    # the rule, counted here: pairs at the peak lag against occupied cells of their histogram
    cx, cy = inf.discretize(x, bins=16).codes, inf.discretize(y, bins=16).codes
    a, b = cx[max(sig.lag, 0):n + min(sig.lag, 0)], cy[max(-sig.lag, 0):n - max(sig.lag, 0)]
    cells = len(set(zip(a.tolist(), b.tolist())))
    assert sig.n_pairs == a.size < MIN_PAIRS_PER_CELL * cells
    assert sig.cannot_tell and sig.cannot_tell.startswith(f"{a.size} pairs in {cells} occupied cells")
    assert np.isnan(sig.p_value) and np.isnan(sig.threshold)
    assert not sig.significant


def test_nine_pairs_in_sixteen_bins_cannot_tell():
    # the report's case: 9 sample pairs, 16 bins, plug-in NMI near 1 for unrelated series
    rng = np.random.default_rng(0)
    table = inf.rank_factors(frame_of({"rate": rng.normal(size=9), "backlog_bytes": rng.normal(size=9)}),
                             target="rate", factors=["backlog_bytes"], max_lag="0s", surrogates=50)
    row = table.iloc[0]
    assert row["peak_nmi"] > 0.8                              # a high raw peak from 9 pairs alone
    assert row["n_pairs"] == 9 and row["cannot_tell"].startswith("9 pairs in")
    assert not row["significant"] and np.isnan(row["p_value"])
    assert np.isfinite(row["bias_corrected"])                 # kept beside the raw value


def test_the_command_says_how_to_get_more_pairs(tmp_path, run_airlink):
    """Nine pairs in 16 bins: the table says "cannot tell" and the command names the ways
    to more pairs per cell; a constant target is "cannot tell" for another reason, without
    that line."""
    rng = np.random.default_rng(0)
    f = tmp_path / "short.csv"
    pd.DataFrame({"time": np.arange(9), "rate": rng.normal(size=9), "backlog_bytes": rng.normal(size=9),
                  "flat": np.zeros(9)}).to_csv(f, index=False)
    status, out, err = run_airlink("infer", "nmi", f, "--target", "rate", "--factor", "backlog_bytes",
                                   "--max-lag", "0s", "--resolution", "1s")
    assert status == 0, err
    assert "cannot tell: 9 pairs in" in out
    assert "fewer --bins (--bins 8 has at most 64 cells, 16 has 256)" in out
    status, out, err = run_airlink("infer", "nmi", f, "--target", "flat", "--factor", "rate",
                                   "--max-lag", "0s", "--resolution", "1s")
    assert status == 0, err
    assert "cannot tell: flat takes one value" in out and "fewer --bins" not in out


@settings(max_examples=12, deadline=None)
@given(order=st.permutations(["sinr_db", "backlog_bytes", "noise"]), seed=st.integers(0, 1000))
def test_factor_order_never_changes_a_result(order, seed):
    rng = np.random.default_rng(11)
    n = 400
    backlog = np.convolve(rng.normal(size=n), np.ones(5), mode="same")
    frame = frame_of({"rate": np.roll(backlog, 2) + rng.normal(size=n), "backlog_bytes": backlog,
                      "sinr_db": rng.normal(size=n), "noise": rng.normal(size=n)})
    kw = dict(target="rate", max_lag="5s", bins=8, surrogates=30, bootstrap=20, seed=seed)
    ref = inf.rank_factors(frame, factors=["backlog_bytes", "sinr_db", "noise"], **kw).set_index("factor")
    got = inf.rank_factors(frame, factors=list(order), **kw).set_index("factor")
    pd.testing.assert_frame_equal(got.loc[ref.index], ref)
    alone = inf.rank_factors(frame, factors=["noise"], **kw).set_index("factor")
    pd.testing.assert_frame_equal(alone, ref.loc[["noise"]])


def test_small_by_groups_leave_the_pooled_test_with_a_note(run_airlink, tmp_path):
    # a drive split by state: groups of 1 and 38 rows next to two long ones
    rng = np.random.default_rng(5)
    parts = []
    for state, n in (("D", 600), ("I", 1), ("F", 38), ("S", 600)):
        f = frame_of({"dl": rng.normal(size=n), "snr": rng.normal(size=n)})
        parts.append(f.assign(State=state))
    path = tmp_path / "drive.csv"
    frame = pd.concat(parts, ignore_index=True)
    frame.to_csv(path, index=False)
    table = inf.rank_factors(frame, target="dl", factors=["snr"], max_lag="5s", by=["State"], surrogates=20)
    need = max(20, int(np.ceil(0.1 * 600)))                          # 60: a tenth of the largest group
    assert table.attrs["dropped_groups"] == [dict(group="F", samples=38, needed=need),
                                             dict(group="I", samples=1, needed=need)]
    assert 1150 < table.iloc[0]["n_pairs"] <= 600 + 600                # groups F and I not among them
    status, out, err = run_airlink("infer", "nmi", path, "--target", "dl", "--factor", "snr", "--by", "State",
                                   "--max-lag", "5s", "--surrogates", "20", "--resolution", "1s")
    assert status == 0, err
    assert "left out of the pooled estimate and its surrogate test: group I (1 values; a group needs 60)" in out


def test_ucc_drive_by_state_leaves_the_idle_seconds_out_and_order_changes_nothing(run_airlink, shared_data):
    import json
    import math
    drive = shared_data / "ucc-5g" / "Download" / "Driving" / "B_2019.12.16_12.27.05.csv"
    if not drive.exists():
        pytest.skip(f"{drive} is not in the shared data")
    raw = pd.read_csv(drive)
    seconds = raw.groupby("State")["Timestamp"].nunique()          # one grid step per logged second
    need = max(20, math.ceil(0.1 * seconds.max()))
    assert seconds["I"] < need <= seconds["D"]
    common = ["infer", "nmi", drive, "--time-column", "Timestamp", "--resolution", "1s", "--target", "DL_bitrate",
              "--by", "State", "--max-lag", "10s", "--surrogates", "19"]
    status, out, err = run_airlink(*common, "--factor", "SNR", "--factor", "RSRP")
    assert status == 0, err
    assert (f"left out of the pooled estimate and its surrogate test: group I ({seconds['I']} values; "
            f"a group needs {need})") in out
    rows = {}
    for order in (["SNR", "RSRP"], ["RSRP", "SNR"]):
        status, out, err = run_airlink(*common, *[a for f in order for a in ("--factor", f)], "--json")
        assert status == 0, err
        rows[tuple(order)] = {r["factor"]: r for r in json.loads(out)}
    a, b = rows.values()
    for f in ("SNR", "RSRP"):
        assert a[f] == b[f]                                       # p-value, threshold, interval: all the same
        assert a[f]["n_pairs"] <= seconds["D"]                    # the idle group's seconds are not among them


UCC_STATIC = "ucc-5g/Download/Static/B_2020.01.16_10.43.34.csv"


@pytest.fixture(scope="module")
def ucc_static(shared_data, tmp_path_factory):
    """The UCC static download as airlink collects it, and its raw CSV read by pandas."""
    from airlink.cli import main
    out = tmp_path_factory.mktemp("ucc")
    assert main(["collect", str(shared_data / UCC_STATIC), "-o", str(out)]) == 0
    (rf,) = out.glob("*.rf.parquet")
    return rf, pd.read_csv(shared_data / UCC_STATIC, na_values=["-"])


def test_a_constant_target_is_cannot_tell_not_a_perfect_match(ucc_static, run_airlink):
    # a static phone's speed is 0 in every row: the target has no entropy. The joint histogram
    # of one cell left log n - n log n / n = +-1e-16 as H(X), and I / H(X) came out 1.000
    # for SNR and CQI at lag -3 s
    import json
    rf, raw = ucc_static
    assert (raw["Speed"] == 0).all()
    status, out, err = run_airlink("infer", "nmi", rf, "--target", "speed_kmh", "--factor", "snr_db",
                                   "--factor", "cqi", "--surrogates", "9", "--json")
    assert status == 0, err
    rows = json.loads(out)
    assert {r["factor"] for r in rows} == {"snr_db", "cqi"}
    for r in rows:
        assert r["peak_nmi"] == 0.0 and r["significant"] is False and r["p_value"] is None
        assert "speed_kmh takes one value (0) in every sample" in r["cannot_tell"]
    t = inf.rank_factors(inf.read_frames([rf]), target="speed_kmh", factors=["snr_db"], surrogates=0,
                         bootstrap=0, curves=True)
    assert max(t.attrs["curves"]["snr_db"]["nmi"]) == 0.0       # at every lag, not only at the peak


def test_backlog_verdict_needs_a_peak_above_chance(ucc_static):
    # the same static run asked whether a rate that never changed (the speed) follows one
    # factor or the other: neither peak is above 0, so no verdict (it said "the channel")
    rf, raw = ucc_static
    rep = inf.backlog_dependence(inf.read_frames([rf]), rate="speed_kmh", backlog="cqi", channel="snr_db",
                                 surrogates=9, max_lag="5s")
    assert rep["nmi_backlog"]["peak_nmi"] == 0.0 and rep["nmi_channel"]["peak_nmi"] == 0.0
    assert rep["backlog_dominates"] is None and "neither cqi nor snr_db" in rep["cannot_tell"]


def test_a_sparse_series_whose_surrogates_pair_too_few_values_cannot_tell():
    # by hand: the factor is the target (8 levels), both given at 120 of 4000 steps. Aligned
    # they pair 120 times in at most 8 cells (>= 5 a cell); shifted in time, the 120 steps
    # meet ~120 x 120 / 4000 = 3.6 of each other's, so the surrogate peaks are chance maxima
    rng = np.random.default_rng(3)
    levels = rng.integers(0, 8, size=4000).astype(float)
    sparse = np.full(4000, np.nan)
    at = rng.choice(4000, size=120, replace=False)
    sparse[at] = levels[at]
    sig = inf.peak_significance(sparse, sparse.copy(), max_lag=5, bins=8, surrogates=39, bootstrap=0, seed=1)
    assert sig.n_pairs == 120 and sig.peak_nmi == pytest.approx(1.0)
    assert sig.cannot_tell and sig.cannot_tell.startswith("the surrogate threshold is 1.000")
    assert "too few steps have a value (target 120, factor 120 of 4000)" in sig.cannot_tell
    assert not sig.significant and np.isnan(sig.p_value) and np.isnan(sig.threshold)
    # the same relation at every step: the null is decided and the peak is significant
    dense = inf.peak_significance(levels, levels.copy(), max_lag=5, bins=8, surrogates=39, bootstrap=0, seed=1)
    assert dense.cannot_tell is None and dense.significant and dense.threshold < 0.1


def test_one_rnti_of_an_nrscope_log_is_too_sparse_for_a_surrogate_test(shared_data, run_airlink):
    # RNTI 25864 of the afternoon log has downlink PRBs in 1935 slots of the 53 759 its grid
    # spans: its surrogates pair a few dozen values and their threshold reaches 1.0
    import json

    from tests.traces._nrscope_expect import raw_with_slots
    path = shared_data / "nr-scope" / "t_mobile1_ueactivity_afternoon_1.csv"
    raw = raw_with_slots(path)
    mine = raw[(raw["rnti"] == 25864) & (raw["dci_format"] == "1_1") & (raw["frequency_length"] > 0)]
    slots = mine["abs_slot"].nunique()
    args = ("infer", "nmi", path, "--user", "25864", "--target", "tbs_bytes", "--factor", "mcs",
            "--max-lag", "100ms", "--bootstrap", "10")     # the default 100 surrogates
    status, out, err = run_airlink(*args, "--json")
    assert status == 0, err
    row = json.loads(out)[0]
    assert row["n_pairs"] == slots and not row["significant"] and row["threshold"] is None
    assert row["cannot_tell"].startswith("the surrogate threshold is 1.000")
    assert f"too few steps have a value (target {slots}, factor {slots} of" in row["cannot_tell"]
    status, out, err = run_airlink(*args)
    assert status == 0, err
    assert "cannot tell: the surrogate threshold is 1.000" in out
