"""Grouped array primitives of the TCP analysis: whole-array numpy operations over packets
sorted by flow (and direction), with C twins of the hot loops (``collectors/_tcploops.c``).

Used by the TCP engine (:mod:`._tcpstream`). Groups are consecutive runs of rows; :data:`OFF` offsets a group's
values so one sort or running maximum serves every group at once. One sequential rule lives
here too, :func:`recovery_episodes` (each retransmission's loss recovery depends on the ones
before it), with its C twin.
"""
from __future__ import annotations

import numpy as np

from airlink.core.envflags import env_flag

try:                                   # the analysis' per-row loops in C, built by pip when gcc exists
    from . import _tcploops
except ImportError:                    # pragma: no cover - depends on the build
    _tcploops = None
if env_flag("AIRLINK_PURE_PYTHON", False):   # as for the capture reader: no compiled parts
    _tcploops = None
_episodes = getattr(_tcploops, "episodes", None)     # None: the extension is not built

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
M32 = 1 << 32
OFF = np.int64(1 << 41)   # group offset for grouped keys (values < 2 TiB); a numpy int64 so
                          # int32 group numbers times OFF are computed in int64


def _grouped_cummax(values, groups, valid, starts=None):
    """Inclusive running maximum of ``values[valid]`` within contiguous ``groups``; -1 before
    the first valid value of a group. One pass in C (``_tcploops.cummax``) when the extension
    is built; else with numpy: ``starts`` (first row of each group), when given and short,
    lets each group be scanned as a slice (no offset arrays)."""
    if _tcploops is not None:
        out = np.empty(len(values), np.int64)
        _tcploops.cummax(np.ascontiguousarray(values, np.int64), np.ascontiguousarray(groups, np.int32),
                        np.ascontiguousarray(valid, bool), out)
        return out
    if starts is not None and len(starts) <= 256:
        q = np.where(valid, values, -1)
        bounds = np.r_[starts, len(q)]
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            np.maximum.accumulate(q[a:b], out=q[a:b])
        return q
    x = np.where(valid, values + 1, 0) + groups * OFF
    acc = np.maximum.accumulate(x)
    return acc - groups * OFF - 1



def _stable_order(keys):
    """Permutation sorting ``keys`` stably (equal keys keep their order), or None when they
    are already non-decreasing. Sequence-ordered keys are nearly sorted: the few elements
    below the running maximum are sorted alone and inserted, instead of sorting them all."""
    n = len(keys)
    if n < 2:
        return None
    if (keys[1:] >= keys[:-1]).all():
        return None
    late = np.zeros(n, bool)
    late[1:] = keys[1:] < np.maximum.accumulate(keys)[:-1]
    li = np.flatnonzero(late)
    if len(li) > n // 16:
        return np.argsort(keys, kind="stable")
    mi = np.flatnonzero(~late)                      # non-decreasing by construction
    li = li[np.argsort(keys[li], kind="stable")]
    # an element equal to a late one's key and kept in place always comes before it
    pos = np.searchsorted(keys[mi], keys[li], side="right")
    return np.insert(mi, pos, li)



def _first_with_key(keys_rows: list, queries):
    """For each query: (found, ``rows`` entry of the first element - in the given order -
    whose key equals it). ``keys`` are nearly non-decreasing (sequence order). The few
    elements below the running maximum ("late") are looked up apart; in the main search
    every key is replaced in place by the running maximum, which is non-decreasing and
    where a late element only repeats the key of an earlier element, so the first match
    is still the first element in order with that key. ``keys_rows`` = [keys, rows] is
    emptied (the keys array is overwritten)."""
    keys, rows = keys_rows
    keys_rows.clear()
    n = len(keys)
    lk = lr = keys[:0]
    if n > 1 and not (keys[1:] >= keys[:-1]).all():
        rm = np.maximum.accumulate(keys)
        li = np.flatnonzero(keys[1:] < rm[:-1]) + 1
        o = np.argsort(keys[li], kind="stable")
        lk, lr = keys[li][o], rows[li][o]
        keys = rm
        del rm, li, o
    p = np.minimum(np.searchsorted(keys, queries), n - 1)
    hit = keys[p] == queries
    seg = rows[p]
    if len(lk):
        miss = np.flatnonzero(~hit)
        q = np.minimum(np.searchsorted(lk, queries[miss]), len(lk) - 1)
        h2 = lk[q] == queries[miss]
        hit[miss[h2]] = True
        seg[miss[h2]] = lr[q[h2]]
    return hit, seg



def _unique_first(keys):
    """Sorted distinct keys and the index of each one's first occurrence (as
    ``np.unique(keys, return_index=True)``; cheap when the keys are nearly sorted)."""
    perm = _stable_order(keys)
    ks = keys if perm is None else keys[perm]
    ch = np.ones(len(ks), bool)
    ch[1:] = ks[1:] != ks[:-1]
    first = np.flatnonzero(ch)
    return ks[ch], (first if perm is None else perm[first])



def _unwrap(raw, groups, base):
    """32-bit values -> int64 relative to ``base[groups]``, unwrapped within contiguous groups
    (each step between neighbours taken as the signed 32-bit difference). One pass in C
    (``_tcploops.unwrap``) when the extension is built, else whole-array numpy steps."""
    n = len(raw)
    if _tcploops is not None and n:                        # the same loop in C, one pass
        out = np.empty(n, np.int64)
        _tcploops.unwrap(np.ascontiguousarray(raw, np.uint32), np.ascontiguousarray(groups, np.int32),
                        np.ascontiguousarray(base, np.int64).astype(np.uint32), out)
        return out
    rel = np.subtract(np.asarray(raw).astype(np.uint32, copy=False), base.astype(np.uint32)[groups],
                      dtype=np.uint32)                     # modulo 2**32
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    d = np.diff(rel).view(np.int32)                        # signed 32-bit steps
    brk = np.flatnonzero(groups[1:] != groups[:-1])
    d[brk] = 0
    out[0] = 0
    np.cumsum(d, dtype=np.int64, out=out[1:])
    del d
    starts = np.r_[0, brk + 1]
    off = rel[starts].astype(np.int64) - out[starts]       # each group starts at its rel value
    if len(starts) == 1:
        out += off[0]
    else:
        out += np.repeat(off, np.diff(np.r_[starts, n]))
    return out



NONE = np.iinfo(np.int64).min          # "no value yet" in the per-flow carries


EPISODE_NONE, EPISODE_FAST, EPISODE_TIMEOUT = 0, 1, 2
NEVER = np.iinfo(np.int64).max         # an episode no ACK undid


def episode_carry(nflow: int) -> tuple:
    """:func:`recovery_episodes`' carry for one direction of ``nflow`` flows: per flow the
    open episode's kind, its limit (relative sequence number) and, for a timeout episode
    whose undo verdict waits for a later chunk, the key of that wait (-1: none)."""
    return (np.full(nflow, EPISODE_NONE, np.int8), np.zeros(nflow, np.int64), np.full(nflow, -1, np.int64))


def recovery_episodes(ri, dr, fl, asked, again, ackr, at_ack, smb_own, undo_at, pending, carry,
                      carried_undo) -> np.ndarray:
    """Which retransmissions (rows ``ri``, in order) are fast: per flow and direction, the
    loss recovery each belongs to, in order (RFC 6582's ``recover`` for both kinds):

    * a fast retransmission (``asked``, over ``ri``: :func:`._tcprules.fast_retransmit_asked`)
      outside any episode opens a **fast** episode lasting until the reverse direction's
      cumulative ACK (``ackr``, over ``ri``) reaches the ``snd_max`` it saw (``smb_own``,
      over the rows: RFC 6582's full ACK); every retransmission inside it is fast, and
      one more ``asked`` inside moves that limit to its own ``snd_max``;
    * a retransmission the timer sent - one at the cumulative ACK (``at_ack``, over ``ri``)
      that nothing asked for (the first RTO resends the oldest unacknowledged segment) outside any episode, or a
      first byte resent again with nothing from the receiver since (``again``, a row mask:
      the timer's backoff; it ends a fast episode) - opens a **timeout** episode lasting
      until the ACK reaches its ``snd_max``; inside it nothing is fast, duplicate ACKs
      or not: after a timeout RFC 6582 does not enter fast retransmit before ``recover``,
      and Linux, in its Loss state until then, counts every retransmission as
      ``TCPSlowStartRetrans`` (F-RTO's new data after the timeout and the holes resent
      on the SACKs it brings are this case). Unless the timeout was spurious: Linux undoes
      its Loss state on the ACK that shows it (Eifel's older TSval echoed, or F-RTO's
      acknowledgement of data sent once: ``FlowStream._timeout_undos`` in ``_tcpstream``),
      and the episode ends at that ACK;
    * others (a tail loss probe resending the last segment, a retransmission above the
      ACK with no duplicate ACKs) open nothing and are not fast.

    Per row of ``ri``: ``undo_at``, the row of the ACK that would undo a timeout episode
    the row opens (:data:`NEVER`: none in these rows), and ``pending``, a key (>= 0) when
    that verdict waits for rows of a later chunk, else -1. ``fl``: each row's flow.
    ``carry[d]`` (:func:`episode_carry`): direction ``d``'s
    episode open after earlier chunks, updated in place; ``carried_undo[d]``: ``{flow:
    row}`` for the flows whose carried timeout episode awaited its verdict and find it
    in these rows (row: the ACK that undoes it, or :data:`NEVER`). Sequential per
    flow: each row's episode depends on the ones before it; the loop below is the readable
    reference of its C twin (``_tcploops.episodes``), which runs when the extension is built."""
    kinds, lims, pends = zip(*carry)
    undone = [np.full(len(kinds[d]), NEVER, np.int64) for d in (0, 1)]   # chunk rows; NEVER: none
    for d in (0, 1):
        f = np.fromiter(carried_undo[d], np.int64, len(carried_undo[d]))
        undone[d][f] = np.fromiter(carried_undo[d].values(), np.int64, len(f))
        pends[d][f] = -1                                  # decided here
    cols = (dr[ri].astype(np.int8), fl[ri].astype(np.int64), asked.astype(bool), again[ri].astype(bool),
            ackr.astype(np.int64), at_ack.astype(bool), smb_own[ri].astype(np.int64),
            ri.astype(np.int64), undo_at.astype(np.int64), pending.astype(np.int64))
    fast = np.zeros(len(ri), bool)
    if _episodes is not None and len(ri):
        _episodes(*(np.ascontiguousarray(c) for c in cols), kinds[0], lims[0], undone[0], pends[0],
                  kinds[1], lims[1], undone[1], pends[1], fast)
    else:
        for i, (d, f, ask, rep, ack, at_una, snd, row, undo, pend) in enumerate(zip(*(c.tolist() for c in cols))):
            kind, lim, und, pen = kinds[d], lims[d], undone[d], pends[d]
            k = kind[f]
            if k != EPISODE_NONE and (ack >= lim[f] or (k == EPISODE_TIMEOUT and und[f] < row)):
                k = kind[f] = EPISODE_NONE          # a full ACK ended it, or Eifel undid the timeout
            if rep:
                kind[f], lim[f], und[f], pen[f] = EPISODE_TIMEOUT, snd, undo, pend
            elif k == EPISODE_FAST:
                fast[i] = True
                if ask:
                    lim[f] = snd
            elif k == EPISODE_NONE:
                if ask:
                    fast[i] = True
                    kind[f], lim[f], und[f], pen[f] = EPISODE_FAST, snd, NEVER, -1
                elif at_una:
                    kind[f], lim[f], und[f], pen[f] = EPISODE_TIMEOUT, snd, undo, pend
    for d in (0, 1):                    # a timeout undone in these rows is over; a verdict
        undid = (kinds[d] == EPISODE_TIMEOUT) & (undone[d] != NEVER)   # waits for an open timeout only
        kinds[d][undid] = EPISODE_NONE
        pends[d][kinds[d] != EPISODE_TIMEOUT] = -1
    return fast


def _effective_mss(mss, maxpay):
    """Per data direction: the MSS the peer announced, else the largest payload, else 1460."""
    ngd = len(mss)
    eff = np.where(mss[np.arange(ngd) ^ 1] > 0, mss[np.arange(ngd) ^ 1], maxpay)
    return np.where(eff > 0, eff, 1460)



def resent_segments(pay, mss):
    """Segments of ``mss`` bytes in retransmitted packets of ``pay`` payload bytes: ``ceil(pay
    / mss)``, at least 1 (a SYN or FIN resent). What a sender's own counters count
    (``Tcp.RetransSegs``): a packet captured at a sender whose path offloads segmentation
    (TSO/GSO) holds up to 64 KB, many segments. ``mss``: the MSS the peer announced, which
    exceeds the segments' payload by the TCP options they carry (12 bytes of timestamps),
    so a packet of n full segments counts n for n up to MSS / options (121 with timestamps)."""
    return np.maximum(-(-np.asarray(pay, np.int64) // np.asarray(mss, np.int64)), 1)


_FEW_GROUPS = 4096      # grouped_median_min sorts up to this many groups one slice at a time


_MEDIAN_PIECE = 1 << 20  # grouped_median_min takes more values than this in ranges of groups


def grouped_median_min(values, groups, *, consume: bool = False) -> tuple:
    """(groups present (sorted), median, minimum, count of ``values`` per group): the median
    of n sorted values is the middle one, or the mean of the two middle ones, (a + b) / 2,
    as pandas's groupby median gives it. ``values`` hold no NaN (RTT samples); ``groups``
    are integers >= 0. ``consume``: ``values`` may be reordered in place (the caller's
    own copy, not used after).

    Many values (a long flow's samples, one per ACK) are taken a range of groups at a time,
    ranges of about :data:`_MEDIAN_PIECE` values cut between groups (from the groups'
    counts): each group lies in one range, so the results are the same, and the sorts'
    temporaries follow a range, not all the values."""
    if len(values) <= _MEDIAN_PIECE:
        return _grouped_median_min(values, groups, consume)
    counts = np.bincount(groups)
    present = np.flatnonzero(counts)
    upto = np.cumsum(counts[present])
    # range j: the groups whose values end after j pieces' worth and up to j + 1 (at least one)
    first = np.flatnonzero(np.r_[True, np.diff(upto // _MEDIAN_PIECE) > 0])
    out = []
    for a, b in zip(first.tolist(), np.r_[first[1:], len(present)].tolist()):
        lo, hi = int(present[a]), int(present[b - 1])
        inside = (groups >= lo) & (groups <= hi)
        out.append(_grouped_median_min(values[inside], groups[inside], True))
        del inside
    return tuple(np.concatenate(parts) for parts in zip(*out))


def _grouped_median_min(values, groups, consume: bool) -> tuple:
    """:func:`grouped_median_min` of values held at once (groups already in order - one
    group, or samples in time order - are not sorted again)."""
    if len(groups) < 2 or bool((groups[1:] >= groups[:-1]).all()):
        g, v = groups, values if consume else values.copy()     # v is sorted in place below
    else:
        order = np.argsort(groups, kind="stable")
        g, v = groups[order], values[order]
        del order
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    counts = np.diff(np.r_[starts, len(g)])
    # each group's values in ascending order (which of equal values comes first changes no
    # result): a few groups are sorted a slice at a time, in place; many at once, by values
    # then stably by group (a two-key lexsort costs about twice either)
    if len(starts) <= _FEW_GROUPS:
        for a, b in zip(starts.tolist(), (starts + counts).tolist()):
            v[a:b].sort()
    else:
        o = np.argsort(v)
        v = v[o[np.argsort(g[o], kind="stable")]]
        del o
    med = (v[starts + (counts - 1) // 2] + v[starts + counts // 2]) / 2
    return g[starts], med, v[starts], counts
