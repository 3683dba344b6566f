#!/usr/bin/env python3
"""Many shells at once: N `airlink link` shells at the same time, each with its own bulk
TCP download (iperf3 -R, cubic) through a constant-rate trace (default 20 Mbit/s).

What users run, as whole processes: N ``airlink link TRACE --stats S -- iperf3 -c
$AIRLINK_BASE -R -t T --json`` started together in one throw-away namespace (one iperf3
server per shell on its own port). Per N it prints the lowest, median and highest
goodput / achievable goodput (capacity x 1448/1500) over the N shells, whether every one
reached 0.95, the shells' CPU seconds, and whether anything was left behind afterwards
(namespaces, network devices, processes). The largest N where every shell reaches 0.95 is
the number this machine carries. There is no reference tool (mm-link is not installable
here). Usage (root)::

    sudo .venv/bin/python benchmarks/bench_concurrency.py                   # N = 1 5 10 20 30
    sudo .venv/bin/python benchmarks/bench_concurrency.py --shells 20 --seconds 20
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import AIRLINK, PAYLOAD, airlink_processes, sh, throwaway_namespace, user_env  # noqa: E402


def netns_names() -> set:
    return {l.split()[0] for l in sh("ip", "netns", "list").stdout.splitlines() if l.strip()}


def run_n(n: int, rate: float, seconds: int, work: Path) -> dict:
    trace = work / f"c{rate:g}.down"
    if not trace.exists():
        sh(AIRLINK, "trace", "constant", f"{rate:g}Mbit/s", "-o", trace).check_returncode()
    before, procs_before = netns_names(), set(airlink_processes("link"))
    ratios, cpu, errors = [], 0.0, []
    with throwaway_namespace(f"many{n}", iperf_ports=[5400 + i for i in range(n)]) as ns:
        shells = []
        for i in range(n):
            out, stats = work / f"n{n}-{i}.json", work / f"n{n}-{i}.stats"
            shells.append((subprocess.Popen(
                ["ip", "netns", "exec", ns, AIRLINK, "link", str(trace), "--stats", str(stats),
                 "--", "sh", "-c", f"iperf3 -c $AIRLINK_BASE -p {5400 + i} -R -t {seconds} -C cubic --json > {out}"],
                env=user_env(), stderr=subprocess.PIPE, text=True), out, stats))
        for p, out, stats in shells:
            p.wait(timeout=seconds + 120)
            if p.returncode != 0:
                errors.append(p.stderr.read().strip()[-200:])
                continue
            d = json.loads(out.read_text())
            ratios.append(d["end"]["sum_received"]["bits_per_second"] / (rate * 1e6 * PAYLOAD))
            cpu += json.loads(stats.read_text())["cpu_s"]
        links = sh("ip", "netns", "exec", ns, "ip", "-o", "link").stdout
        left_devices = [l.split(":")[1].strip() for l in links.splitlines() if l.split(":")[1].strip() != "lo"]
    time.sleep(0.5)
    return {"shells": n, "ok": len(ratios), "errors": errors,
            "min": min(ratios, default=float("nan")), "median": statistics.median(ratios) if ratios else float("nan"),
            "max": max(ratios, default=float("nan")), "all_ge_0.95": bool(ratios) and len(ratios) == n and min(ratios) >= 0.95,
            "shell_cpu_s": round(cpu, 2), "left_devices": left_devices,
            "left_namespaces": sorted(netns_names() - before),
            "left_processes": sorted(set(airlink_processes("link")) - procs_before)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shells", type=int, nargs="+", default=[1, 5, 10, 20, 30])
    ap.add_argument("--rate", type=float, default=20.0, help="Mbit/s per shell")
    ap.add_argument("--seconds", type=int, default=15)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_concurrency: needs root (namespaces, TUN)", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} cores, load average {load:.2f} at start; {a.rate:g} Mbit/s per shell, {a.seconds} s")
    print(f"{'shells':>6} {'min':>6} {'median':>7} {'max':>6} {'all>=0.95':>9} {'cpu_s':>7}  left behind")
    carried = 0
    with tempfile.TemporaryDirectory(prefix="airlink-many-") as tmp:
        for n in a.shells:
            r = run_n(n, a.rate, a.seconds, Path(tmp))
            left = r["left_devices"] + r["left_namespaces"] + [str(p) for p in r["left_processes"]]
            print(f"{n:>6} {r['min']:>6.3f} {r['median']:>7.3f} {r['max']:>6.3f} {str(r['all_ge_0.95']):>9} "
                  f"{r['shell_cpu_s']:>7.2f}  {', '.join(left) or 'nothing'}"
                  + (f"  errors: {r['errors']}" if r["errors"] else ""), flush=True)
            if r["all_ge_0.95"]:
                carried = max(carried, n)
    print(f"largest number of shells where every one reached 0.95: {carried}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
