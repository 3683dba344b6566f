"""The live stage: the replay shells with the applications inside, tcpdump inside the
namespace and on the host, a server on the host; supervision, time limits and clean-up."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from airlink import rundir
from airlink.experiment.context import RunContext
from airlink.traces import AirlinkError, parse_duration, parse_rate, parse_size


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
        r = subprocess.run(["unshare", "--net", "true"], capture_output=True, timeout=10)
        if r.returncode != 0:
            return f"cannot create a network namespace: {r.stderr.decode().strip()}"
    except FileNotFoundError:
        pass
    except subprocess.TimeoutExpired:
        return "creating a network namespace timed out"
    return None


def airlink_executable() -> list:
    """argv prefix that runs the airlink command (the console script next to this Python)."""
    exe = Path(sys.executable).parent / "airlink"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("airlink")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())"]


def replay_shell_argvs(shells: list, trace: Path | None, user, outdir: Path) -> list[list[str]]:
    """The replay shells' own words (``["delay", "20"]``, ``["link", TRACE, ...]``), one list
    per shell, outermost first; :func:`shell_command` chains them into one command line."""
    argvs: list = []
    for item in shells:
        kind = item.kind
        o = {k: v for k, v in item.options.model_dump().items() if v is not None}
        if kind == "delay":
            argvs.append(["delay", "--trace", str(o["trace"])] if "trace" in o else ["delay", f"{o['ms']:g}"])
        elif kind == "loss":
            for direction in ("downlink", "uplink"):
                if direction in o:
                    argvs.append(["loss", direction, f"{o[direction]:g}"])
        elif kind == "link":
            if trace is None:
                raise AirlinkError("a link shell needs a capacity trace (radio section)")
            argv = ["link", str(trace)]
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
            # the shell writes its logs atomically itself (NAME.partial, renamed when complete)
            argv += ["--downlink-log", str(outdir / "downlink.log")]
            if o.get("uplink"):
                argv += ["--uplink-log", str(outdir / "uplink.log")]
            argv += ["--downlink-tti-log", str(outdir / "link-downlink.parquet"),
                     "--stats", str(outdir / "link-stats.json")]
            if o.get("once"):
                argv += ["--once"]
            argvs.append(argv)
    return argvs


def cell_shell_argv(cell, exp, outdir: Path, set_file: Path | None) -> list[str]:
    """``airlink cell``'s own words for a ``cell:`` section (the run folder's MAC log,
    per-UE Mahimahi logs and stats), starting with ``"cell"``."""
    argv = ["cell"]
    preset = cell.preset
    if preset is not None and exp.resolve(preset).exists():
        preset = str(exp.resolve(preset))
    uplink = cell.uplink
    if uplink is not None and exp.resolve(uplink).exists():
        uplink = str(exp.resolve(uplink))
    from_log = cell.from_log
    if from_log is not None and exp.resolve(from_log).exists():
        from_log = str(exp.resolve(from_log))
    follow = cell.follow_rnti
    if isinstance(follow, list):
        follow = ",".join(map(str, follow))
    for flag, value in (("--preset", preset), ("--scheduler", cell.scheduler), ("--users", cell.users),
                        ("--seed", cell.seed), ("--tti", cell.tti), ("--duration", cell.duration),
                        ("--queue", cell.queue),
                        ("--queue-args", None if cell.queue == "infinite" else cell.queue_args),
                        ("--uplink", uplink), ("--warmup", cell.warmup), ("--late-after", cell.late_after),
                        ("--from-log", from_log), ("--follow-rnti", follow), ("--log-start", cell.log_start),
                        ("--log-direction", None if cell.from_log is None else cell.log_direction),
                        ("--log-others", None if cell.from_log is None else cell.log_others),
                        ("--log-channel", None if cell.from_log is None else cell.log_channel)):
        if value is not None:
            argv += [flag, str(value)]
    if set_file is not None:
        argv += ["--config", str(set_file)]
    if cell.realtime:
        argv += ["--realtime"]
    if cell.rps != "off":
        argv += ["--rps", cell.rps]
    if cell.ecn:
        argv += ["--ecn"]
    # the cell writes its outputs atomically itself (NAME.partial, renamed when complete)
    argv += ["--mac-log", str(outdir / CELL_MAC), "--log-dir", str(outdir / CELL_LOGS),
             "--stats", str(outdir / CELL_STATS)]
    return argv


def live_shells(model, has_trace: bool) -> list:
    """The shells the applications of a run without a cell go through: the spec's
    ``shells``, or by default a link shell on the radio stage's trace (``has_trace``), else a
    zero delay shell."""
    from airlink.experiment.spec import Shell
    return model.shells or [Shell.model_validate({"link": {}} if has_trace else {"delay": {}})]


def parse_shell_argv(argv: list[str]):
    """``argv`` (a shell's own words, its name first) parsed by that shell's real argparse
    parser: the namespace the child process will see. A refusal is an AirlinkError with
    argparse's message (a word the parser does not take, a value outside its choices or
    declared range)."""
    from airlink.cli import command_parser

    def refuse(message):
        raise AirlinkError(message)
    parser = command_parser(argv[0])
    parser.error = refuse                 # argparse reports through error(); raise instead of exiting
    return parser.parse_args(argv[1:])


def check_experiment_shells(exp, *, trace: Path | None = None, outdir: Path = Path("OUTDIR")) -> list:
    """The shells' own words an experiment's live stage builds, each parsed by the shell's
    parser (:func:`parse_shell_argv`), a link's queues built from their arguments; the first
    refusal is an AirlinkError naming the spec's section (``shells[1].link: ...``, ``cell: ...``). ``trace``: the capacity trace the radio
    stage provides (a placeholder by default). Returns ``[(argv, namespace), ...]``."""
    model = exp.model
    out, items = [], []
    radio = model.radio
    has_radio = radio.preset is not None or radio.trace is not None or bool(radio.overrides())
    shells = model.shells if model.cell is not None or not model.applications else live_shells(model, has_radio)
    for k, shell in enumerate(shells):
        argvs = replay_shell_argvs([shell], trace if trace is not None else Path("capacity.parquet"), None, outdir)
        items += [(f"shells[{k}].{shell.kind}", argv) for argv in argvs]
    if model.cell is not None:
        set_file = outdir / "apps" / "cell-set.yaml" if model.cell.overrides else None
        items.append(("cell", cell_shell_argv(model.cell, exp, outdir, set_file)))
    for where, argv in items:
        try:
            ns = parse_shell_argv(argv)
            if argv[0] == "link":           # queue arguments are read when the shell starts
                from airlink.replay.queues import make_queue
                for d in ("downlink", "uplink"):
                    make_queue(getattr(ns, f"{d}_queue"), getattr(ns, f"{d}_queue_args"))
            out.append((argv, ns))
        except AirlinkError as exc:
            raise AirlinkError(f"{where}: {exc}") from None
    return out


def shell_command(argvs: list[list[str]]) -> list[str]:
    """Shells' own words chained into one command line, each started by the airlink command
    (:func:`airlink_executable`), each checked by its parser first; the caller appends
    ``--`` and the command the innermost shell runs."""
    command: list = []
    for argv in argvs:
        parse_shell_argv(argv)
        command += airlink_executable() + argv
    return command


#: the cell's outputs in the run folder (declared in airlink.rundir)
CELL_MAC, CELL_STATS, CELL_LOGS = "cell-mac.parquet", "cell-stats.json", "cell-logs"

#: what the live stage and the processes it starts write in the run folder, whatever the plan
#: (beside them: ``capture/ue<N>.pcap``, ``cell-logs/ue<N>.{down,up}.log`` and each
#: application's result, named by the plan)
LIVE_OUTPUTS = ("capture/inside.pcap", "capture/host.pcap", "apps/plan.json", "apps/command.txt",
                "apps/cell-set.yaml", "apps/server.json", "apps/server.ready", "apps/server.err",
                "apps/shell.err", "apps/shell.out", "downlink.log", "uplink.log", "link-downlink.parquet",
                "link-uplink.parquet", "link-stats.json", CELL_MAC, CELL_STATS)


class LiveStage:
    """The live stage (stage 2) of a run: ``LiveStage(ctx).run(i)`` -> ``(status, note)``.
    Reads from ``ctx`` (:class:`~airlink.experiment.context.RunContext`) the experiment, the
    radio stage's ``trace_path`` and ``user``, and ``want_live``; leaves ``ctx.captures`` and
    the applications' results in ``ctx.info``."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self._live_names: list = []      # the files this run's live stage may write

    def run(self, i):
        cell = self.ctx.exp.model.cell
        apps = self.ctx.exp.model.applications
        if not apps and cell is None:
            self.ctx.progress.stage(i, "live", "no applications; skipped")
            return "skipped", "no applications"
        reason = None if self.ctx.want_live else "turned off"
        if self.ctx.want_live is None or self.ctx.want_live:
            reason = live_unavailable_reason()
            if reason and self.ctx.want_live:
                raise AirlinkError(reason)
        if reason:
            self.ctx.progress.stage(i, "live", f"skipped: {reason}")
            self.ctx.note(f"live stage skipped: {reason}; running the offline part on what exists")
            return "skipped", reason
        if cell is not None:
            return self._live_cell(i, cell)
        return self._live(i, apps)

    def _live(self, i, apps):
        shells = live_shells(self.ctx.exp.model, self.ctx.trace_path is not None)
        argv = shell_command(replay_shell_argvs(shells, self.ctx.trace_path, self.ctx.user, self.ctx.out))
        return self._run_live(i, {None: apps}, argv, f"behind {' > '.join(s.kind for s in shells)}")

    def _live_cell(self, i, cell):
        """The ``cell:`` section: ``airlink cell`` (inside the ``delay``/``loss`` shells), every
        UE running its own applications (``python -m airlink.experiment inside`` picks them
        by ``$AIRLINK_UE``)."""
        cfg = cell.resolve(preset_path=self.ctx.exp.cell_preset_path())
        n = int(cfg["n_users"])
        set_file = None
        if cell.overrides:
            import yaml
            set_file = self.ctx.folder.write_text("apps/cell-set.yaml", yaml.safe_dump(dict(cell.overrides)),
                                              stage="live")
        argv = shell_command(replay_shell_argvs(self.ctx.exp.model.shells, None, None, self.ctx.out)
                             + [cell_shell_argv(cell, self.ctx.exp, self.ctx.out, set_file)])
        if cell.duration is not None:
            limit = float(parse_duration(cell.duration))
            for u, apps in enumerate(cell.per_ue(n), start=1):
                ends = [float(a.options.start) + float(parse_duration(getattr(a.options, "seconds", 0) or 0))
                        for a in apps if a.kind in ("bulk", "onoff")]
                if ends and max(ends) > limit:
                    self.ctx.note(f"cell.duration ({limit:g} s) ends before UE {u}'s applications "
                               f"({max(ends):g} s): the cell stops them and their results may be missing")
        self.ctx.folder.mkdir(self.ctx.out / CELL_LOGS)
        where = " > ".join([s.kind for s in self.ctx.exp.model.shells] + [f"a {n}-UE cell ({cfg['preset']}, "
                                                                     f"{cfg['scheduler']})"])
        status, note = self._run_live(i, {u + 1: a for u, a in enumerate(cell.per_ue(n))}, argv, f"in {where}",
                                      duration_s=None if cell.duration is None else float(parse_duration(cell.duration)))
        stats = self.ctx.out / CELL_STATS
        if stats.exists():
            s = json.loads(stats.read_text())
            self.ctx.info["cell"] = {k: s.get(k) for k in ("preset", "scheduler", "seed", "users", "tti_ms", "ttis",
                                                       "late_ttis", "late_fraction", "max_lateness_us",
                                                       "cpu_per_s", "status")}
            note += (f"; {s.get('ttis')} TTIs, {s.get('late_ttis')} late "
                     f"({100 * (s.get('late_fraction') or 0):.2f} %)")
        else:
            status = "failed"
            note += f"; the cell wrote no {CELL_STATS}"
        return status, note

    def _run_live(self, i, groups: dict, argv: list, where: str, duration_s: float | None = None):
        """Start the servers and the host capture, run ``argv -- python -m airlink.experiment
        inside apps/plan.json`` under supervision, collect the application results.
        ``groups``: the applications per UE (``{1: [...], 2: [...]}``), or ``{None: [...]}``
        for one emulated link."""
        cap = self.ctx.exp.model.capture
        snaplen = cap.snaplen
        self.ctx.folder.mkdir(self.ctx.out / "capture")
        self.ctx.folder.mkdir(self.ctx.out / "apps")
        port = _free_port()
        host_procs = []
        iperf_port = [port + 1]
        plans, durations = {}, []
        for ue, apps in groups.items():
            folder = self.ctx.out / "apps" if ue is None else self.ctx.out / "apps" / f"ue{ue}"
            self.ctx.folder.mkdir(folder)
            plans[ue] = [plan_entry(k, item, folder, port, iperf_port, host_procs, ue)
                         for k, item in enumerate(apps)]
            durations += [e["start"] + e.get("seconds", 0) for e in plans[ue]]
        expected = max(durations + [1.0]) if duration_s is None else duration_s
        entries = [e for plan in plans.values() for e in plan]
        # what this stage (and the processes it starts) writes: only these are recorded, and
        # none of them may be a file that was in the folder before the run
        ues = [u for u in plans if u is not None]
        self._live_names = [*LIVE_OUTPUTS, *(f"capture/ue{u}.pcap" for u in ues),
                            *(f"{CELL_LOGS}/ue{u}.{d}.log" for u in ues for d in ("down", "up")),
                            *(self.ctx.folder.rel(e["out"]) for e in entries)]
        self.ctx.folder.claim(*self._live_names)
        for name in ("capture/inside.pcap", "capture/host.pcap", *(f"capture/ue{u}.pcap" for u in ues)):
            rundir.create_partial(self.ctx.out / name)      # made here: tcpdump writes into our file
        plan_doc = {"capture": cap.inside, "snaplen": snaplen,
                    "ports": sorted({p["port"] for p in entries if "port" in p}), "timeout": expected + 60}
        if None in plans:
            plan_doc.update(apps=plans[None],
                            pcap=str(rundir.partial_path(self.ctx.out / "capture" / "inside.pcap")))
        else:
            plan_doc.update(ues={str(u): p for u, p in plans.items()},
                            pcaps={str(u): str(rundir.partial_path(self.ctx.out / "capture" / f"ue{u}.pcap"))
                                   for u in plans})
        plan_path = self.ctx.folder.write_json("apps/plan.json", plan_doc, stage="live")
        argv = argv + ["--", sys.executable, "-m", "airlink.experiment", "inside", str(plan_path)]
        self.ctx.folder.write_text("apps/command.txt", " ".join(_quote(a) for a in argv) + "\n", stage="live")
        self.ctx.progress.stage(i, "live", f"{len(entries)} application(s) {where}, about {expected:.0f} s")
        server = subprocess.Popen([sys.executable, "-m", "airlink.apps", "serve", "--port", str(port),
                                   "--log", str(self.ctx.out / "apps" / "server.json"),
                                   "--ready", str(self.ctx.out / "apps" / "server.ready")],
                                  stdout=subprocess.DEVNULL, stderr=open(rundir.create_partial(self.ctx.out / "apps" / "server.err"), "w"),
                                  preexec_fn=_die_with_runner)
        host_dump = None
        try:
            _wait_for_file(self.ctx.out / "apps" / "server.ready", 10, server)
            if cap.host:
                host_dump = _start_tcpdump(rundir.partial_path(self.ctx.out / "capture" / "host.pcap"),
                                           plan_doc["ports"], snaplen)
            t0 = time.monotonic()
            with open(rundir.create_partial(self.ctx.out / "apps" / "shell.err"), "w") as err:
                # the inside runner needs root for tcpdump and writes into OUTDIR: keep root
                # there (the shells drop to the sudo user when SUDO_UID is set); the whole
                # folder is given to that user at the end of the run instead
                env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID")}
                if cap.inside or cap.host:
                    # captures of 1500-byte segments, as the collect stage's RTT and
                    # per-packet figures expect; AIRLINK_OFFLOAD=1 in the environment wins
                    env.setdefault("AIRLINK_OFFLOAD", "0")
                shell = subprocess.Popen(argv, stdout=open(rundir.create_partial(self.ctx.out / "apps" / "shell.out"), "w"),
                                         stderr=err, env=env, preexec_fn=_die_with_runner)
                bar = self.ctx.progress.timer(expected, "live")
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
            promote_live_outputs(self.ctx.folder, self._live_names)
        self.ctx.info["live"] = True
        results = []
        for entry in entries:
            try:
                res = json.loads(Path(entry["out"]).read_text())
            except Exception:
                res = {"app": entry["kind"], "error": "no result written"}
            results.append(res if entry.get("ue") is None else {"ue": entry["ue"], **res})
        self.ctx.info["applications"] = results
        captures = [self.ctx.out / "capture" / "host.pcap", self.ctx.out / "capture" / "inside.pcap"]
        captures += [self.ctx.out / "capture" / f"ue{u}.pcap" for u in plans if u is not None]
        self.ctx.captures = [p for p in captures if p.exists() and p.stat().st_size > 24]
        if status != 0:
            tail = (self.ctx.out / "apps" / "shell.err").read_text(errors="replace").strip().splitlines()[-3:]
            self.ctx.note(f"the shell command exited with status {status}: {' | '.join(tail)}")
        ok = [r for r in results if "error" not in r]
        summary = "; ".join((f"UE {r['ue']} " if "ue" in r else "") + _describe_app(r) for r in results)
        return ("done" if ok and status == 0 else "failed"), summary


def plan_entry(k, item, folder: Path, port, iperf_port: list, host_procs: list, ue=None) -> dict:
    """One application of the plan (what the inside runner does), its server started
    outside when it needs one of its own (iperf3: one ``iperf3 -s -1`` per application)."""
    kind, o = item.kind, item.options
    entry = {"kind": kind, "index": k, "start": float(o.start), "out": str(folder / f"app{k + 1}-{kind}.json")}
    if ue is not None:
        entry["ue"] = ue
    if kind == "bulk":
        entry.update(port=port, cc=o.cc, seconds=float(parse_duration(o.seconds)),
                     rwnd_bytes=None if o.rwnd is None else int(parse_size(o.rwnd)))
    elif kind == "onoff":
        entry.update(port=port, rate_bps=parse_rate(o.rate), on_s=o.on, off_s=o.off,
                     seconds=float(parse_duration(o.seconds)), size=o.size)
    elif kind == "iperf3":
        if not shutil.which("iperf3"):
            raise AirlinkError("applications: iperf3 is not installed")
        args = o.args.split() if isinstance(o.args, str) else list(o.args)
        sec = float(args[args.index("-t") + 1]) if "-t" in args else 10.0
        if o.cc:
            args += ["-C", o.cc]
        entry.update(port=iperf_port[0], args=args, seconds=sec)
        host_procs.append(subprocess.Popen(["iperf3", "-s", "-1", "-p", str(iperf_port[0])],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           preexec_fn=_die_with_runner))
        iperf_port[0] += 1
    else:
        cmd = o.command
        entry.update(command=cmd if isinstance(cmd, str) else " ".join(_quote(c) for c in cmd),
                     seconds=o.seconds)
    return entry

def promote_live_outputs(folder: rundir.RunFolder, names: list) -> None:
    """Give tcpdump's captures and the processes' stdout/stderr their final names (only
    once they have stopped) and record the live stage's files ``names`` - those of
    :data:`LIVE_OUTPUTS` and the per-UE and per-application names of this run's plan, never
    anything else found in the folder (the shells' logs are complete when they exist)."""
    out = folder.path
    for name in names:
        if name.startswith("capture/") or name.startswith("apps/") and name.endswith((".err", ".out")):
            tmp = rundir.partial_path(out / name)
            if name.startswith("capture/") and os.path.isfile(tmp) and os.path.getsize(tmp) == 0:
                os.unlink(tmp)          # made for a tcpdump that never started (no header)
            elif os.path.isfile(tmp):
                rundir.commit(out / name)
    folder.record_if_exists(names, stage="live")


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


def _die_with_runner() -> None:
    """In a child of the runner: be killed when the runner dies, even by SIGKILL (the shell
    stack then takes its namespaces and applications with it; tcpdump leaves only its
    ``.partial`` capture). Runs between fork and exec."""
    from airlink.replay.plumbing import set_parent_death_signal
    set_parent_death_signal(signal.SIGKILL)


def _start_tcpdump(path: Path, ports: list, snaplen: int, interface: str = "any"):
    """tcpdump writing ``path``, returned once it listens (or None if tcpdump is missing)."""
    if not shutil.which("tcpdump"):
        return None
    flt = " or ".join(f"port {p}" for p in ports) or "tcp"
    # -Z root: tcpdump's drop to its own user would clear the parent-death signal.
    # --immediate-mode: otherwise libpcap hands packets over in ring blocks retired every
    # second, and the block still open when tcpdump is stopped is lost (the transfers' tails)
    cmd = ["tcpdump", "-Z", "root", "-i", interface, "-s", str(snaplen), "-U", "--immediate-mode", "-n",
           "-w", str(path)]
    if interface == "any":
        cmd += ["-y", "LINUX_SLL"]
    proc = subprocess.Popen(cmd + [flt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_die_with_runner)
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
