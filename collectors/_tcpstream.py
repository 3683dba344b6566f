"""The TCP analysis of ONE flow in time chunks, with the state that crosses chunk boundaries
carried (docs/collectors.md, "What a time-chunked analysis of one flow has to carry"):
memory follows the chunk, not the flow.

It computes what :func:`.tcp._analyze` computes for a single flow, definition for
definition, and gives identical frames (tested with small chunks on real captures and on
one-flow copies). Two passes over the flow's packets: the first finds what the first
packet of each kind fixes for the whole flow (direction, ISNs, handshake RTT, first and
last time, per-direction totals), the second runs the analysis chunk by chunk. The three
decisions that look forward in time concern sparse rows and are settled at the flow's end:
Karn (a later retransmission voids an RTT sample), Eifel (the first ACK covering a
retransmission, held until it arrives) and DSACK (the last retransmission of the reported
block). Per-bin sums of the series add across chunks (integer-valued float sums: exact).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._capture import _records
from ._decode import SYN, ecn_counts
from ._tcparrays import (ACK, M32, OFF, _effective_mss, _first_with_key, _grouped_cummax, _recovery,
                         _unique_first, _unwrap)
from ._tcpframes import (KIND_FAST, KIND_RTT, KIND_TIMEOUT, TcpAnalysis, _events_frame, _rtt_columns,
                         _series_frame, check_series_rows, event_rows, spurious_reasons)
from ._tcprules import (dsack_edges, dsack_reported, duplicate_acks, dupack_candidates, dups_since_advance,
                        eifel_older, karn_voided, keepalives_and_below, out_of_order, segment_ends, zero_windows)


_stream_rows = getattr(_records, "stream_rows", None)     # None: the extension is not built
_stream_bins = getattr(_records, "stream_bins", None)


def _cummax(values, valid, carry):
    """Running maximum of ``values[valid]`` over the rows, starting from ``carry``."""
    out = _grouped_cummax(values, np.zeros(len(values), np.int32), valid)
    np.maximum(out, carry, out=out)
    return out


def _unwrap_from(raw, base, last_raw, last_rel):
    """:func:`.tcp._unwrap` of one direction's values continued from the previous chunk's
    last raw value and its unwrapped value (None: the flow's first rows): ``last_rel`` +
    the signed 32-bit step from ``last_raw`` to ``raw[0]`` + the unwrapped steps after."""
    g = np.zeros(len(raw), np.int32)
    if last_raw is None:
        return _unwrap(raw, g, np.array([base], np.int64))
    u = _unwrap(raw, g, np.array([int(raw[0])], np.int64))
    step = (int(raw[0]) - int(last_raw)) % M32
    u += last_rel + (step - M32 if step >= 1 << 31 else step)
    return u


def _member(values, sorted_set):
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set`` (binary search: the sets
    carried across chunks grow, and a hash or sort of them per chunk would not pay)."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    p = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[p] == values


def _time_runs(t, res_ns: int, start_bin: int):
    """For rows in time order (``t`` non-decreasing, ns): ``(starts, bins, n)``, the first
    row of each run of rows in one time bin (``t // res_ns - start_bin``) and that bin;
    found by a binary search per bin edge, not a division per row. None when ``t`` is
    not in order."""
    n = len(t)
    if n > 1 and not (t[1:] >= t[:-1]).all():
        return None
    lo, hi = int(t[0]) // res_ns, int(t[-1]) // res_ns
    starts = np.concatenate(([0], np.searchsorted(t, np.arange(lo + 1, hi + 1) * res_ns)))
    full = np.diff(starts, append=n) > 0
    return starts[full], np.arange(lo, hi + 1)[full] - start_bin, n


def _bin_sums(w, tb, runs, nb: int, half=None, to: int = 0, flip: bool = False):
    """Sums of ``w`` (integers per row; None: 1 per row) per half and time bin, as a float
    vector of ``2 * nb`` (half * nb + bin). ``half``: each row's (0/1; ``flip``: the other
    one), None: every row's is ``to``. Equals ``np.bincount(tb + half * nb, w,
    minlength=2 * nb)`` (integer sums: exact): with ``runs`` (:func:`_time_runs`) each run
    is summed whole (``np.add.reduceat``), else (``tb``: each row's bin) by ``np.bincount``."""
    out = np.zeros(2 * nb)
    if runs is None:
        h = np.full(len(tb), to, np.int64) if half is None else half.astype(np.int64) ^ int(flip)
        return out + np.bincount(tb + h * nb, weights=w, minlength=2 * nb)[:2 * nb]
    starts, b, n = runs
    s = np.diff(starts, append=n) if w is None else np.add.reduceat(w, starts, dtype=np.int64)
    if half is None:
        out[to * nb + b] = s
        return out
    s1 = np.add.reduceat(half if w is None else w * half, starts, dtype=np.int64)
    out[b], out[nb + b] = (s1, s - s1) if flip else (s - s1, s1)
    return out


def _steps(x, carry):
    """Rows where the non-decreasing ``x`` rises (from ``carry`` at the chunk's first row)."""
    r = np.flatnonzero(x[1:] != x[:-1]) + 1
    return np.concatenate(([0], r)) if len(x) and x[0] != carry else r


@dataclass
class SideState:
    """What one direction ``d`` of a flow carries from one chunk to the next (sequence
    numbers relative to its ISN, times in ns). Fields read as ``d``'s own rows or, for the
    ACK side, as the rows ``d`` sent acknowledging the other direction."""

    last_seq: int | None = None     # raw 32-bit sequence number of d's last row (None: none yet)
    last_rel: int = 0               # ... and its unwrapped relative value
    last_ack: int | None = None     # raw 32-bit ACK number of d's last ACK row
    last_rela: int = 0              # ... and its unwrapped relative value
    am: int = -1                    # running maximum of the ACKs d sent (ack_max of the other side)
    sm: int = -1                    # snd_max: running maximum of d's segment ends
    prev: tuple | None = None       # (rela, window) of d's previous row (duplicate-ACK rule)
    ka: bool | None = None          # d's previous row was a keep-alive
    dups: int = 0                   # duplicate ACKs d sent since its ACK last advanced
    adv_t: int | None = None        # time of d's last row that advanced snd_max
    nretx: int = 0                  # retransmissions of d so far (Karn's rule)
    maxpay: int = 0                 # largest payload d sent (effective MSS)
    paysum: float = 0.0             # payload bytes d sent
    pending: list = field(default_factory=list)   # (row, end, tsval) of d's retransmissions awaiting their ACK
    orig: dict | None = None        # d's segments sent once, still awaiting their ACK
    seqack: list = field(default_factory=list)    # seq/ACK RTT sample parts of d's ACKs (t, pk, ms, seg rel)
    ts_first: tuple | None = None   # (sorted tsval, row, t): first row of d with each TSval
    echoed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # TSecr values d already echoed
    tspairs: list = field(default_factory=list)   # timestamp RTT samples of d's echoes (t, pk, ms, v)


class FlowStream:
    """Chunk-by-chunk analysis of one TCP flow. ``first`` holds what the first pass found
    (see :func:`first_pass`); :meth:`chunk` takes the flow's rows in stable time order;
    :meth:`finish` returns the flows row, series and events as :func:`.tcp._analyze` would.
    The state a chunk leaves to the next is per direction in :attr:`side` (two
    :class:`SideState`), per flow in the bin sums (:attr:`acc`), retransmission and event lists."""

    def __init__(self, first: dict, res_ns: int):
        self.f = first
        self.res_ns = res_ns
        self.base = np.asarray(first["base"], np.int64)            # ISN per direction
        self.irtt = first["irtt"]
        self.start_bin = first["t_first"] // res_ns
        self.nb = first["t_last"] // res_ns - self.start_bin + 1
        total = 2 * self.nb
        self.acc = {k: np.zeros(total) for k in ("packets", "bytes", "pay", "adv", "dupacks",
                                                   "zero_windows", "rw_sum", "rw_n", "infl_s", "infl_c")}
        self.rows = 0
        self.side = (SideState(), SideState())   # per direction (0 fwd, 1 rev): what crosses chunks
        self.lf = [[None, None], [None, None]]   # [round][d]: snd_max before the last fast retx
        self.retx = []                     # per chunk: dict of the retransmissions' columns
        self.eifel = {}                    # retx row -> Eifel verdict (once its ACK came)
        self.dsack = []
        self.ev = {"ooo": [], "dupack": [], "zero_window": []}
        self.syn = []                      # per chunk: the SYN rows' direction and options

    # ---- one chunk
    def chunk(self, c: dict) -> None:
        t, flags, pay = c["t"], c["flags"], c["payload"].astype(np.int64)
        n = len(t)
        if not n:
            return
        g0 = self.rows
        grow = np.arange(g0, g0 + n)
        dr = (c["swap"].astype(np.int8) != self.f["fwd_swap"]).astype(np.int8)
        isd = (dr == 0, dr == 1)                             # rows of each direction
        didx = (np.flatnonzero(isd[0]), np.flatnonzero(isd[1]))
        is_syn = (flags & SYN) != 0
        has_ack = (flags & ACK) != 0
        rows = self._rows_c if _stream_rows is not None else self._rows_numpy
        rel, rela, end, am, sm, smb_own, below, dupack = rows(c, dr, isd, didx, flags, pay, has_ack, is_syn)
        data = pay > 0
        win = c["window"]
        zero_win = zero_windows(win, flags)

        reset_pos = {a: _steps(am[a], self.side[a].am) for a in (0, 1)}    # rows whose ACK advances
        dup_pos = {a: np.flatnonzero(dupack & isd[a]) for a in (0, 1)}

        def dups_at(idx):
            return dups_since_advance(idx, dr, reset_pos, dup_pos, (self.side[0].dups, self.side[1].dups))

        def rev_at(idx):
            return np.where(dr[idx] == 0, am[1][idx], am[0][idx])

        def am_before(a, idx):                  # ACK maximum of a before each row idx
            return np.where(idx > 0, am[a][np.maximum(idx - 1, 0)], self.side[a].am)

        def rev_before(idx):
            return np.where(dr[idx] == 0, am_before(1, idx), am_before(0, idx))

        def last_advance(d, idx):
            """The last row of d at or before each of ``idx`` that advanced d's snd_max
            (``end > smb_own``: where ``sm[d]`` rises; the first row reaching the value it
            has there), -1 when none in this chunk."""
            j = np.searchsorted(sm[d], sm[d][idx])
            return np.where((j > 0) | (sm[d][0] > self.side[d].sm), j, -1)

        ooo = np.zeros(n, bool)
        bi = np.flatnonzero(below)
        if len(bi):
            dup_c, ackr_c, arb_c = dups_at(bi), rev_at(bi), rev_before(bi)
            for d in (0, 1):
                sel = dr[bi] == d
                cand = bi[sel]
                if not len(cand):
                    continue
                k = last_advance(d, cand)
                tq = np.where(k >= 0, t[np.maximum(k, 0)], self.side[d].adv_t if self.side[d].adv_t is not None else 0)
                ok = (k >= 0) | (self.side[d].adv_t is not None)
                ooo[cand[out_of_order(t[cand] - tq, ok, self.irtt, dup_c[sel], ackr_c[sel], arb_c[sel],
                                      rel[cand], end[cand], smb_own[cand], data[cand])]] = True
        for d in (0, 1):
            k = int(last_advance(d, [n - 1])[0])
            if k >= 0:
                self.side[d].adv_t = int(t[k])

        retx = below & ~ooo
        ri_all = np.flatnonzero(retx)
        fast = np.zeros(n, bool)
        if len(ri_all):
            fast[ri_all[dups_at(ri_all) >= 2]] = True
            _recovery(ri_all, dr, np.zeros(n, np.int32), fast, rev_at(ri_all), smb_own, carry=self.lf)

        # ---- retransmissions (spurious verdicts settled at the end)
        spur_acked = np.zeros(n, bool)
        if len(ri_all):
            spur_acked[ri_all] = end[ri_all] <= rev_before(ri_all)
            ri = ri_all
            self.retx.append({"row": grow[ri], "t": t[ri], "pk": c["ipidx"][ri], "dr": dr[ri],
                              "rel": rel[ri], "pay": pay[ri], "fast": fast[ri],
                              "acked": spur_acked[ri], "data": data[ri]})
            for d in (0, 1):
                rr = ri[(dr[ri] == d) & ~spur_acked[ri] & c["has_ts"][ri]]
                self.side[d].pending.extend(zip(grow[rr].tolist(), end[rr].tolist(), c["tsval"][rr].tolist()))
        self._settle_eifel(am, c, grow)
        di = np.flatnonzero(c["dsack"])
        if len(di):
            dgd = dr[di] ^ 1
            dl = dsack_edges(c["dsack_left"][di], self.base[dgd], rela[di])
            self.dsack.append((grow[di], dgd.astype(np.int64), dl))

        # ---- RTT samples: sequence/ACK matching (Karn settled at the end)
        # retransmissions of d before a row: self.side[d].nretx + searchsorted(rd[d], row)
        rd = [ri_all[dr[ri_all] == d] for d in (0, 1)]
        orig = (data | is_syn) & ~retx
        for a in (0, 1):
            d = 1 - a
            ai = reset_pos[a][rela[reset_pos[a]] > 0]
            oi = np.flatnonzero(orig & isd[d])
            held = self.side[d].orig
            nh = 0 if held is None else len(held["key"])
            keys = end[oi] if held is None else np.concatenate((held["key"], end[oi]))

            def originals(p):
                """The held-then-new originals at positions ``p`` of ``keys``."""
                isn = p >= nh
                sn = oi[p[isn] - nh]
                new = {"key": keys[p], "row": grow[sn], "t": t[sn], "rel": rel[sn],
                       "nr": self.side[d].nretx + np.searchsorted(rd[d], sn)}
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
                hit, pos = _first_with_key([keys, np.arange(len(keys))], rela[ai])
                ai, pos = ai[hit], pos[hit]
                seg = originals(pos)
                ok = (seg["row"] < grow[ai]) & (self.side[d].nretx + np.searchsorted(rd[d], ai) == seg["nr"])
                ai = ai[ok]
                self.side[a].seqack.append((t[ai], c["ipidx"][ai], (t[ai] - seg["t"][ok]) / 1e6, seg["rel"][ok]))
            # keep the first original per segment end not yet covered by the ACKs
            keep = np.flatnonzero(keys > am[a][-1])
            _, first = _unique_first(keys[keep])
            first.sort()
            self.side[d].orig = originals(keep[first])
        for d in (0, 1):
            self.side[d].nretx += len(rd[d])

        # ---- RTT samples: timestamp echo
        has_ts = c["has_ts"]
        for d in (0, 1):
            tsi = np.flatnonzero(has_ts & isd[d])
            u, fi = _unique_first(c["tsval"][tsi])
            new = (u.astype(np.int64), grow[tsi[fi]], t[tsi[fi]])
            held = self.side[d].ts_first
            if held is not None:
                if not len(new[0]) or (len(held[0]) and held[0][-1] < new[0][0]):
                    new = tuple(np.concatenate((h, x)) for h, x in zip(held, new))
                else:
                    keys = np.r_[held[0], new[0]]
                    rows = np.r_[held[1], new[1]]
                    tt = np.r_[held[2], new[2]]
                    uk, fi = np.unique(keys, return_index=True)       # held entries come first
                    new = (uk, rows[fi], tt[fi])
            self.side[d].ts_first = new
        for a in (0, 1):
            d = 1 - a
            ai = np.flatnonzero(has_ts & isd[a] & has_ack)
            u, fi = _unique_first(c["tsecr"][ai])
            u = u.astype(np.int64)
            fresh = ~_member(u, self.side[a].echoed)
            u, ai = u[fresh], ai[fi[fresh]]
            self.side[a].echoed = np.insert(self.side[a].echoed, np.searchsorted(self.side[a].echoed, u), u)
            uk, rows, tt = self.side[d].ts_first
            echoed_now = u
            if len(u) and len(uk):
                p = np.minimum(np.searchsorted(uk, u), len(uk) - 1)
                hit = (uk[p] == u) & (rows[p] < grow[ai])
                ai, p, u = ai[hit], p[hit], u[hit]
                self.side[a].tspairs.append((t[ai], c["ipidx"][ai], (t[ai] - tt[p]) / 1e6, u))
            # a value echoed once is never looked up again
            keep = ~_member(uk, echoed_now)
            self.side[d].ts_first = (uk[keep], rows[keep], tt[keep])

        # ---- events of this chunk
        for name, mask, direction, seqv in (("ooo", ooo, dr, rel), ("dupack", dupack, dr ^ 1, rela),
                                            ("zero_window", zero_win, dr ^ 1, rela)):
            ii = np.flatnonzero(mask)
            if len(ii):
                self.ev[name].append({"time": t[ii], "packet": c["ipidx"][ii].astype(np.int64),
                                      "direction": direction[ii], "seq": seqv[ii],
                                      "payload_bytes": pay[ii].astype(np.int64)})
        si = np.flatnonzero(is_syn)
        if len(si):
            self.syn.append((dr[si], c["wscale"][si].astype(np.int64), c["mss"][si].astype(np.int64),
                             c["synopt"][si].astype(np.int64), has_ts[si]))
        for d in (0, 1):
            pd_ = pay[didx[d]]
            if len(pd_):
                self.side[d].maxpay = max(self.side[d].maxpay, int(pd_.max()))
                self.side[d].paysum += float(pd_.sum())

        # ---- series sums (a row's own half is its direction's, the other half the reverse)
        A = self.acc
        nb = self.nb
        sums = self._bin_sums_c if _stream_bins is not None else self._bin_sums_numpy
        sums(c, dr, is_syn, pay, rela, am, sm)

        def add_rows(key, ii, to_half, w=None):        # few rows: their bins one by one
            A[key] += np.bincount((t[ii] // self.res_ns - self.start_bin) + to_half * nb, weights=w,
                                  minlength=2 * nb)[:2 * nb]
        for a in (0, 1):                  # ACK advances (not the first ACK) go to the acked half
            r = reset_pos[a]
            prev = am_before(a, r)
            r = r[prev >= 0]
            add_rows("adv", r, 1 - a, am[a][r] - prev[prev >= 0])
        for key, mask in (("dupacks", dupack), ("zero_windows", zero_win)):
            ii = np.flatnonzero(mask)
            add_rows(key, ii, 1 - dr[ii].astype(np.int64))
        if len(ri_all):
            self.retx[-1]["bin_row"] = t[ri_all] // self.res_ns - self.start_bin + dr[ri_all].astype(np.int64) * nb
        for a in (0, 1):
            R, D = reset_pos[a], dup_pos[a]
            self.side[a].dups = int((D > R[-1]).sum()) if len(R) else self.side[a].dups + len(D)
            self.side[a].am = int(am[a][-1])
        for d in (0, 1):
            self.side[d].sm = int(sm[d][-1])
        self.rows += n

    def _rows_numpy(self, c, dr, isd, didx, flags, pay, has_ack, is_syn):
        """The per-row chain of a chunk: sequence and ACK numbers unwrapped per direction
        (``rel``, ``rela``; -1 without ACK), segment ends, the running ACK maximum per
        acking direction (``am``) and snd_max per direction (``sm``), each row's own
        snd_max before it (``smb_own``), the rows below it (``below``: data, SYN or FIN
        not a keep-alive) and the duplicate ACKs (same ACK and window as the direction's
        previous row, pure, window > 0, at snd_max, the other direction's previous row no
        keep-alive); the carried values updated (not ``am``/``sm``)."""
        n = len(dr)
        base = self.base
        rel = np.empty(n, np.int64)
        rela = np.empty(n, np.int64)
        for d in (0, 1):
            idx = didx[d]
            if not len(idx):
                continue
            s = c["seq"][idx]
            rel[idx] = _unwrap_from(s, base[d], self.side[d].last_seq, self.side[d].last_rel)
            self.side[d].last_seq, self.side[d].last_rel = int(s[-1]), int(rel[idx[-1]])
            araw = np.where(has_ack[idx], c["ack"][idx], np.uint32(base[1 - d] % M32))
            rela[idx] = _unwrap_from(araw, base[1 - d], self.side[d].last_ack, self.side[d].last_rela)
            self.side[d].last_ack, self.side[d].last_rela = int(araw[-1]), int(rela[idx[-1]])
        end = segment_ends(rel, pay, flags)
        rela[~has_ack] = -1
        am = {a: _cummax(rela, isd[a] & has_ack, self.side[a].am) for a in (0, 1)}
        sm = {d: _cummax(end, isd[d], self.side[d].sm) for d in (0, 1)}
        smb_own = np.empty(n, np.int64)
        smb_own[0] = self.side[int(dr[0])].sm
        np.copyto(smb_own[1:], np.where(isd[0][1:], sm[0][:-1], sm[1][:-1]))
        keepalive, below = keepalives_and_below(rel, smb_own, pay, flags)
        win = c["window"]
        dupack = duplicate_acks(dr, rela, win, dupack_candidates(rel, smb_own, pay, flags, has_ack, win), keepalive,
                                prev=[x.prev for x in self.side], ka=[x.ka for x in self.side])
        for d in (0, 1):
            if len(didx[d]):
                last = didx[d][-1]
                self.side[d].prev = (int(rela[last]), int(win[last]))
                self.side[d].ka = bool(keepalive[last])
        return rel, rela, end, am, sm, smb_own, below, dupack

    def _rows_c(self, c, dr, isd, didx, flags, pay, has_ack, is_syn):
        """:meth:`_rows_numpy` in one pass in C (``_records.stream_rows``)."""
        n = len(dr)

        def opt(v):
            return 0 if v is None else v
        def seen(x):
            return [int(v is not None) for v in x]
        prev = [(0, 0) if x.prev is None else x.prev for x in self.side]
        def each(name):
            return [getattr(x, name) for x in self.side]
        st = np.array([*(int(b) for b in self.base), *seen(each("last_seq")), *map(opt, each("last_seq")),
                       *each("last_rel"), *seen(each("last_ack")), *map(opt, each("last_ack")),
                       *each("last_rela"), *each("am"), *each("sm"), *seen(each("prev")), *(p[0] for p in prev),
                       *(p[1] for p in prev), *seen(each("ka")), *(int(bool(k)) for k in each("ka"))], np.int64)
        out = [np.empty(n, np.int64) for _ in range(8)]
        masks = [np.empty(n, bool) for _ in range(3)]
        _stream_rows(dr, np.ascontiguousarray(c["seq"], np.uint32), np.ascontiguousarray(c["ack"], np.uint32),
                     np.ascontiguousarray(flags, np.uint8), np.ascontiguousarray(pay, np.int64),
                     np.ascontiguousarray(c["window"], np.uint16), st, *out, *masks)
        for d in (0, 1):
            if st[2 + d]:
                self.side[d].last_seq, self.side[d].last_rel = int(st[4 + d]), int(st[6 + d])
            if st[8 + d]:
                self.side[d].last_ack, self.side[d].last_rela = int(st[10 + d]), int(st[12 + d])
            if st[18 + d]:
                self.side[d].prev = (int(st[20 + d]), int(st[22 + d]))
            if st[24 + d]:
                self.side[d].ka = bool(st[26 + d])
        rel, rela, end, am0, am1, sm0, sm1, smb_own = out
        keepalive, below, dupack = masks
        return rel, rela, end, {0: am0, 1: am1}, {0: sm0, 1: sm1}, smb_own, below, dupack

    def _bin_sums_c(self, c, dr, is_syn, pay, rela, am, sm) -> None:
        """:meth:`_bin_sums_numpy` in one pass in C (``_records.stream_bins``)."""
        A = self.acc
        _stream_bins(np.ascontiguousarray(c["t"], np.int64), dr, np.ascontiguousarray(c["flags"], np.uint8),
                     np.ascontiguousarray(c["ip_len"], np.uint32), pay, np.ascontiguousarray(c["window"], np.uint16),
                     rela, am[0], am[1], sm[0], sm[1],
                     np.array([self.res_ns, self.start_bin, self.nb, *self.f["shift"]], np.int64),
                     *(A[k] for k in ("packets", "bytes", "pay", "rw_sum", "rw_n", "infl_s", "infl_c")))

    def _bin_sums_numpy(self, c, dr, is_syn, pay, rela, am, sm) -> None:
        """Adds a chunk's rows to the series sums of packets, bytes and payload (own half),
        advertised windows (window << the sender's scale, not on SYNs; other half, rows with
        ACK) and bytes in flight (snd_max - the reverse ACK maximum, >= 0; both halves): by
        runs of rows per time bin."""
        A = self.acc
        nb = self.nb
        t, win = c["t"], c["window"]
        runs = _time_runs(t, self.res_ns, self.start_bin)
        tb = None if runs is not None else t // self.res_ns - self.start_bin

        def add(key, w, half=None, to=0, flip=False):
            A[key] += _bin_sums(w, tb, runs, nb, half, to, flip)
        add("packets", None, dr)
        add("bytes", c["ip_len"], dr)
        add("pay", pay, dr)
        # windows summed per direction and bin, then scaled (powers of two: exact)
        ha = rela >= 0
        rw = np.where(ha & ~is_syn, win, 0)
        v = _bin_sums(rw, tb, runs, nb, dr, flip=True)
        v[:nb] *= 2.0 ** int(self.f["shift"][1])
        v[nb:] *= 2.0 ** int(self.f["shift"][0])
        A["rw_sum"] += v
        si = np.flatnonzero(is_syn & ha)
        A["rw_sum"] += np.bincount((t[si] // self.res_ns - self.start_bin) + (1 - dr[si].astype(np.int64)) * nb,
                                   weights=win[si], minlength=2 * nb)[:2 * nb]
        add("rw_n", ha, dr, flip=True)
        for d in (0, 1):
            inf = sm[d] - am[1 - d]
            k = np.searchsorted(am[1 - d], 0)                # no ACK yet (a prefix): as 0
            inf[:k] = sm[d][:k]
            np.maximum(inf, 0, out=inf)
            inf[:np.searchsorted(sm[d], 0)] = 0              # nothing sent yet (a prefix)
            add("infl_s", inf, None, d)
        cnt = _bin_sums(None, tb, runs, nb)[:nb]             # rows per bin, both halves
        A["infl_c"][:nb] += cnt
        A["infl_c"][nb:] += cnt

    def _settle_eifel(self, am, c, grow) -> None:
        """Eifel for the retransmissions whose first covering ACK is in this chunk."""
        for d in (0, 1):
            if not self.side[d].pending:
                continue
            rows, ends, tsv = (np.array(x, np.int64) for x in zip(*self.side[d].pending))
            amd = am[1 - d]                                   # non-decreasing over the chunk
            q = np.searchsorted(amd, ends, side="left")
            found = q < len(amd)
            qq = np.minimum(q, len(amd) - 1)
            verdict = found & c["has_ts"][qq] & eifel_older(tsv, c["tsecr"][qq])
            for r, f, v in zip(rows.tolist(), found.tolist(), verdict.tolist()):
                if f:
                    self.eifel[r] = v
            self.side[d].pending = [p for p, f in zip(self.side[d].pending, found.tolist()) if not f]

    # ---- the end of the flow
    def finish(self, flows, source: str, res_s: float) -> TcpAnalysis:
        """``flows``: the one-row flows frame (:func:`.tcp._flows_frame`) of this flow."""
        R = {k: np.concatenate([r[k] for r in self.retx]) if self.retx else np.zeros(0, np.int64)
             for k in ("row", "t", "pk", "dr", "rel", "pay", "fast", "acked", "data", "bin_row")}
        for k in ("fast", "acked", "data"):
            R[k] = R[k].astype(bool)
        nr = len(R["row"])
        eifel = np.array([self.eifel.get(r, False) for r in R["row"].tolist()], bool)
        dsack = np.zeros(nr, bool)
        if self.dsack and nr:
            drow = np.concatenate([x[0] for x in self.dsack])
            dgd = np.concatenate([x[1] for x in self.dsack])
            dl = np.concatenate([x[2] for x in self.dsack])
            dsack = dsack_reported(R["dr"].astype(np.int64) * OFF + R["rel"], R["row"], dgd * OFF + dl, drow)
        acked, eifel, dsack = R["acked"] & R["data"], eifel & R["data"], dsack & R["data"]
        spurious = acked | eifel | dsack
        fast = R["fast"]
        # RTT samples in _analyze's order: sequence/ACK per acking direction, then timestamps
        retx_keys = np.sort(R["dr"].astype(np.int64) * OFF + R["rel"])
        parts = []
        for a in (0, 1):
            for tt, pk, ms, srel in self.side[a].seqack:
                key = (1 - a) * OFF + srel
                ok = ~karn_voided(key, retx_keys)
                tt, pk, ms = tt[ok], pk[ok], ms[ok]
                parts.append((tt, pk, ms, np.full(len(tt), 1 - a, np.int64), np.zeros(len(tt), np.int8)))
        for a in (0, 1):
            if self.side[a].tspairs:
                tt, pk, ms, v = (np.concatenate(x) for x in zip(*self.side[a].tspairs))
                o = np.argsort(v, kind="stable")
                parts.append((tt[o], pk[o], ms[o], np.full(len(tt), 1 - a, np.int64), np.ones(len(tt), np.int8)))
        if parts:
            rtt_t, rtt_pk, rtt_ms, rtt_gd, rtt_method = (np.concatenate(x) for x in zip(*parts))
            rtt_pk = rtt_pk.astype(np.int64)
        else:
            rtt_t, rtt_pk, rtt_ms = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
            rtt_gd, rtt_method = np.zeros(0, np.int64), np.zeros(0, np.int8)

        # ---- events frame (as _analyze builds it)
        ev_parts = []

        def simple(name, event):
            if self.ev[name]:
                e = {k: np.concatenate([x[k] for x in self.ev[name]]) for k in self.ev[name][0]}
                ev_parts.append(event_rows(event, time=e["time"], packet=e["packet"], flow=0,
                                           direction=e["direction"], seq=e["seq"],
                                           payload_bytes=e["payload_bytes"] if name == "ooo" else 0))
        simple("ooo", "out_of_order")
        if nr:
            ev_parts.append(event_rows("retransmission", time=R["t"], packet=R["pk"], flow=0, direction=R["dr"],
                                       kind=np.where(fast, KIND_FAST, KIND_TIMEOUT), seq=R["rel"],
                                       payload_bytes=R["pay"], spurious=spurious,
                                       spurious_reason=spurious_reasons(acked, eifel, dsack)))
        if len(rtt_t):
            ev_parts.append(event_rows("rtt", time=rtt_t, packet=rtt_pk, flow=rtt_gd // 2, direction=rtt_gd % 2,
                                       kind=KIND_RTT + rtt_method, rtt_ms=rtt_ms))
        simple("dupack", "dupack")
        simple("zero_window", "zero_window")
        events = _events_frame(ev_parts, source)

        # ---- flows row
        counts = {"retransmissions": nr, "fast_retransmissions": int(fast.sum()),
                  "timeout_retransmissions": int((~fast).sum()),
                  "spurious_retransmissions": int(spurious.sum()),
                  "dupacks": int(sum(len(x["time"]) for x in self.ev["dupack"])),
                  "zero_windows": int(sum(len(x["time"]) for x in self.ev["zero_window"])),
                  "out_of_order": int(sum(len(x["time"]) for x in self.ev["ooo"]))}
        for k, v in counts.items():
            flows[k] = np.array([v], np.int64)
        flows = _rtt_columns(flows, rtt_ms, rtt_gd, rtt_method, np.array([x.paysum for x in self.side]))
        lost = ~spurious
        retx_bytes = float(R["pay"][lost].sum()) if nr else 0.0
        all_bytes = self.side[0].paysum + self.side[1].paysum
        with np.errstate(invalid="ignore", divide="ignore"):
            flows["loss_rate"] = np.where(np.array([all_bytes]) > 0, np.array([retx_bytes]) / max(all_bytes, 1), np.nan)
        acked_b = np.zeros(1)
        for a in (0, 1):
            acked_b[0] += max(self.side[a].am, 0) - (self.side[a].am > 0)
        dur = flows["duration_s"]
        with np.errstate(invalid="ignore", divide="ignore"):
            flows["goodput_bps"] = np.where(dur > 0, acked_b * 8 / dur, np.nan)
        mss = np.asarray(self.f["mss"], np.int64).reshape(-1, 2)
        ws = np.asarray(self.f["ws"], np.int64)
        flows["mss_bytes"] = np.where(mss.max(axis=1) > 0, np.where(mss[:, 0] > 0, mss[:, 0], mss[:, 1]), np.nan)
        flows["wscale_fwd"] = ws.reshape(-1, 2)[:, 0]
        flows["wscale_rev"] = ws.reshape(-1, 2)[:, 1]
        sp = np.zeros(2, bool)
        tsok = np.zeros(2, bool)
        for sdr, _, _, so, hts in self.syn:
            np.logical_or.at(sp, sdr.astype(np.int64), (so & 1) != 0)
            np.logical_or.at(tsok, sdr.astype(np.int64), ((so & 2) != 0) | hts)
        flows["sack_permitted"] = sp.reshape(-1, 2).all(axis=1)
        flows["timestamps"] = tsok.reshape(-1, 2).all(axis=1)
        flows.attrs["source"] = source

        # ---- series
        A = self.acc
        nb, res_ns, total = self.nb, self.res_ns, 2 * self.nb
        check_series_rows(source, 0, nb, res_ns, total, self.rows)

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
        eff = _effective_mss(mss.ravel(), np.array([x.maxpay for x in self.side], np.int64))
        series = _series_frame(out, eff, rtt_t, rtt_ms, rtt_gd, rtt_method, nflow=1, nb=np.array([nb]),
                               offset=np.array([0]), start_bin=np.array([self.start_bin]),
                               end_bin=np.array([self.start_bin + nb - 1]), res_ns=res_ns)
        series.attrs.update({"source": source, "resolution_s": res_s})
        flows.validate("flows", name="flows")
        series.validate("tcp", name="tcp series")
        return TcpAnalysis(flows=flows, series=series, events=events, resolution_s=res_s, source=source,
                           attrs={"packets": int(self.f["packets"]), "tcp_packets": int(self.rows)})


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
        for item in numbered_batches(reader, conns, unknown):
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


def analyze_streamed_flows(path, pflows, *, res_s: float, salvage: bool, lateness_ns: int,
                           chunk_rows: int, census: dict, others=None, feed=None) -> list:
    """The analyses of TCP flows ``pflows`` (provisional ids, :func:`._tcpinput.read_columns`)
    of a capture, each in time chunks of ``chunk_rows`` packets with its own state, all in
    ONE pass over the capture (a capture of several long flows is read once, not once per
    flow); what each flow's first packets fix comes from the ``census`` of the capture.
    ``others`` (a :class:`._tcpinput.GroupGatherer` or None) gathers other flows' packets
    in the same pass, and ``feed`` (a :class:`._feed.BatchFeed` or None) is handed that
    pass's batches (:func:`iter_flows_rows`). With no ``pflows``, the pass just reads the
    capture for ``others`` and ``feed``."""
    firsts = [first_from_census(census, int(p)) for p in pflows]
    res_ns = int(round(res_s * 1e9))
    streams = [FlowStream(first, res_ns) for first in firsts]
    infos: list = [{} for _ in pflows]
    for k, c in _flows_time_chunks(path, pflows, salvage=salvage, lateness_ns=lateness_ns,
                                   chunk_rows=chunk_rows, infos=infos, others=others, feed=feed):
        c["t"] = c.pop("ts_ns")
        streams[k].chunk(c)
    return [_finish(stream, first, info, path, res_s) for stream, first, info in zip(streams, firsts, infos)]


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
    return stream.finish(flows, str(path), res_s)
