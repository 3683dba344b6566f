"""Queues are pure objects on an injected clock: checked here without root."""
from __future__ import annotations

import pytest

from airlink.replay import make_queue, parse_queue_args
from airlink.replay.queues import MS, QUEUES
from airlink.traces import AirlinkError


def pkt(n):
    return b"x" * n


def fill(q, sizes, t=0):
    return [q.enqueue(pkt(s), t) for s in sizes]


def drain(q, t):
    out = []
    while (item := q.dequeue(t)) is not None:
        out.append(item)
    return out


@pytest.mark.parametrize("kind,args", [("infinite", None), ("droptail", "packets=5"),
                                       ("drophead", "bytes=6000"), ("codel", None), ("pie", "seed=1"),
                                       ("l4s", "seed=1"), ("codel", "ecn"), ("pie", "seed=1,ecn")])
def test_every_queue_conserves_packets_and_bytes(kind, args):
    q = make_queue(kind, args)
    sizes = [100 + 37 * i for i in range(40)]
    t = 0
    out = []
    for i, s in enumerate(sizes):
        q.enqueue(pkt(s), t)
        if i % 3 == 0:
            item = q.dequeue(t)
            if item:
                out.append(item)
        t += MS
    out += drain(q, t)
    assert sum(len(p) for p, _ in out) + q.drops_bytes == sum(sizes)
    assert len(out) + q.drops_packets == len(sizes)
    assert q.backlog_bytes == 0 and len(q) == 0


def test_fifo_order_and_arrival_times():
    q = make_queue("infinite")
    for i in range(5):
        q.enqueue(bytes([i]) * 10, i * MS)
    got = drain(q, 10 * MS)
    assert [p[0] for p, _ in got] == [0, 1, 2, 3, 4]
    assert [a for _, a in got] == [i * MS for i in range(5)]


def test_droptail_packet_limit_drops_arrivals():
    q = make_queue("droptail", "packets=3")
    assert fill(q, [100] * 5) == [True, True, True, False, False]
    assert (len(q), q.drops_packets, q.drops_bytes) == (3, 2, 200)


def test_droptail_byte_limit_counts_bytes_not_packets():
    q = make_queue("droptail", "bytes=3000")
    assert fill(q, [1500, 1000, 600, 500]) == [True, True, False, True]
    assert q.backlog_bytes == 3000 and q.drops_bytes == 600


def test_drophead_drops_the_oldest():
    q = make_queue("drophead", "packets=2")
    for i in range(4):
        q.enqueue(bytes([i]) * 50, i)
    assert q.drops_packets == 2
    assert [p[0] for p, _ in drain(q, 9)] == [2, 3]


def test_drophead_byte_limit():
    q = make_queue("drophead", {"bytes": 2500})
    fill(q, [1000, 1000, 1000])
    assert q.backlog_bytes == 2000 and q.drops_bytes == 1000


def test_codel_drops_when_sojourn_stays_above_target():
    q = make_queue("codel", "target=5ms,interval=100ms,packets=100000")
    # a standing queue: 1 packet in, 1 out each ms, 50 ms deep -> sojourn 50 ms > target
    t = 0
    for _ in range(50):
        q.enqueue(pkt(1500), t)
    delivered = 0
    for _ in range(2000):
        t += MS
        q.enqueue(pkt(1500), t)
        if q.dequeue(t):
            delivered += 1
    assert q.drops_packets > 0
    # a short queue (sojourn under target) is never dropped
    q2 = make_queue("codel")
    for i in range(1000):
        q2.enqueue(pkt(1500), i * MS)
        q2.dequeue(i * MS + 2 * MS)
    assert q2.drops_packets == 0


def test_pie_drops_under_a_standing_queue_and_not_when_short():
    q = make_queue("pie", "qdelay_ref=15ms,max_burst=150ms,packets=100000,seed=3")
    t = 0
    for _ in range(200):
        q.enqueue(pkt(1500), t)
    for _ in range(5000):       # 2 in, 1 out per ms: delay grows far past the reference
        t += MS
        q.enqueue(pkt(1500), t)
        q.enqueue(pkt(1500), t)
        q.dequeue(t)
    assert q.drops_packets > 0 and q.drop_prob > 0
    q2 = make_queue("pie", "seed=3")
    for i in range(5000):
        q2.enqueue(pkt(1500), i * MS)
        q2.dequeue(i * MS)
    assert q2.drops_packets == 0


def test_describe_matches_mahimahi_header():
    assert make_queue("droptail", "packets=100").describe() == "droptail [packets=100]"
    assert make_queue("infinite").describe() == "infinite"


def test_queue_args_parse_units():
    assert parse_queue_args("packets=100, bytes=150KB") == {"packets": 100, "bytes": 150000}
    assert parse_queue_args("target=5ms") == {"target": "5ms"}


@pytest.mark.parametrize("kind,args,msg", [
    ("fifo", None, "unknown queue"),
    ("droptail", None, "needs a limit"),
    ("droptail", "packets", "NAME=VALUE"),
    ("droptail", "packets=x", "whole number"),
    ("droptail", "colour=red", "takes packets, bytes"),
    ("infinite", "packets=3", "takes no arguments"),
])
def test_bad_queue_options_are_one_clear_line(kind, args, msg):
    with pytest.raises(AirlinkError, match=msg):
        make_queue(kind, args)


def test_all_mahimahi_queues_exist():
    assert set(QUEUES) == {"infinite", "droptail", "drophead", "codel", "pie", "l4s"}   # + L4S (DualPI2)
