"""NR-Scope per-slot DCI reader on the real T-Mobile 5G SA logs and on damaged copies.

Expected values come from the CSV itself read with the ``csv`` module (no airlink code).
"""
import csv

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import nrscope
from airlink.traces import FormatError

FILES = ["t_mobile1_ueactivity_afternoon_1.csv", "t_mobile2_ueactivity_morning_1.csv",
         "t_mobile2_ueactivity_night_1.csv"]


@pytest.fixture(scope="module", params=FILES)
def log(request, shared_data):
    return shared_data / "nr-scope" / request.param


def _rows(path):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["timestamp"] != "timestamp"]


def test_sniffed_and_rows_kept(log):
    assert nrscope.is_format(log)
    for name in C.READERS:                 # no other specific reader claims an NR-Scope log
        if name not in ("nrscope", "csv"):
            assert not C._module(name).is_format(log), name
    frame = C.read(log)
    assert frame.attrs["reader"] == "nrscope"
    rows = _rows(log)
    allocated = [r for r in rows if int(r["frequency_length"]) > 0]
    # the same DCI logged again (same SFN, slot, RNTI, format, HARQ process, within one
    # 10.24 s wrap) is one DCI: cluster by hand
    groups = {}
    for r in sorted(allocated, key=lambda r: float(r["timestamp"])):
        key = (r["system_frame_index"], r["slot_index"], r["rnti"], r["dci_format"], r["harq_id"])
        clusters = groups.setdefault(key, [])
        if clusters and float(r["timestamp"]) - float(clusters[-1][0]["timestamp"]) < 5.12:
            clusters[-1].append(r)
        else:
            clusters.append([r])
    dcis = [c for cl in groups.values() for c in cl]
    for c in dcis:      # repeats are exact copies apart from the timestamp
        assert len({(r["transport_block_size"], r["frequency_length"], r["mcs_index"]) for r in c}) == 1
    assert frame.attrs["empty_dcis"] == len(rows) - len(allocated)
    assert len(frame) == len(dcis)
    assert frame.attrs["duplicate_dcis"] == len(allocated) - len(dcis)
    assert frame["tbs_bytes"].sum() == sum(int(c[0]["transport_block_size"]) for c in dcis) / 8
    retx = sum(1 for r in allocated if int(r["transport_block_size"]) == 0)
    assert int(frame["retransmission"].sum()) <= retx
    assert set(frame["dci_direction"]) <= {"downlink", "uplink", "unknown"}
    assert (frame.loc[frame["dci_format"] == "0_1", "dci_direction"] == "uplink").all()


def test_slot_timing_and_wraparound(log):
    """Each DCI sits on a 1 ms slot whose number agrees with its logged SFN/slot residue and
    lies before its decoding timestamp by at most the log's decoding latency (< 1.1 s) -
    across every SFN wrap (the afternoon log spans ~29 wraps of 10.24 s). A wrong wrap
    would put a DCI 10.24 s away from its timestamp."""
    frame = C.read(log)
    assert frame.attrs["tti_s"] == "1/1000" and frame.attrs["slots_per_frame"] == 10
    t = frame["time"].array.asi8
    assert (np.diff(t) >= 0).all()
    assert ((t - t[0]) % 1_000_000 == 0).all()
    assert ((t - t[0]) // 1_000_000 == frame["slot"] - frame["slot"].iloc[0]).all()
    residue = (frame["sfn"] * 10 + frame["slot_index"] - frame["slot"]) % 10240
    assert residue.nunique() == 1
    latency_s = (frame["decoded_time"].array.asi8 - t) / 1e9
    assert -1e-6 <= latency_s.min() < 0.01      # 0 for the fastest DCI of the whole file
    assert latency_s.max() < 1.1
    span = (t[-1] - t[0]) / 1e9
    raw_span = max(float(r["timestamp"]) for r in _rows(log)) - min(float(r["timestamp"]) for r in _rows(log))
    assert span == pytest.approx(raw_span, abs=1.1)


def test_repeated_headers_cut_last_line_and_blank_lines(shared_data, tmp_path):
    src = shared_data / "nr-scope" / "t_mobile2_ueactivity_morning_1.csv"
    lines = src.read_text().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    damaged = tmp_path / "damaged.csv"
    cut = body[-1][: len(body[-1]) // 2]                       # the logger died mid-row
    damaged.write_text(header + "".join(body[:300]) + header + "\n" + "".join(body[300:-1]) + cut)
    whole = C.read(src)
    got = C.read(damaged)
    assert got.attrs["repeated_headers"] == 1 and got.attrs["truncated_last_line"] == 1
    # the cut row was the original's last row: everything before it is read identically
    base = tmp_path / "base.csv"
    base.write_text(header + "".join(body[:-1]))
    ref = C.read(base)
    cols = ["time", "user", "slot", "prbs", "mcs", "tbs_bytes", "harq_id", "retransmission"]
    pd.testing.assert_frame_equal(got[cols], ref[cols])
    assert len(whole) >= len(ref)


def test_bad_value_names_line_and_column(shared_data, tmp_path):
    src = shared_data / "nr-scope" / "t_mobile2_ueactivity_morning_1.csv"
    lines = src.read_text().splitlines(keepends=True)
    parts = lines[10].split(",")
    cols = lines[0].strip().split(",")
    parts[cols.index("transport_block_size")] = "n/a"
    lines[10] = ",".join(parts)
    bad = tmp_path / "bad.csv"
    bad.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"bad\.csv: line 11: column 'transport_block_size': 'n/a'"):
        C.read(bad)


def test_missing_columns_and_other_files_not_claimed(shared_data, tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("timestamp,system_frame_index,slot_index,rnti,dci_format\n1,2,3,4,1_1\n")
    assert not nrscope.is_format(p)
    with pytest.raises(FormatError, match="transport_block_size"):
        nrscope.read(p)
    icell = next((shared_data / "icellspeed").rglob("*.csv"))
    assert not nrscope.is_format(icell)
    assert not nrscope.is_format(tmp_path / "absent.csv")      # never raises


def test_damaged_copies_read_or_fail_with_one_clear_error(shared_data, tmp_path):
    """Cut and byte-flipped copies of a real log: the reader returns a frame or raises
    airlink's own error naming the file - never another exception."""
    from airlink.traces import AirlinkError
    data = (shared_data / "nr-scope" / "t_mobile2_ueactivity_morning_1.csv").read_bytes()
    rng = np.random.default_rng(7)
    p = tmp_path / "mutant.csv"
    outcomes = {"read": 0, "error": 0}
    for i in range(60):
        d = bytearray(data)
        if i % 3 == 0:
            d = d[: int(rng.integers(len(d) // 10, len(d)))]
        else:
            for _ in range(int(rng.integers(1, 12))):
                d[int(rng.integers(0, len(d)))] = int(rng.choice(list(b"x,\n9-. ")))
        p.write_bytes(bytes(d))
        try:
            frame = nrscope.read(p)
        except AirlinkError as exc:
            assert "mutant.csv" in str(exc) and "\n" not in str(exc)
            outcomes["error"] += 1
        else:
            assert (np.diff(frame["time"].array.asi8) >= 0).all()
            outcomes["read"] += 1
    assert outcomes["read"] and outcomes["error"]
