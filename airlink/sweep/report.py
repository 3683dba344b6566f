"""``airlink sweep report``: tables and figures across a campaign's grid, one HTML page.

For a metric (a numeric column of ``campaign.parquet``) the finished runs are grouped by
the swept keys other than the seed key; per group the page gives n, the mean, the sample
standard deviation s and the 95 % confidence interval of the mean,
``mean +- t(0.975, n - 1) * s / sqrt(n)`` (Student's t; no interval when n = 1), and draws
the means against one key (``x``) with one line per value of the others (``by``), the
intervals as error bars. The page is self-contained like a run's report page (figures are
base64 PNGs, no scripts, no external URLs).
"""
from __future__ import annotations

import datetime as _dt
import html
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.sweep.campaign import STORE, read_campaign
from airlink.traces import AirlinkError

REPORT_NAME = "report.html"
PREFERRED_METRICS = ("app1.goodput_bps", "summary.aggregate_throughput_mbps", "summary.jain_index",
                     "link.downlink.drops_packets")


def confidence_table(frame: pd.DataFrame, metric: str, *, by: list, level: float = 0.95) -> pd.DataFrame:
    """Per group of ``by`` over the rows with status ``done``: ``n``, ``mean``, ``std`` (ddof 1),
    ``ci_low``, ``ci_high`` (mean -+ t((1 + level) / 2, n - 1) * std / sqrt(n); NaN for n < 2),
    ``min``, ``max`` of ``metric``."""
    from scipy import stats
    if metric not in frame:
        raise AirlinkError(f"campaign has no column {metric!r}")
    done = frame[frame["status"] == "done"]
    values = pd.to_numeric(done[metric], errors="coerce")
    keys = [k for k in by if k in done]
    rows = []
    groups = values.groupby([done[k].astype(str) for k in keys], sort=False) if keys else [((), values)]
    for label, v in groups:
        v = v.dropna().to_numpy(np.float64)
        label = label if isinstance(label, tuple) else (label,)
        n = len(v)
        mean = float(v.mean()) if n else math.nan
        std = float(v.std(ddof=1)) if n > 1 else math.nan
        half = float(stats.t.ppf((1 + level) / 2, n - 1) * std / math.sqrt(n)) if n > 1 else math.nan
        rows.append({**dict(zip(keys, label)), "n": n, "mean": mean, "std": std, "ci_low": mean - half,
                     "ci_high": mean + half, "min": float(v.min()) if n else math.nan,
                     "max": float(v.max()) if n else math.nan})
    return pd.DataFrame(rows, columns=keys + ["n", "mean", "std", "ci_low", "ci_high", "min", "max"])


def _order(values, original: pd.Series) -> list:
    """Group labels (text) in the order of their original values (numbers by value)."""
    firsts = {}
    for v in original:
        firsts.setdefault(str(v), v)
    try:
        return sorted(values, key=lambda s: float(firsts.get(s, s)))
    except (TypeError, ValueError):
        seen = list(dict.fromkeys(str(v) for v in original))
        return sorted(values, key=lambda s: seen.index(s) if s in seen else len(seen))


def short_labels(labels) -> dict:
    """Long labels (a whole list given as a grid value, as JSON text) shown by what differs:
    the common prefix and suffix of all of them cut off (``...packets=40"}}]`` -> ``40``)."""
    labels = [str(v) for v in labels]
    if len(labels) < 2 or max(map(len, labels)) <= 24:
        return {v: v for v in labels}
    head = len(os.path.commonprefix(labels))
    tail = len(os.path.commonprefix([v[::-1] for v in labels]))
    first = labels[0]
    while head and first[head - 1].isalnum():  # never cut through a number or a word
        head -= 1
    while tail and first[len(first) - tail].isalnum():
        tail -= 1
    cut = {v: v[head:len(v) - tail] for v in labels}
    return cut if all(cut.values()) and len(set(cut.values())) == len(labels) else {v: v for v in labels}


def fig_grid(table: pd.DataFrame, frame: pd.DataFrame, metric: str, *, x: str, by: list):
    """Means of ``metric`` against ``x``, one line per combination of ``by``, 95 % intervals as
    error bars."""
    from airlink.report import headless_pyplot
    plt = headless_pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    xs = _order(table[x].unique(), frame[x])
    pos = {v: i for i, v in enumerate(xs)}
    names = {k: short_labels(table[k].unique()) for k in by}
    groups = table.groupby(by, sort=False) if by else [((), table)]
    joined = "-" if pd.api.types.is_numeric_dtype(frame[x]) else "none"  # no line between categories
    for label, g in groups:
        g = g.assign(_p=g[x].map(pos)).sort_values("_p")
        err = np.vstack([g["mean"] - g["ci_low"], g["ci_high"] - g["mean"]])
        err = np.where(np.isfinite(err), err, 0.0)
        name = ", ".join(f"{k.rsplit('.', 1)[-1]}={names[k].get(str(v), v)}"
                         for k, v in zip(by, label if isinstance(label, tuple) else (label,)))
        ax.errorbar(g["_p"], g["mean"], yerr=err, marker="o", capsize=3, linestyle=joined, label=name or metric)
    ax.set_xticks(range(len(xs)), [short_labels(xs)[v] for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if by:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _choose(frame: pd.DataFrame, meta: dict, *, metric, x, by) -> tuple:
    sweep = meta.get("sweep") or {}
    rep = sweep.get("report") or {}
    seed_key = sweep.get("seed_key") if (sweep.get("seeds") or sweep.get("repeat")) else None
    keys = [k for k in (list((sweep.get("grid") or {}).keys())) if k in frame]
    metric = metric or rep.get("metric")
    if metric is None:
        metric = next((m for m in PREFERRED_METRICS if m in frame and frame[m].notna().any()), None)
    if metric is None:
        numeric = [c for c in frame.columns if c not in keys and pd.api.types.is_float_dtype(frame[c])
                   and c != "seconds" and frame[c].notna().any()]
        metric = numeric[0] if numeric else None
    if metric is not None and metric not in frame:
        raise AirlinkError(f"campaign has no column {metric!r} (numeric columns: "
                           f"{', '.join(c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c]))})")
    x = x or rep.get("x")
    group = [k for k in keys if k != seed_key]
    if x is None and group:
        varying = [k for k in group if frame[k].nunique() > 1] or group
        numeric = [k for k in varying if pd.api.types.is_numeric_dtype(frame[k])]
        x = (numeric or varying)[0]
    if x is not None and x not in group:
        raise AirlinkError(f"x: {x!r} is not a swept key (swept: {', '.join(group) or 'none'})")
    if by is None:
        by = rep.get("by")
    by_keys = [by] if isinstance(by, str) else list(by or [k for k in group if k != x])
    for k in by_keys:
        if k not in group:
            raise AirlinkError(f"by: {k!r} is not a swept key (swept: {', '.join(group) or 'none'})")
    return metric, x, by_keys, group, seed_key


def build_sweep_report(campaign, *, metric: str | None = None, x: str | None = None,
                       by=None) -> str:
    """The sweep report page for a campaign folder as an HTML string (see module docstring).
    ``metric``, ``x``, ``by``: None = the sweep file's ``report:`` section, else chosen from
    the table (goodput of the first application, else the cell's aggregate throughput)."""
    from airlink.report import PAGE_CSS, figure_html, missing_note, pre_block, html_section, html_table
    campaign = Path(campaign)
    frame, meta = read_campaign(campaign)
    sweep = meta.get("sweep") or {}
    metric, x, by_keys, group, seed_key = _choose(frame, meta, metric=metric, x=x, by=by)
    counts = frame["status"].value_counts().to_dict()
    parts = []
    if metric is None:
        parts.append(html_section("Across the grid", missing_note("no numeric result in the campaign table"), "grid"))
    else:
        table = confidence_table(frame, metric, by=group)
        body = [f"<p>{html.escape(metric)} over {counts.get('done', 0)} finished run(s); mean and 95 % "
                f"confidence interval over {'seeds (' + html.escape(seed_key) + ')' if seed_key else 'repeats'}"
                f" per grid cell (Student's t).</p>"]
        if x is not None and table["n"].sum() > 0:
            body.append(figure_html(fig_grid(table, frame, metric, x=x, by=by_keys),
                                     f"{metric} against {x}" + (f", one line per {', '.join(by_keys)}" if by_keys else "")))
        body.append(html_table(table.to_dict("records"), list(table.columns)))
        parts.append(html_section("Across the grid", "".join(body), "grid"))
    shown = ["point_id", "status"] + [k for k in frame.columns if k in (group + ([seed_key] if seed_key else []))]
    shown += [metric] if metric else []
    shown += ["seconds", "host"]
    runs = html_table(frame[shown].to_dict("records"), shown)
    for r in frame["point_id"]:
        if (campaign / "runs" / r / "report.html").is_file():
            esc = html.escape(r)
            runs = runs.replace(f"<td>{esc}</td>", f'<td><a href="runs/{esc}/report.html">{esc}</a></td>', 1)
    parts.append(html_section("Runs", runs, "runs"))
    failed = frame[frame["status"] != "done"]
    if len(failed):
        parts.append(html_section("Failed and pending runs", html_table(failed[["point_id", "status", "error"]].to_dict("records"),
                                                                ["point_id", "status", "error"]), "failures"))
    import json
    prov = {k: meta.get(k) for k in ("versions", "experiment_sha256", "inputs")}
    parts.append(html_section("Provenance", pre_block(json.dumps({"sweep": sweep, **prov}, indent=1, default=str)),
                          "provenance"))
    name = sweep.get("name") or campaign.resolve().name
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    status = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (("grid", "across the grid"), ("runs", "runs"),
                                                         ("provenance", "provenance")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>airlink sweep: {html.escape(str(name))}</title><style>{PAGE_CSS}</style></head><body>"
            f"<h1>airlink sweep: {html.escape(str(name))}</h1>"
            f'<p class="sub">{html.escape(str(campaign / STORE))} &middot; {len(frame)} points: '
            f"{html.escape(status)} &middot; made {now}</p><nav>{nav}</nav>" + "".join(parts) + "</body></html>\n")


def write_sweep_report(campaign, *, output=None, metric: str | None = None, x: str | None = None,
                       by=None) -> Path:
    """Write the sweep report page (default ``CAMPAIGN/report.html``) and return its path."""
    page = build_sweep_report(campaign, metric=metric, x=x, by=by)
    out = Path(output) if output else Path(campaign) / REPORT_NAME
    from airlink.core.atomic import write_bytes
    write_bytes(out, page.encode("utf-8"))
    return out


__all__ = ["confidence_table", "build_sweep_report", "write_sweep_report", "fig_grid", "short_labels"]
