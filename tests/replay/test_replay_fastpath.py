"""The C fast path and the Python loop give the same results (no root: socketpairs stand
in for the TUN devices)."""
from __future__ import annotations

import os
import socket
import threading
import time
from fractions import Fraction

import pytest
from tests.cext import c_extension

from airlink.replay import DelayStage, LinkStage, LossStage, Stage, loop, make_queue

fastpath = c_extension("airlink.replay._fastpath", module_level=True)


def relay(engine, down, up, send, seconds=0.3):
    """Send ``send`` (list of bytes) into the downlink; return (received, loop counters)."""
    out_a, out_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    in_a, in_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (out_b, in_b, in_a):
        s.setblocking(False)
    for s in (out_a, out_b, in_a, in_b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    stop_r, stop_w = os.pipe()
    for p in send:
        out_a.send(p)
    threading.Timer(seconds, os.write, (stop_w, b"x")).start()
    if engine == "c":
        fd, fu = down.fast(), up.fast()
        counters = fastpath.relay(out_b.fileno(), in_b.fileno(), stop_r, fd, fu)
        stats = fd.stats()
    else:
        counters = loop.run(out_b.fileno(), in_b.fileno(), down, up, stop_fd=stop_r)
        stats = down.stats()
    got = []
    while True:
        try:
            got.append(in_a.recv(65536))
        except BlockingIOError:
            break
    for s in (out_a, out_b, in_a, in_b):
        s.close()
    os.close(stop_r)
    os.close(stop_w)
    return got, stats, counters


def packets(n, size=1000):
    return [i.to_bytes(4, "big") * (size // 4) for i in range(n)]


@pytest.mark.parametrize("engine", ["c", "python"])
def test_droptail_link_same_in_both_engines(engine):
    down = LinkStage([1500.0], Fraction(1, 1000), queue=make_queue("droptail", "packets=10"),
                     start_ns=time.monotonic_ns())
    got, st, counters = relay(engine, down, Stage(), packets(50))
    assert st["arrivals_packets"] == 50
    assert st["arrivals_packets"] == st["departures_packets"] + st["drops_packets"] + st["queued_packets"]
    assert st["drops_packets"] == 40          # all 50 arrive before the first TTI ends
    assert got == packets(50)[:10]            # FIFO, the first ten kept
    assert counters["write_errors"] == 0


@pytest.mark.parametrize("engine", ["c", "python"])
def test_drophead_link_keeps_the_newest(engine):
    down = LinkStage([1500.0], Fraction(1, 1000), queue=make_queue("drophead", "packets=10"),
                     start_ns=time.monotonic_ns())
    got, st, _ = relay(engine, down, Stage(), packets(50))
    assert got == packets(50)[40:]


@pytest.mark.parametrize("engine", ["c", "python"])
def test_byte_granular_link_splits_packets(engine):
    # 700 bytes per 0.5 ms: 1000-byte packets leave every 1/0.7 TTIs, all delivered
    down = LinkStage([700.0], Fraction(1, 2000), queue=make_queue("infinite"), start_ns=time.monotonic_ns())
    got, st, _ = relay(engine, down, Stage(), packets(70), seconds=0.2)
    assert got == packets(70)
    assert st["capacity_bytes"] >= 70_000


@pytest.mark.parametrize("engine", ["c", "python"])
def test_delay_and_loss_stages(engine):
    got, st, _ = relay(engine, DelayStage(5), Stage(), packets(200))
    assert got == packets(200)
    lossy = LossStage(0.5, seed=3)
    got, st, _ = relay(engine, lossy, Stage(), packets(2000, 100))
    assert 800 < st["drops_packets"] < 1200
    assert len(got) == 2000 - st["drops_packets"]


@pytest.mark.parametrize("gilbert", [None, (0.1, 0.3)], ids=["bernoulli", "gilbert"])
def test_both_engines_drop_the_same_packets_for_a_seed(gilbert):
    """The Python loss stage and the C one draw from splitmix64 in the same order: for one
    seed the same numbered packets survive, and they are the ones a splitmix64 coin written
    out here keeps (Bernoulli: a packet is lost when its draw is below the rate)."""
    sent = packets(2000, 100)
    kept = {}
    for engine in ("c", "python"):
        got, st, _ = relay(engine, LossStage(0.3, gilbert=gilbert, seed=12345), Stage(), sent)
        assert len(got) == 2000 - st["drops_packets"]
        kept[engine] = [int.from_bytes(p[:4], "big") for p in got]
    assert kept["c"] == kept["python"]
    assert 0 < len(kept["c"]) < 2000
    if gilbert is None:
        state, want = 12345, []
        for i in range(2000):
            state = (state + 0x9E3779B97F4A7C15) % 2**64
            z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
            if ((z ^ (z >> 31)) >> 11) / 2**53 >= 0.3:
                want.append(i)
        assert kept["c"] == want


def test_configurations_without_a_c_version_fall_back():
    assert LinkStage([1.0], Fraction(1, 1000), queue=make_queue("infinite"), loop=False).fast() is None
    assert LinkStage([1.0], Fraction(1, 1000), queue=make_queue("infinite")).fast() is not None


def test_pure_python_can_be_forced(monkeypatch):
    monkeypatch.setenv("AIRLINK_PURE_PYTHON", "1")
    assert Stage().fast() is None
