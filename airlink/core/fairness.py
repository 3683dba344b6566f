"""Fairness and scheduling-jitter metrics: pure numpy, shared by the simulator's summary and inference.

Formulas:

- fairness gap (Mattar et al.): ``f_gap(y_1..y_n) = (max y - min y) / min y`` (``inf`` when
  ``min y == 0 < max y``; 0 for all-equal values);
- Jain's index: ``J = (sum y)^2 / (n sum y^2)``, ``1/n .. 1`` (1.0 for all zeros);
- resource fraction of user m: ``rho_m = r_m / sum r``; the EV-DO study's fairness measure is
  the ratio ``min rho / max rho``;
- selection ratio ``s_m / sum s``, active-time ratio ``a_m / t_m`` and retransmission
  ratio ``r_m / u_m`` (Kakuda & Tsuru);
- inter-service gaps (the EV-DO study's scheduling jitter): times between consecutive services
  of one user, their mean, standard deviation, coefficient of variation (std / mean) and max.

All functions take arrays (a user axis last where there is a time axis), return Python
floats or numpy arrays, and never raise on degenerate input.
"""
from __future__ import annotations

import math

import numpy as np


def _arr(x) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    return a[~np.isnan(a)] if a.ndim == 1 else a


def jain_index(values) -> float:
    """Jain's fairness index ``(sum y)^2 / (n sum y^2)``; 1.0 when all values are zero."""
    y = _arr(values)
    if y.size == 0:
        return float("nan")
    s2 = float(np.sum(y * y))
    return 1.0 if s2 == 0 else float(np.sum(y) ** 2 / (y.size * s2))


def fairness_gap(values) -> float:
    """The fairness gap of Mattar et al. (TCP over CDMA2000 Networks), ``(max - min) / min``;
    0 when equal, ``inf`` when min is 0."""
    y = _arr(values)
    if y.size == 0:
        return float("nan")
    lo, hi = float(y.min()), float(y.max())
    if hi == lo:
        return 0.0
    return float("inf") if lo <= 0 else (hi - lo) / lo


def resource_fractions(resources) -> np.ndarray:
    """Share of the total per user, ``r_m / sum r`` (all ``1/n`` when the total is 0)."""
    r = np.asarray(resources, dtype=float)
    total = np.nansum(r)
    return np.full(r.shape, 1.0 / r.size) if total == 0 else r / total


def min_max_ratio(resources) -> float:
    """The EV-DO opportunistic-scheduling study's fairness: ``min rho / max rho`` of the
    resource fractions (1.0 = equal)."""
    rho = resource_fractions(resources)
    hi = float(np.nanmax(rho)) if rho.size else float("nan")
    return 1.0 if hi == 0 else float(np.nanmin(rho) / hi)


def selection_ratios(served) -> np.ndarray:
    """``s_m / sum s``: share of (TTI, user) selections per user from a ``(n_tti, n_users)``
    array of allocations (any value > 0 counts as selected)."""
    s = (np.nan_to_num(np.asarray(served, dtype=float)) > 0).sum(axis=0).astype(float)
    return resource_fractions(s)


def active_time_ratios(backlog) -> np.ndarray:
    """``a_m / t_m``: fraction of TTIs with data queued, from ``(n_tti, n_users)`` backlog."""
    b = np.nan_to_num(np.asarray(backlog, dtype=float))
    return (b > 0).mean(axis=0) if b.shape[0] else np.full(b.shape[1:], np.nan)


def retransmission_ratios(retransmissions, transmissions) -> np.ndarray:
    """``r_m / u_m`` per user from totals (or per-TTI arrays summed over time)."""
    r = np.asarray(retransmissions, dtype=float)
    u = np.asarray(transmissions, dtype=float)
    if r.ndim == 2:
        r, u = np.nansum(r, axis=0), np.nansum(u, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(u > 0, r / np.where(u > 0, u, 1), np.nan)


def service_gaps(served, *, tti_s: float = 1.0, times=None) -> list:
    """Inter-service gaps per user: a list (one array per user column) of the times between
    consecutive rows in which the user was served (``served > 0``).

    Rows are TTIs of ``tti_s`` each (gap = rows apart x ``tti_s``), or, with ``times`` (one
    time per row, increasing, in any unit), samples at those times (gap = difference of the
    times, in that unit), for logs whose rows are not one per TTI."""
    s = np.nan_to_num(np.asarray(served, dtype=float))
    if s.ndim == 1:
        s = s[:, None]
    if times is not None:
        t = np.asarray(times, dtype=float)
        return [np.diff(t[s[:, m] > 0]) for m in range(s.shape[1])]
    return [np.diff(np.flatnonzero(s[:, m] > 0)) * float(tti_s) for m in range(s.shape[1])]


def gap_stats(gaps) -> dict:
    """Mean, std (population), coefficient of variation (std/mean) and max of one user's gaps
    (NaN if none). The sums are exact (``math.fsum``), so equal gaps - a round robin's -
    have their own value as mean and a std and CoV of exactly 0, not rounding residue."""
    g = np.asarray(gaps, dtype=float)
    if g.size == 0:
        return dict(mean=float("nan"), std=float("nan"), cov=float("nan"), max=float("nan"), count=0)
    mean = math.fsum(g) / g.size
    std = math.sqrt(math.fsum((g - mean) ** 2) / g.size)
    return dict(mean=mean, std=std, cov=std / mean if mean > 0 else float("nan"),
                max=float(g.max()), count=int(g.size))


def fairness_summary(throughput) -> dict:
    """Fairness of per-user totals: gap, Jain's index and min/max share."""
    return dict(fairness_gap=fairness_gap(throughput), jain_index=jain_index(throughput),
                min_max_ratio=min_max_ratio(throughput))
