"""Figures of capacity traces and link logs (PNG/SVG/PDF by the output's extension)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .stats import linklog_bins, linklog_summary, trace_summary, windowed_rate_mbps
from .trace import Trace


def headless_pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_trace(trace: Trace, out, *, bin_s: float = 0.1, title: str | None = None) -> dict:
    """Capacity over time per user (Mbit/s in bins of ``bin_s``) with each user's mean dashed.
    Returns the trace summary."""
    plt = headless_pyplot()
    rates = windowed_rate_mbps(trace, bin_s)
    per = max(1, int(round(bin_s / float(trace.tti))))
    t = np.arange(rates.shape[0]) * per * float(trace.tti)
    summary = trace_summary(trace)
    fig, ax = plt.subplots(figsize=(10, 4), dpi=110)
    for i, u in enumerate(trace.users):
        line, = ax.step(t, rates[:, i], where="post", lw=0.9, label=f"user {u}")
        ax.axhline(summary["users"][i]["mean_mbps"], color=line.get_color(), ls="--", lw=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"capacity (Mbit/s, {bin_s * 1000:g} ms bins)")
    ax.set_title(title or f"{Path(str(trace.meta.get('source', 'trace'))).name} - TTI {trace.tti_ms:g} ms")
    ax.set_xlim(0, max(float(trace.duration), 1e-3))
    ax.set_ylim(bottom=0)
    if trace.n_users <= 12:
        ax.legend(loc="upper right", fontsize="small", ncol=min(4, trace.n_users))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, out)
    plt.close(fig)
    return summary


def plot_linklog(frame, out, *, bin_ms: float = 500.0, title: str | None = None) -> dict:
    """Mahimahi-style graphs of a link log: capacity (shaded), arrivals and departures per bin
    on top; per-packet queueing delay below. Returns the log summary (average capacity,
    throughput, utilisation, 95th-percentile delay)."""
    plt = headless_pyplot()
    b = linklog_bins(frame, bin_ms)
    s = linklog_summary(frame)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), dpi=110, sharex=True)
    ax1.fill_between(b["time_s"], b["capacity_mbps"], step="post", alpha=0.25, color="tab:blue",
                     label=f"capacity (avg {s['capacity_mbps']:.2f} Mbit/s)")
    ax1.step(b["time_s"], b["arrivals_mbps"], where="post", lw=0.8, color="tab:orange",
             label=f"arrivals (avg {s['arrivals_mbps']:.2f})")
    ax1.step(b["time_s"], b["departures_mbps"], where="post", lw=1.0, color="tab:green",
             label=f"throughput (avg {s['throughput_mbps']:.2f})")
    ax1.set_ylabel(f"Mbit/s ({bin_ms:g} ms bins)")
    util = s["utilization"]
    ax1.set_title(title or f"{s['header'].get('title', 'link log')}  utilisation "
                  f"{(util * 100 if util is not None else float('nan')):.1f} %")
    ax1.legend(loc="upper right", fontsize="small")
    ax1.grid(alpha=0.3)
    ev = frame["event"].astype(str)
    dep = frame[ev == "departure"]
    t0 = frame["time_ms"].min() if len(frame) else 0
    ax2.plot((dep["time_ms"] - t0) / 1000.0, dep["delay_ms"], ",", color="tab:red")
    if s["delay_ms_p95"] is not None:
        ax2.axhline(s["delay_ms_p95"], ls="--", color="k", lw=0.8,
                    label=f"95th percentile {s['delay_ms_p95']:.0f} ms")
        ax2.legend(loc="upper right", fontsize="small")
    ax2.set_ylabel("queueing delay (ms)")
    ax2.set_xlabel("time (s)")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, out)
    plt.close(fig)
    return s


def _save(fig, out) -> None:
    """Save a figure atomically, in the format its file name asks for (png, pdf, svg)."""
    from airlink.core.atomic import atomic_path
    out = Path(out)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format=out.suffix.lstrip(".").lower() or "png")
