"""The byte-granular trace server and the stages, on a fake clock."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from airlink.replay import (DelaySeries, DelayStage, LinkStage, LossStage, TraceServer,
                            make_queue)
from airlink.replay.queues import MS
from airlink.traces import AirlinkError, read_trace


def pkt(n):
    return b"p" * n


def test_integer_trace_matches_mahimahi_opportunities():
    # one 1500-byte opportunity per ms: TTI k is served at the end of the TTI
    s = TraceServer([1500.0], Fraction(1, 1000))
    q = make_queue("infinite")
    for _ in range(3):
        q.enqueue(pkt(1500), 0)
    out = s.advance(3 * MS, q)
    assert [t for _, _, t in out] == [1 * MS, 2 * MS, 3 * MS]


def test_packets_are_split_across_ttis_and_share_ttis():
    s = TraceServer([1000.0], Fraction(1, 1000), record=True)
    q = make_queue("infinite")
    q.enqueue(pkt(1500), 0)        # needs 1.5 TTIs
    q.enqueue(pkt(200), 0)
    q.enqueue(pkt(300), 0)
    out = s.advance(2 * MS, q)
    assert [(len(p), t) for p, _, t in out] == [(1500, 2 * MS), (200, 2 * MS), (300, 2 * MS)]
    rec = s.records()
    assert rec[:, 2].tolist() == [1000, 1000]          # served bytes per TTI


def test_unused_capacity_is_lost():
    s = TraceServer([1000.0], Fraction(1, 1000))
    q = make_queue("infinite")
    s.advance(5 * MS, q)                        # 5 idle TTIs
    q.enqueue(pkt(3000), 5 * MS)
    out = s.advance(7 * MS, q)
    assert out == []                            # 2 TTIs of 1000 bytes: not yet
    out = s.advance(8 * MS, q)
    assert [t for *_, t in out] == [8 * MS]


def test_fractional_capacity_carries_its_remainder():
    # 12 Mbit/s at 0.125 ms TTIs = 187.5 bytes per TTI
    s = TraceServer([187.5], Fraction(1, 8000), record=True)
    q = make_queue("infinite")
    for _ in range(100):
        q.enqueue(pkt(1500), 0)
    s.advance(10**9 // 1000 * 8, q)             # 8 ms = 64 TTIs
    rec = s.records()
    assert set(rec[:, 1].tolist()) == {187.0, 188.0}
    assert rec[:, 1].sum() == 187.5 * 64 == rec[:, 2].sum()


def test_idle_fast_forward_keeps_per_tti_records_exact():
    cap = np.arange(1, 11, dtype=float) * 100    # 10 TTIs, looping
    s = TraceServer(cap, Fraction(1, 2000), record=True)   # 0.5 ms TTIs
    q = make_queue("infinite")
    s.advance(10**9, q)                          # 1 s idle: 2000 TTIs, fast-forwarded
    rec = s.records()
    assert len(rec) == 2000
    assert rec[:, 0].tolist() == list(range(2000))
    assert rec[:, 1].tolist() == np.tile(cap, 200).tolist()
    assert s.capacity_bytes == cap.sum() * 200


def test_once_finishes_at_the_end_of_the_trace():
    s = TraceServer([1500.0] * 5, Fraction(1, 1000), loop=False)
    q = make_queue("infinite")
    s.advance(4 * MS, q)
    assert not s.finished
    s.advance(50 * MS, q)
    assert s.finished and s.k == 5


def test_boundaries_do_not_drift_with_1667_us_ttis():
    s = TraceServer([100.0], Fraction(1, 600))
    assert s._boundary(600 * 3600) == 3600 * 10**9


def test_looping_zero_trace_is_rejected():
    with pytest.raises(AirlinkError, match="some capacity"):
        TraceServer([0.0, 0.0], Fraction(1, 1000))


def test_link_stage_conserves_and_logs_per_tti():
    stage = LinkStage([3000.0], Fraction(1, 1000), queue=make_queue("droptail", "packets=10"))
    t = 0
    sent = 0
    for i in range(200):
        for _ in range(3):                      # 4500 bytes/ms offered, 3000 served
            stage.push(pkt(1500), t)
            sent += 1500
        stage.pull(t)
        t += MS
    stage.pull(t)
    st = stage.stats()
    assert st["arrivals_bytes"] == sent
    assert st["arrivals_bytes"] == st["departures_bytes"] + st["drops_bytes"] + st["queued_bytes"]
    assert st["drops_packets"] > 0


def test_mahimahi_trace_through_a_link_stage(shared_data):
    tr = read_trace(shared_data / "mahimahi-traces" / "Verizon-LTE-short.down")
    stage = LinkStage(tr.values[:, 0], tr.tti, queue=make_queue("infinite"))
    # saturate for 2 s: departures follow the trace exactly
    for ms in range(2000):
        while stage.queued()[0] < 200_000:
            stage.push(pkt(1500), ms * MS)
        stage.pull(ms * MS)
    stage.pull(2000 * MS)
    assert stage.departures_bytes == tr.values[:2000, 0].sum()


def test_delay_stage_never_reorders_and_delays_exactly():
    d = DelayStage(20)
    d.push(pkt(10), 0)
    d.push(pkt(11), 5 * MS)
    assert d.next_event_ns() == 20 * MS
    assert d.pull(19 * MS) == []
    assert [len(p) for p in d.pull(25 * MS)] == [10, 11]
    series = DelaySeries([0, 100], [50, 0])        # delay falls 50 -> 0 ms over 100 ms
    s = DelayStage(series)
    s.push(pkt(1), 0)                 # leaves at 50 ms
    s.push(pkt(2), 90 * MS)           # would leave at 95 ms
    s.push(pkt(3), 40 * MS + 1)       # would leave at 70 ms: held behind nothing earlier
    out_times = [t for t, _ in s._q]
    assert out_times == sorted(out_times)


def test_delay_series_csv(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("time_ms,delay_ms\n0,10\n1000,30\n")
    s = DelaySeries.read_csv(p)
    assert s.delay_ms(500) == pytest.approx(20)
    assert s.delay_ms(2000 + 500) == pytest.approx(20)   # repeats with period 2000 ms
    bad = tmp_path / "bad.csv"
    bad.write_text("time_ms,delay_ms\n0,10\n0,20\n")
    with pytest.raises(AirlinkError, match="row 2: times must increase"):
        DelaySeries.read_csv(bad)


def test_loss_rate_is_within_a_binomial_interval():
    from scipy.stats import binomtest
    st = LossStage(0.05, seed=7)
    n = 20000
    for _ in range(n):
        st.push(pkt(100), 0)
    ci = binomtest(st.drops_packets, n, 0.05).proportion_ci(0.999)
    assert ci.low <= 0.05 <= ci.high
    assert len(st.pull(0)) == n - st.drops_packets


def test_gilbert_loss_rate_and_burstiness():
    st = LossStage(gilbert=(0.01, 0.25), seed=1)
    n = 100000
    kept = []
    for i in range(n):
        st.push(i.to_bytes(4, "big"), 0)
    got = {int.from_bytes(p, "big") for p in st.pull(0)}
    lost = np.array([i not in got for i in range(n)])
    rate = lost.mean()
    assert rate == pytest.approx(st.expected_rate(), rel=0.15)
    # bursts: mean run of losses ~ 1 / p_bg = 4 packets, far above independent loss
    runs = np.diff(np.flatnonzero(np.diff(np.concatenate(([0], lost.astype(int), [0]))) != 0))[::2]
    assert runs.mean() == pytest.approx(4, rel=0.2)
