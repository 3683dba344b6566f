"""Inference respects time: one regular grid made from the timestamps, gaps left missing,
duplicates aggregated by rule, lags in seconds, peaks at the edge of the range flagged."""
import csv
import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest

import airlink.inference as inf
from airlink.collectors.timegrid import parse_times, to_grid
from airlink.core.errors import AirlinkError


def irregular_shifted(seed=1, seconds=3000, shift_s=4, spacings=(1, 2, 3, 5)):
    """A factor that leads the target by ``shift_s`` seconds, logged at irregular times (rows
    1, 2, 3 or 5 s apart, as merged drive-test logs are): target(t) = f(t), factor(t) =
    f(t + shift_s) for a random level sequence f over whole seconds."""
    rng = np.random.default_rng(seed)
    f = rng.integers(0, 8, size=seconds + shift_s + 1)
    t = np.cumsum(rng.choice(spacings, size=seconds))
    t = t[t < seconds]
    return pd.DataFrame({"time": 1_700_000_000 + t, "target": f[t], "factor": f[t + shift_s]})


def test_peak_lag_in_seconds_on_irregular_rows():
    frame = irregular_shifted()
    rows = inf.lag_scan(frame["target"].to_numpy(float), frame["factor"].to_numpy(float), max_lag=8,
                        bins=8, sample_period=1.0)
    # treating rows as consecutive samples loses the relation: the peak is elsewhere and weak
    assert rows.peak < 0.5
    table = inf.rank_factors(frame, target="target", factors=["factor"], max_lag="8s", bins=8,
                             surrogates=19, bootstrap=0, resolution="1s")
    row = table.iloc[0]
    # by construction target(t) = factor(t - 4 s): the factor leads by 4 s and, on the grid,
    # knowing it 4 s earlier gives the target exactly (NMI 1)
    assert row["lag_s"] == 4.0 and row["lag"] == 4 and row["peak_nmi"] == pytest.approx(1.0)
    assert not row["at_edge"]
    # the pairs at lag 4 are the seconds t logged with t - 4 also logged: counted by hand
    logged = set(frame["time"].tolist())
    assert row["n_pairs"] == sum(1 for s in logged if s - 4 in logged)
    assert table.attrs["empty_bins"] == (frame["time"].max() - frame["time"].min() + 1) - len(frame)


def test_default_grid_is_the_median_spacing():
    frame = irregular_shifted(spacings=(1, 1, 1, 2, 3, 5))
    g = inf.prepare(frame)
    assert g.attrs["resolution_s"] == 1.0 and g.index.is_monotonic_increasing
    assert np.all(np.diff(g.index.asi8) == 10**9)


def test_edge_peak_is_flagged_text_and_json(run_airlink, tmp_path):
    frame = irregular_shifted(shift_s=6, spacings=(1,))
    path = tmp_path / "f.csv"
    frame.to_csv(path, index=False)
    status, out, err = run_airlink("infer", "nmi", path, "--target", "target", "--factor", "factor",
                                   "--max-lag", "6s", "--surrogates", "0", "--bins", "8", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert row["lag_s"] == 6.0 and row["lag"] == 6 and row["at_edge"] is True
    status, out, err = run_airlink("infer", "nmi", path, "--target", "target", "--factor", "factor",
                                   "--max-lag", "6s", "--surrogates", "0", "--bins", "8")
    assert status == 0, err
    assert "at the edge of the lag range" in out and "widen --max-lag" in out
    status, out, _ = run_airlink("infer", "nmi", path, "--target", "target", "--factor", "factor",
                                 "--max-lag", "9s", "--surrogates", "0", "--bins", "8", "--json")
    assert json.loads(out)[0]["at_edge"] is False and json.loads(out)[0]["lag_s"] == 6.0


def test_subsecond_rows_on_a_coarser_grid():
    """20 ms rows put on a 100 ms grid: sums of bytes, means of levels, last of states."""
    t = pd.Timestamp("2021-04-13 14:22:05", tz="UTC") + pd.to_timedelta(np.arange(10) * 20, unit="ms")
    frame = pd.DataFrame({"time": t, "tb_bytes": np.arange(10) * 100, "sinr_db": np.arange(10, dtype=float),
                          "cell_id": [7] * 7 + [9] * 3})
    g = to_grid(frame, resolution="100ms")
    assert g["tb_bytes"].tolist() == [0 + 100 + 200 + 300 + 400, 500 + 600 + 700 + 800 + 900]
    assert g["sinr_db"].tolist() == [2.0, 7.0]
    assert g["cell_id"].tolist() == [7, 9]
    assert g.attrs["rules"] == {"tb_bytes": "sum", "sinr_db": "mean", "cell_id": "last"}


def test_gaps_stay_missing_and_duplicates_follow_the_rule():
    t = 1_700_000_000 + np.array([0, 1, 1, 4])
    frame = pd.DataFrame({"time": t, "rx_bytes": [10, 20, 30, 40], "rsrp_dbm": [-80.0, -90, -100, -70]})
    g = to_grid(frame, resolution="1s")
    assert len(g) == 5 and g.attrs["empty_bins"] == 2 and g.attrs["merged_rows"] == 1
    assert g["rx_bytes"].tolist()[:2] == [10, 50] and np.isnan(g["rx_bytes"].iloc[2])
    assert g["rsrp_dbm"].iloc[1] == -95.0 and np.isnan(g["rsrp_dbm"].iloc[3])
    z = to_grid(frame, resolution="1s", gaps="zero")
    assert z["rx_bytes"].tolist() == [10, 50, 0, 0, 40] and np.isnan(z["rsrp_dbm"].iloc[2])


def test_one_row_per_step_is_the_row_itself():
    """A float series already sampled at the grid's steps (each row a step of its own): every
    rule over one value is that value, the steps between stay NaN (0 for sums with
    gaps="zero"), rate is bytes x 8 / resolution, and a sum of -0.0 is 0.0 as in a bin of
    several rows."""
    t = pd.to_datetime(1_700_000_000_000 + np.array([0, 1, 2, 5]), unit="ms", utc=True)
    frame = pd.DataFrame({"time": t, "rx_bytes": [10.0, -0.0, np.nan, 40.0], "rsrp_dbm": [-80.0, -0.0, -90.0, -70.0]})
    g = to_grid(frame, resolution="1ms")
    assert (g["time"].astype("int64") == (1_700_000_000_000 + np.arange(6)) * 10**6).all()
    assert g.attrs["empty_bins"] == 2 and g.attrs["merged_rows"] == 0
    assert g.attrs["rules"] == {"rx_bytes": "sum", "rsrp_dbm": "mean"}
    np.testing.assert_array_equal(g["rx_bytes"], [10.0, 0.0, np.nan, np.nan, np.nan, 40.0])
    assert not np.signbit(g["rx_bytes"].iloc[1]) and not np.signbit(g["rsrp_dbm"].iloc[1])
    np.testing.assert_array_equal(g["rsrp_dbm"], [-80.0, 0.0, -90.0, np.nan, np.nan, -70.0])
    last = to_grid(frame, resolution="1ms", how="last")
    assert np.signbit(last["rsrp_dbm"].iloc[1])                   # the value as it was
    z = to_grid(frame, resolution="1ms", gaps="zero", how={"rx_bytes": "rate"})
    np.testing.assert_array_equal(z["rx_bps"], [80e3, 0.0, np.nan, 0.0, 0.0, 320e3])
    np.testing.assert_array_equal(z["rsrp_dbm"], [-80.0, 0.0, -90.0, np.nan, np.nan, -70.0])


def test_time_forms():
    iso = parse_times(pd.Series(["2024-03-01T10:00:00", "2024-03-01T10:00:00.5", "2024-03-01 10:00:01.125",
                                 "2024-03-01T11:00:02+01:00"]))
    assert [t.isoformat() for t in iso] == ["2024-03-01T10:00:00+00:00", "2024-03-01T10:00:00.500000+00:00",
                                           "2024-03-01T10:00:01.125000+00:00", "2024-03-01T10:00:02+00:00"]
    ucc = parse_times(pd.Series(["2019.12.16_13.40.04"]), tz="Europe/Dublin")
    assert ucc[0] == pd.Timestamp("2019-12-16 13:40:04", tz="UTC")        # Dublin is UTC in winter
    for values, unit in (([1583371396, 1583371397], "s"), ([1583371396500, 1583371397000], "ms"),
                         ([1583371396.25, 1583371397.5], "s")):
        got = parse_times(pd.Series(values))
        assert got.equals(pd.DatetimeIndex(pd.to_datetime(values, unit=unit, utc=True)))
    with pytest.raises(AirlinkError, match=r"f.csv: column .td. row 1: cannot read as a time .*yesterday"):
        parse_times(pd.Series(["2024-03-01 10:00:00", "yesterday"]), source="f.csv", column="td")


def test_xcal_style_td_column(datapath_traces):
    """The 20 ms XCAL-style layout (synthetic file of the trace tests): ``td`` read as ISO times."""
    g = inf.read_frames(datapath_traces, time_column="td", resolution="20ms")
    raw = pd.read_csv(datapath_traces)
    assert g.attrs["resolution_s"] == 0.02 and g.attrs["merged_rows"] == 0
    assert len(g) == len(raw) and g["5G_TBS"].isna().sum() == raw["5G_TBS"].isna().sum()


@pytest.fixture
def datapath_traces():
    from pathlib import Path
    p = Path(__file__).resolve().parents[1] / "traces" / "data" / "xcal_style_mac_20ms_SYNTHETIC.csv"
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p


def ucc_files(root):
    return sorted((root / "ucc-5g").rglob("*.csv"))


def test_ucc_real_files_gaps_and_duplicates(shared_data):
    """Every real UCC file on a 1 s grid from its Timestamp column: the steps, the missing
    seconds and the merged duplicate rows equal a count made with the csv module and
    datetime.strptime; a duplicated second's DL_bitrate is the mean of its rows."""
    files = ucc_files(shared_data)
    if not files:
        pytest.skip("no UCC files in ../shared/data/ucc-5g")
    seen_gap = seen_dup = False
    for f in files:
        with open(f, newline="") as fh:
            rows = list(csv.DictReader(fh))
        secs = [dt.datetime.strptime(r["Timestamp"], "%Y.%m.%d_%H.%M.%S") for r in rows]
        distinct = sorted(set(secs))
        steps = int((distinct[-1] - distinct[0]).total_seconds()) + 1
        g = inf.read_frames(f, time_column="Timestamp", resolution="1s")
        assert len(g) == steps, f
        assert g.attrs["empty_bins"] == steps - len(distinct), f
        assert g.attrs["merged_rows"] == len(rows) - len(distinct), f
        seen_gap |= steps > len(distinct)
        by_sec = {}
        for s, r in zip(secs, rows):
            by_sec.setdefault(s, []).append(r["DL_bitrate"])
        dup = next((s for s, v in by_sec.items() if len(v) > 1 and "-" not in v), None)
        if dup is not None:
            seen_dup = True
            want = np.mean([float(v) for v in by_sec[dup]])
            assert g.loc[pd.Timestamp(dup, tz="UTC"), "DL_bitrate"] == pytest.approx(want), f
        gap = next((distinct[0] + dt.timedelta(seconds=k) for k in range(steps)
                    if distinct[0] + dt.timedelta(seconds=k) not in by_sec), None)
        if gap is not None:
            assert np.isnan(g.loc[pd.Timestamp(gap, tz="UTC"), "RSRP"]), f
    assert seen_gap and seen_dup


def test_ucc_nmi_cli_with_time_column(run_airlink, shared_data):
    files = ucc_files(shared_data)
    if not files:
        pytest.skip("no UCC files in ../shared/data/ucc-5g")
    status, out, err = run_airlink("infer", "nmi", files[0], "--time-column", "Timestamp", "--resolution", "1s",
                                   "--target", "DL_bitrate", "--factor", "SNR", "--max-lag", "10s",
                                   "--surrogates", "9", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert float(row["lag_s"]).is_integer() and row["lag_s"] == row["lag"] and abs(row["lag"]) <= 10


def test_slots_of_a_non_integer_period_keep_one_step_each():
    """1.667 ms slots (1/600 s) stored to the nanosecond: a grid made from the data keeps one
    slot per step (an epoch grid of 1666667 ns would merge neighbours and open holes)."""
    k = np.arange(6000)
    t = np.round(k * 1e9 / 600).astype(np.int64) + 1_700_000_000 * 10**9
    frame = pd.DataFrame({"time": pd.to_datetime(t, unit="ns", utc=True), "served_bytes": k})
    g = inf.prepare(frame)
    assert len(g) == 6000 and g.attrs["merged_rows"] == 0 and g.attrs["empty_bins"] == 0
    assert g["served_bytes"].tolist() == k.tolist()
    assert g.attrs["resolution_s"] == pytest.approx(1 / 600)


def test_scheduler_cli_names_users_and_carrier_aggregation(run_airlink, shared_data, tmp_path):
    from airlink import collectors as C
    files = sorted((shared_data / "icellspeed" / "D1_static").rglob("data_*.csv"))
    frames = [C.read(f) for f in files[:10]]
    frame = next((f for f in frames if f["carrier"].nunique() > 1), None)
    if frame is None:
        pytest.skip("no multi-carrier iCellSpeed file among the first ten")
    path = tmp_path / "mac.parquet"
    frame.to_parquet(path)
    status, out, err = run_airlink("infer", "scheduler", path)
    assert status == 0, err
    assert out.startswith("scheduler: cannot tell") and "users: ue/" in out
    assert "not a user: ue/" in out and "carrier aggregation" in out


def test_tz_for_local_times(run_airlink, tmp_path):
    """Naive UCC-style local times: --tz Europe/Dublin moves summer times one hour back to UTC."""
    t = [f"2020.07.01_12.00.{s:02d}" for s in range(40)]
    rng = np.random.default_rng(2)
    v = rng.integers(0, 8, 45)
    path = tmp_path / "ucc.csv"
    pd.DataFrame({"Timestamp": t, "a": v[:40], "b": v[2:42]}).to_csv(path, index=False)
    g = inf.read_frames(path, time_column="Timestamp", tz="Europe/Dublin")
    assert g.index[0] == pd.Timestamp("2020-07-01 11:00:00", tz="UTC")
    status, out, err = run_airlink("infer", "nmi", path, "--time-column", "Timestamp", "--tz", "Europe/Dublin",
                                   "--target", "a", "--factor", "b", "--max-lag", "5s", "--surrogates", "0",
                                   "--bins", "8", "--json")
    assert status == 0, err
    assert json.loads(out)[0]["lag_s"] == 2.0           # b(t) = a(t + 2): the factor leads by 2 s
    status, _, err = run_airlink("infer", "nmi", path, "--time-column", "Timestamp", "--tz", "Mars/Olympus",
                                 "--target", "a", "--factor", "b", "--surrogates", "0")
    assert status == 2 and "Mars/Olympus" in err and len(err.strip().splitlines()) == 1


def test_drive_test_logs_are_read_through_their_readers(shared_data, run_airlink, datapath_traces):
    """A raw UCC (G-NetTrack) log: the reader's names read it through the ucc reader (times
    Europe/Dublin -> UTC), its own names with its Timestamp as it is - the same NMI either
    way; its own names without the time column are one error line saying both ways. A raw
    XCAL-style export is read through its reader (its ``td`` is no time column by itself)."""
    files = ucc_files(shared_data)
    if not files:
        pytest.skip("no UCC files in ../shared/data/ucc-5g")
    f = next(p for p in files if p.name == "B_2019.12.16_13.40.04.csv")
    common = ("--max-lag", "5s", "--surrogates", "0", "--bootstrap", "0", "--json")
    status, out, err = run_airlink("infer", "nmi", f, "--target", "dl_bitrate_bps", "--factor", "snr_db", *common)
    assert status == 0, err
    reader = json.loads(out)[0]
    status, out, err = run_airlink("infer", "nmi", f, "--time-column", "Timestamp", "--target", "DL_bitrate",
                                   "--factor", "SNR", *common)
    assert status == 0, err
    own = json.loads(out)[0]
    assert (reader["peak_nmi"], reader["lag"], reader["n_pairs"]) == (own["peak_nmi"], own["lag"], own["n_pairs"])
    with open(f, newline="") as fh:
        first = next(csv.DictReader(fh))["Timestamp"]
    from zoneinfo import ZoneInfo
    utc = dt.datetime.strptime(first, "%Y.%m.%d_%H.%M.%S").replace(tzinfo=ZoneInfo("Europe/Dublin"))
    g = inf.read_frames(f, columns=["dl_bitrate_bps"])
    assert g.index[0] == pd.Timestamp(utc).tz_convert("UTC")
    status, out, err = run_airlink("infer", "nmi", f, "--target", "DL_bitrate", "--factor", "SNR")
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"airlink: error: {f}: this ucc log's own columns (DL_bitrate, SNR)")
    assert "(Timestamp)" in err and "dl_bitrate_bps" in err
    status, out, err = run_airlink("infer", "jitter", datapath_traces, "--json")
    assert status == 0, err
    raw = pd.read_csv(datapath_traces)
    served = (raw["5G_RB"].fillna(0) + raw["4G_RB"].fillna(0)) > 0
    step = pd.to_datetime(raw["td"]).diff().dt.total_seconds().median()
    row = json.loads(out)[0]
    assert row["gaps"] == served.sum() - 1 and row["mean_s"] == pytest.approx(step)
