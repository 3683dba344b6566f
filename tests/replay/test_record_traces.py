"""From a recording's raw arrivals to trace files: hand-worked cases of the rules that
replay/record.py states (no network needed)."""
from decimal import Decimal

import numpy as np

from airlink.replay.record import (OFFSET_SIZES, Recording, heavy_trace, light_trace, saturator_trace,
                                   size_offset, write_recording)
from airlink.traces import cellreplay, read_cellreplay, read_trace

MS = 1_000_000


def _slot(t_ms, rtt_ms, down_ms, n=None):
    """A light slot: probe sent at t, answered after rtt; train sent at t+100 ms, down
    arrivals (ms after the train was sent) as given."""
    t = t_ms * MS
    return {"probe_send": t, "probe_back": t + rtt_ms * MS, "train_send": t + 100 * MS,
            "n": n or len(down_ms), "down": [(k, t + 100 * MS + d * MS) for k, d in enumerate(down_ms)]}


def test_light_trace_rows_follow_cellreplay_processing():
    rec = Recording()
    rec.slots = [_slot(0, 41, [20, 21, 21, 25]), _slot(200, 43, [19]),
                 _slot(400, 40, [30, 30]), _slot(600, 40, [20, 22])]
    # uplink arrivals at the server, on its own clock; slot 2 lost its first packet up
    rec.up_trains = {0: [(0, 5 * MS), (2, 9 * MS + 900_000), (1, 7 * MS)], 1: [(0, 0)],
                     2: [(1, 3 * MS)], 3: [(0, 10 * MS), (1, 10 * MS + 999_999)]}
    up, down = light_trace(rec)
    # slot 2 is left out (no first packet up); times are train send times after the first
    assert up.time_ms.tolist() == down.time_ms.tolist() == [0, 200, 600]
    # base delay: probe RTT / 2, whole ms (41 -> 20, 43 -> 21)
    assert down.base_delay_ms.tolist() == [20, 21, 20]
    # PDOs: arrivals after the first, in arrival order, truncated to whole ms
    assert [p.tolist() for p in down.pdo_ms] == [[0, 1, 1, 5], [0], [0, 2]]
    assert [p.tolist() for p in up.pdo_ms] == [[0, 2, 4], [0], [0, 0]]


def test_too_few_trains_give_no_light_trace():
    rec = Recording()
    rec.slots = [_slot(0, 40, [1]), _slot(200, 40, [1])]
    rec.up_trains = {0: [(0, 0)], 1: [(0, 0)]}
    assert light_trace(rec) is None


def test_heavy_trace_is_ms_after_first_arrival_cut_at_the_phase_length():
    arrivals = [5 * MS + 10, 5 * MS + 900_000, 6 * MS, 7 * MS + 1, 1005 * MS, 1006 * MS]
    # after the first arrival (5 ms + 10 ns): 0.89 ms, 0.99999 ms, 1.99999 ms, 999.99999 ms
    # truncate to 0, 0, 1, 999; 1000.99999 ms is past the 1 s phase
    assert heavy_trace(arrivals, seconds=1.0).tolist() == [0, 0, 0, 1, 999]
    assert heavy_trace([MS], seconds=1.0) is None


def test_saturator_trace_carries_the_arrivals_bytes():
    heavy = np.array([0, 0, 1, 3, 3, 3], dtype=np.int64)
    tr = saturator_trace(heavy)
    assert tr.values[:, 0].tolist() == [2 * 1400, 1400, 0, 3 * 1400]


def test_size_offset_is_half_the_median_rtt_difference():
    rec = Recording()
    base = {s: [10 * MS + s * 1000 * k for k in (1, 2, 3)] for s in OFFSET_SIZES}   # medians 10 ms + 2 us*s
    rec.offset_rtts = base
    off = size_offset(rec)
    assert off.size_bytes == OFFSET_SIZES
    # (median(s) - median(100)) / 2 = (2000 ns * (s - 100)) / 2 = (s - 100) us
    assert off.offset_ms == tuple(Decimal(f"{(s - 100) / 1000:.3f}") for s in OFFSET_SIZES)
    rec.offset_rtts = {**base, 700: []}
    assert size_offset(rec) is None


def test_an_incomplete_recording_writes_only_whole_parts(tmp_path):
    rec = Recording()
    rec.slots = [_slot(t, 40, [0, 1]) for t in (0, 200, 400)]
    rec.up_trains = {k: [(0, 0), (1, MS)] for k in range(3)}
    rec.down_ns = [k * MS for k in range(600)]
    rec.phases_done = ["light", "size offset", "heavy downlink"]
    rec.incomplete = "interrupted"
    s = write_recording(rec, tmp_path, seconds=0.6)
    assert s["complete"] is False and s["incomplete"] == "interrupted" and not s["cellreplay_set"]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["up-delay-light-pdo", "down-delay-light-pdo", "down-heavy-pdo",
                            "mahimahi.down", "record.json"])
    assert cellreplay.parse_heavy((tmp_path / "down-heavy-pdo").read_text()).tolist() == list(range(600))
    # one 1400-byte packet per ms = 11.2 Mbit/s, in 1500-byte Mahimahi opportunities too
    m = read_trace(tmp_path / "mahimahi.down")
    assert float(m.values.sum()) == 600 * 1400


def test_a_complete_recording_is_a_cellreplay_set(tmp_path):
    rec = Recording()
    rec.slots = [_slot(t, 40, [0, 3]) for t in range(0, 1000, 200)]
    rec.up_trains = {k: [(0, 0), (1, 2 * MS)] for k in range(5)}
    rec.offset_rtts = {s: [40 * MS] for s in OFFSET_SIZES}
    rec.down_ns = [k * MS for k in range(900)]
    rec.up_ns = [2 * k * MS for k in range(450)]
    rec.phases_done = ["light", "size offset", "heavy downlink", "heavy uplink"]
    s = write_recording(rec, tmp_path, seconds=1.0)
    assert s["complete"] and s["cellreplay_set"]
    tr = read_cellreplay(tmp_path)
    assert tr.up.size_offset.offset_ms_at(900) == 0.0
    assert s["down_rate_bps"] == 900 * 1400 * 8 / 0.9


def test_arrivals_carry_the_kernels_timestamp(monkeypatch):
    """The stamp of a datagram comes from the kernel (SO_TIMESTAMPNS), not from the time
    the recorder read it: with the recorder's own clock stuck at 0 it is still a real time."""
    import socket

    from airlink.replay import record
    rx = record._stamping(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    rx.bind(("127.0.0.1", 0))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        before = record._now()
        tx.sendto(b"x", rx.getsockname())
        monkeypatch.setattr(record, "_now", lambda: 0)
        data, _, arrival = record._recv(rx)
        assert data == b"x" and arrival >= before
    finally:
        rx.close()
        tx.close()
