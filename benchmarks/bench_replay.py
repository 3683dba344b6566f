#!/usr/bin/env python3
"""Replay-shell speed: bulk TCP download through constant-rate links, airlink vs mm-link.

For each rate (12, 48, 120, 300, 500, 1000 Mbit/s), with and without a nested
``airlink delay 10``, one iperf3 download (``-R``) runs through ``airlink link`` and,
when ``mm-link``/``mm-delay`` are on PATH, through Mahimahi on the same trace file.
Printed per run: goodput / achievable goodput (capacity x 1448/1500, the TCP payload of a
1500-byte IP packet with timestamps), drops outside the configured queue (kernel TUN
drops, softnet drops, write errors), and CPU seconds per gigabit of the shell processes
(airlink: the shells' own rusage; mm-link: the rusage of its process tree minus the
iperf3 client's share). Ratios airlink/mm-link are printed when both ran.

Needs root; every run happens inside a throw-away namespace ``airlink-bench-<pid>`` so
the machine's own namespace is not touched. Usage::

    sudo .venv/bin/python benchmarks/bench_replay.py                 # full table (~3 min)
    sudo .venv/bin/python benchmarks/bench_replay.py --rates 300 --seconds 10 --cc cubic
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
AIRLINK = str(VENV_BIN / "airlink")
PAYLOAD = 1448 / 1500


def sh(*argv, **kw):
    return subprocess.run(list(map(str, argv)), capture_output=True, text=True, **kw)


class BenchNS:
    def __init__(self):
        self.name = f"airlink-bench-{os.getpid()}"
        sh("ip", "netns", "add", self.name).check_returncode()
        sh("ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up").check_returncode()
        self.server = subprocess.Popen(["ip", "netns", "exec", self.name, "iperf3", "-s"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if ":5201 " in sh("ip", "netns", "exec", self.name, "ss", "-ltnH").stdout:
                break
            time.sleep(0.05)

    def run(self, argv, timeout):
        env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        for k in ("AIRLINK_BASE", "AIRLINK_BLOCK", "AIRLINK_DEPTH", "MAHIMAHI_BASE"):
            env.pop(k, None)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(["ip", "netns", "exec", self.name, *map(str, argv)], capture_output=True,
                           text=True, timeout=timeout, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        r.cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        return r

    def close(self):
        self.server.kill()
        self.server.wait()
        for pid in sh("ip", "netns", "pids", self.name).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", self.name)


def softnet_drops() -> int:
    total = 0
    with open("/proc/net/softnet_stat") as f:
        for line in f:
            total += int(line.split()[1], 16)
    return total


def iperf_cmd(out: Path, seconds: int, cc: str, base_var: str) -> str:
    cc_opt = f"-C {cc} " if cc else ""
    return f"iperf3 -c ${base_var} -R {cc_opt}-t {seconds} -O 2 --json > {out}"


def run_airlink(ns, trace, rate, nested, seconds, cc, tmp):
    out, outer, inner = tmp / "ip.json", tmp / "outer.json", tmp / "inner.json"
    for p in (out, outer, inner):
        p.unlink(missing_ok=True)
    link = [AIRLINK, "link", trace, "--stats", inner if nested else outer]
    cmd = ["sh", "-c", iperf_cmd(out, seconds, cc, "AIRLINK_BASE")]
    argv = ([AIRLINK, "delay", "10", "--stats", outer, "airlink", *link[1:], "--"] if nested
            else link + ["--"]) + cmd
    sd = softnet_drops()
    r = ns.run(argv, timeout=seconds + 60)
    if r.returncode != 0 or not out.exists():
        return {"error": (r.stderr or "no iperf3 output").strip().splitlines()[-1:]}
    stats = [json.loads(p.read_text()) for p in (outer, inner) if p.exists()]
    drops = softnet_drops() - sd
    for s in stats:
        drops += s["write_errors"]
        for side in s["kernel"].values():
            if side:
                drops += side["tx_dropped"] + side["rx_dropped"]
    link = json.loads((inner if nested else outer).read_text())
    carried = (link["downlink"]["departures_bytes"] + link["uplink"]["departures_bytes"]) * 8
    return summarise(json.loads(out.read_text()), rate, sum(s["cpu_s"] for s in stats), drops, carried)


def run_mahimahi(ns, trace, rate, nested, seconds, cc, tmp):
    out = tmp / "mm.json"
    out.unlink(missing_ok=True)
    cmd = iperf_cmd(out, seconds, cc, "MAHIMAHI_BASE")
    argv = (["mm-delay", "10"] if nested else []) + ["mm-link", trace, trace, "--", "sh", "-c", cmd]
    sd = softnet_drops()
    r = ns.run(argv, timeout=seconds + 60)
    if r.returncode != 0 or not out.exists():
        return {"error": (r.stderr or "no iperf3 output").strip().splitlines()[-1:]}
    d = json.loads(out.read_text())
    # the tree's CPU minus the iperf3 client's own share (its --json cpu_utilization_percent)
    client = d["end"].get("cpu_utilization_percent", {}).get("host_total", 0) / 100 * seconds
    return summarise(d, rate, max(r.cpu_s - client, 0.0), softnet_drops() - sd)


def summarise(d, rate, cpu_s, drops, carried_bits=None):
    """CPU per gigabit counts every IP bit the link carried while the shells ran (the
    airlink shells count them; for mm-link they are estimated from iperf3's bytes over
    the measured seconds plus the 2 omitted ones)."""
    if "error" in d:
        return {"error": d["error"]}
    recv = d["end"]["sum_received"]
    goodput = recv["bits_per_second"]
    total_bits = carried_bits or (recv["bytes"] * 8) * (recv["seconds"] + 2) / max(recv["seconds"], 1e-9) / PAYLOAD
    return {"goodput_mbps": goodput / 1e6, "ratio": goodput / (rate * 1e6 * PAYLOAD),
            "drops_outside_queue": drops, "cpu_s": cpu_s, "cpu_s_per_gbit": cpu_s / (total_bits / 1e9)}


def fmt(res):
    if "error" in res:
        return f"error: {res['error']}"
    return (f"{res['goodput_mbps']:8.1f} Mbit/s  ratio {res['ratio']:.3f}  drops {res['drops_outside_queue']:>4}"
            f"  cpu {res['cpu_s']:5.2f} s = {res['cpu_s_per_gbit']:.2f} s/Gbit")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="12,48,120,300,500,1000", help="Mbit/s, comma separated")
    ap.add_argument("--seconds", type=int, default=8, help="iperf3 measurement time (after 2 s omitted)")
    ap.add_argument("--cc", default="cubic", help="TCP congestion control of the sender ('' = system default)")
    ap.add_argument("--no-nested", action="store_true", help="skip the nested delay runs")
    ap.add_argument("--json", type=Path, help="also write all results as JSON")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_replay: needs root (network namespaces and TUN)", file=sys.stderr)
        return 2
    from airlink.traces import constant, write_trace
    rates = [float(r) for r in args.rates.split(",")]
    have_mm = shutil.which("mm-link") is not None and shutil.which("mm-delay") is not None
    if not have_mm:
        print("mm-link comparison skipped: mm-link/mm-delay not on PATH "
              "(Mahimahi is not packaged in Debian's archive here)")
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; sender congestion control: "
          f"{args.cc or 'system default'}; iperf3 -R -t {args.seconds} -O 2")
    ns = BenchNS()
    results = []
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            os.chmod(tmp, 0o755)
            for rate in rates:
                trace = tmp / f"c{rate:g}.down"
                write_trace(constant(rate * 1e6, 1), trace)   # Mahimahi file: both tools read it
                for nested in ([False] if args.no_nested else [False, True]):
                    label = f"{rate:6g} Mbit/s {'delay 10 + link' if nested else 'link          '}"
                    a = run_airlink(ns, trace, rate, nested, args.seconds, args.cc, tmp)
                    row = {"rate_mbps": rate, "nested_delay": nested, "airlink": a}
                    print(f"{label}  airlink {fmt(a)}", flush=True)
                    if have_mm:
                        m = run_mahimahi(ns, trace, rate, nested, args.seconds, args.cc, tmp)
                        row["mahimahi"] = m
                        print(f"{' ' * len(label)}  mm-link {fmt(m)}", flush=True)
                        if "error" not in a and "error" not in m:
                            print(f"{' ' * len(label)}  airlink/mm-link: goodput x{a['goodput_mbps'] / m['goodput_mbps']:.2f}, "
                                  f"CPU/Gbit x{a['cpu_s_per_gbit'] / max(m['cpu_s_per_gbit'], 1e-9):.2f}")
                    results.append(row)
    finally:
        ns.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
