"""The event loop between two packet fds, driving a downlink and an uplink stage.

Packets read from ``outer_fd`` (sent towards the namespace) go through ``downlink`` and
are written to ``inner_fd``; packets read from ``inner_fd`` go through ``uplink`` to
``outer_fd``. The loop sleeps in ``select`` (microsecond timeouts, so 0.125 ms TTIs are
served on time) until a packet arrives or a stage's next event is due, on a monotonic
clock (``time.monotonic_ns``). It ends when ``stop_fd`` becomes readable (a pidfd: CMD's
side exited), when ``should_stop()`` is true, or when a stage is finished.

``vnet_hdr``: the fds carry a ``virtio_net_hdr`` of that many bytes in front of every
packet (TUN devices opened for offload, offloads not set: the header is all zero); the
loop strips it on reading and writes a zero one, so the stages see plain IP packets.
"""
from __future__ import annotations

import os
import select
import time

DRAIN_QUIET_NS = 30_000_000   # after CMD exits: stop once no packet moved for 30 ms ...
DRAIN_MAX_NS = 1_000_000_000  # ... or after 1 s (lets the last FINs reach the servers)
READ_BATCH = 512      # packets read from one fd before stages get the clock again
MAX_PACKET = 65536


def run(outer_fd: int, inner_fd: int, downlink, uplink, *, stop_fd: int | None = None,
        should_stop=None, on_finished=None, vnet_hdr: int = 0) -> dict:
    """Run until stopped; returns loop counters (``write_errors``, ``wakeups``)."""
    clock = time.monotonic_ns
    read, write = os.read, os.write
    if vnet_hdr:
        header = bytes(vnet_hdr)

        def read(fd, n, _read=os.read):
            return _read(fd, n + vnet_hdr)[vnet_hdr:]

        def write(fd, p, _writev=os.writev):
            return _writev(fd, (header, p))
    rlist = [outer_fd, inner_fd] + ([stop_fd] if stop_fd is not None else [])
    write_errors = 0
    wakeups = 0
    finished_called = False
    dpull, upull = downlink.pull, uplink.pull

    def serve(now: int) -> int:
        """Write every packet due by ``now`` out of both stages; returns failed writes."""
        errors = 0
        for p in dpull(now):
            try:
                write(inner_fd, p)
            except OSError:
                errors += 1
        for p in upull(now):
            try:
                write(outer_fd, p)
            except OSError:
                errors += 1
        return errors

    dpush, upush = downlink.push, uplink.push
    drain_until = None
    while True:
        # 1. serve what fell due before the packets we are about to read
        write_errors += serve(clock())
        if (downlink.finished or uplink.finished) and not finished_called:
            finished_called = True
            if on_finished:
                on_finished()
        if should_stop is not None and should_stop():
            break
        # 2. sleep until a packet or the next event
        t = downlink.next_event_ns()
        u = uplink.next_event_ns()
        if t is None or (u is not None and u < t):
            t = u
        if t is None:
            timeout = None
        else:
            timeout = (t - clock()) / 1e9
            if timeout < 0:
                timeout = 0
        if drain_until is not None:
            left = drain_until - clock()
            if left <= 0:
                break
            cap = min(DRAIN_QUIET_NS if t is None else left, left) / 1e9
            if timeout is None or timeout > cap:
                timeout = cap
        try:
            ready = select.select(rlist, [], [], timeout)[0]
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        wakeups += 1
        if not ready:
            if drain_until is not None and t is None:
                break      # drained and quiet
            continue
        if stop_fd is not None and stop_fd in ready:
            # CMD's side ended: keep moving packets briefly so the closing handshakes
            # of its connections reach the other side, then stop.
            rlist.remove(stop_fd)
            stop_fd = None
            drain_until = clock() + DRAIN_MAX_NS
            continue
        now = clock()
        write_errors += serve(now)
        # 3. read what arrived, stamped with the time it was read
        if outer_fd in ready:
            for _ in range(READ_BATCH):
                try:
                    dpush(read(outer_fd, MAX_PACKET), now)
                except BlockingIOError:
                    break
        if inner_fd in ready:
            for _ in range(READ_BATCH):
                try:
                    upush(read(inner_fd, MAX_PACKET), now)
                except BlockingIOError:
                    break
    return {"write_errors": write_errors, "wakeups": wakeups}
