"""A cell run's own numbers, from its live MAC log (``cell-mac.parquet``), the cell's counters
(``cell-stats.json``) and the applications' results (``run.json``).

* :func:`cell_summary` (the collect stage, ``cell.json``): per UE the bytes the scheduler
  served (sum of the MAC log's ``served_bytes``), the MAC throughput while active
  ``8 * served_bytes / active_s`` in bit/s, where ``active_s`` runs from the start of the first
  TTI that served the UE to the end of the last, the bytes that arrived and were
  dropped at the UE's base-station queue, and the applications' own received bytes and
  goodput; for the run the TTIs, the late TTIs (the cell's counters and the MAC log's
  ``late`` column) and the shell's CPU per second.
* :func:`cell_reports` (the infer stage, ``fairness.json`` and ``jitter.json``): fairness
  across the UEs and scheduling jitter, computed by :func:`airlink.inference.fairness_report`
  and :func:`airlink.inference.jitter_report` on the MAC log read by
  :func:`airlink.inference.read_frames`, exactly as ``airlink infer fairness|jitter
  cell-mac.parquet`` does; each file carries that command.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from airlink import rundir
from airlink.experiment.live import CELL_MAC, CELL_STATS
from airlink.inference.frames import user_order
from airlink.core.parquetframe import read_parquet_frame

#: applications' result keys that count received bytes / goodput (bulk, onoff, iperf3)
APP_BYTES, APP_GOODPUT = "bytes", "goodput_bps"


def cell_mac_path(outdir) -> Path | None:
    """The live cell's MAC log of a run folder, or None (not a cell run)."""
    p = Path(outdir) / CELL_MAC
    return p if p.exists() else None


def cell_summary(outdir, *, applications: list | None = None) -> dict:
    """Per-UE and per-run numbers of a cell run (module docstring). ``applications``: the
    results of ``run.json`` (each with its ``ue``); None reads them from ``run.json``."""
    outdir = Path(outdir)
    mac = read_parquet_frame(outdir / CELL_MAC)
    stats_path = outdir / CELL_STATS
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    if applications is None:
        info_path = outdir / "run.json"
        applications = json.loads(info_path.read_text()).get("applications", []) if info_path.exists() else []
    tti_s = float(stats["tti_ms"]) / 1e3 if stats.get("tti_ms") else None
    n_tti = int(mac["time"].nunique()) if len(mac) else 0
    late_mac = int(mac.loc[mac["late"].astype(bool), "time"].nunique()) if "late" in mac and len(mac) else None
    counters = {int(u["ue"]): u for u in stats.get("ues", [])}
    per_user = dict(tuple(mac.groupby(mac["user"].astype(str), sort=False))) if len(mac) else {}
    users = sorted(set(per_user) | {str(k) for k in counters}, key=user_order)
    rows = []
    for user in users:
        m = per_user.get(user, mac.iloc[:0])
        apps = [a for a in applications if str(a.get("ue")) == user]
        served = float(m["served_bytes"].sum()) if "served_bytes" in m else None
        span = _active_span_s(m, tti_s)
        dl = (counters.get(int(user)) or {}).get("downlink", {})
        rows.append({
            "ue": int(user),
            "applications": ", ".join(_describe(a) for a in apps) or "none",
            "app_bytes": sum(int(a.get(APP_BYTES) or 0) for a in apps) if apps else None,
            "app_goodput_bps": (sum(float(a.get(APP_GOODPUT) or 0.0) for a in apps)
                                if any(APP_GOODPUT in a for a in apps) else None),
            "served_bytes": served,
            # the MAC throughput while the UE was served, comparable with an application's
            # goodput over its own duration: 8 * served_bytes / active span (bit/s)
            "mac_throughput_bps": 8 * served / span if span and served is not None else None,
            "active_s": span,
            "arrivals_bytes": float(m["arrivals_bytes"].sum()) if "arrivals_bytes" in m else None,
            "drops_packets": float(m["drops_packets"].sum()) if "drops_packets" in m else None,
            "departures_bytes": dl.get("departures_bytes"),
            "status": (counters.get(int(user)) or {}).get("status"),
            "errors": [a["error"] for a in apps if a.get("error")],
        })
    return {"mac_log": CELL_MAC, "preset": stats.get("preset"), "scheduler": stats.get("scheduler"),
            "seed": stats.get("seed"), "users": stats.get("users", len(users)), "tti_ms": stats.get("tti_ms"),
            "ttis": stats.get("ttis", n_tti), "mac_ttis": n_tti, "late_ttis": stats.get("late_ttis"),
            "late_ttis_mac": late_mac, "late_fraction": stats.get("late_fraction"),
            "max_lateness_us": stats.get("max_lateness_us"), "cpu_per_s": stats.get("cpu_per_s"),
            "unroutable_packets": stats.get("unroutable_packets"), "ues": rows}


def _active_span_s(m: pd.DataFrame, tti_s: float | None) -> float | None:
    """Seconds from the start of the first TTI that served the UE to the end of the last."""
    if tti_s is None or "served_bytes" not in m:
        return None
    t = pd.DatetimeIndex(m.loc[m["served_bytes"] > 0, "time"])
    return None if not len(t) else (t.max() - t.min()).total_seconds() + tti_s


def _describe(a: dict) -> str:
    kind = a.get("app", "?")
    return f"{kind} {a['cc']}" if a.get("cc") else str(kind)


def cell_reports(outdir) -> dict:
    """``{"fairness": {...}, "jitter": {...}}`` of the MAC log, each with the ``airlink infer``
    command that prints the same numbers (``--json``)."""
    from airlink import inference as inf
    path = Path(outdir) / CELL_MAC
    frame = inf.read_frames([path])
    fair = inf.fairness_report(frame).to_dict()
    fair.pop("windows", None)        # as `airlink infer fairness --json` without --window
    jitter = inf.jitter_report(frame).to_dict()["users"]
    return {"fairness": {"command": f"airlink infer fairness {CELL_MAC} --json", "report": fair},
            "jitter": {"command": f"airlink infer jitter {CELL_MAC} --json", "users": jitter,
                       "resolution_s": float(frame.attrs.get("resolution_s", np.nan))}}


def write_cell_reports(folder: "rundir.RunFolder", outdir) -> str:
    """Write ``fairness.json`` and ``jitter.json`` (the infer stage); returns a short note."""
    reps = cell_reports(outdir)
    folder.write_json("fairness.json", reps["fairness"], stage="infer")
    folder.write_json("jitter.json", reps["jitter"], stage="infer")
    o = reps["fairness"]["report"]["overall"]
    covs = [u["cov"] for u in reps["jitter"]["users"] if u.get("cov") is not None]
    return (f"UEs' Jain index {_num(o.get('jain_index'), '.3f')}, fairness gap {_num(o.get('fairness_gap'), '.3g')}"
            + (f", gap CoV {min(covs):.2f}-{max(covs):.2f}" if covs else ""))


def _num(v, spec: str) -> str:
    """A number of a report as text; None (undefined: e.g. the fairness gap when a UE got
    nothing) as ``undefined``."""
    return "undefined" if v is None else format(v, spec)
