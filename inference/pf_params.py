"""PF scheduler parameters from an all-user log: the averaging time constant and the fairness exponent.

A generalized proportional-fair scheduler (the EV-DO study) gives a resource to
``argmax_u R_u(t) / T_u(t)**lambda``, where ``R_u(t)`` is user u's instantaneous rate and
``T_u`` the exponentially averaged bits sent to it per slot,
``T_u(t) = (1 - a) T_u(t-1) + a S_u(t-1)``, time constant ``tau = 1/a`` slots. From a log of
every user's allocations per slot (NR-Scope's DCIs, the simulator's MAC log) :func:`estimate_pf`
estimates ``tau`` and ``lambda`` with a conditional-logit model of who gets the PRBs:

    P(a PRB of slot t goes to u) = exp(beta x_ut) / sum_{v in C_t} exp(beta x_vt),
    x_ut(tau, lambda) = log R_ut - lambda log T_ut(tau)

``C_t`` are the users contending in slot t (with data), ``beta > 0`` says how sharply the
metric decides (an exact argmax with a channel known per PRB is ``beta -> inf``; the log shows
only each user's wideband channel, so per-PRB fading is the logit's noise). With ``n_ut``
the PRBs user u got in slot t, the log-likelihood is

    l(tau, lambda, beta) = sum_t sum_{u in C_t} n_ut [beta x_ut - log sum_{v in C_t} exp(beta x_vt)]

``beta > 0`` and ``lambda >= 0`` are fitted for each candidate ``tau`` (:data:`TAU_GRID`, slots)
as the conditional logit's coefficients on ``log R`` and ``-log T`` (Newton's method; the
log-likelihood is concave), ``lambda`` being their ratio; a third covariate, the log of the
user's PRB share in the previous slot ``log((n_u,t-1 + 1) / (n_t-1 + 1))``, absorbs the
persistence of frequency-selective fading that a wideband channel cannot show (without it a
``tau`` of a few slots fits best, standing in for that persistence). The estimate is the
``tau`` of the largest log-likelihood and its ``lambda``. **Confidence interval**: a bootstrap
over :data:`N_BLOCKS` contiguous time blocks (:data:`N_BOOTSTRAP` resamples): each resample
re-weights the blocks' log-likelihood contributions and takes the best ``tau``, and moves the
coefficients one Newton step from the full-sample fit with the re-weighted score and
Hessian (a one-step bootstrap) for its ``lambda``; the 2.5 and 97.5 percentiles are the 95 %
interval (``tau``'s widened halfway to the neighbouring grid points).

**Known bias** (measured on ``nr-tmobile-10mhz`` runs, 10 s, per-PRB PF with Ped-B fading):
the estimated ``lambda`` is 0.77-0.83 of the true one (1 -> 0.83, 2 -> 1.60, 0.5 -> 0.46),
whether or not HARQ, CSI delay and OLLA are on, so its interval (about +-0.02 wide) does not
cover the truth; it orders and tells apart exponents 0.5, 1 and 2. A long ``tau`` is
underestimated (1000 slots -> 631, interval [447, 891], in 10 s of log). The logit stands in for an argmax over
PRBs whose per-PRB rates the log does not give, and how far it is off depends on the channel:
on an argmax-per-PRB cell with independent Rayleigh PRBs and the wideband mean SINR logged,
lambda 1 and 2 come out as 1.08 and 2.15. The intervals hold the sampling error only, not
this model error.

What the log gives and what is assumed:

- ``R_ut``: the Shannon efficiency ``log2(1 + SINR)`` of a channel column logged for every
  user in every slot (the simulator's ``sinr_reported_db``); else the user's bytes per PRB in
  its last new transmission, held until the next (a decoder sees a channel only when served).
- ``S_ut``: bytes sent in the slot (``tx_bytes``, HARQ retransmissions included, as the
  simulator's PF counts them; else ``tbs_bytes`` or ``served_bytes``).
- ``T`` starts as a running mean (``a_k = max(1/tau, 1/k)`` for the k-th slot of the log,
  Kakuda & Tsuru's window), so a log that starts mid-run needs no warm-up; a factor common to
  every user's ``T`` cancels in the logit.
- ``C_t``: users with ``backlog_bytes > 0`` when the log has that column, else users served
  within :data:`ACTIVE_SLOTS` slots either side (a guess: a decoder never sees the backlog).
  Users served in the slot are always contenders. Rows a decoded log marks
  ``retransmission`` are left out of ``n_ut`` (a real scheduler serves retransmissions
  first, whatever the metric). airlink's MAC logs have no such column and their
  ``harq_retransmissions`` count in ``n_ut``: the simulator and the cell give each PRB to the
  metric's best user, who then sends a pending retransmission on it (``sim/kernel.py``), so
  those PRBs were won by the metric (leaving them out moves ``tau`` 100 -> 79 slots on
  ``nr-tmobile-10mhz``, where 62 % of served rows mix new and retransmitted blocks).

**Cannot tell**: the parameters are seen only where users competed, i.e. in slots whose PRBs
were nearly all given (:data:`~airlink.inference.cell_logs.FULL_SLOT` of the cell) while two
or more users contended. With fewer than :data:`MIN_CONTENDED_SLOTS` such slots, or fewer than
:data:`MIN_CONTENDED_SHARE` of the log's slots, the answer is
"cannot tell" with the numbers (the shared NR-Scope cells: under 4 % PRB utilisation, no full
slots). A ``tau`` interval covering the whole grid means the log does not resolve it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy.signal import lfilter

from airlink.core import bounds as B
from airlink.core.errors import AirlinkError, SchemaError, frame_source

from .cell_logs import FULL_SLOT, check_cell_prbs, refuse_one_device

#: candidate averaging time constants, slots (1/a): ten per decade, 3.2 to 10000
TAU_GRID = tuple(float(v) for v in np.round(10.0 ** (np.arange(5, 41) / 10), 1))
#: contiguous time blocks of the bootstrap, and its resamples
N_BLOCKS = 40
N_BOOTSTRAP = 400
#: fewest contended slots (full, two or more contenders) for an estimate
MIN_CONTENDED_SLOTS = 500
#: ... and at least this share of the log's slots
MIN_CONTENDED_SHARE = 0.05
#: without a backlog column, a user contends in the slots within this many of one where it was served
ACTIVE_SLOTS = 50
#: channel columns logged for every user in every slot, in the order looked for
CHANNEL_COLUMNS = ("sinr_reported_db", "sinr_db", "snr_db")
#: bytes sent per slot (the PF average's input), in the order looked for
SENT_COLUMNS = ("tx_bytes", "tbs_bytes", "served_bytes")
#: PRBs per slot, in the order looked for
ALLOC_COLUMNS = ("prbs", "subchannels")


@dataclass
class PFEstimate:
    """Result of :func:`estimate_pf`. ``tau_slots``/``tau_s`` and ``lam`` are the estimate (None
    when ``cannot_tell``), ``*_ci`` their 95 % bootstrap intervals; ``profile`` is the profile
    log-likelihood over (tau, lambda) (a frame: rows tau, columns lambda)."""
    tau_slots: float | None
    lam: float | None
    tau_ci: tuple | None
    lam_ci: tuple | None
    tti_s: float
    beta: float | None
    cannot_tell: str | None
    evidence: dict
    profile: pd.DataFrame | None = None
    notes: list = field(default_factory=list)

    @property
    def tau_s(self):
        return None if self.tau_slots is None else self.tau_slots * self.tti_s

    @property
    def tau_resolved(self) -> bool:
        return self.tau_ci is not None and not (self.tau_ci[0] <= TAU_GRID[0] and self.tau_ci[1] >= TAU_GRID[-1])

    @property
    def lam_resolved(self) -> bool:
        return self.lam_ci is not None and np.isfinite(self.lam_ci[1])

    def to_dict(self) -> dict:
        return {"tau_slots": self.tau_slots, "tau_s": self.tau_s, "a": None if not self.tau_slots
                else 1.0 / self.tau_slots, "lambda": self.lam,
                "tau_ci_slots": None if self.tau_ci is None else list(self.tau_ci),
                "tau_ci_s": None if self.tau_ci is None else [v * self.tti_s for v in self.tau_ci],
                "lambda_ci": None if self.lam_ci is None else list(self.lam_ci),
                "tau_resolved": self.tau_resolved, "lambda_resolved": self.lam_resolved,
                "beta": self.beta, "tti_s": self.tti_s, "cannot_tell": self.cannot_tell,
                "evidence": self.evidence, "notes": list(self.notes)}


@dataclass
class SlotArrays:
    """The log on its slot grid, slots x users: PRBs decided by the metric ``n``, rate proxy
    ``log_r`` (NaN: unknown), bytes sent ``sent``, contenders ``contend`` (None without
    ``dense``); ``evidence``: the contention counts, taken from the rows."""
    users: list
    n: np.ndarray | None
    log_r: np.ndarray | None
    sent: np.ndarray | None
    contend: np.ndarray | None
    cell_prbs: int
    tti_s: Fraction
    notes: list
    evidence: dict


def _pick(frame, given, names, what, src):
    if given:
        if given not in frame.columns:
            raise SchemaError(f"{src}: no {what} column {given!r}")
        return given
    for c in names:
        if c in frame.columns:
            return c
    return None


def _tti(frame: pd.DataFrame, tti, src) -> Fraction:
    if tti is not None:
        return Fraction(tti)
    if frame.attrs.get("tti_s"):
        return Fraction(frame.attrs["tti_s"])
    t = np.unique(frame["time"].array.asi8)
    if t.size < 2:
        raise AirlinkError(f"{src}: the slot length is unknown (fewer than two distinct times)")
    return Fraction(int(np.median(np.diff(t))), 10**9)


def _contention(slot, col, new_prbs, served, backlog, n_slots: int, cell_prbs: int) -> dict:
    """How often users competed, from the rows: slots whose new-transmission PRBs reach
    ``FULL_SLOT`` of the cell while two or more users contend (``backlog > 0`` or served in the
    slot when the backlog is known, else served within ``ACTIVE_SLOTS`` slots)."""
    per_slot = np.bincount(slot, weights=new_prbs, minlength=n_slots)
    full = np.flatnonzero(per_slot >= FULL_SLOT * cell_prbs)
    if backlog is not None:
        busy = (backlog > 0) | served
        pairs = np.unique(slot[busy] * (col.max() + 1) + col[busy])
        contenders = np.bincount(pairs // (col.max() + 1), minlength=n_slots)[full]
    else:
        order = np.argsort(slot[served], kind="stable")
        ss, uu = slot[served][order], col[served][order]
        lo = np.searchsorted(ss, full - ACTIVE_SLOTS, "left")
        hi = np.searchsorted(ss, full + ACTIVE_SLOTS, "right")
        contenders = np.array([np.unique(uu[a:b]).size for a, b in zip(lo, hi)], dtype=np.int64)
    return {"slots": n_slots, "cell_prbs": int(cell_prbs),
            "prb_utilization": float(per_slot.sum() / (cell_prbs * n_slots)),
            "full_slots": float(full.size / n_slots), "contended_slots": int((contenders >= 2).sum())}


def slot_arrays(frame: pd.DataFrame, *, tti=None, cell_prbs: int | None = None, channel: str | None = None,
                source: str | None = None, dense: bool = True) -> SlotArrays:
    """Put an all-user log (one row per user and slot it was logged in) on its slot grid
    (``dense``), and count from its rows how often users competed (``evidence``)."""
    src = source or frame_source(frame, "log")
    refuse_one_device(frame, src)
    for col in ("time", "user"):
        if col not in frame.columns:
            raise SchemaError(f"{src}: an all-user log needs column {col!r}")
    alloc = _pick(frame, None, ALLOC_COLUMNS, "allocation", src)
    sent_col = _pick(frame, None, SENT_COLUMNS, "sent bytes", src)
    if alloc is None or sent_col is None:
        need = "prbs or subchannels" if alloc is None else "tx_bytes, tbs_bytes or served_bytes"
        raise SchemaError(f"{src}: a PF estimate needs a column {need} "
                          f"(it has {', '.join(map(str, frame.columns[:16]))})")
    chan = _pick(frame, channel, CHANNEL_COLUMNS, "channel", src)
    tti_s = _tti(frame, tti, src)
    if frame.empty:
        raise AirlinkError(f"{src}: no allocations to analyse")
    if "slot" in frame.columns and frame.attrs.get("tti_s"):
        slot = frame["slot"].to_numpy(np.int64)
    else:
        t = frame["time"].array.asi8
        ns = tti_s * 10**9
        slot = ((t - t.min()) * ns.denominator + ns.numerator // 2) // ns.numerator
    slot = slot - slot.min()
    users = sorted(frame["user"].astype(str).unique())
    col = pd.Index(users).get_indexer(frame["user"].astype(str))
    n_slots = int(slot.max()) + 1
    shape = (n_slots, len(users))
    prbs = np.nan_to_num(frame[alloc].to_numpy(float))
    retx = frame["retransmission"].to_numpy(bool) if "retransmission" in frame.columns \
        else np.zeros(len(frame), bool)
    new_prbs = np.where(retx, 0.0, prbs)
    if cell_prbs is None:
        cell_prbs = int((frame["prb_start"] + frame["prbs"]).max()) if {"prb_start", "prbs"} <= set(frame.columns) \
            else int(np.bincount(slot, weights=new_prbs, minlength=n_slots).max())
    else:
        check_cell_prbs(frame, slot, prbs, int(cell_prbs), src)
    backlog_rows = np.nan_to_num(frame["backlog_bytes"].to_numpy(float)) if "backlog_bytes" in frame.columns \
        else None
    evidence = {**_contention(slot, col, new_prbs, prbs > 0, backlog_rows, n_slots, int(cell_prbs)),
                "users": len(users)}
    notes = [f"PRBs from {alloc!r}, bytes sent from {sent_col!r}"]
    if backlog_rows is not None:
        notes.append("contenders: users with backlog_bytes > 0")
    else:
        notes.append(f"contenders: users served within {ACTIVE_SLOTS} slots (the log has no backlog)")
    if not dense:
        return SlotArrays(users, None, None, None, None, int(cell_prbs), tti_s, notes, evidence)
    B.check_budget(n_slots * len(users), B.MAX_GRID_POINTS, f"{src}: {n_slots} slots x {len(users)} users need",
                   "grid points")
    n = np.zeros(shape)
    np.add.at(n, (slot, col), new_prbs)
    served = np.zeros(shape, bool)
    served[slot[prbs > 0], col[prbs > 0]] = True
    sent = np.zeros(shape)
    np.add.at(sent, (slot, col), np.nan_to_num(frame[sent_col].to_numpy(float)))
    if chan is not None:
        log_r = np.full(shape, np.nan)
        sinr = frame[chan].to_numpy(float)
        log_r[slot, col] = np.log(np.log2(1.0 + 10.0 ** (sinr / 10.0)))
        notes.append(f"rate R = log2(1 + SINR) of {chan!r}, every user every slot")
    else:
        per_prb = np.full(shape, np.nan)
        new = (prbs > 0) & ~retx
        per_prb[slot[new], col[new]] = frame[sent_col].to_numpy(float)[new] / prbs[new]
        log_r = np.log(pd.DataFrame(per_prb).ffill().to_numpy())
        notes.append(f"rate R = {sent_col!r} per PRB of the user's last new transmission, held")
    if backlog_rows is not None:
        backlog = np.zeros(shape)
        backlog[slot, col] = backlog_rows
        contend = (backlog > 0) | served
    else:
        k = np.ones(2 * ACTIVE_SLOTS + 1)
        near = np.stack([np.convolve(served[:, j].astype(float), k, mode="same") for j in range(shape[1])], 1)
        contend = near > 0
    contend &= np.isfinite(log_r)
    return SlotArrays(users, n, log_r, sent, contend, int(cell_prbs), tti_s, notes, evidence)


def pf_average(sent: np.ndarray, tau: float) -> np.ndarray:
    """``T`` before each slot: ``T_0 = 0``, ``T_k = (1 - a_k) T_{k-1} + a_k S_{k-1}`` with
    ``a_k = max(1/tau, 1/k)`` (a running mean until k = tau, then the EWMA of constant 1/tau).
    ``sent`` is slots x users; the result has the same shape."""
    n = sent.shape[0]
    out = np.zeros_like(sent, dtype=float)
    warm = int(min(n, np.floor(tau) + 1))              # slots k < warm take a_k = 1/k
    csum = np.cumsum(sent[:warm - 1], axis=0)
    out[1:warm] = csum / np.arange(1, warm)[:, None]
    if warm < n:
        a = 1.0 / tau
        # T_k = (1 - a) T_{k-1} + a S_{k-1} for k >= warm, from T_{warm-1}
        out[warm:] = lfilter([a], [1.0, -(1.0 - a)], sent[warm - 1:n - 1], axis=0,
                             zi=((1.0 - a) * out[warm - 1])[None, :])[0]
    return out


def _logit_terms(theta, Z, n, mask):
    """Conditional logit per slot: log-likelihood (S,), score (S, K), Hessian (S, K, K) at
    ``theta`` for features ``Z`` (S, U, K), PRB counts ``n`` (S, U), contenders ``mask``."""
    z = np.where(mask, Z @ theta, -np.inf)
    zmax = z.max(-1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(-1, keepdims=True)
    p = e / s
    nt = n.sum(-1)
    logp = np.where(mask, z - zmax - np.log(s), 0.0)
    ll = (n * logp).sum(-1)
    mz = np.einsum("su,suk->sk", p, Z)
    g = np.einsum("su,suk->sk", n, Z) - nt[:, None] * mz
    h = -nt[:, None, None] * (np.einsum("su,suk,sul->skl", p, Z, Z) - mz[:, :, None] * mz[:, None, :])
    return ll, g, h


def _fit_logit(Z, n, mask, iters: int = 50):
    """Newton's method for the conditional logit (concave); returns theta."""
    theta = np.zeros(Z.shape[-1])
    for _ in range(iters):
        _ll, g, h = _logit_terms(theta, Z, n, mask)
        step = -np.linalg.lstsq(h.sum(0), g.sum(0), rcond=None)[0]
        theta = theta + step
        if np.max(np.abs(step)) < 1e-9 * (1 + np.max(np.abs(theta))):
            break
    return theta


def estimate_pf(frame: pd.DataFrame, *, tti=None, cell_prbs: int | None = None, channel: str | None = None,
                tau_grid=TAU_GRID, n_blocks: int = N_BLOCKS, n_bootstrap: int = N_BOOTSTRAP, seed: int = 0,
                source: str | None = None) -> PFEstimate:
    """Estimate the PF averaging time constant (slots) and fairness exponent with 95 % intervals.

    ``frame``: one row per user and slot (``time``, ``user``, ``prbs`` or ``subchannels``, bytes
    sent, optionally a channel column, ``backlog_bytes``, ``retransmission``); ``tti`` the slot
    length in seconds (default ``attrs["tti_s"]`` or the median spacing of the times);
    ``cell_prbs`` the carrier's PRBs (default the highest PRB allocated, or the most PRBs
    given in one slot). See the module docstring for the model.
    """
    sa = slot_arrays(frame, tti=tti, cell_prbs=cell_prbs, channel=channel, source=source, dense=False)
    tti_s = float(sa.tti_s)
    evidence = dict(sa.evidence)
    contended, n_slots = evidence["contended_slots"], evidence["slots"]
    need = max(MIN_CONTENDED_SLOTS, int(np.ceil(MIN_CONTENDED_SHARE * n_slots)))
    if contended < need:
        why = (f"users rarely competed for PRBs: {contended} of {n_slots} slot(s) were full "
               f"(>= {FULL_SLOT:.0%} of {sa.cell_prbs} PRBs) with two or more users contending (need "
               f"{need}: {MIN_CONTENDED_SLOTS} and {MIN_CONTENDED_SHARE:.0%} of the slots); "
               f"PRBs of new transmissions {evidence['prb_utilization'] * 100:.1f} % of the cell, slots full "
               f"of them {evidence['full_slots'] * 100:.2f} %")
        return PFEstimate(None, None, None, None, tti_s, None, why, evidence, notes=sa.notes)
    sa = slot_arrays(frame, tti=tti, cell_prbs=cell_prbs, channel=channel, source=source)
    several = sa.contend.sum(1) >= 2
    # slots the metric decided: two or more contenders, PRBs given, after the first slot (whose
    # T is unknown); a contender never served yet (T = 0) has top priority, outside the model
    t_any = pf_average(sa.sent, float(tau_grid[0]))
    keep = several & (sa.n.sum(1) > 0) & np.all(~sa.contend | (t_any > 0), axis=1)
    keep[0] = False
    idx = np.flatnonzero(keep)
    blocks = np.minimum((np.arange(idx.size) * n_blocks) // max(idx.size, 1), n_blocks - 1)
    m_k, r_k = sa.contend[keep], sa.log_r[keep]
    n_k = np.where(m_k, sa.n[keep], 0.0)          # PRBs of a user outside C_t (rate unknown) left out
    prev = np.vstack([np.zeros((1, sa.n.shape[1])), sa.n[:-1]])[keep]
    share_prev = np.log((prev + 1.0) / (prev.sum(1, keepdims=True) + 1.0))
    taus = np.asarray(tau_grid, float)
    k = 3
    ll = np.full(taus.size, -np.inf)
    thetas = np.full((taus.size, k), np.nan)
    blk_ll = np.zeros((taus.size, n_blocks))
    blk_g = np.zeros((taus.size, n_blocks, k))
    blk_h = np.zeros((taus.size, n_blocks, k, k))
    for i, tau in enumerate(taus):
        log_t = np.log(np.maximum(pf_average(sa.sent, tau)[keep], 1e-300))
        Z = np.stack([np.where(m_k, r_k, 0.0), np.where(m_k, -log_t, 0.0), np.where(m_k, share_prev, 0.0)], -1)
        theta = _fit_logit(Z, n_k, m_k)
        if not (theta[0] > 0 and theta[1] >= 0):
            continue          # the channel must raise and the past throughput lower the metric
        l_t, g_t, h_t = _logit_terms(theta, Z, n_k, m_k)
        ll[i], thetas[i] = l_t.sum(), theta
        blk_ll[i] = np.bincount(blocks, weights=l_t, minlength=n_blocks)
        for j in range(k):
            blk_g[i, :, j] = np.bincount(blocks, weights=g_t[:, j], minlength=n_blocks)
            for jj in range(k):
                blk_h[i, :, j, jj] = np.bincount(blocks, weights=h_t[:, j, jj], minlength=n_blocks)
    evidence["slots_used"] = int(idx.size)
    if not np.isfinite(ll).any():
        why = ("no averaging time constant gives a PF-like rule (the share never rose with the channel "
               "and fell with past throughput)")
        return PFEstimate(None, None, None, None, tti_s, None, why, evidence, notes=sa.notes)
    i0 = int(np.argmax(ll))
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks), size=n_bootstrap).astype(float)
    boot_ll = w @ blk_ll.T                                               # (B, tau)
    boot_ll[:, ~np.isfinite(ll)] = -np.inf
    bi = np.argmax(boot_ll, axis=1)
    bl = np.empty(n_bootstrap)
    for b in range(n_bootstrap):
        # one Newton step from the full-sample fit at the resample's tau (a one-step bootstrap)
        g = w[b] @ blk_g[bi[b]]
        h = np.tensordot(w[b], blk_h[bi[b]], axes=1)
        th = thetas[bi[b]] - np.linalg.lstsq(h, g, rcond=None)[0]
        bl[b] = max(th[1], 0.0) / th[0] if th[0] > 0 else np.nan
    bl = bl[np.isfinite(bl)]
    lo, hi = int(np.percentile(bi, 2.5, method="lower")), int(np.percentile(bi, 97.5, method="higher"))
    # the estimate is known to the grid's resolution: the interval reaches halfway (geometric)
    # to the neighbouring grid points
    tau_ci = (float(np.sqrt(taus[lo] * taus[lo - 1])) if lo > 0 else float(taus[0]),
              float(np.sqrt(taus[hi] * taus[hi + 1])) if hi + 1 < taus.size else float(taus[-1]))
    lam_ci = (float(np.percentile(bl, 2.5)), float(np.percentile(bl, 97.5))) if bl.size else None
    lam = float(thetas[i0, 1] / thetas[i0, 0])
    evidence.update({"log_likelihood": float(ll[i0]), "channel_coefficient": float(thetas[i0, 0]),
                     "throughput_coefficient": float(thetas[i0, 1]), "persistence_coefficient": float(thetas[i0, 2]),
                     "bootstrap": {"blocks": n_blocks, "resamples": n_bootstrap,
                                   "block_s": float(sa.n.shape[0] * tti_s / n_blocks)}})
    profile = pd.DataFrame({"log_likelihood": ll, "lambda": thetas[:, 1] / thetas[:, 0],
                            "beta": thetas[:, 0]}, index=pd.Index(taus, name="tau_slots"))
    return PFEstimate(float(taus[i0]), lam, tau_ci, lam_ci, tti_s, float(thetas[i0, 0]), None,
                      evidence, profile, sa.notes)
