#!/usr/bin/env python3
"""Replay-shell speed at gigabit rates: bulk TCP download through constant-rate links.

What users run: ``airlink delay 10 airlink link TRACE -- iperf3 -c ... -R`` (nested) at
2000 and 5000 Mbit/s, and ``airlink link TRACE -- iperf3 ...`` alone at 10000 Mbit/s
(``--nested-rates``, ``--link-rates``), each in offload mode (the default: GSO
super-packets cross the shells whole) and once in plain mode (``AIRLINK_OFFLOAD=0``,
every packet crosses user space at 1500 bytes). The sender is iperf3 in a throw-away
namespace outside the shells (cubic), the receiver iperf3 ``-R`` inside.

Printed per configuration (median and min-max over ``--runs`` runs):

* goodput / achievable, achievable = capacity x 1448/1500 (the TCP payload of a
  1500-byte IP packet with timestamps);
* the shells' CPU seconds (their own user+system rusage, from ``--stats``) per gigabit
  of IP traffic they carried;
* drops outside the configured queue (kernel TUN drops, softnet drops, write errors).

The sender's namespace gets a 32 MiB ``tcp_wmem`` maximum (``--sender-wmem``): at 2 Gbit/s
with a 20 ms RTT the bandwidth-delay product is 5 MB, more than the usual 4 MB default,
which alone caps such a download near 0.6 of the link whatever the shells do.

The physical reference in the same run: kernel TCP between two namespaces over a plain
veth pair (no shell), with the kernel's offloads (TSO/GSO/GRO, checksums) on and off.
Mahimahi's ``mm-link`` runs on the same trace files where it is installed (``--mahimahi-bin``),
as ``--mm-user`` (it refuses root); nested, the 10 ms delay around it is ``airlink delay``.
An unprivileged client may only choose a congestion control the host allows
(``tcp_allowed_congestion_control``); otherwise Mahimahi's row runs with the sender's default and
names it: give ``--cc`` that default (e.g. ``--cc bbr``) to compare like with like.

Needs root and iperf3; everything runs inside namespaces this script makes and deletes::

    sudo .venv/bin/python benchmarks/bench_replay.py                    # ~3 min
    sudo .venv/bin/python benchmarks/bench_replay.py --nested-rates 300 --link-rates '' --runs 1
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import (AIRLINK, PAYLOAD, add_mahimahi_options, as_user, require_root, sh,  # noqa: E402
                    throwaway_namespace, user_env, why_not_runnable)


def ns_run(ns, argv, timeout, env=None):
    """Run ``argv`` in namespace ``ns``; the result carries the CPU seconds of its tree."""
    before = os.times()
    r = subprocess.run(["ip", "netns", "exec", ns, *map(str, argv)], capture_output=True, text=True,
                       timeout=timeout, env=env or user_env())
    after = os.times()
    r.cpu_s = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return r


def softnet_drops() -> int:
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f)


def iperf_cmd(out: Path, seconds: int, cc: str, base_var: str, host=None) -> str:
    cc_opt = f"-C {cc} " if cc else ""
    return f"iperf3 -c {host or '$' + base_var} -R {cc_opt}-t {seconds} -O 2 --json > {out}"


def summarise(d, rate_mbps, cpu_s, drops, carried_bits):
    if "error" in d:
        return {"error": [d["error"]]}
    recv = d["end"]["sum_received"]
    goodput = recv["bits_per_second"]
    out = {"goodput_mbps": goodput / 1e6, "drops_outside_queue": drops, "cpu_s": cpu_s}
    if rate_mbps:
        out["ratio"] = goodput / (rate_mbps * 1e6 * PAYLOAD)
    if carried_bits:
        out["cpu_s_per_gbit"] = cpu_s / (carried_bits / 1e9)
    return out


def run_airlink(ns, trace, rate, nested, seconds, cc, tmp, offload, logs=False):
    out, outer, inner = tmp / "ip.json", tmp / "outer.json", tmp / "inner.json"
    for p in (out, outer, inner):
        p.unlink(missing_ok=True)
    link = [AIRLINK, "link", trace, "--stats", inner if nested else outer]
    if logs:        # what `airlink run` writes of a link with one trace: its mm-link and per-TTI logs
        link += ["--downlink-log", tmp / "down.log", "--downlink-tti-log", tmp / "down-tti.parquet"]
    cmd = ["sh", "-c", iperf_cmd(out, seconds, cc, "AIRLINK_BASE")]
    argv = ([AIRLINK, "delay", "10", "--stats", outer, "airlink", *link[1:], "--"] if nested
            else link + ["--"]) + cmd
    env = dict(user_env(), AIRLINK_OFFLOAD="1" if offload else "0")
    sd = softnet_drops()
    r = ns_run(ns, argv, seconds + 60, env)
    if r.returncode != 0 or not out.exists():
        return {"error": (r.stderr or "no iperf3 output").strip().splitlines()[-1:]}
    stats = [json.loads(p.read_text()) for p in (outer, inner) if p.exists()]
    drops = softnet_drops() - sd
    for s in stats:
        drops += s["write_errors"]
        for side in s["kernel"].values():
            if side:
                drops += side["tx_dropped"] + side["rx_dropped"]
        if s.get("offload") is not offload:
            return {"error": [f"offload mode {offload} asked, shell ran with {s.get('offload')}"]}
    link = json.loads((inner if nested else outer).read_text())
    carried = (link["downlink"]["departures_bytes"] + link["uplink"]["departures_bytes"]) * 8
    return summarise(json.loads(out.read_text()), rate, sum(s["cpu_s"] for s in stats), drops, carried)


def run_mahimahi(ns, trace, rate, nested, seconds, cc, tmp, mm_bin: Path, user: str):
    """Mahimahi on the same trace, as ``user`` (its tools refuse root). Nested, the 10 ms
    delay is airlink's around ``mm-link``: a shell inside ``mm-delay`` needs IP forwarding in
    a namespace that copies the host's root-namespace setting, which this script leaves alone."""
    out_dir = tmp / "mm"
    out_dir.mkdir(exist_ok=True)
    os.chmod(out_dir, 0o777)
    out = out_dir / "mm.json"
    out.unlink(missing_ok=True)
    cmd = iperf_cmd(out, seconds, cc, "AIRLINK_BASE" if nested else "MAHIMAHI_BASE")
    forward = ["sh", "-c", 'sysctl -qw net.ipv4.ip_forward=1 && exec "$@"', "sh"]
    mm = as_user(user, ["mm-link", trace, trace, "--", "sh", "-c", cmd], mm_bin)
    argv = [AIRLINK, "delay", "10", "--", *forward, *mm] if nested else [*forward, *mm]
    sd = softnet_drops()
    r = ns_run(ns, argv, seconds + 60)
    if r.returncode != 0 or not out.exists():
        return {"error": (r.stderr or "no iperf3 output").strip().splitlines()[-1:]}
    d = json.loads(out.read_text())
    if "error" in d:
        return summarise(d, rate, 0, 0, 0)
    # the tree's CPU minus the iperf3 client's own share; bits estimated from iperf3's bytes
    client = d["end"].get("cpu_utilization_percent", {}).get("host_total", 0) / 100 * seconds
    recv = d["end"]["sum_received"]
    bits = recv["bytes"] * 8 * (recv["seconds"] + 2) / max(recv["seconds"], 1e-9) / PAYLOAD
    return summarise(d, rate, max(r.cpu_s - client, 0.0), softnet_drops() - sd, bits)


def unprivileged_cc(cc: str) -> str:
    """The congestion control Mahimahi's run can use: an unprivileged iperf3 client may only
    ask for one in ``tcp_allowed_congestion_control``; otherwise '' (the sender's default)."""
    allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split()
    return cc if cc in allowed else ""


# -- the plain-veth reference ---------------------------------------------------------------

SIOCETHTOOL = 0x8946
# legacy ethtool "set" commands (struct ethtool_value {u32 cmd, data}); still honoured
ETHTOOL_OFF = {"rx-checksum": 0x15, "tx-checksum": 0x17, "scatter-gather": 0x19, "tso": 0x1F,
               "gso": 0x24, "gro": 0x2C}


@contextmanager
def in_netns(name: str):
    from airlink.replay.plumbing import CLONE_NEWNET, setns
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        setns(target, CLONE_NEWNET)
        yield
    finally:
        setns(own, CLONE_NEWNET)
        os.close(own)
        os.close(target)


def offloads_off(ns: str, dev: str):
    """``ethtool -K DEV tso off gso off gro off sg off tx off rx off`` (ethtool is not
    installed here), by the SIOCETHTOOL ioctl inside namespace ``ns``."""
    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for name, cmd in ETHTOOL_OFF.items():
                value = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
                ifreq = struct.pack("16sP8x", dev.encode(), ctypes.addressof(value))
                try:
                    fcntl.ioctl(s, SIOCETHTOOL, ifreq)
                except OSError as exc:
                    print(f"  (veth {dev}: could not turn {name} off: {exc.strerror})")
        finally:
            s.close()


def run_veth(server_ns, seconds, cc, tmp, offload: bool):
    client = f"airlink-veth-{os.getpid()}"
    sh("ip", "netns", "add", client).check_returncode()
    try:
        sh("ip", "-n", client, "link", "set", "lo", "up")
        sh("ip", "-n", server_ns, "link", "add", "vbs", "type", "veth", "peer", "name", "vbc",
           "netns", client).check_returncode()
        for ns, dev, addr in ((server_ns, "vbs", "10.251.0.1/30"), (client, "vbc", "10.251.0.2/30")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev).check_returncode()
            sh("ip", "-n", ns, "link", "set", dev, "up").check_returncode()
            if not offload:
                offloads_off(ns, dev)
        out = tmp / "veth.json"
        out.unlink(missing_ok=True)
        r = ns_run(client, ["sh", "-c", iperf_cmd(out, seconds, cc, "", host="10.251.0.1")], seconds + 60)
        if r.returncode != 0 or not out.exists():
            return {"error": (r.stderr or "no iperf3 output").strip().splitlines()[-1:]}
        return summarise(json.loads(out.read_text()), None, 0.0, 0, None)
    finally:
        sh("ip", "-n", server_ns, "link", "del", "vbs")
        sh("ip", "netns", "del", client)


# -- reporting ------------------------------------------------------------------------------

def spread(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]" if len(values) > 1 \
        else fmt.format(med)


def when_server_free(run, *args, tries: int = 30):
    """``run(*args)``, again after a second while the iperf3 server is still busy with the
    previous test (a slow shell can hold it for a while after its client has gone)."""
    for _ in range(tries):
        r = run(*args)
        if "server is busy" not in str(r.get("error", "")):
            return r
        time.sleep(1)
    return r


def report(label, runs):
    ok = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    line = f"{label:46s}"
    if ok:
        line += f" {spread([r['goodput_mbps'] for r in ok], '{:.0f}'):>17s} Mbit/s"
        if "ratio" in ok[0]:
            line += f"  ratio {spread([r['ratio'] for r in ok], '{:.3f}'):>19s}"
        if "cpu_s_per_gbit" in ok[0]:
            line += f"  cpu {spread([r['cpu_s_per_gbit'] for r in ok], '{:.3f}'):>19s} s/Gbit"
            line += f"  drops {max(r['drops_outside_queue'] for r in ok)}"
    if errors:
        line += f"  ({len(errors)} failed: {errors[0]})"
    print(line, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nested-rates", default="2000,5000",
                    help="Mbit/s with 'airlink delay 10' around the link (comma separated)")
    ap.add_argument("--link-rates", default="10000", help="Mbit/s through one 'airlink link' alone")
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration in offload mode")
    ap.add_argument("--plain-runs", type=int, default=1, help="runs per configuration in plain mode (0: skip)")
    ap.add_argument("--veth-runs", type=int, default=2, help="runs of the plain-veth reference (0: skip)")
    ap.add_argument("--seconds", type=int, default=5, help="iperf3 measurement time (after 2 s omitted)")
    ap.add_argument("--cc", default="cubic", help="TCP congestion control of the sender ('' = system default)")
    ap.add_argument("--sender-wmem", type=int, default=32 << 20,
                    help="tcp_wmem maximum (bytes) of the sender's namespace (0: the system's)")
    ap.add_argument("--logs", action="store_true",
                    help="the link shell writes its downlink's mm-link and per-TTI logs, as `airlink run` "
                         "does")
    ap.add_argument("--json", type=Path, help="also write all results as JSON")
    add_mahimahi_options(ap)
    args = ap.parse_args(argv)
    require_root("bench_replay")
    from airlink.traces import constant, write_trace
    configs = [(float(r), True) for r in args.nested_rates.split(",") if r.strip()] + \
              [(float(r), False) for r in args.link_rates.split(",") if r.strip()]
    why_not_mm = why_not_runnable(args.mahimahi_bin, ("mm-link", "mm-delay"), args.mm_user)
    have_mm = not why_not_mm
    if not have_mm:
        print(f"Mahimahi: not installed ({why_not_mm})")
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, Linux {os.uname().release}, load average {load:.1f} at start; "
          f"sender {args.cc or 'system default'}, tcp_wmem max {args.sender_wmem or 'of the system'}; iperf3 -R -t {args.seconds} -O 2; "
          f"median [min-max] over runs")
    results = []
    t0 = time.monotonic()
    with throwaway_namespace("replay-bench", iperf_ports=(5201,)) as ns, tempfile.TemporaryDirectory() as d:
        if args.sender_wmem:
            # the sender's socket buffer must hold a bandwidth-delay product: 2 Gbit/s x 20 ms
            # = 5 MB, above the usual 4 MB tcp_wmem maximum (which caps such a run near 0.6)
            sh("ip", "netns", "exec", ns, "sysctl", "-w",
               f"net.ipv4.tcp_wmem=4096 16384 {args.sender_wmem}").check_returncode()
        tmp = Path(d)
        os.chmod(tmp, 0o755)
        for offload, label in ((True, "with offloads"), (False, "offloads off")):
            n = args.veth_runs
            runs = [when_server_free(run_veth, ns, args.seconds, args.cc, tmp, offload) for _ in range(n)]
            if runs:
                report(f"plain veth, {label}", runs)
                results.append({"reference": "veth", "offload": offload, "runs": runs})
        for rate, nested in configs:
            trace = tmp / f"c{rate:g}.down"
            write_trace(constant(rate * 1e6, 1), trace)   # Mahimahi file: both tools read it
            what = f"{rate:5g} Mbit/s {'delay 10 + link' if nested else 'link alone'}"
            for offload, n in ((True, args.runs), (False, args.plain_runs)):
                runs = [when_server_free(run_airlink, ns, trace, rate, nested, args.seconds, args.cc, tmp, offload,
                                         args.logs) for _ in range(n)]
                if runs:
                    report(f"{what}, {'offload' if offload else 'plain'}{', logs' if args.logs else ''}", runs)
                    results.append({"rate_mbps": rate, "nested_delay": nested, "offload": offload,
                                    "logs": args.logs, "runs": runs})
            if have_mm:
                mm_cc = unprivileged_cc(args.cc)
                runs = [when_server_free(run_mahimahi, ns, trace, rate, nested, args.seconds, mm_cc, tmp,
                                              Path(args.mahimahi_bin), args.mm_user) for _ in range(args.runs)]
                cc_note = "" if mm_cc == args.cc else \
                    f" ({Path('/proc/sys/net/ipv4/tcp_congestion_control').read_text().strip()})"
                report(f"{what}, Mahimahi mm-link{cc_note}", runs)
                results.append({"rate_mbps": rate, "nested_delay": nested, "tool": "mahimahi", "runs": runs})
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {time.monotonic() - t0:.0f} s in all")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
