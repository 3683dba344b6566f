"""One link core (replay/_linkcore.c) behind the link shell and the cell, against the Python
reference (replay/stages.py's LinkStage on replay/server.py's TraceServer).

The same capacity trace and the same packets at the same times go through the cell's
constrained uplink (airlink.replay._cellpath, real clock, packet sockets standing in for the
TUN devices), the link shell's C stage (airlink.replay._fastpath, injected clock) in plain
and in offload mode (a virtio_net_hdr in front of every packet) and the Python LinkStage:
every TTI serves the same packets, the cell's Mahimahi-format log has the reference's lines,
and the counters add up. The trace has fractional capacities, so the carry rule is exercised:
ten TTIs of 0.1 byte give one whole byte in the tenth (a float running sum of 0.1s is
0.9999999999999999 there), as server.carry_budget says.
"""
from __future__ import annotations

import random
import socket
import time
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import pytest
from tests.cext import c_extension

from airlink.replay import LinkStage, make_queue
from airlink.replay.cell import _EVENT
from airlink.replay.eventlog import event_lines, in_log_order
from airlink.replay.cell_pypath import PyCellPath
from airlink.replay.server import EV_ARRIVAL, EV_DEPARTURE, EV_DROP, EV_OPPORTUNITY, carry_budget
from airlink.replay.stages import write_events
from airlink.traces import LinkLogWriter

cp = c_extension("airlink.replay._cellpath", module_level=True)
fp = c_extension("airlink.replay._fastpath", module_level=True)

TTI_NS = 1_000_000
# bytes per 1 ms TTI: fractions carried (no carry left after TTI 4), an idle TTI, ten TTIs
# of 0.1 byte (whole budgets 0 x 9 then 1, ending at 15 ms), a burst
CAPACITY = [1499.5, 0.0, 700.5, 2500.25, 333.75] + [0.1] * 10 + [4000.0, 120.25]
RUN_NS = 100 * TTI_NS       # long enough to drain every packet


def test_carry_rule_counts_a_running_sum_just_short_of_a_whole_byte_as_whole():
    carry, budgets = 0.0, []
    for _ in range(10):
        b, carry = carry_budget(carry, 0.1)
        budgets.append(b)
    assert budgets == [0] * 9 + [1] and abs(carry) < 1e-9
    assert carry_budget(0.5, 1499.5) == (1500, 0.0)
    assert carry_budget(0.0, 187.5) == (187, 0.5)


@contextmanager
def _cell_sockets():
    """Two non-blocking SEQPACKET pairs, a cell's outer side and one UE's: (outer end kept by
    the test as the shell, outer end for the cell, UE end for the cell, UE end for the app);
    closed at the end."""
    outer_shell, outer_cell = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue_cell, ue_app = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    socks = (outer_shell, outer_cell, ue_cell, ue_app)
    try:
        for s in socks:
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        yield socks
    finally:
        for s in socks:
            s.close()


def _run_cell(packets, gaps_ns, impl="c"):
    """The cell's constrained uplink: packets sent at the given gaps after TTI 0 started;
    returns (logged events, packets out in order, the uplink's counters, start of TTI 0)."""
    with _cell_sockets() as (outer_shell, outer_cell, ue_cell, ue_app):
        cell = cp.Cell(outer_cell.fileno(), [ue_cell.fileno()], 0x64400000, 0xFFFFFF00, 6, 0, 0, 0, log=True) \
            if impl == "c" else PyCellPath(outer_cell.fileno(), [ue_cell.fileno()], 0x64400000, 0xFFFFFF00, 6,
                                           [make_queue("infinite")], log=True)
        start = time.monotonic_ns()
        cell.set_uplink(0, np.array(CAPACITY), TTI_NS, 1, start)
        t = start
        for p, gap in zip(packets, gaps_ns):
            t += gap
            while time.monotonic_ns() < t:
                cell.wait(t, [])
            ue_app.send(p)
            cell.wait(time.monotonic_ns() + 50_000, [])
        end = start + RUN_NS
        while time.monotonic_ns() < end:
            cell.wait(end, [])
        events = np.frombuffer(cell.take_events(True)[0], _EVENT)
        out = []
        while True:
            try:
                out.append(outer_shell.recv(70000))
            except BlockingIOError:
                break
        return events, out, cell.ue_stats(0)["uplink"], start


def _run_stage(stage, packets, arrivals, ttis, vnet=0, every_tti=None):
    """Push each packet at its time (after the TTIs that ended by then were served) and
    pull at every TTI's end; departures per TTI (the vnet header stripped). ``every_tti()``
    runs after each TTI's pull."""
    per_tti = [[] for _ in range(ttis)]
    order = sorted(range(len(packets)), key=lambda i: arrivals[i])
    j = 0
    for k in range(ttis):
        end = arrivals.start + (k + 1) * TTI_NS
        while j < len(order) and arrivals[order[j]] < end:
            i = order[j]
            stage.pull(arrivals[i])
            stage.push(bytes(vnet) + packets[i] if vnet else packets[i], arrivals[i])
            j += 1
        per_tti[k] = [p[vnet:] for p in stage.pull(end)]
        if every_tti is not None:
            every_tti()
    return per_tti


class _Times(list):
    """Arrival times (ns), with the start of TTI 0 in ``start``."""
    start = 0


@pytest.mark.parametrize("impl", ["c", "python"])
def test_cell_uplink_link_shell_and_python_serve_a_trace_alike(tmp_path, impl):
    """(``impl``: the cell's C path, or its Python twin.)"""
    rng = random.Random(28)
    sizes = [rng.randint(40, 1500) for _ in range(40)]
    packets = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    gaps = [rng.choice([0, 0, 150_000, 400_000, 1_300_000]) + 7 for _ in packets]
    events, out, st, start = _run_cell(packets, gaps, impl)

    arrivals = _Times(events["t"][events["kind"] == 0].tolist())
    arrivals.start = start
    assert len(arrivals) == len(packets) and events["len"][events["kind"] == 0].tolist() == sizes
    ttis = st["ttis"]
    assert ttis >= 2 * len(CAPACITY) and st["queued_packets"] == 0

    # the Python reference, with its mm-link log
    ref_log = tmp_path / "ref.log"
    ref = LinkStage(CAPACITY, Fraction(1, 1000), queue=make_queue("infinite"), start_ns=start,
                    log=LinkLogWriter(ref_log, direction="uplink"))
    want = _run_stage(ref, packets, arrivals, ttis)
    ref.close(start + ttis * TTI_NS)

    # the link shell's C stage, plain and with a vnet header on every packet
    cap = np.array(CAPACITY, dtype="<f8").tobytes()
    plain = fp.link(cap, TTI_NS, 1, start, 0, 0, 0)
    assert _run_stage(plain, packets, arrivals, ttis) == want
    offload = fp.link(cap, TTI_NS, 1, start, 0, 0, 0)
    offload.vnet_hdr(10)
    assert _run_stage(offload, packets, arrivals, ttis, vnet=10) == want

    # the cell: departures per TTI from its log, packets in the order they left
    dep = events[events["kind"] == 3]
    tti_of = (dep["t"] - start) // TTI_NS - 1
    got, pos = [[] for _ in range(ttis)], 0
    for k in tti_of.tolist():
        got[k].append(out[pos])
        pos += 1
    assert pos == len(out)
    assert got == want

    # the cell's log lines are the reference's
    cell_log = tmp_path / "cell.log"
    writer = LinkLogWriter(cell_log, direction="uplink")
    writer.write_lines(event_lines(events.tobytes(), start))
    writer.close()
    body = [ln for ln in cell_log.read_text().splitlines() if not ln.startswith("#")]
    assert body == [ln for ln in ref_log.read_text().splitlines() if not ln.startswith("#")]
    # first pass of the trace by hand: budgets 1499 (0.5 carried), 0 (not logged), 701,
    # 2500 (0.25 carried), 334, then nine TTIs of 0.1 byte with none and 1 byte at the
    # tenth's end (15 ms), 4000, 120
    assert [ln.split()[2] for ln in body if ln.split()[1] == "#"][:7] == \
        ["1499", "701", "2500", "334", "1", "4000", "120"]
    assert "15 # 1" in body and not [ln for ln in body if ln.split()[1] == "#" and 6 <= float(ln.split()[0]) < 15]

    # counters: the same in all three, and they add up
    py = ref.stats()
    for c in (st, plain.stats(), {k: v for k, v in offload.stats().items() if k not in ("superpackets", "pieces_cut")}):
        for key in ("arrivals_packets", "arrivals_bytes", "departures_packets", "departures_bytes",
                    "queued_packets", "queued_bytes", "capacity_bytes", "ttis"):
            assert c[key] == py[key], key
    assert py["arrivals_bytes"] == py["departures_bytes"] == sum(sizes)


def test_log_lines_in_c_are_the_reference_lines(tmp_path):
    """The shells' C ``format_events`` writes what :func:`event_lines` (LinkLogWriter's
    ``event_line`` per event) writes, on times and delays placed on the rounding
    boundaries, where a double and its decimal value may round apart: 0.5 us past a
    microsecond (the time's third decimal), 0.5 ms past a millisecond (the delay), and
    times before the base."""
    rng = np.random.default_rng(7)
    n, base = 60_000, 1_700_000_000_123_456_789
    ev = np.zeros(n, _EVENT)
    t = base + np.sort(rng.integers(0, 10**12, n))
    t[::5] = base + rng.integers(0, 10**7, len(t[::5])) * 1000 + rng.choice([499, 500, 501], len(t[::5]))
    t[::7] = base + rng.integers(0, 10**5, len(t[::7])) * 10**6                 # whole ms
    t[::11] = base - rng.integers(0, 2_000_000, len(t[::11]))                   # before the base
    ev["t"], ev["kind"], ev["len"] = t, rng.integers(0, 5, n), rng.integers(0, 65_536, n)
    ev["x"] = rng.integers(0, 10**9, n)
    dep = ev["kind"] == 3                                                       # x = arrival time
    ev["x"][dep] = t[dep] - (rng.integers(0, 5000, dep.sum()) * 1_000_000
                             + rng.choice([0, 499_999, 500_000, 500_001], dep.sum()))
    raw = ev.tobytes()
    assert fp.format_events(raw, base) == event_lines(raw, base)
    # by hand: 2.5 us past 1 ms is 1.002 (the double 1.0025 lies below), 1.5 ms and 2.5 ms
    # delays round to 2 (half to even)
    hand = np.zeros(3, _EVENT)
    hand["t"] = [base + 1_002_500, base + 7_000_000, base + 9_000_000]
    hand["kind"], hand["len"] = [0, 3, 3], [1500, 1448, 1448]
    hand["x"] = [0, base + 5_500_000, base + 6_500_000]
    assert fp.format_events(hand.tobytes(), base) == "1.002 + 1500\n7 - 1448 2\n9 - 1448 2\n"
    with pytest.raises(ValueError, match="whole number"):
        fp.format_events(raw[:-1], base)

    # a link shell's batch in its log's order, from C, is what the stages' writer writes
    stage_form = []         # write_events' (t, kind, a, b), kinds in the log's order
    for t, x, kind, n in ev.tolist():
        stage_form.append({EV_ARRIVAL: (t, 1, n, 0), EV_DEPARTURE: (t, 2, n, t - x),
                           EV_OPPORTUNITY: (t, 0, x, 0), EV_DROP: (t, 3, n, x)}.get(kind, (t, 4, n, x)))
    ref, fast = tmp_path / "ref.log", tmp_path / "fast.log"
    for path, write in ((ref, lambda w: write_events(w, base, stage_form)),
                        (fast, lambda w: w.write_lines(fp.format_events(in_log_order(raw), base)))):
        w = LinkLogWriter(path)
        write(w)
        w.close()
    def body(path):
        return [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
    assert body(fast) == body(ref) and len(body(ref)) == len(raw) // _EVENT.itemsize


@pytest.mark.parametrize("kind,args", [("droptail", "packets=6"), ("droptail", "bytes=5000"),
                                       ("drophead", "packets=5"), ("drophead", "bytes=4000")])
def test_link_shell_queues_equal_the_python_queues_on_a_trace(kind, args):
    """Every queue of the C core, plain and offload, against queues.py on the same arrivals."""
    rng = random.Random(kind + args)
    sizes = [rng.randint(40, 1500) for _ in range(80)]
    packets = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    arrivals = _Times(sorted(rng.randrange(0, 30 * TTI_NS) | 1 for _ in packets))
    ttis = 60
    ref = LinkStage(CAPACITY, Fraction(1, 1000), queue=make_queue(kind, args), start_ns=0)
    want = _run_stage(ref, packets, arrivals, ttis)
    q = make_queue(kind, args)
    cap = np.array(CAPACITY, dtype="<f8").tobytes()
    for vnet in (0, 10):
        c = fp.link(cap, TTI_NS, 1, 0, {"droptail": 1, "drophead": 2}[kind], q.packets, q.bytes)
        if vnet:
            c.vnet_hdr(vnet)
        assert _run_stage(c, packets, arrivals, ttis, vnet=vnet) == want
        got, py = c.stats(), ref.stats()
        for key in ("arrivals_packets", "arrivals_bytes", "departures_packets", "departures_bytes",
                    "drops_packets", "drops_bytes", "queued_packets", "queued_bytes", "capacity_bytes"):
            assert got[key] == py[key], (vnet, key)
    assert py["drops_packets"] > 0
    assert py["arrivals_bytes"] == py["departures_bytes"] + py["drops_bytes"] + py["queued_bytes"]


def _ip(size, ecn, ident, v6=False):
    """An IPv4 (valid header checksum) or IPv6 UDP packet of ``size`` bytes with ECN field ``ecn``."""
    if v6:
        head = bytes([0x60 | 0, ecn << 4, 0, 0]) + (size - 40).to_bytes(2, "big") + bytes([17, 64]) + bytes(32)
        return head + bytes([ident % 256]) * (size - 40)
    h = bytearray([0x45, ecn, *size.to_bytes(2, "big"), *(ident % 65536).to_bytes(2, "big"), 0, 0, 64, 17, 0, 0,
                   10, 0, 0, 1, 10, 0, 0, 2])
    s = sum(int.from_bytes(h[i:i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    h[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
    return bytes(h) + bytes([ident % 256]) * (size - 20)


@pytest.mark.parametrize("kind,args", [("codel", "target=2ms,interval=20ms"), ("codel", "target=2ms,interval=20ms,ecn"),
                                       ("pie", "qdelay_ref=2ms,max_burst=0ms,seed=5"),
                                       ("pie", "qdelay_ref=2ms,max_burst=0ms,seed=5,ecn"),
                                       ("pie", "qdelay_ref=2ms,max_burst=30ms,packets=40,seed=9,ecn"),
                                       ("l4s", "step=1ms,target=3ms,seed=11"),
                                       ("l4s", "step=2ms,target=3ms,packets=30,seed=12")])
def test_aqms_in_c_drop_and_mark_as_the_python_queues(kind, args):
    """The same arrivals (a mix of not-ECT, ECT(0), ECT(1) and CE, IPv4 and IPv6) at the same
    times, about twice the link's rate: the C core drops and marks the same packets as
    queues.py (the same seed: the same coins), so every TTI's departures are the same bytes
    (CE set, IPv4 checksums updated) and the counters agree."""
    rng = random.Random(kind + args)
    capacity = [1500.0, 700.5, 2200.0, 0.0, 1100.25]
    ref = LinkStage(capacity, Fraction(1, 1000), queue=make_queue(kind, args), start_ns=0)
    c = ref.fast()
    assert c is not None
    ttis, t, i, arrivals, packets = 400, 0, 0, _Times(), []
    while t < 300 * TTI_NS:
        t += rng.randrange(100_000, 500_000) | 1
        ecn = rng.choice([0, 1, 2, 2, 3]) if kind != "l4s" else rng.choice([0, 1, 1, 2])
        packets.append(_ip(rng.randint(60, 1500), ecn, i, v6=rng.random() < 0.2))
        arrivals.append(t)
        i += 1
    want = _run_stage(ref, packets, arrivals, ttis)
    assert _run_stage(c, packets, arrivals, ttis) == want
    got, py = c.stats(), ref.stats()
    for key in ("arrivals_packets", "arrivals_bytes", "departures_packets", "departures_bytes", "drops_packets",
                "drops_bytes", "marks_packets", "marks_bytes", "queued_packets", "queued_bytes", "capacity_bytes"):
        assert got[key] == py[key], key
    assert py["drops_packets"] + py["marks_packets"] > 0
    if "ecn" in args or kind == "l4s":
        assert py["marks_packets"] > 0
    else:
        assert py["marks_packets"] == 0
    departed = [p for tti in want for p in tti]
    marked = [p for p in departed if p[0] >> 4 == 4 and p[1] & 3 == 3]
    for p in marked:                 # a marked IPv4 header still sums to 0xFFFF
        s = sum(int.from_bytes(p[j:j + 2], "big") for j in range(0, 20, 2))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        assert s == 0xFFFF


@pytest.mark.parametrize("kind,args", [("codel", "target=1ms,interval=5ms,ecn"),
                                       ("pie", "qdelay_ref=1ms,max_burst=0ms,seed=3,ecn"),
                                       ("l4s", "step=1ms,target=2ms,tupdate=2ms,seed=4")])
def test_cell_queues_with_aqm_drop_and_mark_as_the_python_queues(kind, args):
    """The cell's per-UE queue in the C core with an AQM, against queues.py and ByteServer
    fed the same packets at the times the cell read them, served the same budgets at the
    same TTI ends: the same packets reach the UE (CE marks included) and the counters agree."""
    from airlink.replay.queues import core_parameters
    from airlink.replay.server import ByteServer
    rng = random.Random(kind)
    with _cell_sockets() as (outer_shell, outer_test, ue_cell, ue_app):
        ref_q, srv = make_queue(kind, args), ByteServer()
        cell = cp.Cell(outer_shell.fileno(), [ue_cell.fileno()], 0x64400000, 0xFFFFFF00, 6,
                       *core_parameters(ref_q)[:3], log=True)
        cell.set_aqm(0, core_parameters(ref_q)[3])
        got, want = [], []
        row_marks = 0
        for step in range(150):
            sent = []
            for _ in range(rng.randrange(0, 5)):
                p = bytearray(_ip(rng.randint(60, 1500), rng.choice([0, 1, 2, 3]), len(sent) + 7 * step))
                p[16:20] = (0x64400000 + 64 + 2).to_bytes(4, "big")     # UE 1's address
                sent.append(bytes(p))
                outer_test.send(sent[-1])
            assert cell.wait(time.monotonic_ns() + 1_000_000, []) == -1
            t_end = time.monotonic_ns()
            budget = rng.choice([0, 700, 1500])     # less than arrives: the queue grows
            rows = [np.zeros(1, d) for d in (np.float64, np.int64, np.float64, np.int64, np.int64, np.int64)]
            # the reference's arrivals: at the times the cell read them (its log)
            ev = np.frombuffer(cell.take_events()[0], _EVENT)
            for p, t in zip(sent, ev["t"][ev["kind"] == 0].tolist()):
                ref_q.enqueue(p, t)
            cell.serve(np.array([budget], np.int64), *rows, t_end)
            deps = []
            srv.serve(ref_q, budget, t_end, deps)
            want += [d[0] for d in deps]
            while True:
                try:
                    got.append(ue_app.recv(70000))
                except BlockingIOError:
                    break
            cell.take_events()
            assert got == want, step
            assert (rows[0][0], rows[1][0]) == srv.backlog(ref_q)
            row_marks += int(rows[5][0])
        st = cell.ue_stats(0)
        assert (st["drops_packets"], st["drops_bytes"]) == (ref_q.drops_packets, ref_q.drops_bytes)
        assert (st["marks_packets"], st["marks_bytes"]) == (ref_q.marks_packets, ref_q.marks_bytes)
        assert row_marks == ref_q.marks_packets     # the MAC log's per-TTI marks add up
        assert ref_q.marks_packets + ref_q.drops_packets > 0
        assert st["arrivals_packets"] == st["departures_packets"] + st["drops_packets"] + st["queued_packets"]


@pytest.mark.parametrize("kind,args", [("infinite", None), ("droptail", "packets=6"), ("drophead", "bytes=4000")])
@pytest.mark.parametrize("vnet", [0, 10])
def test_link_logs_from_the_c_stage_are_the_python_stages(tmp_path, kind, args, vnet):
    """A link with an mm-link log and a per-TTI log keeps the C fast path: the C stage's
    events and rows, handed over in pieces (as the relay's on_log does), make the same log
    lines and the same per-TTI table as the Python stage on the same packets."""
    import pyarrow.parquet as pq

    from airlink.replay.stages import TTILogWriter
    rng = random.Random(kind)
    sizes = [rng.randint(40, 1500) for _ in range(80)]
    packets = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    arrivals = _Times(sorted(rng.randrange(0, 30 * TTI_NS) | 1 for _ in packets))

    def make(name):
        return LinkStage(CAPACITY, Fraction(1, 1000), queue=make_queue(kind, args), start_ns=0,
                         log=LinkLogWriter(tmp_path / f"{name}.log", direction="downlink"),
                         tti_log=TTILogWriter(tmp_path / f"{name}.parquet", wall_start_ns=0))

    py = make("py")
    want = _run_stage(py, packets, arrivals, 60)
    py.close(60 * TTI_NS)
    stage = make("c")
    assert stage.fast_refusal() is None
    c = stage.fast()
    if vnet:
        c.vnet_hdr(vnet)
    ttis = iter(range(60))
    assert _run_stage(c, packets, arrivals, 60, vnet=vnet,
                      every_tti=lambda: next(ttis) % 7 == 6 and stage.drain_fast()) == want
    stage.close(60 * TTI_NS)
    lines = {name: [ln for ln in (tmp_path / f"{name}.log").read_text().splitlines() if not ln.startswith("#")]
             for name in ("py", "c")}
    assert lines["c"] == lines["py"] and any(" - " in ln for ln in lines["py"])
    assert any(" d " in ln for ln in lines["py"]) == (kind != "infinite")
    rows = {name: pq.read_table(tmp_path / f"{name}.parquet").to_pydict() for name in ("py", "c")}
    assert rows["c"] == rows["py"] and len(rows["py"]["tti"]) == 60


# ---------------------------------------------------------------- the workload rule

def _workload_set(rng):
    """A CellReplay trace set with what the rule branches on: trains of 1-60 PDOs (repeats:
    several packets in one millisecond) at uneven or even times, base delays rising and
    falling, a heavy trace with several opportunities in some milliseconds, and a size
    offset (negative for small packets) in one direction only."""
    from decimal import Decimal

    from airlink.traces.cellreplay import CellReplayTraces, Direction, LightTrace, SizeOffset

    def direction(offset, gaps):
        times = np.cumsum([0] + [rng.choice(gaps) for _ in range(11)])
        delays = np.array([rng.randint(2, 30) for _ in times])
        pdos = tuple(np.concatenate([[0], np.cumsum([rng.choice([0, 0, 1, 1, 2, 5]) for _ in range(n - 1)])])
                     .astype(np.int64) for n in (rng.choice([1, 2, 5, 10, 20, 40, 60]) for _ in times))
        heavy = np.cumsum([rng.choice([1, 2]) + rng.choice([0, 0, 0, 3])] +
                          [rng.choice([0, 0, 1, 1, 3]) for _ in range(800)])
        return Direction(heavy.astype(np.int64), LightTrace(times, delays, pdos), offset)

    offset = SizeOffset(tuple(range(100, 1501, 100)), tuple(Decimal(s - 600) / 500 for s in range(100, 1501, 100)))
    # trains 100 ms apart: the nearest longer train is often one of two as near
    return CellReplayTraces(up=direction(None, [100]), down=direction(offset, [3, 40, 120, 250]))


def _workload_arrivals(rng, start):
    """Trains of 1-200 packets of 40-1500 bytes (now and then a 4-9 kB one: a heavy packet
    that spans several opportunities), a few µs to 0.3 ms apart, after idle gaps of 0.2 ms
    to 0.9 s (short ones within the rule's 1 ms resolution, long ones past the light
    trace's loop); a packet's time in ns."""
    t, out = start + 1_234, []
    for train in range(40):
        n = rng.choice([1, 2, 3, 10, 30, 60, 100, 200])
        for _ in range(n):
            t += rng.choice([0, 3_000, 40_000, 120_000, 300_000])
            out.append((t, rng.choice([40, 60, 576, 1000, 1400, 1401, 1500, rng.randint(40, 1500)])
                        if rng.random() > 0.02 else rng.choice([4200, 4201, 9000])))
        t += rng.choice([200_000, 900_000, 1_500_000, 4_000_000, 30_000_000, 200_000_000, 400_000_000, 900_000_000])
    return out


def _run_timed(stage, arrivals, next_event, vnet=0, every=None, until=None):
    """Push each packet at its time and pull whenever the stage has something due (its own
    next event) or a packet arrives, up to ``until`` (ns; None: until it is empty); returns
    [(time, [packets])] of the pulls that gave any. ``every()`` runs after each pull."""
    out, i = [], 0
    while True:
        if every is not None:
            every()
        nxt = next_event()
        t = min(x for x in (nxt, arrivals[i][0] if i < len(arrivals) else None) if x is not None) \
            if nxt is not None or i < len(arrivals) else None
        if t is None or (until is not None and t > until):
            return out
        got = [p[vnet:] for p in stage.pull(t)]
        if got:
            out.append((t, got))
        while i < len(arrivals) and arrivals[i][0] == t:
            stage.push(bytes(vnet) + arrivals[i][1], t)
            i += 1


@pytest.mark.parametrize("idle_ms", [0.0, 3.0])
@pytest.mark.parametrize("vnet,logs", [(0, False), (10, False), (0, True), (10, True)])
def test_workload_rule_in_c_releases_as_the_python_stage(tmp_path, idle_ms, vnet, logs):
    """The workload mode's rule in the C core (lc_workload) against replay/workload.py's
    WorkloadStage, both directions of one trace set, the same packets at the same times:
    every packet leaves at the same nanosecond in the same order, the counters of the rule
    (light and heavy packets, bursts, heavy bytes and opportunities) are the same, and with
    logs (the C stage's events handed over in pieces, as the relay's on_log does, the last
    packets still held when the stages close) the mm-link log lines are the same."""
    from airlink.replay.workload import WorkloadStage
    rng = random.Random(f"workload{idle_ms}{vnet}")
    traces = _workload_set(rng)
    start = 5_000_000_000

    def log(name):
        return LinkLogWriter(tmp_path / name, direction="downlink") if logs else None

    for name in ("down", "up"):
        arrivals = [(t, bytes([i % 256]) * n) for i, (t, n) in enumerate(_workload_arrivals(rng, start))]
        ref = WorkloadStage(getattr(traces, name), start_ns=start, idle_ms=idle_ms, log=log(f"{name}-py.log"))
        stage = WorkloadStage(getattr(traces, name), start_ns=start, idle_ms=idle_ms, log=log(f"{name}-c.log"))
        assert stage.fast_refusal() is None
        c = stage.fast()
        if vnet:
            c.vnet_hdr(vnet)
        # each pulled at its own next events and the arrivals: a release that differs by a
        # nanosecond makes a pull that differs
        # with logs: closed at the last arrival, the last train still held (not logged as
        # departed)
        end = arrivals[-1][0] if logs else None
        want = _run_timed(ref, arrivals, ref.next_event_ns, until=end)
        pulls = iter(range(10**9))
        assert _run_timed(c, arrivals, c.next_event, vnet=vnet, until=end,
                          every=lambda: next(pulls) % 97 == 96 and stage.drain_fast()) == want, name
        held = ref.stats()["queued_packets"]
        if logs:
            ref.close(end)
            stage.close(end)
            lines = {k: [ln for ln in (tmp_path / f"{name}-{k}.log").read_text().splitlines()
                         if not ln.startswith("#")] for k in ("py", "c")}
            assert lines["c"] == lines["py"], name
            ev = [ln.split() for ln in lines["py"]]
            assert sum(e[1] == "+" for e in ev) == len(arrivals) and held > 0
            assert sum(e[1] == "-" for e in ev) == len(arrivals) - held
            assert [float(e[0]) for e in ev] == sorted(float(e[0]) for e in ev)
        py, cs = ref.stats(), c.stats()
        for key in ("arrivals_packets", "arrivals_bytes", "departures_packets", "departures_bytes",
                    "queued_packets", "light_packets", "heavy_packets", "bursts", "heavy_bytes",
                    "heavy_opportunities"):
            assert cs[key] == py[key], (name, key)
        assert py["arrivals_packets"] == py["departures_packets"] + held == len(arrivals)
        assert py["light_packets"] + py["heavy_packets"] == len(arrivals)
        # both services and many idle starts (a train queued behind the heavy FIFO is no burst)
        assert py["light_packets"] > 100 and py["heavy_packets"] > 100 and py["bursts"] >= 10
