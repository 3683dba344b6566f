"""The report page: one self-contained ``report.html`` from whatever a run folder holds.

``write_report(outdir)`` looks at the artifacts in ``outdir`` (written by ``airlink run``,
``airlink simulate``, ``airlink collect``, ``airlink infer`` or by hand) and writes
``outdir/report.html``: a static page with every figure embedded as a base64 PNG, no
scripts and no external URLs, so it can be mailed or archived as one file.

Each section renders when its inputs exist and otherwise says plainly which file it
needed. Sections and their inputs:

==========================  ==============================================================
banners (top of the page)   late TTIs (``cell.json``/``cell-stats.json``) and dropped packets
                            (``link-stats.json``, ``cell-stats.json``, else the Mahimahi
                            logs) above their thresholds (:mod:`airlink.report.banners`)
run parameters              ``experiment.yaml``, ``config.yaml``, ``versions.json``, ``run.json``
summary                     ``summary.json`` (simulator), ``flows.parquet`` (collectors)
TCP time-sequence graph     the packets frame and the TCP events (retransmissions) of the
                            collect stage (``packets.parquet``, ``events.parquet``)
goodput vs capacity         ``tcp.parquet`` and the link's per-TTI log or ``capacity.parquet``
RTT and packets in flight   ``tcp.parquet``
queue backlog               a per-TTI link log (``link-*.parquet``), a Mahimahi link log
                            (``downlink.log``) or a MAC log with ``backlog_bytes``
NMI against lag             ``nmi.json`` (curves with the surrogate threshold)
factor table                ``nmi.json``
fairness and jitter         ``summary.json`` users, a MAC log, per-flow goodput
==========================  ==============================================================

Files are found by kind (:func:`airlink.rundir.find`: the run's ``manifest.json``, else the
declared name patterns, so the folder of a single ``airlink collect`` or ``airlink
simulate`` makes a partial report too). A MAC log is the simulator's ``mac.parquet``, a
cell's ``cell-mac.parquet`` or collect's ``<stem>.mac.parquet``
(:func:`airlink.rundir.collected_name`). The report only reads and draws: it never decodes
a capture or re-runs an analysis; a section whose artifact is missing says so.

The ``nmi.json`` layout (written by the infer stage, :mod:`airlink.experiment.infer_stage`)::

    {"analyses": [{"target": "assigned_rate_bps", "source": "mac.parquet",
                   "resolution_s": 1.0,
                   "factors": [{"factor": "backlog_bytes", "peak_nmi": 0.57, "lag_s": 1.0,
                                "p_value": 0.01, "threshold": 0.12, "ci": [0.5, 0.6],
                                "curve": {"lag_s": [...], "nmi": [...]}}]}]}
"""
from __future__ import annotations

# modules by responsibility: artifacts (reading, by kind), figures (drawing), banners (warnings), page (HTML)
from airlink.report.artifacts import Artifacts
from airlink.report.figures import (fig_backlog, fig_fairness, fig_goodput, fig_jitter, fig_nmi,
                                    fig_rtt_inflight, fig_time_sequence, main_direction)
# the page's building blocks, public for other pages (the sweep report, airlink.sweep.report)
from airlink.report.page import (PAGE_CSS, REPORT_NAME, build_report_html, figure_html, html_section,
                                 html_table, missing_note, pre_block, write_report)
from airlink.traces.plot import headless_pyplot

__all__ = ["write_report", "build_report_html", "Artifacts", "fig_time_sequence", "fig_goodput",
           "fig_rtt_inflight", "fig_backlog", "fig_nmi", "fig_fairness", "fig_jitter", "main_direction",
           "REPORT_NAME", "PAGE_CSS", "figure_html", "html_section", "html_table", "missing_note", "pre_block",
           "headless_pyplot"]
