"""The TCP engine: the per-packet TCP rules applied to rows of one or many flows, chunk after
chunk, with the state that crosses chunk boundaries carried (docs/collectors.md, "What a
time-chunked analysis has to carry"): memory follows the chunk, not the flow. Every TCP
analysis goes through it - a capture (or a group of flows) that fits is one chunk of all
its flows, a flow bigger than the limit is an engine of its own fed in time chunks - so the
rules exist once; the definitions are in :mod:`.tcp`'s notes.

What a flow's first packets of each kind fix for the whole flow (direction, ISNs,
handshake RTT, first and last time, window scales, MSS) is found before the rows go
through: from the rows themselves (:func:`first_of_rows`) or from the census of a capture
(:func:`first_from_census`). The three decisions that look forward in time concern sparse
rows and are settled at the end: Karn (a later retransmission voids an RTT sample), Eifel
(the first ACK covering a retransmission, held until it arrives) and DSACK (the last
retransmission of the reported block). Per-bin sums of the series add across chunks
(integer-valued float sums: exact). The per-row chain (each flow's run of rows with its
carried state) and the bin sums of every engine run in C (``_tcploops.c``: ``stream_rows``,
``stream_bins``); their numpy forms here are the reference the tests compare them with.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._columns import Columns, utc_times
from ._decode import SYN, ecn_counts
from ._tcparrays import (ACK, M32, NEVER, NONE, OFF, _effective_mss, _tcploops, _first_with_key, _grouped_cummax,
                         _unique_first, _unwrap, episode_carry, recovery_episodes, resent_segments)
from ._tcpframes import (_EMPTY, KIND_FAST, KIND_RTT, KIND_TIMEOUT, TcpAnalysis, _events_frame, _rtt_columns,
                         _series_frame, check_series_rows, event_rows, spurious_reasons)
from ._tcprules import (dsack_edges, dsack_reported, duplicate_acks, dupack_candidates, dups_since_advance,
                        eifel_older, fast_retransmit_asked, fill_gaps, frto_original_acked, gaps_left, karn_voided,
                        keepalives_and_below, out_of_order, resent_unprompted, segment_ends, zero_windows)
from ._sortedruns import SpooledPieces
from .pcap import direction_column


_stream_rows = getattr(_tcploops, "stream_rows", None)     # None: the extension is not built
_stream_bins = getattr(_tcploops, "stream_bins", None)
_BIN_SLICE = 1 << 18       # rows whose bin numbers the series sums hold at a time


def _member(values, sorted_set):
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set`` (binary search: the sets
    carried across chunks grow, and a hash or sort of them per chunk would not pay)."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    p = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[p] == values


def _unwrap_carried(raw, g, base, last_raw, last_rel):
    """:func:`._tcparrays._unwrap` of one direction's 32-bit values (rows of each flow ``g``
    consecutive) relative to the flow's ``base``, continued per flow from the previous
    chunk's last raw value ``last_raw`` (-1: none, the flow's first rows) and its unwrapped
    value ``last_rel``: that value + the signed 32-bit step to the first raw value + the
    unwrapped steps after."""
    st = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    gs = g[st]
    cont = last_raw[gs] >= 0
    if not cont.any():
        return _unwrap(raw, g, base)
    b = base.copy()
    b[gs[cont]] = raw[st[cont]]
    u = _unwrap(raw, g, b)
    step = (raw[st[cont]].astype(np.int64) - last_raw[gs[cont]]) % M32
    add = np.zeros(len(base), np.int64)
    add[gs[cont]] = last_rel[gs[cont]] + np.where(step >= 1 << 31, step - M32, step)
    u += add[g]
    return u


def _runs(fl):
    """(first row, last row, flow) of each run of consecutive rows of one flow."""
    st = np.flatnonzero(np.r_[True, fl[1:] != fl[:-1]])
    return st, np.r_[st[1:] - 1, len(fl) - 1], fl[st]


@dataclass
class SideState:
    """What one direction ``d`` of each of the engine's flows carries from one chunk to the
    next: arrays over the flows (sequence numbers relative to the direction's ISN, times in
    ns), and what awaits a later chunk. Fields read as ``d``'s own rows or, for the ACK
    side, as the rows ``d`` sent acknowledging the other direction."""

    last_seq: np.ndarray            # raw 32-bit sequence number of d's last row (-1: none yet)
    last_rel: np.ndarray            # ... and its unwrapped relative value
    last_ack: np.ndarray            # raw 32-bit ACK number of d's last row (-1: none yet)
    last_rela: np.ndarray           # ... and its unwrapped relative value
    am: np.ndarray                  # running maximum of the ACKs d sent (ack_max of the other side), -1
    sm: np.ndarray                  # snd_max: running maximum of d's segment ends, -1
    has_prev: np.ndarray            # d sent a row before (duplicate-ACK rule) ...
    prev_rela: np.ndarray           # ... its ACK (-1: none)
    prev_win: np.ndarray            # ... its window
    ka: np.ndarray                  # ... whether it was a keep-alive (int8; -1: no row yet)
    dups: np.ndarray                # duplicate ACKs d sent since its ACK last advanced
    sacks: np.ndarray               # ACKs d sent with a SACK block (not a DSACK) since, and with, that advance
    adv_t: np.ndarray               # time of d's last row that advanced snd_max (NONE: none)
    nretx: np.ndarray               # retransmissions of d so far (Karn's rule)
    resent_end: np.ndarray          # largest segment end d retransmitted so far (F-RTO's "sent once"), -1
    maxpay: np.ndarray              # largest payload d sent (effective MSS)
    paysum: np.ndarray              # payload bytes d sent (float64)
    last_row: np.ndarray = None     # d's last row per flow, counted from the engine's first row (-1: none)
    resent: tuple = field(default_factory=lambda: (np.zeros(0, np.int32), np.zeros(0, np.int64),
                                                   np.zeros(0, np.int64)))
    #               (flow, first byte, row) of d's retransmissions the reverse direction has not answered yet
    pending: list = field(default_factory=list)   # (row, end, tsval, flow) of d's retransmissions awaiting their ACK
    orig: dict | None = None        # d's segments sent once, still awaiting their ACK
    seqack: SpooledPieces = field(default_factory=SpooledPieces)   # seq/ACK RTT samples of d's ACKs (t, packet, ms, segment rel, flow)
    ts_first: tuple | None = None   # (sorted flow * 2**32 + TSval, row, t): first row of d with each TSval
    echoed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # flow * 2**32 + TSecr d echoed
    tspairs: SpooledPieces = field(default_factory=SpooledPieces)  # timestamp RTT samples of d's echoes (t, packet, ms, key)

    @classmethod
    def start(cls, nflow: int) -> "SideState":
        """The state before a flow's first row, for ``nflow`` flows."""
        def full(v, dt=np.int64):
            return np.full(nflow, v, dt)
        return cls(last_seq=full(-1), last_rel=full(0), last_ack=full(-1), last_rela=full(0), am=full(-1),
                   sm=full(-1), has_prev=full(False, bool), prev_rela=full(0), prev_win=full(0),
                   ka=full(-1, np.int8), dups=full(0), sacks=full(0), adv_t=full(NONE), nretx=full(0),
                   resent_end=full(-1),
                   maxpay=full(0), paysum=full(0.0, np.float64), last_row=full(-1))


@dataclass
class UndoWait:
    """The undo verdict a timeout retransmission waits for (:meth:`FlowStream._undo_search`),
    per entry: ``stage`` (1: the first advancing ACK after it, 2: F-RTO's second), ``tsv``
    (its TSval for Eifel, -1: none), ``frto`` (F-RTO can still undo it: no SACK-bearing ACK
    since the ACK last advanced before it), ``lo`` (data past this, relative sequence
    number, was not resent), ``high`` (its direction's snd_max when it was sent) and
    ``sent`` (stage 2: new data went out since the first advancing ACK)."""

    stage: np.ndarray
    tsv: np.ndarray
    frto: np.ndarray
    lo: np.ndarray
    high: np.ndarray
    sent: np.ndarray

    def take(self, idx) -> "UndoWait":
        return UndoWait(*(getattr(self, k)[idx] for k in self.__dataclass_fields__))

    def rows(self) -> list:
        return list(zip(*(getattr(self, k).tolist() for k in self.__dataclass_fields__)))

    @classmethod
    def from_rows(cls, rows: list) -> "UndoWait":
        cols = list(zip(*rows))
        return cls(np.array(cols[0], np.int8), np.array(cols[1], np.int64), np.array(cols[2], bool),
                   np.array(cols[3], np.int64), np.array(cols[4], np.int64), np.array(cols[5], bool))


#: A streamed flow's events (:meth:`FlowStream.finish` with ``spill``) above this many rows
#: are made in pieces of about this many.
EVENT_PIECE_ROWS = 1 << 19


class EventPieces:
    """A long flow's events frame as pieces made one at a time (iterating): each piece
    the events of one time range, sorted as :func:`._tcpframes._events_frame` sorts, the
    ranges ascending and disjoint - so the pieces, joined in order, are the frame
    :func:`._tcpframes._events_frame` makes of all the parts at once (rows of equal time
    are always in the same piece), and no (time, flow) key is in two pieces, as
    :class:`._sortedruns.SortedRuns` needs of its runs. ``parts(lo, hi)``: the parts of
    the times in [lo, hi); ``n``: the events in all; ``times``: the RTT samples' times
    (most of the events), whose quantiles (of a sample of them) cut the ranges."""

    def __init__(self, parts, n: int, times, source: str):
        self.parts, self.n, self.times, self.source = parts, n, times, source

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        k = -(-self.n // EVENT_PIECE_ROWS)
        # cut at quantiles of a sample of the times (any cuts give the same frame; these
        # give pieces of about equal size without a sorted copy of the times)
        sample = self.times[::max(1, len(self.times) // 65536)]
        cuts = np.unique(np.quantile(sample, np.arange(1, k) / k, method="lower")) if len(sample) \
            else np.zeros(0, np.int64)
        edges = np.r_[np.iinfo(np.int64).min, cuts, np.iinfo(np.int64).max]
        for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
            parts = self.parts(lo, hi)
            if sum(len(p) for p in parts):
                yield _events_frame(parts, self.source)


class FlowStream:
    """The TCP engine: the per-packet rules over ``nflow`` flows, fed chunk after chunk
    (:meth:`chunk`) with the state that crosses chunks carried; :meth:`finish` returns the
    flows columns, series and events. A capture that fits is one chunk of all its flows;
    a flow bigger than the limit is one engine of one flow fed in time chunks.

    ``first`` holds what each flow's first packets of each kind fix for the whole flow,
    arrays over the flows (:func:`first_of_rows`, :func:`first_arrays`): ``base`` (ISN per
    flow * 2 + direction), ``ack_ref`` (where that direction's ACKs start unwrapping:
    :meth:`_start_ack_unwrap`), ``irtt`` (handshake RTT, ns), ``t_first``/``t_last`` (ns),
    ``present`` (the flow has TCP rows), ``ws``/``mss`` (per flow * 2 + direction, from the
    SYNs), ``shift`` (window scale applied) and ``rows`` (the rows to come, all flows: a
    series far longer than that is refused, :func:`._tcpframes.check_series_rows`, naming
    ``source``). The state a chunk leaves to the next is
    per direction in :attr:`side` (two :class:`SideState`), per flow in the bin sums
    (:attr:`acc`, rows of flow, direction, bin as in :func:`._tcpframes._series_frame`),
    the fast-recovery carry (:attr:`lf`), retransmission and event lists. ``spill``: an
    open file where the RTT samples wait for :meth:`finish` (:class:`._sortedruns.SpooledPieces`;
    a long flow's), which then makes the events in pieces (:class:`EventPieces`); None:
    they are held."""

    def __init__(self, first: dict, res_ns: int, source: str = "", *, spill=None):
        self.f = first
        self.res_ns = res_ns
        self.nflow = F = len(first["irtt"])
        self.base = np.asarray(first["base"], np.int64)
        self.irtt = np.asarray(first["irtt"], np.int64)
        present = np.asarray(first["present"], bool)
        self.start_bin = np.where(present, np.asarray(first["t_first"], np.int64) // res_ns, np.iinfo(np.int64).max)
        self.nb = np.where(present, np.asarray(first["t_last"], np.int64) // res_ns - self.start_bin + 1, 0)
        self.offset = np.r_[0, np.cumsum(2 * self.nb)[:-1]].astype(np.int64) if F else np.zeros(0, np.int64)
        self.total = int((2 * self.nb).sum())
        if F:          # before the series sums are allocated: a damaged timestamp is refused
            worst = int(np.argmax(self.nb))
            check_series_rows(source, worst, int(self.nb[worst]), res_ns, self.total, int(first["rows"]))
        self.acc = {k: np.zeros(self.total) for k in ("packets", "bytes", "pay", "adv", "dupacks",
                                                       "zero_windows", "rw_sum", "rw_n", "infl_s", "infl_c")}
        self.rows = 0
        self._flow_bins = None               # _bin_sums_c's per-flow bin parameters, once
        self.side = (SideState.start(F), SideState.start(F))   # per direction (0 fwd, 1 rev)
        self._start_ack_unwrap(np.asarray(first["ack_ref"], np.int64))
        self.spill = spill is not None
        if spill is not None:   # a long flow's RTT samples (one per ACK) wait in this file for finish()
            for side in self.side:
                side.seqack, side.tspairs = SpooledPieces(spill), SpooledPieces(spill)
        self.episode = [episode_carry(F), episode_carry(F)]   # [d]: recovery_episodes' carry
        self.undo_wait = [{}, {}]          # [d]: {key: UndoWait row} of open timeout episodes' waiting verdicts
        # [d]: (flow, lo, hi) of the ranges d skipped not yet cumulatively ACKed (gaps_left)
        self.gaps = [tuple(np.zeros(0, np.int64) for _ in range(3)) for _ in (0, 1)]
        # per flow: bytes of such ranges the other side then cumulatively ACKed - the
        # capture point never saw them pass, although their receiver got them (finish()
        # adds those ACKed past a direction's last byte seen, or into a gap still open)
        self.missed = np.zeros(F, np.int64)
        self.retx = []                     # per chunk: dict of the retransmissions' columns
        self.eifel = []                    # per chunk: (retx rows, their Eifel verdicts) once their ACK came
        self.dsack = []
        self.ev = {"ooo": [], "dupack": [], "zero_window": []}
        self.syn = []                      # per chunk: the SYN rows' flow, direction, options, timestamps

    def _bins(self, fl, t, half):
        """Row of the series sums of (flow ``fl``, ``half``, bin of time ``t``)."""
        return self.offset[fl] + half * self.nb[fl] + (t // self.res_ns - self.start_bin[fl])

    # ---- one chunk
    def chunk(self, c: dict, last: bool = False) -> None:
        """The next rows: columns ``t`` (ns), ``fl`` (flow, 0..nflow-1, rows of a flow
        consecutive and in stable time order; in a later chunk, later than the flow's
        earlier rows), ``dr`` (0 fwd, 1 rev), ``flags``, ``payload``, ``seq``, ``ack``,
        ``window``, ``tsval``, ``tsecr``, ``has_ts``, ``dsack``, ``dsack_left``, ``ip_len``,
        ``packet`` (what an event names the packet by) and ``synopt`` (SYN option bits, of
        the SYN rows only, in row order). Columns are taken out of ``c`` once used (a chunk
        of a whole capture: its memory peak is here). ``last``: no chunk follows, so what
        only a later chunk would read (the segments awaiting their ACK, the first row of
        each TSval, the TSecr values echoed) is not kept: it is freed as soon as this chunk
        has read it."""
        t, flags, pay = c["t"], c["flags"], c["payload"]
        n = len(t)
        if not n:
            return
        F = self.nflow
        S = self.side
        g0 = self.rows

        def grow(idx):                       # rows' numbers since the engine's first row
            return idx + g0
        fl = np.asarray(c["fl"], np.int32)
        dr = np.asarray(c["dr"], np.int8)
        run_st, run_end, run_fl = _runs(fl)

        def first_row(idx):                  # first row of each of idx's flow in this chunk
            return run_st[np.searchsorted(run_st, idx, "right") - 1]
        isd = (dr == 0, dr == 1)                             # rows of each direction
        didx = (np.flatnonzero(isd[0]), np.flatnonzero(isd[1]))
        is_syn = (flags & SYN) != 0
        has_ack = (flags & ACK) != 0
        rows = self._rows_c if _stream_rows is not None else self._rows_numpy
        rel, rela, end, am, sm, smb_own, below, dupack = rows(c, fl, run_st, dr, isd, didx, flags, pay, has_ack)
        data = pay > 0
        zero_win = zero_windows(c["window"], flags)

        # ACKs reporting data above the cumulative ACK (a SACK block that is not a DSACK)
        sacking = has_ack & (c.pop("sack_blocks") > c["dsack"])
        reset_pos, dup_pos, sack_pos = {}, {}, {}
        for a in (0, 1):                       # rows whose ACK advances (from the carry at a flow's first)
            x = am[a]
            m = np.empty(n, bool)
            m[0] = False
            np.not_equal(x[1:], x[:-1], out=m[1:])
            m[run_st] = x[run_st] != S[a].am[run_fl]
            reset_pos[a] = np.flatnonzero(m)
            dup_pos[a] = np.flatnonzero(dupack & isd[a])
            sack_pos[a] = np.flatnonzero(sacking & isd[a])
        del m, x

        def dups_at(idx):
            return dups_since_advance(idx, dr, reset_pos, dup_pos, (S[0].dups, S[1].dups), first_row(idx), fl)

        def sacks_at(idx):
            return dups_since_advance(idx, dr, reset_pos, sack_pos, (S[0].sacks, S[1].sacks), first_row(idx), fl,
                                      with_advance=True)

        def rev_at(idx):
            return np.where(dr[idx] == 0, am[1][idx], am[0][idx])

        def am_before(a, idx):                  # ACK maximum of a before each row idx
            return np.where(idx > first_row(idx), am[a][np.maximum(idx - 1, 0)], S[a].am[fl[idx]])

        def rev_before(idx):
            return np.where(dr[idx] == 0, am_before(1, idx), am_before(0, idx))

        # ---- series sums (a row's own half is its direction's, the other half the reverse)
        A = self.acc
        sums = self._bin_sums_c if _stream_bins is not None else self._bin_sums_numpy
        sums(c, fl, dr, is_syn, pay, rela, am, sm)
        del c["ip_len"], c["window"]
        total = self.total

        def add_rows(key, ii, half, w=None):
            A[key] += np.bincount(self._bins(fl[ii], t[ii], half), weights=w, minlength=total)[:total]
        for a in (0, 1):                  # ACK advances (not the first ACK) go to the acked half
            r = reset_pos[a]
            prev = am_before(a, r)
            r = r[prev >= 0]
            add_rows("adv", r, 1 - a, am[a][r] - prev[prev >= 0])
        for key, mask in (("dupacks", dupack), ("zero_windows", zero_win)):
            ii = np.flatnonzero(mask)
            add_rows(key, ii, 1 - dr[ii].astype(np.int64))

        def last_advance(d, idx, snd):
            """The row of d that raised d's snd_max to ``snd`` (per row of ``idx``, a value
            ``sm[d]`` takes in the row's flow: the first row of the flow reaching it), -1
            when that was in an earlier chunk."""
            key = sm[d] if F == 1 else fl.astype(np.int64) * OFF + sm[d]     # non-decreasing
            j = np.searchsorted(key, snd if F == 1 else fl[idx].astype(np.int64) * OFF + snd)
            return np.where(snd > S[d].sm[fl[idx]], j, -1)

        ooo = np.zeros(n, bool)
        bi = np.flatnonzero(below)
        for d in (0, 1):                   # the ranges skipped so far, with this chunk's
            new = gaps_left(fl[didx[d]], rel[didx[d]], smb_own[didx[d]], flags[didx[d]])
            if not len(new[0]):
                continue
            both = [np.concatenate([a, b]) for a, b in zip(self.gaps[d], new)]
            order = np.lexsort((both[1], both[0]))
            self.gaps[d] = tuple(a[order] for a in both)
        if len(bi):
            dup_c, ackr_c, arb_c = dups_at(bi), rev_at(bi), rev_before(bi)
            for d in (0, 1):
                sel = dr[bi] == d
                cand = bi[sel]
                if not len(cand):
                    continue
                # the last advance before the row (tshark's nextseqtime), not at it: a segment
                # starting below snd_max and ending past it advances snd_max itself
                k = last_advance(d, cand, smb_own[cand])
                carried_t = S[d].adv_t[fl[cand]]
                tq = np.where(k >= 0, t[np.maximum(k, 0)], np.where(carried_t != NONE, carried_t, 0))
                ok = (k >= 0) | (carried_t != NONE)
                late = out_of_order(t[cand] - tq, ok, self.irtt[fl[cand]], dup_c[sel], ackr_c[sel], arb_c[sel],
                                    rel[cand], end[cand], smb_own[cand], data[cand])
                # and only where the capture point had not seen those bytes pass
                fills, self.gaps[d] = fill_gaps(fl[cand], rel[cand], end[cand], self.gaps[d], late)
                ooo[cand[late & fills]] = True
        for d in (0, 1):
            k = last_advance(d, run_end, sm[d][run_end])
            S[d].adv_t[run_fl[k >= 0]] = t[k[k >= 0]]
        for d in (0, 1):
            S[d].sm[run_fl] = sm[d][run_end]
        sm.clear()

        retx = below & ~ooo
        ri_all = np.flatnonzero(retx)
        fast = np.zeros(n, bool)
        again = np.zeros(n, bool)
        if len(ri_all):
            ackr = rev_at(ri_all)
            for d in (0, 1):                 # resent with nothing from the receiver in between
                rr = ri_all[dr[ri_all] == d]
                if not len(rr) and not len(S[d].resent[0]):
                    continue
                oth = didx[1 - d]
                p = np.searchsorted(oth, rr) - 1
                q = oth[np.maximum(p, 0)] if len(oth) else rr
                inside = (p >= 0) & (fl[q] == fl[rr])
                last_rev = np.where(inside, grow(q), S[1 - d].last_row[fl[rr]])
                rep, held = resent_unprompted(fl[rr], rel[rr], grow(rr), last_rev, S[d].resent)
                again[rr[rep]] = True
                S[d].resent = held
            # fast retransmit: the segment the duplicate ACKs ask for (at their ACK number)
            # after >= 2 of them, or after one reporting data above it in a SACK block
            sacks_ri = sacks_at(ri_all)
            asked = fast_retransmit_asked(dups_at(ri_all), sacks_ri, rel[ri_all], ackr) & ~again[ri_all]
        else:
            ackr = asked = sacks_ri = np.zeros(0, np.int64)
        # only a retransmission that can open a timeout episode needs its undo verdict
        at_ack = rel[ri_all] == np.maximum(ackr, 0)          # the oldest byte not yet ACKed
        opens = again[ri_all] | (at_ack & ~asked)
        undo_at, pending, carried_undo = self._timeout_undos(
            ri_all, opens, fl, dr, (reset_pos, sack_pos, dup_pos), data, c, end, smb_own, am, sacks_ri, run_st,
            run_end, g0)
        fast[ri_all] = recovery_episodes(ri_all, dr, fl, asked, again, ackr, at_ack, smb_own, undo_at, pending,
                                         self.episode, carried_undo)
        for d in (0, 1):                     # the waiting verdicts of episodes still open
            live = set(self.episode[d][2][self.episode[d][2] >= 0].tolist())
            self.undo_wait[d] = {k: v for k, v in self.undo_wait[d].items() if k in live}
        del smb_own, below

        # ---- retransmissions (spurious verdicts settled at the end)
        spur_acked = np.zeros(n, bool)
        if len(ri_all):
            ri = ri_all
            spur_acked[ri] = end[ri] <= rev_before(ri)
            self.retx.append({"row": grow(ri), "t": t[ri], "pk": c["packet"][ri], "fl": fl[ri].astype(np.int64),
                              "dr": dr[ri], "rel": rel[ri], "pay": pay[ri], "fast": fast[ri],
                              "acked": spur_acked[ri], "data": data[ri],
                              "bin_row": self._bins(fl[ri], t[ri], dr[ri].astype(np.int64))})
            for d in (0, 1):
                rr = ri[(dr[ri] == d) & ~spur_acked[ri] & c["has_ts"][ri]]
                if len(rr):
                    S[d].pending.append((grow(rr), end[rr], c["tsval"][rr].astype(np.int64), fl[rr].astype(np.int64)))
        self._settle_eifel(am, c, fl)
        di = np.flatnonzero(c["dsack"])
        if len(di):
            dgd = 2 * fl[di].astype(np.int64) + (dr[di] ^ 1)     # DSACK from a reports data of a ^ 1
            dl = dsack_edges(c["dsack_left"][di], self.base[dgd], rela[di])
            self.dsack.append((grow(di), dgd, dl))
        del c["dsack"], c["dsack_left"]

        # ---- events of this chunk
        for name, mask, direction, seqv in (("ooo", ooo, dr, rel), ("dupack", dupack, dr ^ 1, rela),
                                            ("zero_window", zero_win, dr ^ 1, rela)):
            ii = np.flatnonzero(mask)
            if len(ii):
                self.ev[name].append({"time": t[ii], "packet": c["packet"][ii].astype(np.int64),
                                      "flow": fl[ii].astype(np.int64), "direction": direction[ii],
                                      "seq": seqv[ii], "payload_bytes": pay[ii]})
        si = np.flatnonzero(is_syn)
        if len(si):
            self.syn.append((2 * fl[si].astype(np.int64) + dr[si], np.asarray(c["synopt"], np.int64),
                             c["has_ts"][si]))
        for d in (0, 1):
            idx = didx[d]
            if len(idx):
                st, lst, fs = _runs(fl[idx])
                pd_ = pay[idx]
                S[d].maxpay[fs] = np.maximum(S[d].maxpay[fs], np.maximum.reduceat(pd_, st))
                S[d].paysum[fs] += np.add.reduceat(pd_, st, dtype=np.int64).astype(np.float64)
                S[d].last_row[fs] = grow(idx[lst])          # each direction's last row per flow

        for d in (0, 1):                     # retransmissions the reverse direction answered since: dropped
            f, r, w = S[d].resent
            keep = w > S[1 - d].last_row[f]
            S[d].resent = (f[keep], r[keep], w[keep])

        # ---- RTT samples: sequence/ACK matching (Karn settled at the end)
        rd = [ri_all[dr[ri_all] == d] for d in (0, 1)]

        def nretx_before(d, idx):              # retransmissions of d before rows idx, in their flow
            return S[d].nretx[fl[idx]] + np.searchsorted(rd[d], idx) - np.searchsorted(rd[d], first_row(idx))
        am_last = []
        for a in (0, 1):                       # each flow's ACK maximum after this chunk
            x = S[a].am.copy()
            x[run_fl] = am[a][run_end]
            am_last.append(x)
        orig = (data | is_syn) & ~retx
        for a in (0, 1):
            d = 1 - a
            ai = reset_pos[a][rela[reset_pos[a]] > 0]
            oi = np.flatnonzero(orig & isd[d])
            held = S[d].orig
            nh = 0 if held is None else len(held["key"])
            new_keys = end[oi] if F == 1 else fl[oi].astype(np.int64) * OFF + end[oi]
            keys = new_keys if held is None else np.concatenate((held["key"], new_keys))
            del new_keys

            def originals(p):
                """The held-then-new originals at positions ``p`` of ``keys``."""
                isn = p >= nh
                sn = oi[p[isn] - nh]
                new = {"key": keys[p], "row": grow(sn), "t": t[sn], "rel": rel[sn], "end": end[sn],
                       "fl": fl[sn].astype(np.int64), "nr": nretx_before(d, sn)}
                if not nh:
                    return new
                ish = ~isn
                out = {"key": new.pop("key")}
                for k, v in new.items():
                    out[k] = np.empty(len(p), v.dtype)
                    out[k][isn] = v
                    out[k][ish] = held[k][p[ish]]
                return out
            if len(ai) and len(keys):
                q = rela[ai] if F == 1 else fl[ai].astype(np.int64) * OFF + rela[ai]
                hit, pos = _first_with_key([keys, np.arange(len(keys))], q)
                ai, pos = ai[hit], pos[hit]
                seg = originals(pos)
                ok = (seg["row"] < grow(ai)) & (nretx_before(d, ai) == seg["nr"])
                ai = ai[ok]
                S[a].seqack.append((t[ai], c["packet"][ai], (t[ai] - seg["t"][ok]) / 1e6, seg["rel"][ok],
                                    fl[ai].astype(np.int64)))
            S[d].orig = None
            if last:
                continue
            # keep the first original per flow and segment end not yet covered by the ACKs
            if held is None:
                kend, kfl = end[oi], fl[oi]
            else:
                kend, kfl = np.concatenate((held["end"], end[oi])), np.concatenate((held["fl"], fl[oi]))
            keep = np.flatnonzero(kend > am_last[a][kfl])
            _, firsts = _unique_first(keys[keep])
            firsts.sort()
            S[d].orig = originals(keep[firsts])
        for d in (0, 1):
            S[d].nretx += np.bincount(fl[rd[d]], minlength=F)[:F]
            np.maximum.at(S[d].resent_end, fl[rd[d]], end[rd[d]])
        rel = rela = end = keys = None         # not needed further: freed before the timestamps' keys

        # ---- RTT samples: timestamp echo
        has_ts = c["has_ts"]

        def ts_key(idx, v):
            v = v.astype(np.int64)
            return v if F == 1 else fl[idx].astype(np.int64) * M32 + v
        for d in (0, 1):
            tsi = np.flatnonzero(has_ts & isd[d])
            u, fi = _unique_first(ts_key(tsi, c["tsval"][tsi]))
            new = (u, grow(tsi[fi]), t[tsi[fi]])
            held = S[d].ts_first
            if held is not None:
                if not len(new[0]) or (len(held[0]) and held[0][-1] < new[0][0]):
                    new = tuple(np.concatenate((h, x)) for h, x in zip(held, new))
                else:
                    keys = np.r_[held[0], new[0]]
                    rows_ = np.r_[held[1], new[1]]
                    tt = np.r_[held[2], new[2]]
                    uk, fi = np.unique(keys, return_index=True)       # held entries come first
                    new = (uk, rows_[fi], tt[fi])
            S[d].ts_first = new
        for a in (0, 1):
            d = 1 - a
            ai = np.flatnonzero(has_ts & isd[a] & has_ack)
            u, fi = _unique_first(ts_key(ai, c["tsecr"][ai]))
            fresh = ~_member(u, S[a].echoed)
            u, ai = u[fresh], ai[fi[fresh]]
            S[a].echoed = np.zeros(0, np.int64) if last else \
                np.insert(S[a].echoed, np.searchsorted(S[a].echoed, u), u)
            uk, rows_, tt = S[d].ts_first
            S[d].ts_first = None
            echoed_now = u
            if len(u) and len(uk):
                p = np.minimum(np.searchsorted(uk, u), len(uk) - 1)
                hit = (uk[p] == u) & (rows_[p] < grow(ai))
                ai, p, u = ai[hit], p[hit], u[hit]
                S[a].tspairs.append((t[ai], c["packet"][ai], (t[ai] - tt[p]) / 1e6, u))
            if last:
                continue
            # a value echoed once is never looked up again
            keep = ~_member(uk, echoed_now)
            S[d].ts_first = (uk[keep], rows_[keep], tt[keep])

        for a in (0, 1):                  # duplicate ACKs since the last advance, per flow
            R = reset_pos[a]
            k = np.searchsorted(R, run_end, "right") - 1
            lr = R[np.maximum(k, 0)] if len(R) else run_st
            adv = (k >= 0) & (lr >= run_st)
            for field, D, since in (("dups", dup_pos[a], "right"), ("sacks", sack_pos[a], "left")):
                carried = getattr(S[a], field)
                upto = np.searchsorted(D, run_end, "right")
                carried[run_fl] = np.where(adv, upto - np.searchsorted(D, lr, since),
                                           carried[run_fl] + upto - np.searchsorted(D, run_st, "left"))
            S[a].am[run_fl] = am[a][run_end]
            gf, lo, hi = self.gaps[1 - a]            # ranges a has ACKed are gaps no more:
            keep = hi > S[a].am[gf]                  # bytes received that the capture missed
            self.missed += np.bincount(gf[~keep], weights=hi[~keep] - lo[~keep], minlength=F)[:F].astype(np.int64)
            self.gaps[1 - a] = (gf[keep], lo[keep], hi[keep])
        self.rows += n

    def _timeout_undos(self, ri, opens, fl, dr, pos, data, c, end, smb_own, am, sacks_ri, run_st, run_end, g0):
        """What :func:`._tcparrays.recovery_episodes` needs to end a spurious timeout's
        episode on the ACK that shows it: per retransmission row of ``ri`` that ``opens`` one
        (a mask over ``ri``; the others get none), that ACK's row in
        this chunk (else :data:`NEVER`) and, when the verdict waits for rows of a later chunk,
        the row's key (its row counted from the engine's first, ``g0`` + chunk row; else -1),
        whose state :attr:`undo_wait` keeps; per direction, the flows whose carried timeout
        episode waited and is decided here (row, or :data:`NEVER`: not undone). The rules
        are Linux's (``tcp_process_loss``), judged on the ACKs of the retransmission's flow
        (:meth:`_undo_search`): Eifel (:func:`._tcprules.eifel_older`) on the first ACK that
        advances after the retransmission, and F-RTO (RFC 5682 section 3.1, SACK-enhanced):
        that ACK, or the next advancing one when the first covered only the resent data and
        nothing between them shows a loss, acknowledges data below the retransmission's
        ``snd_max`` that was neither resent nor SACKed before. ``pos``: the chunk's rows per
        direction where its ACK advances, where it sends a SACK-bearing ACK and a duplicate
        ACK; ``data``: the rows with payload; ``sacks_ri``: the SACK-bearing ACKs since the
        last advance, per row of ``ri`` (:func:`._tcprules.dups_since_advance`)."""
        reset_pos, sack_pos, dup_pos = pos
        has_ts, tsval, tsecr = c["has_ts"], c["tsval"], c["tsecr"]
        undo_at = np.full(len(ri), NEVER, np.int64)
        pending = np.full(len(ri), -1, np.int64)
        carried_undo = [{}, {}]
        for d in (0, 1):
            a = 1 - d
            sel = np.flatnonzero((dr[ri] == d) & opens)
            keys = self.episode[d][2]
            flows = np.flatnonzero(keys >= 0)                  # carried episodes still waiting
            if not len(sel) and not len(flows):
                continue
            X = ri[dr[ri] == d]
            # per resend, the largest end d resent in its flow up to it (all chunks so far)
            resent_upto = np.maximum(_grouped_cummax(end[X], fl[X], np.ones(len(X), bool)),
                                     self.side[d].resent_end[fl[X]])
            new_data = np.flatnonzero((dr == d) & data & (end > smb_own))      # past d's snd_max
            look = (reset_pos[a], sack_pos[a], dup_pos[a], X, resent_upto, self.side[d].resent_end, new_data,
                    am[a], has_ts, tsecr, fl)
            r = ri[sel]
            if len(r):
                new = UndoWait(stage=np.ones(len(r), np.int8), tsv=np.where(has_ts[r], tsval[r], -1),
                               frto=sacks_ri[sel] == 0, lo=end[r], high=smb_own[r], sent=np.zeros(len(r), bool))
                at, waits = self._undo_search(new, r, run_end[np.searchsorted(run_st, r, "right") - 1], look)
                undo_at[sel] = at
                w = np.flatnonzero(waits)
                pending[sel[w]] = g0 + r[w]
                self.undo_wait[d].update(zip((g0 + r[w]).tolist(), new.take(w).rows()))
            if not len(flows):
                continue
            runs_fl, run_k = _unique_first(fl[run_st])          # each flow's run in this chunk
            j = np.minimum(np.searchsorted(runs_fl, flows), len(runs_fl) - 1)
            here = runs_fl[j] == flows
            flows, k = flows[here], run_k[j[here]]
            if not len(flows):
                continue
            held = UndoWait.from_rows([self.undo_wait[d][int(x)] for x in keys[flows]])
            at, waits = self._undo_search(held, run_st[k] - 1, run_end[k], look)
            carried_undo[d] = dict(zip(flows[~waits].tolist(), at[~waits].tolist()))
            for key, row in zip(keys[flows[waits]].tolist(), held.take(np.flatnonzero(waits)).rows()):
                self.undo_wait[d][key] = row
        return undo_at, pending, carried_undo

    @staticmethod
    def _undo_search(w: "UndoWait", frm, last, look):
        """The undo verdicts of timeout retransmissions of one direction ``d`` whose state is
        ``w`` (updated in place for those still waiting), searching each one's flow from
        after chunk row ``frm`` to its last row in the chunk, ``last``. ``look``: the
        reverse direction's advancing, SACK-bearing and duplicate ACK rows, ``d``'s
        retransmission rows, per such row the largest end ``d`` resent in its flow up to it,
        the same per flow before this chunk, ``d``'s rows of new data (past its snd_max),
        the reverse direction's running ACK maximum per
        row, and the chunk's ``has_ts``, ``tsecr`` and flow columns. Returns per entry the
        row of the ACK that undoes it (:data:`NEVER`: none) and whether the verdict waits for
        a later chunk.

        Stage 1 waits for the first advancing ACK ``u``: undone there by Eifel (the
        retransmission's TSval ``tsv`` >= 0 and ``u`` echoes an older one) or by F-RTO when
        no SACK-bearing ACK came since the ACK last advanced before the retransmission
        (``frto``: the receiver held nothing above it, so what ``u`` covers was not SACKed
        before) and ``u`` covers data sent once: past the resent bytes (``lo``, and every
        byte ``d`` resent before ``u``) and below ``high``
        (:func:`._tcprules.frto_original_acked`). With ``frto``, a SACK-bearing ACK before
        ``u`` (or at it) with no other resend since the retransmission undoes it there:
        before F-RTO sends new data, the blocks it reports are data sent once, SACKed for the
        first time. When ``u`` covered no data sent once, F-RTO's step 2 sends new data and
        stage 2 judges each advancing ACK after it the same way (past ``lo``, now the ACK
        before it, and every byte resent): undone at the first that covers data sent once
        below ``high``, provided ``d`` sent new data since ``u`` (``sent``; with none to send
        F-RTO falls back to the conventional recovery), until the ACK reaches ``high`` or a
        SACK-bearing or duplicate ACK comes (judged, then step 3a: the loss was real; a SACK
        that reports data sent once above a real hole would undo it in Linux, but the
        engine does not keep SACK blocks' edges to tell)."""
        R, SK, DP, X, resent_upto, resent_before, NEW, amr, has_ts, tsecr, fl = look
        n = len(frm)
        at = np.full(n, NEVER, np.int64)
        waits = np.zeros(n, bool)

        def count(P, lo, hi):                  # rows of P in (lo, hi]
            return np.searchsorted(P, hi, "right") - np.searchsorted(P, lo, "right")

        def first_after(P, after, upto):      # the first row of P after ``after``, in its flow
            if not len(P):
                return np.zeros(len(after), np.int64), np.zeros(len(after), bool)
            k = np.searchsorted(P, after, "right")
            u = P[np.minimum(k, len(P) - 1)]
            return u, (k < len(P)) & (u <= upto)

        def resent_below(v):                   # the largest end d resent in v's flow before row v
            k = np.searchsorted(X, v) - 1
            inside = (k >= 0) & (fl[X[np.maximum(k, 0)]] == fl[v]) if len(X) else np.zeros(len(v), bool)
            return np.where(inside, resent_upto[np.maximum(k, 0)] if len(X) else -1, resent_before[fl[v]])
        one = np.flatnonzero(w.stage == 1)
        if len(one):
            last_ = last[one]
            u, found = first_after(R, frm[one], last_)
            s, sacked = first_after(SK, frm[one], last_)
            clean = w.frto[one]
            by_sack = clean & sacked & (~found | (s <= u)) & (count(X, frm[one], s - 1) == 0)
            ack = amr[u]
            lo = np.maximum(w.lo[one], resent_below(u))
            eif = found & (w.tsv[one] >= 0) & has_ts[u] & eifel_older(w.tsv[one], tsecr[u])
            frto = found & clean & frto_original_acked(ack, lo, w.high[one])
            at[one[eif | frto]] = u[eif | frto]
            at[one[by_sack]] = s[by_sack]
            step2 = found & ~(eif | frto | by_sack) & clean & (ack < w.high[one])
            waits[one] = ~found & ~by_sack & ((w.tsv[one] >= 0) | clean)
            s2 = one[step2]
            w.stage[s2] = 2
            w.lo[s2] = np.maximum(w.lo[s2], ack[step2])
            frm = frm.copy()
            frm[s2] = u[step2]
        two = np.flatnonzero(w.stage == 2)
        if len(two):
            f0, last_ = frm[two], last[two]
            # F-RTO stays on until a SACK-bearing or duplicate ACK (that ACK is still judged)
            s, sacked = first_after(SK, f0, last_)
            p, dupped = first_after(DP, f0, last_)
            upto = np.minimum(np.where(sacked, s, last_), np.where(dupped, p, last_))
            ended = sacked | dupped
            nw, nw_found = first_after(NEW, f0, last_)
            cur = f0.copy()
            live = np.arange(len(two))
            while len(live):                    # each still open entry's next advancing ACK
                j = two[live]
                u, found = first_after(R, cur[live], upto[live])
                w.sent[j] |= nw_found[live] & (nw[live] < np.where(found, u, upto[live] + 1))
                ack = amr[u]
                lo = np.maximum(w.lo[j], resent_below(u))
                undo = found & w.sent[j] & frto_original_acked(ack, lo, w.high[j])
                at[j[undo]] = u[undo]
                waits[j] = ~found & ~ended[live]
                go = found & ~undo & (ack < w.high[j])
                w.lo[j[go]] = np.maximum(w.lo[j[go]], ack[go])
                cur[live[go]] = u[go]
                live = live[go]
        return at, waits

    def _start_ack_unwrap(self, ack_ref) -> None:
        """Where each flow's ACK numbers start: ``ack_ref`` (per flow * 2 + direction) is the
        relative sequence number of the direction's first segment seen ((first seq - base)
        mod 2^32; -1: the direction sent nothing). The ACKs about a direction are unwrapped as
        if one had been seen at that value, so the first ACK lands within 2^31 of it: in a
        capture that begins mid-stream, an ACK of bytes sent before the capture began is a
        little below the first segment seen (negative), not 4 GiB above it. A direction
        without segments keeps the first ACK's (ack - base) mod 2^32."""
        for d in (0, 1):
            ref = ack_ref[1 - d::2]                  # the space direction d's ACKs are about
            known = np.flatnonzero(ref >= 0)
            S = self.side[d]
            S.last_ack[known] = (self.base[1 - d::2][known] + ref[known]) % M32
            S.last_rela[known] = ref[known]

    def _rows_numpy(self, c, fl, run_st, dr, isd, didx, flags, pay, has_ack):
        """The per-row chain of a chunk: sequence and ACK numbers unwrapped per flow and
        direction (``rel``, ``rela``; -1 without ACK), segment ends, the running ACK maximum
        per acking direction (``am``) and snd_max per direction (``sm``), each row's own
        snd_max before it (``smb_own``), the rows below it (``below``: data, SYN or FIN not
        a keep-alive) and the duplicate ACKs (:func:`._tcprules.duplicate_acks`); the
        carried values updated (not ``am``/``sm``); ``seq`` and ``ack`` taken out of ``c``."""
        n = len(dr)
        S = self.side
        rel = np.empty(n, np.int64)
        rela = np.empty(n, np.int64)
        for d in (0, 1):
            idx = didx[d]
            if not len(idx):
                continue
            g = fl[idx]
            _, last, gs = _runs(g)
            s = c["seq"][idx]
            rel[idx] = _unwrap_carried(s, g, self.base[d::2], S[d].last_seq, S[d].last_rel)
            S[d].last_seq[gs], S[d].last_rel[gs] = s[last], rel[idx[last]]
            araw = np.where(has_ack[idx], c["ack"][idx], (self.base[1 - d::2] % M32).astype(np.uint32)[g])
            rela[idx] = _unwrap_carried(araw, g, self.base[1 - d::2], S[d].last_ack, S[d].last_rela)
            S[d].last_ack[gs], S[d].last_rela[gs] = araw[last], rela[idx[last]]
        del c["seq"], c["ack"]                 # (the chain's memory peak follows)
        end = segment_ends(rel, pay, flags)
        rela[~has_ack] = -1

        def cummax(values, valid, carry):
            out = _grouped_cummax(values, fl, valid)
            if (carry >= 0).any():              # (-1: nothing yet, below every value)
                np.maximum(out, carry[fl], out=out)
            return out
        am = {a: cummax(rela, isd[a] & has_ack, S[a].am) for a in (0, 1)}
        sm = {d: cummax(end, isd[d], S[d].sm) for d in (0, 1)}
        smb_own = np.empty(n, np.int64)
        np.copyto(smb_own[1:], sm[1][:-1])
        np.copyto(smb_own[1:], sm[0][:-1], where=isd[0][1:])
        f0 = fl[run_st]
        smb_own[run_st] = np.where(dr[run_st] == 0, S[0].sm[f0], S[1].sm[f0])
        keepalive, below = keepalives_and_below(rel, smb_own, pay, flags)
        win = c["window"]
        carry = [(x.has_prev, x.prev_rela, x.prev_win, x.ka) for x in S]
        dupack = duplicate_acks(dr, rela, win, dupack_candidates(rel, smb_own, pay, flags, has_ack, win), keepalive,
                                fl=fl, carry=carry)
        for d in (0, 1):
            idx = didx[d]
            if len(idx):
                _, last, gs = _runs(fl[idx])
                li = idx[last]
                S[d].has_prev[gs] = True
                S[d].prev_rela[gs], S[d].prev_win[gs], S[d].ka[gs] = rela[li], win[li], keepalive[li]
        return rel, rela, end, am, sm, smb_own, below, dupack

    def _rows_c(self, c, fl, run_st, dr, isd, didx, flags, pay, has_ack):
        """:meth:`_rows_numpy` in one pass in C (``_tcploops.stream_rows``), the carried
        values of each run's flow handed in and back as a row of a state matrix; takes
        ``seq`` and ``ack`` out of ``c``, as it does."""
        n = len(dr)
        S = self.side
        f = fl[run_st].astype(np.int64)             # each run's flow (a flow has one run)
        base = self.base.reshape(-1, 2)[f]

        def both(name):
            return np.column_stack([getattr(x, name)[f] for x in S]).astype(np.int64)
        ls, la, ka = both("last_seq"), both("last_ack"), both("ka")
        st = np.ascontiguousarray(np.column_stack([
            base, ls >= 0, np.maximum(ls, 0), both("last_rel"), la >= 0, np.maximum(la, 0), both("last_rela"),
            both("am"), both("sm"), both("has_prev"), both("prev_rela"), both("prev_win"), ka >= 0,
            np.maximum(ka, 0)]), np.int64)
        out = [np.empty(n, np.int64) for _ in range(8)]
        masks = [np.empty(n, bool) for _ in range(3)]
        _stream_rows(dr, np.ascontiguousarray(c["seq"], np.uint32), np.ascontiguousarray(c["ack"], np.uint32),
                     np.ascontiguousarray(flags, np.uint8), np.ascontiguousarray(pay, np.int64),
                     np.ascontiguousarray(c["window"], np.uint16), st,
                     np.r_[run_st, n].astype(np.int64), *out, *masks)
        for d in (0, 1):
            x = S[d]
            for seen, pairs in ((2, ((x.last_seq, 4), (x.last_rel, 6))), (8, ((x.last_ack, 10), (x.last_rela, 12))),
                                (18, ((x.has_prev, 18), (x.prev_rela, 20), (x.prev_win, 22))),
                                (24, ((x.ka, 26),))):
                w = st[:, seen + d] != 0
                for arr, col in pairs:
                    arr[f[w]] = st[w, col + d]
        rel, rela, end, am0, am1, sm0, sm1, smb_own = out
        keepalive, below, dupack = masks
        del c["seq"], c["ack"]
        return rel, rela, end, {0: am0, 1: am1}, {0: sm0, 1: sm1}, smb_own, below, dupack

    def _bin_sums_c(self, c, fl, dr, is_syn, pay, rela, am, sm) -> None:
        """:meth:`_bin_sums_numpy` in one pass in C (``_tcploops.stream_bins``)."""
        A = self.acc
        if self._flow_bins is None:          # per flow: (offset, start_bin, nb, shift fwd, shift rev)
            shift = np.asarray(self.f["shift"], np.int64).reshape(-1, 2)
            self._flow_bins = np.ascontiguousarray(np.column_stack(
                [self.offset, self.start_bin, self.nb, shift[:, 0], shift[:, 1]]).astype(np.int64)).ravel()
        _stream_bins(np.ascontiguousarray(c["t"], np.int64), dr, np.ascontiguousarray(c["flags"], np.uint8),
                     np.ascontiguousarray(c["ip_len"], np.uint32), np.ascontiguousarray(pay, np.int64),
                     np.ascontiguousarray(c["window"], np.uint16),
                     rela, am[0], am[1], sm[0], sm[1], np.ascontiguousarray(fl, np.int32),
                     np.array([self.res_ns], np.int64), self._flow_bins,
                     *(A[k] for k in ("packets", "bytes", "pay", "rw_sum", "rw_n", "infl_s", "infl_c")))

    def _bin_sums_numpy(self, c, fl, dr, is_syn, pay, rela, am, sm) -> None:
        """Adds a chunk's rows to the series sums of packets, bytes and payload (own half),
        advertised windows (window << the sender's scale, not on SYNs; other half, rows with
        ACK) and bytes in flight (snd_max - the reverse ACK maximum, >= 0; both halves); a
        slice of rows at a time (sums add up: the per-row bin numbers of a whole capture's
        chunk are not all held at once)."""
        A = self.acc
        total = self.total
        shift = np.asarray(self.f["shift"], np.int64)

        def add(key, rows, w=None):
            A[key] += np.bincount(rows, weights=w, minlength=total)[:total]
        for a in range(0, len(fl), _BIN_SLICE):
            sl = slice(a, a + _BIN_SLICE)
            f, d_, t, win = fl[sl], dr[sl], c["t"][sl], c["window"][sl]
            nbf = self.nb[f]
            r_own = self._bins(f, t, d_.astype(np.int64))
            r_other = r_own + np.where(d_ == 0, nbf, -nbf)
            del nbf
            add("packets", r_own)
            add("bytes", r_own, c["ip_len"][sl])
            add("pay", r_own, pay[sl])
            ha = rela[sl] >= 0
            rw = np.where(is_syn[sl], win, win.astype(np.int64) << shift[2 * f.astype(np.int64) + d_])
            add("rw_sum", r_other[ha], rw[ha])
            add("rw_n", r_other[ha])
            for d in (0, 1):
                inf = sm[d][sl] - np.maximum(am[1 - d][sl], 0)
                np.maximum(inf, 0, out=inf)
                inf[sm[d][sl] < 0] = 0
                rows = np.where(d_ == d, r_own, r_other)
                add("infl_s", rows, inf)
                add("infl_c", rows)

    def _settle_eifel(self, am, c, fl) -> None:
        """Eifel for the retransmissions whose first covering ACK is in this chunk."""
        n = len(fl)
        for d in (0, 1):
            S = self.side[d]
            if not S.pending:
                continue
            rows, ends, tsv, pfl = (np.concatenate(x) for x in zip(*S.pending))
            amd = am[1 - d]                      # non-decreasing over each flow's rows
            if self.nflow == 1:
                q = np.searchsorted(amd, ends, side="left")
                found = q < n
            else:
                q = np.searchsorted(fl.astype(np.int64) * OFF + amd, pfl * OFF + ends, side="left")
                found = (q < n) & (fl[np.minimum(q, n - 1)] == pfl)
            qq = np.minimum(q, n - 1)
            verdict = found & c["has_ts"][qq] & eifel_older(tsv, c["tsecr"][qq])
            self.eifel.append((rows[found], verdict[found]))
            S.pending = [(rows[~found], ends[~found], tsv[~found], pfl[~found])] if not found.all() else []

    # ---- the end
    def finish(self, flows, source: str, res_s: float) -> TcpAnalysis:
        """``flows``: the flows frame of the engine's flows (:func:`._tcpframes._flows_frame`),
        completed here with the TCP columns."""
        F = self.nflow
        R = {k: np.concatenate([r[k] for r in self.retx]) if self.retx else np.zeros(0, np.int64)
             for k in ("row", "t", "pk", "fl", "dr", "rel", "pay", "fast", "acked", "data", "bin_row")}
        self.retx = []           # the chunks' pieces are freed as soon as joined (here and below)
        for k in ("fast", "acked", "data"):
            R[k] = R[k].astype(bool)
        nr = len(R["row"])
        rgd = 2 * R["fl"] + R["dr"].astype(np.int64)
        eifel = np.zeros(nr, bool)             # each retransmission's verdict, False when never settled
        if self.eifel and nr:
            er, ev = (np.concatenate(x) for x in zip(*self.eifel))
            o = np.argsort(er)
            er, ev = er[o], ev[o]
            p = np.minimum(np.searchsorted(er, R["row"]), max(len(er) - 1, 0))
            eifel = (er[p] == R["row"]) & ev[p] if len(er) else eifel
        self.eifel = []
        dsack = np.zeros(nr, bool)
        if self.dsack and nr:
            drow, dgd, dl = (np.concatenate(x) for x in zip(*self.dsack))
            self.dsack = []
            dsack = dsack_reported(rgd * OFF + R["rel"], R["row"], dgd * OFF + dl, drow)
        acked, eifel, dsack = R["acked"] & R["data"], eifel & R["data"], dsack & R["data"]
        spurious = acked | eifel | dsack
        fast = R["fast"]
        # RTT samples: sequence/ACK per acking direction (Karn's rule applied), then timestamps
        retx_keys = np.sort(rgd * OFF + R["rel"])
        # the samples' columns (time, packet, ms, flow/direction, method), each a list of
        # parts; every chunk's piece is dropped as soon as it is used (a long flow has one
        # sample per ACK)
        parts = [[], [], [], [], []]
        gd_type = np.min_scalar_type(-2 * F) if F else np.int8     # flow * 2 + direction, signed

        def add_part(*columns):
            for lst, col in zip(parts, columns):
                lst.append(col)
        for a in (0, 1):
            for tt, pk, ms, srel, sfl in self.side[a].seqack.drain():
                gd = 2 * sfl + 1 - a
                ok = ~karn_voided(gd * OFF + srel, retx_keys)
                add_part(tt[ok], pk[ok], ms[ok], gd[ok].astype(gd_type), np.zeros(int(ok.sum()), np.int8))
        for a in (0, 1):
            pieces = list(self.side[a].tspairs.drain())
            if pieces:
                tt, pk, ms, v = (np.concatenate(x) for x in zip(*pieces))
                del pieces
                o = np.argsort(v, kind="stable")              # by flow, then echoed value
                gd = (0 if F == 1 else 2 * (v[o] // M32)) + 1 - a
                add_part(tt[o], pk[o], ms[o], np.broadcast_to(gd, len(o)).astype(gd_type),
                         np.ones(len(o), np.int8))
                del tt, pk, ms, v, o, gd
        if parts[0]:
            joined = []
            for lst in parts:
                joined.append(np.concatenate(lst))
                lst.clear()
            rtt_t, rtt_pk, rtt_ms, rtt_gd, rtt_method = joined
            del parts, joined
            rtt_pk = rtt_pk.astype(np.int64, copy=False)
        else:
            rtt_t, rtt_pk, rtt_ms = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
            rtt_gd, rtt_method = np.zeros(0, gd_type), np.zeros(0, np.int8)

        # ---- events frame
        E = {name: {k: np.concatenate([x[k] for x in v]) for k in v[0]} if v else None
             for name, v in self.ev.items()}
        self.ev = {name: [] for name in self.ev}
        retx_kind = np.where(fast, KIND_FAST, KIND_TIMEOUT)
        retx_reason = spurious_reasons(acked, eifel, dsack)

        def event_parts(lo=None, hi=None):
            """The events' parts (:func:`._tcpframes._events_frame`), of the times in [lo, hi)
            only when given: each part's rows keep their order."""
            def pick(times):
                return slice(None) if lo is None else np.flatnonzero((times >= lo) & (times < hi))
            ev_parts = []

            def simple(name, event):
                e = E[name]
                if e is not None:
                    i = pick(e["time"])
                    ev_parts.append(event_rows(event, time=e["time"][i], packet=e["packet"][i], flow=e["flow"][i],
                                               direction=e["direction"][i], seq=e["seq"][i],
                                               payload_bytes=e["payload_bytes"][i] if name == "ooo" else 0))
            simple("ooo", "out_of_order")
            if nr:
                i = pick(R["t"])
                ev_parts.append(event_rows("retransmission", time=R["t"][i], packet=R["pk"][i], flow=R["fl"][i],
                                           direction=R["dr"][i], kind=retx_kind[i], seq=R["rel"][i],
                                           payload_bytes=R["pay"][i], spurious=spurious[i],
                                           spurious_reason=retx_reason[i]))
            if len(rtt_t):
                i = pick(rtt_t)
                ev_parts.append(event_rows("rtt", time=rtt_t[i], packet=rtt_pk[i], flow=rtt_gd[i] // 2,
                                           direction=rtt_gd[i] % 2, kind=KIND_RTT + rtt_method[i], rtt_ms=rtt_ms[i]))
            simple("dupack", "dupack")
            simple("zero_window", "zero_window")
            return ev_parts
        n_events = nr + len(rtt_t) + sum(len(e["time"]) for e in E.values() if e is not None)
        if self.spill and n_events > EVENT_PIECE_ROWS:
            events = EventPieces(event_parts, n_events, rtt_t, source)
        else:
            events = _events_frame(event_parts(), source)

        # ---- flows columns
        def per_flow(f, w=None):
            return np.bincount(f, weights=w, minlength=F)[:F]

        def event_count(name):
            return per_flow(E[name]["flow"]).astype(np.int64) if E[name] is not None else np.zeros(F, np.int64)
        flows["retransmissions"] = per_flow(R["fl"]).astype(np.int64)
        flows["fast_retransmissions"] = per_flow(R["fl"][fast]).astype(np.int64)
        flows["timeout_retransmissions"] = per_flow(R["fl"][~fast]).astype(np.int64)
        flows["spurious_retransmissions"] = per_flow(R["fl"][spurious]).astype(np.int64)
        flows["dupacks"] = event_count("dupack")
        flows["zero_windows"] = event_count("zero_window")
        flows["out_of_order"] = event_count("ooo")
        paysum = np.stack([self.side[0].paysum, self.side[1].paysum], axis=1).ravel()
        flows = _rtt_columns(flows, rtt_ms, rtt_gd, rtt_method, paysum)
        lost = ~spurious
        retx_bytes = per_flow(R["fl"][lost], R["pay"][lost].astype(np.float64))
        all_bytes = self.side[0].paysum + self.side[1].paysum
        with np.errstate(invalid="ignore", divide="ignore"):
            flows["loss_rate"] = np.where(all_bytes > 0, retx_bytes / np.maximum(all_bytes, 1), np.nan)
        acked_b = np.zeros(F)
        for a in (0, 1):
            am = self.side[a].am
            acked_b += np.maximum(am, 0) - (am > 0)
        dur = flows["duration_s"]
        with np.errstate(invalid="ignore", divide="ignore"):
            flows["goodput_bps"] = np.where(dur > 0, acked_b * 8 / dur, np.nan)
        mss = np.asarray(self.f["mss"], np.int64).reshape(-1, 2)
        ws = np.asarray(self.f["ws"], np.int64).reshape(-1, 2)
        sp = np.zeros(2 * F, bool)
        tsok = np.zeros(2 * F, bool)
        for sgd, so, hts in self.syn:
            np.logical_or.at(sp, sgd, (so & 1) != 0)
            np.logical_or.at(tsok, sgd, ((so & 2) != 0) | hts)
        if F:
            flows["mss_bytes"] = np.where(mss.max(axis=1) > 0, np.where(mss[:, 0] > 0, mss[:, 0], mss[:, 1]), np.nan)
            flows["wscale_fwd"], flows["wscale_rev"] = ws[:, 0], ws[:, 1]
            flows["sack_permitted"] = sp.reshape(-1, 2).all(axis=1)
            flows["timestamps"] = tsok.reshape(-1, 2).all(axis=1)
        else:          # what pandas made of columns set to [] in an empty frame
            for k in ("mss_bytes", "wscale_fwd", "wscale_rev", "sack_permitted", "timestamps"):
                flows[k] = _EMPTY
        flows.attrs["source"] = source

        # ---- series
        eff = _effective_mss(mss.ravel(), np.stack([self.side[0].maxpay, self.side[1].maxpay], axis=1).ravel())
        flows["retransmitted_segments"] = per_flow(R["fl"], resent_segments(R["pay"], eff[2 * R["fl"] + R["dr"]])
                                                   ).astype(np.int64)
        missed = self.missed.copy()
        for a in (0, 1):      # at the end, what a ACKed of the other side that no later row skipped over:
            am, sm = self.side[a].am, self.side[1 - a].sm
            missed += np.where((am >= 0) & (sm >= 0), np.maximum(am - sm, 0), 0)   # past its last byte seen
            gf, lo, hi = self.gaps[1 - a]                                          # into a gap still open
            missed += per_flow(gf, np.clip(am[gf] - lo, 0, hi - lo).astype(np.float64)).astype(np.int64)
        flows["capture_missed_bytes"] = missed
        series = self._series(fast, spurious, lost, R, eff, rtt_t, rtt_ms, rtt_gd, rtt_method, source)
        series.attrs.update({"source": source, "resolution_s": res_s})
        flows.validate("flows", name="flows")
        series.validate("tcp", name="tcp series")
        return TcpAnalysis(flows=flows, series=series, events=events, resolution_s=res_s, source=source,
                           attrs={"tcp_packets": int(self.rows)})

    def _series(self, fast, spurious, lost, R, eff, rtt_t, rtt_ms, rtt_gd, rtt_method, source):
        """The series frame from the bin sums and the retransmissions (bins of ``R["bin_row"]``)."""
        A, res_ns, total, nb = self.acc, self.res_ns, self.total, self.nb
        if self.rows == 0:
            return Columns({"time": utc_times([]), "flow": _EMPTY, "direction": direction_column([])})

        def acc(rows, w=None):
            return np.bincount(rows, weights=w, minlength=total)[:total]
        out = {"packets": A["packets"].astype(np.int64), "bytes": A["bytes"].astype(np.int64),
               "throughput_bps": A["pay"] * 8e9 / res_ns, "goodput_bps": A["adv"] * 8e9 / res_ns}
        br = R["bin_row"].astype(np.int64)
        out["retransmissions"] = acc(br).astype(np.int64)
        out["fast_retransmissions"] = acc(br[fast]).astype(np.int64)
        out["timeout_retransmissions"] = acc(br[~fast]).astype(np.int64)
        out["spurious_retransmissions"] = acc(br[spurious]).astype(np.int64)
        out["dupacks"] = A["dupacks"].astype(np.int64)
        out["zero_windows"] = A["zero_windows"].astype(np.int64)
        retx_b = acc(br[lost], R["pay"][lost].astype(np.float64))
        pay_b = out["throughput_bps"] * res_ns / 8e9
        with np.errstate(invalid="ignore", divide="ignore"):
            out["loss_rate"] = np.where(pay_b > 0, retx_b / np.maximum(pay_b, 1), np.nan)
            out["rwnd_bytes"] = np.where(A["rw_n"] > 0, A["rw_sum"] / np.maximum(A["rw_n"], 1), np.nan)
            out["inflight_bytes"] = np.where(A["infl_c"] > 0, A["infl_s"] / np.maximum(A["infl_c"], 1), np.nan)
        return _series_frame(out, eff, rtt_t, rtt_ms, rtt_gd, rtt_method, nflow=self.nflow, nb=nb,
                             offset=self.offset, start_bin=self.start_bin, end_bin=self.start_bin + nb - 1,
                             res_ns=res_ns)


def iter_flows_rows(path, pflows, *, salvage: bool, infos: list, others=None, feed=None):
    """``(k, rows)``: the rows of the flows ``pflows`` (provisional ids of
    :func:`._tcpinput.read_columns`) in ONE pass over the capture, batch by batch in file
    order, ``k`` the flow's place in ``pflows``; every column dense (SYN options and DSACK
    edges too) plus ``ipidx`` (index among the file's IP packets). ``infos[k]`` receives
    the flow's key (``lo``, ``hi``, ``proto``) and, once the file is read, the capture's
    IPv6 address list (``v6_addresses``).
    ``others`` (a :class:`._tcpinput.GroupGatherer` or None: the packets of groups of
    other flows) is started with the pass's connection numbering, given every batch, and
    finished once the file is read.
    ``feed`` (a :class:`._feed.BatchFeed` or None) is handed every decoded batch once this
    pass is done with it (the packets pass of ``airlink collect`` then needs no read of
    its own), and closed when the pass ends, with its error if it failed. The rows handed
    out are never changed in place here: where a flow has a whole batch, its columns are
    the batch's own arrays, which the feed's reader also reads."""
    from ._capture import CaptureReader
    from ._connections import Connections, numbered_batches
    from ._decode import check_linktypes
    from ._tcpinput import KEPT, SYN_KEPT
    reader = CaptureReader(path, salvage=salvage, reuse_buffer=True)
    conns = Connections()
    unknown: set = set()
    n_ip = 0
    pflows = np.asarray(pflows, np.int64)
    slot_of = np.full(int(pflows.max()) + 1 if len(pflows) else 0, -1, np.int64)
    slot_of[pflows] = np.arange(len(pflows))
    if others is not None:
        others.start(conns)
    try:
        for item in numbered_batches(reader, conns, unknown, tunnel_ids=feed is not None):
            d, pfl, swap = item[:3]
            m = len(d["ts_ns"])
            if not len(pflows):
                found = []
            elif len(pflows) == 1:
                found = [(0, np.flatnonzero(pfl == pflows[0]))]
            else:
                slot = slot_of[np.minimum(pfl, len(slot_of) - 1)]
                slot[pfl >= len(slot_of)] = -1
                found = [(k, np.flatnonzero(slot == k)) for k in np.unique(slot[slot >= 0]).tolist()]
            outs = []
            for k, sel in found:
                if not len(sel):
                    continue
                if "lo" not in infos[k]:
                    infos[k].update(zip(("lo", "hi", "proto"), (int(x[0]) for x in conns.keys(int(pflows[k])))))
                whole = len(sel) == m                   # a batch of one flow: no copy
                out = {c: d[c] if whole else d[c][sel] for c in (*KEPT, *SYN_KEPT, "dsack_left")}
                out["swap"] = swap if whole else swap[sel]
                out["ipidx"] = sel + n_ip
                outs.append((k, out))
            if others is not None:
                others.add(d, pfl, swap, n_ip)
            if feed is not None:
                feed.put(*item)
            del d, item
            yield from outs
            del outs
            n_ip += m
        check_linktypes(path, reader, unknown, n_ip, salvage)
    except BaseException as exc:
        if feed is not None:
            feed.close(error=exc)
        raise
    if feed is not None:
        feed.close(reader=reader, unknown=unknown)
    v6 = conns.v6_addresses()
    for info in infos:
        info["v6_addresses"] = v6
    if others is not None:
        others.finish()


def _flows_time_chunks(path, pflows, *, salvage, lateness_ns, chunk_rows, infos, others=None, feed=None):
    """``(k, chunk)``: each flow's rows (:func:`iter_flows_rows`, one pass over the capture)
    in stable time order (as ``read_pcap`` sorts them), at most ``chunk_rows`` at a time,
    ``k`` the flow's place in ``pflows``."""
    from ._timeorder import TimeOrder
    orders = [TimeOrder(lateness_ns, owned=False) for _ in pflows]

    def sliced(k, part):
        n = len(part["ts_ns"])
        for a in range(0, n, chunk_rows):
            yield k, {c: v[a:a + chunk_rows] for c, v in part.items()}
    for k, rows in iter_flows_rows(path, pflows, salvage=salvage, infos=infos, others=others, feed=feed):
        for part in orders[k].push(rows):
            yield from sliced(k, part)
    for k, order in enumerate(orders):
        for part in order.finish():
            yield from sliced(k, part)


def first_pass(chunks) -> dict:
    """What the first packets of each kind fix for the whole flow (the sides are the
    endpoint-order bit ``swap``): the forward side (first pure SYN's, else first packet's),
    the ISN per side (first SYN's sequence number, else first packet's), the handshake RTT
    (first SYN to the forward side's first plain ACK; 3 ms without), window scale and MSS
    from the SYNs (the last one announcing it), first and last time, packets and bytes."""
    f = {"t_first": None, "t_last": None, "fwd_syn": None, "first_swap": None, "packets": 0,
         "seq_first": [None, None], "seq_syn": [None, None], "t_syn": None, "t_ack": [None, None],
         "ws": [-1, -1], "mss": [0, 0], "pk": [0, 0], "by": [0, 0], "ecn": np.zeros(4, np.int64)}
    for c in chunks:
        t, flags, swap = c["ts_ns"], c["flags"], c["swap"].astype(np.int64)
        if not len(t):
            continue
        if f["t_first"] is None:
            f["t_first"], f["first_swap"] = int(t[0]), int(swap[0])
        f["t_last"] = int(t[-1])
        f["packets"] += len(t)
        f["ecn"] += ecn_counts(np.zeros(len(t), np.int64), c["ecn"], 1)[0]
        for s in (0, 1):
            rows = np.flatnonzero(swap == s)
            if not len(rows):
                continue
            f["pk"][s] += len(rows)
            f["by"][s] += int(c["ip_len"][rows].astype(np.int64).sum())
            if f["seq_first"][s] is None:
                f["seq_first"][s] = int(c["seq"][rows[0]])
            syn = rows[(flags[rows] & SYN) != 0]
            if len(syn):
                if f["seq_syn"][s] is None:
                    f["seq_syn"][s] = int(c["seq"][syn[0]])
                w = c["wscale"][syn].astype(np.int64)
                if (w >= 0).any():
                    f["ws"][s] = int(w[w >= 0][-1])
                ms = c["mss"][syn].astype(np.int64)
                if (ms > 0).any():
                    f["mss"][s] = int(ms[ms > 0][-1])
            ack = rows[(flags[rows] & (SYN | ACK)) == ACK]
            if len(ack) and f["t_ack"][s] is None:
                f["t_ack"][s] = int(t[ack[0]])
        pure = np.flatnonzero((flags & 0x12) == 0x02)
        if len(pure) and f["fwd_syn"] is None:
            f["fwd_syn"] = int(swap[pure[0]])
        if f["t_syn"] is None and len(pure):
            f["t_syn"] = int(t[pure[0]])
    return _settle(f)


def first_from_census(census: dict, pflow: int) -> dict:
    """:func:`first_pass` of provisional flow ``pflow`` from a census of the capture
    (:func:`._tcpinput.read_columns`; the same firsts and lasts, kept per flow and side
    while the census read the file), without another pass over the capture."""
    def side(name, s):
        v = int(census[name][2 * pflow + s])
        return None if v < 0 else v
    syn_sw = int(census["flow_syn_swap"][pflow])
    f = {"t_first": int(census["flow_first_ts"][pflow]), "t_last": int(census["flow_last_ts"][pflow]),
         "fwd_syn": None if syn_sw < 0 else syn_sw, "first_swap": int(census["flow_first_swap"][pflow]),
         "packets": int(census["flow_packets"][pflow]),
         "seq_first": [side("side_first", s) for s in (0, 1)], "seq_syn": [side("side_syn", s) for s in (0, 1)],
         "t_syn": None if syn_sw < 0 else int(census["flow_syn_ts"][pflow]),
         "t_ack": [side("side_ack", s) for s in (0, 1)],
         "ws": [int(census["side_ws"][2 * pflow + s]) for s in (0, 1)],
         "mss": [max(int(census["side_mss"][2 * pflow + s]), 0) for s in (0, 1)],
         "pk": [int(census["side_packets"][2 * pflow + s]) for s in (0, 1)],
         "by": [int(census["side_bytes"][2 * pflow + s]) for s in (0, 1)],
         "ecn": census["flow_ecn"][pflow].copy()}
    return _settle(f)


def _settle(f: dict) -> dict:
    """The flow-wide decisions from the firsts of :func:`first_pass` (sides -> directions)."""
    fs = f["fwd_syn"] if f["fwd_syn"] is not None else f["first_swap"]
    f["fwd_swap"] = fs
    side = [fs, 1 - fs]                                   # direction d -> side
    f["base"] = [f["seq_syn"][s] if f["seq_syn"][s] is not None else
                 (f["seq_first"][s] if f["seq_first"][s] is not None else 0) for s in side]
    f["ack_ref"] = ack_refs(np.array([-1 if f["seq_first"][s] is None else f["seq_first"][s] for s in side],
                                     np.int64), np.asarray(f["base"], np.int64))
    f["irtt"] = 3_000_000
    ta = f["t_ack"][fs]
    if f["t_syn"] is not None and ta is not None and ta - f["t_syn"] > 0:
        f["irtt"] = ta - f["t_syn"]
    ws = np.array([f["ws"][s] for s in side], np.int64)
    f["ws"] = ws
    f["shift"] = np.maximum(ws, 0) if (ws >= 0).all() else np.zeros(2, np.int64)
    f["mss"] = np.array([f["mss"][s] for s in side], np.int64)
    f["pk"] = [f["pk"][s] for s in side]
    f["by"] = [f["by"][s] for s in side]
    return f


def ack_refs(first_seq, base):
    """Per flow * 2 + direction: the relative sequence number of the direction's first
    segment seen, ``(first_seq - base) mod 2^32`` (int64), or -1 where ``first_seq`` is -1
    (the direction sent nothing) - where its ACKs start unwrapping
    (:meth:`FlowStream._start_ack_unwrap`)."""
    return np.where(first_seq >= 0, (first_seq - base) % M32, -1)


def first_arrays(f: dict) -> dict:
    """The firsts of one flow (:func:`first_pass`, :func:`first_from_census`) as the arrays
    over one flow that :class:`FlowStream` takes."""
    return {"base": np.asarray(f["base"], np.int64), "ack_ref": np.asarray(f["ack_ref"], np.int64),
            "irtt": np.array([f["irtt"]], np.int64),
            "t_first": np.array([f["t_first"]], np.int64), "t_last": np.array([f["t_last"]], np.int64),
            "present": np.ones(1, bool), "rows": int(f["packets"]), "ws": np.asarray(f["ws"], np.int64), "mss": np.asarray(f["mss"], np.int64),
            "shift": np.asarray(f["shift"], np.int64)}


def first_of_rows(fl, dr, t, seq, flags, syn_rows, wscale_syn, mss_syn, nflow: int) -> dict:
    """:func:`first_pass` of ``nflow`` flows from their rows in flow-major order, time order
    inside (``fl`` flow, ``dr`` direction; ``wscale_syn``/``mss_syn`` of the SYN rows
    ``syn_rows``), as :class:`FlowStream` takes it: ISN per flow and direction (first SYN's
    sequence number, else first row's), handshake RTT (first pure SYN to the forward side's
    first plain ACK; 3 ms without), window scale and MSS from the SYNs (the last one
    announcing it; the scale applied only when both sides announced one), first and last
    time (flows without rows: not ``present``)."""
    ngd = 2 * nflow
    base = np.zeros(ngd, np.int64)
    first_seq = np.full(ngd, -1, np.int64)
    for d in (0, 1):
        idx = np.flatnonzero(dr == d)
        if len(idx):
            f = fl[idx]
            st = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
            first_seq[2 * f[st].astype(np.int64) + d] = seq[idx[st]]
    base[first_seq >= 0] = first_seq[first_seq >= 0]
    gd = 2 * fl[syn_rows].astype(np.int64) + dr[syn_rows]
    if len(syn_rows):
        gs, fi = np.unique(gd, return_index=True)
        base[gs] = seq[syn_rows[fi]]
    ws = np.full(ngd, -1, np.int64)
    ok = wscale_syn >= 0
    ws[gd[ok]] = wscale_syn[ok]
    both = (ws.reshape(-1, 2) >= 0).all(axis=1) if ngd else np.zeros(0, bool)
    mss = np.zeros(ngd, np.int64)
    ok = mss_syn > 0
    mss[gd[ok]] = mss_syn[ok]
    t_first = np.zeros(nflow, np.int64)
    t_last = np.zeros(nflow, np.int64)
    present = np.zeros(nflow, bool)
    if len(fl):
        st = np.flatnonzero(np.r_[True, fl[1:] != fl[:-1]])
        en = np.r_[st[1:] - 1, len(fl) - 1]
        t_first[fl[st]], t_last[fl[en]], present[fl[st]] = t[st], t[en], True
    return {"base": base, "ack_ref": ack_refs(first_seq, base),
            "irtt": _handshake_rtt_ns(fl, dr, t, flags, nflow), "t_first": t_first,
            "t_last": t_last, "present": present, "rows": len(fl), "ws": ws, "mss": mss,
            "shift": np.where(np.repeat(both, 2), np.maximum(ws, 0), 0)}


def _handshake_rtt_ns(fl, dr, t, flags, nflow) -> np.ndarray:
    """Per flow: time from the first pure SYN to the first plain ACK of the forward side (the
    handshake RTT seen at the capture point); 3 ms where the handshake was not captured."""
    out = np.full(nflow, 3_000_000, np.int64)
    syn = np.flatnonzero((flags & (SYN | ACK)) == SYN)
    if not len(syn):
        return out
    f_syn, i = np.unique(fl[syn], return_index=True)
    t_syn = np.full(nflow, -1, np.int64)
    t_syn[f_syn] = t[syn[i]]
    ackp = np.flatnonzero(((flags & (SYN | ACK)) == ACK) & (dr == 0))
    if len(ackp):
        f_ack, j = np.unique(fl[ackp], return_index=True)
        ok = t_syn[f_ack] >= 0
        rtt = t[ackp[j]] - t_syn[f_ack]
        good = ok & (rtt > 0)
        out[f_ack[good]] = rtt[good]
    return out


def analyze_streamed_flows(path, pflows, *, res_s: float, salvage: bool, lateness_ns: int,
                           chunk_rows: int, census: dict, others=None, feed=None, spill_folder=None):
    """The analyses of TCP flows ``pflows`` (provisional ids, :func:`._tcpinput.read_columns`)
    of a capture, each in time chunks of ``chunk_rows`` packets with its own engine, all in
    ONE pass over the capture (a capture of several long flows is read once, not once per
    flow); what each flow's first packets fix comes from the ``census`` of the capture.
    ``others`` (a :class:`._tcpinput.GroupGatherer` or None) gathers other flows' packets
    in the same pass, and ``feed`` (a :class:`._feed.BatchFeed` or None) is handed that
    pass's batches (:func:`iter_flows_rows`). With no ``pflows``, the pass just reads the
    capture for ``others`` and ``feed``.

    The pass is made here; the analyses come from the iterator returned, one flow at a
    time and in the order of ``pflows``, so a caller that writes each away holds one
    flow's frames, not all of them. The flows' RTT samples (one per ACK: the bulk of a
    sender-side capture's events) wait until then in one nameless temporary file in
    ``spill_folder`` (None: the system's temporary folder), closed when the last flow is
    finished (or the iterator dropped)."""
    import tempfile
    firsts = [first_from_census(census, int(p)) for p in pflows]
    res_ns = int(round(res_s * 1e9))
    spill = tempfile.TemporaryFile(dir=spill_folder) if pflows else None    # one file for every flow
    streams = [FlowStream(first_arrays(first), res_ns, str(path), spill=spill) for first in firsts]
    infos: list = [{} for _ in pflows]
    try:
        for k, c in _flows_time_chunks(path, pflows, salvage=salvage, lateness_ns=lateness_ns,
                                       chunk_rows=chunk_rows, infos=infos, others=others, feed=feed):
            streams[k].chunk(stream_chunk(c, firsts[k]["fwd_swap"]))
    except BaseException:
        if spill is not None:
            spill.close()
        raise

    def finished():
        streams.reverse(), firsts.reverse(), infos.reverse()
        try:
            while streams:                  # each engine is dropped once its flow is finished
                yield _finish(streams.pop(), firsts.pop(), infos.pop(), path, res_s)
        finally:
            if spill is not None:
                spill.close()
    return finished()


def stream_chunk(c: dict, fwd_swap: int) -> dict:
    """The engine's chunk (:meth:`FlowStream.chunk`) of one flow from rows of
    :func:`_flows_time_chunks` (endpoint-order bit ``swap``; ``fwd_swap``: that of the
    forward side)."""
    c["t"] = c.pop("ts_ns")
    c["dr"] = (c.pop("swap").astype(np.int8) != fwd_swap).astype(np.int8)
    c["fl"] = np.zeros(len(c["t"]), np.int32)
    c["packet"] = c.pop("ipidx")
    c["synopt"] = c["synopt"][(c["flags"] & SYN) != 0]
    return c


def _finish(stream, first: dict, info: dict, path, res_s: float) -> TcpAnalysis:
    """The flow's analysis once every chunk went through ``stream``: its flows row from the
    key (``info``) and the firsts (``first``), then :meth:`FlowStream.finish`."""
    from ._connections import address_names
    from ._tcpframes import _flows_frame
    lo, hi = info["lo"], info["hi"]
    src, dst = (lo, hi) if first["fwd_swap"] == 0 else (hi, lo)
    v6 = info["v6_addresses"]
    flows = _flows_frame(1, src=address_names(np.array([src >> 16]), v6),
                         dst=address_names(np.array([dst >> 16]), v6),
                         sport=np.array([src & 0xFFFF]), dport=np.array([dst & 0xFFFF]),
                         proto=np.array([6]), start=np.array([first["t_first"]]),
                         endt=np.array([first["t_last"]]),
                         pk=np.array(first["pk"]).reshape(2, 1), by=np.array(first["by"], np.float64).reshape(2, 1), ecn=first["ecn"])
    a = stream.finish(flows, str(path), res_s)
    a.attrs["packets"] = int(first["packets"])
    return a
