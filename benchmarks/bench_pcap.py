#!/usr/bin/env python3
"""Benchmark: ``airlink collect`` (what users run) against ``tcptrace -n -l -r`` on the same
capture, in one run.

Default: ``airlink collect CAPTURE -o DIR`` - the whole process, every output written
(packets, flows, TCP series, events, summary) - and ``tcptrace -n -l -r CAPTURE`` run in
turn (collect, tcptrace, collect, ...) ``--repeat`` times, so each pair sees the same
machine load. Printed: wall and CPU seconds (user+sys) and peak RSS (wait4) of both, the
per-pair ratios collect / tcptrace, and bytes of peak memory per packet - each as the
median and the min-max over the pairs.

``--tools`` adds the older per-tool table: airlink ``read_pcap`` and ``analyze_tcp`` in a
script, a dpkt per-packet loop and ``tshark -T fields`` (on a prefix of ``--prefix``
packets, since they run at tens of thousands of packets/s), tcptrace.

The capture (about two million packets) is made with ``--make``: two network namespaces
joined by a veth pair with TSO/GSO/GRO off, an iperf3 bulk download between them, captured
by tcpdump at snaplen 128 on the receiver side. It is written to benchmarks/_work/
(gitignored; ``--work`` names another folder) and the namespaces are deleted afterwards. Needs root. ``--copies K`` first
writes K time-shifted copies of the capture into one file (each copy's connections
distinct flows); with ``--one-flow`` the copies continue the biggest connection as ONE
long flow instead (the streaming case: memory must not grow with a single flow).
``--split-every N`` first cuts the connections into connections of N packets (many flows
one after another: the flow-group case). ``--baseline AIRLINK`` runs another build's
``airlink`` (an older checkout with its own venv) in every pair as well, alternating which
of the two goes first, so a change is measured against the code before it under the same
load.

    sudo .venv/bin/python benchmarks/bench_pcap.py --make          # make the capture, then run
    .venv/bin/python benchmarks/bench_pcap.py                      # 2M capture, 5 pairs (~20 s)
    .venv/bin/python benchmarks/bench_pcap.py --copies 10 --one-flow --repeat 1   # 20M, one flow
    .venv/bin/python benchmarks/bench_pcap.py --copies 10 --repeat 1              # 20M, ten long flows
    .venv/bin/python benchmarks/bench_pcap.py --split-every 10000 --copies 10 --repeat 1   # 20M, 2,000 flows
    .venv/bin/python benchmarks/bench_pcap.py --capture my.pcap --tools           # any capture
    sudo .venv/bin/python benchmarks/bench_pcap.py --matrix --repeat 3            # every shape, pcap + pcapng
    sudo .venv/bin/python benchmarks/bench_pcap.py --matrix --copies 10 --repeat 1   # the same at 20M

``--matrix`` makes (when missing) one capture per shape in the work folder: the receiver
side of a clean veth (as ``--make``), the sender side behind a 200 Mbit/s tbf bottleneck
(snaplen 128, no capture filter: the namespace's IPv6 chatter is in it), the same behind a
tbf with a 60 kB queue (losses, retransmissions), the receiver capture cut into 2,000
flows one after another, and a busy server's 500,000 short connections of four packets
each (written directly, :func:`make_short_connections`; 2M packets only); each also converted by ``editcap -F pcapng`` (and, with ``--formats
...,pcap.gz``, compressed by ``gzip -1``; with ``gtpu.pcap``, every packet wrapped in a
GTP-U tunnel as on a cellular core's S1-U/N3, :func:`as_gtpu`, tcptrace reading the
untunnelled original). A transfer that
does not reach ``--packets`` in its 200 s (the lossy one) is repeated in time-shifted
copies, each its own connections, up to that count.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work"
DEFAULT_CAPTURE = WORK / "bulk-2M.pcap"
PY = sys.executable

NS_SND, NS_RCV = "al-bench-snd", "al-bench-rcv"

OFFLOADS_OFF = r"""
import ctypes, fcntl, socket, struct, sys
# legacy ethtool ioctls: set TSO, GSO, GRO, scatter-gather off (struct ethtool_value)
SIOCETHTOOL = 0x8946
cmds = {"tso": 0x1f, "gso": 0x24, "gro": 0x2c, "sg": 0x19}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for name in cmds:
    val = ctypes.create_string_buffer(struct.pack("II", cmds[name], 0), 8)
    ifr = struct.pack("16sP", sys.argv[1].encode(), ctypes.addressof(val))
    try:
        fcntl.ioctl(s, SIOCETHTOOL, ifr)
    except OSError as exc:
        print(f"{name} off: {exc}", file=sys.stderr)
"""


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def make_capture(path: Path, packets: int, *, side: str = "receiver", tbf: str | None = None) -> None:
    """Bulk iperf3 download between two namespaces, captured with tcpdump -s 128.

    ``side="receiver"``: captured on the downloading side, TCP only, the sender limited by
    iperf3 to 600 Mbit/s. ``side="sender"``: captured on the sending side, every packet
    (the namespace's IPv6 neighbour discovery and MLD chatter included), the sender's
    interface shaped by ``tc qdisc ... tbf <tbf>`` (e.g. ``rate 200mbit burst 64kb latency
    50ms``: a bottleneck; a ``limit`` of a few packets: a lossy one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for ns in (NS_SND, NS_RCV):
        sh("ip", "netns", "del", ns, check=False)
    try:
        sh("ip", "netns", "add", NS_SND)
        sh("ip", "netns", "add", NS_RCV)
        sh("ip", "link", "add", "alb-s", "netns", NS_SND, "type", "veth", "peer", "name", "alb-r",
           "netns", NS_RCV)
        for ns, dev, addr in ((NS_SND, "alb-s", "10.231.0.1/24"), (NS_RCV, "alb-r", "10.231.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, PY, "-c", OFFLOADS_OFF, dev)
        if tbf:
            sh("ip", "netns", "exec", NS_SND, "tc", "qdisc", "add", "dev", "alb-s", "root", "tbf", *tbf.split())
        ns, dev, flt = (NS_RCV, "alb-r", ["tcp"]) if side == "receiver" else (NS_SND, "alb-s", [])
        dump = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", dev, "-s", "128",
                                 "-B", "131072", "-w", str(path), "-c", str(packets), *flt],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        srv = subprocess.Popen(["ip", "netns", "exec", NS_SND, "iperf3", "-s", "-1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        # receiver downloads from the sender (-R); unshaped, rate-limited so tcpdump keeps up
        seconds = 100 if not tbf else 200
        client = subprocess.Popen(["ip", "netns", "exec", NS_RCV, "iperf3", "-c", "10.231.0.1", "-R",
                                   "-t", str(seconds), *([] if tbf else ["-b", "600M"])],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            dump.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            dump.terminate()
            dump.wait()
        if client.poll() is None:                  # enough packets: end the transfer
            client.terminate()
        client.wait(timeout=30)
        if srv.poll() is None:
            srv.terminate()
        srv.wait(timeout=10)
        info = dump.stderr.read() if dump.stderr else ""
        print(f"capture: {path} ({path.stat().st_size / 1e6:.0f} MB); tcpdump: "
              f"{' '.join(info.split())[-160:]}")
        if client.returncode not in (0, 1, -15):           # 1: iperf3's exit when terminated
            print(f"iperf3 exited with {client.returncode}: {client.stderr.read()[-300:]}")
    finally:
        for ns in (NS_SND, NS_RCV):
            sh("ip", "netns", "del", ns, check=False)


GNU_TIME = "/usr/bin/time"


def run_measured(cmd, *, stdout=subprocess.DEVNULL, env=None):
    """(wall seconds, peak RSS bytes, stdout text, CPU seconds) of one child process.

    The peak RSS is GNU time's ``%M`` when ``/usr/bin/time`` exists: a process this script
    starts directly inherits this script's own resident size as the start of its peak (the
    kernel keeps the high-water mark of the memory it had before ``exec``), and this script
    grows to hundreds of MB while it makes the 20M-packet captures; ``time`` is small, so
    what it starts is measured alone. Without it, ``wait4``'s ``ru_maxrss`` (an upper bound)."""
    import tempfile
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rss_file:
        timed = os.access(GNU_TIME, os.X_OK)
        argv = [GNU_TIME, "-f", "%M", "-o", rss_file.name, *cmd] if timed else list(cmd)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        # read stdout fully (may be large for tshark) while the child runs
        out = proc.stdout.read()
        err = proc.stderr.read()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {err.decode()[-400:]}")
        peak = int(rss_file.read().split()[-1]) * 1024 if timed else ru.ru_maxrss * 1024
    return wall, peak, out, ru.ru_utime + ru.ru_stime


AIRLINK_READ = r"""
import sys, time, json
t0 = time.perf_counter()
from airlink.collectors import read_pcap
t1 = time.perf_counter()
pk = read_pcap(sys.argv[1], progress=False)
t2 = time.perf_counter()
print(json.dumps({"packets": len(pk), "import_s": t1 - t0, "parse_s": t2 - t1}))
"""

AIRLINK_ANALYZE = r"""
import sys, time, json
t0 = time.perf_counter()
from airlink.collectors import analyze_tcp
t1 = time.perf_counter()
a = analyze_tcp(sys.argv[1], resolution="1s")
t2 = time.perf_counter()
s = a.summary()
big = max(s, key=lambda r: r["packets"])
print(json.dumps({"packets": a.attrs["packets"], "flows": len(s), "import_s": t1 - t0,
                  "analyze_s": t2 - t1, "biggest": big}))
"""

DPKT_LOOP = r"""
import sys, json, time, dpkt, socket
n = 0; limit = int(sys.argv[2])
rows = []
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as f:
    r = dpkt.pcap.Reader(f)
    dl = r.datalink()
    for ts, buf in r:
        if dl == dpkt.pcap.DLT_LINUX_SLL:
            ip = dpkt.sll.SLL(buf).data
        elif dl == dpkt.pcap.DLT_EN10MB:
            ip = dpkt.ethernet.Ethernet(buf).data
        else:
            ip = dpkt.ip.IP(buf)
        tcp = ip.data
        if isinstance(tcp, dpkt.tcp.TCP):
            rows.append((ts, ip.src, ip.dst, ip.len, tcp.sport, tcp.dport, tcp.seq, tcp.ack,
                         tcp.flags, tcp.win))
        n += 1
        if n >= limit:
            break
print(json.dumps({"packets": n, "loop_s": time.perf_counter() - t0}))
"""


#: The goals of ``airlink collect`` against ``tcptrace -n -l -r`` (issue #26): on a capture
#: of about 2M packets at most 1.0x tcptrace's wall time and 100 bytes of peak memory per
#: packet; on one of about 20M packets (every shape, pcapng included) at most 1.2x and 512 MiB.
GOAL_2M = {"ratio": 1.0, "bytes_per_packet": 100}
GOAL_20M = {"ratio": 1.2, "peak_mib": 512}


def goal_of(packets: int) -> dict:
    """The goal for a capture of ``packets`` packets: the 20M goal from 10M packets on."""
    return GOAL_20M if packets >= 10_000_000 else GOAL_2M


def goal_met(res: dict) -> bool:
    """Whether the medians of :func:`collect_vs_tcptrace`'s result meet :func:`goal_of`."""
    goal = goal_of(res["packets"])
    mem_ok = (res["bytes_per_packet"]["median"] <= goal["bytes_per_packet"] if "bytes_per_packet" in goal
              else res["collect_peak_mib"]["median"] <= goal["peak_mib"])
    return res["wall_ratio"]["median"] <= goal["ratio"] and mem_ok


def collect_vs_tcptrace(cap: str, n: int, runs: int, baseline: str | None = None,
                        reference: str | None = None) -> dict:
    """``airlink collect`` (whole process, all outputs written to a fresh folder) and
    ``tcptrace -n -l -r`` on the same capture, alternating; medians and min-max of wall and
    CPU seconds, peak RSS and the per-pair ratios. ``baseline``: another ``airlink``
    executable (an older checkout's) run in every pair too, before or after this one in
    turn; its figures are added as ``baseline_*``. ``reference``: the capture tcptrace
    reads instead (the same packets in a form it reads: a GTP-U capture's untunnelled
    original)."""
    ref = reference or cap
    import statistics
    out = WORK / "collect-out"
    airlink = str(Path(PY).with_name("airlink"))
    # as a user's install runs it: Python caches the compiled modules (an environment that
    # sets PYTHONDONTWRITEBYTECODE recompiles airlink's modules at every start, ~0.05-0.08 s);
    # one unmeasured run of each tool first writes that cache and warms the page cache
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def collect(exe):
        shutil.rmtree(out, ignore_errors=True)
        return run_measured([exe, "collect", cap, "-o", str(out)], env=env)
    for exe in [airlink] + ([baseline] if baseline else []):
        collect(exe)
    run_measured(["tcptrace", "-n", "-l", "-r", ref])
    pairs, base = [], []
    for i in range(max(1, runs)):
        if baseline and i % 2:
            base.append(collect(baseline))
        a = collect(airlink)
        if baseline and not i % 2:
            base.append(collect(baseline))
        b = run_measured(["tcptrace", "-n", "-l", "-r", ref])
        pairs.append((a, b))
    shutil.rmtree(out, ignore_errors=True)

    def spread(values):
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}
    extra = {} if not baseline else {
        "baseline": baseline,
        "baseline_wall_s": spread([x[0] for x in base]),
        "baseline_cpu_s": spread([x[3] for x in base]),
        "baseline_wall_ratio": spread([x[0] / b[0] for x, (_, b) in zip(base, pairs)]),
        "baseline_cpu_ratio": spread([x[3] / b[3] for x, (_, b) in zip(base, pairs)]),
        "baseline_peak_mib": spread([x[1] / 2**20 for x in base]),
        "baseline_bytes_per_packet": spread([x[1] / max(n, 1) for x in base])}
    res = {"runs": len(pairs), "packets": n, **extra,
           "collect_wall_s": spread([a[0] for a, _ in pairs]),
           "collect_cpu_s": spread([a[3] for a, _ in pairs]),
           "collect_peak_bytes": spread([a[1] for a, _ in pairs]),
           "tcptrace_wall_s": spread([b[0] for _, b in pairs]),
           "tcptrace_cpu_s": spread([b[3] for _, b in pairs]),
           "wall_ratio": spread([a[0] / b[0] for a, b in pairs]),
           "cpu_ratio": spread([a[3] / b[3] for a, b in pairs]),
           "bytes_per_packet": spread([a[1] / max(n, 1) for a, _ in pairs]),
           "collect_peak_mib": spread([a[1] / 2**20 for a, _ in pairs]),
           "tcptrace_peak_mib": spread([b[1] / 2**20 for _, b in pairs])}
    goal = goal_of(n)
    memory_goal = (f"goal <= {goal['bytes_per_packet']}" if "bytes_per_packet" in goal
                   else f"goal <= {goal['peak_mib']} MiB in all")
    print(f"airlink collect vs tcptrace -n -l -r, {len(pairs)} pairs in turn (median, min-max):")
    for key, label, fmt in (("collect_wall_s", "collect wall s", ".2f"), ("tcptrace_wall_s", "tcptrace wall s", ".2f"),
                            ("collect_cpu_s", "collect CPU s", ".2f"), ("tcptrace_cpu_s", "tcptrace CPU s", ".2f"),
                            ("wall_ratio", f"collect / tcptrace, wall (goal <= {goal['ratio']})", ".2f"),
                            ("cpu_ratio", "collect / tcptrace, CPU", ".2f"),
                            ("collect_peak_mib", "collect peak RSS MiB", ".0f"),
                            ("tcptrace_peak_mib", "tcptrace peak RSS MiB", ".0f"),
                            ("bytes_per_packet", f"collect peak RSS, B/packet ({memory_goal})", ".0f"),
                            ("baseline_wall_s", "baseline collect wall s", ".2f"),
                            ("baseline_cpu_s", "baseline collect CPU s", ".2f"),
                            ("baseline_wall_ratio", "baseline / tcptrace, wall", ".2f"),
                            ("baseline_cpu_ratio", "baseline / tcptrace, CPU", ".2f"),
                            ("baseline_peak_mib", "baseline peak RSS MiB", ".0f"),
                            ("baseline_bytes_per_packet", "baseline peak RSS, B/packet", ".0f")):
        if key not in res:
            continue
        v = res[key]
        print(f"  {label:45s} {v['median']:{fmt}}  ({v['min']:{fmt}}-{v['max']:{fmt}})")
    res["goal_met"] = goal_met(res)
    print(f"  goal (issue #26, medians): {'met' if res['goal_met'] else 'NOT met'}")
    return res


def _be32(chunk, at):
    """Big-endian 32-bit fields at byte positions ``at`` of ``chunk`` (uint8) as uint64."""
    import numpy as np
    v = np.zeros(len(at), np.uint64)
    for i in range(4):
        v = (v << np.uint64(8)) | chunk[at + i].astype(np.uint64)
    return v


def _put_be32(chunk, at, v):
    import numpy as np
    v = np.asarray(v, np.uint64) & np.uint64(0xFFFFFFFF)
    for i in range(4):
        chunk[at + i] = ((v >> np.uint64(8 * (3 - i))) & np.uint64(0xFF)).astype(np.uint8)


@contextlib.contextmanager
def _whole_file(dst: Path):
    """Open ``dst`` for writing under a temporary name, renamed to ``dst`` only when the
    block completes: a derived capture cut short (an error, Ctrl-C) is never taken for a
    made one by a later run, which reuses what exists."""
    part = dst.with_name(dst.name + ".part")
    try:
        with open(part, "wb") as out:
            yield out
        os.replace(part, dst)
    finally:
        part.unlink(missing_ok=True)


def _record_fields(b):
    """Per record of capture batch ``b`` (Ethernet/IPv4 classic pcap): a copy of the
    batch's records (headers included), each record's data offset in it, whether it is
    IPv4, whether TCP, and where its TCP header starts."""
    import numpy as np
    lo = int(b.data_off[0]) - 16
    hi = int(b.data_off[-1] + b.caplen[-1])
    chunk = b.buf[lo:hi].copy()
    off = (b.data_off - lo).astype(np.int64)
    ip4 = (chunk[off + 12] == 8) & (chunk[off + 13] == 0) & (b.caplen >= 34)
    ihl = np.where(ip4, (chunk[np.minimum(off + 14, len(chunk) - 1)] & 15).astype(np.int64) * 4, 0)
    tcp = ip4 & (chunk[np.minimum(off + 23, len(chunk) - 1)] == 6) & (b.caplen >= 14 + ihl + 20)
    th = off + 14 + ihl                                   # TCP header of TCP records
    return chunk, off, ip4, tcp, th


def make_concatenated(src: Path, dst: Path, copies: int, *, one_flow: bool = False) -> None:
    """``copies`` copies of an Ethernet/IPv4 classic pcap one after the other, copy k
    shifted in time by k x (its duration + 1 s). Checksums are left as they are (the
    analyses do not check them).

    ``one_flow=False``: copy k's addresses get k as their third octet, so each copy's
    connections are distinct flows (as captures of successive downloads are).
    ``one_flow=True``: the copies continue the capture's biggest connection as ONE long
    flow - copy k keeps only that connection's packets, its sequence numbers (and the
    peer's ACK numbers and SACK edges) moved on by k x the bytes the copy carries, its TCP
    timestamps by k x the time shift in ms; SYNs are kept in the first copy only, FINs and
    RSTs in the last only."""
    import numpy as np
    sys.path.insert(0, str(HERE.parent))
    from airlink.collectors._capture import CaptureReader
    batches = list(CaptureReader(src))
    first = int(batches[0].ts_ns[0]) // 10**9
    last = int(max(int(b.ts_ns.max()) for b in batches)) // 10**9
    shift = last - first + 1
    with open(src, "rb") as f:
        header = f.read(24)

    fields = _record_fields

    def endpoints(chunk, off, th, i):
        """(sender, receiver) of TCP records i as address << 16 | port (uint64)."""
        ports = _be32(chunk, th[i])
        return (_be32(chunk, off[i] + 26) << np.uint64(16) | (ports >> np.uint64(16)),
                _be32(chunk, off[i] + 30) << np.uint64(16) | (ports & np.uint64(0xFFFF)))

    if one_flow:                                              # the biggest connection, its sender
        keys = {}
        for b in batches:
            chunk, off, ip4, tcp, th = fields(b)
            i = np.flatnonzero(tcp)
            a, z = endpoints(chunk, off, th, i)
            pay = (b.origlen[i] - 14 - (th[i] - off[i] - 14) - (chunk[th[i] + 12] >> 4).astype(np.int64) * 4)
            for x, y, n in zip(a.tolist(), z.tolist(), pay.tolist()):
                k = keys.setdefault((x, y), [0, 0, None, 0])
                k[0] += 1
                k[1] += max(n, 0)
            del chunk
        conn = {}
        for (x, y), (n, by, *_) in keys.items():
            c = conn.setdefault((min(x, y), max(x, y)), [0, None, 0])
            c[0] += n
            if by > c[2]:
                c[1], c[2] = x, by                            # sender: the side with more payload
        (lo_ep, hi_ep), _ = max(conn.items(), key=lambda kv: kv[1][0])
        # sequence space one copy carries, per side: first to last byte of its data
        seq0, lo_b, hi_b = {}, {}, {}
        for b in batches:
            chunk, off, ip4, tcp, th = fields(b)
            i = np.flatnonzero(tcp)
            a = endpoints(chunk, off, th, i)[0]
            for side in (lo_ep, hi_ep):
                r = i[a == np.uint64(side)]
                j = th[r]
                pay = b.origlen[r] - (j - off[r]) - (chunk[j + 12] >> 4).astype(np.int64) * 4
                j, pay = j[pay > 0], pay[pay > 0]
                if not len(j):
                    continue
                sq = _be32(chunk, j + 4).astype(np.int64)
                seq0.setdefault(side, int(sq[0]))
                rel = (sq - seq0[side] + (1 << 31)) % (1 << 32) - (1 << 31)   # signed: early segments too
                lo_b[side] = min(lo_b.get(side, 1 << 40), int(rel.min()))
                hi_b[side] = max(hi_b.get(side, -(1 << 40)), int((rel + pay).max()))
        span = {side: hi_b[side] - lo_b[side] if side in hi_b else 0 for side in (lo_ep, hi_ep)}
    with _whole_file(dst) as out:
        out.write(header)
        for k in range(copies):
            for b in batches:
                chunk, off, ip4, tcp, th = fields(b)
                sec = off - 16
                v = chunk[sec] | (chunk[sec + 1].astype(np.uint32) << 8) | (chunk[sec + 2].astype(np.uint32) << 16) \
                    | (chunk[sec + 3].astype(np.uint32) << 24)
                v = v + np.uint32(k * shift)
                for i in range(4):
                    chunk[sec + i] = (v >> np.uint32(8 * i)) & 0xFF
                if not one_flow:
                    chunk[off[ip4] + 14 + 14] = k
                    chunk[off[ip4] + 14 + 18] = k
                    out.write(chunk.tobytes())
                    continue
                i = np.flatnonzero(tcp)
                a, z = endpoints(chunk, off, th, i)
                mine = (np.minimum(a, z) == np.uint64(lo_ep)) & (np.maximum(a, z) == np.uint64(hi_ep))
                flags = chunk[th[i] + 13]
                keep = np.ones(len(off), bool) if k == 0 else np.zeros(len(off), bool)
                keep[i] = mine | (k == 0)
                if k > 0:
                    keep[i[(flags & 0x02) != 0]] = False
                if k < copies - 1:
                    keep[i[mine & ((flags & 0x05) != 0)]] = False
                if k > 0:
                    ti, ai, tcp_off = th[i[mine]], a[mine], (chunk[th[i[mine]] + 12] >> 4).astype(np.int64) * 4
                    room = (off + b.caplen)[i[mine]] - ti          # TCP header bytes captured
                    for side, peer in ((lo_ep, hi_ep), (hi_ep, lo_ep)):
                        # copy k of a side's data starts where copy k-1 ended; the peer ACKs it
                        own = ai == np.uint64(side)
                        d = np.uint64(k * span[side])
                        _put_be32(chunk, ti[own] + 4, _be32(chunk, ti[own] + 4) + d)
                        acks = ti[~own][(chunk[ti[~own] + 13] & 0x10) != 0]
                        _put_be32(chunk, acks + 8, _be32(chunk, acks + 8) + d)
                        # NOP NOP TS NOP NOP SACK from the peer: its edges are in this side's space
                        sk = ti[~own & (tcp_off >= 44) & (room >= 36)]
                        sk = sk[(chunk[sk + 22] == 8) & (chunk[sk + 32] == 1) & (chunk[sk + 34] == 5)]
                        for s_at in sk.tolist():
                            at = s_at + 36 + 4 * np.arange((int(chunk[s_at + 35]) - 2) // 4)
                            at = at[at + 4 <= len(chunk)]
                            _put_be32(chunk, at, _be32(chunk, at) + d)
                    # NOP NOP TS: values and echoes move on with the time shift (1 ms clock)
                    ts = ti[(tcp_off >= 32) & (room >= 32)]
                    ts = ts[(chunk[ts + 20] == 1) & (chunk[ts + 21] == 1) & (chunk[ts + 22] == 8) & (chunk[ts + 23] == 10)]
                    for at in (ts + 24, ts + 28):
                        _put_be32(chunk, at, _be32(chunk, at) + np.uint64(k * shift * 1000))
                starts, ends = off[keep] - 16, off[keep] + b.caplen[keep]
                out.write(b"".join(chunk[x:y].tobytes() for x, y in zip(starts.tolist(), ends.tolist())))


def split_flows(src: Path, dst: Path, every: int) -> None:
    """``src`` (Ethernet/IPv4 classic pcap) with its TCP connections cut into connections
    of ``every`` packets: the client's port (the higher of the two) becomes 20000 + record
    index // ``every``, in both directions. Checksums are left as they are. A bulk download
    thus becomes many flows of the same traffic, one after another - a long capture of
    many transfers, the case where flows are analysed in groups."""
    import numpy as np
    sys.path.insert(0, str(HERE.parent))
    from airlink.collectors._capture import CaptureReader
    with open(src, "rb") as f:
        header = f.read(24)
    done = 0
    with _whole_file(dst) as out:
        out.write(header)
        for b in CaptureReader(src):
            chunk, off, _, tcp, th_all = _record_fields(b)
            i = np.flatnonzero(tcp)
            th = th_all[i]
            sport = chunk[th].astype(np.int64) << 8 | chunk[th + 1]
            dport = chunk[th + 2].astype(np.int64) << 8 | chunk[th + 3]
            new = 20000 + (done + i) // every
            for at, port, other in ((th, sport, dport), (th + 2, dport, sport)):
                own = port > other                    # the client's (ephemeral) port
                chunk[at[own]] = (new[own] >> 8) & 0xFF
                chunk[at[own] + 1] = new[own] & 0xFF
            done += len(off)
            out.write(chunk.tobytes())


def make_short_connections(dst: Path, packets: int) -> None:
    """A capture of ``packets // 4`` short TCP connections to one server (10.0.0.1:80), each
    from its own client address and port: SYN, SYN/ACK, a 100-byte request with ACK and
    a FIN/ACK, 0.3 ms apart, connections starting 20 us apart (about 50 open at once) -
    a busy server's capture, the case where the flows, not the packets, are many. Made
    here (Ethernet/IPv4 classic pcap, microseconds, checksums zero) rather than through
    namespaces: half a million real connections would take the kernel's ports and
    minutes."""
    import numpy as np
    n = max(1, packets // 4)
    k = np.arange(n, dtype=np.int64)
    t0 = 1_700_000_000 * 10**6                       # us
    cli = (10 << 24) | (((k >> 16) % 200 + 1) << 16) | (k & 0xFFFF)
    port = 1024 + k % 60000
    srv = np.full(n, (10 << 24) | 1, np.int64)
    kinds = []                                       # (time offset us, from client, flags, payload, seq, ack)
    for off, up, flags, pay, seq, ack in ((0, True, 0x02, 0, 1000, 0), (300, False, 0x12, 0, 5000, 1001),
                                          (600, True, 0x18, 100, 1001, 5001), (1000, False, 0x11, 0, 5001, 1101)):
        size = 16 + 14 + 20 + 20 + pay
        rec = np.zeros((n, size), np.uint8)
        t = t0 + k * 20 + off
        hdr = np.stack([t // 10**6, t % 10**6, np.full(n, size - 16), np.full(n, size - 16)], 1).astype("<u4")
        rec[:, :16] = hdr.view(np.uint8).reshape(n, 16)
        rec[:, 28:30] = [0x08, 0x00]
        ip = np.zeros((n, 20), np.uint8)
        ip[:, 0], ip[:, 8], ip[:, 9] = 0x45, 64, 6
        ip[:, 2:4] = np.asarray([20 + 20 + pay], ">u2").view(np.uint8)
        src, dst_ = (cli, srv) if up else (srv, cli)
        ip[:, 12:16] = src.astype(">u4").view(np.uint8).reshape(n, 4)
        ip[:, 16:20] = dst_.astype(">u4").view(np.uint8).reshape(n, 4)
        rec[:, 30:50] = ip
        sp, dp = (port, np.full(n, 80)) if up else (np.full(n, 80), port)
        tcp = np.zeros((n, 20), np.uint8)
        tcp[:, 0:2] = sp.astype(">u2").view(np.uint8).reshape(n, 2)
        tcp[:, 2:4] = dp.astype(">u2").view(np.uint8).reshape(n, 2)
        tcp[:, 4:8] = np.asarray([seq], ">u4").view(np.uint8)
        tcp[:, 8:12] = np.asarray([ack], ">u4").view(np.uint8)
        tcp[:, 12], tcp[:, 13], tcp[:, 14:16] = 5 << 4, flags, [0xFF, 0xFF]
        rec[:, 50:70] = tcp
        rec[:, 70:] = ord("q")
        kinds.append((t, rec))
    times = np.concatenate([t for t, _ in kinds])
    sizes = np.concatenate([np.full(n, r.shape[1]) for _, r in kinds])
    order = np.argsort(times, kind="stable")
    start = np.zeros(len(order), np.int64)
    start[order] = np.r_[0, np.cumsum(sizes[order])[:-1]]
    out = np.empty(int(sizes.sum()), np.uint8)
    for j, (_, rec) in enumerate(kinds):
        at = start[j * n:(j + 1) * n]
        out[at[:, None] + np.arange(rec.shape[1])] = rec
    with _whole_file(dst) as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        f.write(out.tobytes())


def count_packets(path: Path) -> int:
    """Records in the capture (walked, not decoded: no memory in proportion to it)."""
    out = subprocess.run([PY, "-c", "import sys; from airlink.collectors._capture import CaptureReader; "
                          "print(sum(len(b.data_off) for b in CaptureReader(sys.argv[1], reuse_buffer=True)))",
                          str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


# the matrix of capture shapes (--matrix): how each is made
SHAPES = {
    "receiver": {"side": "receiver"},
    "sender-tbf": {"side": "sender", "tbf": "rate 200mbit burst 64kb latency 50ms"},
    "lossy": {"side": "sender", "tbf": "rate 200mbit burst 64kb limit 60000"},
    "flows-2000": {"split_of": "receiver", "flows": 2000},
    "short-flows": {"short_connections": True},
}


def matrix_capture(shape: str, packets: int, copies: int) -> Path:
    """The classic-pcap capture of ``shape`` (:data:`SHAPES`), made when missing."""
    how = SHAPES[shape]
    tag = f"{packets / 1e6:g}M"
    path = WORK / f"{shape}-{tag}.pcap"
    if not path.exists():
        if "split_of" in how:
            src = matrix_capture(how["split_of"], packets, 1)
            split_flows(src, path, max(1, count_packets(src) // how["flows"]))
        elif how.get("short_connections"):
            make_short_connections(path, packets)
        else:
            make_capture(path, packets, side=how["side"], tbf=how.get("tbf"))
    made = count_packets(path)
    if made < 0.9 * packets:    # a slow transfer (lossy): copies up to the count, then --copies of that
        copies = max(copies, 1) * -(-packets // made)
    if copies > 1:
        big = WORK / f"{shape}-{tag}-{copies}x.pcap"
        if not big.exists():
            make_concatenated(path, big, copies)
        path = big
    return path


def as_pcapng(path: Path) -> Path:
    """``path`` converted by ``editcap -F pcapng`` (made when missing)."""
    ng = path.with_suffix(".pcapng")
    if not ng.exists():
        part = ng.with_name(ng.name + ".part")
        sh("editcap", "-F", "pcapng", str(path), str(part))
        os.replace(part, ng)
    return ng


def as_gzip(path: Path) -> Path:
    """``path`` compressed by ``gzip -1`` (made when missing): what a capture kept to save
    space is; both tools decompress it as they read (tcptrace through ``gunzip``)."""
    gz = path.with_name(path.name + ".gz")
    if not gz.exists():
        part = gz.with_name(gz.name + ".part")
        with open(part, "wb") as out:
            subprocess.run(["gzip", "-1", "-c", str(path)], stdout=out, check=True)
        os.replace(part, gz)
    return gz


def as_gtpu(path: Path) -> Path:
    """``path`` (Ethernet classic pcap) with every IP packet carried in a GTP-U tunnel, as
    a capture on a cellular core's S1-U / N3 interface holds it (made when missing): after
    the Ethernet header an outer IPv4 header (192.0.2.1 -> 192.0.2.2), UDP 2152 -> 2152
    and an 8-byte GTPv1-U header (G-PDU, TEID 1), 36 bytes per record more, captured and
    original lengths grown alike. tcptrace reads no GTP-U: the reference runs on ``path``
    itself, the same users' packets untunnelled."""
    out_path = path.with_name(path.stem + "-gtpu.pcap")
    if out_path.exists():
        return out_path
    part = out_path.with_name(out_path.name + ".part")
    with open(path, "rb") as f, open(part, "wb") as out:
        head = f.read(24)
        end = "<" if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        snap = struct.unpack(end + "I", head[16:20])[0]
        out.write(head[:16] + struct.pack(end + "I", snap + 36) + head[20:])
        rec = struct.Struct(end + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            sec, frac, cap, orig = rec.unpack(h)
            data = f.read(cap)
            inner = orig - 14
            outer = struct.pack(">BBHHHBBH4s4sHHHHBBHI", 0x45, 0, 36 + inner, 0, 0, 64, 17, 0,
                                b"\xc0\x00\x02\x01", b"\xc0\x00\x02\x02", 2152, 2152, 16 + inner, 0,
                                0x30, 0xFF, inner, 1)
            # the Ethernet header now carries IPv4 (the outer header), whatever it carried
            out.write(rec.pack(sec, frac, cap + 36, orig + 36) + data[:12] + b"\x08\x00" + outer + data[14:])
    os.replace(part, out_path)
    return out_path


FORMATS = {"pcap": lambda base: base, "pcapng": as_pcapng, "pcap.gz": as_gzip, "gtpu.pcap": as_gtpu}


def run_matrix(shapes, formats, packets: int, copies: int, runs: int, baseline: str | None = None) -> list:
    """``airlink collect`` against ``tcptrace -n -l -r`` on every shape and format; one row
    per capture with medians and min-max of ``runs`` pairs (``baseline``: as for
    :func:`collect_vs_tcptrace`, a row of its own under each)."""
    rows = []
    for shape in shapes:
        if SHAPES[shape].get("short_connections") and copies > 1:
            # tcptrace keeps ~8 KB per connection: 5M connections would not fit in this
            # machine's memory, so there is no reference to compare with
            print(f"\n== {shape}: {packets / 1e6:g}M packets only (tcptrace needs ~8 KB a connection)")
            continue
        base = matrix_capture(shape, packets, copies)
        for fmt in formats:
            cap = FORMATS[fmt](base)
            n = count_packets(cap)
            print(f"\n== {shape}, {fmt}: {cap.name}, {n} packets, {cap.stat().st_size / 1e6:.0f} MB", flush=True)
            ref = base if fmt == "gtpu.pcap" else cap          # tcptrace reads no GTP-U
            rows.append({"shape": shape, "format": fmt, "capture": str(cap),
                         **collect_vs_tcptrace(str(cap), n, runs, baseline, reference=str(ref))})
    print(f"\n{os.cpu_count()} cores; median (min-max) of {runs} pairs, collect and tcptrace in turn")
    print(f"{'shape':12s} {'fmt':7s} {'packets':>9s} {'collect s':>18s} {'tcptrace s':>18s} "
          f"{'ratio':>17s} {'CPU ratio':>17s} {'peak MiB':>14s} {'B/packet':>14s} goal")

    def cell(v, fmt):
        return f"{v['median']:{fmt}} ({v['min']:{fmt}}-{v['max']:{fmt}})"
    for r in rows:
        print(f"{r['shape']:12s} {r['format']:7s} {r['packets']:9d} {cell(r['collect_wall_s'], '.2f'):>18s} "
              f"{cell(r['tcptrace_wall_s'], '.2f'):>18s} {cell(r['wall_ratio'], '.2f'):>17s} "
              f"{cell(r['cpu_ratio'], '.2f'):>17s} {cell(r['collect_peak_mib'], '.0f'):>14s} "
              f"{cell(r['bytes_per_packet'], '.0f'):>14s} {'met' if r['goal_met'] else 'NOT met'}")
        if "baseline" in r:
            print(f"{'  baseline':20s} {r['packets']:9d} {cell(r['baseline_wall_s'], '.2f'):>18s} {'':>18s} "
                  f"{cell(r['baseline_wall_ratio'], '.2f'):>17s} {cell(r['baseline_cpu_ratio'], '.2f'):>17s} "
                  f"{cell(r['baseline_peak_mib'], '.0f'):>14s} {cell(r['baseline_bytes_per_packet'], '.0f'):>14s}")
    print("goals (issue #26): ~2M packets <= 1.0x tcptrace wall and <= 100 B/packet; "
          "~20M packets <= 1.2x and <= 512 MiB")
    return rows


def _names_of(known):
    """An argparse type: a comma-separated list of names from ``known``; an unknown one is
    a usage error naming the choices."""
    def names(text: str) -> list:
        got = [w for w in text.split(",") if w]
        bad = [w for w in got if w not in known]
        if bad or not got:
            raise argparse.ArgumentTypeError(f"{','.join(bad) or text!r}: choose from {','.join(known)}")
        return got
    return names


def main(argv=None) -> int:
    global WORK
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", type=Path, help=f"the capture (default: {DEFAULT_CAPTURE.name} in the "
                                                 f"work folder)")
    ap.add_argument("--work", type=Path, default=WORK,
                    help="folder of the captures made or derived here and of collect's output (default "
                         "benchmarks/_work; a 20M-packet matrix needs ~30 GB: e.g. --work /tmp/bench)")
    ap.add_argument("--make", action="store_true", help="make the capture first (root, netns)")
    ap.add_argument("--packets", type=int, default=2_000_000, help="packets to capture with --make")
    ap.add_argument("--prefix", type=int, default=200_000,
                    help="packets given to the slow per-packet tools (dpkt loop, tshark; --tools)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="pairs of airlink collect and tcptrace run in turn (default 5); with "
                         "--tools also runs of each tool, the fastest reported")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--tools", action="store_true",
                    help="also the per-tool table (read_pcap, analyze_tcp, dpkt loop, tshark, tcptrace)")
    ap.add_argument("--collect-only", action="store_true",
                    help="only airlink collect against tcptrace (the default; kept for old commands)")
    ap.add_argument("--copies", type=int, default=0, metavar="K",
                    help="first write K time-shifted copies of the capture into one file "
                         "(benchmarks/_work/<name>-Kx.pcap, distinct flows per copy) and benchmark that")
    ap.add_argument("--split-every", type=int, default=0, metavar="N",
                    help="first cut the capture's connections into connections of N packets (the "
                         "client port changes every N packets: benchmarks/_work/<name>-split<N>.pcap), "
                         "before --copies: many flows one after another")
    ap.add_argument("--one-flow", action="store_true",
                    help="with --copies: the copies continue the biggest connection as one long flow "
                         "(benchmarks/_work/<name>-Kx-oneflow.pcap)")
    ap.add_argument("--matrix", action="store_true",
                    help="the matrix of capture shapes (receiver side, sender side behind a tbf "
                         "bottleneck, lossy, 2,000 flows) x formats, each made when missing (root, "
                         "netns), against tcptrace; --packets per capture, --copies for 20M")
    ap.add_argument("--baseline", metavar="AIRLINK",
                    help="another airlink executable (e.g. an older checkout's .venv/bin/airlink) run "
                         "in every pair too, in turn before and after this one; reported beside it")
    ap.add_argument("--shapes", default=",".join(SHAPES), type=_names_of(SHAPES),
                    help=f"with --matrix, comma-separated (default {','.join(SHAPES)})")
    ap.add_argument("--formats", default="pcap,pcapng", type=_names_of(tuple(FORMATS)),
                    help="with --matrix, comma-separated from pcap, pcapng, pcap.gz (gzip -1 of the "
                         "pcap), gtpu.pcap (every packet in a GTP-U tunnel; tcptrace reads the "
                         "untunnelled pcap) (default pcap,pcapng)")
    args = ap.parse_args(argv)
    WORK = args.work
    WORK.mkdir(parents=True, exist_ok=True)
    if args.capture is None:
        args.capture = WORK / DEFAULT_CAPTURE.name
    if args.matrix:
        if not shutil.which("tcptrace"):
            print("tcptrace is not installed (the reference tool)", file=sys.stderr)
            return 2
        rows = run_matrix(args.shapes, args.formats, args.packets,
                          args.copies, args.repeat, args.baseline)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2, default=str))
        return 0
    if args.make:
        make_capture(args.capture, args.packets)
    if not args.capture.exists():
        print(f"no capture at {args.capture}; run with --make (root) or --capture FILE", file=sys.stderr)
        return 2
    if args.split_every > 0:
        split = WORK / f"{args.capture.stem}-split{args.split_every}.pcap"
        if not split.exists():
            split_flows(args.capture, split, args.split_every)
        args.capture = split
    if args.copies > 1:
        big = WORK / f"{args.capture.stem}-{args.copies}x{'-oneflow' if args.one_flow else ''}.pcap"
        if not big.exists():
            make_concatenated(args.capture, big, args.copies, one_flow=args.one_flow)
        args.capture = big
    cap = str(args.capture)
    size = args.capture.stat().st_size
    res = {"capture": cap, "bytes": size, "machine": f"{os.cpu_count()} cores"}
    if not shutil.which("tcptrace"):
        print("tcptrace is not installed (the reference tool)", file=sys.stderr)
        return 2
    if not args.tools:
        n = count_packets(args.capture)
        print(f"capture {cap}: {n} packets, {size / 1e6:.1f} MB, machine {res['machine']}")
        res["collect"] = collect_vs_tcptrace(cap, n, args.repeat, args.baseline)
        if args.json:
            args.json.write_text(json.dumps(res, indent=2, default=str))
        return 0

    cpu = {}

    def best(cmd, name):
        """Fastest of --repeat runs (wall, peak RSS of that run, its output); the least CPU
        time of the runs goes to cpu[name] (steadier than wall time on a shared machine)."""
        runs = [run_measured(cmd) for _ in range(max(1, args.repeat))]
        cpu[name] = min(r[3] for r in runs)
        return min(runs, key=lambda r: r[0])[:3]

    wall, rss, out = best([PY, "-c", AIRLINK_READ, cap], "airlink_read")
    r = json.loads(out)
    n = r["packets"]
    res["packets"] = n
    res["airlink_read"] = {"wall_s": wall, "rss": rss, "parse_s": r["parse_s"], "import_s": r["import_s"]}

    wall, rss, out = best([PY, "-c", AIRLINK_ANALYZE, cap], "airlink_analyze")
    r = json.loads(out)
    res["airlink_analyze"] = {"wall_s": wall, "rss": rss, "analyze_s": r["analyze_s"],
                              "import_s": r["import_s"], "flows": r["flows"], "biggest": r["biggest"]}

    prefix = min(args.prefix, n)
    wall, rss, out = best([PY, "-c", DPKT_LOOP, cap, str(prefix)], "dpkt")
    r = json.loads(out)
    res["dpkt_loop"] = {"packets": r["packets"], "loop_s": r["loop_s"], "wall_s": wall, "rss": rss}

    if shutil.which("tshark"):
        wall, rss, out, _ = run_measured(["tshark", "-r", cap, "-c", str(prefix), "-T", "fields",
                                       "-e", "frame.time_epoch", "-e", "ip.src", "-e", "ip.dst",
                                       "-e", "ip.len", "-e", "tcp.srcport", "-e", "tcp.dstport",
                                       "-e", "tcp.seq_raw", "-e", "tcp.ack_raw", "-e", "tcp.flags",
                                       "-e", "tcp.window_size_value"])
        res["tshark_fields"] = {"packets": prefix, "wall_s": wall, "rss": rss}
    if shutil.which("tcptrace"):
        wall, rss, out = best(["tcptrace", "-n", "-l", "-r", cap], "tcptrace")
        res["tcptrace"] = {"packets": n, "wall_s": wall, "rss": rss}

    def rate(p, s):
        return p / s if s > 0 else float("nan")
    a_read, a_an = res["airlink_read"], res["airlink_analyze"]
    rows = [
        ("airlink read_pcap (in-process parse)", n, a_read["parse_s"], a_read["rss"]),
        ("airlink read_pcap (whole process)", n, a_read["wall_s"], a_read["rss"]),
        ("airlink analyze_tcp (in-process)", n, a_an["analyze_s"], a_an["rss"]),
        ("airlink analyze_tcp (whole process)", n, a_an["wall_s"], a_an["rss"]),
        ("dpkt per-packet loop (in-process)", res["dpkt_loop"]["packets"], res["dpkt_loop"]["loop_s"],
         res["dpkt_loop"]["rss"]),
    ]
    if "tshark_fields" in res:
        rows.append(("tshark -T fields", prefix, res["tshark_fields"]["wall_s"], res["tshark_fields"]["rss"]))
    if "tcptrace" in res:
        rows.append(("tcptrace -n -l -r (C)", n, res["tcptrace"]["wall_s"], res["tcptrace"]["rss"]))
    print(f"capture {cap}: {n} packets, {size / 1e6:.1f} MB, machine {res['machine']}, "
          f"airlink, dpkt and tcptrace: fastest of {args.repeat} runs")
    print(f"{'tool':42s} {'packets':>9s} {'seconds':>8s} {'packets/s':>11s} {'peak MiB':>9s} {'B/packet':>9s}")
    for name, p, s, m in rows:
        print(f"{name:42s} {p:9d} {s:8.2f} {rate(p, s):11.0f} {m / 2**20:9.1f} {m / max(p, 1):9.0f}")
    dpkt_rate = rate(res["dpkt_loop"]["packets"], res["dpkt_loop"]["loop_s"])
    ratios = {
        "field extraction vs dpkt loop (in-process rates)": rate(n, a_read["parse_s"]) / dpkt_rate,
        "field extraction vs dpkt loop (airlink whole process)": rate(n, a_read["wall_s"]) / dpkt_rate,
    }
    if "tshark_fields" in res:
        ratios["field extraction vs tshark fields (whole process)"] = \
            rate(n, a_read["wall_s"]) / rate(prefix, res["tshark_fields"]["wall_s"])
    if "tcptrace" in res:
        ratios["analysis time / tcptrace time (whole process)"] = \
            a_an["wall_s"] / res["tcptrace"]["wall_s"]
        ratios["analysis time / tcptrace time (in-process analysis only)"] = \
            a_an["analyze_s"] / res["tcptrace"]["wall_s"]
    ratios["field extraction vs dpkt loop (whole-process CPU time)"] = \
        (n / cpu["airlink_read"]) / (res["dpkt_loop"]["packets"] / cpu["dpkt"])
    if "tcptrace" in cpu:
        ratios["analysis CPU time / tcptrace CPU time (whole process)"] = \
            cpu["airlink_analyze"] / cpu["tcptrace"]
    ratios["analysis peak memory, bytes per packet"] = a_an["rss"] / max(n, 1)
    res["cpu_s"] = cpu
    res["collect"] = collect_vs_tcptrace(cap, n, args.repeat)
    print("CPU seconds (user+sys, least of the runs): " +
          ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    for k, v in ratios.items():
        print(f"{k:62s} {v:8.2f}")
    res["ratios"] = ratios
    big = a_an["biggest"]
    print(f"biggest flow: {big['src']}:{big['sport']} -> {big['dst']}:{big['dport']} "
          f"{big['packets']} packets, {big['retransmissions']} retransmissions, "
          f"RTT median {big['rtt_ms_median']} ms, goodput {big['goodput_bps'] or 0:.3g} bit/s")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
