"""Grouped array primitives of the TCP analysis: whole-array numpy operations over packets
sorted by flow (and direction), with C twins of the hot loops (``collectors/_tcploops.c``).

Used by the TCP engine (:mod:`._tcpstream`). Groups are consecutive runs of rows; :data:`OFF` offsets a group's
values so one sort or running maximum serves every group at once.
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


def _recovery(ri, dr, fl, fast, ackr, smb_own, carry, again) -> None:
    """Marks in ``fast`` the retransmissions (rows ``ri``) inside a recovery episode that a
    fast retransmission opened: until the reverse direction's cumulative ACK (``ackr`` at
    each of ``ri``) reaches the ``snd_max`` the last fast retransmission of the flow saw
    (``smb_own``) - RFC 6582's full ACK, which covers ``recover``, the highest sequence
    number sent when recovery began - or a retransmission resends a first byte already
    retransmitted since the ACK last advanced (``again``, a row mask: the retransmission
    timer fired, which ends recovery). Only the retransmissions already in ``fast`` (those
    after duplicate ACKs) open an episode; one marked here does not move ``recover``.
    ``fl``: each row's flow (rows of a flow consecutive). ``carry[d]``: per flow, that
    ``snd_max`` of the episode of direction ``d`` still open after earlier chunks
    (:data:`NONE`: none), updated in place."""
    for d in (0, 1):
        sel = dr[ri] == d
        rr = ri[sel]
        if not len(rr):
            continue
        fpos = rr[fast[rr]]
        rpos = rr[again[rr]]
        before = carry[d][fl[rr]]
        k = np.searchsorted(fpos, rr, "right") - 1
        lf = fpos[np.maximum(k, 0)] if len(fpos) else rr
        valid = (k >= 0) & (fl[lf] == fl[rr])
        lim = np.where(valid, smb_own[lf], before)
        start = np.where(valid, lf, -1)                      # -1: the episode carried in
        use = valid | (before != NONE)
        # the last repeat at or before each row, in the row's flow, after the episode's start
        q = np.searchsorted(rpos, rr, "right") - 1
        lr = rpos[np.maximum(q, 0)] if len(rpos) else rr
        ended = (q >= 0) & (fl[lr] == fl[rr]) & (lr > start)
        fast[rr[use & ~ended & (ackr[sel] < lim)]] = True
        # each flow's episode after this chunk: its last opener's, unless a repeat followed
        last = np.flatnonzero(np.r_[fl[rr][1:] != fl[rr][:-1], True])
        open_ = use[last] & ~ended[last]
        carry[d][fl[rr][last]] = np.where(open_, lim[last], NONE)


def _effective_mss(mss, maxpay):
    """Per data direction: the MSS the peer announced, else the largest payload, else 1460."""
    ngd = len(mss)
    eff = np.where(mss[np.arange(ngd) ^ 1] > 0, mss[np.arange(ngd) ^ 1], maxpay)
    return np.where(eff > 0, eff, 1460)



_FEW_GROUPS = 4096      # grouped_median_min sorts up to this many groups one slice at a time


def grouped_median_min(values, groups) -> tuple:
    """(groups present (sorted), median, minimum, count of ``values`` per group): the median
    of n sorted values is the middle one, or the mean of the two middle ones, (a + b) / 2,
    as pandas's groupby median gives it. ``values`` hold no NaN (RTT samples)."""
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
