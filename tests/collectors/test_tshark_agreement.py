"""Agreement with tshark's tcp.analysis.* flags on the real captures in ../shared/data/tcp-pcaps.

For each flag the test reports, over all files, how many packets tshark flags, how many
airlink flags, how many both, and the Jaccard agreement |both| / |either|. Systematic
differences are explained in docs/collectors.md ("Differences from tshark"); the
assertions hold the flags whose definitions coincide to high agreement.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from airlink import collectors as C

FLAGS = ["retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
         "duplicate_ack", "zero_window"]


def tshark_flags(path):
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          *sum((["-e", f"tcp.analysis.{f}"] for f in FLAGS), [])],
                         capture_output=True, text=True, check=True).stdout
    sets = {f: set() for f in FLAGS}
    for line in out.splitlines():
        parts = line.split("\t")
        for f, v in zip(FLAGS, parts[1:]):
            if v.strip():
                sets[f].add(int(parts[0]) - 1)
    return sets


def airlink_flags(path):
    pk = C.read_pcap(path)
    assert pk.attrs["records"] == len(pk)          # row i is frame i+1
    ev = C.analyze_tcp(pk).events
    rx = ev[ev["event"] == "retransmission"]
    return {
        "retransmission": set(rx["packet"]),
        "out_of_order": set(ev[ev["event"] == "out_of_order"]["packet"]),
        "fast_retransmission": set(rx[rx["kind"] == "fast"]["packet"]),
        "spurious_retransmission": set(rx[rx["spurious"]]["packet"]),
        "duplicate_ack": set(ev[ev["event"] == "dupack"]["packet"]),
        "zero_window": set(ev[ev["event"] == "zero_window"]["packet"]),
    }


def test_agreement_with_tshark(shared_data, capsys):
    if not shutil.which("tshark"):
        pytest.skip("tshark is not installed (scripts/bootstrap installs it)")
    files = sorted(p for p in (shared_data / "tcp-pcaps").rglob("*") if p.is_file() and p.name != "COPYING")
    totals = {k: [0, 0, 0] for k in ("retransmission", "out_of_order", "fast_retransmission",
                                     "spurious_retransmission",
                                     "duplicate_ack", "zero_window")}
    for f in files:
        ts = tshark_flags(f)
        # tshark marks a retransmission as one of retransmission / fast / spurious
        ts_any = ts["retransmission"] | ts["fast_retransmission"] | ts["spurious_retransmission"]
        ref = {"retransmission": ts_any, "out_of_order": ts["out_of_order"],
               "fast_retransmission": ts["fast_retransmission"],
               "spurious_retransmission": ts["spurious_retransmission"],
               "duplicate_ack": ts["duplicate_ack"], "zero_window": ts["zero_window"]}
        ours = airlink_flags(f)
        for k in totals:
            totals[k][0] += len(ref[k])
            totals[k][1] += len(ours[k])
            totals[k][2] += len(ref[k] & ours[k])
    lines = [f"{'flag':26s} {'tshark':>7s} {'airlink':>7s} {'both':>6s} {'agreement':>9s}"]
    agree = {}
    for k, (a, b, both) in totals.items():
        either = a + b - both
        agree[k] = both / either if either else 1.0
        lines.append(f"{k:26s} {a:7d} {b:7d} {both:6d} {agree[k]:9.3f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert agree["retransmission"] >= 0.9
    assert agree["out_of_order"] >= 0.8
    assert agree["duplicate_ack"] >= 0.9
    assert agree["zero_window"] >= 0.9
    # tshark's fast retransmission set is (almost) a subset of ours: it also requires the
    # retransmission to follow the dupacks within 20 ms
    a, b, both = totals["fast_retransmission"]
    assert both >= 0.8 * a
    # tshark's spurious = data already cumulatively ACKed; airlink adds Eifel and DSACK evidence
    a, b, both = totals["spurious_retransmission"]
    assert both == a
