"""What a run folder holds, found by kind (:func:`airlink.rundir.find`) and loaded lazily."""
from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from airlink import rundir
from airlink.traces import AirlinkError, Trace
from airlink.core.parquetframe import read_parquet_frame


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
            return read_parquet_frame(path)
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
    def cell(self):
        """The collect stage's per-UE numbers of a live cell run (``cell.json``)."""
        return self._json("cell.json")

    @cached_property
    def cell_stats(self):
        """The cell shell's counters (``cell-stats.json``)."""
        p = self._pick("cell-stats")
        return self._json(p.relative_to(self.outdir).as_posix()) if p else None

    @cached_property
    def fairness(self):
        """Fairness across a cell's UEs (``fairness.json``: ``airlink infer fairness``'s)."""
        return self._json("fairness.json")

    @cached_property
    def jitter(self):
        """Inter-service gaps per UE (``jitter.json``: ``airlink infer jitter``'s)."""
        return self._json("jitter.json")

    @cached_property
    def mac_path(self) -> Path | None:
        return self._pick("mac")

    @cached_property
    def mac_source(self) -> str:
        """What the MAC log is, for captions, by the stage that declares its name
        (:data:`airlink.rundir.ARTIFACTS`): the live cell's, a collected one or the simulator's."""
        p = self.mac_path
        a = rundir.declared(p.relative_to(self.outdir).as_posix()) if p is not None else None
        stage = a.stage if a is not None else "radio"
        return {"live": "live cell's MAC log", "collect": f"collected MAC log {p.name if p else ''}"}.get(
            stage, "simulator MAC log")

    def mac_lacks(self, column: str) -> str:
        """Why the MAC log cannot give ``column``, for notes: the file found and the column it
        lacks, or the names looked for (the declared ``mac`` patterns)."""
        if self.mac_path is None:
            return f"no MAC log ({', '.join(rundir.patterns('mac'))})"
        if self.mac is None:
            return f"{self.mac_path.name} is not readable"
        return f"{self.mac_path.name} has no {column} column"

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
        """The MAC log (many users): the simulator's, or the live cell's."""
        p = self.mac_path
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
        from airlink.traces.mmlinklog import is_log_file
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
        client's address and port; "UE u flow N (cc)" in a cell run), else "flow N"."""
        out = {}
        apps = (self.run_info or {}).get("applications") or []
        local = {a.get("local"): a for a in apps if a.get("local")}
        if self.flows is None or not local:
            return out
        for _, f in self.flows.iterrows():
            for a, b in ((f.get("src"), f.get("sport")), (f.get("dst"), f.get("dport"))):
                app = local.get(f"{a}:{b}")
                if app and app.get("cc"):
                    ue = f"UE {app['ue']} " if app.get("ue") is not None else ""
                    out[f["flow"]] = f"{ue}flow {f['flow']} ({app['cc']})"
        return out
