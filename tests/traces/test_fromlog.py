"""Measured logs -> capacity traces (``traces.from_log``, ``airlink trace from-log``) and the one
split rule for long TTIs. Expected values are computed from the raw files with plain
pandas/csv, never through airlink's readers."""
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink import traces as T
from airlink.traces import AirlinkError, Trace, from_log, split_long_ttis
from tests.traces._nrscope_expect import downlink_and_raw, raw_with_slots

DATA = Path(__file__).parent / "data"
XCAL = DATA / "xcal_style_mac_20ms_SYNTHETIC.csv"
NR_AFTERNOON = "nr-scope/t_mobile1_ueactivity_afternoon_1.csv"
ICELL = "icellspeed/D1_static/Austin/ATT/loc_31/control/data_310410_loc-lakeway-003c.csv"


def _frame(times_s, **cols):
    t = pd.to_datetime(np.round(np.asarray(times_s, float) * 1e9).astype(np.int64), unit="ns", utc=True)
    return pd.DataFrame({"time": t, **cols})


# -- rules on hand-made frames -------------------------------------------------------------
def test_rates_are_integrated_over_any_tti():
    f = _frame([0, 1, 2, 3], rate_bps=[8e6, 16e6, 0.0, 8e6])
    one_s = from_log(f, column="rate_bps")
    assert one_s.tti == 1 and one_s.values[:, 0].tolist() == [1e6, 2e6, 0.0, 1e6]
    ms = from_log(f, column="rate_bps", tti="1ms")
    assert ms.n_tti == 4000 and np.allclose(ms.values[:1000, 0], 1000) and np.allclose(ms.values[1000:2000, 0], 2000)
    two = from_log(f, column="rate_bps", tti="2s")
    assert two.values[:, 0].tolist() == [3e6, 1e6]
    assert ms.values.sum() == pytest.approx(4e6) and ms.meta["unit"] == "bit/s"


def test_gap_rules_fill_and_count():
    """Rows at 0, 1, 5, 6 s (spacing 1 s): the step 1 -> 5 s is a gap of 3 s after row 1's own
    second. Hand-worked: hold keeps 8 Mbit/s = 1 MB/s; interpolate goes linearly from 8 to
    16 Mbit/s over [2, 5) s, so TTI 2 holds (8 + 8 * 0.5/3) Mbit/s * 1 s / 8, and so on;
    zero leaves 3 TTIs empty."""
    f = _frame([0, 1, 5, 6], thr=[8.0, 8.0, 16.0, 16.0])
    zero = from_log(f, column="thr", unit="Mbit/s", gaps="zero")
    assert zero.values[:, 0].tolist() == [1e6, 1e6, 0, 0, 0, 2e6, 2e6]
    assert zero.meta["gap_s"] == pytest.approx(3.0) and zero.meta["gaps"]["filled_ttis"] == {"zero": 3}
    hold = from_log(f, column="thr", unit="Mbit/s")                 # the default: hold
    assert hold.values[:, 0].tolist() == [1e6] * 5 + [2e6, 2e6] and hold.meta["gap_s"] == 0
    assert hold.meta["gaps"] == {"rule": "hold", "fill_limit_s": 10.0, "gaps": 1, "filled_s": {"hold": 3.0},
                                 "filled_ttis": {"hold": 3}}
    assert hold.meta["filled_ns"] == [[2 * 10**9, 5 * 10**9]] == zero.meta["filled_ns"]
    assert T.measured_ttis(hold).tolist() == [True, True, False, False, False, True, True]
    assert T.measured_ttis(from_log(f, column="thr", unit="Mbit/s", tti="500ms")).sum() == 8
    lin = from_log(f, column="thr", unit="Mbit/s", gaps="interpolate")
    mbps = [8 + 8 * x / 3 for x in (0.5, 1.5, 2.5)]                 # rate at the middle of TTIs 2, 3, 4
    assert np.allclose(lin.values[2:5, 0], [m * 1e6 / 8 for m in mbps])
    short = from_log(f, column="thr", unit="Mbit/s", fill_limit="3s")   # the step is 4 s: beyond the limit
    assert short.values[:, 0].tolist() == zero.values[:, 0].tolist()
    assert short.meta["gaps"]["filled_ttis"] == {"zero": 3}
    with pytest.raises(AirlinkError, match=r"1 gap\(s\) in the log \(the first: 4 s without rows"):
        from_log(f, column="thr", unit="Mbit/s", gaps="error")
    jitter = from_log(_frame([0, 1, 2.4, 3.4], thr=[8.0] * 4), column="thr", unit="Mbit/s", gaps="error")
    assert jitter.values.sum() == pytest.approx(4.4e6)     # the 1.4 s step is jitter: held; last row 1 s


def test_span_start_and_duration():
    f = _frame([0, 1, 2, 3], rate_bps=[8e6, 16e6, 0.0, 8e6])
    tr = from_log(f, column="rate_bps", start="0.5s", duration="2s", tti="500ms")
    # [0.5, 1) at 1 MB/s, [1, 2) at 2 MB/s, [2, 2.5) at 0
    assert tr.values[:, 0].tolist() == [0.5e6, 1e6, 1e6, 0.0]
    assert tr.meta["start_ns"] == 500_000_000
    t0 = f["time"].iloc[0] + pd.Timedelta("3s")
    last = from_log(f, column="rate_bps", start=t0.isoformat())
    assert last.values[:, 0].tolist() == [1e6]
    amounts = _frame([0.0, 0.5, 1.2, 2.0], tb_bytes=[1, 2, 4, 8])
    assert from_log(amounts, column="tb_bytes", start="0.5s", duration="1s", tti="500ms").values[:, 0].tolist() \
        == [2.0, 4.0]
    with pytest.raises(AirlinkError, match="neither a duration"):
        from_log(f, column="rate_bps", start="soon")


def test_sessions_split_at_long_silences():
    f = _frame([0, 1, 2, 100, 101, 500], rate_bps=[8e6] * 6)
    parts = T.split_sessions(f, "60s")
    assert [len(p) for p in parts] == [3, 2, 1] and parts[2].attrs["sessions"] == 3
    trs = T.from_log_sessions(f, column="rate_bps", gap="60s")
    assert [t.n_tti for t in trs] == [3, 2, 1] and all((t.values == 1e6).all() for t in trs)
    assert [t.meta["session"]["number"] for t in trs] == [1, 2, 3] and trs[2].tti == 1   # the whole log's TTI
    assert T.from_log_sessions(f, column="rate_bps", start="50s")[0].n_tti == 2


def test_amounts_go_to_their_tti_and_sum():
    f = _frame([0.0, 0.0004, 0.0031, 0.0031], tb_bits=[800, 80, 8, 16])
    tr = from_log(f, column="tb_bits", tti="1ms")
    assert tr.values[:, 0].tolist() == [110.0, 0.0, 0.0, 3.0]


def test_carriers_summed_but_repeated_device_values_taken_once():
    f = _frame([0, 0, 1, 1], carrier=["pcell", "scell_1"] * 2, tbs_bps=[8e6, 8e6, 16e6, 0.0],
               throughput_bps=[4e6, 4e6, 12e6, 12e6])
    assert from_log(f, column="tbs_bps").values[:, 0].tolist() == [2e6, 2e6]
    thr = from_log(f, column="throughput_bps")
    assert thr.values[:, 0].tolist() == [0.5e6, 1.5e6] and "once" in thr.meta["carriers"]


def test_units_checked():
    f = _frame([0, 1], tbs_bps=[1.0, 2.0], raw=[1, 2], text=["1", "x"])
    with pytest.raises(AirlinkError, match="'tbs_bps' is in bit/s by its name, not Mbit/s"):
        from_log(f, column="tbs_bps", unit="Mbit/s")
    assert from_log(f, column="tbs_bps", unit="bps").values.sum() == pytest.approx(3 / 8)
    with pytest.raises(AirlinkError, match="'raw': its name carries no unit"):
        from_log(f, column="raw")
    with pytest.raises(AirlinkError, match="unknown unit 'MBps'"):
        from_log(f, column="raw", unit="MBps")
    with pytest.raises(AirlinkError, match=r"column 'text': row 1: 'x' is not a number"):
        from_log(f, column="text", unit="bits")
    with pytest.raises(AirlinkError, match="no column 'nope'"):
        from_log(f, column="nope", unit="bits")


def test_users():
    f = _frame([0, 0.0005, 0.002], user=["a", "b", "a"], tbs_bytes=[10.0, 20.0, 30.0])
    with pytest.raises(AirlinkError, match="2 users in the log"):
        from_log(f, column="tbs_bytes", tti="1ms")
    assert from_log(f, column="tbs_bytes", tti="1ms", user="cell").values[:, 0].tolist() == [30, 0, 30]
    a = from_log(f, column="tbs_bytes", tti="1ms", user="busiest")
    assert a.users == ["a"] and a.values[:, 0].tolist() == [10, 0, 30]
    with pytest.raises(AirlinkError, match="no user 'c'"):
        from_log(f, column="tbs_bytes", tti="1ms", user="c")


# -- the split rule --------------------------------------------------------------------------
def test_split_long_ttis_keeps_every_tti_total():
    tr = Trace([100.0, 0.0, 30.0], "20ms")
    s = split_long_ttis(tr)
    assert s.tti == Fraction(1, 100) and s.values[:, 0].tolist() == [50, 50, 0, 0, 15, 15]
    assert s.duration == tr.duration and s.meta["resampled_from_tti_s"] == "1/50"
    s3 = split_long_ttis(Trace([90.0], "25ms"))
    assert s3.tti == Fraction(25, 3000) and np.allclose(s3.values[:, 0], 30)
    same = Trace([1.0], "10ms")
    assert split_long_ttis(same) is same
    assert split_long_ttis(Trace([8.0], "2ms"), max_tti="1ms").values[:, 0].tolist() == [4, 4]


def test_link_shell_accepts_a_20ms_trace(tmp_path):
    """The trace `airlink run --trace` hands to the link shell: a 20 ms Parquet trace is
    split by the one rule instead of refused."""
    from airlink.replay import LinkShell
    p = tmp_path / "gprs.parquet"
    Trace([2500.0, 500.0], "20ms").write_parquet(p)
    tr = LinkShell(p).down_trace            # the trace is read and checked before any namespace
    assert tr.tti_ms == 10 and tr.values[:, 0].tolist() == [1250, 1250, 250, 250]


# -- real logs ---------------------------------------------------------------------------------
def test_nrscope_user_trace_counts_new_transmissions_only(shared_data):
    dl, raw = downlink_and_raw(shared_data / NR_AFTERNOON)
    user = int(raw["rnti"].value_counts().index[0])
    mine = raw[raw["rnti"] == user]
    tr = from_log(dl, column="tbs_bytes", user=str(user))
    assert tr.tti == Fraction(1, 1000) and tr.meta["tti_from"] == "the log's slot timing"
    assert tr.values.sum() == mine["transport_block_size"].sum() / 8
    new = mine[mine["transport_block_size"] > 0]
    assert int((tr.values[:, 0] > 0).sum()) == len(new.drop_duplicates(["system_frame_index", "slot_index",
                                                                        "timestamp"]))
    ratio = (mine["transport_block_size"] == 0).mean()
    assert tr.meta["harq_retransmission_ratio"] == pytest.approx(ratio)
    assert tr.meta["source"].endswith("afternoon_1.csv") and tr.meta["column"] == "tbs_bytes"
    cell = from_log(dl, column="tbs_bytes", user="cell")
    assert cell.values.sum() == raw["transport_block_size"].sum() / 8


def test_start_counts_from_the_logs_first_row_not_the_users(shared_data, run_airlink, tmp_path):
    # RNTI 25864's first grant comes 64 s into the log: "--start 68.5s" is 68.5 s after the
    # log's first DCI (slot 0, as airlink cell --log-start counts), not 68.5 s after the user's
    # first grant (which had no rows then: the span was 132.7 s into the log)
    r = raw_with_slots(shared_data / NR_AFTERNOON)
    mine = r[(r["rnti"] == 25864) & (r["dci_format"] == "1_1") & (r["frequency_length"] > 0)]
    assert mine["abs_slot"].min() > 64_000
    inside = mine[(mine["abs_slot"] >= 68_500) & (mine["abs_slot"] < 71_500)]
    out = tmp_path / "w.parquet"
    status, text, err = run_airlink("trace", "from-log", shared_data / NR_AFTERNOON, "--user", "25864",
                                    "--start", "68.5s", "--duration", "3s", "-o", out)
    assert status == 0, err
    tr = Trace.read_parquet(out)
    assert tr.n_tti == 3000
    assert tr.values.sum() == inside["transport_block_size"].sum() / 8 == 1942160
    # the slot of each grant is kept: the busiest TTI is the one holding the biggest block
    k = inside["abs_slot"].to_numpy() - 68_500
    per_tti = np.bincount(k, weights=inside["transport_block_size"].to_numpy() / 8, minlength=3000)
    assert np.array_equal(tr.values[:, 0], per_tti)
    # the same start for the whole cell: its window holds the same slots
    sessions = T.from_log_sessions(C.read(shared_data / NR_AFTERNOON), column="tbs_bytes", user="25864",
                                   start="68.5s", duration="3s")
    assert sum(s.values.sum() for s in sessions) == 1942160


def _icell_raw(path):
    raw = pd.read_csv(path, na_values=["None"])
    tbs = raw[[c for c in raw.columns if c.endswith("_tbs")]].sum(axis=1, min_count=1)
    return raw["seconds_since_epoch"].to_numpy(float), tbs.to_numpy(float), raw["throughput"].to_numpy(float)


def _raw_pairs(t, x, y, lag: int):
    """The seconds the raw log has both values, x at second s paired with y at s + lag."""
    xs = pd.Series(x, index=t.astype(np.int64)).dropna()
    ys = pd.Series(y, index=t.astype(np.int64)).dropna()
    ys = ys.reindex(xs.index + lag)
    keep = ys.notna().to_numpy()
    return xs.to_numpy()[keep], ys.to_numpy()[keep]


def test_icellspeed_tbs_summed_over_carriers(shared_data):
    path = shared_data / ICELL
    t, tbs, thr = _icell_raw(path)
    frame = C.read(path)
    a = from_log(frame, column="tbs_bps")
    b = from_log(frame, column="throughput_bps")
    assert a.tti == 1 and a.meta["carriers"] == "summed over carriers"
    k = (t - t[0]).astype(int)
    ok = ~np.isnan(tbs)
    assert np.allclose(a.values[k[ok], 0], tbs[ok] * 1e6 / 8)
    assert np.allclose(b.values[k, 0], thr * 1e6 / 8)
    # the log's own columns: application throughput trails the TBS columns by one second
    c = T.compare(a, b, max_lag="3s")
    x, y = _raw_pairs(t, tbs, thr, 0)
    assert c.corr_0 == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert c.mean_ratio == pytest.approx(x.sum() / y.sum())
    assert c.corr_by_lag[1.0] == pytest.approx(np.corrcoef(*_raw_pairs(t, tbs, thr, 1))[0, 1])
    assert c.best_lag_s == 1.0 and c.corr_best > c.corr_0 + 0.1
    assert 1.02 < c.mean_ratio < 1.12                    # MAC/RLC/PDCP headers and HARQ


def test_compare_leaves_out_seconds_filled_over_gaps(shared_data, run_airlink, tmp_path):
    """loc-star-001d has 96 rows over 112 s (9 gaps): the held seconds are no measurement, so
    ratio and correlations come from the seconds the log has, at every lag (a reference on
    the raw CSV: all ``*_tbs`` columns summed - also an scell whose cell id the logger missed
    - against ``throughput``, paired by ``seconds_since_epoch``)."""
    path = shared_data / "icellspeed/D1_static/Austin/ATT/loc_32/default/data_310410_loc-star-001d.csv"
    t, tbs, thr = _icell_raw(path)
    span = int(t.max() - t.min()) + 1
    status, text, err = run_airlink("trace", "from-log", path, "-o", tmp_path / "g.parquet", "--json")
    assert status == 0, err
    c = json.loads(text)["comparison"]
    x, y = _raw_pairs(t, tbs, thr, 0)
    assert c["measured_ttis"] == x.size and c["filled_left_out"] == span - x.size > 0
    assert c["mean_ratio"] == pytest.approx(x.sum() / y.sum())          # 0.997
    assert c["corr_0"] == pytest.approx(np.corrcoef(x, y)[0, 1])        # 0.68
    assert c["best_lag_s"] == 1.0
    assert c["corr_best"] == pytest.approx(np.corrcoef(*_raw_pairs(t, tbs, thr, 1))[0, 1])   # 0.85
    status, text, err = run_airlink("trace", "from-log", path, "-o", tmp_path / "g.parquet")
    assert f"over the {x.size} s both columns measured; {span - x.size} s filled over gaps left out" in text
    # two measured seconds are no comparison: said so, the trace still written
    lines = path.read_text().splitlines()
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("\n".join([lines[0], lines[1], lines[2], lines[9]]) + "\n")   # t0, t0 + 1 s, t0 + 8 s: 4 s TTIs
    status, text, err = run_airlink("trace", "from-log", tiny, "-o", tmp_path / "t.parquet")
    assert status == 0, err
    assert "cannot tell: the traces share fewer than 3 measured TTIs" in text and (tmp_path / "t.parquet").exists()


def test_xcal_style_20ms_log(run_airlink, tmp_path):
    raw = pd.read_csv(XCAL)
    out = tmp_path / "endc.parquet"
    status, text, err = run_airlink("trace", "from-log", XCAL, "--time-column", "td", "--column", "5G_TBS",
                                    "--column", "4G_TBS", "--unit", "bits", "-o", out, "--json")
    assert status == 0, err
    s = json.loads(text)
    assert s["tti_ms"] == 20 and s["tti_from"] == "median row spacing" and s["n_tti"] == len(raw)
    tr = T.read_trace(out)
    expect = (raw["5G_TBS"].fillna(0) + raw["4G_TBS"]) / 8
    assert tr.values[:, 0].tolist() == expect.tolist()
    assert tr.meta["column"] == "5G_TBS+4G_TBS" and tr.meta["unit"] == "bits"
    assert split_long_ttis(tr).tti_ms == 10


# -- command line ----------------------------------------------------------------------------
def test_cli_nrscope_busiest_user(shared_data, run_airlink, tmp_path):
    out = tmp_path / "ue.parquet"
    status, text, err = run_airlink("trace", "from-log", shared_data / NR_AFTERNOON, "--user", "busiest",
                                    "-o", out)
    assert status == 0, err
    assert "HARQ" in text and "retransmissions" in text
    tr = T.read_trace(out)
    assert tr.tti_ms == 1 and tr.meta["direction"] == "downlink" and tr.meta["rule"]
    mm = tmp_path / "ue.down"
    assert run_airlink("trace", "from-log", shared_data / NR_AFTERNOON, "--user", "busiest", "-o", mm)[0] == 0
    assert mm.read_text().splitlines()[0].isdigit()


def test_cli_icellspeed_reports_offset(shared_data, run_airlink, tmp_path):
    status, text, err = run_airlink("trace", "from-log", shared_data / ICELL, "-o", tmp_path / "g.parquet",
                                    "--json")
    assert status == 0, err
    c = json.loads(text)["comparison"]
    assert c["b"] == "throughput_bps" and c["best_lag_s"] == 1.0


@pytest.mark.parametrize("args, message", [
    (["--user", "busiest", "--unit", "Mbit/s"], "afternoon_1.csv: column 'tbs_bytes' is in bytes by its name"),
    ([], "afternoon_1.csv: 137 users in the log; choose one (user=), or 'cell'"),
    (["--user", "7"], "afternoon_1.csv: no user '7'"),
    (["--column", "nope", "--user", "busiest"], "afternoon_1.csv: no column 'nope'"),
])
def test_cli_bad_input_one_line(shared_data, run_airlink, tmp_path, args, message):
    status, out, err = run_airlink("trace", "from-log", shared_data / NR_AFTERNOON, "-o", tmp_path / "x.parquet",
                                   *args)
    assert status == 2 and err.startswith("airlink: error: ") and message in err
    assert err.count("\n") == 1 and not (tmp_path / "x.parquet").exists()


def test_cli_plain_csv_errors(run_airlink, tmp_path):
    status, _, err = run_airlink("trace", "from-log", XCAL, "--time-column", "when", "--column", "5G_TBS",
                                 "--unit", "bits", "-o", tmp_path / "x.parquet")
    assert status == 2 and "no column 'when'" in err and "td" in err
    status, _, err = run_airlink("trace", "from-log", XCAL, "--time-column", "td", "--column", "5G_TBS",
                                 "-o", tmp_path / "x.parquet")
    assert status == 2 and "'5G_TBS': its name carries no unit" in err


def test_xcal_style_through_a_column_mapping():
    """The generic CSV reader's mapping names the units; from_log then reads them off the
    column names (nr_tbs_bytes, lte_tbs_bytes)."""
    mapping = {"kind": "mac", "time": {"column": "td", "format": "ISO8601"},
               "columns": {"5G_TBS": {"name": "nr_tbs_bytes", "unit": "bit"},
                           "4G_TBS": {"name": "lte_tbs_bytes", "unit": "bit"}},
               "constants": {"user": "ue"}}
    frame = C.read(XCAL, format="csv", mapping=mapping)
    tr = from_log(frame, column=["nr_tbs_bytes", "lte_tbs_bytes"])
    raw = pd.read_csv(XCAL)
    assert tr.tti_ms == 20 and tr.meta["unit"] == "bytes"
    assert np.allclose(tr.values[:, 0], (raw["5G_TBS"].fillna(0) + raw["4G_TBS"]) / 8)


# -- gaps and sessions of real logs ------------------------------------------------------------
UCC_DRIVE = "ucc-5g/Download/Driving/B_2019.12.16_11.49.59.csv"
LA_DRIVE = "icellspeed/D1_driving/LosAngeles/data_310410.csv"


def _held_bytes(t_s: np.ndarray, bps: np.ndarray, fill_limit_s=10.0, spacing_s=1.0) -> np.ndarray:
    """Bytes of each row when its rate holds to the next row (up to the fill limit; one
    spacing beyond it and for the last row): plain numpy on the raw values."""
    step = np.append(np.diff(t_s), spacing_s)
    held = np.where(step <= fill_limit_s, step, spacing_s)
    return bps * held / 8


def test_cli_ucc_drive_holds_gnettrack_steps(shared_data, run_airlink, tmp_path):
    """G-NetTrack logs in 1-3 s steps: held, the mean is the time-weighted mean of the raw
    CSV (rows of one second averaged), not 20 % zero-capacity seconds."""
    raw = pd.read_csv(shared_data / UCC_DRIVE, na_values=["-"]).dropna(subset=["DL_bitrate"])
    sec = pd.to_datetime(raw["Timestamp"], format="%Y.%m.%d_%H.%M.%S").astype("int64") // 10**9
    per_s = raw.groupby(sec)["DL_bitrate"].mean() * 1000                # kbit/s -> bit/s
    t = per_s.index.to_numpy(float)
    expect = _held_bytes(t, per_s.to_numpy())
    span = t[-1] + 1 - t[0]
    assert np.diff(t).max() > 1                                        # the log has 2-3 s steps
    out = tmp_path / "ucc.parquet"
    status, text, err = run_airlink("trace", "from-log", shared_data / UCC_DRIVE, "--column", "dl_bitrate_bps",
                                    "-o", out, "--json")
    assert status == 0, err
    s = json.loads(text)
    tr = T.read_trace(out)
    assert tr.values.sum() == pytest.approx(expect.sum(), rel=1e-9)
    assert s["mean_mbps"] == pytest.approx(expect.sum() * 8 / span / 1e6, rel=1e-9)
    assert s["gaps"]["rule"] == "hold" and s["gaps"]["gaps"] == int((np.diff(t) > 1.5).sum())
    assert s["gaps"]["filled_ttis"] == {"hold": int((np.diff(t) - 1).sum())} == tr.meta["gaps"]["filled_ttis"]
    zero_raw = float(((per_s.to_numpy() == 0) * np.append(np.diff(t), 1)).sum() / span)
    assert (tr.values[:, 0] == 0).mean() == pytest.approx(zero_raw) and zero_raw < 0.05   # only the seconds the log says were 0
    status, text, err = run_airlink("trace", "from-log", shared_data / UCC_DRIVE, "--column", "dl_bitrate_bps",
                                    "--gaps", "zero", "-o", tmp_path / "z.parquet", "--json")
    z = json.loads(text)
    assert z["gaps"]["filled_ttis"] == {"zero": s["gaps"]["filled_ttis"]["hold"]} and z["mean_mbps"] < s["mean_mbps"]


def test_ucc_static_download_repeats_are_one_second_and_steps_are_held(shared_data, run_airlink, tmp_path):
    """The reading of a UCC log docs/traces.md argues from this file: a row after a 2 s step
    carries a per-second rate (about its neighbours', not twice), a repeated stamp mostly
    holds a ping test's extra row; so the total is the held mean-per-second integral
    (33.75 GB), not one second per row (28.42 GB)."""
    path = shared_data / "ucc-5g/Download/Static/B_2020.01.16_10.43.34.csv"
    raw = pd.read_csv(path, na_values=["-"])
    sec = (pd.to_datetime(raw["Timestamp"], format="%Y.%m.%d_%H.%M.%S").astype("int64") // 10**9).to_numpy()
    v = raw["DL_bitrate"].to_numpy(float) * 1000                          # kbit/s -> bit/s
    step = np.diff(sec)
    after2 = np.flatnonzero(step == 2) + 1
    around = {i: np.median(np.r_[v[i - 4:i], v[i + 1:i + 5]]) for i in after2 if 4 < i < v.size - 5}
    rel = [v[i] / m for i, m in around.items() if m > 1e6]                  # the download running around it
    assert 0.9 < np.median(rel) < 1.1                                    # not 2x: the missing second is in no row
    pair = np.zeros(v.size, bool)
    pair[np.flatnonzero(step == 0)] = pair[np.flatnonzero(step == 0) + 1] = True
    ping = raw["PINGAVG"].notna().to_numpy()
    assert (ping & pair).sum() > 0.8 * ping.sum()                        # the ping test's own rows
    per_s = pd.Series(v).groupby(sec).mean()
    expect = _held_bytes(per_s.index.to_numpy(float), per_s.to_numpy()).sum()
    status, text, err = run_airlink("trace", "from-log", path, "--column", "dl_bitrate_bps",
                                    "-o", tmp_path / "u.parquet", "--json")
    assert status == 0, err
    s = json.loads(text)
    assert s["mean_mbps"] * s["duration_s"] / 8 * 1e6 == pytest.approx(expect, rel=1e-9)
    assert expect / 1e9 == pytest.approx(33.75, abs=0.01) and v.sum() / 8 / 1e9 == pytest.approx(28.42, abs=0.01)


def test_cli_without_column_names_the_columns_that_would_work(shared_data, run_airlink, tmp_path):
    status, _, err = run_airlink("trace", "from-log", shared_data / UCC_DRIVE, "-o", tmp_path / "x.parquet")
    assert status == 2 and err.count("\n") == 1
    assert "several columns would work, choose one with --column: dl_bitrate_bps, ul_bitrate_bps" in err


def test_cli_icellspeed_drive_split_into_sessions(shared_data, run_airlink, tmp_path):
    """A driving log of several days: one trace per session (a silence over 60 s ends one),
    each trace's bytes those of its rows held (computed from the raw CSV), no day of zeros."""
    raw = pd.read_csv(shared_data / LA_DRIVE)
    per_s = raw.groupby("seconds_since_epoch")["throughput"].last()      # bit/s; a repeated second: the last
    t = per_s.index.to_numpy(float)
    cuts = np.flatnonzero(np.diff(t) > 60) + 1
    sessions = np.split(np.arange(t.size), cuts)
    assert len(sessions) > 3
    status, text, err = run_airlink("trace", "from-log", shared_data / LA_DRIVE, "--split-sessions",
                                    "-o", tmp_path / "la.parquet", "--json")
    assert status == 0, err
    outs = json.loads(text)["sessions"]
    assert [o["output"] for o in outs] == [str(tmp_path / f"la-s{k}.parquet") for k in range(1, len(sessions) + 1)]
    for o, rows in zip(outs, sessions):
        tr = T.read_trace(o["output"])
        assert o["column"] == "throughput_bps" and tr.tti_ms == 1000
        assert tr.n_tti == t[rows[-1]] + 1 - t[rows[0]]                  # the session's span, no more
        assert tr.values.sum() == pytest.approx(_held_bytes(t[rows], per_s.to_numpy()[rows]).sum(), rel=1e-9)
        assert tr.meta["session"]["number"] == o["session"]
        assert o["start"] == str(pd.Timestamp(int(t[rows[0]]), unit="s", tz="UTC"))
    one = tmp_path / "one.parquet"
    status, text, err = run_airlink("trace", "from-log", shared_data / LA_DRIVE, "-o", one)
    assert status == 0 and "--split-sessions writes one trace per session" in text
    start = pd.Timestamp(int(t[sessions[2][0]]), unit="s", tz="UTC").isoformat()
    status, text, err = run_airlink("trace", "from-log", shared_data / LA_DRIVE, "--start", start,
                                    "--duration", "60s", "-o", one, "--json")
    assert status == 0, err
    rows = sessions[2][t[sessions[2]] < t[sessions[2][0]] + 60]
    expect = _held_bytes(t[rows], per_s.to_numpy()[rows])
    # the last row inside the minute may hold past its end: clip it to the minute
    over = t[rows[-1]] + np.append(np.diff(t[sessions[2]]), 1)[len(rows) - 1] - (t[rows[0]] + 60)
    if over > 0:
        expect[-1] -= per_s.to_numpy()[rows[-1]] * over / 8
    assert json.loads(text)["n_tti"] == 60 and T.read_trace(one).values.sum() == pytest.approx(expect.sum())


@pytest.mark.parametrize("args, message", [
    (["--gaps", "error"], "B_2019.12.16_11.49.59.csv: 48 gap(s) in the log (the first: "),
    (["--gaps", "fill"], "unknown gap rule 'fill' (one of hold, zero, interpolate, error)"),
    (["--start", "soon"], "start 'soon' is neither a duration from the log's start"),
    (["--start", "2030-01-01"], "the span from 2030-01-01 00:00:00+00:00 is empty"),
])
def test_cli_gap_and_span_errors_one_line(shared_data, run_airlink, tmp_path, args, message):
    status, _, err = run_airlink("trace", "from-log", shared_data / UCC_DRIVE, "--column", "dl_bitrate_bps",
                                 "-o", tmp_path / "x.parquet", *args)
    assert status == 2 and err.startswith("airlink: error: ") and message in err, err
    assert err.count("\n") == 1 and not (tmp_path / "x.parquet").exists()
