#!/usr/bin/env python3
"""Benchmark: the live cell shell (``airlink cell``) under bulk TCP to every UE.

Runs what a user runs - the ``airlink cell`` command as a whole process - on the
imt-advanced preset (10 UEs x 400 subchannels, 1 ms TTIs, MC-PFS) with one bulk TCP
download (iperf3 -R) per UE from servers on the shell's outer side, and reports per run:

* TTIs handled and TTIs handled late (more than half a TTI after their end), the largest
  lateness - the real-time goal is < 0.1 % late;
* the shell's CPU time per second of run (its own rusage plus its radio process's, in
  ``--stats``), and the radio process's part of it; the shell's own CPU time per TTI
  (without the radio process's: a figure that does not depend on how long the run lasted);
* where else the run's CPU went, for options that move work off the shell (``--rps``): the
  CPU time of the whole process tree (the shell, its radio process, the UEs' commands:
  ``tree_cpu_per_s``), and the machine's busy and softirq time (/proc/stat) and its
  ksoftirqd threads' time per second of the command's wall time - the machine's figures
  include whatever else runs on it;
* the aggregate TCP goodput the UEs received, and its ratio to the capacity ``airlink
  simulate`` gives the same preset and seed with full buffers over the same time (the
  reference: the same scheduler code without real packets).

Several runs; median and min-max printed. Needs root (namespaces, TUN) and iperf3. Every
namespace it makes is deleted afterwards.

    sudo .venv/bin/python benchmarks/bench_cell.py --runs 3 --seconds 5 [--realtime]
    sudo .venv/bin/python benchmarks/bench_cell.py --runs 3 --seconds 5 --realtime --offload alternate
    sudo .venv/bin/python benchmarks/bench_cell.py --users 20 --tti 0.125ms --realtime
    sudo .venv/bin/python benchmarks/bench_cell.py --runs 3 --seconds 5 --realtime --rps off pin
    sudo .venv/bin/python benchmarks/bench_cell.py --runs 3 --seconds 5 --realtime --uplink-slots alternate
    sudo .venv/bin/python benchmarks/bench_cell.py --preset nr-fr2 --users 20 --realtime --writer alternate
    sudo .venv/bin/python benchmarks/bench_cell.py --preset nr-fr2 --users 4 --realtime
    sudo .venv/bin/python benchmarks/bench_cell.py --preset nr-fr2 --users 4 --realtime \
        --set nr_bandwidth_mhz=400 --set n_subchannels=264 --set nr_layers=4
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import AIRLINK, require_root, throwaway_namespace, user_env  # noqa: E402


def _machine_jiffies():
    """(busy, softirq, total) clock ticks of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, v[6], sum(v)


def _ksoftirqd_ticks():
    """CPU clock ticks (user + system) the kernel's ksoftirqd threads used so far: softirq work
    (such as packets steered to another CPU's backlog) that the kernel defers to them."""
    total = 0
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except (OSError, ValueError):
            continue
        if "(ksoftirqd/" in st:
            v = st.rsplit(")", 1)[1].split()
            total += int(v[11]) + int(v[12])
    return total


def one_run(args, work: Path, offload: bool = True, writer: bool = True, rps: str = "off",
            slots: bool = False) -> dict:
    out = work / "ue"
    out.mkdir(parents=True, exist_ok=True)
    ue_cmd = (f"iperf3 -c $AIRLINK_BASE -p $((5200 + AIRLINK_UE)) -R -t {args.seconds} --json "
              f"> {out}/ue$AIRLINK_UE.json")
    with throwaway_namespace("bench-cell", iperf_ports=[5200 + u for u in range(1, args.users + 1)]) as ns:
        cmd = ["ip", "netns", "exec", ns, AIRLINK, "cell", "--preset", args.preset, "--users", str(args.users),
               *(["--tti", args.tti] if args.tti else []), *(a for kv in args.sets for a in ("--set", kv)),
               "--seed", str(args.seed), "--scheduler", args.scheduler, "--queue-args", "packets=500",
               "--stats", str(work / "stats.json"), "--mac-log", str(work / "mac.parquet"),
               *(["--realtime"] if args.realtime else []), *(["--uplink", args.uplink] if args.uplink else []),
               *(["--log-dir", str(work / "logs")] if args.logs else []), "--rps", rps,
               "--", "sh", "-c", ue_cmd]
        t0 = time.monotonic()
        env = user_env()
        if args.python_step:
            env["AIRLINK_PYTHON_STEP"] = "1"
        env["AIRLINK_OFFLOAD"] = "1" if offload else "0"
        env["AIRLINK_CELL_WRITER"] = "1" if writer else "0"
        env["AIRLINK_CELL_UPLINK_SLOTS"] = "1" if slots else "0"
        j0, k0 = _machine_jiffies(), _ksoftirqd_ticks()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.seconds + 120)
        j1, k1 = _machine_jiffies(), _ksoftirqd_ticks()
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"airlink cell failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    stats = json.loads((work / "stats.json").read_text())
    goodput = 0.0
    for u in range(1, args.users + 1):
        d = json.loads((out / f"ue{u}.json").read_text())
        goodput += d["end"]["sum_received"]["bits_per_second"]
    return {"wall_s": wall, "ttis": stats["ttis"], "late_ttis": stats["late_ttis"],
            "late_pct": 100 * stats["late_fraction"], "max_lateness_ms": stats["max_lateness_us"] / 1000,
            "cpu_per_s": stats["cpu_per_s"], "radio_cpu_per_s": stats["radio_cpu_s"] / stats["duration_s"],
            "loop_cpu_us_per_tti": 1e6 * (stats["cpu_s"] - stats["radio_cpu_s"]) / max(stats["ttis"], 1),
            "radio_waits": stats["radio_waits"], "loop_rescues": stats.get("loop_rescues", 0),
            "goodput_mbps": goodput / 1e6, "offload": stats.get("offload", False),
            "writer": stats.get("tun_writer") == "thread", "slots": stats.get("uplink_slots", False),
            "load_1min": os.getloadavg()[0],
            "tree_cpu_per_s": (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) / stats["duration_s"],
            "machine_cpu_per_s": (j1[0] - j0[0]) / os.sysconf("SC_CLK_TCK") / wall,
            "machine_softirq_per_s": (j1[1] - j0[1]) / os.sysconf("SC_CLK_TCK") / wall,
            "ksoftirqd_per_s": (k1 - k0) / os.sysconf("SC_CLK_TCK") / wall,
            "rps": stats.get("rps", {}).get("mode", "off"), "rps_applied": stats.get("rps", {}).get("applied", 0),
            "superpackets": sum(u["downlink"].get("superpackets", 0) for u in stats["ues"]),
            "pieces_cut": sum(u["downlink"].get("pieces_cut", 0) for u in stats["ues"]),
            "step": stats["scheduler_step"]}


def simulated_capacity_mbps(args) -> float:
    from airlink.sim import simulate
    r = simulate(args.preset, seed=args.seed, duration=f"{args.seconds}s", n_users=args.users,
                 scheduler=args.scheduler, **({"tti": args.tti} if args.tti else {}), **_overrides(args.sets))
    return r.summary["aggregate_throughput_mbps"]


def _overrides(sets) -> dict:
    """``--set NAME=VALUE`` options as simulator overrides (values in YAML syntax, as the CLI reads them)."""
    import yaml
    return {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in sets)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5, help="length of each iperf3 download")
    ap.add_argument("--preset", default="imt-advanced")
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scheduler", default="pf", help="the cell's scheduler (pf)")
    ap.add_argument("--tti", help="the cell's TTI (default: the preset's), e.g. 0.125ms")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                    help="a preset parameter for the cell and the simulated reference (repeatable), "
                         "e.g. --set nr_bandwidth_mhz=400 --set n_subchannels=264 --set nr_layers=4")
    ap.add_argument("--python-step", action="store_true",
                    help="decide the TTIs with the Python step (AIRLINK_PYTHON_STEP=1), not the compiled one")
    ap.add_argument("--realtime", action="store_true", help="run the shell with --realtime (SCHED_RR)")
    ap.add_argument("--uplink", metavar="RATE|TRACE", help="each UE's uplink (default unconstrained), e.g. 20Mbit/s")
    ap.add_argument("--offload", choices=("on", "off", "alternate"), default="on",
                    help="the cell's TUN devices with GSO super-packets (on, the default), without "
                         "(off: AIRLINK_OFFLOAD=0), or alternate run by run, off first (--runs per mode), "
                         "each mode summarised on its own")
    ap.add_argument("--writer", choices=("on", "off", "alternate"), default="off",
                    help="the TUN writes in the cell's TTI loop (off, the default), in its writer thread "
                         "(on: AIRLINK_CELL_WRITER=1), or alternate run by run, off first")
    ap.add_argument("--uplink-slots", choices=("on", "off", "alternate"), default="off",
                    help="the UEs' unconstrained uplink read as each packet comes (off, the default), at TTI "
                         "ends only (on: AIRLINK_CELL_UPLINK_SLOTS=1), or alternate run by run, off first")
    ap.add_argument("--rps", nargs="+", default=["off"], metavar="MODE",
                    help="the cell's --rps (Receive Packet Steering on the UEs' devices): one mode, or several "
                         "alternated run by run in the order given, e.g. --rps off pin all")
    ap.add_argument("--logs", action="store_true",
                    help="write the per-UE Mahimahi-format logs (--log-dir), as every `airlink run` of a "
                         "cell does")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep each run's MAC log, stats and iperf3 reports in DIR/runN (to look at the "
                         "late TTIs: the MAC log's late and lateness_us columns)")
    args = ap.parse_args()
    require_root("bench_cell", "iperf3")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-cell-"))
    if [args.offload, args.writer, args.uplink_slots].count("alternate") > 1:
        ap.error("alternate one of --offload, --writer and --uplink-slots, not several")
    choice = {"on": [True], "off": [False], "alternate": [False, True]}
    modes = [(o, w, p, s) for o in choice[args.offload] for w in choice[args.writer]
             for p in args.rps for s in choice[args.uplink_slots]]   # (offload, writer, rps, slotted uplink)
    rows = {m: [] for m in modes}
    try:
        for i in range(args.runs):
            for m in modes:
                name = f"run{i}" + ("" if len(modes) == 1 else
                                    ("-gso" if m[0] else "-plain") + ("-writer" if m[1] else "-loop") + f"-rps-{m[2]}"
                                    + ("-slots" if m[3] else "-asap"))
                row = one_run(args, work / name, offload=m[0], writer=m[1], rps=m[2], slots=m[3])
                rows[m].append(row)
                print(f"{name}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                               for k, v in row.items()), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    cap = simulated_capacity_mbps(args)
    print(f"\n{args.preset}, {args.scheduler}, {args.users} UEs, seed {args.seed}, {args.runs} runs of {args.seconds} s "
          f"bulk TCP per UE{f', --tti {args.tti}' if args.tti else ''}{', --realtime' if args.realtime else ''}; "
          f"step: {rows[modes[0]][0]['step']}")
    for m in modes:
        rs = rows[m]
        print(f"offload {'on (GSO super-packets)' if m[0] else 'off (AIRLINK_OFFLOAD=0)'}, TUN writes in "
              f"{'the writer thread (AIRLINK_CELL_WRITER=1)' if m[1] else 'the TTI loop'}, RPS {m[2]}, uplink "
              f"{'at TTI ends (AIRLINK_CELL_UPLINK_SLOTS=1)' if m[3] else 'as packets come'}"
              f"{'' if all((r['offload'], r['writer'], r['rps'], r['slots']) == m for r in rs) else ' - NOT as asked in every run'}:")
        for key in ("late_pct", "max_lateness_ms", "cpu_per_s", "radio_cpu_per_s", "loop_cpu_us_per_tti",
                    "goodput_mbps", "tree_cpu_per_s", "machine_cpu_per_s", "machine_softirq_per_s", "ksoftirqd_per_s", "load_1min"):
            v = [r[key] for r in rs]
            print(f"{key:>16}: median {statistics.median(v):.4g}  (min {min(v):.4g}, max {max(v):.4g})")
        late, ttis = sum(r["late_ttis"] for r in rs), sum(r["ttis"] for r in rs)
        print(f"{'all runs':>16}: {late} late TTIs of {ttis} = {100 * late / ttis:.4g} %")
        g = statistics.median(r["goodput_mbps"] for r in rs)
        print(f"{'':>16}  live goodput / simulated capacity = {g / cap:.3f}")
    print(f"simulated full-buffer capacity (airlink simulate, same preset/seed): {cap:.1f} Mbit/s")


if __name__ == "__main__":
    main()
