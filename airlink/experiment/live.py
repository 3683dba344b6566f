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
from airlink.traces import AirlinkError, parse_duration, parse_rate


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


def _replay_argv(shells: list, trace: Path | None, user, outdir: Path) -> list:
    """Adapter to the replay shells' command lines (``airlink delay|loss|link``), outermost
    first, each followed by the next; the caller appends ``--`` and the command."""
    argv: list = []
    for item in shells:
        kind = item.kind
        o = {k: v for k, v in item.options.model_dump().items() if v is not None}
        if kind == "delay":
            argv += airlink_executable() + ["delay"]
            if "trace" in o:
                argv += ["--trace", str(o["trace"])]
            else:
                argv += [f"{o['ms']:g}"]
        elif kind == "loss":
            for direction in ("downlink", "uplink"):
                if direction in o:
                    argv += airlink_executable() + ["loss", direction, f"{o[direction]:g}"]
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
            # the shell writes its logs atomically itself (NAME.partial, renamed when complete)
            argv += ["--downlink-log", str(outdir / "downlink.log")]
            if o.get("uplink"):
                argv += ["--uplink-log", str(outdir / "uplink.log")]
            argv += ["--downlink-tti-log", str(outdir / "link-downlink.parquet"),
                     "--stats", str(outdir / "link-stats.json")]
            if o.get("once"):
                argv += ["--once"]
    return argv




class LiveStage:
    """The live stage of :class:`~airlink.experiment.stages.Runner`."""

    # -- stage 2: live -------------------------------------------------------------------
    def stage_live(self, i):
        apps = self.exp.model.applications
        if not apps:
            self.progress.stage(i, "live", "no applications; skipped")
            return "skipped", "no applications"
        reason = None if self.want_live else "turned off"
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
        model = self.exp.model
        cap = model.capture
        snaplen = cap.snaplen
        self.folder.mkdir(self.out / "capture")
        self.folder.mkdir(self.out / "apps")
        port = _free_port()
        durations = []
        plan = []
        host_procs = []
        iperf_port = port + 1
        for k, item in enumerate(apps):
            kind, o = item.kind, item.options
            entry = {"kind": kind, "index": k, "start": float(o.start),
                     "out": str(self.out / "apps" / f"app{k + 1}-{kind}.json")}
            if kind == "bulk":
                entry.update(port=port, cc=o.cc, seconds=float(parse_duration(o.seconds)))
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
                entry.update(port=iperf_port, args=args, seconds=sec)
                host_procs.append(subprocess.Popen(["iperf3", "-s", "-1", "-p", str(iperf_port)],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                   preexec_fn=_die_with_runner))
                iperf_port += 1
            else:
                cmd = o.command
                entry.update(command=cmd if isinstance(cmd, str) else " ".join(_quote(c) for c in cmd),
                             seconds=o.seconds)
            durations.append(entry["start"] + entry.get("seconds", 0))
            plan.append(entry)
        expected = max(durations + [1.0])
        plan_doc = {"apps": plan, "capture": cap.inside, "snaplen": snaplen,
                    "pcap": str(rundir.partial_path(self.out / "capture" / "inside.pcap")),
                    "ports": sorted({p["port"] for p in plan if "port" in p}),
                    "timeout": expected + 60}
        plan_path = self.folder.write_json("apps/plan.json", plan_doc, stage="live")
        from airlink.experiment.spec import Shell
        shells = model.shells or [Shell.model_validate({"link": {}} if self.trace_path else {"delay": {}})]
        argv = _replay_argv(shells, self.trace_path, self.user, self.out)
        argv += ["--", sys.executable, "-m", "airlink.experiment", "inside", str(plan_path)]
        self.folder.write_text("apps/command.txt", " ".join(_quote(a) for a in argv) + "\n", stage="live")
        self.progress.stage(i, "live", f"{len(plan)} application(s) behind "
                                       f"{' > '.join(s.kind for s in shells)}, about {expected:.0f} s")
        server = subprocess.Popen([sys.executable, "-m", "airlink.apps", "serve", "--port", str(port),
                                   "--log", str(self.out / "apps" / "server.json"),
                                   "--ready", str(self.out / "apps" / "server.ready")],
                                  stdout=subprocess.DEVNULL, stderr=open(rundir.partial_path(self.out / "apps" / "server.err"), "w"),
                                  preexec_fn=_die_with_runner)
        host_dump = None
        try:
            _wait_for_file(self.out / "apps" / "server.ready", 10, server)
            if cap.host:
                host_dump = _start_tcpdump(rundir.partial_path(self.out / "capture" / "host.pcap"),
                                           plan_doc["ports"], snaplen)
            t0 = time.monotonic()
            with open(rundir.partial_path(self.out / "apps" / "shell.err"), "w") as err:
                # the inside runner needs root for tcpdump and writes into OUTDIR: keep root
                # there (the shells drop to the sudo user when SUDO_UID is set); the whole
                # folder is given to that user at the end of the run instead
                env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID")}
                shell = subprocess.Popen(argv, stdout=open(rundir.partial_path(self.out / "apps" / "shell.out"), "w"),
                                         stderr=err, env=env, preexec_fn=_die_with_runner)
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
        """Give tcpdump's captures and the processes' stdout/stderr their final names (only
        once they have stopped) and record the live stage's files (the shells' logs are
        complete when they exist)."""
        for name in ("capture/inside.pcap", "capture/host.pcap", "apps/server.err", "apps/shell.err",
                     "apps/shell.out"):
            if rundir.partial_path(self.out / name).exists():
                rundir.commit(self.out / name)
        for name in ("capture/inside.pcap", "capture/host.pcap", "downlink.log", "uplink.log",
                     "link-downlink.parquet", "link-uplink.parquet", "link-stats.json"):
            if (self.out / name).exists():
                self.folder.record(self.out / name, stage="live")
        self.folder.record_tree(self.out / "apps", stage="live")


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
    # -Z root: tcpdump's drop to its own user would clear the parent-death signal
    proc = subprocess.Popen(["tcpdump", "-Z", "root", "-i", interface, "-s", str(snaplen), "-U", "-n", "-w", str(path),
                             "-y", "LINUX_SLL", flt] if interface == "any" else
                            ["tcpdump", "-Z", "root", "-i", interface, "-s", str(snaplen), "-U", "-n", "-w", str(path), flt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_runner)
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
