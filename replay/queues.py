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
``target=``, ``interval=``, ``qdelay_ref=``, ``max_burst=``), plus ``l4s`` (a DualPI2
coupled dual queue, RFC 9332). Times are integer nanoseconds of a monotonic clock.

ECN (``ecn=True``, ``ecn`` in an argument string): where a discipline decides to drop a
packet to signal congestion, an ECN-capable packet (ECT(0), ECT(1) or CE, see
:mod:`airlink.replay.ecn`) leaves with CE set instead, as Linux's ``codel``/``pie`` with
``ecn`` do; the queue counts it in ``marks_packets``/``marks_bytes``. A packet dropped
because the buffer is full (the ``packets``/``bytes`` limit of every queue) is still
dropped: a full buffer cannot mark. ``droptail`` and ``drophead`` drop only when full, so
for them ``ecn`` changes nothing. A marked packet is a new ``bytes`` object of the same
length (the IPv4 header checksum updated); the queue hands it out in place of the original.
"""
from __future__ import annotations

import math
from collections import deque

from airlink.core.envflags import parse_flag
from airlink.core.errors import AirlinkError
from airlink.core.units import parse_duration, parse_size

from .ecn import CE, ECT1, ecn_of, mark_ce
from .rng import SplitMix64

MS = 1_000_000  # ns


class InfiniteQueue:
    """FIFO without a limit; never drops."""

    kind = "infinite"
    options: tuple = ()

    def __init__(self, *, ecn: bool = False):
        self._q = deque()
        self.backlog_bytes = 0
        self.drops_packets = 0
        self.drops_bytes = 0
        self.ecn = bool(ecn)
        self.marks_packets = 0
        self.marks_bytes = 0

    def __len__(self) -> int:
        return len(self._q)

    def __bool__(self) -> bool:
        return bool(self._q)

    def describe(self) -> str:
        """The queue as Mahimahi writes it in a log header: ``droptail [packets=100]``."""
        args = ", ".join(f"{k}={getattr(self, k)}" for k in self.options if getattr(self, k, None))
        if self.ecn and self.kind != "l4s":
            args = f"{args}, ecn" if args else "ecn"
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

    def _mark(self, packet):
        """``packet`` with CE set (counted as a mark), or None when it must be dropped
        instead (ECN is off for this queue, or the packet is not ECN-capable)."""
        marked = mark_ce(packet) if self.ecn else None
        if marked is not None:
            self.marks_packets += 1
            self.marks_bytes += len(packet)
        return marked


class _Limited(InfiniteQueue):
    options = ("packets", "bytes")

    def __init__(self, *, packets: int = 0, bytes: int = 0, ecn: bool = False):  # noqa: A002 - Mahimahi's name
        super().__init__(ecn=ecn)
        self.packets = int(packets)
        self.bytes = int(bytes)
        if self.packets < 0 or self.bytes < 0:
            raise AirlinkError(f"{self.kind}: packets= and bytes= must not be negative")
        if not (self.packets or self.bytes):
            raise AirlinkError(f"{self.kind} queue needs a limit: packets=N and/or bytes=N")

    def _over(self, extra_packets: int, extra_bytes: int) -> bool:
        return bool((self.packets and len(self) + extra_packets > self.packets)
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

    With ``ecn``, an ECN-capable packet due to be dropped leaves CE-marked instead, with
    the control law advanced as for a drop, as Linux ``codel_dequeue`` does: entering the
    dropping state marks the head packet; in the dropping state a mark ends this
    dequeue's loop (the marked packet is the one handed out).
    """

    kind = "codel"
    options = ("target", "interval", "packets", "bytes")

    def __init__(self, *, target="5ms", interval="100ms", packets: int = 1000, bytes: int = 0,  # noqa: A002
                 ecn: bool = False):
        super().__init__(packets=packets, bytes=bytes, ecn=ecn)
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
                self._count += 1
                marked = self._mark(item[0])
                if marked is not None:
                    self._drop_next += self._control(self._count)
                    return marked, item[1]
                self._drop(item[0])
                item, ok_to_drop = self._pop(now_ns)
                if item is None or not ok_to_drop:
                    self._dropping = False
                else:
                    self._drop_next += self._control(self._count)
            return item
        if ok_to_drop:
            marked = self._mark(item[0])
            if marked is not None:
                item = (marked, item[1])
            else:
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
    ``packets``/``bytes`` tail-drop limit (default 1000 packets); ``seed`` for the coin
    (:class:`airlink.replay.rng.SplitMix64`, the C link core's generator).

    With ``ecn``, an ECN-capable packet the coin would drop is enqueued CE-marked instead
    while ``drop_prob`` is at most 10 % (RFC 8033 section 5.1, Linux ``pie``'s
    ``MAX_PROB / 10``); above that it is dropped like any other.
    """

    kind = "pie"
    options = ("qdelay_ref", "max_burst", "packets", "bytes")
    T_UPDATE_NS = 15 * MS
    ALPHA = 0.125   # per second of delay error (RFC 8033 alpha, 1/s)
    BETA = 1.25
    MARK_ECN_TH = 0.1   # RFC 8033 5.1: mark instead of dropping only up to this probability

    def __init__(self, *, qdelay_ref="15ms", max_burst="150ms", packets: int = 1000, bytes: int = 0,  # noqa: A002
                 seed: int | None = None, ecn: bool = False):
        super().__init__(packets=packets, bytes=bytes, ecn=ecn)
        self.qdelay_ref, self.max_burst = qdelay_ref, max_burst
        self.ref_s = float(parse_duration(qdelay_ref, "ms"))
        self.burst_ns = int(parse_duration(max_burst, "ms") * 10**9)
        self._rng = SplitMix64(seed)
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
            if self._rng.random() < self.drop_prob:
                marked = self._mark(packet) if self.drop_prob <= self.MARK_ECN_TH else None
                if marked is None:
                    drop = True
                else:
                    packet = marked
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


class DualPI2Queue(_Limited):
    """L4S at the bottleneck: a DualPI2 coupled dual queue (RFC 9332, Appendix A).

    Packets with ECT(1) or CE (the L4S identifier, RFC 9331) join the **L queue**, all
    others the **C (classic) queue**; both share the ``packets``/``bytes`` limit
    (default 10000 packets, as Linux ``dualpi2``), which tail-drops when full.

    - Base probability ``p'`` (PI2): every ``tupdate`` (16 ms),
      ``p' += ALPHA (q - target) + BETA (q - q_prev)`` with ``q`` the sojourn time (s)
      of the C queue's head packet (0 when empty), ``target`` 15 ms, ``ALPHA`` 0.16 /s,
      ``BETA`` 3.2 /s (Linux ``dualpi2`` defaults); ``p'`` stays in [0, 1].
    - **C queue** at dequeue: with probability ``p_C = p'^2`` a not-ECT packet is dropped
      (and the next packet considered) and an ECT(0) packet is CE-marked.
    - **L queue** at dequeue: CE-marked when its sojourn time exceeds ``step`` (default
      1 ms: the native step AQM, as Linux ``dualpi2``'s ``step_thresh``), or else with the
      coupled probability ``p_CL = min(K p', 1)``, ``K = 2``.
    - Scheduler between the two: time-shifted FIFO (one of the schedulers RFC 9332
      describes) - the L head leaves first unless the C head has waited more than
      ``tshift`` (default 2 x target = 30 ms, airlink's choice) longer.

    Not implemented: Linux's overload handling (``p_C`` above 1/K^2 switching L to drops),
    its WRR scheduler and its GSO splitting; marks use a random coin (``seed=``), not
    RFC 9332's deterministic ``recur``. The L4S queue always marks (``ecn`` is implied).
    """

    kind = "l4s"
    options = ("step", "target", "tupdate", "tshift", "packets", "bytes")
    ALPHA = 0.16    # /s, integral gain (Linux dualpi2 default)
    BETA = 3.2      # /s, proportional gain (Linux dualpi2 default)
    K = 2           # coupling factor

    def __init__(self, *, step="1ms", target="15ms", tupdate="16ms", tshift="30ms", packets: int = 10000,
                 bytes: int = 0, seed: int | None = None, ecn: bool = True):  # noqa: A002
        super().__init__(packets=packets, bytes=bytes, ecn=True)
        self.step, self.target, self.tupdate, self.tshift = step, target, tupdate, tshift
        self.step_ns = int(parse_duration(step, "ms") * 10**9)
        self.target_s = float(parse_duration(target, "ms"))
        self.tupdate_ns = int(parse_duration(tupdate, "ms") * 10**9)
        self.tshift_ns = int(parse_duration(tshift, "ms") * 10**9)
        if self.step_ns <= 0 or self.target_s <= 0 or self.tupdate_ns <= 0 or self.tshift_ns < 0:
            raise AirlinkError("l4s: step=, target= and tupdate= must be positive, tshift= not negative")
        self._l = deque()
        self._rng = SplitMix64(seed)
        self.p_base = 0.0
        self._prev_s = 0.0
        self._next_update = None

    def __len__(self) -> int:
        return len(self._l) + len(self._q)

    def __bool__(self) -> bool:
        return bool(self._l or self._q)

    def _update(self, now_ns: int):
        if self._next_update is None:
            self._next_update = now_ns + self.tupdate_ns
            return
        while now_ns >= self._next_update:
            q = (self._next_update - self._q[0][1]) / 1e9 if self._q else 0.0
            p = self.p_base + self.ALPHA * (q - self.target_s) + self.BETA * (q - self._prev_s)
            self.p_base = min(max(p, 0.0), 1.0)
            self._prev_s = q
            self._next_update += self.tupdate_ns

    def enqueue(self, packet, now_ns: int) -> bool:
        self._update(now_ns)
        if self._over(1, len(packet)):
            self._drop(packet)
            return False
        (self._l if ecn_of(packet) in (ECT1, CE) else self._q).append((packet, now_ns))
        self.backlog_bytes += len(packet)
        return True

    def dequeue(self, now_ns: int):
        self._update(now_ns)
        while self._l or self._q:
            if self._l and (not self._q or self._q[0][1] + self.tshift_ns >= self._l[0][1]):
                packet, t = self._l.popleft()
                self.backlog_bytes -= len(packet)
                p_cl = min(self.K * self.p_base, 1.0)
                if now_ns - t > self.step_ns or (p_cl > 0 and self._rng.random() < p_cl):
                    packet = self._mark(packet)
                return packet, t
            packet, t = self._q.popleft()
            self.backlog_bytes -= len(packet)
            p_c = self.p_base * self.p_base
            if p_c > 0 and self._rng.random() < p_c:
                marked = self._mark(packet)
                if marked is None:
                    self._drop(packet)
                    continue
                packet = marked
            return packet, t
        return None


#: the C link core's number for each discipline (replay/_linkcore.h, LC_INFINITE ...)
CORE_KINDS = {"infinite": 0, "droptail": 1, "drophead": 2, "codel": 3, "pie": 4, "l4s": 5}
#: the disciplines that decide per packet: the C core gets packets of one segment (no GSO)
PER_PACKET = ("codel", "pie", "l4s")


def core_parameters(queue) -> tuple:
    """``(kind, packets, bytes, (ecn, seed, a, b, c, d))``: a fresh queue as the C link
    core takes it (``_fastpath.link``, ``_cellpath.Cell``; see ``lc_link_aqm``): CoDel's
    target and interval (ns), PIE's qdelay_ref (s) and max_burst (ns), L4S's step (ns),
    target (s), tupdate and tshift (ns); the seed is the queue's own, so both draw the
    same coins."""
    kind = queue.kind
    if kind == "codel":
        extra = (queue.target_ns, queue.interval_ns, 0, 0)
    elif kind == "pie":
        extra = (queue.ref_s, queue.burst_ns, 0, 0)
    elif kind == "l4s":
        extra = (queue.step_ns, queue.target_s, queue.tupdate_ns, queue.tshift_ns)
    else:
        extra = (0, 0, 0, 0)
    rng = getattr(queue, "_rng", None)
    aqm = (bool(queue.ecn), rng.seed if rng is not None else 0, *(float(x) for x in extra))
    return CORE_KINDS[kind], getattr(queue, "packets", 0), getattr(queue, "bytes", 0), aqm


QUEUES = {"infinite": InfiniteQueue, "droptail": DropTailQueue, "drophead": DropHeadQueue,
          "codel": CoDelQueue, "pie": PIEQueue, "l4s": DualPI2Queue}
_SIZE_ARGS = ("bytes",)
_COUNT_ARGS = ("packets", "seed")
_FLAG_ARGS = ("ecn",)


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
        if key in _FLAG_ARGS:
            flag = parse_flag(value) if sep else True
            if flag is None:
                raise AirlinkError(f"queue argument {part!r}: expected {key} or {key}=1/0")
            out[key] = flag
            continue
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


def with_ecn(args, ecn: bool):
    """Queue arguments (a ``"k=v,..."`` string, dict or None) with ``ecn`` turned on when
    ``ecn`` (a dict then), else unchanged: the shells' ECN switch beside their arguments."""
    if not ecn:
        return args
    options = parse_queue_args(args) if isinstance(args, str) or args is None else dict(args)
    options["ecn"] = True
    return options


def make_queue(kind: str = "infinite", args: str | dict | None = None, **kwargs):
    """A queue by Mahimahi name (or ``l4s``), with options as a dict, a ``"k=v,k=v"`` string
    or keywords (``ecn=True``: mark instead of dropping, see the module notes)."""
    if kind not in QUEUES:
        raise AirlinkError(f"unknown queue {kind!r} (one of {', '.join(QUEUES)})")
    options = parse_queue_args(args) if isinstance(args, str) else dict(args or {})
    options.update(kwargs)
    cls = QUEUES[kind]
    if cls is InfiniteQueue:
        if set(options) - {"ecn"}:
            raise AirlinkError(f"the infinite queue takes no arguments but ecn, got {', '.join(options)}")
        return cls(**options)
    try:
        return cls(**options)
    except TypeError:
        allowed = ", ".join(cls.options + (("seed",) if cls in (PIEQueue, DualPI2Queue) else ()) + ("ecn",))
        raise AirlinkError(f"{kind} queue takes {allowed}; got {', '.join(options)}") from None
