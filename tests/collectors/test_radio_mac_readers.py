"""Radio/MAC readers, format sniffing over every sample file, alignment and clock offset."""
from __future__ import annotations

import importlib
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.traces import LinkLogWriter, validate


def sample_files(shared):
    files = sorted((shared / "ucc-5g").rglob("*.csv"))
    ic = sorted((shared / "icellspeed").rglob("*.csv"))
    files += ic[:6] + [p for p in ic if "driving" in str(p)][:2]
    files += sorted((shared / "tcp-pcaps").rglob("*.pcap"))[:3]
    return files


def test_every_reader_over_every_sample_file(shared_data):
    expected = {"ucc-5g": ("ucc", "rf"), "icellspeed": ("icellspeed", "mac"), "tcp-pcaps": ("pcap", "packets")}
    seen = set()
    for f in sample_files(shared_data):
        top = f.relative_to(shared_data).parts[0]
        reader, kind = expected[top]
        frame = C.read(f)
        assert frame.attrs["reader"] == reader, f
        validate(frame, kind)
        if reader == "ucc":                          # one row per CSV line
            assert len(frame) == len(pd.read_csv(f)), f
        elif reader == "icellspeed":                 # one row per carrier of each CSV line
            assert len(frame) >= len(pd.read_csv(f)), f
        elif shutil.which("tshark"):                 # one row per frame
            assert len(frame) == len(subprocess.run(["tshark", "-r", str(f), "-T", "fields", "-e", "frame.number"],
                                                    capture_output=True, text=True, check=True).stdout.split()), f
        seen.add(reader)
        for name in C.READERS:                       # exactly one specific reader claims it
            if name in ("csv",) or name == reader:
                continue
            assert not importlib.import_module(f"airlink.collectors.{C.READERS[name]}").is_format(f), (name, f)
    assert seen == {"ucc", "icellspeed", "pcap"}


def test_ucc_units_missing_and_duplicates(shared_data, tmp_path):
    f = next((shared_data / "ucc-5g").rglob("*.csv"))
    raw = pd.read_csv(f, na_values=["-"])
    fr = C.read_ucc(f)
    # kbit/s -> bit/s; "-" -> NaN; rows of a duplicate timestamp all kept (and counted)
    assert fr["dl_bitrate_bps"].max() == raw["DL_bitrate"].max() * 1000
    assert fr["rssi_dbm"].isna().any() and raw["RSSI"].isna().any()
    assert len(fr) == len(raw) and fr.attrs["duplicate_times"] == len(raw) - raw["Timestamp"].nunique() > 0
    # the reader's frame and the raw CSV give the same grid (one rule for duplicates: the mean)
    import airlink.inference as inf
    a = inf.prepare(fr, resolution="1s")
    b = inf.prepare(raw, time_column="Timestamp", tz="Europe/Dublin", resolution="1s")
    assert a.index.equals(b.index)
    np.testing.assert_allclose(a["dl_bitrate_bps"].to_numpy(), b["DL_bitrate"].to_numpy() * 1000)
    assert str(fr["time"].dt.tz) == "UTC"
    # summer time: Dublin is UTC+1, so 12:00 local is 11:00 UTC
    g = tmp_path / "summer.csv"
    g.write_text("Timestamp,NetworkMode,RSRP,DL_bitrate,State,Speed,CellID,RSRQ,SNR,CQI,RSSI,UL_bitrate,"
                 "Longitude,Latitude\n2020.07.01_12.00.00,LTE,-90,1000,D,0,1,-10,5,9,-,1,0,0\n")
    s = C.read(g)
    assert s["time"].iloc[0] == pd.Timestamp("2020-07-01 11:00:00", tz="UTC")
    assert s["dl_bitrate_bps"].iloc[0] == 1e6


def test_icellspeed_static_and_driving_units(shared_data):
    static = next(p for p in sorted((shared_data / "icellspeed").rglob("*.csv")) if "static" in str(p))
    driving = next(p for p in sorted((shared_data / "icellspeed").rglob("*.csv")) if "driving" in str(p))
    s = C.read_icellspeed(static)
    d = C.read_icellspeed(driving)
    assert s.attrs["throughput_unit"] == "Mbit/s" and d.attrs["throughput_unit"] == "bit/s"
    raw = pd.read_csv(static, na_values=["None"])
    assert s["throughput_bps"].max() == pytest.approx(raw["throughput"].max() * 1e6)
    assert s["tbs_bps"].max() == pytest.approx(np.nanmax(raw[[c for c in raw if c.endswith("_tbs")]].to_numpy()) * 1e6)
    # both layouts give rates of the same order (Mbit/s-scale LTE)
    assert 1e5 < s["throughput_bps"].median() < 1e9 and 1e5 < d["throughput_bps"].median() < 1e9
    assert set(s["carrier"].astype(str)) <= {"pcell", "scell_1", "scell_2", "scell_3"}
    with pytest.raises(C.CaptureError.__mro__[1]):          # FormatError: implausible unit
        C.read_icellspeed(driving, throughput_unit="Mbit/s")


def test_icellspeed_keeps_decoded_blocks_of_a_carrier_without_cell_id(shared_data):
    """loc-star-001d logs scell_1 blocks (TBS, PRBs, MCS) in 3 seconds whose scell_1 cell id
    is None: those bytes were scheduled, so the carrier rows stay; a carrier with neither a
    cell id nor anything scheduled has no row."""
    path = shared_data / "icellspeed/D1_static/Austin/ATT/loc_32/default/data_310410_loc-star-001d.csv"
    raw = pd.read_csv(path, na_values=["None"])
    f = C.read_icellspeed(path)
    cars = ["pcell", "scell_1", "scell_2", "scell_3"]
    present = sum(int((raw[f"{c}_cid"].notna() | (raw[f"{c}_tbs"] > 0) | (raw[f"{c}_sum_nRB"] > 0)).sum())
                  for c in cars)
    assert len(f) == present
    assert f["tbs_bps"].sum() == pytest.approx(raw[[f"{c}_tbs" for c in cars]].to_numpy().sum() * 1e6)
    nocid = f[f["cell_id"].isna()]
    assert len(nocid) == 3 and set(nocid["carrier"].astype(str)) == {"scell_1"}


def test_linklog_backlog(tmp_path):
    f = tmp_path / "down.log"
    with LinkLogWriter(f, base_ms=1_700_000_000_000) as w:
        w.arrival(0, 1500)
        w.arrival(0, 1500)
        w.opportunity(1, 1504)
        w.departure(1, 1500, 1)
        w.arrival(2, 1000)
        w.drop(3, 1, 1500)
        w.opportunity(3, 1504)
        w.departure(3, 1000, 1)
    fr = C.read(f)
    assert fr.attrs["reader"] == "linklog"
    validate(fr, "mac")
    assert list(fr["backlog_bytes"]) == [3000, 1500, 2500, 0]
    assert list(fr["backlog_packets"]) == [2, 1, 2, 0]
    assert list(fr["capacity_bytes"]) == [0, 1504, 0, 1504]
    assert fr["time"].iloc[0] == pd.Timestamp(1_700_000_000_000, unit="ms", tz="UTC")


def test_mac_parquet_and_call_records(tmp_path):
    mac = pd.DataFrame({"time": pd.to_datetime(np.arange(5) * 10**6, unit="ns", utc=True),
                        "user": ["u1"] * 5, "served_bytes": np.arange(5) * 100})
    p = tmp_path / "mac.parquet"
    mac.to_parquet(p)
    fr = C.read(p)
    assert fr.attrs["reader"] == "mac-parquet" and fr["served_bytes"].sum() == 1000
    calls = tmp_path / "calls.csv"
    calls.write_text("call_id,start,end,sector\n1,100.0,103.5,A\n2,101.2,102.0,A\n3,100.5,101.0,B\n")
    load = C.read(calls)
    assert load.attrs["reader"] == "callrecords"
    a = load[load["cell_id"] == "A"].set_index("time")["sector_load"]
    assert list(a) == [1, 2, 1, 1]          # seconds 100..103 (a session ending at 102.0 is not active in 102)
    b = load[load["cell_id"] == "B"]["sector_load"]
    assert list(b) == [1, 0, 0, 0]


def test_generic_csv_mapping(tmp_path):
    data = tmp_path / "log.tsv"
    data.write_text("t\tsig\trate\n1700000000\t-80\t1.5\n1700000001\t-82\tNA\n1700000001\t-83\t2\n")
    mp = tmp_path / "m.yaml"
    mp.write_text("kind: rf\ntime: {column: t, unit: s}\ncolumns:\n  sig: rsrp_dbm\n"
                  "  rate: {name: dl_bitrate_bps, unit: Mbit/s}\n")
    with pytest.raises(Exception, match="csv"):
        C.read(data)                                       # no mapping: names the csv reader
    fr = C.read(data, mapping=mp)
    assert list(fr["rsrp_dbm"]) == [-80, -83] and list(fr["dl_bitrate_bps"]) == [1.5e6, 2e6]
    assert fr.attrs["duplicate_times"] == 1


def test_align_rules():
    t = pd.to_datetime(np.array([0, 200, 700, 1200]) * 10**6, unit="ns", utc=True)
    a = pd.DataFrame({"time": t, "rsrp_dbm": [-80.0, -82, -84, -90], "served_bytes": [100, 100, 100, 50]})
    b = pd.DataFrame({"time": t[:2], "flow": [0, 1], "packets": [3, 4]})
    g = C.align({"rf": a, "tcp": b}, resolution="1s", how={"served_bytes": "rate"}, gaps={"tcp": "zero"})
    assert list(g["rf.rsrp_dbm"]) == [-82.0, -90.0]
    assert list(g["rf.served_bps"]) == [2400.0, 400.0]
    # packets are events: an empty second is 0 packets when asked (gaps="zero") ...
    assert list(g["tcp.packets[0]"]) == [3, 0] and list(g["tcp.packets[1]"]) == [4, 0]
    # ... and missing by default: a log without a row in a second says nothing about it
    g = C.align({"tcp": b}, resolution="100ms")
    assert g["tcp.packets[0]"].iloc[0] == 3 and np.isnan(g["tcp.packets[0]"].iloc[1])


def test_clock_offset(shared_data):
    a = C.read_pcap(shared_data / "tcp-pcaps/zeek-head/timestamp.pcap")
    # b: the other end of the path, 10 ms away, with a clock 2.5 s ahead
    b = a.copy()
    fwd = (b["direction"] == "fwd").to_numpy()
    shift = np.where(fwd, 2.5 + 0.010, 2.5 - 0.010)
    b["time"] = b["time"] + pd.to_timedelta(shift, unit="s")
    b = b.sort_values("time", ignore_index=True)
    est = C.estimate_clock_offset(a, b)
    assert est["symmetric"] and est["matched"] > 100
    assert est["offset_s"] == pytest.approx(2.5, abs=1e-6)
    assert est["owd_min_s"] == pytest.approx(0.010, abs=1e-6)


def test_is_format_never_raises_on_any_shared_file(shared_data):
    """Every reader's sniffing on every file of ../shared/data (CSVs, captures, Mahimahi traces,
    READMEs, licences): a bool, never an exception, and no file claimed by two specific readers."""
    files = sorted(p for p in shared_data.rglob("*") if p.is_file())
    assert len(files) > 100
    for f in files:
        claims = []
        for name in C.READERS:
            ok = C._module(name).is_format(f)
            assert isinstance(ok, bool), (name, f)
            if ok and name != "csv":
                claims.append(name)
        assert len(claims) <= 1, (f, claims)
        if f.suffix == ".down" or f.suffix == ".up":           # Mahimahi traces are not throughput traces
            assert claims == [], (f, claims)
