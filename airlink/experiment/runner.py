"""The runner: stages radio -> live -> collect -> infer -> report into one run folder.

Each stage is called with the run's :class:`~airlink.experiment.context.RunContext` and its
number and returns ``(status, note)``: :func:`stage_radio`, :class:`LiveStage`,
:func:`stage_collect`, :class:`InferStage`, :func:`stage_report`."""
from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from airlink import rundir
from airlink.experiment.context import Progress, RunContext
from airlink.experiment.infer_stage import InferStage
from airlink.experiment.live import LiveStage
from airlink.experiment.spec import Experiment
from airlink.traces import AirlinkError


def _simulate(radio, folder: "rundir.RunFolder", *, progress: bool):
    """Adapter to airlink.sim: run the preset with overrides, write its files into the run
    folder (all at once, through a staging folder). Returns the SimResult."""
    try:
        from airlink.sim import simulate
    except ImportError as exc:
        raise AirlinkError(f"the simulator (airlink.sim.simulate) is not available: {exc}") from None
    result = simulate(radio.preset, seed=radio.seed, duration=radio.duration, progress=progress,
                      **radio.overrides())
    with folder.staging(stage="radio") as tmp:
        result.write(tmp)
    return result


def _collect_capture(capture: Path, folder: "rundir.RunFolder", *, resolution: str, salvage: bool = True,
                     prefix: str = ""):
    """Adapter to airlink.collectors: the capture's frames (packets, flows, tcp series,
    events) written as ``<prefix><part>.parquet`` into the run folder by the collect
    pipeline (streamed: memory does not grow with the capture) and recorded; returns
    (packets read, flows, summary, warnings: :func:`airlink.collectors.collect.capture_warnings`)."""
    from airlink.collectors import collect_capture
    from airlink.collectors.collect import capture_warnings
    rec = collect_capture(capture, folder, prefix=prefix, resolution=resolution, salvage=salvage,
                          provenance={"file": str(capture), "resolution": resolution})
    for kind, path in rec["outputs"].items():
        folder.record(path, stage="collect", kind=kind)
    return rec["packets"], rec["flows_total"], rec["flows"], capture_warnings(rec)


@dataclass
class RunResult:
    """What a run did: ``outdir`` (the run folder) and ``info`` (the content of ``run.json``)."""

    outdir: Path
    info: dict

    @property
    def report(self) -> Path:
        return self.outdir / "report.html"

    @property
    def complete(self) -> bool:
        """True when the run folder's manifest says the run finished."""
        return rundir.is_complete(self.outdir)

    def to_dict(self) -> dict:
        """``run.json``'s content plus the run folder."""
        return {"outdir": str(self.outdir), **self.info}

    def to_frame(self):
        """One row per stage: ``name``, ``status``, ``seconds``, ``note``."""
        import pandas as pd
        return pd.DataFrame(self.info.get("stages", []), columns=["name", "status", "seconds", "note"])


def versions() -> dict:
    """Versions of airlink, Python, the libraries and the tools a run used."""
    import importlib.metadata as md
    from airlink import __version__
    out = {"airlink": __version__, "python": platform.python_version(),
           "platform": platform.platform(), "kernel": platform.release()}
    for pkg in ("numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "matplotlib", "dpkt", "pyyaml"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    for tool, args in (("tcpdump", ["--version"]), ("iperf3", ["--version"]), ("ip", ["-V"])):
        if shutil.which(tool):
            try:
                r = subprocess.run([tool, *args], capture_output=True, text=True, timeout=5)
                line = (r.stdout or r.stderr).strip().splitlines()
                out[tool] = line[0] if line else "?"
            except Exception:
                pass
    try:
        root = Path(__file__).resolve().parents[1]
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                           text=True, timeout=5)
        if r.returncode == 0:
            out["git_commit"] = r.stdout.strip()
    except Exception:
        pass
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            out["tcp_congestion_controls"] = f.read().strip()
    except OSError:
        pass
    return out


class Runner:
    """Runs the stages of one experiment into one output folder (see module docstring)."""

    def __init__(self, exp: Experiment, outdir, *, live: bool | None = None, progress: bool = True,
                 report: bool = True, overwrite: bool = False):
        self.exp = exp
        self.out = Path(outdir)
        self.overwrite = overwrite
        self.want_live = live
        self.progress = Progress(progress)
        self.want_report = report and exp.model.report
        self.info = {"name": exp.name, "experiment": str(exp.path) if exp.path else None,
                     "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                     "stages": [], "notes": [], "live": False, "applications": []}
        self.ctx: RunContext | None = None          # made when the run folder is taken

    # -- helpers ---------------------------------------------------------------------
    def _record(self, name, status, t0, note=""):
        self.info["stages"].append({"name": name, "status": status, "seconds": time.monotonic() - t0,
                                    "note": note})
        self._write_info()

    def _write_info(self):
        self.ctx.folder.write_json("run.json", self.info)
        self.ctx.folder.write_manifest()

    # -- the run ---------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run every stage; the folder's manifest says ``finished`` only when the run got to
        the end (``failed`` after an error, Ctrl-C or SIGTERM - :mod:`airlink.interrupts` -
        with the ``.partial`` files its writers left listed as incomplete). The folder is
        locked for the whole run; :attr:`out` becomes the resolved folder."""
        from airlink.interrupts import interrupts_as_exceptions
        with interrupts_as_exceptions():
            folder = rundir.RunFolder.create(self.out, overwrite=self.overwrite)
            self.out = folder.path
            self.ctx = RunContext(self.exp, folder, self.progress, self.info, want_live=self.want_live)
            status = "failed"
            try:
                if folder.previous == "interrupted":
                    self.ctx.note(f"replacing an interrupted run ({rundir.MANIFEST} said running, its "
                                  "process is gone)")
                self._run_stages()
                status = "finished"
            finally:
                try:
                    folder.finish(status)
                    folder.give_to_sudo_user()
                finally:
                    folder.release()
        return RunResult(self.out, self.info)

    def _run_stages(self) -> None:
        import yaml
        ctx = self.ctx
        ctx.folder.write_text("experiment.yaml",
                              (f"# as run by airlink from {self.exp.path}\n" if self.exp.path else "")
                              + yaml.safe_dump(self.exp.spec, sort_keys=False))
        ctx.folder.write_json("versions.json", versions())
        stages = [("radio", stage_radio), ("live", lambda c, i: LiveStage(c).run(i)),
                  ("collect", stage_collect), ("infer", lambda c, i: InferStage(c).run(i)),
                  ("report", lambda c, i: stage_report(c, i, enabled=self.want_report))]
        for i, (name, fn) in enumerate(stages, 1):
            t0 = time.monotonic()
            try:
                status, note = fn(ctx, i)
            except AirlinkError as exc:
                self._record(name, "failed", t0, str(exc))
                # a bad radio section, or a live stage that was required, ends the run with
                # one clear line; otherwise the later stages still run on what exists
                if name == "radio" or (name == "live" and self.want_live):
                    raise
                ctx.note(f"{name} stage failed: {exc}")
                continue
            except KeyboardInterrupt:
                self._record(name, "interrupted", t0)
                raise
            self._record(name, status, t0, note)
        self.info["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self._write_info()
        if "report.html" in ctx.folder.artifacts:  # once more, so the page shows the finished run.json
            from airlink.report import write_report
            ctx.folder.record(write_report(self.out), stage="report")


# -- stage 1: radio ------------------------------------------------------------------
def stage_radio(ctx: RunContext, i):
    """Stage 1: simulate the radio section's cell (or read its measured trace) into
    ``capacity.parquet``; leaves ``ctx.trace_path`` and ``ctx.user`` for the link shell."""
    radio = ctx.exp.model.radio
    if ctx.exp.model.cell is not None:
        ctx.progress.stage(i, "radio", "the cell simulates its radio live (cell section)")
        return "skipped", "the cell simulates its radio live"
    if radio.preset is None and radio.trace is None and not radio.overrides():
        ctx.progress.stage(i, "radio", "no radio section; nothing to do")
        return "skipped", "no radio section"
    ctx.user = radio.user
    ctx.info["replayed_user"] = ctx.user
    if radio.trace is not None:
        from airlink.traces import read_trace
        path = ctx.exp.resolve(radio.trace)
        ctx.progress.stage(i, "radio", f"measured trace {path}")
        if not path.exists():
            raise AirlinkError(f"{path}: no such trace")
        tr = read_trace(path)
        tr.meta.setdefault("source", str(path))
        with rundir.atomic_path(ctx.folder.file("capacity.parquet")) as tmp:
            tr.write_parquet(tmp)
        ctx.folder.record(ctx.out / "capacity.parquet", stage="radio")
        ctx.user = tr.users[0]
        ctx.info["replayed_user"] = ctx.user
        ctx.trace_path = path
        rate = tr.mean_rate_bps()[0] / 1e6
        return "done", f"{path.name}: {float(tr.duration):.1f} s, mean {rate:.2f} Mbit/s"
    ctx.progress.stage(i, "radio", f"simulate preset {radio.preset!r}, "
                                    f"{radio.duration or 'its duration'}, seed {radio.seed}")
    result = _simulate(radio, ctx.folder, progress=ctx.progress.tty)
    ctx.trace_path = ctx.out / "capacity.parquet"
    if ctx.user not in result.capacity.users:
        raise AirlinkError(f"radio.user: no user {ctx.user!r} in the simulated cell "
                           f"(users {', '.join(result.capacity.users)})")
    ctx.trace_path = link_trace(result.capacity, ctx.user, ctx.folder) or ctx.trace_path
    agg = (result.summary or {}).get("aggregate_throughput_mbps")
    rate = float(result.capacity.select(ctx.user).mean_rate_bps()[0] / 1e6)
    return "done", (f"{result.capacity.n_users} users, aggregate "
                    f"{agg if agg is None else round(agg, 2)} Mbit/s; user {ctx.user} {rate:.2f} Mbit/s")

# -- stage 3: collect ----------------------------------------------------------------
def stage_collect(ctx: RunContext, i):
    """Stage 3: the captures (the live stage's, else the offline ones) into frames; a cell
    run's per-UE numbers into ``cell.json``."""
    status, note = _collect_captures(ctx, i)
    from airlink.experiment.cellrun import cell_mac_path, cell_summary
    if cell_mac_path(ctx.out) is None:
        return status, note
    # a cell run: per-UE numbers of the live MAC log, the cell's counters and the apps
    summary = cell_summary(ctx.out, applications=ctx.info.get("applications"))
    ctx.folder.write_json("cell.json", summary, stage="collect")
    per_ue = ", ".join(f"UE {u['ue']} {(u['mac_throughput_bps'] or 0) / 1e6:.2f}" for u in summary["ues"])
    cell_note = f"cell MAC log: {per_ue} Mbit/s served"
    return ("done" if status == "skipped" else status), (f"{note}; {cell_note}" if note and status != "skipped"
                                                        else cell_note)

def _collect_captures(ctx: RunContext, i):
    captures = list(ctx.captures)
    if not captures:
        offline = ctx.exp.model.offline.captures
        found = [ctx.exp.resolve(c) for c in offline]
        missing = [str(c) for c in found if not c.exists()]
        captures = [c for c in found if c.exists()]
        if missing:
            ctx.note(f"offline captures not found: {', '.join(missing)}")
        if captures:
            ctx.note(f"collecting the offline capture(s) instead: {', '.join(c.name for c in captures)}")
    if not captures:
        ctx.progress.stage(i, "collect", "no capture to collect")
        return "skipped", "no capture"
    res = ctx.exp.model.collect.resolution
    ctx.progress.stage(i, "collect", f"{len(captures)} capture(s) at {res}")
    notes, all_summary = [], {}
    for k, cap in enumerate(captures):
        try:
            packets, flows, summary, warnings = _collect_capture(cap, ctx.folder, resolution=res,
                                                                 prefix="" if k == 0 else f"{cap.stem}-")
        except ImportError as exc:
            return "skipped", f"the collectors are not available ({exc})"
        except AirlinkError as exc:
            notes.append(str(exc))
            continue
        all_summary[cap.name] = summary
        notes.append(f"{cap.name}: {packets} packets, {flows} flows")
        notes += [f"{cap.name}: {w}" for w in warnings]
    ctx.folder.write_json("collect.json", all_summary, stage="collect")
    return ("done" if all_summary else "failed"), "; ".join(notes)


# -- stage 5: report -----------------------------------------------------------------
def stage_report(ctx: RunContext, i, *, enabled: bool = True):
    """Stage 5: ``report.html`` (``enabled`` False: skipped, "turned off")."""
    if not enabled:
        ctx.progress.stage(i, "report", "turned off")
        return "skipped", "turned off"
    from airlink.report import write_report
    ctx.progress.stage(i, "report", f"writing {ctx.out / 'report.html'}")
    ctx.folder.claim("report.html")
    ctx.folder.record(write_report(ctx.out), stage="report")
    return "done", "report.html"


def link_trace(trace, user, folder: "rundir.RunFolder") -> Path | None:
    """The link shell serves TTIs of 0.125..10 ms. A longer TTI (1xRTT's 20 ms frames, EGPRS's
    20 ms blocks) is split by :func:`airlink.traces.split_long_ttis` (the one rule: equal
    sub-TTIs with the bytes shared evenly) and the user's trace written to
    ``link-trace.parquet``. Returns None when the trace can be replayed as it is."""
    from airlink.traces import split_long_ttis
    sub = split_long_ttis(trace.select(str(user)))
    if sub is trace or sub.tti == trace.tti:
        return None
    sub.meta["selected_user"] = str(user)
    path = folder.file("link-trace.parquet")
    with rundir.atomic_path(path) as tmp:
        sub.write_parquet(tmp)
    folder.record(path, stage="radio")
    return path
