"""Agreement with tshark's tcp.analysis.* flags on the real captures in ../shared/data/tcp-pcaps.

For each flag the test reports, over all files, how many packets tshark flags, how many
airlink flags, how many both, and the Jaccard agreement |both| / |either|. Systematic
differences are explained in docs/collectors.md ("Differences from tshark"); the
assertions hold every flag packet for packet: equal sets where the definitions coincide,
tshark's set inside airlink's where airlink's definition is wider, and the few segments
worked out by hand (TSHARK_OOO_RETRANSMITTED) where the two disagree.
"""
from __future__ import annotations

import shutil

import pytest

from airlink import collectors as C
from tests.collectors.tshark_reference import sent_before, tshark_flags

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
        "spurious_by_timestamps_or_dsack": set(rx[rx["spurious_reason"].isin(["eifel", "dsack"])]["packet"]),
        "duplicate_ack": set(ev[ev["event"] == "dupack"]["packet"]),
        "zero_window": set(ev[ev["event"] == "zero_window"]["packet"]),
    }


# Segments tshark calls out of order that airlink counts as retransmissions, each worked by
# hand from the packets (docs/collectors.md, "Differences from tshark"): (file, frame number)
TSHARK_OOO_RETRANSMITTED = {
    ("fast006.trace", 49),        # already ACKed by frame 47; tshark judges it by frame 48's older, reordered ACK
    ("rto008.trace", 51),         # sent before (frame 37) and asked for by 4 duplicate ACKs
    ("206_example_b.pcap", 1226),  # sent before and asked for by 64 duplicate ACKs
    ("206_example_b.pcap", 1233),  # the same segment again, 0.7 ms after frame 1226
}


def test_agreement_with_tshark(shared_data, capsys):
    if not shutil.which("tshark"):
        pytest.skip("tshark is not installed (scripts/bootstrap installs it)")
    files = sorted(p for p in (shared_data / "tcp-pcaps").rglob("*") if p.is_file() and p.name != "COPYING")
    totals = {k: [0, 0, 0] for k in ("retransmission", "out_of_order", "fast_retransmission",
                                     "spurious_retransmission",
                                     "duplicate_ack", "zero_window")}
    seen_before = [0]
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
        # exact per packet, up to the differences worked out by hand
        moved = {n - 1 for name, n in TSHARK_OOO_RETRANSMITTED if name == f.name}
        assert moved <= ts["out_of_order"], f
        # tshark's out-of-order segments whose bytes the capture had seen: retransmissions
        moved |= sent_before(f, ts["out_of_order"])
        seen_before[0] += len(moved)
        assert ours["retransmission"] == ts_any | moved, f
        assert ours["out_of_order"] == ts["out_of_order"] - moved, f
        assert ours["duplicate_ack"] == ts["duplicate_ack"], f
        assert ours["zero_window"] == ts["zero_window"], f
        # tshark's fast retransmission (within 20 ms of the duplicate ACKs, at their ACK
        # number) is one in airlink, which adds the rest of the recovery episode
        assert ts["fast_retransmission"] <= ours["fast_retransmission"], f
        # tshark's spurious = data already cumulatively ACKed (the same rule as airlink's
        # first reason); airlink adds Eifel and DSACK evidence, and a segment tshark calls
        # out of order because it compares with the latest ACK instead of the highest
        extra = ours["spurious_retransmission"] - ts["spurious_retransmission"]
        assert ts["spurious_retransmission"] <= ours["spurious_retransmission"], f
        assert extra <= ours["spurious_by_timestamps_or_dsack"] | moved, f
    lines = [f"{'flag':26s} {'tshark':>7s} {'airlink':>7s} {'both':>6s} {'agreement':>9s}"]
    for k, (a, b, both) in totals.items():
        either = a + b - both
        lines.append(f"{k:26s} {a:7d} {b:7d} {both:6d} {both / either if either else 1.0:9.3f}")
    lines.append(f"tshark's out-of-order segments airlink counts as retransmissions: {seen_before[0]}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
