"""The report page: sections of HTML around the figures, one self-contained file."""
from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import math
from pathlib import Path

import numpy as np

from airlink.report.artifacts import Artifacts
from airlink.report.banners import banners
from airlink.report.figures import (fig_backlog, fig_cell, fig_fairness, fig_goodput, fig_jitter,
                                    fig_nmi, fig_rtt_inflight, fig_time_sequence)
from airlink.traces.plot import headless_pyplot

REPORT_NAME = "report.html"


def figure_html(fig, caption: str) -> str:
    plt = headless_pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    cap = html.escape(caption)
    return (f'<figure><img class="plot" alt="{cap}" src="data:image/png;base64,{data}">'
            f"<figcaption>{cap}</figcaption></figure>")


def missing_note(text: str) -> str:
    return f'<p class="missing">Not shown: {html.escape(text)}</p>'


def html_table(rows: list, columns: list, *, fmt=None) -> str:
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


def html_section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{html.escape(title)}</h2>{body}</section>'


def _render(builder, caption: str, missing: str, notes: list) -> tuple:
    """Run a figure builder; (html, stats). A failing figure becomes a plain note."""
    try:
        out = builder()
    except Exception as exc:  # a broken input must not lose the rest of the report
        notes.append(f"{caption}: could not be drawn ({type(exc).__name__}: {exc})")
        return missing_note(f"{caption} could not be drawn: {exc}"), {}
    if out is None:
        return missing_note(missing), {}
    fig, stats = out
    if fig is None:   # the builder's data cannot support the figure: say why, draw nothing
        return missing_note(f"{caption}: not drawn, cannot tell: {stats.get('cannot_tell')}"), stats
    return figure_html(fig, caption), stats


def pre_block(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def _section_run(art: Artifacts) -> str:
    from airlink.rundir import interrupted_note
    parts = []
    stopped = interrupted_note(art.outdir)
    if stopped:
        parts.append(f'<p class="note">{html.escape(stopped)}</p>')
    info = art.run_info
    if info:
        stages = info.get("stages", [])
        if stages:
            parts.append("<h3>Stages</h3>" + html_table(
                [{"stage": s.get("name"), "status": s.get("status"), "seconds": s.get("seconds"),
                  "note": s.get("note", "")} for s in stages],
                ["stage", "status", "seconds", "note"], fmt={"seconds": "{:.1f}"}))
        for note in info.get("notes", []):
            parts.append(f'<p class="note">{html.escape(note)}</p>')
    if art.experiment_text:
        parts.append("<h3>Experiment file</h3>" + pre_block(art.experiment_text))
    else:
        parts.append(missing_note("no experiment.yaml in this folder (not made by airlink run)"))
    command = art._text("apps/command.txt")
    if command:
        parts.append("<h3>Live command line (re-run by hand)</h3>" + pre_block(command))
    if art.config_text:
        parts.append("<h3>Simulator parameters (config.yaml)</h3>" + pre_block(art.config_text))
    if art.versions:
        parts.append("<h3>Versions</h3>" + html_table(
            [{"component": k, "version": v} for k, v in art.versions.items()], ["component", "version"]))
    else:
        parts.append(missing_note("no versions.json"))
    return html_section("Run parameters", "".join(parts), "parameters")


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
                         html_table([{k: s[k] for k in keys}], keys))
        users = s.get("users") or []
        if users:
            cols = [c for c in ("user", "throughput_mbps", "selection_ratio", "resource_fraction",
                                "active_time_ratio", "retransmission_ratio", "gap_mean_ms",
                                "gap_std_ms", "gap_cov", "gap_max_ms") if c in users[0]]
            parts.append(html_table(users, cols))
    else:
        parts.append(missing_note("no summary.json (a live cell run: see the live cell section)" if art.cell else
                              "no summary.json (the simulator stage did not run)"))
    if art.flows is not None and len(art.flows):
        f = art.flows
        cols = [c for c in ("flow", "src", "sport", "dst", "dport", "packets_fwd", "packets_rev",
                            "bytes_fwd", "bytes_rev", "retransmissions", "spurious_retransmissions",
                            "rtt_ms_median", "mss_bytes") if c in f.columns]
        parts.append("<h3>TCP flows</h3>" + html_table(f[cols].head(30).to_dict("records"), cols))
    else:
        parts.append(missing_note(f"TCP flow table: {art.uncollected().replace('packets', 'flows')}"))
    return html_section("Summary", "".join(parts), "summary")


def _section_cell(art: Artifacts, notes: list) -> str | None:
    """A live cell run (``cell.json``): per-UE goodput and MAC throughput, late TTIs, the MAC
    log over time and the per-UE NMI table. None when the folder holds no cell run."""
    cell = art.cell if isinstance(art.cell, dict) else None
    if cell is None and art.cell_stats is None:
        return None
    parts = []
    if cell is None:
        parts.append(missing_note("per-UE table: no cell.json (the collect stage writes it from cell-mac.parquet)"))
    else:
        rows = [{"UE": u["ue"], "applications": u.get("applications"),
                 "goodput (Mbit/s)": None if u.get("app_goodput_bps") is None else u["app_goodput_bps"] / 1e6,
                 "received (bytes)": u.get("app_bytes"), "served (bytes)": u.get("served_bytes"),
                 "MAC throughput (Mbit/s)": None if u.get("mac_throughput_bps") is None
                 else u["mac_throughput_bps"] / 1e6,
                 "queue drops (packets)": u.get("drops_packets"), "exit status": u.get("status")}
                for u in cell.get("ues", [])]
        parts.append("<h3>Per UE</h3>" + html_table(rows, list(rows[0]) if rows else ["UE"], fmt={
            "goodput (Mbit/s)": "{:.3f}", "MAC throughput (Mbit/s)": "{:.3f}", "served (bytes)": "{:.0f}",
            "received (bytes)": "{:.0f}", "queue drops (packets)": "{:.0f}"}))
        parts.append("<p>goodput and received bytes: the applications' own counts (payload); served bytes "
                     "and MAC throughput: the scheduler's grants in the MAC log (IP packets, headers "
                     "and retransmissions included).</p>")
    st = cell or art.cell_stats or {}
    if st.get("ttis"):
        frac = st.get("late_fraction")
        mac_late = st.get("late_ttis_mac")
        parts.append(
            f"<p>{st['ttis']} TTIs of {_num(st.get('tti_ms'), 'g')} ms ({html.escape(str(st.get('preset')))} preset, "
            f"{html.escape(str(st.get('scheduler')))} scheduler, seed {st.get('seed')}): "
            f"<b>{st.get('late_ttis')} late</b> ({100 * (frac or 0):.3f} %"
            + (f"; the MAC log marks {mac_late}" if mac_late is not None else "")
            + f"), the latest {(st.get('max_lateness_us') or 0) / 1e3:.2f} ms after its end; "
            f"shell CPU {st.get('cpu_per_s') or 0:.2f} s per s.</p>")
    h, _ = _render(lambda: fig_cell(art), "live cell: served bytes per UE and late TTIs",
                   f"the MAC log over time: {art.mac_lacks('served_bytes and late')}", notes)
    parts.append(h)
    rows = []
    for a in (art.nmi or {}).get("analyses", []) if isinstance(art.nmi, dict) else []:
        if a.get("source") != "mac" or a.get("user") is None:
            continue
        for f in a.get("factors", []):
            rows.append({"UE": a.get("user"), "target": a.get("target"), "factor": f.get("factor"),
                         "peak NMI": f.get("peak_nmi"), "lag (s)": f.get("lag_s"), "p-value": f.get("p_value"),
                         "surrogate threshold": f.get("threshold"),
                         "significant": None if f.get("significant") is None else
                         ("yes" if f["significant"] else "no")})
    if rows:
        parts.append("<h3>Per-UE NMI of the MAC log</h3>" + html_table(
            rows, list(rows[0]), fmt={"peak NMI": "{:.3f}", "surrogate threshold": "{:.3f}",
                                      "p-value": "{:.3g}", "lag (s)": "{:g}"}))
    else:
        parts.append(missing_note("per-UE NMI table: no per-UE MAC analysis in nmi.json"))
    return html_section("Live cell", "".join(parts), "cell")


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
        parts.append(missing_note(f"TCP time-sequence graph: {art.uncollected()}"))
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
        h = missing_note("RTT and packets in flight: no tcp series (tcp.parquet) and no capture to analyse")
    parts.append(h)
    return html_section("TCP", "".join(parts), "tcp")


def _section_queue(art: Artifacts, notes: list) -> str:
    h, st = _render(lambda: fig_backlog(art), "queue backlog",
                    "queue backlog: no per-TTI link log (link-*.parquet), no link log (*.log), and "
                    f"{art.mac_lacks('backlog_bytes')}", notes)
    if st.get("source"):
        h += f"<p>Backlog from the {html.escape(st['source'])}.</p>"
    return html_section("Queue", h, "queue")


def _section_nmi(art: Artifacts, notes: list) -> str:
    nmi = art.nmi
    if isinstance(nmi, list):  # `airlink infer nmi --json > nmi.json`: one table, no curves
        nmi = {"analyses": [{"target": "(from airlink infer nmi)", "source": "nmi.json",
                             "factors": [{**f, "ci": [f.get("ci_low"), f.get("ci_high")]}
                                         for f in nmi if isinstance(f, dict) and "factor" in f]}]}
    if not isinstance(nmi, dict) or not nmi.get("analyses"):
        return html_section("What drives the rate: NMI against lag",
                        missing_note("no nmi.json (the inference stage did not run or found no series)"),
                        "nmi")
    parts = []
    for a in nmi["analyses"]:
        who = f", user {a['user']}" if a.get("user") is not None else ""
        parts.append(f"<h3>Target {html.escape(str(a.get('target')))} "
                     f"({html.escape(str(a.get('source', '')) + who)})</h3>")
        if a.get("covers"):
            parts.append(f"<p>Covers: {html.escape(str(a['covers']))}.</p>")
        h, _ = _render(lambda a=a: fig_nmi(a), f"NMI against lag, target {a.get('target')}",
                       "no lag curves in nmi.json", notes)
        parts.append(h)
        rows = []
        for f in a.get("factors", []):
            ci = f.get("ci") or [None, None]
            thr = f.get("threshold")
            rows.append({"factor": f.get("factor"), "peak NMI": f.get("peak_nmi"),
                         "bias-corrected": f.get("bias_corrected"), "pairs": f.get("n_pairs"),
                         "cannot tell": f.get("cannot_tell") or "",
                         "lag (s)": f.get("lag_s"), "p-value": f.get("p_value"),
                         "surrogate threshold": thr,
                         "interval": None if ci[0] is None else f"{ci[0]:.3f} .. {ci[1]:.3f}",
                         # the infer stage's verdict (p < alpha) when it gave one
                         "significant": ("yes" if f["significant"] else "no") if f.get("significant") is not None
                         else None if thr is None or f.get("peak_nmi") is None
                         else ("yes" if f["peak_nmi"] > thr else "no")})
        parts.append("<h4>Factor table</h4>" + html_table(
            rows, ["factor", "peak NMI", "bias-corrected", "pairs", "lag (s)", "p-value", "surrogate threshold",
                   "interval", "significant", "cannot tell"],
            fmt={"peak NMI": "{:.3f}", "bias-corrected": "{:.3f}", "surrogate threshold": "{:.3f}",
                                        "p-value": "{:.3g}", "lag (s)": "{:g}"}))
        if a.get("note"):
            parts.append(f'<p class="note">{html.escape(a["note"])}</p>')
    return html_section("What drives the rate: NMI against lag", "".join(parts), "nmi")


def _num(v, spec: str) -> str:
    """A number of a JSON report for the page; None (undefined) as a dash."""
    return "&ndash;" if v is None or (isinstance(v, float) and math.isnan(v)) else html.escape(format(v, spec))


def _cell_fairness_html(art: Artifacts) -> str:
    """A cell run's ``fairness.json`` and ``jitter.json`` (airlink infer's numbers), as text
    and tables; empty when the folder has neither."""
    parts = []
    fair = (art.fairness or {}).get("report") if isinstance(art.fairness, dict) else None
    if fair and fair.get("overall"):
        o = fair["overall"]
        parts.append(f"<p>Across the cell's UEs (<code>{html.escape(art.fairness.get('command', ''))}</code>): "
                     f"Jain's index {_num(o.get('jain_index'), '.3f')}, fairness gap "
                     f"{_num(o.get('fairness_gap'), '.3g')}, min/max resource fraction "
                     f"{_num(o.get('min_max_resource_ratio'), '.3f')} (rate {html.escape(str(o.get('rate')))}, "
                     f"resource {html.escape(str(o.get('resource')))}).</p>")
        users = fair.get("users") or []
        if users:
            parts.append(html_table(users, list(users[0])))
    jit = art.jitter if isinstance(art.jitter, dict) else None
    if jit and jit.get("users"):
        parts.append(f"<p>Scheduling jitter (<code>{html.escape(jit.get('command', ''))}</code>), gaps in "
                     "seconds:</p>" + html_table(jit["users"], list(jit["users"][0])))
    return "".join(parts)


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
        if out is not None and out[0] is None:
            parts.append(missing_note(f"fairness across the TCP flows: not drawn, cannot tell: "
                                      f"{out[1].get('cannot_tell')}"))
        elif out is not None and out[1].get("n", 0) >= 2:
            parts.append(figure_html(out[0], "fairness across the TCP flows"))
        elif out is not None:
            headless_pyplot().close(out[0])
    try:
        parts.append(_cell_fairness_html(art))
    except Exception as exc:  # a damaged fairness.json / jitter.json is a note
        notes.append(f"fairness.json / jitter.json could not be shown ({type(exc).__name__}: {exc})")
    h, _ = _render(lambda: fig_jitter(art), "jitter: inter-service gaps",
                   f"jitter: {art.mac_lacks('served_bytes')}, and no per-TTI link log with served_bytes",
                   notes)
    parts.append(h)
    return html_section("Fairness and jitter", "".join(parts), "fairness")


PAGE_CSS = """
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
    try:
        cell = _section_cell(art, notes)
    except Exception as exc:  # a damaged cell.json / cell-stats.json must not lose the page
        notes.append(f"live cell section could not be drawn ({type(exc).__name__}: {exc})")
        cell = html_section("Live cell", missing_note(f"the live cell section could not be drawn: {exc}"), "cell")
    body = [
        banners(art),
        _section_run(art),
        _section_summary(art),
        *([cell] if cell else []),
        _section_tcp(art, notes),
        _section_queue(art, notes),
        _section_nmi(art, notes),
        _section_fairness(art, notes),
    ]
    if notes:
        body.append(html_section("Notes", "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes),
                             "notes"))
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    nav = "".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("parameters", "parameters"), ("summary", "summary"), *([("cell", "cell")] if cell else []),
        ("tcp", "TCP"), ("queue", "queue"),
        ("nmi", "NMI"), ("fairness", "fairness")))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>airlink report: {html.escape(str(name))}</title><style>{PAGE_CSS}</style></head><body>"
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
