"""The per-TTI simulation loop: traffic, scheduling, HARQ and link adaptation for a chunk.

This module holds :func:`run_chunk` (and :func:`schedule_rates`, the metric schedulers alone
on given rates), written as plain loops over numpy arrays, with small helpers for the
vectorised passes. When `numba <https://numba.pydata.org>`_ is installed they are compiled on
first use (``airlink.sim.kernel.COMPILED`` says whether they are; ``AIRLINK_NUMBA=0`` turns it
off); otherwise the same code runs as Python, with identical results, only slower. All random
numbers are drawn outside, in numpy, from the run's seed, so both give the same output bit for
bit.

Speed without changing a decision (docs/sim.md, "Speed"): in *static* TTIs of the metric
schedulers (every user holds more than a TTI's worth or has nothing to send) the best user of
every subchannel is found for all subchannels at once from float32 keys of ``rate * weight``
(order-preserving; exact float64 comparison where two different metrics share a key), and
subchannels after the TTI's retransmissions go straight to that user (*direct*). Other TTIs,
and everything with ``FAST_PATH = False``, go subchannel by subchannel.

Model, per TTI ``k`` (the engine passes the chunk's real and reported SINR):

1. **Arrivals** join each user's queue; with a finite buffer of ``B`` packets, packets
   beyond ``B`` are dropped (drop-tail). Full-buffer users (``full_u``) always have data;
   packet sizes are per user (``pkt_u``).
2. **Scheduling** per subchannel ``c`` in order: the scheduler picks one user among those
   with data left this TTI whose reported SINR supports some MCS (rate > 0). Schedulers:
   0 round robin, 1 MaxCIR ``argmax R[u,c]``, 2 proportional fair ``argmax R[u,c]/T[u]``
   (MC-PFS when there are several subchannels), 3 generalized ``R/T**lambda``, 4
   backlog-driven (CDMA2000 1xRTT style, rate from the queue), 5 given from outside (a
   user's scheduler). Ties go to the first user in a random permutation drawn per TTI.
   ``T[u] <- (1 - a) T[u] + a * sum_c R[u,c] d[u,c]`` after the TTI, with ``a`` fixed
   (``pf_a``) or ``1 / min(n, t_a)`` (window ``pf_window``).
3. **HARQ**: every (user, subchannel) allocation is one block with the MCS chosen from the
   *reported* SINR; it fails with probability ``BLER_m(real SINR)``. A failed block waits
   in the user's HARQ queue and is retransmitted (same size and MCS) in the user's next
   allocation, with chase combining (linear SINRs of all attempts add up) until it gets
   through or reaches ``harq_max_tx`` attempts; then it is given up to the layer above (its
   bytes stay queued as new data, as RLC AM would resend them). With ``harq_priority`` a
   subchannel goes first to the user with a pending retransmission that sees it best.
4. **Link adaptation** (``la_mode``): 0 per TTI from the reported SINR (CQI); 1 average
   C/I (linear mean of the reported values) over ``la_interval`` blocks, scheme
   maximising ``S_n`` at that average; 2 measured BLER over the
   interval vs thresholds, one step down/up; 3 hybrid (BLER method below ``la_hybrid_db``
   average C/I, C/I method above); 4 ideal (best ``S_n`` at the real SINR); 5 outer-loop
   link adaptation (OLLA): per TTI from the reported SINR plus a per-user offset ``o_u``
   (dB) that the HARQ feedback of the user's first transmissions moves once per TTI (one
   transport block): ``o_u += step * (BLER_t / (1 - BLER_t) * (1 - f) - f)`` with ``f`` the
   share of the TTI's new blocks that failed (a NACK lowers it by ``step``, an ACK raises it by
   ``step BLER_t / (1 - BLER_t)``, so the first-transmission BLER settles at ``BLER_t``),
   within ``+-olla_max`` dB.
5. **HARQ feedback delay** (``harq_feedback_tti`` = K1 in TTIs): a failed block can be resent from
   ``K1 + 1`` TTIs after it (0: the next TTI); each queued block keeps the first TTI it may
   go in (``pend_ready``), and a user's retransmissions are taken oldest first.
6. **HARQ processes** (``harq_processes`` = P per user, 0: unlimited): the new blocks a user
   sends in one TTI are one transport block of one process, the free process of lowest
   index. A process is busy until the feedback of its last transmission has arrived (it may
   carry new data again ``K1 + 1`` TTIs after it) and while any of its blocks waits for a
   retransmission; a retransmission keeps the block's process and starts its wait again.
   A user whose P processes are all busy gets no new data in that TTI (it may still get
   its retransmissions). State: ``pend_proc`` (the process of each queued block) and
   ``proc_state[u, 0, p]`` (first TTI process p may carry new data), ``proc_state[u, 1, p]``
   (its blocks waiting for a retransmission).
"""
from __future__ import annotations

import math
import os

import numpy as np

from airlink.core.envflags import env_flag

from .nr_harq import combine as _combine

COMPILED = False
#: use the static/direct TTI paths and the float32-key best-user search where they apply (a
#: constant of the compiled code; the Python kernel reads it at run time, which is how the
#: tests compare them with the plain subchannel-by-subchannel step)
FAST_PATH = True

# Positions of the run's parameters in the two arrays ``ip`` (int64) and ``fp`` (float64)
# that :func:`run_chunk` takes; :class:`airlink.sim.step.Radio` fills them by these names.
# Module-level ints: the compiled kernel reads them as constants.
IP_SCHED = 0             #: kernel scheduler id (``kernel_id``; 5 = a Python scheduler's assignment)
IP_MAX_TX = 1            #: HARQ transmissions per block at most (``harq_max_tx``)
IP_HARQ_PRIORITY = 2     #: 1: retransmissions go before new data (``harq_priority``)
IP_BUFFER_PACKETS = 3    #: per-user buffer in packets, 0 = unbounded (``buffer_packets``)
IP_LA_MODE = 4           #: link adaptation (``LINK_ADAPTATION`` value)
IP_LA_INTERVAL = 5       #: TTIs between BLER / C/I link-adaptation decisions (``la_interval``)
IP_BL_INTERVAL = 6       #: TTIs between backlog-scheduler channel decisions
IP_GREEDY_TTI = 7        #: TTIs a backlog-scheduler user may stay greedy
IP_TTI = 8               #: global index of the chunk's first TTI (set before every call)
IP_PF_WINDOW = 9         #: PF averaging window t_a in TTIs, 0 = EWMA with ``pf_a``
IP_SECTOR_CHANNELS = 10  #: code channels of the sector (``backlog_sector_channels``)
IP_GREEDY_CHANNELS = 11  #: code channels a greedy user holds at most, 0 = no limit
IP_HARQ_FEEDBACK = 12    #: K1: TTIs from a block to its HARQ feedback (``harq_feedback_tti``)
IP_HARQ_PROCESSES = 13   #: HARQ processes per user, 0 = unlimited (``harq_processes``)
N_IP = 14
FP_PF_A = 0              #: PF EWMA constant a
FP_LAMBDA = 1            #: fairness exponent of the generalized PF
FP_CHANNEL_BYTES = 2     #: bytes one backlog code channel carries per TTI
FP_DRAIN_TTI = 3         #: backlog drain time in TTIs
FP_GREEDY_BYTES = 4      #: backlog above which a backlog-scheduler user turns greedy (bytes)
FP_LA_BLER_UP = 5        #: measured BLER above which BLER link adaptation steps down
FP_LA_BLER_DOWN = 6      #: measured BLER below which it steps up
FP_LA_HYBRID_DB = 7      #: average C/I (dB) above which hybrid uses the C/I method
FP_OLLA_STEP_DB = 8      #: OLLA step on a NACK (dB)
FP_OLLA_MAX_DB = 9       #: OLLA offset bound (dB)
FP_BLER_TARGET = 10      #: OLLA first-transmission BLER target
FP_HARQ_INV_GAP = 11     #: 1 / G of the HARQ combining (0: chase; ``nr_harq.inverse_gap``)
N_FP = 12



def _mcs_of(x, thr_lin):
    """MCS index of one reported SINR ``x`` (linear): (number of thresholds <= x) - 1."""
    m = -1
    for j in range(thr_lin.shape[0]):
        if x >= thr_lin[j]:
            m += 1
    return m


def _thr_at(thr, j):
    """Threshold ``j`` of ``thr``, NaN past its end (no SINR reaches NaN: ``x >= NaN`` is false)."""
    return _thr_below(thr, j, thr.shape[0])


def _thr_below(thr, j, n):
    """Threshold ``j`` of ``thr`` if ``j < n``, else NaN (a threshold no SINR reaches)."""
    return thr[j] if j < n else np.float32(np.nan)


def _count_row(row, thr_lin, out, tmp):
    """``out[c] = (number of thresholds <= row[c]) - 1`` (the MCS index, -1 = none).

    float32 compares, eight thresholds per pass held in local variables (registers), the
    last pass padded with NaN thresholds, which count for no SINR (so 15 thresholds take
    two passes, not one of eight and seven of one). Each pass reads one array and writes
    another (``out`` and ``tmp`` in turn, ending in ``out``): a loop that reads and writes
    the same array is not vectorised here, a loop from one array into another is (8 lanes).
    """
    n_m = thr_lin.shape[0]
    n_c = row.shape[0]
    n_pass = (n_m + 7) // 8
    if n_pass == 0:
        for c in range(n_c):
            out[c] = -1
        return
    src = tmp if n_pass % 2 == 1 else out      # the first pass writes the other one
    for j in range(0, n_m, 8):
        dst = out if src is tmp else tmp
        t0 = _thr_at(thr_lin, j)
        t1 = _thr_at(thr_lin, j + 1)
        t2 = _thr_at(thr_lin, j + 2)
        t3 = _thr_at(thr_lin, j + 3)
        t4 = _thr_at(thr_lin, j + 4)
        t5 = _thr_at(thr_lin, j + 5)
        t6 = _thr_at(thr_lin, j + 6)
        t7 = _thr_at(thr_lin, j + 7)
        if j == 0:
            for c in range(n_c):
                x = row[c]
                dst[c] = (np.int32(-1) + np.int32(x >= t0) + np.int32(x >= t1) + np.int32(x >= t2)
                          + np.int32(x >= t3) + np.int32(x >= t4) + np.int32(x >= t5)
                          + np.int32(x >= t6) + np.int32(x >= t7))
        else:
            for c in range(n_c):
                x = row[c]
                dst[c] = (src[c] + np.int32(x >= t0) + np.int32(x >= t1) + np.int32(x >= t2)
                          + np.int32(x >= t3) + np.int32(x >= t4) + np.int32(x >= t5)
                          + np.int32(x >= t6) + np.int32(x >= t7))
        src = dst


def _level_keys(rate_ext, weight, keys):
    """float32 keys of a user's metric ``rate * weight`` per MCS level (level 0 = no MCS).

    ``keys[j] = float32(rate_ext[j] * weight)``: rounding to float32 keeps the order
    (a >= b implies float32(a) >= float32(b)), so a strictly largest key is a strictly
    largest metric. A positive metric that underflows gets the smallest positive float32
    (still ordered); a metric that is not > 0 (no MCS, rate 0, NaN) gets -1 and never wins.
    """
    keys[0] = np.float32(-1.0)
    for j in range(1, rate_ext.shape[0]):
        keys[j] = _key_of(rate_ext[j] * weight)


def _key_of(metric):
    """The float32 key of one metric (see :func:`_level_keys`); metrics from 2**128 - 2**103
    up are inf, as the float32 rounding makes them (written out: no overflow warning)."""
    if not metric > 0:
        return np.float32(-1.0)
    if metric >= 3.4028235677973366e38:
        return np.float32(np.inf)
    key = np.float32(metric)
    return key if key > 0 else np.float32(1e-45)


def _keys_injective(rate_ext, weight, remaining):
    """True if no two different positive metrics ``rate_ext[j] * weight[u]`` (j >= 1,
    users with data) share a float32 key (see :func:`_level_keys`): then comparing keys
    is comparing metrics, ties included."""
    n_u = weight.shape[0]
    n_l = rate_ext.shape[0]
    vals = np.empty(n_u * n_l)
    n = 0
    for u in range(n_u):
        if remaining[u] <= 1e-9:
            continue
        for j in range(1, n_l):
            metric = rate_ext[j] * weight[u]
            if metric > 0:
                vals[n] = metric
                n += 1
    vals = np.sort(vals[:n])
    for i in range(n - 1):
        if vals[i] < vals[i + 1] and _key_of(vals[i]) == _key_of(vals[i + 1]):
            return False
    return True


def _key_row(row, thr_lin, keys, n_m, out, tmp):
    """``out[c] = keys[m + 1]`` with ``m`` the MCS of ``row[c]`` over the first ``n_m``
    thresholds, without a table lookup (which is not vectorised): with ascending
    thresholds, a chain of compare-and-select leaves the key of the highest threshold
    <= SINR. Eight thresholds per pass in registers, the last pass padded with NaN
    thresholds (never selected), from one array into the other (see :func:`_count_row`)."""
    n_c = row.shape[0]
    n_pass = (n_m + 7) // 8
    k0 = keys[0]
    src = tmp if n_pass % 2 == 1 else out
    if n_pass == 0:
        for c in range(n_c):
            out[c] = k0
        return
    for j in range(0, n_m, 8):
        dst = out if src is tmp else tmp
        t0 = _thr_below(thr_lin, j, n_m)
        t1 = _thr_below(thr_lin, j + 1, n_m)
        t2 = _thr_below(thr_lin, j + 2, n_m)
        t3 = _thr_below(thr_lin, j + 3, n_m)
        t4 = _thr_below(thr_lin, j + 4, n_m)
        t5 = _thr_below(thr_lin, j + 5, n_m)
        t6 = _thr_below(thr_lin, j + 6, n_m)
        t7 = _thr_below(thr_lin, j + 7, n_m)
        v0 = keys[min(j + 1, n_m)]
        v1 = keys[min(j + 2, n_m)]
        v2 = keys[min(j + 3, n_m)]
        v3 = keys[min(j + 4, n_m)]
        v4 = keys[min(j + 5, n_m)]
        v5 = keys[min(j + 6, n_m)]
        v6 = keys[min(j + 7, n_m)]
        v7 = keys[min(j + 8, n_m)]
        if j == 0:
            for c in range(n_c):
                dst[c] = _select8(row[c], k0, t0, t1, t2, t3, t4, t5, t6, t7,
                                  v0, v1, v2, v3, v4, v5, v6, v7)
        else:
            for c in range(n_c):
                dst[c] = _select8(row[c], src[c], t0, t1, t2, t3, t4, t5, t6, t7,
                                  v0, v1, v2, v3, v4, v5, v6, v7)
        src = dst


def _select8(x, key, t0, t1, t2, t3, t4, t5, t6, t7, v0, v1, v2, v3, v4, v5, v6, v7):
    """The value of the highest of eight ascending thresholds <= x (``key`` if none)."""
    if x >= t0:
        key = v0
    if x >= t1:
        key = v1
    if x >= t2:
        key = v2
    if x >= t3:
        key = v3
    if x >= t4:
        key = v4
    if x >= t5:
        key = v5
    if x >= t6:
        key = v6
    if x >= t7:
        key = v7
    return key


def _key_update9(row, thr9, keys, key_in, code_in, key_out, code_out, code_u):
    """:func:`_key_row` and :func:`_best_update` in one pass, for up to nine thresholds
    (``thr9`` padded with NaN, which no SINR reaches): one read of the SINR row per user."""
    t0 = thr9[0]
    t1 = thr9[1]
    t2 = thr9[2]
    t3 = thr9[3]
    t4 = thr9[4]
    t5 = thr9[5]
    t6 = thr9[6]
    t7 = thr9[7]
    t8 = thr9[8]
    k0 = keys[0]
    v0 = keys[1]
    v1 = keys[2]
    v2 = keys[3]
    v3 = keys[4]
    v4 = keys[5]
    v5 = keys[6]
    v6 = keys[7]
    v7 = keys[8]
    v8 = keys[9]
    for c in range(row.shape[0]):
        x = row[c]
        key = _select8(x, k0, t0, t1, t2, t3, t4, t5, t6, t7, v0, v1, v2, v3, v4, v5, v6, v7)
        key = v8 if x >= t8 else key
        old = key_in[c]
        better = key > old
        key_out[c] = key if better else old
        code_out[c] = code_u if better else (code_in[c] | np.int32(key == old))


def _best_update(row, t_last, v_last, key_row, key_in, code_in, key_out, code_out, code_u):
    """One user (in the TTI's random order) against the best so far, per subchannel.

    The user's key is ``v_last`` where ``row[c] >= t_last`` (the highest threshold, left
    out of :func:`_key_row`), else ``key_row[c]``. ``code = 2 * user + tie``: a strictly
    larger key takes the subchannel (code ``2 * u``, earlier users keep ties); an equal
    key sets the tie bit, to be settled exactly (keys start at 0, a user without MCS has
    -1: only positive keys tie). Branch-free selects from the ``*_in`` arrays into the
    ``*_out`` ones (vectorised, see :func:`_count_row`); the best user is ``code >> 1``,
    -1 for none (code -2).
    """
    for c in range(key_row.shape[0]):
        key = v_last if row[c] >= t_last else key_row[c]
        old = key_in[c]
        better = key > old
        key_out[c] = key if better else old
        code_out[c] = code_u if better else (code_in[c] | np.int32(key == old))


def _metric_gather(mrow, wrate, out):
    """``out[c] = wrate[mrow[c] + 1]``: a user's metric on each subchannel from its MCS row
    (``mrow[c] >= -1``; the index is unsigned, which spares a wraparound check)."""
    for c in range(mrow.shape[0]):
        out[c] = wrate[np.uint32(mrow[c] + 1)]


def _metric_update(metric_row, metric_in, who_in, metric_out, who_out, u):
    """One user against the best so far, per subchannel: a strictly larger metric takes the
    subchannel. Branch-free selects from the ``*_in`` arrays into the ``*_out`` ones,
    vectorised (see :func:`_count_row`): which user is best changes from subchannel to
    subchannel in no pattern a branch predictor could follow."""
    for c in range(metric_row.shape[0]):
        metric = metric_row[c]
        old = metric_in[c]
        better = metric > old
        metric_out[c] = metric if better else old
        who_out[c] = u if better else who_in[c]


def _rate_update(rate_row, weight, key_in, who_in, key_out, who_out, u):
    """One user against the best so far, per subchannel, on given rates (float64): a
    strictly larger ``rate * weight`` takes the subchannel. Branch-free, vectorised."""
    for c in range(rate_row.shape[0]):
        metric = rate_row[c] * weight
        old = key_in[c]
        better = metric > old
        key_out[c] = metric if better else old
        who_out[c] = u if better else who_in[c]


def _schedule_rates(rate, order, sched, lam, pf_a, window, avg, best):
    """The metric schedulers of :func:`_run_chunk` on given rates: ``best[k, c]`` = the
    user with the largest ``rate[k, u, c] * weight[u]`` (> 0; ties to the earliest user
    in ``order[k]``; -1 = nobody), then ``T[u] <- (1 - a) T[u] + a * 8 * sum_c rate``
    over the user's subchannels (``a = 1 / min(n, window)``, or ``pf_a`` if window is 0).
    Same weights and arithmetic as the simulator's step, so the same decisions."""
    n_k = rate.shape[0]
    n_u = rate.shape[1]
    n_c = rate.shape[2]
    key = np.zeros((2, n_c))
    who = np.zeros((2, n_c), dtype=np.int64)
    sent = np.zeros(n_u)
    weight = np.zeros(n_u)
    for k in range(n_k):
        for u in range(n_u):
            if sched == 2 or (sched == 3 and lam == 1.0):
                weight[u] = 1.0 / avg[u] if avg[u] > 0 else 1e150
            elif sched == 3 and lam != 0.0:
                weight[u] = 1.0 / avg[u] ** lam if avg[u] > 0 else 1e150
            else:
                weight[u] = 1.0
            sent[u] = 0.0
        for c in range(n_c):
            key[0, c] = 0.0
            who[0, c] = -1
        cur = 0
        for i in range(n_u):
            u = order[k, i]
            _rate_update(rate[k, u], weight[u], key[cur], who[cur], key[1 - cur], who[1 - cur], u)
            cur = 1 - cur
        for c in range(n_c):
            u = who[cur, c]
            best[k, c] = u
            if u >= 0:
                sent[u] += rate[k, u, c]
        a = 1.0 / min(k + 1, window) if window > 0 else pf_a
        for u in range(n_u):
            avg[u] = (1.0 - a) * avg[u] + a * (8.0 * sent[u])


def _run_chunk(sinr_rep, sinr_real, arrivals, z_err, perm, forced,
               thr_lin, bytes_per_mcs, s50_lin, best_lut, lut_lo, lut_step,
               ip, fp,
               backlog, inflight, avg_thr,
               pend_bytes, pend_mcs, pend_acc, pend_tx, pend_head, pend_count,
               misc, user_mcs, la_ci_sum, la_err, la_blocks, assigned_ch, greedy_cnt,
               full_u, pkt_u, olla_db, pend_ready, pend_proc, proc_state, bl_thr_db, bl_channels,
               out_served, out_tx, out_nsub, out_mcs, out_retx, out_backlog, out_drops, out_blocks,
               out_active, out_gaveup):
    n_k = sinr_rep.shape[0]
    n_u = sinr_rep.shape[1]
    n_c = sinr_rep.shape[2]
    n_m = thr_lin.shape[0]
    ring = pend_bytes.shape[1]
    sched = ip[IP_SCHED]
    max_tx = ip[IP_MAX_TX]
    harq_priority = ip[IP_HARQ_PRIORITY]
    buf_pk = ip[IP_BUFFER_PACKETS]
    la_mode = ip[IP_LA_MODE]
    la_interval = ip[IP_LA_INTERVAL]
    bl_interval = ip[IP_BL_INTERVAL]
    greedy_limit = ip[IP_GREEDY_TTI]
    k_global = ip[IP_TTI]
    pf_window = ip[IP_PF_WINDOW]
    pf_a = fp[FP_PF_A]
    lam = fp[FP_LAMBDA]
    ch_bytes = fp[FP_CHANNEL_BYTES]
    drain_tti = fp[FP_DRAIN_TTI]
    greedy_bytes = fp[FP_GREEDY_BYTES]
    bler_up = fp[FP_LA_BLER_UP]
    bler_down = fp[FP_LA_BLER_DOWN]
    hybrid_db = fp[FP_LA_HYBRID_DB]
    harq_wait = ip[IP_HARQ_FEEDBACK] + 1
    n_proc = ip[IP_HARQ_PROCESSES]
    cur_proc = np.full(n_u, -1, dtype=np.int64)
    olla_step = fp[FP_OLLA_STEP_DB]
    olla_max = fp[FP_OLLA_MAX_DB]
    olla_up = olla_step * fp[FP_BLER_TARGET] / (1.0 - fp[FP_BLER_TARGET])
    inv_gap = fp[FP_HARQ_INV_GAP]
    thr_olla = np.zeros(n_m, dtype=np.float32)
    olla_new = np.zeros(n_u)
    olla_nack = np.zeros(n_u)
    remaining = np.zeros(n_u)
    weight = np.zeros(n_u)
    m_uc = np.zeros((n_u, n_c), dtype=np.int32)
    pre_best = np.full(n_c, -1, dtype=np.int64)
    pre_metric = np.zeros((2, n_c))                      # two sets, read one and write the other
    pre_who = np.zeros((2, n_c), dtype=np.int64)
    metric_row = np.zeros(n_c)
    rate_ext = np.zeros(n_m + 1)
    wrate = np.zeros(n_m + 1)
    for j in range(n_m):
        rate_ext[j + 1] = bytes_per_mcs[j]
    pend_avail = np.zeros(n_u, dtype=np.int64)
    d_nsub = np.zeros(n_u, dtype=np.int64)
    keys = np.zeros(max(n_m + 1, 10), dtype=np.float32)
    thr9 = np.full(9, np.nan, dtype=np.float32)     # up to nine thresholds, NaN = never reached
    for j in range(min(n_m, 9)):
        thr9[j] = thr_lin[j]
    key_row = np.zeros(n_c, dtype=np.float32)
    key_tmp = np.zeros(n_c, dtype=np.float32)
    best_key = np.zeros((2, n_c), dtype=np.float32)   # two sets, read one and write the other
    best_code = np.zeros((2, n_c), dtype=np.int32)
    m_tmp = np.zeros(n_c, dtype=np.int32)
    touch = np.zeros(n_u * (n_c // 16 + 1), dtype=np.float32)
    x_best = np.zeros(n_c, dtype=np.float32)
    m_best = np.zeros(n_c, dtype=np.int32)
    thr_sorted = True
    for j in range(n_m - 1):
        if not thr_lin[j] <= thr_lin[j + 1]:
            thr_sorted = False
    d_mcs = np.zeros(n_u)
    d_tx = np.zeros(n_u)
    d_bits = np.zeros(n_u)
    d_served = np.zeros(n_u)
    # more than the whole band carries in one TTI (every subchannel at the highest rate)
    tti_bytes = 2.0 * n_c * max(1.0, rate_ext.max())
    tx_bits = np.zeros(n_u)
    n_bl = bl_channels.shape[0]
    all_full = True
    for u in range(n_u):
        if full_u[u] == 0:
            all_full = False
    for k in range(n_k):
        n_glob = k_global + k
        # 1. arrivals (drop-tail in packets)
        for u in range(n_u):
            pkt = pkt_u[u]
            if full_u[u] == 1:
                # full buffer: the queue is always full (buffer_packets packets, 500 if unlimited)
                backlog[u] = (buf_pk if buf_pk > 0 else 500) * pkt
            else:
                a = arrivals[k, u]
                if a > 0:
                    if buf_pk > 0:
                        queued = math.ceil(backlog[u] / pkt - 1e-9)
                        room = buf_pk - queued
                        n_new = int(round(a / pkt))
                        if n_new > room:
                            drop = n_new - max(room, 0)
                            out_drops[k, u] += drop
                            a = a - drop * pkt
                    if a > 0:
                        backlog[u] += a
            out_active[k, u] = 1 if backlog[u] > 1e-9 else 0
            remaining[u] = backlog[u] - inflight[u]
            if full_u[u] == 1:
                remaining[u] = 1e300
            # retransmissions whose feedback has arrived (ready TTIs never decrease in a queue)
            n_ready = 0
            while n_ready < pend_count[u] and pend_ready[u, (pend_head[u] + n_ready) % ring] <= n_glob:
                n_ready += 1
            pend_avail[u] = n_ready
            tx_bits[u] = 0.0
            if n_proc > 0:
                # the free process of lowest index carries this TTI's new data; none: no new data
                cur_proc[u] = -1
                for p in range(n_proc):
                    if proc_state[u, 1, p] == 0 and proc_state[u, 0, p] <= n_glob:
                        cur_proc[u] = p
                        break
                if cur_proc[u] < 0:
                    remaining[u] = 0.0
        # 4. link adaptation state: the MCS each user uses this TTI (modes 1-3)
        if la_mode >= 1 and la_mode <= 3:
            for u in range(n_u):
                if la_blocks[u] >= la_interval:
                    avg_db = 10.0 * math.log10(la_ci_sum[u] / la_blocks[u] + 1e-30)
                    bler_meas = la_err[u] / la_blocks[u]
                    use_bler = la_mode == 2 or (la_mode == 3 and avg_db < hybrid_db)
                    if use_bler:
                        if bler_meas > bler_up and user_mcs[u] > 0:
                            user_mcs[u] -= 1
                        elif bler_meas < bler_down and user_mcs[u] < n_m - 1:
                            user_mcs[u] += 1
                    else:
                        j = int((avg_db - lut_lo) / lut_step)
                        j = min(max(j, 0), best_lut.shape[0] - 1)
                        user_mcs[u] = best_lut[j]
                    la_blocks[u] = 0
                    la_ci_sum[u] = 0.0
                    la_err[u] = 0
        # backlog-driven scheduler: channels per user, re-assigned every bl_interval TTIs
        if sched == 4 and (n_glob % bl_interval == 0):
            total = 0
            for u in range(n_u):
                b = backlog[u]
                if b > greedy_bytes or (ip[IP_GREEDY_CHANNELS] > 0 and assigned_ch[u] >= ip[IP_GREEDY_CHANNELS]):
                    greedy_cnt[u] += bl_interval
                elif greedy_cnt[u] > 0:
                    greedy_cnt[u] -= min(bl_interval, greedy_cnt[u])
                want = 0
                if b > 1e-9:
                    want = bl_channels[n_bl - 1]
                    for j in range(n_bl):
                        if bl_channels[j] * ch_bytes * drain_tti >= b:
                            want = bl_channels[j]
                            break
                # channel cap from the wideband reported SINR
                s = 0.0
                for c in range(n_c):
                    s += sinr_rep[k, u, c]
                s_db = 10.0 * math.log10(s / n_c + 1e-30)
                cap = 0
                for j in range(n_bl):
                    if s_db >= bl_thr_db[j]:
                        cap = bl_channels[j]
                if want > cap:
                    want = cap
                if greedy_limit > 0 and greedy_cnt[u] > greedy_limit and want > 0:
                    # greedy users are throttled: one rate step per excess interval, to the lowest
                    steps = (greedy_cnt[u] - greedy_limit) // bl_interval + 1
                    idx = 0
                    for j in range(n_bl):
                        if bl_channels[j] == want:
                            idx = j
                    idx = max(idx - steps, 0)
                    want = bl_channels[idx]
                assigned_ch[u] = want
                total += want
            # sector capacity: trim the largest allocations by one step until they fit
            while total > ip[IP_SECTOR_CHANNELS]:
                big = 0
                for u in range(n_u):
                    if assigned_ch[u] > assigned_ch[big]:
                        big = u
                idx = 0
                for j in range(n_bl):
                    if bl_channels[j] == assigned_ch[big]:
                        idx = j
                new = bl_channels[idx - 1] if idx > 0 else 0
                total -= assigned_ch[big] - new
                assigned_ch[big] = new
        n_pend = 0
        for u in range(n_u):
            n_pend += pend_avail[u]
        # scheduler weight: metric = rate * weight
        if sched != 4:
            for u in range(n_u):
                if sched == 2 or (sched == 3 and lam == 1.0):
                    weight[u] = 1.0 / avg_thr[u] if avg_thr[u] > 0 else 1e150
                elif sched == 3 and lam != 0.0:
                    weight[u] = 1.0 / avg_thr[u] ** lam if avg_thr[u] > 0 else 1e150
                else:
                    weight[u] = 1.0
        # Static TTIs: every user either holds more than the whole band can carry in one TTI
        # or has nothing to send (no data, no retransmission): who is eligible cannot change
        # within the TTI, so the best user per subchannel can be found for all subchannels at
        # once (the key pipeline below), and a new block only ever goes to that user.
        static = FAST_PATH and sched >= 1 and sched <= 3
        if static:
            for u in range(n_u):
                if remaining[u] < tti_bytes and (remaining[u] > 1e-9 or pend_avail[u] > 0):
                    static = False
        fast = static and la_mode == 0 and thr_sorted and n_m >= 1
        if fast:
            # best user per subchannel from float32 keys (8 subchannels per vector
            # instruction), exact where the key of the best user is unique, the exact
            # float64 comparison where two users tie in float32
            for c in range(n_c):
                best_key[0, c] = 0.0
                best_code[0, c] = -2
            cur = 0
            for i in range(n_u):
                u = perm[k, i]
                if remaining[u] <= 1e-9:
                    continue
                _level_keys(rate_ext, weight[u], keys)
                row = sinr_rep[k, u]
                if n_m <= 9:
                    _key_update9(row, thr9, keys, best_key[cur], best_code[cur], best_key[1 - cur],
                                 best_code[1 - cur], np.int32(2 * u))
                else:
                    _key_row(row, thr_lin, keys, n_m - 1, key_row, key_tmp)
                    _best_update(row, thr_lin[n_m - 1], keys[n_m], key_row, best_key[cur],
                                 best_code[cur], best_key[1 - cur], best_code[1 - cur], np.int32(2 * u))
                cur = 1 - cur
            # a float32 tie needs the exact comparison only if two different metrics of
            # this TTI share a key; when no two do (e.g. MaxCIR: equal weights, the ties
            # are real), the earliest user in the TTI's order, kept above, is the answer
            settle = False
            for c in range(n_c):
                if best_code[cur, c] & 1:
                    settle = not _keys_injective(rate_ext, weight, remaining)
                    break
            codes = best_code[cur]
            for c in range(n_c):
                pre_best[c] = codes[c] >> 1
            if settle:
                for c in range(n_c):
                    if codes[c] & 1:
                        best = -1
                        bestm = 0.0
                        for i in range(n_u):
                            u = perm[k, i]
                            if remaining[u] <= 1e-9:
                                continue
                            metric = rate_ext[_mcs_of(sinr_rep[k, u, c], thr_lin) + 1] * weight[u]
                            if metric > bestm:
                                bestm = metric
                                best = u
                        pre_best[c] = best
            # the chosen user's reported SINR (user 0's where nobody: its MCS is not used)
            rep_k = sinr_rep[k]
            for c in range(n_c):
                x_best[c] = rep_k[max(pre_best[c], 0), c]
            _count_row(x_best, thr_lin, m_best, m_tmp)
        elif sched != 4:
            # MCS per user and subchannel from the reported SINR (compare with linear thresholds)
            for u in range(n_u):
                if la_mode == 0:
                    _count_row(sinr_rep[k, u], thr_lin, m_uc[u], m_tmp)
                elif la_mode == 5:
                    # reported SINR x 10^(o_u/10) >= threshold  <=>  SINR >= threshold / 10^(o_u/10)
                    g = 10.0 ** (olla_db[u] / 10.0)
                    for j in range(n_m):
                        thr_olla[j] = thr_lin[j] / g
                    _count_row(sinr_rep[k, u], thr_olla, m_uc[u], m_tmp)
                elif la_mode == 4:
                    for c in range(n_c):
                        j = int((10.0 * math.log10(sinr_real[k, u, c] + 1e-30) - lut_lo) / lut_step)
                        j = min(max(j, 0), best_lut.shape[0] - 1)
                        m_uc[u, c] = best_lut[j]
                else:
                    for c in range(n_c):
                        m_uc[u, c] = user_mcs[u]
        # metric schedulers: the best user per subchannel among the users with data at the
        # start of the TTI, for all subchannels at once (users outer, subchannels inner);
        # ties go to the user earliest in the TTI's random order. Eligibility only shrinks
        # within a TTI, so where that user still has data it is the sequential choice too.
        if sched >= 1 and sched <= 3 and not fast:
            for c in range(n_c):
                pre_who[0, c] = -1
                pre_metric[0, c] = 0.0
            # users in the TTI's random order and a strict '>': ties stay with the earlier user;
            # rate_ext[0] = 0 (no MCS) never beats the initial 0
            cur = 0
            for i in range(n_u):
                u = perm[k, i]
                if remaining[u] <= 1e-9 and pend_avail[u] == 0:
                    continue
                # metric of each MCS for this user (the same product as rate * weight)
                for j in range(n_m + 1):
                    wrate[j] = rate_ext[j] * weight[u]
                _metric_gather(m_uc[u], wrate, metric_row)
                _metric_update(metric_row, pre_metric[cur], pre_who[cur], pre_metric[1 - cur],
                               pre_who[1 - cur], u)
                cur = 1 - cur
            for c in range(n_c):
                pre_best[c] = pre_who[cur, c]
        # 2. + 3. schedule every subchannel (or, for the backlog scheduler, every user's
        # code-channel bundle) and transmit
        rr = misc[0]
        pb = -1
        n_slots = n_u if sched == 4 else n_c
        c_tail = n_slots
        for c in range(n_slots):
            if static and n_pend == 0:
                c_tail = c      # the rest goes the direct way (below)
                break
            best = -1
            if sched == 4:
                uu = perm[k, c]
                if assigned_ch[uu] > 0:
                    best = uu
            elif sched == 5:
                best = forced[k, c]
                if best >= 0 and remaining[best] <= 1e-9 and pend_avail[best] == 0:
                    best = -1
            else:
                if harq_priority == 1 and n_pend > 0:
                    bests = -1.0
                    for i in range(n_u):
                        u = perm[k, i]
                        if pend_avail[u] > 0 and sinr_rep[k, u, c] > bests:
                            bests = sinr_rep[k, u, c]
                            best = u
                if best < 0:
                    if sched == 0:
                        for i in range(n_u):
                            u = rr + i
                            if u >= n_u:
                                u -= n_u
                            if (remaining[u] > 1e-9 or pend_avail[u] > 0) and m_uc[u, c] >= 0:
                                best = u
                                break
                        if best >= 0:
                            rr = best + 1
                            if rr >= n_u:
                                rr = 0
                    else:
                        pb = pre_best[c]
                        if pb >= 0 and (remaining[pb] > 1e-9 or pend_avail[pb] > 0):
                            best = pb
                        elif pb < 0:
                            pb = -2  # nobody with data could use this subchannel
                    if best < 0 and sched != 0 and pb != -2:
                        bestm = -1.0
                        for i in range(n_u):
                            u = perm[k, i]
                            m = _mcs_of(sinr_rep[k, u, c], thr_lin) if fast else m_uc[u, c]
                            if m < 0:
                                continue
                            metric = bytes_per_mcs[m] * weight[u]
                            if metric > bestm and (remaining[u] > 1e-9 or pend_avail[u] > 0):
                                bestm = metric
                                best = u
            if best < 0:
                continue
            u = best
            if sched == 4:
                s_real = 0.0
                s_rep = 0.0
                for cc in range(n_c):
                    s_real += sinr_real[k, u, cc]
                    s_rep += sinr_rep[k, u, cc]
                s_real /= n_c
                s_rep /= n_c
                out_nsub[k, u] += assigned_ch[u]
                if remaining[u] <= 1e-9 and pend_avail[u] == 0:
                    continue
            else:
                s_real = sinr_real[k, u, c]
                s_rep = sinr_rep[k, u, c]
                out_nsub[k, u] += 1
            if pend_avail[u] > 0:
                # retransmission of the oldest pending block, combined with its earlier
                # transmissions (chase, or incremental redundancy: nr_harq.combine)
                h = pend_head[u]
                nbytes = pend_bytes[u, h]
                m = pend_mcs[u, h]
                acc = _combine(pend_acc[u, h], s_real, inv_gap)
                ntx = pend_tx[u, h] + 1
                proc = pend_proc[u, h]
                pend_head[u] = (h + 1) % ring
                pend_count[u] -= 1
                pend_avail[u] -= 1
                n_pend -= 1
                inflight[u] -= nbytes
                out_retx[k, u] += 1
                if n_proc > 0:
                    proc_state[u, 1, proc] -= 1
                    proc_state[u, 0, proc] = n_glob + harq_wait
            else:
                if sched == 4:
                    m = 0
                else:
                    if fast:   # only the best user's MCS was looked up
                        m = m_best[c] if u == pre_best[c] else _mcs_of(sinr_rep[k, u, c], thr_lin)
                    else:
                        m = m_uc[u, c]
                    if m < 0:
                        if sched == 5:
                            m = 0  # a user's scheduler chose it: most robust scheme
                        else:
                            continue
                nbytes = bytes_per_mcs[m]
                if sched == 4:
                    nbytes = assigned_ch[u] * ch_bytes
                if nbytes > remaining[u]:
                    nbytes = remaining[u]
                if nbytes <= 0:
                    continue
                remaining[u] -= nbytes
                acc = s_real
                ntx = 1
                proc = cur_proc[u]
                if n_proc > 0:
                    proc_state[u, 0, proc] = n_glob + harq_wait
            out_mcs[k, u] += m + 1
            out_tx[k, u] += nbytes
            out_blocks[k, u] += 1
            tx_bits[u] += nbytes * 8.0
            # BLER_m(acc) = 1 / (1 + (acc / s50_m)**beta) > u  <=>  acc < s50_m * z(u)
            failed = acc < s50_lin[m] * z_err[k, c]
            if la_mode >= 1 and la_mode <= 3:
                la_ci_sum[u] += s_rep
                la_blocks[u] += 1
                if failed:
                    la_err[u] += 1
            elif la_mode == 5 and ntx == 1:
                olla_new[u] += 1.0
                if failed:
                    olla_nack[u] += 1.0
            if not failed:
                out_served[k, u] += nbytes
                if full_u[u] == 0:
                    backlog[u] -= nbytes
                    if backlog[u] < 1e-9:
                        backlog[u] = 0.0
            elif ntx < max_tx and pend_count[u] < ring:
                t = (pend_head[u] + pend_count[u]) % ring
                pend_bytes[u, t] = nbytes
                pend_mcs[u, t] = m
                pend_acc[u, t] = acc
                pend_tx[u, t] = ntx
                pend_ready[u, t] = n_glob + harq_wait
                pend_proc[u, t] = proc
                if n_proc > 0:
                    proc_state[u, 1, proc] += 1
                pend_count[u] += 1
                inflight[u] += nbytes
            else:
                out_gaveup[k, u] += 1
        misc[0] = rr
        if c_tail < n_slots:
            # Static TTI and no retransmission pending any more (from the start, or once the
            # general loop above has sent them all): HARQ priority cannot apply, nobody runs
            # out of data, so every remaining subchannel's block goes to its best user, new.
            # Per-user sums in local arrays, added in subchannel order as in the general loop.
            # From the start of the TTI with out_tx[k] = 0, tx_bits = 8 * d_tx exactly
            # (scaling by 8 commutes with rounding). ``remaining`` is not read again this TTI.
            exact8 = c_tail == 0
            for u in range(n_u):
                if out_tx[k, u] != 0.0:
                    exact8 = False
            for u in range(n_u):
                d_nsub[u] = 0
                d_mcs[u] = out_mcs[k, u]
                d_tx[u] = out_tx[k, u]
                d_bits[u] = tx_bits[u]
                d_served[u] = out_served[k, u]
            if not fast:
                for c in range(c_tail, n_c):
                    m_best[c] = m_uc[max(pre_best[c], 0), c]
            real_k = sinr_real[k]
            z_k = z_err[k]
            for c in range(c_tail, n_c):
                u = pre_best[c]
                if u < 0:
                    continue
                m = m_best[c]
                nbytes = bytes_per_mcs[m]       # > 0: the metric was > 0
                acc = real_k[u, c]
                d_nsub[u] += 1
                d_mcs[u] += m + 1
                d_tx[u] += nbytes
                if n_proc > 0:
                    proc_state[u, 0, cur_proc[u]] = n_glob + harq_wait
                if not exact8:
                    d_bits[u] += nbytes * 8.0
                failed = acc < s50_lin[m] * z_k[c]
                if la_mode >= 1 and la_mode <= 3:
                    la_ci_sum[u] += sinr_rep[k, u, c]
                    la_blocks[u] += 1
                    if failed:
                        la_err[u] += 1
                elif la_mode == 5:
                    olla_new[u] += 1.0
                    if failed:
                        olla_nack[u] += 1.0
                if not failed:
                    d_served[u] += nbytes
                    if not all_full and full_u[u] == 0:
                        backlog[u] -= nbytes
                        if backlog[u] < 1e-9:
                            backlog[u] = 0.0
                elif 1 < max_tx and pend_count[u] < ring:
                    t = (pend_head[u] + pend_count[u]) % ring
                    pend_bytes[u, t] = nbytes
                    pend_mcs[u, t] = m
                    pend_acc[u, t] = acc
                    pend_tx[u, t] = 1
                    pend_ready[u, t] = n_glob + harq_wait
                    pend_proc[u, t] = cur_proc[u]
                    if n_proc > 0:
                        proc_state[u, 1, cur_proc[u]] += 1
                    pend_count[u] += 1
                    inflight[u] += nbytes
                else:
                    out_gaveup[k, u] += 1
            for u in range(n_u):
                out_nsub[k, u] += d_nsub[u]
                out_blocks[k, u] += d_nsub[u]
                out_mcs[k, u] = d_mcs[u]
                out_tx[k, u] = d_tx[u]
                tx_bits[u] = 8.0 * d_tx[u] if exact8 else d_bits[u]
                out_served[k, u] = d_served[u]
        # OLLA: one HARQ feedback per user and TTI (its transport block), the share of its new
        # blocks that failed
        if la_mode == 5:
            for u in range(n_u):
                if olla_new[u] > 0:
                    f = olla_nack[u] / olla_new[u]
                    o = olla_db[u] - olla_step * f + olla_up * (1.0 - f)
                    olla_db[u] = min(max(o, -olla_max), olla_max)
                    olla_new[u] = 0.0
                    olla_nack[u] = 0.0
        # PF / lambda average throughput (bits per TTI)
        if pf_window > 0:
            a = 1.0 / min(n_glob + 1, pf_window)
        else:
            a = pf_a
        for u in range(n_u):
            avg_thr[u] = (1.0 - a) * avg_thr[u] + a * tx_bits[u]
            out_backlog[k, u] = backlog[u]
        # read one value per cache line of the next TTI's SINRs (independent loads), so
        # that memory fetches them now rather than when the next TTI waits for them
        if k + 1 < n_k:
            j = 0
            for u in range(n_u):
                for c in range(0, n_c, 16):
                    touch[j] = sinr_rep[k + 1, u, c] + sinr_real[k + 1, u, c]
                    j += 1


def _apply_live_backlog(seen, backlog, inflight):
    """A live cell's queues stand in for the simulator's: ``backlog[u] = seen[u]`` (bytes
    queued at the decision, blocks awaiting a HARQ retransmission included), and a queue
    that dropped bytes already sent (drop-head) cannot owe more than it holds:
    ``inflight[u] = min(inflight[u], seen[u])``."""
    for u in range(seen.shape[0]):
        backlog[u] = seen[u]
        if inflight[u] > seen[u]:
            inflight[u] = seen[u]


#: The arrays of the live cell's compiled step (:func:`live_step_address`), in the order
#: of :func:`run_chunk`'s arguments, then the live backlogs: ``(name, dtype, ndim, per_tti)``.
#: ``per_tti``: a chunk's array (TTIs first) of which the step takes row ``i``. ``lut`` holds
#: run_chunk's ``lut_lo`` and ``lut_step``; the outputs follow :data:`airlink.sim.step.OUTPUTS`.
LIVE_STEP_ARRAYS = (
    ("rep", np.float32, 3, True), ("real", np.float32, 3, True), ("arrivals", np.float64, 2, True),
    ("u_err", np.float64, 2, True), ("perm", np.int64, 2, True), ("forced", np.int64, 2, False),
    ("thr_lin", np.float32, 1, False), ("bytes_per_mcs", np.float64, 1, False), ("s50_lin", np.float64, 1, False),
    ("best_lut", np.int64, 1, False), ("lut", np.float64, 1, False), ("ip", np.int64, 1, False),
    ("fp", np.float64, 1, False), ("backlog", np.float64, 1, False), ("inflight", np.float64, 1, False),
    ("avg_thr", np.float64, 1, False), ("pend_bytes", np.float64, 2, False), ("pend_mcs", np.int64, 2, False),
    ("pend_acc", np.float64, 2, False), ("pend_tx", np.int64, 2, False), ("pend_head", np.int64, 1, False),
    ("pend_count", np.int64, 1, False), ("misc", np.int64, 1, False), ("user_mcs", np.int64, 1, False),
    ("la_ci_sum", np.float64, 1, False), ("la_err", np.int64, 1, False), ("la_blocks", np.int64, 1, False),
    ("assigned_ch", np.int64, 1, False), ("greedy_cnt", np.int64, 1, False), ("full_u", np.int64, 1, False),
    ("pkt_u", np.float64, 1, False), ("olla_db", np.float64, 1, False), ("pend_ready", np.int64, 2, False),
    ("pend_proc", np.int64, 2, False), ("proc_state", np.int64, 3, False), ("bl_thr_db", np.float64, 1, False),
    ("bl_channels", np.int64, 1, False),
    ("out_served", np.float64, 2, True), ("out_tx", np.float64, 2, True), ("out_nsub", np.int64, 2, True),
    ("out_mcs", np.float64, 2, True), ("out_retx", np.int64, 2, True), ("out_backlog", np.float64, 2, True),
    ("out_drops", np.int64, 2, True), ("out_blocks", np.int64, 2, True), ("out_active", np.int64, 2, True),
    ("out_gaveup", np.int64, 2, True),
    ("seen", np.float64, 2, True))


def live_step_block(arrays) -> np.ndarray:
    """The argument block of the compiled live step: int64 ``(address, d0, d1, d2)`` per
    array of :data:`LIVE_STEP_ARRAYS` (given in that order, checked: dtype, dimensions,
    C order). The arrays must outlive every call that uses the block."""
    if len(arrays) != len(LIVE_STEP_ARRAYS):
        raise ValueError(f"the live step takes {len(LIVE_STEP_ARRAYS)} arrays, got {len(arrays)}")
    block = np.zeros(4 * len(arrays), np.int64)
    for j, ((name, dtype, ndim, _per_tti), a) in enumerate(zip(LIVE_STEP_ARRAYS, arrays)):
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
            raise ValueError(f"live step array {name}: need a C-ordered {ndim}-d {np.dtype(dtype)} array")
        block[4 * j] = a.ctypes.data
        block[4 * j + 1:4 * j + 1 + ndim] = a.shape
    return block


run_chunk = _run_chunk
schedule_rates = _schedule_rates
apply_live_backlog = _apply_live_backlog


def live_step_address():
    """The address of the live cell's compiled step, a C function
    ``void step(const int64_t *block, int64_t i, int64_t k)`` (None without numba).

    It runs TTI ``k`` (global index) from row ``i`` of the chunk arrays of ``block``
    (:func:`live_step_block`): :func:`apply_live_backlog` with row ``i`` of ``seen``, then
    :func:`run_chunk` for that one TTI, writing row ``i`` of the outputs - the simulator's
    step itself, compiled once more as a C-callable function (a numba ``cfunc``) that the
    cell's C loop (replay/_cellpath.c) calls without the GIL. Compiled (or loaded from the
    cache) on the first call.
    """
    if not COMPILED:
        return None
    from .kernel_live import live_step
    return live_step.address


_NUMBA_WANTED = env_flag("AIRLINK_NUMBA", True)     # a bad value is an error, not "off"
try:  # pragma: no cover - depends on the environment
    if not _NUMBA_WANTED:
        raise ImportError("numba disabled by AIRLINK_NUMBA=0")
    import numba as _numba
    _jit = _numba.njit(cache=True, nogil=True)
    # the helpers first: _run_chunk resolves them as module globals when it is compiled
    _mcs_of = _jit(_mcs_of)
    _thr_below = _jit(_thr_below)
    _thr_at = _jit(_thr_at)
    _count_row = _jit(_count_row)
    _key_of = _jit(_key_of)
    _level_keys = _jit(_level_keys)
    _select8 = _jit(_select8)
    _keys_injective = _jit(_keys_injective)
    _key_row = _jit(_key_row)
    _best_update = _jit(_best_update)
    _key_update9 = _jit(_key_update9)
    _rate_update = _jit(_rate_update)
    _metric_gather = _jit(_metric_gather)
    _metric_update = _jit(_metric_update)
    schedule_rates = _jit(_schedule_rates)
    _combine = _jit(_combine)
    run_chunk = _jit(_run_chunk)
    apply_live_backlog = _jit(_apply_live_backlog)
    from . import nr_harq as _nr_harq
    from .compiled_cache import depend_on as _depend_on
    #: the files the compiled kernel is built from (run_chunk carries nr_harq's combine)
    KERNEL_SOURCES = (os.path.abspath(__file__), os.path.abspath(_nr_harq.__file__))
    for _d in (run_chunk, schedule_rates, apply_live_backlog):
        _depend_on(_d, KERNEL_SOURCES)
    COMPILED = True
except Exception:  # numba missing or broken: plain Python, same results
    run_chunk = _run_chunk
    schedule_rates = _schedule_rates
    apply_live_backlog = _apply_live_backlog
    COMPILED = False
