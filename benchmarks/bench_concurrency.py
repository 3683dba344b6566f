#!/usr/bin/env python3
"""Many shells at once: N `airlink link` shells at the same time, each with its own bulk
TCP download (iperf3 -R, cubic) through a constant-rate trace (default 20 Mbit/s).

What users run, as whole processes: N ``airlink link TRACE --stats S -- iperf3 -c
$AIRLINK_BASE -R -t T --json`` started together in one throw-away namespace (one iperf3
server per shell on its own port). Per N it prints the lowest, median and highest
goodput / achievable goodput (capacity x 1448/1500) over the N shells, whether every one
reached 0.95, the shells' CPU seconds (all, and the median shell's), the share of both
cores busy during the transfers (the whole machine, other users included), the shells'
memory (summed proportional set size, shared pages split among their users) and whether
anything was left behind afterwards (namespaces, network devices, processes). All shells
start first and wait; their transfers begin together once all N are up (``start_s``: how
long starting them took). The largest N where every shell reaches 0.95 is
the number this machine carries.

The cost of TCP itself, in the same run (``--tbf``, the default): before the shells, the same N
transfers through N plain veth pairs, each with the kernel's token bucket (``tc tbf``) at
the same rate on the server's side (burst one millisecond of the rate, at least 1600
bytes), no shell in the path. What the shells add is the difference between the two rows.
Usage (root)::

    sudo .venv/bin/python benchmarks/bench_concurrency.py                   # N = 1 5 10 20 30
    sudo .venv/bin/python benchmarks/bench_concurrency.py --shells 50 100 200 --seconds 10
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import (AIRLINK, PAYLOAD, airlink_processes, require_root, sh,  # noqa: E402
                    throwaway_namespace, user_env)


def shells_of(work: Path) -> set:
    """Running ``airlink link`` processes of this run (their trace lies in ``work``): other
    users' shells on a shared machine are not this run's leftovers."""
    mine = set()
    for pid in airlink_processes("link"):
        try:
            if str(work).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                mine.add(pid)
        except OSError:
            pass
    return mine


def netns_names() -> set:
    return {l.split()[0] for l in sh("ip", "netns", "list").stdout.splitlines() if l.strip()}


def cpu_busy() -> tuple:
    """``(busy, total)`` jiffies of all cores since boot (/proc/stat)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def pss_kib(pid: int) -> int:
    """Proportional set size of ``pid`` (shared pages divided among their users), 0 once gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_tbf(n: int, rate: float, seconds: int, work: Path) -> dict:
    """The same N downloads over N veth pairs with a ``tc tbf`` at ``rate`` (no shell)."""
    nets = ipaddress.ip_network("10.128.0.0/12").subnets(new_prefix=30)
    burst = max(1600, int(rate * 1e6 / 8 / 1000))
    clients, ratios, errors = [], [], []
    with throwaway_namespace(f"tbf{n}", iperf_ports=[5400 + i for i in range(n)]) as ns:
        try:
            procs = []
            for i in range(n):
                net = next(nets)
                server, client = f"{net.network_address + 1}", f"{net.network_address + 2}"
                cns = f"{ns}-c{i}"
                sh("ip", "netns", "add", cns).check_returncode()
                clients.append((cns, server))
                sh("ip", "-n", cns, "link", "set", "lo", "up")
                sh("ip", "-n", ns, "link", "add", f"t{i}s", "type", "veth", "peer", "name", "t0c",
                   "netns", cns).check_returncode()
                for where, dev, addr in ((ns, f"t{i}s", server), (cns, "t0c", client)):
                    sh("ip", "-n", where, "addr", "add", f"{addr}/30", "dev", dev).check_returncode()
                    sh("ip", "-n", where, "link", "set", dev, "up").check_returncode()
                sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", f"t{i}s", "root", "tbf", "rate",
                   f"{rate:g}mbit", "burst", str(burst), "latency", "100ms").check_returncode()
            busy0 = cpu_busy()
            for i, (cns, server) in enumerate(clients):
                out = work / f"tbf{n}-{i}.json"
                procs.append((subprocess.Popen(["ip", "netns", "exec", cns, "sh", "-c",
                                                f"iperf3 -c {server} -p {5400 + i} -R -t {seconds} -C cubic "
                                                f"--json > {out}"], stderr=subprocess.PIPE, text=True), out))
            for p, out in procs:
                p.wait(timeout=seconds + 120)
                try:
                    d = json.loads(out.read_text())
                    ratios.append(d["end"]["sum_received"]["bits_per_second"] / (rate * 1e6 * PAYLOAD))
                except (OSError, ValueError, KeyError):
                    errors.append((p.stderr.read() or "no iperf3 output").strip()[-200:])
            busy1 = cpu_busy()
        finally:
            for cns, _ in clients:
                sh("ip", "netns", "del", cns)
    return {"shells": n, "ok": len(ratios), "errors": errors,
            "min": min(ratios, default=float("nan")), "median": statistics.median(ratios) if ratios else float("nan"),
            "max": max(ratios, default=float("nan")), "below_0.95": sum(r < 0.95 for r in ratios),
            "all_ge_0.95": bool(ratios) and len(ratios) == n and min(ratios) >= 0.95,
            "machine_busy": round((busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]), 3)}


def run_n(n: int, rate: float, seconds: int, work: Path) -> dict:
    trace = work / f"c{rate:g}.down"
    if not trace.exists():
        sh(AIRLINK, "trace", "constant", f"{rate:g}Mbit/s", "-o", trace).check_returncode()
    before = {name for name in netns_names() if name.startswith(f"airlink-many{n}-")}
    ratios, cpu, errors = [], [], []
    ready, go = work / f"ready{n}", work / f"go{n}"
    ready.mkdir()
    with throwaway_namespace(f"many{n}", iperf_ports=[5400 + i for i in range(n)]) as ns:
        shells = []
        t_start = time.monotonic()
        for i in range(n):
            out, stats = work / f"n{n}-{i}.json", work / f"n{n}-{i}.stats"
            # every shell waits for the go, so that all N transfers run at the same time
            cmd = (f"touch {ready}/{i}; while [ ! -e {go} ]; do sleep 0.2; done; "
                   f"iperf3 -c $AIRLINK_BASE -p {5400 + i} -R -t {seconds} -C cubic --json > {out}")
            shells.append((subprocess.Popen(
                ["ip", "netns", "exec", ns, AIRLINK, "link", str(trace), "--stats", str(stats), "--", "sh", "-c", cmd],
                env=user_env(), stderr=subprocess.PIPE, text=True), out, stats))
        while len(list(ready.iterdir())) < n and any(p.poll() is None for p, _, _ in shells) \
                and time.monotonic() - t_start < 900:
            time.sleep(0.5)
        started = len(list(ready.iterdir()))
        startup_s = time.monotonic() - t_start
        busy0 = cpu_busy()
        go.touch()
        time.sleep(seconds / 2)
        pss = sum(pss_kib(pid) for pid in airlink_processes("link")) / 1024
        for p, out, stats in shells:
            p.wait(timeout=seconds + 300)
            if p.returncode != 0:
                errors.append(p.stderr.read().strip()[-200:])
                continue
            d = json.loads(out.read_text())
            ratios.append(d["end"]["sum_received"]["bits_per_second"] / (rate * 1e6 * PAYLOAD))
            cpu.append(json.loads(stats.read_text())["cpu_s"])
        busy1 = cpu_busy()
        links = sh("ip", "netns", "exec", ns, "ip", "-o", "link").stdout
        left_devices = [l.split(":")[1].strip() for l in links.splitlines() if l.split(":")[1].strip() != "lo"]
    time.sleep(0.5)
    return {"shells": n, "started": started, "startup_s": round(startup_s, 1), "ok": len(ratios), "errors": errors,
            "min": min(ratios, default=float("nan")), "median": statistics.median(ratios) if ratios else float("nan"),
            "max": max(ratios, default=float("nan")),
            "below_0.95": sum(r < 0.95 for r in ratios),
            "all_ge_0.95": bool(ratios) and len(ratios) == n and min(ratios) >= 0.95,
            "shell_cpu_s": round(sum(cpu), 2), "shell_cpu_median_s": round(statistics.median(cpu), 2) if cpu else None,
            "machine_busy": round((busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]), 3),
            "shells_pss_mib": round(pss), "left_devices": left_devices,
            "left_namespaces": sorted({name for name in netns_names() if name.startswith(f"airlink-many{n}-")}
                                      - before),
            "left_processes": sorted(shells_of(work))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shells", type=int, nargs="+", default=[1, 5, 10, 20, 30],
                    help="numbers of shells to run at once, one run each (e.g. 50 100 200)")
    ap.add_argument("--rate", type=float, default=20.0, help="Mbit/s per shell")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--no-tbf", dest="tbf", action="store_false",
                    help="skip the reference of N veth pairs with a tc tbf (no shell)")
    a = ap.parse_args(argv)
    require_root("bench_concurrency", "iperf3", "tc")
    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} cores, load average {load:.2f} at start; {a.rate:g} Mbit/s per shell, {a.seconds} s")
    print(f"{'shells':>6} {'start_s':>7} {'min':>6} {'median':>7} {'max':>6} {'<0.95':>5} {'cpu_s':>7} "
          f"{'cpu/shell':>9} {'busy':>5} {'pss_MiB':>7}  left behind")
    carried = carried_tbf = 0
    with tempfile.TemporaryDirectory(prefix="airlink-many-") as tmp:
        for n in a.shells:
            if a.tbf:
                r = run_tbf(n, a.rate, a.seconds, Path(tmp))
                print(f"{n:>6} {'veth+tbf':>7} {r['min']:>6.3f} {r['median']:>7.3f} {r['max']:>6.3f} "
                      f"{r['below_0.95']:>5} {'-':>7} {'-':>9} {r['machine_busy']:>5.2f} {'-':>7}  (no shell)"
                      + (f"  errors: {r['errors'][:2]}" if r["errors"] else ""), flush=True)
                if r["all_ge_0.95"]:
                    carried_tbf = max(carried_tbf, n)
            r = run_n(n, a.rate, a.seconds, Path(tmp))
            left = r["left_devices"] + r["left_namespaces"] + [str(p) for p in r["left_processes"]]
            print(f"{n:>6} {r['startup_s']:>7.1f} {r['min']:>6.3f} {r['median']:>7.3f} {r['max']:>6.3f} "
                  f"{r['below_0.95']:>5} {r['shell_cpu_s']:>7.2f} {r['shell_cpu_median_s'] or 0:>9.2f} "
                  f"{r['machine_busy']:>5.2f} {r['shells_pss_mib']:>7}  {', '.join(left) or 'nothing'}"
                  + (f"  errors: {r['errors']}" if r["errors"] else ""), flush=True)
            if r["all_ge_0.95"]:
                carried = max(carried, n)
    print(f"largest number of shells where every one reached 0.95: {carried}"
          + (f" (veth pairs with tbf: {carried_tbf})" if a.tbf else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
