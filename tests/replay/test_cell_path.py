"""The cell shell's C packet path (airlink.replay._cellpath) against the Python reference.

The C path keeps its own per-UE queues and byte-granular service; the reference is the
Python one the rest of airlink uses (``replay/queues.py``'s drop-tail/drop-head/infinite
queues and ``replay/server.py``'s ByteServer). Packet sockets (``SOCK_SEQPACKET``) stand in
for the TUN devices - one packet per read and write, as a TUN device - so no root is
needed. The same random packets (some to no UE) and budgets go through both; every row the
C path fills, every packet each UE receives and the final counters must be the same.
"""
from __future__ import annotations

import array
import fcntl
import ipaddress
import os
import random
import socket
import termios
import threading
import time

import numpy as np
import pytest
from tests.cext import c_extension

from airlink.replay.cell_pypath import PyCellPath
from airlink.replay.queues import make_queue
from airlink.replay.server import EV_ARRIVAL, EV_DEPARTURE, EV_DROP, EVENT, ByteServer

cp = c_extension("airlink.replay._cellpath", module_level=True)

BLOCK = ipaddress.ip_network("100.64.0.0/24")
N = 3
SHIFT = 6                     # parts of 64 addresses: UE i (1-based) owns part i


def _packet(rng, dst: int, size: int) -> bytes:
    body = bytes(rng.getrandbits(8) for _ in range(size - 20))
    return bytes([0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]) + dst.to_bytes(4, "big") + body


def _drain(sock) -> list:
    out = []
    while True:
        try:
            out.append(sock.recv(70000))
        except BlockingIOError:
            return out


def _drain_at_least(sock, n: int, timeout_s: float = 10.0) -> list:
    """What sock holds once n packets came (a writer thread writes them a little later), or
    what came by the timeout; then whatever else is there at once."""
    out, end = [], time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < end:
        got = _drain(sock)
        out += got
        if not got:
            time.sleep(0.0005)
    return out + _drain(sock)


class _Reference:
    """The Python cell: classification, queues.py's queue, ByteServer per UE."""

    def __init__(self, kind, args):
        self.q = [make_queue(kind, args) for _ in range(N)]
        self.srv = [ByteServer() for _ in range(N)]
        self.arr = [0] * N
        self.seen = [(0, 0, 0)] * N
        self.unroutable = 0
        self.events = [[] for _ in range(N)]      # (kind, len, x) as the C path logs them

    def arrive(self, p):
        dst = int.from_bytes(p[16:20], "big")
        u = ((dst - int(BLOCK.network_address)) >> SHIFT) - 1
        if dst & int(BLOCK.netmask) != int(BLOCK.network_address) or not 0 <= u < N:
            self.unroutable += 1
            return
        self.arr[u] += len(p)
        q = self.q[u]
        before = q.drops_packets, q.drops_bytes
        q.enqueue(p, 0)
        self.events[u].append((0, len(p), 0))
        if q.drops_packets > before[0]:
            self.events[u].append((1, q.drops_packets - before[0], q.drops_bytes - before[1]))

    def serve(self, budgets):
        sent, row = [], []
        for u in range(N):
            deps = []
            self.srv[u].serve(self.q[u], int(budgets[u]), 0, deps)
            sent.append([d[0] for d in deps])
            if budgets[u] > 0:
                self.events[u] += [(2, 0, int(budgets[u]))] + [(3, len(d[0]), None) for d in deps]
            b, n = self.srv[u].backlog(self.q[u])
            q = self.q[u]
            a0, p0, b0 = self.seen[u]
            row.append((b, n, self.arr[u] - a0, q.drops_packets - p0, q.drops_bytes - b0))
            self.seen[u] = (self.arr[u], q.drops_packets, q.drops_bytes)
        return sent, row


@pytest.mark.parametrize("kind,args", [("droptail", {"packets": 5}), ("droptail", {"bytes": 6000}),
                                       ("drophead", {"packets": 4}), ("drophead", {"bytes": 5000, "packets": 9}),
                                       ("infinite", None)])
@pytest.mark.parametrize("impl", ["c", "c-writer", "python"])
def test_c_path_moves_packets_as_the_python_queues_and_server(kind, args, impl):
    """... and so does its Python twin (replay/cell_pypath.py), which the cell runs without the
    C module, and the C path with its writer thread (the same packets, a little later)."""
    rng = random.Random(f"{kind}{args}")
    outer_shell, outer_test = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    inner = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(N)]
    socks = [outer_shell, outer_test, *(s for pair in inner for s in pair)]
    try:
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.setblocking(False)
        q0 = make_queue(kind, args)
        if impl != "python":
            cell = cp.Cell(outer_shell.fileno(), [p[0].fileno() for p in inner], int(BLOCK.network_address),
                           int(BLOCK.netmask), SHIFT, {"infinite": 0, "droptail": 1, "drophead": 2}[kind],
                           getattr(q0, "packets", 0), getattr(q0, "bytes", 0), log=True,
                           writer=impl == "c-writer")
            assert cell.writer == (impl == "c-writer")
        else:
            cell = PyCellPath(outer_shell.fileno(), [p[0].fileno() for p in inner], int(BLOCK.network_address),
                              int(BLOCK.netmask), SHIFT, [make_queue(kind, args) for _ in range(N)], log=True)
        ref = _Reference(kind, args)
        rows = {name: np.zeros(N, dtype) for name, dtype in (("bb", np.float64), ("bp", np.int64),
                                                             ("arr", np.float64), ("dp", np.int64),
                                                             ("db", np.int64), ("mp", np.int64))}
        base = int(BLOCK.network_address)
        for step in range(60):
            for _ in range(rng.randrange(0, 12)):
                u = rng.randrange(0, N + 1)          # N: an address of no UE (part 0 or beyond)
                dst = base + (rng.choice([1, 200]) if u == N else (u + 1) * 64 + 2)
                p = _packet(rng, dst, rng.randrange(20, 1500))
                outer_test.send(p)
                ref.arrive(p)
            # uplink: a UE's packets leave unchanged
            ups = []
            for u in range(N):
                if rng.random() < 0.3:
                    p = _packet(rng, base + 1, rng.randrange(40, 200))
                    inner[u][1].send(p)
                    ups.append(p)
            # long enough to read every packet on a busy machine (a wait reads none after its deadline)
            assert cell.wait(time.monotonic_ns() + 10_000_000, []) == -1
            assert sorted(_drain_at_least(outer_test, len(ups))) == sorted(ups)
            budgets = np.array([rng.choice([0, 0, 1, 700, 1499, 1500, 4000]) for _ in range(N)], np.int64)
            t_end = time.monotonic_ns()
            cell.serve(budgets, rows["bb"], rows["bp"], rows["arr"], rows["dp"], rows["db"], rows["mp"], t_end)
            sent, want = ref.serve(budgets)
            # the log's events: the reference's, opportunities and departures at the TTI's end,
            # each departure carrying its packet's arrival time (before the end)
            for u, raw in enumerate(cell.take_events()):
                ev = np.frombuffer(raw, [("t", "<i8"), ("x", "<i8"), ("kind", "<i4"), ("len", "<i4")])
                want_ev, ref.events[u] = ref.events[u], []
                assert [(k, n, x if k != 3 else None) for t, x, k, n in ev.tolist()] == want_ev, (step, u)
                served = ev[ev["kind"] >= 2]
                assert (served["t"] == t_end).all() and (served["x"][served["kind"] == 3] < t_end).all()
            for u in range(N):
                assert _drain_at_least(inner[u][1], len(sent[u])) == sent[u], (step, u)
                got = (rows["bb"][u], rows["bp"][u], rows["arr"][u], rows["dp"][u], rows["db"][u])
                assert got == want[u], (step, u)
        assert cell.unroutable == ref.unroutable > 0
        for u in range(N):
            st = cell.ue_stats(u)
            b, n = ref.srv[u].backlog(ref.q[u])
            assert (st["queued_bytes"], st["queued_packets"]) == (b, n)
            assert (st["drops_packets"], st["drops_bytes"]) == (ref.q[u].drops_packets, ref.q[u].drops_bytes)
            assert st["arrivals_bytes"] == ref.arr[u]
            assert st["arrivals_packets"] == st["departures_packets"] + st["drops_packets"] + st["queued_packets"]
        if kind != "infinite":
            assert sum(cell.ue_stats(u)["drops_packets"] for u in range(N)) > 0
    finally:
        for s in socks:
            s.close()


def test_the_writer_thread_writes_every_packet_in_order_across_the_ring_and_before_close_returns():
    """The writer's ring (4 MB of records) goes round more than once: a UE's served packets of
    random sizes reach it in the order they came, none lost, none failed; the writes still
    queued when close() is called are all done when it returns."""
    rng = random.Random(28)
    outer_shell, outer_test = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue_cell, ue_test = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    socks = (outer_shell, outer_test, ue_cell, ue_test)
    try:
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 21)
            s.setblocking(False)
        cell = cp.Cell(outer_shell.fileno(), [ue_cell.fileno()], int(BLOCK.network_address), int(BLOCK.netmask),
                       SHIFT, 0, 0, 0, writer=True)
        row = [np.zeros(1, t) for t in (np.float64, np.int64, np.float64, np.int64, np.int64, np.int64)]
        sent, got = [], []
        ue1 = int(BLOCK.network_address) + 64 + 2
        while sum(map(len, sent)) < 9 << 20:
            batch = [_packet(rng, ue1, rng.randrange(900, 1500)) for _ in range(100)]
            for p in batch:
                outer_test.send(p)
            sent += batch
            assert cell.wait(time.monotonic_ns() + 20_000_000, []) == -1
            cell.serve(np.array([sum(map(len, batch))], np.int64), *row)
            assert row[0][0] == 0                # all served
            got += _drain(ue_test)
        cell.close()                             # the last writes are done when it returns
        assert cell.writer == 0
        got += _drain(ue_test)
        assert cell.writes_queued == len(sent) and cell.write_errors == 0
        assert len(got) == len(sent) and got == sent
        assert cell.ue_stats(0)["departures_bytes"] == sum(map(len, sent))
    finally:
        for s in socks:
            s.close()


def test_wait_returns_the_index_of_an_ended_process_and_rejects_bad_rows():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue, ue_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r1, w1 = socket.socketpair()
    r2, w2 = socket.socketpair()
    try:
        cell = cp.Cell(a.fileno(), [ue.fileno()], int(BLOCK.network_address), int(BLOCK.netmask), SHIFT, 0, 0, 0)
        w2.send(b"x")                    # the second "pidfd" is readable
        assert cell.wait(time.monotonic_ns() + 1_000_000_000, [r1.fileno(), r2.fileno()]) == 1
        t0 = time.monotonic_ns()
        assert cell.wait(t0 + 2_000_000, [r1.fileno()]) == -1
        assert time.monotonic_ns() >= t0 + 2_000_000
        with pytest.raises(ValueError, match="budgets"):
            cell.serve(np.zeros(2, np.int64), *(np.zeros(1) for _ in range(6)))
        with pytest.raises(ValueError, match="backlog"):
            cell.backlog(np.zeros(1, np.int64))
    finally:
        for s in (a, b, ue, ue_peer, r1, w1, r2, w2):
            s.close()


def _uplink_model(cap_per_tti: float, ttis: int, sizes: list) -> tuple:
    """What a byte-granular server with a fractional per-TTI capacity sends of a FIFO of
    ``sizes`` queued before TTI 0: ``(budgets, departed sizes, bytes still queued)``.
    TTI k's budget is floor(carry + capacity); the fraction carries on (as
    replay/server.py's TraceServer); a packet leaves with its last byte."""
    carry, budgets = 0.0, []
    for _ in range(ttis):
        total = carry + cap_per_tti
        b = int(total // 1)
        carry = total - b
        budgets.append(b)
    served, done, cum = sum(budgets), [], 0
    for size in sizes:
        if cum + size > served:
            break
        cum += size
        done.append(size)
    return budgets, done, sum(sizes) - min(served, sum(sizes))


@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_constrained_uplink_is_served_byte_granularly_at_its_ttis_ends(impl):
    """set_uplink: a UE's packets queue and leave at the ends of the uplink's own TTIs,
    byte-granular, with the fraction of a byte carried (700.5 bytes per 1 ms TTI), exactly
    as the model above; the rest stays queued; the counters add up."""
    outer_shell, outer_cell = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue_cell, ue_app = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for x in (outer_shell, outer_cell, ue_cell, ue_app):
        x.setblocking(False)
    rng = random.Random(7)
    sizes = [rng.randint(200, 1400) for _ in range(30)]
    packets = [bytes([i]) * n for i, n in enumerate(sizes)]
    try:
        cell = cp.Cell(outer_cell.fileno(), [ue_cell.fileno()], int(BLOCK.network_address), int(BLOCK.netmask),
                       SHIFT, 0, 0, 0) if impl == "c" else \
            PyCellPath(outer_cell.fileno(), [ue_cell.fileno()], int(BLOCK.network_address), int(BLOCK.netmask),
                       SHIFT, [make_queue("infinite")])
        start = time.monotonic_ns() + 300_000_000            # TTI 0 starts well after the packets came
        cell.set_uplink(0, np.array([700.5]), 1_000_000, 1, start)
        for p in packets:
            ue_app.send(p)
        assert cell.wait(time.monotonic_ns() + 5_000_000, []) == -1
        st = cell.ue_stats(0)["uplink"]
        assert st["ttis"] == 0 and st["queued_packets"] == 30 and st["arrivals_bytes"] == sum(sizes), \
            "the packets were read before the uplink's TTI 0 began"
        assert _drain(outer_shell) == []
        while time.monotonic_ns() < start + 12_500_000:
            cell.wait(start + 12_500_000, [])
        st = cell.ue_stats(0)["uplink"]
        budgets, done, left = _uplink_model(700.5, st["ttis"], sizes)
        assert st["ttis"] >= 12
        assert st["capacity_bytes"] == sum(budgets)
        assert _drain(outer_shell) == packets[:len(done)]
        assert (st["departures_packets"], st["departures_bytes"]) == (len(done), sum(done))
        assert st["queued_bytes"] == left and st["drops_packets"] == 0
        assert st["arrivals_packets"] == st["departures_packets"] + st["queued_packets"]
        with pytest.raises(ValueError, match="TTI"):
            cell.set_uplink(0, np.array([1.0]), 0, 1, start)
        with pytest.raises(IndexError):
            cell.set_uplink(1, np.array([1.0]), 1, 1, start)
    finally:
        for x in (outer_shell, outer_cell, ue_cell, ue_app):
            x.close()


@pytest.mark.parametrize("impl", ["c", "python"])
def test_the_slotted_uplink_leaves_at_serve_before_the_downlink_and_a_constrained_one_as_it_comes(impl):
    """set_uplink_slots(True): what a UE sends between two TTIs is not forwarded while the
    loop waits, and all of it (in order per UE, more than a wait's batch of 64) goes out when
    the TTI is served; a packet the UE sends after that waits for the next TTI. UE 3's
    constrained uplink (one whole packet per TTI of a grid that began long ago) is still read
    as its packets come. Off again, a waiting packet goes out at the next wait."""
    base = int(BLOCK.network_address)
    outer_cell, outer_test = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    inner = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(N)]
    socks = [outer_cell, outer_test, *(s for pair in inner for s in pair)]
    rng = random.Random(11)
    try:
        for x in socks:
            x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            x.setblocking(False)
        fds = [p[0].fileno() for p in inner]
        cell = cp.Cell(outer_cell.fileno(), fds, base, int(BLOCK.netmask), SHIFT, 0, 0, 0) if impl == "c" else \
            PyCellPath(outer_cell.fileno(), fds, base, int(BLOCK.netmask), SHIFT,
                       [make_queue("infinite") for _ in range(N)])
        cell.set_uplink(N - 1, np.array([1500.0]), 1_000_000, 1, time.monotonic_ns() - 10**9)
        cell.set_uplink_slots(True)
        rows = [np.zeros(N, t) for t in (np.float64, np.int64, np.float64, np.int64, np.int64, np.int64)]
        none = np.zeros(N, np.int64)
        for tti in range(3):
            ups = [[_packet(rng, base + 1, rng.randrange(40, 1400)) for _ in range(count)]
                   for count in (100, rng.randrange(0, 5))]
            for u, batch in enumerate(ups):
                for p in batch:
                    inner[u][1].send(p)
            constrained = _packet(rng, base + 1, 1000)
            inner[N - 1][1].send(constrained)
            assert cell.wait(time.monotonic_ns() + 20_000_000, []) == -1
            assert _drain(outer_test) == [constrained], tti      # the constrained UE's, served at its TTI's end
            assert all(_unread_bytes(inner[u][0]) for u in range(2) if ups[u])
            cell.serve(none, *rows, time.monotonic_ns())
            got = _drain(outer_test)
            assert sorted(got) == sorted(ups[0] + ups[1])
            for u in range(2):
                assert [p for p in got if p in ups[u]] == ups[u]
            assert cell.ue_stats(0)["uplink"]["departures_packets"] == 100 * (tti + 1)
        late = _packet(rng, base + 1, 300)
        inner[1][1].send(late)
        assert cell.wait(time.monotonic_ns() + 2_000_000, []) == -1
        assert _drain(outer_test) == []
        cell.set_uplink_slots(False)
        assert cell.wait(time.monotonic_ns() + 2_000_000, []) == -1
        assert _drain(outer_test) == [late]
        st = [cell.ue_stats(u)["uplink"] for u in range(N)]
        assert st[0]["arrivals_packets"] == st[0]["departures_packets"] == 300
        assert st[N - 1]["departures_packets"] == 3 and st[N - 1]["queued_packets"] == 0
    finally:
        for x in socks:
            x.close()


def _cpus_usable() -> list:
    return sorted(os.sched_getaffinity(0))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a real-time CPU hog stands in for a stalled CPU)")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs (a rescuer moves the loop to another)")
def _until_in_epoll(tid: int, timeout: float = 10.0) -> None:
    """Return once thread ``tid`` of this process sleeps in the kernel's epoll wait (its
    ``wchan``; 0 while it runs), after ``timeout`` at most; after 50 ms where the kernel has
    no ``wchan`` file."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/self/task/{tid}/wchan") as f:
                if "epoll" in f.read():
                    return
        except OSError:
            time.sleep(0.05)
            return
        time.sleep(0.002)


def test_a_rescuer_moves_a_loop_whose_cpu_runs_something_else_and_the_loop_takes_its_cpus_back():
    """The loop waits on CPU ``a`` while a real-time busy loop holds ``a`` (as a stalled CPU
    would): the loop cannot run there before the hog ends, so only a rescuer (on another
    CPU) moving it lets wait() return while the hog still spins; afterwards the loop's CPU
    set is the one it had when the Cell was made (the test pinned it to ``a`` after)."""
    import subprocess
    import sys
    import threading
    cpus = _cpus_usable()
    a, b = cpus[0], cpus[1]
    mine = os.sched_getaffinity(0)
    s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # the hog: SCHED_FIFO on CPU a; spins (for far longer than the test needs) once told
    code = ("import os, sys, time\n"
            f"os.sched_setaffinity(0, {{{a}}})\n"
            "try:\n"
            "    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))\n"
            "except OSError as e:\n"
            "    sys.stdout.write(f'no-rt {e}\\n'); sys.exit()\n"
            "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
            "sys.stdin.readline()\n"
            "end = time.monotonic() + 3\n"
            "while time.monotonic() < end:\n"
            "    pass\n")
    hog = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    loop_tid = threading.get_native_id()

    def start_spinning():
        os.sched_setaffinity(0, {b})
        _until_in_epoll(loop_tid)               # the loop is asleep in wait()
        hog.stdin.write("spin\n")
        hog.stdin.flush()
    try:
        said = hog.stdout.readline()
        if said.startswith("no-rt"):
            pytest.skip(f"the real-time policy is not permitted here ({said[6:].strip()})")
        assert said == "ready\n"
        cell = cp.Cell(s[0].fileno(), [ue[0].fileno()], int(BLOCK.network_address), int(BLOCK.netmask), SHIFT,
                       0, 0, 0, rescue_ns=5_000_000)
        os.sched_setaffinity(0, {a})
        starter = threading.Thread(target=start_spinning)
        starter.start()
        assert cell.wait(time.monotonic_ns() + 300_000_000, []) == -1
        assert hog.poll() is None, "wait() returned only after the hog ended: no rescue"
        assert cell.rescues >= 1
        assert os.sched_getaffinity(0) == mine, "the loop has the CPU set it had when the Cell was made"
        starter.join()
        cell.close()
    finally:
        os.sched_setaffinity(0, mine)
        hog.kill()
        hog.wait()
        for p in (s, ue):
            for x in p:
                x.close()


def test_without_rescue_ns_no_thread_is_started_and_close_stops_the_rescuers():
    s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def threads():
        return len(os.listdir("/proc/self/task"))
    try:
        before = threads()
        cell = cp.Cell(s[0].fileno(), [ue[0].fileno()], int(BLOCK.network_address), int(BLOCK.netmask), SHIFT, 0, 0, 0)
        assert threads() == before and cell.rescues == 0
        if len(_cpus_usable()) >= 2:
            cell2 = cp.Cell(s[0].fileno(), [ue[0].fileno()], int(BLOCK.network_address), int(BLOCK.netmask),
                            SHIFT, 0, 0, 0, rescue_ns=1_000_000)
            assert threads() == before + 2
            assert cell2.wait(time.monotonic_ns() + 2_000_000, []) == -1
            cell2.close()
            # close() joins the rescuers; pthread_join returns when a thread clears its tid,
            # a moment before the kernel removes its task from /proc/self/task
            for _ in range(200):
                if threads() == before:
                    break
                time.sleep(0.005)
            assert threads() == before
            cell2.close()                       # twice is fine
    finally:
        for p in (s, ue):
            for x in p:
                x.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs (one rescuer per CPU)")
def test_the_rescuer_on_the_loops_cpu_stands_by():
    """A rescuer pinned to the CPU the loop waits on could not run if that CPU stalled: over
    200 waits of 1 ms by a loop held on CPU ``a`` it wakes a few times (standing by: once
    every 8 TTIs, and when told to look again), the one on the other CPU about once per
    wait (counted as the threads' voluntary context switches)."""
    s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ue = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mask = os.sched_getaffinity(0)
    a = _cpus_usable()[0]

    def switches():
        """voluntary context switches of this process's threads pinned to one CPU, by CPU"""
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/status") as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            cpus = st["Cpus_allowed_list"].strip()
            if cpus.isdigit() and int(tid) != threading.get_native_id():
                out[int(cpus)] = int(st["voluntary_ctxt_switches"])
        return out
    try:
        for _attempt in range(5):
            cell = cp.Cell(s[0].fileno(), [ue[0].fileno()], int(BLOCK.network_address), int(BLOCK.netmask),
                           SHIFT, 0, 0, 0, rescue_ns=300_000)
            os.sched_setaffinity(0, {a})
            assert cell.wait(time.monotonic_ns() + 5_000_000, []) == -1
            before = switches()
            for _ in range(200):
                assert cell.wait(time.monotonic_ns() + 1_000_000, []) == -1
            after = switches()
            cell.close()
            os.sched_setaffinity(0, mask)
            # a rescue (a wait that ended late on a busy machine) gives the loop both CPUs
            # back: then it no longer stayed on a, and the count says nothing
            if cell.rescues == 0:
                break
        else:
            pytest.skip("the loop was late (rescued) in every attempt: the machine is too busy")
        woke = {cpu: after[cpu] - before[cpu] for cpu in before}
        assert len(woke) == 2, woke
        b = next(cpu for cpu in woke if cpu != a)
        assert woke[a] <= 200 // 8 + 3 and woke[b] >= 2 * woke[a] + 10, woke
    finally:
        os.sched_setaffinity(0, mask)
        for p in (s, ue):
            for x in p:
                x.close()


def _unread_bytes(sock) -> int:
    """Bytes queued on a SOCK_SEQPACKET socket that its reader has not read yet (SIOCINQ
    sums the whole receive queue for Unix stream and seqpacket sockets)."""
    buf = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf)
    return buf[0]


@pytest.mark.parametrize("backlogs", ["full", "live"])
def test_the_compiled_step_called_from_c_decides_as_the_python_step(backlogs):
    """2,000 TTIs of a PF cell of three UEs, decided in C by the compiled step (``Cell.run``)
    and in Python (``decide_and_serve``: Radio.step, the carry rule, ``Cell.serve``) on two
    C packet paths fed the same packets: the same decisions (every output of the step), the
    same live columns, carries, radio state and log events, and the same packets to every
    UE. ``full``:
    queues that never run dry; ``live``: a few packets now and then into drop-head queues of
    four packets, so UEs come and go and queues drop bytes the scheduler had sent, and uplink
    packets, slotted on both paths: those sent before a segment of TTIs leave, all of them,
    when its first TTI is decided."""
    from airlink.replay.cell import decide_and_serve
    from airlink.replay.cell_radio import LIVE_ARRAYS
    from airlink.sim import kernel
    from airlink.sim.engine import make_scheduler, resolve_config
    from airlink.sim.step import Radio
    if not kernel.COMPILED:
        pytest.skip("numba is not installed: there is no compiled step")
    n_tti, segment = 2000, 50
    cfg = resolve_config("quick", {"n_users": N, "scheduler": "pf", "bandwidth_hz": 1.08e6})
    cfg["seed"] = 5
    radios = [Radio(cfg, make_scheduler("pf", cfg), n_users=N, n_subchannels=cfg["n_subchannels"], n_tti=n_tti,
                    live=True) for _ in range(2)]
    kind, limit = ("infinite", 0) if backlogs == "full" else ("drophead", 4)
    rng = random.Random(backlogs)
    base = int(BLOCK.network_address)
    sockets = []
    try:
        cells, apps, outer_cells = [], [], []
        for _ in range(2):
            outer_cell, outer_test = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            outer_cells.append(outer_cell)
            inner = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(N)]
            sockets += [outer_cell, outer_test, *(s for pair in inner for s in pair)]
            for s in sockets:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
                s.setblocking(False)
            cells.append(cp.Cell(outer_cell.fileno(), [p[0].fileno() for p in inner], base, int(BLOCK.netmask),
                                 SHIFT, {"infinite": 0, "drophead": 2}[kind], limit, 0, log=True))
            cells[-1].set_uplink_slots(backlogs == "live")
            apps.append((outer_test, [p[1] for p in inner]))
        carries = [np.zeros(N), np.zeros(N)]
        # TTI k of the compiled step ends 1 ms x (k + 1) after a start 10 s ago: every TTI is
        # due at once, so run() decides them without reading a packet in between
        start = time.monotonic_ns() - 10**10
        cells[1].set_step(kernel.live_step_address(), carries[1], start, 1_000_000, 1, 10**12)
        seen_empty = events = 0
        for k0 in range(0, n_tti, radios[0].chunk):
            n = min(radios[0].chunk, n_tti - k0)
            inps = [r.inputs(k0, n) for r in radios]
            outs = [r.new_outputs(n) for r in radios]
            lives = [{name: np.zeros((n, N), dtype) for name, dtype in LIVE_ARRAYS} for _ in range(2)]
            _addr, block = radios[1].live_step(inps[1], outs[1], lives[1]["backlog_seen_bytes"])
            cells[1].set_chunk(block, k0, outs[1]["served"], *(lives[1][name] for name, _ in LIVE_ARRAYS))
            for s0 in range(k0, k0 + n, segment):
                s1 = min(s0 + segment, k0 + n)
                packets = []
                for u in range(N):
                    count = (40 if s0 == 0 else 20) if backlogs == "full" else rng.choice([0, 0, 0, 1, 2, 5])
                    packets += [_packet(rng, base + (u + 1) * 64 + 2, rng.randrange(200, 1500))
                                for _ in range(count)]
                ups = [(u, _packet(rng, base + 1, rng.randrange(40, 200)))
                       for u in range(N) for _ in range(rng.choice([0, 1, 3]) if backlogs == "live" else 0)]
                for cell, outer_cell, (outer_test, ue_apps) in zip(cells, outer_cells, apps):
                    for p in packets:
                        outer_test.send(p)
                    for u, p in ups:
                        ue_apps[u].send(p)
                    # every packet read before the TTIs are decided, on both paths (a wait
                    # can end before the cell has read them all on a busy machine)
                    while True:
                        assert cell.wait(time.monotonic_ns() + 10_000_000, []) == -1
                        if _unread_bytes(outer_cell) == 0:
                            break
                for k in range(s0, s1):
                    decide_and_serve(cells[0], radios[0], inps[0], k - k0, outs[0], lives[0], carries[0],
                                     start + (k + 1) * 1_000_000)
                assert cells[1].run(s0, s1, 2**62, []) == (s1, -1)
                want_up = sorted(p for _u, p in ups)
                for outer_test, _ in apps:
                    assert sorted(_drain(outer_test)) == want_up, s0
                for u in range(N):
                    assert _drain(apps[0][1][u]) == _drain(apps[1][1][u]), (s0, u)
                # the log's events (what the Mahimahi-format logs are written from): the same,
                # but for the times packets were read (arrivals, the drops they caused, and
                # departures' arrival times)
                for a, b in zip(cells[0].take_events(), cells[1].take_events()):
                    ea, eb = (np.frombuffer(raw, EVENT).copy() for raw in (a, b))
                    for e in (ea, eb):
                        e["t"][(e["kind"] == EV_ARRIVAL) | (e["kind"] == EV_DROP)] = 0
                        e["x"][e["kind"] == EV_DEPARTURE] = 0
                    assert np.array_equal(ea, eb), s0
                    events += len(ea)
            for name in outs[0]:
                assert np.array_equal(outs[0][name], outs[1][name]), (k0, name)
            for name, _ in LIVE_ARRAYS:
                if name not in ("late", "lateness_us"):
                    assert np.array_equal(lives[0][name], lives[1][name]), (k0, name)
            seen_empty += int((lives[0]["backlog_seen_bytes"] == 0).sum())
            assert outs[0]["served"].sum() > 0
        assert np.array_equal(carries[0], carries[1])
        for name in radios[0].state:
            assert np.array_equal(radios[0].state[name], radios[1].state[name]), name
        assert cells[1].ttis == n_tti and cells[1].late_ttis == 0 and events > 1000
        # the precondition of each case
        assert (seen_empty == 0) if backlogs == "full" else (seen_empty > n_tti // 4), seen_empty
        if backlogs == "live":
            assert sum(cells[0].ue_stats(u)["drops_packets"] for u in range(N)) > 0
    finally:
        for s in sockets:
            s.close()


@pytest.mark.parametrize("kind,args", [("droptail", {"packets": 30}), ("droptail", {"bytes": 50000}),
                                       ("drophead", {"packets": 25}), ("infinite", None)])
def test_super_packets_are_served_as_their_segments(kind, args):
    """Offload mode (``vnet=10``): the C path given TCP super-packets (a virtio_net_hdr in
    front, as TUN devices with offloads hand them over) serves each UE exactly as the
    Python reference path given the same traffic as the kernel would have segmented it
    (scapy, tests/replay/test_replay_offload.py): per TTI the same rows (backlog bytes and
    packets, arrivals, drops), the same segments out of every queue once the pieces are
    segmented, the same logged arrivals and departures; a queue limit in packets counts
    segments. A UE's uplink super-packets leave whole, counted as their segments."""
    offload = pytest.importorskip("tests.replay.test_replay_offload", reason="scapy not installed")
    rng = random.Random(f"gso{kind}{args}")
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(2 * (N + 1))]
    try:
        for pair in pairs:
            for s in pair:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
                s.setblocking(False)
        (c_outer, c_outer_test), *c_inner = pairs[:N + 1]
        (p_outer, p_outer_test), *p_inner = pairs[N + 1:]
        base = int(BLOCK.network_address)
        q0 = make_queue(kind, args)
        cell = cp.Cell(c_outer.fileno(), [p[0].fileno() for p in c_inner], base, int(BLOCK.netmask), SHIFT,
                       {"infinite": 0, "droptail": 1, "drophead": 2}[kind], getattr(q0, "packets", 0),
                       getattr(q0, "bytes", 0), log=True, vnet=10)
        ref = PyCellPath(p_outer.fileno(), [p[0].fileno() for p in p_inner], base, int(BLOCK.netmask), SHIFT,
                         [make_queue(kind, args) for _ in range(N)], log=True)
        seq = [1000] * N
        rows = [{name: np.zeros(N, dtype) for name, dtype in (("bb", np.float64), ("bp", np.int64),
                                                              ("arr", np.float64), ("dp", np.int64),
                                                              ("db", np.int64), ("mp", np.int64))}
                for _ in range(2)]
        cuts, received = 0, [0] * N
        for step in range(25):
            for _ in range(rng.randrange(0, 4)):
                u = rng.randrange(N)
                size = rng.choice([500, 1448, 2896, 20000, 20000, 63712])
                dst = str(ipaddress.ip_address(base + (u + 1) * 64 + 2))
                p = offload.super_packet(size, seq=seq[u], ip_id=rng.randrange(65536), dst=dst)
                seq[u] += size
                c_outer_test.send(p)
                for segment in offload.reference_segments(p):
                    p_outer_test.send(segment)
            ups = []
            for u in range(N):
                if rng.random() < 0.3:
                    src = str(ipaddress.ip_address(base + (u + 1) * 64 + 2))
                    p = offload.super_packet(rng.choice([100, 5000]), src=src, dst="100.64.0.1")
                    c_inner[u][1].send(p)
                    for segment in offload.reference_segments(p):
                        p_inner[u][1].send(segment)
                    ups.append(p)
            for path, outer, inner in ((cell, c_outer, c_inner), (ref, p_outer, p_inner)):
                # until it has read every packet sent (a wait reads none after its deadline)
                while _unread_bytes(outer) or any(_unread_bytes(i[0]) for i in inner):
                    assert path.wait(time.monotonic_ns() + 10_000_000, []) == -1
            assert sorted(_drain(c_outer_test)) == sorted(ups)    # whole, header and all
            assert _drain(p_outer_test) == [s for p in ups for s in offload.reference_segments(p)]
            budgets = np.array([rng.choice([0, 1, 700, 1499, 1500, 4000, 20000, 70000]) for _ in range(N)],
                               np.int64)
            t_end = time.monotonic_ns()
            for path, r in zip((cell, ref), rows):
                path.serve(budgets, r["bb"], r["bp"], r["arr"], r["dp"], r["db"], r["mp"], t_end)
            for name in rows[0]:
                assert rows[0][name].tolist() == rows[1][name].tolist(), (step, name)
            for u in range(N):
                got = _drain(c_inner[u][1])
                cuts += sum(1 for p in got if p[1])               # a GSO type: a piece of several segments
                segments = [s for p in got for s in offload.reference_segments(p)]
                assert segments == _drain(p_inner[u][1]), (step, u)
                received[u] += sum(map(len, segments))
            for u, (raw_c, raw_p) in enumerate(zip(cell.take_events(), ref.take_events())):
                ev_c, ev_p = np.frombuffer(raw_c, EVENT), np.frombuffer(raw_p, EVENT)
                for k in (EV_ARRIVAL, EV_DEPARTURE):
                    assert ev_c["len"][ev_c["kind"] == k].tolist() == ev_p["len"][ev_p["kind"] == k].tolist()
                for col in ("len", "x"):
                    assert ev_c[col][ev_c["kind"] == EV_DROP].sum() == ev_p[col][ev_p["kind"] == EV_DROP].sum()
        assert cuts > 0, "no budget ended inside a super-packet"
        for u in range(N):
            st, want = cell.ue_stats(u), ref.ue_stats(u)
            assert st.pop("superpackets") > 0 and st.pop("pieces_cut") > 0
            assert st == want
            assert st["arrivals_packets"] == st["departures_packets"] + st["drops_packets"] + st["queued_packets"]
            # the bytes of a segment in service that were served are in neither
            assert 0 <= st["arrivals_bytes"] - (st["departures_bytes"] + st["drops_bytes"] + st["queued_bytes"]) \
                < 1500
            assert st["departures_bytes"] == received[u]
        if kind != "infinite":
            assert sum(cell.ue_stats(u)["drops_packets"] for u in range(N)) > 0
    finally:
        for pair in pairs:
            for s in pair:
                s.close()
