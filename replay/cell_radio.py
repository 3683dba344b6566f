"""The cell shell's radio inputs and MAC log, made in a separate process.

The inputs of a TTI that do not depend on the queues (the channel of every UE and
subchannel, the reported SINR after the CSI delay, block-error and tie-breaking draws:
:meth:`airlink.sim.step.Radio.inputs`) cost 0.1-0.5 CPU-seconds per second of run for 10 UEs
x 400 subchannels, and writing the MAC log costs more; in a thread of the shell both held
the GIL that the TTI loop needs at every TTI's end. :class:`RadioFeed` forks one process
(before any namespace or TUN device exists) that owns a copy of the fresh
:class:`~airlink.sim.step.Radio` and makes the chunks of inputs in order - the same code,
seed and chunks as ``airlink simulate``, so the same numbers - into a ring of slots in
shared memory (an anonymous ``MAP_SHARED`` mapping: nothing named to clean up). Each slot
also holds the chunk's outputs (what :meth:`~airlink.sim.step.Radio.step` writes) and the
live columns, which the process turns into the MAC log's rows once the shell has finished
the chunk; then it refills the slot with the next chunk's inputs.

Protocol (pickled messages over a ``SOCK_SEQPACKET`` socket pair, all in order):
shell -> process ``("fill", slot, k0, n)``, ``("done", slot, rows, k0, wall_start_ns)`` (the
shell wrote ``rows`` rows of the slot: MAC log rows),
``("close",)``; process -> shell ``("ready", slot, k0, n)``, ``("closed", cpu_s)``,
``("error", message)``. The process dies with the shell (``PR_SET_PDEATHSIG``), ignores
Ctrl-C (the shell forwards it to the UEs and ends the run itself) and ends when its socket
closes. It keeps the normal priority (a lower one starved it on a busy machine, and the loop
then waited for inputs); the TTI loop, at niceness -10 or real-time, preempts it anyway.
With ``--realtime`` the shell puts it under the real-time policy too, below the loop.
"""
from __future__ import annotations

import mmap
import os
import pickle
import resource
import signal
import socket
import time
from collections import deque

import numpy as np

from airlink.sim.step import OUTPUTS, ChunkInputs
from airlink.core.errors import AirlinkError

#: per-TTI live columns of the cell (after the simulator's outputs) and their types; the C
#: loop's set_chunk (replay/_cellpath.c) takes them in this order
LIVE_ARRAYS = (("backlog_bytes", np.float64), ("backlog_packets", np.int64), ("arrivals_bytes", np.float64),
               ("drops_packets", np.int64), ("drops_bytes", np.int64), ("marks_packets", np.int64),
               ("backlog_seen_bytes", np.float64),
               ("late", np.bool_), ("lateness_us", np.int64))
_MSG = 65536
WAITED_NS = 100_000  # a chunk that took longer to arrive than this was waited for


def _layout(rows, n_u, n_c, n_slots, out_types, delay=None):
    """``[(group, name, shape, dtype, offset)]`` of one slot (64-byte aligned) and its size.
    ``delay``: the radio's CSI delay (TTIs) where it writes its channel into the slot (a
    ``line`` of ``delay + rows`` rows: :meth:`airlink.sim.step.Radio.inputs`), or None (the
    channel copied into ``real`` and ``rep``)."""
    channel = ([("in", "line", (delay + rows, n_u, n_c), np.float32)] if delay is not None else
               [("in", "real", (rows, n_u, n_c), np.float32), ("in", "rep", (rows, n_u, n_c), np.float32)])
    fields = channel + [("in", "arrivals", (rows, n_u), np.float64), ("in", "u_err", (rows, n_slots), np.float64),
              ("in", "perm", (rows, n_u), np.int64), ("in", "sinr_db", (rows, n_u), np.float32),
              ("in", "sinr_rep_db", (rows, n_u), np.float32)]
    fields += [("out", name, (rows, n_u), out_types[name]) for name in OUTPUTS]
    fields += [("live", name, (rows, n_u), dtype) for name, dtype in LIVE_ARRAYS]
    out, offset = [], 0
    for group, name, shape, dtype in fields:
        out.append((group, name, shape, dtype, offset))
        offset += -(-int(np.prod(shape)) * np.dtype(dtype).itemsize // 64) * 64
    return out, offset


class Slot:
    """Views of one slot of the shared ring: the inputs' fields, ``out`` and ``live`` arrays.
    With a ``line`` (the radio writes its channel there), ``rep`` and ``real`` are its first
    and last rows."""

    def __init__(self, buf, base, layout, delay=None):
        self.out, self.live = {}, {}
        self.used = 0           # rows of out/live the shell wrote (fresh memory is zeros)
        self.line, self.delay = None, delay
        for group, name, shape, dtype, offset in layout:
            a = np.ndarray(shape, dtype=dtype, buffer=buf, offset=base + offset)
            if group == "in":
                setattr(self, name, a)
            else:
                getattr(self, group)[name] = a

    def inputs(self, k0, n) -> ChunkInputs:
        if self.line is not None:
            real, rep = self.line[self.delay:self.delay + n], self.line[:n]
        else:
            real, rep = self.real[:n], self.rep[:n]
        return ChunkInputs(k0, n, real, rep, self.arrivals[:n], self.u_err[:n],
                           self.perm[:n], self.sinr_db[:n], self.sinr_rep_db[:n])

    def fill(self, inp: ChunkInputs, mac: bool):
        """The chunk ``inp`` into the slot (its channel is there already with a ``line``)."""
        n = inp.n
        for name in ("arrivals", "u_err", "perm") if self.line is not None else \
                ("real", "rep", "arrivals", "u_err", "perm"):
            getattr(self, name)[:n] = getattr(inp, name)
        if mac:
            self.sinr_db[:n] = inp.sinr_db
            self.sinr_rep_db[:n] = inp.sinr_rep_db
        for a in (*self.out.values(), *self.live.values()):
            a[:self.used] = 0
        self.used = 0


class RadioFeed:
    """Chunks of radio inputs made ahead by a child process; MAC log rows written there.

    Parameters
    ----------
    radio : a fresh :class:`airlink.sim.step.Radio` (``live=True``), never stepped
    horizon : TTIs the run may need at most (inputs are made up to there)
    ahead : chunks made ahead of the one in use
    mac : None (no MAC log), or an object whose ``write(out, live, sinr_db, sinr_rep_db,
        k0, wall_start_ns)`` the process calls with every finished chunk's rows and whose
        ``close(written)`` it calls once at the end (``written``: whether any rows were)
    """

    def __init__(self, radio, *, horizon: int, ahead: int = 2, mac=None):
        self.radio, self.horizon, self.mac = radio, int(horizon), mac
        n_u, n_c = radio.n_users, radio.n_subchannels
        self.rows = min(radio.chunk, self.horizon)
        out_types = {k: v.dtype for k, v in radio.new_outputs(1).items()}
        # the plain radio writes its channel straight into a slot (a delay line); a radio
        # whose inputs() is its own (a measured cell's) has it copied there
        from airlink.sim.step import Radio
        delay = radio.csi_delay if type(radio).inputs is Radio.inputs else None
        layout, size = _layout(self.rows, n_u, n_c, radio.n_slots, out_types, delay)
        self.n_slots = ahead + 1
        # anonymous shared memory: zero-filled, its pages allocated as they are first written
        self._mm = mmap.mmap(-1, size * self.n_slots)
        self.slots = [Slot(self._mm, i * size, layout, delay) for i in range(self.n_slots)]
        self._free = deque(range(self.n_slots))
        self._pending = deque()          # (slot, k0, n) asked for, in order
        self._k_next = 0
        self.child_cpu_s = None
        self.waits = 0                   # chunks the shell had to wait for ...
        self.wait_ns = 0                 # ... and how long in all
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent = os.getpid()
        # the process computes with one BLAS thread, set here and inherited (OpenBLAS's
        # threads, one per core, took every core at each chunk and spun there, which made
        # the TTI loop late; the numbers stay the same): set after the fork, the count
        # would start the pool's threads anew, each spinning ~0.1 s of CPU first
        from threadpoolctl import threadpool_limits
        blas = threadpool_limits(1, user_api="blas")
        try:
            pid = os.fork()
            if pid == 0:                 # pragma: no cover - the child's coverage is not collected
                mine.close()
                _child(parent, theirs, self)      # never returns
        finally:
            blas.restore_original_limits()        # the shell's own count (only the parent gets here)
        theirs.close()
        self.pid, self._sock = pid, mine
        while self._free and self._k_next < self.horizon:
            self._ask()

    # -- the shell's side ---------------------------------------------------------------------
    def _send(self, *msg):
        try:
            self._sock.send(pickle.dumps(msg))
        except OSError as exc:
            self._raise_last_words()
            raise AirlinkError(f"the cell's radio process is gone ({exc.strerror or exc})") from None

    def _raise_last_words(self):
        """The process is gone: raise the error it reported before it ended, if it did (the
        messages still queued for the shell are read; nothing else would read them)."""
        while True:
            try:
                data = self._sock.recv(_MSG, socket.MSG_DONTWAIT)
            except ConnectionResetError:
                continue                # the reset is reported once, the messages stay queued
            except OSError:
                return
            if not data:
                return
            msg = pickle.loads(data)
            if msg[0] == "error":
                raise AirlinkError(msg[1])

    def _recv(self, flags=0):
        try:
            data = self._sock.recv(_MSG, flags)
        except BlockingIOError:
            return None
        except ConnectionResetError:
            # the process ended with messages of the shell unread (it failed): the kernel
            # reports that once, before the messages it had sent, which are still queued
            # (its error among them)
            return self._recv(flags)
        except OSError as exc:
            raise AirlinkError(f"the cell's radio process is gone ({exc.strerror or exc})") from None
        if not data:
            raise AirlinkError("the cell's radio process ended unexpectedly")
        msg = pickle.loads(data)
        if msg[0] == "error":
            raise AirlinkError(msg[1])
        return msg

    def _ask(self):
        slot = self._free.popleft()
        n = min(self.rows, self.horizon - self._k_next)
        self._send("fill", slot, self._k_next, n)
        self._pending.append((slot, self._k_next, n))
        self._k_next += n

    @property
    def more(self) -> bool:
        """Whether a chunk was asked for that :meth:`next_chunk` has not handed over yet."""
        return bool(self._pending)

    def next_chunk(self, *, counted: bool = True, wait: bool = True):
        """``(slot index, ChunkInputs, out, live)`` of the next chunk (waits until it is made;
        ``counted``: a wait longer than 0.1 ms counts in :attr:`waits` and :attr:`wait_ns`).
        ``wait=False``: None at once when it is not made yet."""
        if not self._pending:
            raise AirlinkError("the cell ran past its radio's horizon")
        slot, k0, n = self._pending[0]
        t0 = time.monotonic_ns()
        msg = self._recv() if wait else self._recv(socket.MSG_DONTWAIT)
        if msg is None:
            return None
        self._pending.popleft()
        waited = time.monotonic_ns() - t0
        if counted and waited > WAITED_NS:
            self.waits += 1
            self.wait_ns += waited
        if msg[:2] != ("ready", slot):
            raise AirlinkError(f"the cell's radio process answered {msg[:2]} for slot {slot}")
        s = self.slots[slot]
        return slot, s.inputs(k0, n), {k: v[:n] for k, v in s.out.items()}, {k: v[:n] for k, v in s.live.items()}

    def release(self, slot: int, rows: int, k0: int, wall_start_ns: int):
        """The shell is done with ``slot``: write its ``rows`` first rows to the MAC log, then
        make the next chunk in it."""
        if rows > 0:
            self._send("done", slot, rows, k0, wall_start_ns)
        self._free.append(slot)
        if self._k_next < self.horizon:
            self._ask()

    def close(self) -> float | None:
        """Finish the MAC log and end the process; its CPU seconds (user + system)."""
        self._send("close")
        while True:
            msg = self._recv()
            if msg[0] == "closed":
                self.child_cpu_s = msg[1]
                break
        self._sock.close()
        os.waitpid(self.pid, 0)
        self.pid = None
        return self.child_cpu_s

    def kill(self):
        """End the process at once (a failure elsewhere; a MAC log stays ``NAME.partial``)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = None
        if not self._sock._closed:
            self._sock.close()


def _child(parent, sock, feed: RadioFeed):   # pragma: no cover - runs in the forked process
    status = 1
    try:
        from .plumbing import set_parent_death_signal
        set_parent_death_signal()
        if os.getppid() != parent:
            os._exit(1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(s, signal.SIG_DFL)
        radio, mac = feed.radio, feed.mac
        written = False
        while True:
            data = sock.recv(_MSG)
            if not data:
                break
            msg = pickle.loads(data)
            try:
                if msg[0] == "fill":
                    _, slot, k0, n = msg
                    s = feed.slots[slot]
                    line = {} if s.line is None else {"line": s.line}   # the channel straight into the slot
                    s.fill(radio.inputs(k0, n, mac_log=mac is not None, **line), mac is not None)
                    sock.send(pickle.dumps(("ready", slot, k0, n)))
                elif msg[0] == "done":
                    _, slot, rows, k0, wall = msg
                    s = feed.slots[slot]
                    s.used = rows
                    if mac is not None:
                        mac.write({k: v[:rows] for k, v in s.out.items()}, {k: v[:rows] for k, v in s.live.items()},
                                  s.sinr_db[:rows], s.sinr_rep_db[:rows], k0, wall)
                        written = True
                elif msg[0] == "close":
                    if mac is not None:
                        mac.close(written)
                    ru = resource.getrusage(resource.RUSAGE_SELF)
                    sock.send(pickle.dumps(("closed", ru.ru_utime + ru.ru_stime)))
                    status = 0
                    break
            except Exception as exc:        # reported to the shell, which raises it
                text = str(exc) if isinstance(exc, AirlinkError) else f"{type(exc).__name__}: {exc}"
                sock.send(pickle.dumps(("error", f"the cell's radio process failed: {text}")))
                break
    except BaseException:
        pass
    finally:
        os._exit(status)
