"""Summary metrics of a run (the content of ``summary.json``).

Per user (Kakuda & Tsuru's definitions, with ``t_m`` the run length):

- ``throughput_mbps``: bytes delivered x 8 / run length (``U_m = b_m / t_m``);
- ``selection_ratio``: the user's share of all (TTI, subchannel) allocations, ``s_m / sum s``;
- ``resource_fraction``: allocations / (TTIs x subchannels) (for one subchannel, the share
  of slots; the EV-DO study's "fraction of time slots"; for the backlog scheduler, code channels
  held / (TTIs x the sector's code channels));
- ``active_time_ratio``: fraction of TTIs with data queued (``a_m / t_m``);
- ``retransmission_ratio``: HARQ retransmissions / blocks sent (``r_m / u_m``);
- ``gap_mean_ms``, ``gap_std_ms``, ``gap_cov``, ``gap_max_ms``: gaps between consecutive
  TTIs in which the user is scheduled (start to start; the EV-DO study's scheduling jitter).

Aggregate: ``aggregate_throughput_mbps``, Jain's index ``(sum x)^2 / (n sum x^2)`` over the
user throughputs, ``fairness_gap = (max - min) / min`` (Mattar et al.; ``null`` when a user got
nothing while another did), ``resource_fraction_min_max_ratio`` (the EV-DO study's fairness axis).
The fairness metrics and gap statistics are defined once, in
:mod:`airlink.core.fairness` (degenerate cases included: all-zero throughput is Jain
1.0 and gap 0); this module only accumulates the per-user totals they are applied to.
"""
from __future__ import annotations

import numpy as np

from airlink.core.fairness import fairness_gap, gap_stats as _gap_stats, jain_index, min_max_ratio, service_gaps


def _f(x):
    x = float(x)
    return x if np.isfinite(x) else None


class SummaryAccumulator:
    """Accumulates the summary chunk by chunk, so that long runs need no per-TTI arrays.

    ``update`` takes the per-TTI arrays (n, n_users) of consecutive chunks; ``result``
    returns ``summary.json``'s content.
    """

    def __init__(self, users, tti_s: float, n_subchannels: int):
        self.users = [str(u) for u in users]
        n = len(self.users)
        self.tti_s, self.n_sub = float(tti_s), int(n_subchannels)
        self.n_tti = 0
        self.served = np.zeros(n)
        self.alloc = np.zeros(n)
        self.blocks = np.zeros(n)
        self.retx = np.zeros(n)
        self.active = np.zeros(n)
        self.drops = np.zeros(n)
        self.scheduled = np.zeros(n, dtype=np.int64)
        self.last = np.full(n, -1, dtype=np.int64)      # last scheduled TTI
        self.g_n = np.zeros(n)
        self.g_sum = np.zeros(n)
        self.g_sum2 = np.zeros(n)
        self.g_max = np.zeros(n)

    def update(self, *, served, nsub, blocks, retx, active, drops=None):
        k0 = self.n_tti
        self.n_tti += served.shape[0]
        self.served += served.sum(axis=0)
        self.alloc += nsub.sum(axis=0)
        self.blocks += blocks.sum(axis=0)
        self.retx += retx.sum(axis=0)
        self.active += active.sum(axis=0)
        if drops is not None:
            self.drops += drops.sum(axis=0)
        for i in range(len(self.users)):
            idx = np.flatnonzero(nsub[:, i] > 0) + k0
            if not len(idx):
                continue
            self.scheduled[i] += len(idx)
            if self.last[i] >= 0:
                idx_all = np.concatenate([[self.last[i]], idx])
            else:
                idx_all = idx
            g = np.diff(idx_all).astype(np.float64)
            if len(g):
                self.g_n[i] += len(g)
                self.g_sum[i] += g.sum()
                self.g_sum2[i] += (g * g).sum()
                self.g_max[i] = max(self.g_max[i], g.max())
            self.last[i] = idx[-1]

    def result(self) -> dict:
        n_tti, n_u = self.n_tti, len(self.users)
        dur = n_tti * self.tti_s
        thr = self.served * 8 / dur / 1e6 if dur > 0 else np.zeros(n_u)
        total_alloc = self.alloc.sum()
        frac = self.alloc / (n_tti * self.n_sub) if n_tti else np.zeros(n_u)
        ms = self.tti_s * 1000
        per_user = []
        for i, u in enumerate(self.users):
            b = self.blocks[i]
            row = {"user": u, "throughput_mbps": _f(thr[i]),
                   "selection_ratio": _f(self.alloc[i] / total_alloc) if total_alloc else 0.0,
                   "resource_fraction": _f(frac[i]),
                   "active_time_ratio": _f(self.active[i] / n_tti) if n_tti else 0.0,
                   "retransmission_ratio": _f(self.retx[i] / b) if b else 0.0,
                   "served_bytes": _f(self.served[i]),
                   "scheduled_ttis": int(self.scheduled[i])}
            if self.g_n[i] >= 1:
                mean = self.g_sum[i] / self.g_n[i]
                var = max(self.g_sum2[i] / self.g_n[i] - mean * mean, 0.0)
                row.update({"gap_mean_ms": _f(mean * ms), "gap_std_ms": _f(np.sqrt(var) * ms),
                            "gap_cov": _f(np.sqrt(var) / mean), "gap_max_ms": _f(self.g_max[i] * ms)})
            else:
                row.update({"gap_mean_ms": None, "gap_std_ms": None, "gap_cov": None, "gap_max_ms": None})
            row["drops_packets"] = int(self.drops[i])
            per_user.append(row)
        blocks = self.blocks.sum()
        return {
            "aggregate_throughput_mbps": _f(thr.sum()),
            "jain_index": _f(jain_index(thr)),
            "fairness_gap": _f(fairness_gap(thr)),
            "resource_fraction_min_max_ratio": _f(min_max_ratio(frac)),
            "retransmission_ratio": _f(self.retx.sum() / blocks) if blocks else 0.0,
            "duration_s": _f(dur),
            "n_tti": int(n_tti),
            "users": per_user,
        }


def gap_stats(scheduled: np.ndarray, tti_ms: float) -> dict:
    """Gap statistics (ms) of the TTIs where ``scheduled`` is true
    (:func:`airlink.core.fairness.service_gaps` and ``gap_stats``)."""
    st = _gap_stats(service_gaps(np.asarray(scheduled, dtype=float), tti_s=tti_ms)[0])
    return {"gap_mean_ms": _f(st["mean"]), "gap_std_ms": _f(st["std"]), "gap_cov": _f(st["cov"]),
            "gap_max_ms": _f(st["max"])}


def summarize(*, users, tti_s: float, n_subchannels: int, served, nsub, blocks, retx, active,
              drops=None) -> dict:
    """``summary.json`` from the per-TTI arrays (n_tti, n_users) of a run."""
    acc = SummaryAccumulator(users, tti_s, n_subchannels)
    acc.update(served=served, nsub=nsub, blocks=blocks, retx=retx, active=active, drops=drops)
    return acc.result()
