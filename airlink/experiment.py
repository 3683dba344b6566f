"""Experiments: describe the whole loop once in YAML, run it with ``airlink run``.

An experiment file has these sections (all but ``name`` optional)::

    name: pf-cell
    description: PF cell, user 1 replayed under live TCP
    radio:                      # where capacity comes from: a simulated cell ...
      preset: quick             #   any airlink.sim preset
      seed: 1
      duration: 20s
      scheduler: pf             #   any other key is a preset override
      user: 1                   #   the user whose capacity the link replays
    # radio: {trace: path/to/measured.down}   # ... or a measured trace (Mahimahi or Parquet)
    shells:                     # outermost first, as on a command line
      - delay: 20               # ms each way
      - loss: {downlink: 0.001}
      - link: {queue: droptail, queue_args: "packets=200"}
    applications:               # run together inside the emulated link
      - bulk: {cc: cubic, seconds: 15}       # TCP download, TCP_CONGESTION per socket
      - iperf3: {args: "-R -t 10", cc: bbr}
      - onoff: {rate: 76.8kbps, on: 1, off: 5, seconds: 30}
      - command: "ping -c 5 $AIRLINK_BASE"
    capture: {inside: true, host: true, snaplen: 128}
    collect: {resolution: 1s}
    infer:
      surrogates: 50
      nmi:                      # default: what the available frames allow
        - {source: mac, target: assigned_rate_bps, factors: [backlog_bytes, sinr_db], max_lag: 5s}
    offline:                    # used when the live part cannot run here
      captures: [../shared/data/tcp-pcaps/zeek-head/206_example_b.pcap]

Stages, in order: **radio** (simulate or read the trace) -> **live** (shells + applications,
tcpdump inside the namespace and on the host) -> **collect** (captures -> packets, flows and
TCP series frames) -> **infer** (NMI lag scans with surrogate thresholds -> ``nmi.json``)
-> **report** (``report.html``). The live stage needs root, ``ip netns`` and
``/dev/net/tun``; without them it is skipped with the reason, and the offline stages run
on what exists (``offline.captures``). Every artifact lands in the output folder with the
experiment file as run (``experiment.yaml``), ``versions.json`` and ``run.json`` (stage
status, timings, notes), so a run can be repeated.

The parts the runner joins are reached through one adapter function each
(:func:`_simulate`, :func:`_replay_argv`, :func:`_collect_capture`, :func:`_nmi_scan`), so a
change in their API changes one place.
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from airlink import rundir
from airlink.traces import AirlinkError, parse_duration, parse_rate

SECTIONS = ("name", "description", "radio", "shells", "applications", "capture",
            "collect", "infer", "offline", "report")
SHELL_KINDS = ("delay", "loss", "link")
APP_KINDS = ("bulk", "iperf3", "onoff", "command")
STAGES = ("radio", "live", "collect", "infer", "report")
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")


# ============================================================================ the file
@dataclass
class Experiment:
    """A parsed experiment: the raw mapping plus where it came from (for relative paths)."""

    spec: dict
    path: Path | None = None
    base: Path = field(default_factory=Path.cwd)

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or (self.path.stem if self.path else "experiment"))

    def resolve(self, p) -> Path:
        """A path from the file: as given if it exists (relative to the working directory),
        else relative to the experiment file's folder."""
        p = Path(os.path.expandvars(os.path.expanduser(str(p))))
        if p.is_absolute() or p.exists():
            return p
        alt = self.base / p
        return alt if alt.exists() else p


def _where(exp_path, key: str) -> str:
    return f"{exp_path or 'experiment'}: {key}"


def load_experiment(source, *, overrides: dict | None = None) -> Experiment:
    """Read and check an experiment (a YAML path or a mapping). ``overrides`` are dotted keys
    (``{"radio.seed": 3, "radio.trace": "x.down"}``) applied before checking."""
    import yaml
    path = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise AirlinkError(f"{path}: no such experiment file")
        try:
            spec = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark else ""
            raise AirlinkError(f"{path}: {where}not valid YAML ({getattr(exc, 'problem', exc)})") from None
    elif isinstance(source, dict):
        spec = copy.deepcopy(source)
    else:
        raise AirlinkError(f"an experiment is a YAML file or a mapping, not {type(source).__name__}")
    if not isinstance(spec, dict):
        raise AirlinkError(f"{path}: an experiment file is a mapping of sections ({', '.join(SECTIONS)})")
    for key, value in (overrides or {}).items():
        node = spec
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    exp = Experiment(spec, path, path.resolve().parent if path else Path.cwd())
    check_experiment(exp)
    return exp


def check_experiment(exp: Experiment) -> None:
    """Raise one clear line for the first problem in the file."""
    s, p = exp.spec, exp.path
    unknown = [k for k in s if k not in SECTIONS]
    if unknown:
        raise AirlinkError(f"{_where(p, unknown[0])}: unknown section (known: {', '.join(SECTIONS)})")
    radio = s.get("radio") or {}
    if not isinstance(radio, dict):
        raise AirlinkError(f"{_where(p, 'radio')}: must be a mapping (preset: ... or trace: ...)")
    if "trace" in radio and "preset" in radio:
        raise AirlinkError(f"{_where(p, 'radio')}: give either a preset or a trace, not both")
    for key in ("duration",):
        if key in radio:
            _duration(radio[key], _where(p, f"radio.{key}"))
    shells = s.get("shells") or []
    if not isinstance(shells, list):
        raise AirlinkError(f"{_where(p, 'shells')}: must be a list (outermost first)")
    for i, sh in enumerate(shells):
        kind = _one_key(sh, SHELL_KINDS, _where(p, f"shells[{i}]"))
        if kind == "link" and not (s.get("radio") or {}):
            raise AirlinkError(f"{_where(p, f'shells[{i}]')}: a link shell needs a radio section "
                               "(preset or trace)")
    apps = s.get("applications") or []
    if not isinstance(apps, list):
        raise AirlinkError(f"{_where(p, 'applications')}: must be a list")
    for i, app in enumerate(apps):
        kind = _one_key(app, APP_KINDS, _where(p, f"applications[{i}]"))
        opts = app[kind] if isinstance(app[kind], dict) else {}
        cc = opts.get("cc")
        if cc is not None and cc not in CONGESTION_CONTROLS:
            raise AirlinkError(f"{_where(p, f'applications[{i}].cc')}: unknown congestion control "
                               f"{cc!r} (one of {', '.join(CONGESTION_CONTROLS)})")
        if kind == "command" and not isinstance(app[kind], (str, list)):
            raise AirlinkError(f"{_where(p, f'applications[{i}].command')}: must be a command line")
    infer = s.get("infer") or {}
    for i, a in enumerate(infer.get("nmi") or []):
        if not isinstance(a, dict) or "target" not in a or not a.get("factors"):
            raise AirlinkError(f"{_where(p, f'infer.nmi[{i}]')}: needs target and factors")


def _one_key(item, kinds, where) -> str:
    if isinstance(item, str) and item in kinds:
        return item
    if not isinstance(item, dict) or len(item) != 1 or next(iter(item)) not in kinds:
        raise AirlinkError(f"{where}: must be one of {', '.join(kinds)} with its options")
    return next(iter(item))


def _duration(value, where: str) -> float:
    try:
        return float(parse_duration(value if isinstance(value, str) else f"{value}s"))
    except AirlinkError as exc:
        raise AirlinkError(f"{where}: {exc}") from None


def _opts(item) -> tuple:
    kind = next(iter(item)) if isinstance(item, dict) else item
    opts = item[kind] if isinstance(item, dict) else {}
    return kind, (opts if isinstance(opts, dict) else {"value": opts})


# ============================================================================ adapters
def _simulate(radio: dict, folder: "rundir.RunFolder", *, progress: bool):
    """Adapter to airlink.sim: run the preset with overrides, write its files into the run
    folder (all at once, through a staging folder). Returns the SimResult."""
    try:
        from airlink.sim import simulate
    except ImportError as exc:
        raise AirlinkError(f"the simulator (airlink.sim.simulate) is not available: {exc}") from None
    params = {k: v for k, v in radio.items() if k not in ("preset", "seed", "duration", "user", "trace")}
    result = simulate(radio.get("preset"), seed=int(radio.get("seed", 0)),
                      duration=str(radio.get("duration", "10s")), progress=progress, **params)
    with folder.staging(stage="radio") as tmp:
        result.write(tmp)
    return result


def airlink_executable() -> list:
    """argv prefix that runs the airlink command (the console script next to this Python)."""
    exe = Path(sys.executable).parent / "airlink"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("airlink")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())"]


def _replay_argv(shells: list, trace: Path | None, user, outdir: Path) -> list:
    """Adapter to the replay shells' command lines (``airlink delay|loss|link``), outermost
    first, each followed by the next; the caller appends ``--`` and the command."""
    argv: list = []
    for i, item in enumerate(shells):
        kind, o = _opts(item)
        if kind == "delay":
            argv += airlink_executable() + ["delay"]
            if "trace" in o:
                argv += ["--trace", str(o["trace"])]
            else:
                argv += [str(o.get("ms", o.get("value", 0)))]
        elif kind == "loss":
            for direction in ("downlink", "uplink"):
                if direction in o:
                    argv += airlink_executable() + ["loss", direction, str(o[direction])]
                    if o.get("gilbert"):
                        argv += ["--gilbert", str(o["gilbert"])]
        elif kind == "link":
            if trace is None:
                raise AirlinkError("a link shell needs a capacity trace (radio section)")
            argv += airlink_executable() + ["link", str(trace)]
            if user is not None and trace.suffix == ".parquet":
                argv += ["--user", str(user)]
            if o.get("uplink"):
                argv += ["--uplink", str(o["uplink"])]
            for d in ("downlink", "uplink"):
                q = o.get(f"{d}_queue", o.get("queue") if d == "downlink" else None)
                qa = o.get(f"{d}_queue_args", o.get("queue_args") if d == "downlink" else None)
                if q:
                    argv += [f"--{d}-queue", str(q)]
                if qa:
                    argv += [f"--{d}-queue-args", str(qa)]
            # written under their partial names; the live stage renames them when it is over
            argv += ["--downlink-log", str(rundir.partial_name(outdir / "downlink.log"))]
            if o.get("uplink"):
                argv += ["--uplink-log", str(rundir.partial_name(outdir / "uplink.log"))]
            argv += ["--downlink-tti-log", str(rundir.partial_name(outdir / "link-downlink.parquet")),
                     "--stats", str(rundir.partial_name(outdir / "link-stats.json"))]
            if o.get("once"):
                argv += ["--once"]
    return argv


def _collect_capture(capture: Path, *, resolution: str, salvage: bool = True):
    """Adapter to airlink.collectors: (packets, flows, tcp series, summary) of a capture."""
    from airlink.collectors import read_pcap
    packets = read_pcap(capture, salvage=salvage)
    try:
        from airlink.collectors import analyze_tcp
    except ImportError:
        from airlink.collectors.tcp import analyze_tcp  # not re-exported yet
    res = analyze_tcp(packets, resolution=resolution)
    return packets, res, res.summary()


def _nmi_scan(x: pd.Series, y: pd.Series, *, max_lag: int, bins: int, surrogates: int,
              period_s: float, seed: int = 0) -> dict:
    """Adapter to airlink.inference: the lag curve and the peak with its surrogate threshold,
    p-value and interval, as the ``nmi.json`` factor entry (lags in seconds)."""
    try:
        from airlink.inference import lag_scan, peak_significance
    except ImportError:  # before the package re-exported them
        from airlink.inference.lagscan import lag_scan
        from airlink.inference.surrogates import peak_significance
    scan = lag_scan(x.to_numpy(np.float64), y.to_numpy(np.float64), max_lag=max_lag, bins=bins,
                    sample_period=period_s)
    sig = peak_significance(x.to_numpy(np.float64), y.to_numpy(np.float64), max_lag=max_lag,
                            bins=bins, sample_period=period_s, n_surrogates=surrogates,
                            n_boot=max(50, surrogates), seed=seed, scan=scan)
    finite = lambda v: None if v is None or not np.isfinite(v) else float(v)  # noqa: E731
    return {"peak_nmi": float(sig.peak_nmi), "lag_s": finite(sig.lag_s), "p_value": finite(sig.p_value),
            "threshold": finite(sig.threshold), "bias_corrected": finite(sig.bias_corrected),
            "ci": [finite(sig.ci_low), finite(sig.ci_high)], "n_pairs": int(sig.n_pairs),
            "n_surrogates": int(sig.n_surrogates),
            "curve": {"lag_s": [float(v) for v in scan.lag_s],
                      "nmi": [float(v) for v in scan.values.to_numpy()]}}


# ============================================================================ live check
def live_unavailable_reason() -> str | None:
    """Why the live stage cannot run here (None when it can)."""
    if not sys.platform.startswith("linux"):
        return "the live stage needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the live stage needs root to create network namespaces and TUN devices (run with sudo)"
    if not shutil.which("ip"):
        return "iproute2 (ip) is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (modprobe tun)"
    try:
        import airlink.replay  # noqa: F401
        from airlink.replay import LinkShell  # noqa: F401
    except Exception as exc:
        return f"the replay shells are not available ({exc})"
    try:
        r = subprocess.run(["unshare", "--net", "true"], capture_output=True, timeout=10)
        if r.returncode != 0:
            return f"cannot create a network namespace: {r.stderr.decode().strip()}"
    except FileNotFoundError:
        pass
    except subprocess.TimeoutExpired:
        return "creating a network namespace timed out"
    return None


# ============================================================================ progress
class Progress:
    """One line per stage on stderr; a tqdm bar for the live stage's seconds when on a tty."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()

    def stage(self, i: int, name: str, what: str):
        if self.enabled:
            print(f"airlink run: [{i}/{len(STAGES)}] {name}: {what}", file=sys.stderr, flush=True)

    def note(self, text: str):
        if self.enabled:
            print(f"airlink run: {text}", file=sys.stderr, flush=True)

    def timer(self, total_s: float, desc: str):
        if not self.tty:
            return None
        from tqdm import tqdm
        return tqdm(total=round(total_s), desc=desc, unit="s", leave=False)


# ============================================================================ runner
@dataclass
class RunResult:
    outdir: Path
    info: dict

    @property
    def report(self) -> Path:
        return self.outdir / "report.html"


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
        self.folder: rundir.RunFolder | None = None
        self.want_live = live
        self.progress = Progress(progress)
        self.want_report = report and exp.spec.get("report", True) is not False
        self.info = {"name": exp.name, "experiment": str(exp.path) if exp.path else None,
                     "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                     "stages": [], "notes": [], "live": False, "applications": []}
        self.trace_path: Path | None = None
        self.user = None
        self.captures: list = []

    # -- helpers ---------------------------------------------------------------------
    def _record(self, name, status, t0, note=""):
        self.info["stages"].append({"name": name, "status": status, "seconds": time.monotonic() - t0,
                                    "note": note})
        self._write_info()

    def _note(self, text):
        self.info["notes"].append(text)
        self.progress.note(text)

    def _write_info(self):
        self.folder.write_json("run.json", self.info)
        self.folder.write_manifest()

    # -- the run ---------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run every stage; the folder's manifest says ``finished`` only when the run got to
        the end (``failed`` after an error or an interrupt)."""
        self.folder = rundir.RunFolder.create(self.out, overwrite=self.overwrite)
        status = "failed"
        try:
            self._run_stages()
            status = "finished"
        finally:
            self.folder.finish(status)
            self.folder.give_to_sudo_user()
        return RunResult(self.out, self.info)

    def _run_stages(self) -> None:
        import yaml
        self.folder.write_text("experiment.yaml",
                               (f"# as run by airlink from {self.exp.path}\n" if self.exp.path else "")
                               + yaml.safe_dump(self.exp.spec, sort_keys=False))
        self.folder.write_json("versions.json", versions())
        stages = [("radio", self.stage_radio), ("live", self.stage_live),
                  ("collect", self.stage_collect), ("infer", self.stage_infer),
                  ("report", self.stage_report)]
        for i, (name, fn) in enumerate(stages, 1):
            t0 = time.monotonic()
            try:
                status, note = fn(i)
            except AirlinkError as exc:
                self._record(name, "failed", t0, str(exc))
                # a bad radio section, or a live stage that was required, ends the run with
                # one clear line; otherwise the later stages still run on what exists
                if name == "radio" or (name == "live" and self.want_live):
                    raise
                self._note(f"{name} stage failed: {exc}")
                continue
            except KeyboardInterrupt:
                self._record(name, "interrupted", t0)
                raise
            self._record(name, status, t0, note)
        self.info["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self._write_info()
        if self.want_report:  # once more, so the page shows the finished run.json
            from airlink.report import write_report
            self.folder.record(write_report(self.out), stage="report")

    # -- stage 1: radio ------------------------------------------------------------------
    def stage_radio(self, i):
        radio = dict(self.exp.spec.get("radio") or {})
        if not radio:
            self.progress.stage(i, "radio", "no radio section; nothing to do")
            return "skipped", "no radio section"
        self.user = str(radio.get("user", 1))
        self.info["replayed_user"] = self.user
        if "trace" in radio:
            from airlink.traces import read_trace
            path = self.exp.resolve(radio["trace"])
            self.progress.stage(i, "radio", f"measured trace {path}")
            if not path.exists():
                raise AirlinkError(f"{path}: no such trace (give one with --trace PATH)")
            tr = read_trace(path)
            tr.meta.setdefault("source", str(path))
            with rundir.atomic_path(self.folder.file("capacity.parquet")) as tmp:
                tr.write_parquet(tmp)
            self.folder.record(self.out / "capacity.parquet", stage="radio")
            self.user = tr.users[0]
            self.info["replayed_user"] = self.user
            self.trace_path = path
            rate = tr.mean_rate_bps()[0] / 1e6
            return "done", f"{path.name}: {float(tr.duration):.1f} s, mean {rate:.2f} Mbit/s"
        self.progress.stage(i, "radio", f"simulate preset {radio.get('preset')!r}, "
                                        f"{radio.get('duration', '10s')}, seed {radio.get('seed', 0)}")
        result = _simulate(radio, self.folder, progress=self.progress.tty)
        self.trace_path = self.out / "capacity.parquet"
        if self.user not in result.capacity.users:
            raise AirlinkError(f"radio.user: no user {self.user!r} in the simulated cell "
                               f"(users {', '.join(result.capacity.users)})")
        self.trace_path = _replayable(result.capacity, self.user, self.folder) or self.trace_path
        agg = (result.summary or {}).get("aggregate_throughput_mbps")
        rate = float(result.capacity.select(self.user).mean_rate_bps()[0] / 1e6)
        return "done", (f"{result.capacity.n_users} users, aggregate "
                        f"{agg if agg is None else round(agg, 2)} Mbit/s; user {self.user} {rate:.2f} Mbit/s")

    # -- stage 2: live -------------------------------------------------------------------
    def stage_live(self, i):
        apps = self.exp.spec.get("applications") or []
        if not apps:
            self.progress.stage(i, "live", "no applications; skipped")
            return "skipped", "no applications"
        reason = None if self.want_live else "turned off (--offline)"
        if self.want_live is None or self.want_live:
            reason = live_unavailable_reason()
            if reason and self.want_live:
                raise AirlinkError(reason)
        if reason:
            self.progress.stage(i, "live", f"skipped: {reason}")
            self._note(f"live stage skipped: {reason}; running the offline part on what exists")
            return "skipped", reason
        return self._live(i, apps)

    def _live(self, i, apps):
        spec = self.exp.spec
        cap = spec.get("capture") or {}
        snaplen = int(cap.get("snaplen", 128))
        self.folder.mkdir(self.out / "capture")
        self.folder.mkdir(self.out / "apps")
        port = _free_port()
        durations = []
        plan = []
        host_procs = []
        iperf_port = port + 1
        for k, item in enumerate(apps):
            kind, o = _opts(item)
            entry = {"kind": kind, "index": k, "start": float(o.get("start", 0.0)),
                     "out": str(self.out / "apps" / f"app{k + 1}-{kind}.json")}
            if kind == "bulk":
                sec = float(_duration(o.get("seconds", o.get("duration", 10)), f"applications[{k}].seconds"))
                entry.update(port=port, cc=o.get("cc"), seconds=sec)
            elif kind == "onoff":
                sec = float(_duration(o.get("seconds", 30), f"applications[{k}].seconds"))
                entry.update(port=port, rate_bps=parse_rate(str(o.get("rate", "76.8kbps"))),
                             on_s=float(o.get("on", 1)), off_s=float(o.get("off", 5)), seconds=sec,
                             size=int(o.get("size", 1000)))
            elif kind == "iperf3":
                if not shutil.which("iperf3"):
                    raise AirlinkError("applications: iperf3 is not installed")
                args = o.get("args", "-R -t 10")
                args = args.split() if isinstance(args, str) else list(args)
                sec = float(args[args.index("-t") + 1]) if "-t" in args else 10.0
                if o.get("cc"):
                    args += ["-C", o["cc"]]
                entry.update(port=iperf_port, args=args, seconds=sec)
                host_procs.append(subprocess.Popen(["iperf3", "-s", "-1", "-p", str(iperf_port)],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                iperf_port += 1
            else:
                cmd = o.get("value") if "value" in o else item[kind]
                entry.update(command=cmd if isinstance(cmd, str) else " ".join(map(str, cmd)),
                             seconds=float(o.get("seconds", 0) or 0))
            durations.append(entry["start"] + entry.get("seconds", 0))
            plan.append(entry)
        expected = max(durations + [1.0])
        plan_doc = {"apps": plan, "capture": bool(cap.get("inside", True)), "snaplen": snaplen,
                    "pcap": str(rundir.partial_name(self.out / "capture" / "inside.pcap")),
                    "ports": sorted({p["port"] for p in plan if "port" in p}),
                    "timeout": expected + 60}
        plan_path = self.folder.write_json("apps/plan.json", plan_doc, stage="live")
        shells = spec.get("shells") or ([{"link": {}}] if self.trace_path else [{"delay": 0}])
        argv = _replay_argv(shells, self.trace_path, self.user, self.out)
        argv += ["--", sys.executable, "-m", "airlink.experiment", "inside", str(plan_path)]
        self.folder.write_text("apps/command.txt", " ".join(_quote(a) for a in argv) + "\n", stage="live")
        self.progress.stage(i, "live", f"{len(plan)} application(s) behind "
                                       f"{' > '.join(_opts(s)[0] for s in shells)}, about {expected:.0f} s")
        server = subprocess.Popen([sys.executable, "-m", "airlink.apps", "serve", "--port", str(port),
                                   "--log", str(self.out / "apps" / "server.json"),
                                   "--ready", str(self.out / "apps" / "server.ready")],
                                  stdout=subprocess.DEVNULL, stderr=open(self.out / "apps" / "server.err", "w"))
        host_dump = None
        try:
            _wait_for_file(self.out / "apps" / "server.ready", 10, server)
            if cap.get("host", True):
                host_dump = _start_tcpdump(rundir.partial_name(self.out / "capture" / "host.pcap"),
                                           plan_doc["ports"], snaplen)
            t0 = time.monotonic()
            with open(self.out / "apps" / "shell.err", "w") as err:
                # the inside runner needs root for tcpdump and writes into OUTDIR: keep root
                # there (the shells drop to the sudo user when SUDO_UID is set); the whole
                # folder is given to that user at the end of the run instead
                env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID")}
                shell = subprocess.Popen(argv, stdout=open(self.out / "apps" / "shell.out", "w"),
                                         stderr=err, env=env)
                bar = self.progress.timer(expected, "live")
                try:
                    while shell.poll() is None:
                        time.sleep(0.5)
                        if bar is not None:
                            bar.n = min(round(time.monotonic() - t0), bar.total)
                            bar.refresh()
                        if time.monotonic() - t0 > expected + 120:
                            shell.send_signal(signal.SIGTERM)
                            shell.wait(timeout=20)
                            raise AirlinkError(f"live stage did not finish within {expected + 120:.0f} s")
                finally:
                    if bar is not None:
                        bar.close()
                    if shell.poll() is None:
                        shell.terminate()
                        shell.wait(timeout=20)
            status = shell.returncode
        finally:
            if host_dump is not None:
                _stop(host_dump)
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
            for p in host_procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=5)
            self._promote_live_outputs()
        self.info["live"] = True
        results = []
        for entry in plan:
            try:
                results.append(json.loads(Path(entry["out"]).read_text()))
            except Exception:
                results.append({"app": entry["kind"], "error": "no result written"})
        self.info["applications"] = results
        self.captures = [p for p in (self.out / "capture" / "host.pcap", self.out / "capture" / "inside.pcap")
                         if p.exists() and p.stat().st_size > 24]
        if status != 0:
            tail = (self.out / "apps" / "shell.err").read_text(errors="replace").strip().splitlines()[-3:]
            self._note(f"the shell command exited with status {status}: {' | '.join(tail)}")
        ok = [r for r in results if "error" not in r]
        summary = "; ".join(_describe_app(r) for r in results)
        return ("done" if ok and status == 0 else "failed"), summary

    def _promote_live_outputs(self) -> None:
        """Rename what the shells and tcpdump wrote under partial names to the final names
        (only once they have stopped), and record the live stage's files."""
        for name in ("capture/inside.pcap", "capture/host.pcap", "downlink.log", "uplink.log",
                     "link-downlink.parquet", "link-uplink.parquet", "link-stats.json"):
            final = self.out / name
            part = rundir.partial_name(final)
            if part.exists():
                os.replace(part, final)
                self.folder.record(final, stage="live")
        self.folder.record_tree(self.out / "apps", stage="live")

    # -- stage 3: collect ----------------------------------------------------------------
    def stage_collect(self, i):
        captures = list(self.captures)
        if not captures:
            offline = (self.exp.spec.get("offline") or {}).get("captures") or []
            found = [self.exp.resolve(c) for c in offline]
            missing = [str(c) for c in found if not c.exists()]
            captures = [c for c in found if c.exists()]
            if missing:
                self._note(f"offline captures not found: {', '.join(missing)}")
            if captures:
                self._note(f"collecting the offline capture(s) instead: {', '.join(c.name for c in captures)}")
        if not captures:
            self.progress.stage(i, "collect", "no capture to collect")
            return "skipped", "no capture"
        res = str((self.exp.spec.get("collect") or {}).get("resolution", "1s"))
        self.progress.stage(i, "collect", f"{len(captures)} capture(s) at {res}")
        notes, all_summary = [], {}
        for k, cap in enumerate(captures):
            try:
                packets, analysis, summary = _collect_capture(cap, resolution=res)
            except ImportError as exc:
                return "skipped", f"the collectors are not available ({exc})"
            except AirlinkError as exc:
                notes.append(str(exc))
                continue
            prefix = "" if k == 0 else f"{cap.stem}-"
            prov = {**rundir.provenance_of(packets), "file": str(cap), "reader": "pcap", "resolution": res}
            for kind, part in rundir.COLLECT_KINDS.items():
                frame = packets if kind == "packets" else getattr(analysis, {"tcp": "series", "tcp-events": "events"}.get(kind, kind))
                self.folder.write_frame(f"{prefix}{part}.parquet", frame, kind=kind, stage="collect",
                                        provenance=prov)
            all_summary[cap.name] = summary
            notes.append(f"{cap.name}: {len(packets)} packets, {len(analysis.flows)} flows")
        self.folder.write_json("collect.json", all_summary, stage="collect")
        return ("done" if all_summary else "failed"), "; ".join(notes)

    # -- stage 4: infer ------------------------------------------------------------------
    def stage_infer(self, i):
        cfg = self.exp.spec.get("infer") or {}
        if cfg is False or cfg.get("enabled") is False:
            self.progress.stage(i, "infer", "turned off")
            return "skipped", "turned off"
        analyses = cfg.get("nmi") or self._default_analyses()
        if not analyses:
            self.progress.stage(i, "infer", "no series to analyse")
            return "skipped", "no mac.parquet, tcp.parquet or capacity to analyse"
        surrogates = int(cfg.get("surrogates", 50))
        self.progress.stage(i, "infer", f"{len(analyses)} NMI lag scan(s), {surrogates} surrogates each")
        done, notes = [], []
        for a in analyses:
            try:
                done.append(self._analyse(a, surrogates))
            except ImportError as exc:
                return "skipped", f"the inference package is not available ({exc})"
            except (AirlinkError, KeyError, ValueError) as exc:
                notes.append(f"{a.get('source')}/{a.get('target')}: {exc}")
        self.folder.write_json("nmi.json", {"analyses": done}, stage="infer")
        for n in notes:
            self._note(f"inference: {n}")
        best = [f"{a['target']}<-{max(a['factors'], key=lambda f: f['peak_nmi'])['factor']}"
                for a in done if a["factors"]]
        return ("done" if done else "failed"), ", ".join(best) or "; ".join(notes)

    def _default_analyses(self) -> list:
        out = []
        if (self.out / "mac.parquet").exists():
            cols = set(pd.read_parquet(self.out / "mac.parquet").columns)
            factors = [c for c in ("backlog_bytes", "sinr_db", "harq_retransmissions") if c in cols]
            if "assigned_rate_bps" in cols and factors:
                out.append({"source": "mac", "target": "assigned_rate_bps", "factors": factors,
                            "resolution": "100ms", "max_lag": "2s"})
        if (self.out / "tcp.parquet").exists():
            out.append({"source": "tcp", "target": "goodput_bps",
                        "factors": ["capacity_bps", "rtt_ms", "inflight_packets", "backlog_bytes"],
                        "resolution": str((self.exp.spec.get("collect") or {}).get("resolution", "1s")),
                        "max_lag": "5s"})
            out.append({"source": "tcp", "target": "rtt_ms",
                        "factors": ["capacity_bps", "inflight_packets", "backlog_bytes"],
                        "resolution": str((self.exp.spec.get("collect") or {}).get("resolution", "1s")),
                        "max_lag": "5s"})
        return out

    def _analyse(self, a: dict, surrogates: int) -> dict:
        res_s = float(parse_duration(str(a.get("resolution", "1s"))))
        frame = self._series_frame(a.get("source", "mac"), res_s)
        target = a["target"]
        if target not in frame:
            raise AirlinkError(f"no column {target!r} (have {', '.join(frame.columns)})")
        max_lag = max(1, int(round(float(parse_duration(str(a.get("max_lag", "5s")))) / res_s)))
        max_lag = min(max_lag, max(1, len(frame) // 4))
        # 16 equal-width bins (seed 003) need many samples; short series get fewer bins so the
        # plug-in entropies are not dominated by their small-sample bias (file's bins win)
        bins = int(a.get("bins") or min(16, max(3, int(np.sqrt(frame[target].notna().sum() / 4)))))
        factors, skipped = [], []
        for f in a["factors"]:
            if f not in frame or frame[f].nunique(dropna=True) < 2:
                skipped.append(f)
                continue
            entry = _nmi_scan(frame[target], frame[f], max_lag=max_lag, bins=bins,
                              surrogates=surrogates, period_s=res_s, seed=int(a.get("seed", 0)))
            factors.append({"factor": f, **entry})
        factors.sort(key=lambda e: -e["peak_nmi"])
        note = f"skipped (absent or constant): {', '.join(skipped)}" if skipped else ""
        return {"source": a.get("source", "mac"), "target": target, "resolution_s": res_s,
                "max_lag_samples": max_lag, "bins": bins, "samples": int(len(frame)), "factors": factors, "note": note}

    def _series_frame(self, source: str, res_s: float) -> pd.DataFrame:
        """One regular frame at ``res_s`` for an analysis: the replayed user's MAC columns
        (``mac``), or the busiest TCP direction joined with the trace capacity and the link
        backlog (``tcp``)."""
        step = pd.Timedelta(seconds=res_s)
        if source == "mac":
            mac = pd.read_parquet(self.out / "mac.parquet")
            if "time" in mac.columns:
                mac = mac.set_index("time")
            user = self.user if self.user is not None else str(mac["user"].iloc[0])
            rows = mac[mac["user"].astype(str) == str(user)].drop(columns=["user"])
            rows = rows.select_dtypes("number")
            return rows.resample(step).mean()
        tcp = pd.read_parquet(self.out / "tcp.parquet")
        col = "goodput_bps" if "goodput_bps" in tcp else "throughput_bps"
        flow, direction = tcp.groupby(["flow", "direction"], observed=True)[col].sum().idxmax()
        rows = tcp[(tcp["flow"] == flow) & (tcp["direction"] == direction)]
        rows = rows.set_index("time") if "time" in rows.columns else rows
        frame = rows.select_dtypes("number").resample(step).mean()
        link = self.out / "link-downlink.parquet"
        if link.exists():
            lk = pd.read_parquet(link)
            lk = lk.set_index("time") if "time" in lk.columns else lk
            num = lk.select_dtypes("number")
            if "capacity_bytes" in num:
                cap = num["capacity_bytes"].resample(step).sum() * 8 / res_s
                frame["capacity_bps"] = cap.reindex(frame.index, method="nearest", tolerance=step)
            if "backlog_bytes" in num:
                bl = num["backlog_bytes"].resample(step).mean()
                frame["backlog_bytes"] = bl.reindex(frame.index, method="nearest", tolerance=step)
        if "capacity_bps" not in frame and (self.out / "capacity.parquet").exists():
            from airlink.traces import Trace
            tr = Trace.read_parquet(self.out / "capacity.parquet")
            u = self.user if self.user in tr.users else tr.users[0]
            rate = tr.select(u).to_wide()[u] * 8 / float(tr.tti)
            n = len(frame)
            per = max(1, int(round(res_s / float(tr.tti))))
            v = rate.to_numpy()
            reps = int(np.ceil(n * per / max(len(v), 1))) + 1  # the link loops the trace
            v = np.tile(v, reps)[: n * per].reshape(n, per).mean(axis=1)
            frame["capacity_bps"] = v
        return frame

    # -- stage 5: report -----------------------------------------------------------------
    def stage_report(self, i):
        if not self.want_report:
            self.progress.stage(i, "report", "turned off")
            return "skipped", "turned off"
        from airlink.report import write_report
        self.progress.stage(i, "report", f"writing {self.out / 'report.html'}")
        self.folder.record(write_report(self.out), stage="report")
        return "done", "report.html"


MAX_LINK_TTI_MS = 10.0


def _replayable(trace, user, folder: "rundir.RunFolder") -> Path | None:
    """The link shell serves TTIs of 0.125..10 ms. A longer TTI (1xRTT's 20 ms frames,
    EGPRS's 20 ms blocks) is split into equal sub-TTIs of at most 10 ms with the bytes
    shared evenly, which keeps every TTI's total exact; the user's trace is written to
    ``link-trace.parquet``. Returns None when the trace can be replayed as it is."""
    from fractions import Fraction
    from airlink.traces import Trace
    if trace.tti_ms <= MAX_LINK_TTI_MS:
        return None
    k = int(np.ceil(trace.tti_ms / MAX_LINK_TTI_MS))
    col = trace.column(user)
    sub = Trace(np.repeat(col / k, k), trace.tti / k, [str(user)], trace.unit,
                {**trace.meta, "resampled_from_tti_s": str(Fraction(trace.tti)), "selected_user": str(user)})
    path = folder.file("link-trace.parquet")
    with rundir.atomic_path(path) as tmp:
        sub.write_parquet(tmp)
    folder.record(path, stage="radio")
    return path




def _describe_app(r: dict) -> str:
    if "error" in r:
        return f"{r.get('app')}: {r['error']}"
    if r.get("app") == "bulk":
        return f"bulk {r.get('cc') or 'default'}: {r['goodput_bps'] / 1e6:.2f} Mbit/s"
    if r.get("app") == "onoff":
        return f"on-off UDP: {r['bytes']} bytes"
    if r.get("app") == "iperf3":
        return f"iperf3: {r.get('goodput_bps', 0) / 1e6:.2f} Mbit/s"
    return f"{r.get('app')}: exit {r.get('status')}"


def _quote(a: str) -> str:
    import shlex
    return shlex.quote(str(a))


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _wait_for_file(path: Path, timeout: float, proc=None):
    t0 = time.monotonic()
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AirlinkError(f"helper process exited early with status {proc.returncode}")
        if time.monotonic() - t0 > timeout:
            raise AirlinkError(f"timed out waiting for {path.name}")
        time.sleep(0.05)


def _start_tcpdump(path: Path, ports: list, snaplen: int, interface: str = "any"):
    """tcpdump writing ``path``, returned once it listens (or None if tcpdump is missing)."""
    if not shutil.which("tcpdump"):
        return None
    flt = " or ".join(f"port {p}" for p in ports) or "tcp"
    proc = subprocess.Popen(["tcpdump", "-i", interface, "-s", str(snaplen), "-U", "-n", "-w", str(path),
                             "-y", "LINUX_SLL", flt] if interface == "any" else
                            ["tcpdump", "-i", interface, "-s", str(snaplen), "-U", "-n", "-w", str(path), flt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.set_blocking(proc.stderr.fileno(), False)
    t0, buf = time.monotonic(), b""
    while time.monotonic() - t0 < 10:
        try:
            chunk = proc.stderr.read() or b""
        except (BlockingIOError, TypeError):
            chunk = b""
        buf += chunk
        if b"listening on" in buf or proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        raise AirlinkError(f"tcpdump failed: {buf.decode(errors='replace').strip()}")
    return proc


def _stop(proc, sig=signal.SIGINT, timeout: float = 10):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ============================================================================ inside
def run_inside(plan_path) -> int:
    """What runs inside the emulated link: tcpdump on the namespace's interfaces, then the
    applications together (each at its start offset), then stop tcpdump. Writes one JSON
    result per application; returns 0 when every application succeeded."""
    import threading
    from airlink import apps as A
    plan = json.loads(Path(plan_path).read_text())
    base = os.environ.get("AIRLINK_BASE", "127.0.0.1")
    dump = _start_tcpdump(Path(plan["pcap"]), plan["ports"], plan["snaplen"]) if plan.get("capture") else None
    failures = []

    def one(entry):
        time.sleep(entry.get("start", 0))
        t0 = time.monotonic()
        try:
            if entry["kind"] == "bulk":
                res = A.fetch(base, entry["port"], cc=entry.get("cc"), seconds=entry["seconds"])
            elif entry["kind"] == "onoff":
                res = A.onoff(base, entry["port"], rate_bps=entry["rate_bps"], on_s=entry["on_s"],
                              off_s=entry["off_s"], seconds=entry["seconds"], size=entry["size"])
            elif entry["kind"] == "iperf3":
                r = subprocess.run(["iperf3", "-c", base, "-p", str(entry["port"]), "-J", *entry["args"]],
                                   capture_output=True, text=True, timeout=entry["seconds"] + 60)
                doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
                end = doc.get("end", {})
                recv = end.get("sum_received", {}) or end.get("sum", {})
                res = {"app": "iperf3", "status": r.returncode, "goodput_bps": recv.get("bits_per_second", 0.0),
                       "bytes": recv.get("bytes", 0), "seconds": recv.get("seconds", 0.0),
                       "cc": end.get("sender_tcp_congestion"), "error": doc.get("error")}
                if not res["error"]:
                    res.pop("error")
            else:
                r = subprocess.run(entry["command"], shell=True, capture_output=True, text=True,
                                   env={**os.environ, "AIRLINK_BASE": base})
                res = {"app": "command", "command": entry["command"], "status": r.returncode,
                       "stdout": r.stdout[-4000:], "stderr": r.stderr[-2000:]}
                if r.returncode != 0:
                    res["error"] = f"exit status {r.returncode}"
        except Exception as exc:  # reported in the result, the other apps go on
            res = {"app": entry["kind"], "error": f"{type(exc).__name__}: {exc}"}
        res["elapsed_s"] = time.monotonic() - t0
        if "error" in res:
            failures.append(res)
        rundir.write_json(entry["out"], res)

    threads = [threading.Thread(target=one, args=(e,)) for e in plan["apps"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=plan.get("timeout", 600))
    if dump is not None:
        time.sleep(0.3)
        _stop(dump)
    return 1 if failures else 0


# ============================================================================ public
def run_experiment(experiment, outdir, *, live: bool | None = None, progress: bool = True,
                   report: bool = True, overrides: dict | None = None, overwrite: bool = False) -> RunResult:
    """Run an experiment (a YAML path, a mapping or an :class:`Experiment`) into ``outdir``.

    ``live``: None runs the live stage when this machine allows it (else says why and goes
    on offline), True requires it (error when impossible), False skips it.
    ``overrides``: dotted keys applied to the file, e.g. ``{"radio.trace": "x.down"}``.
    ``overwrite``: an existing non-empty ``outdir`` is an error unless this is True; then the
    artifacts of the earlier run (as its ``manifest.json`` lists them) are removed and any
    other file in the folder stays.
    Returns a :class:`RunResult` whose ``info`` is the content of ``run.json``.
    """
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment, overrides=overrides)
    return Runner(exp, outdir, live=live, progress=progress, report=report, overwrite=overwrite).run()


__all__ = ["Experiment", "load_experiment", "check_experiment", "run_experiment", "Runner", "RunResult",
           "live_unavailable_reason", "versions", "run_inside"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "inside":
        sys.exit(run_inside(sys.argv[2]))
    print("usage: python -m airlink.experiment inside PLAN.json", file=sys.stderr)
    sys.exit(2)
