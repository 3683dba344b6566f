"""The report's figures: each ``fig_*`` takes artifacts and returns ``(figure, stats)`` or
None when its inputs hold nothing to draw, or ``(None, {"cannot_tell": reason})`` when they
cannot support the figure. Figures only draw what the artifacts say."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.report.artifacts import Artifacts, _seconds
from airlink.traces import Trace
from airlink.inference.frames import user_order
from airlink.traces.plot import headless_pyplot


def _data_flow(packets: pd.DataFrame):
    """(data direction mask, ack direction mask, label) of the flow that carried the most payload."""
    p = packets
    pay = p["payload_bytes"].to_numpy() if "payload_bytes" in p else np.zeros(len(p))
    key = (p["src"].astype(str) + ":" + p["sport"].astype(str) + ">" + p["dst"].astype(str) + ":"
           + p["dport"].astype(str))
    totals = pd.Series(pay, index=key.to_numpy()).groupby(level=0).sum()
    if totals.empty or totals.max() <= 0:
        return None
    best = totals.idxmax()
    src, dst = best.split(">")
    data = (key == best).to_numpy()
    rev = (key == f"{dst}>{src}").to_numpy()
    return data, rev, best


def fig_time_sequence(packets: pd.DataFrame, *, events: pd.DataFrame | None = None, max_points: int = 60000):
    """tcptrace-style time-sequence graph of the busiest flow: data segments (relative
    sequence number of each segment's end) against time, the cumulative ACK line, the
    receive-window limit (ACK + advertised window), and in red the segments the collectors'
    TCP analysis marked as retransmissions (``events`` rows ``event == "retransmission"``,
    whose ``packet`` is the row in ``packets``: the same ones the flow table counts). Without
    ``events`` no retransmissions are marked (``stats["retransmissions"]`` is None).
    Returns (fig, stats) or None."""
    plt = headless_pyplot()
    need = {"seq", "ack", "src", "dst", "sport", "dport"}
    if not need <= set(packets.columns):
        return None
    sel = _data_flow(packets)
    if sel is None:
        return None
    data_m, rev_m, label = sel
    t_all = _seconds(packets)
    d = packets[data_m]
    td = t_all[data_m]
    pay = d["payload_bytes"].to_numpy(np.int64)
    keep = pay > 0
    seq = d["seq"].to_numpy(np.int64)[keep]
    td, pay = td[keep], pay[keep]
    rows = np.flatnonzero(data_m)[keep]
    if not len(seq):
        return None
    isn = seq[0]
    rel = (seq - isn) % (1 << 32)
    # unwrap 32-bit wrap-around of long transfers
    jumps = np.diff(rel, prepend=rel[0])
    rel = rel + (1 << 32) * np.cumsum(jumps < -(1 << 31))
    end = rel + pay
    if events is not None and {"event", "packet"} <= set(events.columns):
        marked = events.loc[events["event"].astype(str) == "retransmission", "packet"].to_numpy(np.int64)
        retrans = np.isin(rows, marked)
    else:
        retrans = np.zeros(len(rel), bool)
    a = packets[rev_m]
    ta = t_all[rev_m]
    ack = ((a["ack"].to_numpy(np.int64) - isn) % (1 << 32)).astype(np.float64)
    ok = ack <= end.max() + 1  # drops the handshake's ACK numbers and anything before the ISN
    if "flags" in a.columns:
        ok &= (a["flags"].to_numpy(np.int64) & 0x10) != 0
    ack, ta = ack[ok], ta[ok]
    win = None
    if "window_bytes" in a.columns:
        win = a["window_bytes"].to_numpy(np.float64)[ok]
    step = max(1, len(rel) // max_points)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(td[::step], end[::step] / 1e6, "|", color="tab:blue", ms=4, mew=0.8,
            label="data segments (end of segment)")
    if len(ack):
        sa = max(1, len(ack) // max_points)
        ax.step(ta[::sa], ack[::sa] / 1e6, where="post", color="tab:green", lw=0.9, label="ACK")
        if win is not None and np.isfinite(win).any():
            ax.step(ta[::sa], (ack[::sa] + win[::sa]) / 1e6, where="post", color="tab:olive",
                    lw=0.7, alpha=0.8, label="receive window")
    if retrans.any():
        ax.plot(td[retrans], rel[retrans] / 1e6, "r.", ms=4, label=f"retransmissions ({retrans.sum()})")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("relative sequence number (MB)")
    ax.set_title(f"time-sequence graph: {label}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig, {"flow": label, "segments": int(len(rel)),
                 "retransmissions": int(retrans.sum()) if events is not None else None,
                 "bytes": int(end.max())}


def main_direction(tcp: pd.DataFrame):
    """The rows of the busiest data direction of a ``tcp`` frame (largest summed goodput, else
    throughput), sorted by time; None when there is none. The infer stage's ``tcp`` analysis
    and the RTT figure both use this one choice."""
    col = "goodput_bps" if "goodput_bps" in tcp else "throughput_bps"
    if col not in tcp:
        return None
    tot = tcp.groupby(["flow", "direction"], observed=True)[col].sum()
    if tot.empty:
        return None
    flow, direction = tot.idxmax()
    rows = tcp[(tcp["flow"] == flow) & (tcp["direction"] == direction)]
    return rows.sort_values("time") if "time" in rows.columns else rows.sort_index()


def fig_goodput(tcp: pd.DataFrame | None, capacity: Trace | None, user, labels: dict | None = None,
                link: pd.DataFrame | None = None):
    """Goodput of each flow's data direction (Mbit/s) against the replayed capacity trace.

    With the link's per-TTI log (``link``) the capacity drawn is what the link actually
    offered, on the same clock as the capture; otherwise the trace from its start, and the
    legend says that the two share no clock."""
    plt = headless_pyplot()
    labels = labels or {}
    fig, ax = plt.subplots(figsize=(10, 4))
    drew = False
    stats = {}
    t0 = None
    if tcp is not None and len(tcp) and ("goodput_bps" in tcp or "throughput_bps" in tcp):
        col = "goodput_bps" if "goodput_bps" in tcp else "throughput_bps"
        t0 = pd.DatetimeIndex(tcp["time"] if "time" in tcp else tcp.index).asi8.min()
        tot = tcp.groupby(["flow", "direction"], observed=True)[col].sum()
        top = tot[tot > 0.01 * tot.max()].sort_values(ascending=False).head(6)
        for (flow, direction) in top.index:
            rows = tcp[(tcp["flow"] == flow) & (tcp["direction"] == direction)]
            t = _seconds(rows, t0)
            ax.step(t, rows[col].to_numpy(np.float64) / 1e6, where="post", lw=1.2,
                    label=f"{col.split('_')[0]} {labels.get(flow, f'flow {flow}')} {direction}")
            stats[f"{flow}/{direction}"] = float(np.nanmean(rows[col].to_numpy(np.float64)) / 1e6)
        drew = bool(len(top))
    if link is not None and "capacity_bytes" in link and len(link):
        tl = _seconds(link, t0)
        b = np.floor(tl - tl.min()).astype(np.int64)
        per_s = np.bincount(b, weights=link["capacity_bytes"].to_numpy(np.float64)) * 8 / 1e6
        ts = np.arange(len(per_s)) + tl.min()
        if len(per_s) > 1:  # the last second is partial
            per_s, ts = per_s[:-1], ts[:-1]
        ax.fill_between(ts, per_s, step="post", alpha=0.25, color="tab:gray",
                        label=f"capacity offered by the link (mean {per_s.mean():.2f} Mbit/s)")
        stats["capacity_mbps"] = float(per_s.mean()) if len(per_s) else None
        drew = True
    elif capacity is not None:
        u = user if user is not None and str(user) in capacity.users else capacity.users[0]
        from airlink.traces.stats import windowed_rate_mbps
        sel = capacity.select(u)
        w = windowed_rate_mbps(sel, 1.0)[:, 0]
        t = np.arange(len(w)) * 1.0
        ax.fill_between(t, w, step="post", alpha=0.25, color="tab:gray",
                        label=f"capacity, user {u} (mean {sel.mean_rate_bps()[0] / 1e6:.2f} Mbit/s; "
                              "from the trace's start: no link log ties it to the capture's clock)")
        stats["capacity_mbps"] = float(sel.mean_rate_bps()[0] / 1e6)
        drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xlabel("time (s)")
    ax.set_ylabel("Mbit/s (capacity in 1 s bins)")
    ax.set_title("goodput against trace capacity")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig, stats


def fig_rtt_inflight(tcp: pd.DataFrame):
    plt = headless_pyplot()
    rows = main_direction(tcp)
    if rows is None or not ({"rtt_ms", "inflight_packets", "inflight_bytes"} & set(rows.columns)):
        return None
    t = _seconds(rows)
    fig, ax1 = plt.subplots(figsize=(10, 4))
    stats = {}
    if "rtt_ms" in rows:
        r = rows["rtt_ms"].to_numpy(np.float64)
        ax1.plot(t, r, color="tab:purple", lw=1.2, marker=".", label="RTT (ms)")
        stats["rtt_ms_median"] = float(np.nanmedian(r)) if np.isfinite(r).any() else None
    ax1.set_ylabel("RTT (ms)")
    ax1.set_xlabel("time (s)")
    ax2 = ax1.twinx()
    col = "inflight_packets" if "inflight_packets" in rows else "inflight_bytes"
    if col in rows:
        v = rows[col].to_numpy(np.float64)
        ax2.step(t, v, where="post", color="tab:orange", lw=1.0, label=col.replace("_", " "))
        ax2.set_ylabel(col.replace("_", " "))
        stats[f"{col}_mean"] = float(np.nanmean(v)) if np.isfinite(v).any() else None
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, loc="upper right", fontsize="small")
    ax1.set_title(f"RTT and data in flight: flow {rows['flow'].iloc[0]} {rows['direction'].iloc[0]}")
    ax1.grid(alpha=0.3)
    fig.tight_layout()
    return fig, stats


def fig_backlog(art: Artifacts):
    """Queue backlog: per-TTI link log of the replay shell first, else the Mahimahi link log
    (arrivals minus departures and drops, cumulated), else the simulator's per-user backlog."""
    plt = headless_pyplot()
    if art.link_tti:
        fig, ax = plt.subplots(figsize=(10, 4))
        for direction, f in art.link_tti.items():
            if "backlog_bytes" not in f:
                continue
            t = _seconds(f)
            ax.plot(t, f["backlog_bytes"].to_numpy(np.float64) / 1e3, lw=0.8,
                    label=f"{direction} queue backlog")
        ax.set_ylabel("backlog (kB)")
        source = "per-TTI link log of the replay shell"
    elif art.link_logs:
        fig, ax = plt.subplots(figsize=(10, 4))
        for name, b in art.link_logs.items():
            q = np.cumsum(b["arrivals_bytes"] - b["departures_bytes"] - b["drops_bytes"]).to_numpy()
            ax.plot(b["time_ms"].to_numpy() / 1e3, np.maximum(q, 0) / 1e3, lw=0.8, label=f"{name} backlog")
        ax.set_ylabel("backlog (kB, from arrivals - departures - drops)")
        source = "Mahimahi link log"
    elif art.mac is not None and "backlog_bytes" in art.mac:
        mac = art.mac
        fig, ax = plt.subplots(figsize=(10, 4))
        t0 = pd.DatetimeIndex(mac["time"] if "time" in mac else mac.index).asi8.min()
        users = sorted(mac["user"].unique(), key=user_order)[:8]
        for u in users:
            rows = mac[mac["user"] == u]
            t = _seconds(rows, t0)
            v = rows["backlog_bytes"].to_numpy(np.float64)
            if len(t) > 20000:  # average per 10 ms for the figure
                k = (t / 0.01).astype(np.int64)
                s = pd.Series(v).groupby(k).mean()
                t, v = s.index.to_numpy() * 0.01, s.to_numpy()
            ax.plot(t, v / 1e3, lw=0.8, label=f"user {u}")
        ax.set_ylabel("base-station backlog (kB)")
        source = art.mac_source
    else:
        return None
    ax.set_xlabel("time (s)")
    ax.set_title(f"queue backlog ({source})")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig, {"source": source}


def fig_nmi(analysis: dict):
    plt = headless_pyplot()
    factors = [f for f in analysis.get("factors", []) if f.get("curve")]
    if not factors:
        return None
    fig, ax = plt.subplots(figsize=(10, 4))
    for f in factors:
        c = f["curve"]
        line, = ax.plot(c["lag_s"], c["nmi"], lw=1.2, label=f"{f['factor']} (peak {f['peak_nmi']:.3f})")
        thr = f.get("threshold")
        if thr is not None and np.isfinite(thr):
            ax.axhline(thr, color=line.get_color(), ls=":", lw=1.0)
        if f.get("lag_s") is not None:
            ax.plot([f["lag_s"]], [f["peak_nmi"]], "o", color=line.get_color())
    ax.set_xlabel("lag d (s); positive = factor leads the target")
    ax.set_ylabel(f"I_N({analysis.get('target')}; factor; d)")
    ax.set_title(f"NMI against lag, target {analysis.get('target')} "
                 "(dotted: surrogate threshold)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig, {}


def _gaps_ms(mac: pd.DataFrame) -> dict:
    """Inter-service gaps (ms) per user: :func:`airlink.inference.fairness.service_gaps` on the
    times of the rows with served bytes."""
    from airlink.inference.fairness import service_gaps
    out = {}
    if "served_bytes" not in mac:
        return out
    for u, rows in mac.groupby("user", sort=False):
        t = _seconds(rows, 0) * 1e3
        order = np.argsort(t, kind="stable")
        gaps = service_gaps(rows["served_bytes"].to_numpy(np.float64)[order], times=t[order])[0]
        if len(gaps):
            out[str(u)] = gaps
    return out


def _split_tti(art: Artifacts) -> str | None:
    """Why the replay link's per-TTI gaps say nothing about a scheduler, or None: the
    replayed trace's TTIs were split for the link (``link-trace.parquet`` records
    ``resampled_from_tti_s``), so its service gaps are that split, not scheduling."""
    from fractions import Fraction

    path = Path(art.outdir) / "link-trace.parquet"
    if not path.exists():
        return None
    try:
        tr = Trace.read_parquet(path)
    except Exception:
        return None
    orig = tr.meta.get("resampled_from_tti_s")
    if not orig:
        return None
    return (f"the replayed trace's TTIs of {float(Fraction(orig)) * 1e3:g} ms were split into "
            f"{float(tr.tti) * 1e3:g} ms pieces for the link, so the gaps between served TTIs show that "
            f"split, not how a scheduler served the user")


def _flow_overlap(active: pd.DataFrame, keys) -> tuple:
    """``(rows in the span where every flow in keys was active, None)`` or ``(None, reason)``
    when the flows never overlapped in time (seconds from the capture's start)."""
    t = _seconds(active)
    spans = {}
    for k, idx in active.groupby(["flow", "direction"], observed=True).indices.items():
        if k in keys:
            spans[k] = (float(t[idx].min()), float(t[idx].max()))
    start, end = max(a for a, _ in spans.values()), min(b for _, b in spans.values())
    if start > end:
        first = min(spans.items(), key=lambda kv: kv[1][1])
        last = max(spans.items(), key=lambda kv: kv[1][0])
        return None, (f"the flows never overlapped in time: flow {first[0][0]} ended at {first[1][1]:.1f} s before "
                      f"flow {last[0][0]} began at {last[1][0]:.1f} s; Jain's index compares flows sharing "
                      f"the link at the same time")
    keep = (t >= start) & (t <= end)
    return active[keep], (start, end)


def _fairness_numbers(x: np.ndarray) -> tuple:
    """(Jain's index, fairness gap (max-min)/min): airlink.inference.fairness's definitions."""
    from airlink.inference import fairness_gap, jain_index
    return float(jain_index(x)), float(fairness_gap(x))


def fig_fairness(art: Artifacts, of: str = "auto"):
    """Per-user throughput and resource fraction (simulator summary, ``of="users"``) or
    per-flow goodput (``of="flows"``; ``"auto"``: users when there are, else flows), with
    Jain's index and the fairness gap in the title."""
    plt = headless_pyplot()
    rows, label = [], ""
    users = (art.summary if isinstance(art.summary, dict) else {}).get("users") or []
    cell = art.cell if isinstance(art.cell, dict) else {}
    if users and of in ("auto", "users"):
        rows = [(str(u.get("user")), float(u.get("throughput_mbps") or 0.0),
                 u.get("resource_fraction")) for u in users]
        label = "user"
    elif cell.get("ues") and of in ("auto", "users"):
        # a live cell: MAC throughput per UE (cell.json), resource fraction (fairness.json)
        fair = ((art.fairness or {}).get("report") or {}).get("users") or []
        frac = {str(u.get("user")): u.get("resource_fraction") for u in fair}
        rows = [(str(u["ue"]), float(u.get("mac_throughput_bps") or 0.0) / 1e6, frac.get(str(u["ue"])))
                for u in cell["ues"]]
        if any(r[2] is None for r in rows):
            rows = [(n, x, None) for n, x, _ in rows]
        label = "UE (live cell, MAC log)"
    elif of in ("auto", "flows") and art.tcp is not None and "goodput_bps" in art.tcp:
        tcp = art.tcp
        active = tcp[tcp["goodput_bps"] > 0]  # each flow's mean over the bins it was active
        g = active.groupby(["flow", "direction"], observed=True)["goodput_bps"].mean()
        g = g[g > 0.01 * g.max()] if len(g) else g
        label = "flow (mean goodput while active)"
        if len(g) >= 2:
            # flows are compared only over the time all of them were active
            both, span = _flow_overlap(active, set(g.index))
            if both is None:
                return None, {"cannot_tell": span}
            g = both.groupby(["flow", "direction"], observed=True)["goodput_bps"].mean().reindex(g.index)
            label = f"flow (mean goodput over the {span[1] - span[0]:.1f} s all were active)"
        labels = art.flow_labels
        rows = [(labels.get(f, f"flow {f}"), float(v) / 1e6, None) for (f, d), v in g.items()]
    if not rows:
        return None
    x = np.array([r[1] for r in rows])
    jain, gap = _fairness_numbers(x)
    fig, axes = plt.subplots(1, 2 if rows[0][2] is not None else 1, figsize=(10, 3.8), squeeze=False)
    ax = axes[0][0]
    names = [r[0] for r in rows]
    ax.bar(names, x, color="tab:blue")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_xlabel(label)
    ax.set_title(f"Jain index {jain:.3f}, fairness gap {gap:.3g}")
    if rows[0][2] is not None:
        ax2 = axes[0][1]
        ax2.bar(names, [r[2] or 0.0 for r in rows], color="tab:orange")
        ax2.axhline(1 / len(rows), color="k", ls=":", lw=1, label="equal share")
        ax2.set_ylabel("resource fraction")
        ax2.set_xlabel(label)
        ax2.legend(fontsize="small")
    for a in axes[0]:
        a.tick_params(axis="x", labelrotation=45 if len(rows) > 8 else 0)
        a.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig, {"jain_index": jain, "fairness_gap": gap, "n": len(rows)}


def fig_jitter(art: Artifacts):
    """Distribution (CCDF) of inter-service gaps per user from the MAC log."""
    plt = headless_pyplot()
    source = art.mac_source
    gaps = _gaps_ms(art.mac) if art.mac is not None else {}
    if not gaps:
        split = _split_tti(art)
        if split and art.link_tti:
            return None, {"cannot_tell": split}
        for direction, f in art.link_tti.items():
            gaps = _gaps_ms(f)
            source = f"per-TTI {direction} log of the replay link"
            if gaps:
                break
    if not gaps:
        return None
    fig, ax = plt.subplots(figsize=(10, 3.8))
    stats = {}
    for u in sorted(gaps, key=user_order)[:16]:
        g = np.sort(gaps[u])
        ccdf = 1.0 - np.arange(len(g)) / len(g)
        ax.step(g, ccdf, where="post", lw=0.9, label=f"user {u}")
        stats[u] = {"mean_ms": float(g.mean()), "cov": float(g.std() / g.mean()) if g.mean() else None,
                    "max_ms": float(g.max())}
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gap between TTIs in which the user is served (ms)")
    ax.set_ylabel("P(gap > x)")
    ax.set_title(f"scheduling jitter: inter-service gaps ({source})")
    ax.grid(alpha=0.3, which="both")
    if len(gaps) <= 16:
        ax.legend(loc="lower left", fontsize="x-small", ncol=4)
    fig.tight_layout()
    return fig, stats


def fig_cell(art: Artifacts, bin_s: float = 1.0):
    """A live cell over time, from its MAC log: bytes served per UE (Mbit/s per ``bin_s``)
    and the share of TTIs handled late (``late`` column) per bin."""
    mac = art.mac
    if mac is None or "served_bytes" not in mac or "late" not in mac or not len(mac):
        return None
    plt = headless_pyplot()
    t = _seconds(mac)
    k = np.floor(t / bin_s).astype(np.int64)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    served = pd.DataFrame({"bin": k, "user": mac["user"].astype(str).to_numpy(),
                           "b": mac["served_bytes"].to_numpy(np.float64)}).pivot_table(
        index="bin", columns="user", values="b", aggfunc="sum", fill_value=0.0)
    users = sorted(served.columns, key=user_order)
    for u in users[:16]:
        ax.plot(served.index.to_numpy() * bin_s, served[u].to_numpy() * 8 / bin_s / 1e6, lw=1.0,
                drawstyle="steps-post", label=f"UE {u}")
    ax.set_ylabel(f"served (Mbit/s, {bin_s:g} s bins)")
    ax.set_title(f"live cell: bytes the scheduler served per UE ({art.mac_path.name})")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small", ncol=4 if len(users) > 4 else 1)
    per_tti = pd.DataFrame({"bin": k, "time": mac["time"].to_numpy(), "late": mac["late"].astype(bool).to_numpy()})
    per_tti = per_tti.drop_duplicates("time")
    late = per_tti.groupby("bin")["late"].mean()
    ax2.bar(late.index.to_numpy() * bin_s, late.to_numpy() * 100, width=bin_s, align="edge", color="tab:red")
    ax2.set_ylabel("late TTIs (%)")
    ax2.set_xlabel("time (s)")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    return fig, {"late_ttis": int(per_tti["late"].sum()), "ttis": int(len(per_tti))}
