"""Summary metrics of a run (the content of ``summary.json``).

Per user (seed 000's definitions, with ``t_m`` the run length):

- ``throughput_mbps``: bytes delivered x 8 / run length (``U_m = b_m / t_m``);
- ``selection_ratio``: the user's share of all (TTI, subchannel) allocations, ``s_m / sum s``;
- ``resource_fraction``: allocations / (TTIs x subchannels) (for one subchannel, the share
  of slots; seed 001's "fraction of time slots"; for the backlog scheduler, code channels
  held / (TTIs x the sector's code channels));
- ``active_time_ratio``: fraction of TTIs with data queued (``a_m / t_m``);
- ``retransmission_ratio``: HARQ retransmissions / blocks sent (``r_m / u_m``);
- ``gap_mean_ms``, ``gap_std_ms``, ``gap_cov``, ``gap_max_ms``: gaps between consecutive
  TTIs in which the user is scheduled (start to start; seed 001's scheduling jitter).

Aggregate: ``aggregate_throughput_mbps``, Jain's index ``(sum x)^2 / (n sum x^2)`` over the
user throughputs, ``fairness_gap = (max - min) / min`` (seed 003; ``null`` when a user got
nothing), ``resource_fraction_min_max_ratio`` (seed 001's fairness axis).
"""
from __future__ import annotations

import numpy as np


def _f(x):
    x = float(x)
    return x if np.isfinite(x) else None


def gap_stats(scheduled: np.ndarray, tti_ms: float) -> dict:
    """Gap statistics (ms) of the TTIs where ``scheduled`` is true."""
    idx = np.flatnonzero(scheduled)
    if len(idx) < 2:
        return {"gap_mean_ms": None, "gap_std_ms": None, "gap_cov": None, "gap_max_ms": None}
    g = np.diff(idx) * tti_ms
    mean, std = g.mean(), g.std()
    return {"gap_mean_ms": _f(mean), "gap_std_ms": _f(std), "gap_cov": _f(std / mean),
            "gap_max_ms": _f(g.max())}


def jain_index(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    s2 = (x ** 2).sum()
    return float(x.sum() ** 2 / (len(x) * s2)) if s2 > 0 else 1.0


def summarize(*, users, tti_s: float, n_subchannels: int, served, nsub, blocks, retx, active,
              drops=None) -> dict:
    """``summary.json`` from the per-TTI arrays (n_tti, n_users) of a run."""
    n_tti, n_u = served.shape
    dur = n_tti * tti_s
    thr = served.sum(axis=0) * 8 / dur / 1e6 if dur > 0 else np.zeros(n_u)
    alloc = nsub.sum(axis=0).astype(np.float64)
    total_alloc = alloc.sum()
    frac = alloc / (n_tti * n_subchannels) if n_tti else np.zeros(n_u)
    per_user = []
    for i, u in enumerate(users):
        b = blocks[:, i].sum()
        row = {"user": str(u), "throughput_mbps": _f(thr[i]),
               "selection_ratio": _f(alloc[i] / total_alloc) if total_alloc else 0.0,
               "resource_fraction": _f(frac[i]),
               "active_time_ratio": _f(active[:, i].mean()) if n_tti else 0.0,
               "retransmission_ratio": _f(retx[:, i].sum() / b) if b else 0.0,
               "served_bytes": _f(served[:, i].sum()),
               "scheduled_ttis": int((nsub[:, i] > 0).sum())}
        row.update(gap_stats(nsub[:, i] > 0, tti_s * 1000))
        if drops is not None:
            row["drops_packets"] = int(drops[:, i].sum())
        per_user.append(row)
    fmin, fmax = (frac.min(), frac.max()) if n_u else (0.0, 0.0)
    tmin, tmax = (thr.min(), thr.max()) if n_u else (0.0, 0.0)
    return {
        "aggregate_throughput_mbps": _f(thr.sum()),
        "jain_index": jain_index(thr),
        "fairness_gap": _f((tmax - tmin) / tmin) if tmin > 0 else None,
        "resource_fraction_min_max_ratio": _f(fmin / fmax) if fmax > 0 else None,
        "retransmission_ratio": _f(retx.sum() / blocks.sum()) if blocks.sum() else 0.0,
        "duration_s": _f(dur),
        "n_tti": int(n_tti),
        "users": per_user,
    }
