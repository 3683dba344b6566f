"""The per-row TCP rules, written once: what a segment occupies, which rows are keep-alives,
which are below snd_max (retransmission or out-of-order candidates), which may be duplicate
ACKs and which are, which advertise a zero window, how many duplicate ACKs (and ACKs with a
SACK block) preceded a row, which retransmissions the receiver asked for, the ranges a
direction skipped at the capture point and which segments fill them, which segments below
snd_max are out of order rather than retransmitted, which retransmissions
nothing from the receiver prompted (the timer's, never fast), and the three
retransmission judgements that look forward in time: Karn (a retransmission voids the RTT
sample of the segment it resends), Eifel and DSACK (spurious retransmissions), and F-RTO's
test of a spurious timeout.

The TCP engine (:mod:`._tcpstream`) applies them chunk by chunk, to the rows of one flow or
of many flows one after another, on arrays of rows where
``rel`` is the row's sequence number relative to its direction's ISN (unwrapped),
``smb_own`` the row's own direction's snd_max just before it (-1: nothing sent yet),
``pay`` the payload bytes and ``flags`` the TCP flags byte. The C row chain
(``_tcploops.c`` ``stream_rows``) is their compiled twin, tested against them. Definitions
are in :mod:`.tcp`'s notes (tshark's rules where tshark has one).
"""
from __future__ import annotations

import numpy as np

from ._tcparrays import FIN, M32, OFF, RST, SYN


def segment_ends(rel, pay, flags):
    """Sequence number just past each segment: ``rel + pay``, plus one for a SYN and one
    for a FIN (both occupy sequence space)."""
    end = rel + pay
    end += (flags & SYN) != 0
    end += (flags & FIN) != 0
    return end


def keepalives_and_below(rel, smb_own, pay, flags):
    """``(keepalive, below)`` per row. A keep-alive: 0 or 1 payload byte, no SYN/FIN, at
    snd_max - 1. Below: data, SYN or FIN (sent again, SYNs and FINs are retransmissions too)
    starting below the direction's snd_max, not a keep-alive."""
    synfin = (flags & (SYN | FIN)) != 0
    keepalive = (pay <= 1) & ~synfin & (rel == smb_own - 1)
    below = ((pay > 0) | synfin) & (rel < smb_own) & ~keepalive & (smb_own >= 0)
    return keepalive, below


def dupack_candidates(rel, smb_own, pay, flags, has_ack, win):
    """Rows that are duplicate ACKs if they repeat the ACK and window of their direction's
    previous row and do not answer a keep-alive (the callers' part): a pure ACK (no payload,
    no SYN/FIN/RST) with a non-zero window at the sender's next sequence number (tshark: a
    keep-alive at snd_nxt - 1 repeating the ACK is a keep-alive, not a duplicate ACK)."""
    return (pay == 0) & ((flags & (SYN | FIN | RST)) == 0) & has_ack & (win > 0) & (rel == smb_own)


def duplicate_acks(dr, rela, win, candidate, keepalive, fl=None, carry=None):
    """tshark's duplicate ACKs among rows of one flow or of many flows one after another
    (``fl``: each row's flow, None: one flow; the look-back stays inside the flow), in time
    order inside each flow: a ``candidate`` row (:func:`dupack_candidates`) whose ACK
    ``rela`` and window ``win`` equal those of its direction's previous row (``dr``: 0/1),
    unless the other direction's previous row is a keep-alive (``keepalive``; the answer to
    a keep-alive repeats the ACK too). What precedes these rows (a chunk's carry; None:
    nothing), per direction ``d``: ``carry[d]`` = (has_prev, prev_rela, prev_win, ka),
    arrays over the flows: whether ``d`` sent an earlier row, its (rela, win), and whether
    it was a keep-alive."""
    fl = np.zeros(len(dr), np.int64) if fl is None else fl
    dup = np.zeros(len(dr), bool)
    for d in (0, 1):
        idx = np.flatnonzero(dr == d)
        if not len(idx):
            continue
        ra, w, f = rela[idx], win[idx], fl[idx]
        same = (ra[1:] == ra[:-1]) & (w[1:] == w[:-1]) & (f[1:] == f[:-1])
        dup[idx[1:]] = same
        if carry is not None:                  # each flow's first row of d: against the carry
            st = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
            has, prela, pwin, _ = carry[d]
            g = f[st]
            dup[idx[st]] = has[g] & (ra[st] == prela[g]) & (w[st] == pwin[g])
        del ra, w, same, idx, f
    dup &= candidate
    cand = np.flatnonzero(dup)
    for d in (0, 1):
        rows = cand[dr[cand] == d]
        if not len(rows):
            continue
        other = np.flatnonzero(dr != d)
        p = np.searchsorted(other, rows) - 1
        q = other[np.maximum(p, 0)] if len(other) else rows
        earlier = (p >= 0) & (fl[q] == fl[rows])          # the other direction's previous row here
        answer = earlier & keepalive[q]
        if carry is not None:
            answer |= ~earlier & (carry[1 - d][3][fl[rows]] == 1)
        dup[rows[answer]] = False
    return dup


def zero_windows(win, flags):
    """Rows advertising a zero receive window (SYN, FIN and RST rows excepted)."""
    return (win == 0) & ((flags & (SYN | FIN | RST)) == 0)


def dups_since_advance(idx, dr, advances: dict, dups: dict, carried=None, first=None, fl=None, *,
                       with_advance=False):
    """Per row of ``idx`` (sorted row numbers): the duplicate ACKs the reverse direction
    sent since its ACK last advanced, up to and including the row - the count the
    fast-retransmit rule compares with 2 (``with_advance``: the rows counted may include
    the advancing ACK itself, as the SACK-bearing ACKs do). ``dr``: each row's direction (0/1);
    ``advances[a]``, ``dups[a]``: sorted rows where direction ``a``'s cumulative ACK advanced
    and ``a``'s duplicate ACKs. Rows of many flows one after another: ``first`` gives, per
    row of ``idx``, the first row of its flow (None: one flow from row 0), ``fl`` each
    row's flow; ``carried[a]`` (an array over the flows; None: zeros): ``a``'s duplicate
    ACKs since its last advance before these rows (a chunk's carry), counted for rows that
    no advance of their flow precedes."""
    out = np.zeros(len(idx), np.int64)
    for a in (0, 1):
        sel = dr[idx] != a                                  # data of d is ACKed by a = d ^ 1
        ii = idx[sel]
        R, D = advances[a], dups[a]
        k = np.searchsorted(R, ii, "right") - 1
        upto = np.searchsorted(D, ii, "right")
        lr = R[np.maximum(k, 0)] if len(R) else ii
        lo = np.zeros(len(ii), np.int64) if first is None else first[sel]
        adv = (k >= 0) & (lr >= lo)
        before = np.searchsorted(D, lo, "left")
        if carried is not None:
            before = before - carried[a][fl[ii] if fl is not None else 0]
        out[sel] = np.where(adv, upto - np.searchsorted(D, lr, "left" if with_advance else "right"), upto - before)
    return out


def fast_retransmit_asked(dups, sacks, rel, ack_rev):
    """Retransmissions the receiver asked for (the fast retransmit rule; the callers drop
    those the timer sent again, :func:`resent_unprompted`): the segment starts at the
    reverse direction's cumulative ACK ``ack_rev`` and the receiver sent, since that ACK
    last advanced, >= 2 duplicate ACKs (``dups``, :func:`dups_since_advance`; tshark's
    count) or, from the advancing ACK on, >= 1 ACK with a SACK block that is not a DSACK
    (``sacks``): it reports data above the hole, and SACK-based loss detection may
    retransmit on it alone - Linux's RACK (RFC 8985) marks the hole lost once data sent
    after it is SACKed and a reordering window (a quarter of the minimum RTT, none once
    three segments are SACKed) has passed, and counts the retransmission in
    ``TCPFastRetrans``; a partial ACK that still SACKs data above is such an ACK."""
    return ((dups >= 2) | (sacks >= 1)) & (rel == np.maximum(ack_rev, 0))


def out_of_order(gap, known, irtt, dups, ack_rev, ack_rev_before, rel, end, smb_own, data):
    """Which segments below snd_max were reordered on the way to the capture point rather
    than sent again (tshark's rule), for rows given as arrays of equal length: out of order
    when it arrives within the handshake RTT ``irtt`` (ns; 3 ms when the handshake was not
    captured) of the last segment of its direction that advanced snd_max (``gap``, ns;
    ``known``: there was such a segment), does not end exactly at snd_max (``end``,
    ``smb_own``), is not a fast retransmission (>= 2 duplicate ACKs, ``dups``, asking for
    it: it starts at the reverse direction's cumulative ACK ``ack_rev``; one duplicate ACK
    with a SACK block does not count here: a late original at the receiver follows one
    such ACK too) and its data was
    not ACKed already (``ack_rev_before``: the reverse direction's ACK before the row;
    tshark calls that spurious first)."""
    fastlike = fast_retransmit_asked(dups, 0, rel, ack_rev)
    acked = data & (end <= ack_rev_before)
    return known & (gap < irtt) & (end != smb_own) & ~fastlike & ~acked


def gaps_left(fl, rel, smb_own, flags):
    """The sequence ranges a direction skipped at the capture point: per row that starts
    above its direction's snd_max (``smb_own`` >= 0; any row but a RST - a pure ACK's
    sequence number is the sender's next byte, so one above snd_max says the bytes before
    it were sent unseen), its flow and the range [snd_max, rel) - bytes that had not passed
    when later ones did (lost before the capture point, reordered, or missed by the
    capture). Returns (flow, lo, hi) arrays."""
    g = np.flatnonzero(((flags & RST) == 0) & (smb_own >= 0) & (rel > smb_own))
    return fl[g].astype(np.int64), smb_own[g].astype(np.int64), rel[g].astype(np.int64)


def fill_gaps(fl, rel, end, gaps, wanted) -> tuple:
    """Per row (flow ``fl``, segment [``rel``, ``end``); rows of one direction below its
    snd_max, in time order within each flow) where ``wanted``: whether it carries bytes of
    a range its direction skipped that no earlier row filled (``gaps``: (flow, lo, hi)
    arrays of :func:`gaps_left`, sorted by flow then lo, disjoint per flow); and the gaps
    left after all the rows, in the same form. A segment that fills nothing carries only
    bytes that passed the capture point before: it was sent again, never reordered (a
    capture at the sender sees no gaps). Returns (mask over the rows, False where not
    ``wanted``; gaps): each wanted row (few: the out-of-order candidates) against the
    earlier rows of its flow; the gaps left are the gaps minus every row's bytes, one
    sweep over sorted boundaries."""
    gf, lo, hi = gaps
    fills = np.zeros(len(rel), bool)
    if not len(gf) or not len(rel):
        return fills, gaps
    key = gf * OFF + lo                                     # sorted: flow, then lo
    run_hi = np.maximum.accumulate(gf * OFF + hi) - gf * OFF  # largest hi so far in the flow
    j = np.searchsorted(key, fl.astype(np.int64) * OFF + end, "left") - 1   # last gap with lo < end
    jj = np.maximum(j, 0)
    touch = (j >= 0) & (gf[jj] == fl) & (run_hi[jj] > rel)
    if not touch.any():
        return fills, gaps
    # each wanted row touching a gap: is a byte of it in a gap that no earlier row of its
    # flow touching a gap covers? (rows are flow-major, in time order inside a flow)
    t = np.flatnonzero(touch)
    tf = fl[t]
    for r in np.flatnonzero(touch & wanted).tolist():
        f, s, e = int(fl[r]), int(rel[r]), int(end[r])
        a, b = np.searchsorted(gf, f, "left"), np.searchsorted(gf, f, "right")
        missing = [(max(x, s), min(y, e)) for x, y in zip(lo[a:b].tolist(), hi[a:b].tolist()) if x < e and y > s]
        q = t[np.searchsorted(tf, f, "left"):np.searchsorted(t, r, "left")]
        q = q[(rel[q] < e) & (end[q] > s)]
        cover = sorted(zip(np.maximum(rel[q], s).tolist(), np.minimum(end[q], e).tolist()))
        for x, y in missing:                                # x..y covered by the earlier rows?
            for c0, c1 in cover:
                if c0 > x:
                    break
                x = max(x, c1)
            if x < y:
                fills[r] = True
                break
    # the gaps left: points inside a gap (g = 1) that no row covers (c = 0), from the
    # boundaries of both sorted by flow and position (the state after a boundary holds up
    # to the next one; each flow's ends with g = c = 0, so no run crosses flows)
    pos = np.concatenate([key, gf * OFF + hi, tf.astype(np.int64) * OFF + rel[t], tf.astype(np.int64) * OFF + end[t]])
    ng, nt = len(gf), len(t)
    dg = np.concatenate([np.ones(ng, np.int64), -np.ones(ng, np.int64), np.zeros(2 * nt, np.int64)])
    dc = np.concatenate([np.zeros(2 * ng, np.int64), np.ones(nt, np.int64), -np.ones(nt, np.int64)])
    o = np.argsort(pos, kind="stable")
    pos, g, c = pos[o], np.cumsum(dg[o]), np.cumsum(dc[o])
    run = np.flatnonzero((g[:-1] == 1) & (c[:-1] == 0) & (pos[1:] > pos[:-1]))
    out_f = pos[run] // OFF
    return fills, (out_f, pos[run] - out_f * OFF, pos[run + 1] - out_f * OFF)


def karn_voided(keys, retx_keys_sorted):
    """Karn's rule: which segments (``keys``: data direction group * ``OFF`` + relative
    first byte) had their first byte retransmitted at some time, given the sorted keys of
    every retransmission of the same flows. An RTT sample timed on such a segment is
    ambiguous and dropped."""
    if not len(retx_keys_sorted):
        return np.zeros(len(keys), bool)
    pos = np.minimum(np.searchsorted(retx_keys_sorted, keys), len(retx_keys_sorted) - 1)
    return retx_keys_sorted[pos] == keys


def eifel_older(tsval, tsecr):
    """Eifel detection (RFC 3522 section 2): the first ACK covering a retransmission echoes a
    TSval (``tsecr``) older than the retransmission's own ``tsval`` - then the original was
    ACKed and the retransmission was spurious. Older in 32-bit serial-number arithmetic
    (RFC 7323 section 5.2): ``0 < (tsval - tsecr) mod 2**32 < 2**31``."""
    diff = (np.asarray(tsval).astype(np.int64) - np.asarray(tsecr).astype(np.int64)) % M32
    return (diff > 0) & (diff < (1 << 31))


def frto_original_acked(ack, lo, high):
    """F-RTO's spurious-timeout test (RFC 5682 section 3.1 step 3b, as Linux's
    ``tcp_process_loss`` applies it with ``FLAG_ORIG_SACK_ACKED``): an ACK after a timeout
    retransmission covers data sent only once - past ``lo``, the end of the resent (or
    earlier-acknowledged) bytes - and below ``high``, the snd_max when the timer fired:
    that data reached the receiver, so not all was lost and the timeout was spurious.
    Relative sequence numbers, arrays of equal length."""
    return (ack > lo) & (lo < high)


def dsack_edges(left_raw, base, near):
    """DSACK blocks' left edges (raw 32-bit, RFC 2883) as sequence numbers relative to the
    reported data direction's ISN ``base`` (per row), unwrapped past 2**32 to the value
    nearest ``near`` (the reporting row's cumulative ACK, relative; < 0 counts as 0): a
    duplicate block lies within 2**31 bytes of the ACK that reports it."""
    dl = (np.asarray(left_raw).astype(np.int64) - base) % M32
    near = np.maximum(near, 0)
    return near + (((dl - near) + (1 << 31)) % M32) - (1 << 31)


def dsack_reported(retx_keys, retx_rows, dsack_keys, dsack_rows):
    """Which retransmissions a later DSACK (RFC 2883) reports as received twice: mask over
    the retransmissions, given their keys (data direction group * ``OFF`` + relative first
    byte) and row numbers (any order) and the DSACK rows' keys (the reported direction's
    group * ``OFF`` + :func:`dsack_edges`) and row numbers. A block whose left edge is the
    first byte of several retransmissions reports the last of them (in row order when the
    retransmissions are given in row order); only a DSACK sent after it counts."""
    out = np.zeros(len(retx_keys), bool)
    if not len(retx_keys) or not len(dsack_keys):
        return out
    srt = np.argsort(retx_keys, kind="stable")
    rkey_s = retx_keys[srt]
    hi = np.searchsorted(rkey_s, dsack_keys, side="right") - 1
    ok = hi >= 0
    hi = np.maximum(hi, 0)
    ok &= rkey_s[hi] == dsack_keys
    cand = srt[hi]
    ok &= retx_rows[cand] < dsack_rows
    out[cand[ok]] = True
    return out


def resent_unprompted(fl, rel, row, last_rev_row, held=None):
    """Which retransmissions of one direction resend the first byte of an earlier
    retransmission with no segment of the reverse direction in between: nothing the
    receiver sent can have prompted them, so the retransmission timer did (RFC 6298
    section 5.4) - fast retransmit and fast recovery answer ACKs (RFC 5681 section 3.2,
    RFC 6582, RFC 6675), and a retransmission found lost again is resent on an ACK too
    (RFC 8985). Rows in row order: flow ``fl``, first byte ``rel``, row number ``row``
    (counted across chunks) and ``last_rev_row``, the reverse direction's last row of the
    flow before it (-1: none). ``held``: (fl, rel, row) of earlier chunks' retransmissions
    after which the reverse direction sent nothing yet (None: none). Returns (mask over the
    rows, (fl, rel, row) of the held and these retransmissions)."""
    if held is not None and len(held[0]):
        f, r, w = (np.concatenate((h, x)) for h, x in zip(held, (fl, rel, row)))
    else:
        f, r, w = fl, rel, row
    order = np.lexsort((w, r, f))
    fs, rs, ws = f[order], r[order], w[order]
    prev = np.full(len(f), -1, np.int64)
    same = (fs[1:] == fs[:-1]) & (rs[1:] == rs[:-1])
    prev[order[1:][same]] = ws[:-1][same]
    prev = prev[len(f) - len(fl):]
    return (prev >= 0) & (last_rev_row < prev), (f, r, w)
