"""The report page: one self-contained ``report.html`` from whatever a run folder holds.

``write_report(outdir)`` looks at the artifacts in ``outdir`` (written by ``airlink run``,
``airlink simulate``, ``airlink collect``, ``airlink infer`` or by hand) and writes
``outdir/report.html``: a static page with every figure embedded as a base64 PNG, no
scripts and no external URLs, so it can be mailed or archived as one file.

Each section renders when its inputs exist and otherwise says plainly which file it
needed. Sections and their inputs:

==========================  ==============================================================
run parameters              ``experiment.yaml``, ``config.yaml``, ``versions.json``, ``run.json``
summary                     ``summary.json`` (simulator), ``flows.parquet`` (collectors)
TCP time-sequence graph     the packets frame and the TCP events (retransmissions) of the
                            collect stage (``packets.parquet``, ``events.parquet``)
goodput vs capacity         ``tcp.parquet`` and the link's per-TTI log or ``capacity.parquet``
RTT and packets in flight   ``tcp.parquet``
queue backlog               a per-TTI link log (``link-*.parquet``), a Mahimahi link log
                            (``downlink.log``) or the simulator's ``mac.parquet``
NMI against lag             ``nmi.json`` (curves with the surrogate threshold)
factor table                ``nmi.json``
fairness and jitter         ``summary.json`` users, ``mac.parquet``, per-flow goodput
==========================  ==============================================================

Files are found by kind (:func:`airlink.rundir.find`: the run's ``manifest.json``, else the
declared name patterns, so the folder of a single ``airlink collect`` or ``airlink
simulate`` makes a partial report too). The report only reads and draws: it never decodes
a capture or re-runs an analysis; a section whose artifact is missing says so.

The ``nmi.json`` layout (written by the infer stage, :mod:`airlink.experiment.infer`)::

    {"analyses": [{"target": "assigned_rate_bps", "source": "mac.parquet",
                   "resolution_s": 1.0,
                   "factors": [{"factor": "backlog_bytes", "peak_nmi": 0.57, "lag_s": 1.0,
                                "p_value": 0.01, "threshold": 0.12, "ci": [0.5, 0.6],
                                "curve": {"lag_s": [...], "nmi": [...]}}]}]}
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from airlink import rundir
from airlink.traces import AirlinkError, Trace

REPORT_NAME = "report.html"


# --------------------------------------------------------------------------- artifacts
def _seconds(frame: pd.DataFrame, t0=None) -> np.ndarray:
    """Times of a frame (``time`` column or index) in seconds since ``t0`` (default: first)."""
    t = frame["time"] if "time" in frame.columns else frame.index.to_series()
    ns = pd.DatetimeIndex(t).asi8.astype(np.float64)
    base = ns.min() if t0 is None and len(ns) else (t0 or 0)
    return (ns - base) / 1e9


class Artifacts:
    """What a run folder holds, loaded lazily; each property is None when absent."""

    def __init__(self, outdir):
        self.outdir = Path(outdir)
        if not self.outdir.is_dir():
            raise AirlinkError(f"{self.outdir}: no such folder")
        self.notes: list[str] = []

    # -- discovery: by kind, as airlink.rundir declares the artifacts -------------------
    def _pick(self, kind: str) -> Path | None:
        files = rundir.find(self.outdir, kind)
        return files[0] if files else None

    def _json(self, name: str):
        p = self.outdir / name
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except Exception as exc:
            self.notes.append(f"{name}: not readable JSON ({exc})")
            return None

    def _frame(self, path: Path):
        """A Parquet frame, or None with a note when the file cannot be read."""
        try:
            return pd.read_parquet(path)
        except Exception as exc:
            self.notes.append(f"{path.name}: not readable as Parquet ({type(exc).__name__}: {exc})")
            return None

    def _text(self, name: str):
        p = self.outdir / name
        return p.read_text(errors="replace") if p.exists() else None

    # -- contents -------------------------------------------------------------------
    @cached_property
    def experiment_text(self):
        return self._text("experiment.yaml")

    @cached_property
    def config_text(self):
        return self._text("config.yaml")

    @cached_property
    def versions(self):
        return self._json("versions.json")

    @cached_property
    def run_info(self):
        return self._json("run.json")

    @cached_property
    def summary(self):
        return self._json("summary.json")

    @cached_property
    def nmi(self):
        return self._json("nmi.json")

    @cached_property
    def capacity_path(self):
        return self._pick("capacity")

    @cached_property
    def capacity(self) -> Trace | None:
        p = self.capacity_path
        if p is None:
            return None
        try:
            return Trace.read_parquet(p)
        except Exception as exc:
            self.notes.append(f"{p.name}: not readable as a capacity trace ({exc})")
            return None

    @cached_property
    def replayed_user(self) -> str | None:
        info = self.run_info or {}
        user = info.get("replayed_user")
        if user is None and self.capacity is not None:
            user = self.capacity.meta.get("selected_user") or self.capacity.users[0]
        return None if user is None else str(user)

    @cached_property
    def mac(self) -> pd.DataFrame | None:
        """The simulator's MAC log (many users)."""
        p = self._pick("mac")
        return self._frame(p) if p else None

    @cached_property
    def link_tti(self) -> dict:
        """Per-TTI link logs of the replay shells, by direction (``link-downlink.parquet``)."""
        out = {}
        for p in rundir.find(self.outdir, "link-tti"):
            f = self._frame(p)
            if f is not None:
                out[p.stem[len("link-"):]] = f
        return out

    @cached_property
    def link_logs(self) -> dict:
        """Mahimahi-format link logs (``*.log``) as per-ms frames, by file stem."""
        from airlink.traces import per_ms, read_log
        from airlink.traces.linklog import is_log_file
        out = {}
        for p in rundir.find(self.outdir, "link-log"):
            if not is_log_file(p):
                continue
            try:
                out[p.stem] = per_ms(read_log(p), 10.0)
            except Exception as exc:
                self.notes.append(f"{p.name}: not readable as a link log ({exc})")
        return out

    @cached_property
    def captures(self) -> list:
        return rundir.find(self.outdir, "capture")

    @cached_property
    def packets_path(self) -> Path | None:
        return self._pick("packets")

    @cached_property
    def packets(self) -> pd.DataFrame | None:
        """The collect stage's packets frame (the report never decodes a capture itself)."""
        p = self.packets_path
        return self._frame(p) if p is not None else None

    @cached_property
    def flows(self) -> pd.DataFrame | None:
        p = self._pick("flows")
        return self._frame(p) if p is not None else None

    @cached_property
    def tcp(self) -> pd.DataFrame | None:
        p = self._pick("tcp")
        return self._frame(p) if p is not None else None

    @cached_property
    def events(self) -> pd.DataFrame | None:
        """The collect stage's TCP events (retransmissions, dupacks, ...), by packet row."""
        p = self._pick("tcp-events")
        return self._frame(p) if p is not None else None

    def uncollected(self) -> str:
        """Why a TCP section has no input: names the captures nobody collected."""
        if self.captures:
            names = ", ".join(c.name for c in self.captures)
            return f"no packets frame; the capture(s) {names} were not collected (airlink collect writes it)"
        return "no packets frame and no capture"

    @cached_property
    def flow_labels(self) -> dict:
        """flow id -> "flow N (cc)" from the applications in run.json (matched by the
        client's address and port), else "flow N"."""
        out = {}
        apps = (self.run_info or {}).get("applications") or []
        local = {a.get("local"): a.get("cc") for a in apps if a.get("local")}
        if self.flows is None or not local:
            return out
        for _, f in self.flows.iterrows():
            for a, b in ((f.get("src"), f.get("sport")), (f.get("dst"), f.get("dport"))):
                cc = local.get(f"{a}:{b}")
                if cc:
                    out[f["flow"]] = f"flow {f['flow']} ({cc})"
        return out


# --------------------------------------------------------------------------- figures
def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _figure_html(fig, caption: str) -> str:
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = html.escape(caption)
    return (f'<figure><img class="plot" alt="{cap}" src="data:image/png;base64,{data}">'
            f"<figcaption>{cap}</figcaption></figure>")


def _missing(text: str) -> str:
    return f'<p class="missing">Not shown: {html.escape(text)}</p>'


def _table(rows: list, columns: list, *, fmt=None) -> str:
    fmt = fmt or {}

    def cell(c, v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "&ndash;"
        if c in fmt and isinstance(v, (int, float, np.number)):
            return html.escape(fmt[c].format(v))
        if isinstance(v, float):
            return html.escape(f"{v:.4g}")
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    def td(c, v):
        numeric = isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        return f'<td class="n">{cell(c, v)}</td>' if numeric else f"<td>{cell(c, v)}</td>"

    body = "".join("<tr>" + "".join(td(c, r.get(c)) for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
    plt = _pyplot()
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
    plt = _pyplot()
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
    plt = _pyplot()
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
    plt = _pyplot()
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
        users = sorted(mac["user"].unique(), key=lambda u: (len(str(u)), str(u)))[:8]
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
        source = "simulator MAC log"
    else:
        return None
    ax.set_xlabel("time (s)")
    ax.set_title(f"queue backlog ({source})")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig, {"source": source}


def fig_nmi(analysis: dict):
    plt = _pyplot()
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


def _fairness_numbers(x: np.ndarray) -> tuple:
    """(Jain's index, fairness gap (max-min)/min): airlink.inference.fairness's definitions."""
    from airlink.inference import fairness_gap, jain_index
    return float(jain_index(x)), float(fairness_gap(x))


def fig_fairness(art: Artifacts, of: str = "auto"):
    """Per-user throughput and resource fraction (simulator summary, ``of="users"``) or
    per-flow goodput (``of="flows"``; ``"auto"``: users when there are, else flows), with
    Jain's index and the fairness gap in the title."""
    plt = _pyplot()
    rows, label = [], ""
    users = (art.summary if isinstance(art.summary, dict) else {}).get("users") or []
    if users and of in ("auto", "users"):
        rows = [(str(u.get("user")), float(u.get("throughput_mbps") or 0.0),
                 u.get("resource_fraction")) for u in users]
        label = "user"
    elif of in ("auto", "flows") and art.tcp is not None and "goodput_bps" in art.tcp:
        tcp = art.tcp
        active = tcp[tcp["goodput_bps"] > 0]  # each flow's mean over the bins it was active
        g = active.groupby(["flow", "direction"], observed=True)["goodput_bps"].mean()
        g = g[g > 0.01 * g.max()] if len(g) else g
        labels = art.flow_labels
        rows = [(labels.get(f, f"flow {f}"), float(v) / 1e6, None) for (f, d), v in g.items()]
        label = "flow (mean goodput while active)"
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
    plt = _pyplot()
    source = "simulator MAC log"
    gaps = _gaps_ms(art.mac) if art.mac is not None else {}
    if not gaps:
        for direction, f in art.link_tti.items():
            gaps = _gaps_ms(f)
            source = f"per-TTI {direction} log of the replay link"
            if gaps:
                break
    if not gaps:
        return None
    fig, ax = plt.subplots(figsize=(10, 3.8))
    stats = {}
    for u in sorted(gaps, key=lambda s: (len(s), s))[:16]:
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


# --------------------------------------------------------------------------- sections
def _section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{html.escape(title)}</h2>{body}</section>'


def _render(builder, caption: str, missing: str, notes: list) -> tuple:
    """Run a figure builder; (html, stats). A failing figure becomes a plain note."""
    try:
        out = builder()
    except Exception as exc:  # a broken input must not lose the rest of the report
        notes.append(f"{caption}: could not be drawn ({type(exc).__name__}: {exc})")
        return _missing(f"{caption} could not be drawn: {exc}"), {}
    if out is None:
        return _missing(missing), {}
    fig, stats = out
    return _figure_html(fig, caption), stats


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _section_run(art: Artifacts) -> str:
    parts = []
    info = art.run_info
    if info:
        stages = info.get("stages", [])
        if stages:
            parts.append("<h3>Stages</h3>" + _table(
                [{"stage": s.get("name"), "status": s.get("status"), "seconds": s.get("seconds"),
                  "note": s.get("note", "")} for s in stages],
                ["stage", "status", "seconds", "note"], fmt={"seconds": "{:.1f}"}))
        for note in info.get("notes", []):
            parts.append(f'<p class="note">{html.escape(note)}</p>')
    if art.experiment_text:
        parts.append("<h3>Experiment file</h3>" + _pre(art.experiment_text))
    else:
        parts.append(_missing("no experiment.yaml in this folder (not made by airlink run)"))
    command = art._text("apps/command.txt")
    if command:
        parts.append("<h3>Live command line (re-run by hand)</h3>" + _pre(command))
    if art.config_text:
        parts.append("<h3>Simulator parameters (config.yaml)</h3>" + _pre(art.config_text))
    if art.versions:
        parts.append("<h3>Versions</h3>" + _table(
            [{"component": k, "version": v} for k, v in art.versions.items()], ["component", "version"]))
    else:
        parts.append(_missing("no versions.json"))
    return _section("Run parameters", "".join(parts), "parameters")


def _section_summary(art: Artifacts) -> str:
    parts = []
    s = art.summary
    if s and not ({"aggregate_throughput_mbps", "users"} & set(s if isinstance(s, dict) else ())):
        s = None  # a summary.json of another tool (e.g. airlink collect)
    if s:
        keys = [k for k in ("aggregate_throughput_mbps", "jain_index", "fairness_gap",
                            "resource_fraction_min_max_ratio") if k in s]
        if keys:
            parts.append("<h3>Cell (simulator summary.json)</h3>" +
                         _table([{k: s[k] for k in keys}], keys))
        users = s.get("users") or []
        if users:
            cols = [c for c in ("user", "throughput_mbps", "selection_ratio", "resource_fraction",
                                "active_time_ratio", "retransmission_ratio", "gap_mean_ms",
                                "gap_std_ms", "gap_cov", "gap_max_ms") if c in users[0]]
            parts.append(_table(users, cols))
    else:
        parts.append(_missing("no summary.json (the simulator stage did not run)"))
    if art.flows is not None and len(art.flows):
        f = art.flows
        cols = [c for c in ("flow", "src", "sport", "dst", "dport", "packets_fwd", "packets_rev",
                            "bytes_fwd", "bytes_rev", "retransmissions", "spurious_retransmissions",
                            "rtt_ms_median", "mss_bytes") if c in f.columns]
        parts.append("<h3>TCP flows</h3>" + _table(f[cols].head(30).to_dict("records"), cols))
    else:
        parts.append(_missing(f"TCP flow table: {art.uncollected().replace('packets', 'flows')}"))
    return _section("Summary", "".join(parts), "summary")


def _section_tcp(art: Artifacts, notes: list) -> str:
    parts = []
    if art.packets is not None and len(art.packets):
        h, st = _render(lambda: fig_time_sequence(art.packets, events=art.events),
                        f"TCP time-sequence graph ({art.packets_path.name})",
                        "the capture holds no TCP payload", notes)
        parts.append(h)
        if st:
            retx = ("retransmissions not marked: no TCP events frame" if st["retransmissions"] is None
                    else f'{st["retransmissions"]} retransmitted (as in the flow table)')
            parts.append(f'<p>{st["segments"]} data segments, {retx}, '
                         f'{st["bytes"] / 1e6:.2f} MB sequence space, flow {html.escape(st["flow"])}.</p>')
    else:
        parts.append(_missing(f"TCP time-sequence graph: {art.uncollected()}"))
    h, _ = _render(lambda: fig_goodput(art.tcp, art.capacity, art.replayed_user, art.flow_labels,
                                               art.link_tti.get("downlink")),
                   "goodput against trace capacity",
                   "goodput against capacity: neither a tcp series (tcp.parquet) nor a capacity "
                   "trace (capacity.parquet)", notes)
    parts.append(h)
    if art.tcp is not None and len(art.tcp):
        h, _ = _render(lambda: fig_rtt_inflight(art.tcp), "RTT and data in flight",
                       "RTT and in-flight: the tcp series has no rtt_ms/inflight columns", notes)
    else:
        h = _missing("RTT and packets in flight: no tcp series (tcp.parquet) and no capture to analyse")
    parts.append(h)
    return _section("TCP", "".join(parts), "tcp")


def _section_queue(art: Artifacts, notes: list) -> str:
    h, st = _render(lambda: fig_backlog(art), "queue backlog",
                    "queue backlog: no per-TTI link log (link-*.parquet), no link log (*.log) and no "
                    "mac.parquet with backlog_bytes", notes)
    if st.get("source"):
        h += f"<p>Backlog from the {html.escape(st['source'])}.</p>"
    return _section("Queue", h, "queue")


def _section_nmi(art: Artifacts, notes: list) -> str:
    nmi = art.nmi
    if isinstance(nmi, list):  # `airlink infer nmi --json > nmi.json`: one table, no curves
        nmi = {"analyses": [{"target": "(from airlink infer nmi)", "source": "nmi.json",
                             "factors": [{**f, "ci": [f.get("ci_low"), f.get("ci_high")]}
                                         for f in nmi if isinstance(f, dict) and "factor" in f]}]}
    if not isinstance(nmi, dict) or not nmi.get("analyses"):
        return _section("What drives the rate: NMI against lag",
                        _missing("no nmi.json (the inference stage did not run or found no series)"),
                        "nmi")
    parts = []
    for a in nmi["analyses"]:
        parts.append(f"<h3>Target {html.escape(str(a.get('target')))} "
                     f"({html.escape(str(a.get('source', '')))})</h3>")
        h, _ = _render(lambda a=a: fig_nmi(a), f"NMI against lag, target {a.get('target')}",
                       "no lag curves in nmi.json", notes)
        parts.append(h)
        rows = []
        for f in a.get("factors", []):
            ci = f.get("ci") or [None, None]
            thr = f.get("threshold")
            rows.append({"factor": f.get("factor"), "peak NMI": f.get("peak_nmi"),
                         "lag (s)": f.get("lag_s"), "p-value": f.get("p_value"),
                         "surrogate threshold": thr,
                         "interval": None if ci[0] is None else f"{ci[0]:.3f} .. {ci[1]:.3f}",
                         "significant": None if thr is None or f.get("peak_nmi") is None
                         else ("yes" if f["peak_nmi"] > thr else "no")})
        parts.append("<h4>Factor table</h4>" + _table(
            rows, ["factor", "peak NMI", "lag (s)", "p-value", "surrogate threshold", "interval",
                   "significant"], fmt={"peak NMI": "{:.3f}", "surrogate threshold": "{:.3f}",
                                        "p-value": "{:.3g}", "lag (s)": "{:g}"}))
        if a.get("note"):
            parts.append(f'<p class="note">{html.escape(a["note"])}</p>')
    return _section("What drives the rate: NMI against lag", "".join(parts), "nmi")


def _section_fairness(art: Artifacts, notes: list) -> str:
    parts = []
    h, _ = _render(lambda: fig_fairness(art), "fairness: throughput and resource share",
                   "fairness: no per-user summary (summary.json) and no per-flow goodput", notes)
    parts.append(h)
    has_users = bool((art.summary if isinstance(art.summary, dict) else {}).get("users"))
    if has_users and art.tcp is not None and "goodput_bps" in art.tcp:
        out = None
        try:
            out = fig_fairness(art, "flows")
        except Exception as exc:
            notes.append(f"fairness across TCP flows: could not be drawn ({exc})")
        if out is not None and out[1].get("n", 0) >= 2:
            parts.append(_figure_html(out[0], "fairness across the TCP flows"))
        elif out is not None:
            _pyplot().close(out[0])
    h, _ = _render(lambda: fig_jitter(art), "jitter: inter-service gaps",
                   "jitter: no MAC log (mac.parquet) and no per-TTI link log with served_bytes", notes)
    parts.append(h)
    return _section("Fairness and jitter", "".join(parts), "fairness")


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}
nav a{margin-right:1em}
section{border-top:1px solid #ddd;margin-top:1.5em;padding-top:.5em}
figure{margin:1em 0}img.plot{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#f4f4f4}td.n{text-align:right}
pre{background:#f8f8f8;padding:.6em;overflow:auto;font-size:.85em;max-height:30em;
white-space:pre-wrap;word-break:break-all}
.missing{color:#8a6d00;background:#fff8e0;padding:.3em .6em;border-left:3px solid #e0b000}
.note{color:#444;background:#eef4ff;padding:.3em .6em;border-left:3px solid #4a7bd0}
"""


def build_report_html(outdir, *, title: str | None = None) -> str:
    """The report page for ``outdir`` as an HTML string (see :func:`write_report`)."""
    art = Artifacts(outdir)
    notes = art.notes
    name = title
    if name is None:
        info = art.run_info or {}
        name = info.get("name") or Path(outdir).resolve().name
    body = [
        _section_run(art),
        _section_summary(art),
        _section_tcp(art, notes),
        _section_queue(art, notes),
        _section_nmi(art, notes),
        _section_fairness(art, notes),
    ]
    if notes:
        body.append(_section("Notes", "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes),
                             "notes"))
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("parameters", "parameters"), ("summary", "summary"), ("tcp", "TCP"), ("queue", "queue"),
        ("nmi", "NMI"), ("fairness", "fairness")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>airlink report: {html.escape(str(name))}</title><style>{_CSS}</style></head><body>"
            f"<h1>airlink report: {html.escape(str(name))}</h1>"
            f'<p class="sub">{html.escape(str(Path(outdir)))} &middot; made {now}</p>'
            f"<nav>{nav}</nav>" + "".join(body) + "</body></html>\n")


def write_report(outdir, *, output=None, title: str | None = None) -> Path:
    """Write ``report.html`` (or ``output``) for the run folder ``outdir`` and return its path.

    The page is self-contained (figures are base64 PNGs; no scripts, no external URLs).
    Sections whose inputs are absent say which file they needed.
    """
    outdir = Path(outdir)
    page = build_report_html(outdir, title=title)
    out = Path(output) if output else outdir / REPORT_NAME
    from airlink.rundir import write_text
    return write_text(out, page)


__all__ = ["write_report", "build_report_html", "Artifacts", "fig_time_sequence", "REPORT_NAME"]
