#!/usr/bin/env python3
"""Record, then replay a bulk download: does the replay reproduce the recorded throughput?

1. ``airlink record`` inside ``airlink delay D airlink link RATE --uplink RATE`` (a shell of
   known rate; ``airlink trace constant``) writes a recording (heavy traces, light trains,
   Mahimahi saturator traces).
2. A bulk TCP download (``iperf3 -R -t T -O 2``: the first 2 s, slow start, left out)
   through each replay of that recording: ``airlink link --mode workload REC`` and
   ``airlink delay BASE airlink link REC/mahimahi.down --uplink REC/mahimahi.up``.
3. The replay's mean IP rate (iperf3's received goodput x 1500 / 1448: 1448-byte payloads in
   1500-byte packets) against the recording's heavy downlink rate (``record.json``
   ``down_rate_bps``: 1400-byte opportunities over the trace's span). Goal: within 3 %.

``--engines RATE`` compares instead the workload mode's two engines, the C link core and
the Python loop (``AIRLINK_PURE_PYTHON=1``), on a trace set written by this script (a heavy
trace of RATE Mbit/s in 1400-byte opportunities, light trains of 10 PDOs in their first
millisecond every 250 ms - never slower than the heavy trace, so a bulk download measures
the engine rather than the light service of the bursts that start whenever TCP's queue runs
dry - 5 ms base delay each way): ``--pings`` pings 100 ms apart through ``airlink delay 20
airlink link --mode workload SET`` (RTT min / mean / median / max), and a bulk download
(``iperf3 -R -t T -O 2``) through ``airlink link --mode workload SET`` (its goodput against
the heavy trace's TCP payload rate, 1448/1500 of RATE, and the downlink's bursts and heavy
share from ``--stats``) ``--runs`` times; the sender's namespace gets a 32 MiB ``tcp_wmem``
maximum. ``--logs`` gives the bulk downloads both directions' mm-link logs, as every
``airlink run`` writes them.

Needs root and iperf3. Usage::

    sudo .venv/bin/python benchmarks/bench_record_replay.py                    # ~3 min
    sudo .venv/bin/python benchmarks/bench_record_replay.py --rate 24Mbps --runs 5 --seconds 20
    sudo .venv/bin/python benchmarks/bench_record_replay.py --engines 1000 --runs 3 --seconds 8
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _netns import AIRLINK, PAYLOAD, require_root, throwaway_namespace, user_env  # noqa: E402

RECORD_PORT = 9050
IPERF_PORT = 5201


def run(ns: str, argv, timeout: float, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, *map(str, argv)], env=dict(user_env(), **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


LIGHT_GAP_MS = 250
LIGHT_PDOS = 10
BASE_MS = 5


def engine_set(folder: Path, rate_mbps: float, seconds: float) -> Path:
    """A CellReplay trace set (both directions alike): heavy opportunities of 1400 bytes at
    ``rate_mbps`` spread evenly over the milliseconds of ``seconds``, light trains every
    LIGHT_GAP_MS of LIGHT_PDOS PDOs all in their first millisecond, base delay BASE_MS."""
    folder.mkdir()
    per_ms = rate_mbps * 1e6 / 8 / 1400 / 1000
    ms = int(seconds * 1000)
    heavy = "".join(f"{t}\n" * (int(t * per_ms) - int((t - 1) * per_ms)) for t in range(1, ms + 1))
    pdos = " ".join(["0"] * LIGHT_PDOS)
    light = "".join(f"{t} {BASE_MS} {pdos}\n" for t in range(0, ms + LIGHT_GAP_MS, LIGHT_GAP_MS))
    for d in ("up", "down"):
        (folder / f"{d}-heavy-pdo").write_text(heavy)
        (folder / f"{d}-delay-light-pdo").write_text(light)
    return folder


def engines(args) -> int:
    """The workload mode on the C engine and on the Python loop (module notes)."""
    import re
    rows = {}
    with tempfile.TemporaryDirectory() as d, throwaway_namespace("wlengine", iperf_ports=(IPERF_PORT,)) as ns:
        traces = engine_set(Path(d) / "set", args.engines, 2.0)
        # the sender's socket buffer must hold a bandwidth-delay product (5 Gbit/s x 10 ms
        # and more), above the usual 4 MB tcp_wmem maximum (as bench_replay.py)
        run(ns, ["sysctl", "-qw", f"net.ipv4.tcp_wmem=4096 16384 {32 << 20}"], 10).check_returncode()
        for engine, env in (("c", {}), ("python", {"AIRLINK_PURE_PYTHON": "1"})):
            stats = Path(d) / f"{engine}.json"
            r = run(ns, [AIRLINK, "delay", "20", AIRLINK, "link", "--mode", "workload", traces, "--stats", stats,
                         "--", "sh", "-c", f"ping -n -c {args.pings} -i 0.1 $AIRLINK_BASE"],
                    timeout=args.pings * 0.1 + 60, env=env)
            got = json.loads(stats.read_text())["engine"] if stats.exists() else "?"
            rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", r.stdout)]
            rates, downs = [], []
            for _ in range(args.runs):
                stats.unlink(missing_ok=True)
                logs = ["--downlink-log", Path(d) / "down.log", "--uplink-log", Path(d) / "up.log"] if args.logs else []
                r = run(ns, [AIRLINK, "link", "--mode", "workload", traces, "--stats", stats, *logs, "--", "sh", "-c",
                             f"iperf3 -c $AIRLINK_BASE -p {IPERF_PORT} -R -t {args.seconds:g} -O 2 -J"],
                        timeout=args.seconds + 90, env=env)
                try:
                    rates.append(json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"])
                    downs.append(json.loads(stats.read_text())["downlink"])
                except (ValueError, KeyError, OSError):
                    print(f"{engine}: bulk: no result: {r.stderr.strip()[-300:]}", flush=True)
            rows[engine] = {"engine_ran": got, "rtt_ms": rtts, "goodput_bps": rates,
                            "bursts": [x["bursts"] for x in downs],
                            "heavy_share": [x["heavy_packets"] / max(1, x["departures_packets"]) for x in downs]}
            print(f"{engine}: engine {got}, {len(rtts)} pings, {len(rates)} downloads", flush=True)
    print(f"\nworkload mode, heavy trace {args.engines:g} Mbit/s; load {os.getloadavg()[0]:.1f} at the end")
    achievable = args.engines * 1e6 * PAYLOAD
    for engine, row in rows.items():
        rtt, g = row["rtt_ms"], row["goodput_bps"]
        ping = (f"ping RTT min/mean/median/max {min(rtt):.1f}/{statistics.mean(rtt):.1f}/"
                f"{statistics.median(rtt):.1f}/{max(rtt):.1f} ms ({len(rtt)} of {args.pings})" if rtt else "no pings")
        bulk = (f"bulk median {statistics.median(g) / 1e6:.0f} Mbit/s = {statistics.median(g) / achievable:.3f} "
                f"of the trace (runs {min(g) / achievable:.3f}-{max(g) / achievable:.3f})" if g else "no download")
        if g:
            bulk += (f", downlink bursts median {statistics.median(row['bursts']):.0f}, heavy share "
                     f"{statistics.median(row['heavy_share']):.3f}")
        print(f"  {engine:<7} ({row['engine_ran']}) {ping}; {bulk}")
    if args.json:
        args.json.write_text(json.dumps({"rate_mbps": args.engines, "engines": rows}, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="12Mbps", help="the recorded shell's rate (12Mbps)")
    ap.add_argument("--delay", type=float, default=10, help="one-way delay around it, ms (10)")
    ap.add_argument("--record-seconds", type=float, default=8, help="airlink record --seconds (8)")
    ap.add_argument("--seconds", type=float, default=12, help="iperf3 -t of each replayed download (12)")
    ap.add_argument("--runs", type=int, default=3, help="downloads per replay (3)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    ap.add_argument("--engines", type=float, metavar="RATE",
                    help="compare the workload mode's C engine and Python loop on a set of RATE Mbit/s")
    ap.add_argument("--logs", action="store_true",
                    help="with --engines: the bulk downloads write both directions' mm-link logs, as "
                         "`airlink run` does")
    ap.add_argument("--pings", type=int, default=100, help="with --engines: pings 100 ms apart (100)")
    args = ap.parse_args(argv)
    if args.engines is not None and not args.engines > 0:
        ap.error(f"--engines takes a rate in Mbit/s above 0, got {args.engines:g}")
    if args.pings < 1:
        ap.error(f"--pings takes a count of at least 1, got {args.pings}")
    require_root("bench_record_replay")
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    if args.engines is not None:
        return engines(args)
    results = {}
    with tempfile.TemporaryDirectory() as d, throwaway_namespace("recrep", iperf_ports=(IPERF_PORT,)) as ns:
        tmp = Path(d)
        trace, rec = tmp / "rate.down", tmp / "rec"
        run(ns, [AIRLINK, "trace", "constant", args.rate, "--duration", "1s", "-o", trace], 60).check_returncode()
        server = subprocess.Popen(["ip", "netns", "exec", ns, AIRLINK, "record", "--serve", "--port", str(RECORD_PORT)],
                                  env=user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = run(ns, [AIRLINK, "delay", args.delay, AIRLINK, "link", trace, "--uplink", trace, "--",
                         "sh", "-c", f"sleep 1; {AIRLINK} record $AIRLINK_BASE --port {RECORD_PORT} "
                                     f"--seconds {args.record_seconds:g} -o {rec} --json"],
                    timeout=6 * args.record_seconds + 120)
        finally:
            server.kill()
            server.wait()
        if r.returncode != 0:
            print(f"recording failed: {r.stderr.strip()[-400:]}", file=sys.stderr)
            return 1
        summary = json.loads((rec / "record.json").read_text())
        recorded = summary["down_rate_bps"]
        base = int(round(summary["base_delay_ms"]["median"]))
        print(f"recording: heavy downlink {recorded / 1e6:.3f} Mbit/s (shell {args.rate}), base delay {base} ms",
              flush=True)
        iperf = ["iperf3", "-c", "$AIRLINK_BASE", "-p", str(IPERF_PORT), "-R", "-t", f"{args.seconds:g}",
                 "-O", "2", "-J"]
        replays = {
            "airlink link --mode workload": [AIRLINK, "link", "--mode", "workload", rec],
            "airlink link (saturator)": [AIRLINK, "delay", base, AIRLINK, "link", rec / "mahimahi.down",
                                         "--uplink", rec / "mahimahi.up"],
        }
        for name, shell in replays.items():
            rates = []
            for _ in range(args.runs):
                r = run(ns, [*shell, "--", "sh", "-c", " ".join(iperf)], timeout=args.seconds + 90)
                try:
                    got = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
                except (ValueError, KeyError):
                    print(f"{name}: no result: {r.stderr.strip()[-300:]}", flush=True)
                    continue
                rates.append(got / PAYLOAD)
            results[name] = rates
    print(f"\nrecorded heavy downlink rate {recorded / 1e6:.3f} Mbit/s; replayed bulk download's IP rate "
          f"(iperf3 -R -t {args.seconds:g} -O 2), {args.runs} runs:")
    for name, rates in results.items():
        if not rates:
            print(f"  {name:<30} no result")
            continue
        ratios = [x / recorded for x in rates]
        med = statistics.median(ratios)
        print(f"  {name:<30} median {statistics.median(rates) / 1e6:.3f} Mbit/s = {med:.4f} of the recording "
              f"(runs {min(ratios):.4f}-{max(ratios):.4f}); within 3 %: {'yes' if abs(med - 1) <= 0.03 else 'no'}")
    if args.json:
        args.json.write_text(json.dumps({"recorded_bps": recorded, "replays": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
