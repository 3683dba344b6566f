"""Summaries of capacity traces and link logs, shared by ``airlink trace info`` and ``plot``.

Rates are in Mbit/s. Percentiles (median, p5, p95) are taken over windows of ``window_s``
seconds (default 1 s): per-TTI rates of a Mahimahi trace are multiples of 12 Mbit/s and
their percentiles say little. The zero-capacity fraction is over TTIs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .mmlinklog import per_ms
from .trace import Trace


def windowed_rate_mbps(trace: Trace, window_s: float = 1.0) -> np.ndarray:
    """Mean rate in Mbit/s over consecutive windows, shape (n_windows, n_users).

    The window is rounded to a whole number of TTIs (at least one); a trailing partial
    window is dropped unless it is the only one.
    """
    per = max(1, int(round(window_s / float(trace.tti))))
    n = trace.n_tti // per
    if n == 0:
        return trace.values.sum(axis=0, keepdims=True) * 8 / float(trace.duration) / 1e6
    v = trace.values[: n * per].reshape(n, per, trace.n_users).sum(axis=1)
    return v * 8 / (per * float(trace.tti)) / 1e6


def trace_summary(trace: Trace, window_s: float = 1.0) -> dict:
    """JSON-ready summary: format, TTI, duration, users, and per user mean/median/p5/p95 Mbit/s
    and the fraction of TTIs with zero capacity."""
    w = windowed_rate_mbps(trace, window_s)
    mean = trace.mean_rate_bps() / 1e6
    users = []
    for i, u in enumerate(trace.users):
        col = trace.values[:, i]
        users.append({
            "user": u,
            "mean_mbps": float(mean[i]),
            "median_mbps": float(np.median(w[:, i])),
            "p5_mbps": float(np.percentile(w[:, i], 5)),
            "p95_mbps": float(np.percentile(w[:, i], 95)),
            "zero_capacity_fraction": float(np.mean(col == 0)) if col.size else 0.0,
            "total_bytes": float(col.sum()),
        })
    return {
        "format": trace.meta.get("format", "parquet"),
        "tti_ms": trace.tti_ms,
        "tti_s": f"{trace.tti.numerator}/{trace.tti.denominator}",
        "n_tti": trace.n_tti,
        "duration_s": float(trace.duration),
        "window_s": window_s,
        "users": users,
        "source": trace.meta.get("source"),
    }


def linklog_summary(frame: pd.DataFrame) -> dict:
    """Average capacity and throughput (Mbit/s), utilisation, and queueing delay percentiles
    (ms) of a link log, as Mahimahi's ``mm-throughput-graph`` and ``mm-delay-graph`` print."""
    ev = frame["event"].astype(str)
    t = frame["time_ms"].to_numpy(np.float64)
    dur_s = max((t.max() - t.min()) / 1000.0, 1e-3) if len(t) else 1e-3
    cap = frame.loc[ev == "opportunity", "bytes"].sum()
    dep = frame.loc[ev == "departure", "bytes"].sum()
    arr = frame.loc[ev == "arrival", "bytes"].sum()
    drops = frame.loc[ev == "drop"]
    delays = frame.loc[ev == "departure", "delay_ms"].to_numpy(np.float64)
    return {
        "format": "linklog",
        "duration_s": dur_s,
        "capacity_mbps": cap * 8 / dur_s / 1e6,
        "throughput_mbps": dep * 8 / dur_s / 1e6,
        "arrivals_mbps": arr * 8 / dur_s / 1e6,
        "utilization": float(dep / cap) if cap else None,
        "delay_ms_mean": float(delays.mean()) if delays.size else None,
        "delay_ms_p95": float(np.percentile(delays, 95)) if delays.size else None,
        "drops_packets": int(drops["packets"].sum()),
        "drops_bytes": int(drops["bytes"].sum()),
        "header": frame.attrs.get("header", {}),
    }


def linklog_bins(frame: pd.DataFrame, bin_ms: float) -> pd.DataFrame:
    """Per-bin rates (Mbit/s) and mean delay of a link log, for plotting."""
    b = per_ms(frame, bin_ms)
    scale = 8 / (bin_ms / 1000.0) / 1e6
    return pd.DataFrame({"time_s": b["time_ms"] / 1000.0,
                         "capacity_mbps": b["capacity_bytes"] * scale,
                         "arrivals_mbps": b["arrivals_bytes"] * scale,
                         "departures_mbps": b["departures_bytes"] * scale,
                         "delay_ms": b["delay_ms"]})
