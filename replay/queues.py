"""Packet queues of the link shell: pure objects driven by an injected clock.

Every queue holds ``(packet, arrival_ns)`` pairs (``packet`` is any object with a
``len()``: the IP packet as ``bytes`` in the shell, integers' ``bytes`` in tests) and
keeps its own counters, so the link can log what it did and tests can check it without
root or a real clock::

    q = make_queue("droptail", packets=100)
    q.enqueue(b"x" * 1500, now_ns)      # False when the queue dropped it
    q.dequeue(now_ns)                   # (packet, arrival_ns) or None
    q.drops_packets, q.drops_bytes, q.backlog_bytes, len(q)

The queues follow Mahimahi's ``link_queue`` family (``infinite``, ``droptail``,
``drophead``, ``codel``, ``pie``) with the same option names (``packets=``, ``bytes=``,
``target=``, ``interval=``, ``qdelay_ref=``, ``max_burst=``). Times are integer
nanoseconds of a monotonic clock.
"""
from __future__ import annotations

import math
import random
from collections import deque

from airlink.traces.errors import AirlinkError
from airlink.traces.units import parse_duration, parse_size

MS = 1_000_000  # ns


class InfiniteQueue:
    """FIFO without a limit; never drops."""

    kind = "infinite"
    options: tuple = ()

    def __init__(self):
        self._q = deque()
        self.backlog_bytes = 0
        self.drops_packets = 0
        self.drops_bytes = 0

    def __len__(self) -> int:
        return len(self._q)

    def __bool__(self) -> bool:
        return bool(self._q)

    def describe(self) -> str:
        """The queue as Mahimahi writes it in a log header: ``droptail [packets=100]``."""
        args = ", ".join(f"{k}={getattr(self, k)}" for k in self.options if getattr(self, k, None))
        return f"{self.kind} [{args}]" if args else self.kind

    def enqueue(self, packet, now_ns: int) -> bool:
        """Add ``packet`` arriving at ``now_ns``; False when it was dropped instead."""
        self._q.append((packet, now_ns))
        self.backlog_bytes += len(packet)
        return True

    def dequeue(self, now_ns: int):
        """The next packet as ``(packet, arrival_ns)``, or None when empty."""
        if not self._q:
            return None
        item = self._q.popleft()
        self.backlog_bytes -= len(item[0])
        return item

    def _drop(self, packet):
        self.drops_packets += 1
        self.drops_bytes += len(packet)


class _Limited(InfiniteQueue):
    options = ("packets", "bytes")

    def __init__(self, *, packets: int = 0, bytes: int = 0):  # noqa: A002 - Mahimahi's name
        super().__init__()
        self.packets = int(packets)
        self.bytes = int(bytes)
        if self.packets < 0 or self.bytes < 0:
            raise AirlinkError(f"{self.kind}: packets= and bytes= must not be negative")
        if not (self.packets or self.bytes):
            raise AirlinkError(f"{self.kind} queue needs a limit: packets=N and/or bytes=N")

    def _over(self, extra_packets: int, extra_bytes: int) -> bool:
        return bool((self.packets and len(self._q) + extra_packets > self.packets)
                    or (self.bytes and self.backlog_bytes + extra_bytes > self.bytes))


class DropTailQueue(_Limited):
    """Drops the arriving packet when it would exceed ``packets`` or ``bytes``."""

    kind = "droptail"

    def enqueue(self, packet, now_ns: int) -> bool:
        if self._over(1, len(packet)):
            self._drop(packet)
            return False
        self._q.append((packet, now_ns))
        self.backlog_bytes += len(packet)
        return True


class DropHeadQueue(_Limited):
    """Accepts the arriving packet, then drops the oldest until within the limits."""

    kind = "drophead"

    def enqueue(self, packet, now_ns: int) -> bool:
        self._q.append((packet, now_ns))
        self.backlog_bytes += len(packet)
        while self._q and self._over(0, 0):
            old, _ = self._q.popleft()
            self.backlog_bytes -= len(old)
            self._drop(old)
        return True


class CoDelQueue(_Limited):
    """CoDel (RFC 8289): drops at dequeue when the sojourn time stays above ``target``
    for an ``interval``, then at intervals shrinking as ``interval / sqrt(count)``.

    ``target`` and ``interval`` are durations (default 5 ms and 100 ms); the optional
    ``packets``/``bytes`` limit tail-drops as a safety net (default 1000 packets).
    """

    kind = "codel"
    options = ("target", "interval", "packets", "bytes")

    def __init__(self, *, target="5ms", interval="100ms", packets: int = 1000, bytes: int = 0):  # noqa: A002
        super().__init__(packets=packets, bytes=bytes)
        self.target_ns = int(parse_duration(target, "ms") * 10**9)
        self.interval_ns = int(parse_duration(interval, "ms") * 10**9)
        if self.target_ns <= 0 or self.interval_ns <= 0:
            raise AirlinkError("codel: target= and interval= must be positive")
        self.target, self.interval = target, interval
        self._first_above = 0
        self._drop_next = 0
        self._count = 0
        self._last_count = 0
        self._dropping = False

    enqueue = DropTailQueue.enqueue   # the limit is a tail-drop safety net; CoDel acts at dequeue

    def _control(self, count: int) -> int:
        return int(self.interval_ns / math.sqrt(count))

    def _pop(self, now_ns):
        """RFC 8289 ``dodequeue``: the head packet and whether it may be dropped."""
        item = InfiniteQueue.dequeue(self, now_ns)
        if item is None:
            self._first_above = 0
            return None, False
        sojourn = now_ns - item[1]
        if sojourn < self.target_ns or self.backlog_bytes <= 1500:
            self._first_above = 0
            return item, False
        if self._first_above == 0:
            self._first_above = now_ns + self.interval_ns
            return item, False
        return item, now_ns >= self._first_above

    def dequeue(self, now_ns: int):
        item, ok_to_drop = self._pop(now_ns)
        if item is None:
            self._dropping = False
            return None
        if self._dropping:
            if not ok_to_drop:
                self._dropping = False
            while self._dropping and now_ns >= self._drop_next:
                self._drop(item[0])
                self._count += 1
                item, ok_to_drop = self._pop(now_ns)
                if item is None or not ok_to_drop:
                    self._dropping = False
                else:
                    self._drop_next += self._control(self._count)
            return item
        if ok_to_drop:
            self._drop(item[0])
            item, _ = self._pop(now_ns)
            self._dropping = True
            delta = self._count - self._last_count
            self._count = delta if (delta > 1 and now_ns - self._drop_next < 16 * self.interval_ns) else 1
            self._drop_next = now_ns + self._control(self._count)
            self._last_count = self._count
        return item


class PIEQueue(_Limited):
    """PIE (RFC 8033): drops arriving packets with a probability driven by the queueing
    delay, ``p += alpha (d - qdelay_ref) + beta (d - d_old)`` every 15 ms, with the
    delay ``d`` measured by timestamps (the sojourn time of the last packet dequeued).

    ``qdelay_ref`` (default 15 ms) and ``max_burst`` (default 150 ms) as in Mahimahi;
    ``packets``/``bytes`` tail-drop limit (default 1000 packets); ``seed`` for the coin.
    """

    kind = "pie"
    options = ("qdelay_ref", "max_burst", "packets", "bytes")
    T_UPDATE_NS = 15 * MS
    ALPHA = 0.125   # per second of delay error (RFC 8033 alpha, 1/s)
    BETA = 1.25

    def __init__(self, *, qdelay_ref="15ms", max_burst="150ms", packets: int = 1000, bytes: int = 0,  # noqa: A002
                 seed: int | None = None):
        super().__init__(packets=packets, bytes=bytes)
        self.qdelay_ref, self.max_burst = qdelay_ref, max_burst
        self.ref_s = float(parse_duration(qdelay_ref, "ms"))
        self.burst_ns = int(parse_duration(max_burst, "ms") * 10**9)
        self._rng = random.Random(seed)
        self.drop_prob = 0.0
        self._qdelay_s = 0.0
        self._qdelay_old_s = 0.0
        self._burst_left = self.burst_ns
        self._next_update = None

    def _update(self, now_ns: int):
        if self._next_update is None:
            self._next_update = now_ns + self.T_UPDATE_NS
            return
        while now_ns >= self._next_update:
            d, p = self._qdelay_s, self.drop_prob
            scale = 1 / 2048 if p < 1e-6 else 1 / 512 if p < 1e-5 else 1 / 128 if p < 1e-4 \
                else 1 / 32 if p < 1e-3 else 1 / 8 if p < 1e-2 else 1 / 2 if p < 1e-1 else 1.0
            p += scale * (self.ALPHA * (d - self.ref_s) + self.BETA * (d - self._qdelay_old_s))
            if d == 0 and self._qdelay_old_s == 0:
                p *= 0.98
            self.drop_prob = min(max(p, 0.0), 1.0)
            self._qdelay_old_s = d
            if self._burst_left > 0:
                self._burst_left = max(0, self._burst_left - self.T_UPDATE_NS)
            elif self.drop_prob == 0 and d < self.ref_s / 2 and self._qdelay_old_s < self.ref_s / 2:
                self._burst_left = self.burst_ns
            if not self._q:
                self._qdelay_s = 0.0
            self._next_update += self.T_UPDATE_NS

    def enqueue(self, packet, now_ns: int) -> bool:
        self._update(now_ns)
        drop = self._over(1, len(packet))
        if not drop and self._burst_left == 0 and not (
                self._qdelay_old_s < self.ref_s / 2 and self.drop_prob < 0.2) and len(self._q) > 2:
            drop = self._rng.random() < self.drop_prob
        if drop:
            self._drop(packet)
            return False
        self._q.append((packet, now_ns))
        self.backlog_bytes += len(packet)
        return True

    def dequeue(self, now_ns: int):
        self._update(now_ns)
        item = InfiniteQueue.dequeue(self, now_ns)
        if item is not None:
            self._qdelay_s = (now_ns - item[1]) / 1e9
        return item


QUEUES = {"infinite": InfiniteQueue, "droptail": DropTailQueue, "drophead": DropHeadQueue,
          "codel": CoDelQueue, "pie": PIEQueue}
_SIZE_ARGS = ("bytes",)
_COUNT_ARGS = ("packets", "seed")


def parse_queue_args(text: str | None) -> dict:
    """``"packets=100,bytes=150KB"`` -> ``{"packets": 100, "bytes": 150000}``.

    Durations (``target=5ms``) stay strings for the queue to parse.
    """
    out = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not value.strip():
            raise AirlinkError(f"queue argument {part!r}: expected NAME=VALUE (e.g. packets=100)")
        value = value.strip()
        if key in _SIZE_ARGS:
            out[key] = parse_size(value)
        elif key in _COUNT_ARGS:
            try:
                out[key] = int(value)
            except ValueError:
                raise AirlinkError(f"queue argument {key}={value}: expected a whole number") from None
        else:
            out[key] = value
    return out


def make_queue(kind: str = "infinite", args: str | dict | None = None, **kwargs):
    """A queue by Mahimahi name, with options as a dict, a ``"k=v,k=v"`` string or keywords."""
    if kind not in QUEUES:
        raise AirlinkError(f"unknown queue {kind!r} (one of {', '.join(QUEUES)})")
    options = parse_queue_args(args) if isinstance(args, str) else dict(args or {})
    options.update(kwargs)
    cls = QUEUES[kind]
    if cls is InfiniteQueue:
        if options:
            raise AirlinkError(f"the infinite queue takes no arguments, got {', '.join(options)}")
        return cls()
    try:
        return cls(**options)
    except TypeError:
        allowed = ", ".join(cls.options + (("seed",) if cls is PIEQueue else ()))
        raise AirlinkError(f"{kind} queue takes {allowed}; got {', '.join(options)}") from None
