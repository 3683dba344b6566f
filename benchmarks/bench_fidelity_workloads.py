#!/usr/bin/env python3
"""Replay fidelity against a ground truth: workloads live in `airlink cell` vs through replays.

CellReplay's metric (Sentosa et al., NSDI'25): for each workload metric, the distribution
error of a replay is ``EMD(replayed, live) / mean(live)`` - the Earth Mover's (Wasserstein-1)
distance between the replayed and the live samples (``scipy.stats.wasserstein_distance``)
divided by the live mean.

1. **Ground truth**: the workloads run live in UE 1 of ``airlink delay D airlink cell``
   (PF, ``--users 4``, the ``quick`` radio, 5 Mbit/s uplinks): UE 2 downloads in bulk, UEs 3 and 4 download
   500 KB at exponential idle gaps (mean 1 s); one run per seed in ``--live-seeds``.
2. **Recording**: ``airlink record`` in UE 1 of the same cell with another seed
   (``--record-seed``), the other UEs as above. For the scheduler-driven replay, the cell's
   MAC log of a run with that seed in which UE 1 downloads in bulk for ``--record-seconds``
   (the cell's counterpart of a saturator recording), cut to its steady part (from 1 s
   after UE 1's first served TTI to 0.5 s before its last). Both last 60 s by default:
   what one recording of a cell gets is a draw of its fading and its neighbours' traffic,
   and a replay (the log repeats) reproduces that draw. UE 1's bulk rate over 13.5 s
   windows of this cell varies by 4.5 % (standard deviation over 28 windows of 7 seeds),
   over 56.6 s by 1.7 %, and the replay's error cannot be below the recording's own
   offset from the live seeds (docs/replay.md, "How long to record").
3. **Replays** of the recording, the same workloads inside:
   ``airlink delay BASE airlink link mahimahi.down --uplink mahimahi.up`` (airlink's
   saturator replay), ``airlink link --mode workload REC`` (airlink's workload-aware replay
   of the CellReplay set, on the link shell's C engine),
   ``mm-delay BASE mm-link mahimahi.up mahimahi.down`` (Mahimahi) and
   ``mm-cellular`` with the light/heavy traces and size offsets (CellReplay), and
   ``airlink delay D airlink cell --from-log MAC_LOG --follow-rnti 1 --users 1`` (airlink's
   scheduler-driven replay: UE 1's recorded channel, PF serving the workload's live backlog;
   the other UEs' recorded subchannels per TTI taken first (``share``), or the other UEs
   scheduled beside it from their recorded arrivals and channels (``--log-others demand``)
   or from their recorded on-periods (``--log-others flows``), or the bulk ones as full
   buffers and the others from their recorded arrivals (``--log-others mixed``); every
   replayed UE's channel is its recorded row on every subchannel, and the rows ending in
   ``selective`` are the same replays with each one's recorded wideband SINR over the
   preset's fading instead (``--log-channel selective``);
   ``D`` is the wired delay around the ground-truth cell, as the radio's own delay is
   replayed by the cell). ``BASE`` is
   the recording's median one-way base delay. A tool that is not installed gets a row that
   says so (Mahimahi's tools run as the user ``--mm-user``: they refuse root).
4. **Workloads** (one pass, random order, idle gaps of 0.5-1 s): UDP ping RTT (20 probes
   100 ms apart), downlink packet-train completion time for 1, 10, 50, 100 and 200
   packets of 1396 bytes (from request to the last packet), TCP downloads of 1 KB, 10 KB,
   100 KB, 1 MB (``--sizes`` picks others; 10 MB too with ``--big``) on a new connection
   each (connect to last byte),
   a page load (a 30 KB document, then 40 objects of 2-60 KB over 6 persistent
   connections; document request to last object byte) and a bulk download (goodput in each
   of 5 one-second intervals after its first second; then the client stops the server and
   reads to the end of the stream, so that the next workload does not start behind the
   download's queued packets). ``--passes`` passes per run; ``--workloads`` picks the kinds
   (ping, page, bulk, train, download), ``--trains`` the trains' lengths, and
   ``--repeat KIND=N`` runs a kind N times a pass (more samples of the cheap ones at
   little cost).

The table: one row per workload metric, one column per replay, with the number of live
and replayed samples and each error's bootstrap 10-90 % range (how settled it is). Below
it, the ground truth's noise: the live floor (each live seed against the others), the
floor independent samples would give (:func:`bridge_error`; a ratio well above 1 says the
seeds differ), what a perfect replay with the run's sample sizes would score, and the
samples each side at which that falls to 2.5 % (half the 5 % goal). ``--table`` prints
the table of saved runs (``--json``) again; given several, it pools them: live runs of one
cell seed count as one seed of the live floor, each replay's runs together - runs with
different workloads make one table, runs with the same ones add samples. Every cell run
(live and scheduler-driven) keeps the cell shell's late TTIs, worst lateness and radio
waits under ``"cell"`` in its result (printed when a TTI was late), so a stalled replay
shows whether the shell fell behind; ``--mac-logs DIR`` keeps their MAC logs; ``--realtime``
runs them all under ``SCHED_RR``, so that the ground truth's TTIs keep time while the
workloads' processes share the CPUs. Needs root.
Usage::

    sudo .venv/bin/python benchmarks/bench_fidelity_workloads.py    # ~6 min with --record-seconds 15, longer at 60
    sudo .venv/bin/python benchmarks/bench_fidelity_workloads.py --realtime --live-seeds 1 2 3 --passes 3 --big \
         --mahimahi-bin /opt/mahimahi/bin --cellreplay-bin /opt/cellreplay/bin --json out.json
    .venv/bin/python benchmarks/bench_fidelity_workloads.py --table out.json   # its table again
    .venv/bin/python benchmarks/bench_fidelity_workloads.py --table a.json b.json   # runs pooled
    # the page load and the 1 MB download only, with more samples of each
    sudo .venv/bin/python benchmarks/bench_fidelity_workloads.py --live-seeds 1 2 3 --passes 4 \
         --workloads page download --sizes 1MB --repeat page=3 download=3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _netns import (AIRLINK, TCP_SERVER, add_mahimahi_options, as_user, require_root,  # noqa: E402
                    throwaway_namespace, tool_folder, user_env, why_not_runnable)

PORT = 9060             # workload server: TCP downloads, UDP echo and trains
RECORD_PORT = 9050
WORKLOAD = "airlink link (workload)"
SCHEDULER = "airlink cell (sched, share)"
DEMAND = "airlink cell (sched, demand)"
FLOWS = "airlink cell (sched, flows)"
MIXED = "airlink cell (sched, mixed)"
DEMAND_SELECTIVE = "airlink cell (sched, demand, selective)"
MIXED_SELECTIVE = "airlink cell (sched, mixed, selective)"
#: ``--log-others`` and ``--log-channel`` of each scheduler-driven row
CELL_ROWS = {SCHEDULER: ("share", "flat"), DEMAND: ("demand", "flat"), FLOWS: ("flows", "flat"),
             MIXED: ("mixed", "flat"), DEMAND_SELECTIVE: ("demand", "selective"),
             MIXED_SELECTIVE: ("mixed", "selective")}
KINDS = ("ping", "page", "bulk", "train", "download")
ROWS = ("airlink link (saturator)", WORKLOAD, SCHEDULER, DEMAND, DEMAND_SELECTIVE, FLOWS, MIXED, MIXED_SELECTIVE,
        "Mahimahi (mm-link)", "CellReplay (mm-cellular)")
TRAINS = (1, 10, 50, 100, 200)
SIZES = (1_000, 10_000, 100_000, 1_000_000)
BIG = 10_000_000
# a page of many small objects: a 30 KB document, then 40 objects of 2-60 KB (725 KB in
# all) over 6 persistent connections, as a browser loads an HTTP/1.1 page
PAGE_DOC = 30_000
PAGE_OBJECTS = (2_000, 3_000, 5_000, 8_000, 12_000, 20_000, 35_000, 60_000) * 5
PAGE_CONNECTIONS = 6
BULK_SECONDS = 5        # a bulk download's goodput, each of these seconds after its first
# mm-cellular refuses packets over 1400 bytes including its 4-byte TUN header, so every
# workload (live and replayed alike) keeps its packets at or under 1396 IP bytes: TCP's MSS
# is clamped on both ends (1396 - 20 IP - 20 TCP - 12 timestamps) and trains are 1396 bytes
MSS = 1344
TRAIN_PACKET_BYTES = 1396

SERVER = TCP_SERVER + r"""
import select, sys
port = int(sys.argv[1])
def download(c):                              # a line per request: the bytes wanted
    f = c.makefile("rb")
    block = bytes(65536)
    for line in f:                            # persistent: requests until the client closes
        n = int(line)
        if n == 0:                            # bulk: until the client says stop (or goes);
            while not select.select([c], [], [], 0)[0]:
                c.sendall(block)
            c.shutdown(socket.SHUT_WR)        # then the end of the stream after the last block
            return
        while n > 0:
            n -= c.send(block[:min(n, 65536)])
def tcp():
    tcp_server(port, download, mss=%(mss)d)
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", port))
    while True:
        data, addr = u.recvfrom(2048)
        if data[:1] == b"E":
            u.sendto(data, addr)
        elif data[:1] == b"T":                # T n id: a train of n 1400-byte packets
            _, n, ident = data.split()[:3]
            for k in range(int(n)):
                head = b"D %%s %%d " %% (ident, k)
                u.sendto(head + bytes(%(train)d - 28 - len(head)), addr)
threading.Thread(target=tcp, daemon=True).start()
udp()
""" % {"mss": MSS, "train": TRAIN_PACKET_BYTES}

# the workload client of UE 1 / the replays; the background of the other UEs
CLIENT_TEMPLATE = r"""
import json, os, random, socket, sys, time
out, passes, seed, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
# the plan: each workload kind's trials per pass ("ping=3,train=4,..."; "-" for the background)
plan = dict((k, int(v)) for k, v in (kv.split("=") for kv in sys.argv[5].split(",") if "=" in kv))
stop = sys.argv[6] if len(sys.argv) > 6 else None   # the background ends when this file exists
host = os.environ.get("AIRLINK_BASE") or os.environ.get("MAHIMAHI_BASE")
port = %(port)d
ue = int(os.environ.get("AIRLINK_UE", "1"))
rng = random.Random(seed * 100 + ue)
def connect(timeout=None):                        # to the server, the MSS clamped (MSS)
    c = socket.socket()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, %(mss)d)
    c.settimeout(timeout)
    try:
        c.connect((host, port))
    except OSError:
        c.close()
        raise
    return c
def fetch(n, timeout=60):
    t = time.monotonic()
    c = connect(timeout)
    c.sendall(b"%%d\n" %% n)
    got = 0
    while got < n or n == 0:
        b = c.recv(1 << 20)
        if not b:
            break
        got += len(b)
    c.close()
    return time.monotonic() - t, got
if ue == 2:                                       # bulk background
    c = connect()
    c.sendall(b"0\n")
    while c.recv(1 << 20) and not os.path.exists(stop):
        pass
    sys.exit(0)
if ue >= 3:                                       # on-off background
    while not os.path.exists(stop):
        time.sleep(min(3.0, rng.expovariate(1.0)))
        try:
            fetch(500_000)
        except OSError:
            time.sleep(0.2)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect((host, port))
res = {"ping_ms": [], "train_ms": {}, "download_ms": {}}
def ping():
    for i in range(20):
        u.settimeout(1.0)
        t = time.monotonic(); u.send(b"E %%d" %% i)
        try:
            while u.recv(2048) != b"E %%d" %% i:
                pass
            res["ping_ms"].append((time.monotonic() - t) * 1000)
        except socket.timeout:
            pass
        time.sleep(0.1)
def train(n):
    ident = b"%%d" %% rng.randrange(1 << 30)
    t = time.monotonic(); u.send(b"T %%d %%s" %% (n, ident)); got = 0; last = None
    u.settimeout(2.0)
    try:
        while got < n:
            d = u.recv(2048)
            if d.split()[1] == ident:
                got += 1; last = time.monotonic()
    except socket.timeout:
        pass
    if got == n:
        res["train_ms"].setdefault(str(n), []).append((last - t) * 1000)
# a page: the document, then its objects over PAGE_CONNECTIONS persistent connections
# opened when the document has arrived (a browser's HTTP/1.1 pattern); the load time runs
# from the document's request to the last object's last byte
def page():
    import queue, threading
    t = time.monotonic()
    dt, got = fetch(PAGE_DOC)
    if got != PAGE_DOC:
        return
    todo = queue.Queue()
    for n in PAGE_OBJECTS:
        todo.put(n)
    done = []
    def worker():
        try:
            c = connect(30)
        except OSError:
            return
        try:
            while True:
                try:
                    n = todo.get_nowait()
                except queue.Empty:
                    break
                c.sendall(b"%%d\n" %% n)
                got = 0
                while got < n:
                    b = c.recv(1 << 20)
                    if not b:
                        return
                    got += len(b)
                done.append(n)
        except OSError:
            pass
        finally:
            c.close()
    threads = [threading.Thread(target=worker) for _ in range(PAGE_CONNECTIONS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if len(done) == len(PAGE_OBJECTS):
        res["page_ms"].append((time.monotonic() - t) * 1000)
# a bulk download: its goodput (Mbit/s) in each of BULK_SECONDS intervals of about a
# second after its first second (slow start)
def bulk():
    try:
        c = connect(5)
    except OSError:
        return
    try:
        c.sendall(b"0\n")
        mark = time.monotonic() + 1.0; got = 0; n = 0
        while n < BULK_SECONDS:
            b = c.recv(1 << 20)
            if not b:
                break
            now = time.monotonic()
            if now < mark:
                continue
            got += len(b)
            if now - mark >= 1.0:
                res["bulk_mbps"].append(got * 8 / 1e6 / (now - mark))
                mark, got, n = now, 0, n + 1
        # stop the server and take what is on the way to the end of the stream: the next
        # workload must not start behind a queue of this download's packets
        c.sendall(b"stop\n")
        c.settimeout(10)
        while c.recv(1 << 20):
            pass
    except OSError:
        pass
    finally:
        c.close()
PAGE_DOC, PAGE_CONNECTIONS, BULK_SECONDS = %(page_doc)d, %(page_conns)d, %(bulk_s)d
PAGE_OBJECTS = [%(page_objects)s]
res["page_ms"], res["bulk_mbps"] = [], []
sizes = [%(sizes)s] + ([%(big)d] if big else [])
time.sleep(2.0)                                   # let the background start
for p in range(passes):
    jobs = ([("ping", None)] * plan.get("ping", 0) + [("page", None)] * plan.get("page", 0)
            + [("bulk", None)] * plan.get("bulk", 0)
            + [("train", n) for n in (%(trains)s)] * plan.get("train", 0)
            + [("download", s) for s in sizes] * plan.get("download", 0))
    rng.shuffle(jobs)
    for kind, arg in jobs:
        time.sleep(rng.uniform(0.5, 1.0))
        if kind == "ping":
            ping()
        elif kind == "page":
            page()
        elif kind == "bulk":
            bulk()
        elif kind == "train":
            train(arg)
        else:
            dt, got = fetch(arg)
            if got == arg:
                res["download_ms"].setdefault(str(arg), []).append(dt * 1000)
json.dump(res, open(out, "w"))
"""


def client_source(sizes=SIZES, trains=TRAINS) -> str:
    """The workload client's source, its downloads of ``sizes`` bytes (and :data:`BIG` with
    ``--big``) and its trains of ``trains`` packets."""
    return CLIENT_TEMPLATE % {
        "port": PORT, "mss": MSS, "sizes": ", ".join(map(str, sizes)), "big": BIG,
        "trains": "".join(f"{n}, " for n in trains), "page_doc": PAGE_DOC, "page_conns": PAGE_CONNECTIONS,
        "page_objects": ", ".join(map(str, PAGE_OBJECTS)), "bulk_s": BULK_SECONDS}


def _repeat(text: str) -> tuple:
    """``KIND=N`` of ``--repeat``."""
    kind, _, n = text.partition("=")
    if kind not in KINDS or not n.isdigit() or int(n) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want KIND=N, KIND one of {', '.join(KINDS)}, N >= 1")
    return kind, int(n)


def _train_arg(text: str) -> int:
    """A train length of ``--trains``: 1 to 1000 packets."""
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: a train of 1 to 1000 packets")
    return int(text)


def _size_arg(text: str) -> int:
    """A download size of ``--sizes`` (``1000000``, ``100KB``, ``1MB``)."""
    from airlink.core.units import parse_size
    from airlink.core.errors import AirlinkError
    try:
        n = int(parse_size(text))
    except AirlinkError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: a size in bytes such as 100KB or 1MB ({e})")
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a size of at least 1 byte")
    return n


def distribution_error(replayed, live) -> float:
    """CellReplay's distribution error: EMD(replayed, live) / mean(live)."""
    from scipy.stats import wasserstein_distance
    return float(wasserstein_distance(replayed, live) / np.mean(live))


def error_spread(replayed, live, n: int = 200, seed: int = 1) -> tuple:
    """The 10th and 90th percentile of :func:`distribution_error` over ``n`` bootstrap
    resamples of both sample sets (with replacement, same sizes): how far the error of so
    few samples is from settled, for ranking replays."""
    rng = np.random.default_rng(seed)
    r, v = np.asarray(replayed, float), np.asarray(live, float)
    errs = [distribution_error(rng.choice(r, len(r)), rng.choice(v, len(v))) for _ in range(n)]
    return float(np.percentile(errs, 10)), float(np.percentile(errs, 90))


def bridge_error(live, n_a: int, n_b: int) -> float:
    """The distribution error two independent samples of ``n_a`` and ``n_b`` draws from the
    live distribution show on average: ``E[EMD] / mean = sqrt(2/pi) * J * sqrt(1/n_a + 1/n_b)
    / mean``, ``J = integral of sqrt(F(1 - F)) dx`` over the live samples' CDF ``F``.

    Why: ``sqrt(n_a n_b / (n_a + n_b)) (F_a - F_b)`` tends to a Brownian bridge ``B(F)``
    (Donsker), ``EMD = integral |F_a - F_b| dx`` and ``E|B(t)| = sqrt(2 t (1 - t) / pi)``.
    It is what a perfect replay of ``n_a`` samples scores against ``n_b`` live ones if the
    samples are independent; a live floor well above it says they are not (the seeds differ
    or a run's samples move together), and more samples per seed then lower it less than
    more seeds do."""
    v = np.sort(np.asarray(live, float))
    f = np.arange(1, len(v)) / len(v)                 # the CDF between consecutive samples
    j = float(np.sum(np.sqrt(f * (1 - f)) * np.diff(v)))
    return float(np.sqrt(2 / np.pi) * j * np.sqrt(1 / n_a + 1 / n_b) / np.mean(v))


def samples_needed(live, error: float) -> int:
    """Samples ``n`` (live and replayed alike) at which :func:`bridge_error` of ``n`` against
    ``n`` falls to ``error``: ``n = 2 (sqrt(2/pi) J / (error * mean))^2``."""
    per = bridge_error(live, 1, 1) / np.sqrt(2)        # sqrt(2/pi) J / mean
    return int(np.ceil(2 * (per / error) ** 2))


def metrics(res: dict) -> dict:
    """``{workload name: samples}`` of one client result."""
    out = {"ping RTT": res["ping_ms"]} if res.get("ping_ms") else {}
    if res.get("page_ms"):
        out["page load"] = res["page_ms"]
    if res.get("bulk_mbps"):
        out["bulk Mbit/s"] = res["bulk_mbps"]
    out.update({f"train {n} pkts": v for n, v in sorted(res["train_ms"].items(), key=lambda kv: int(kv[0]))})
    out.update({f"download {_size(int(s))}": v
                for s, v in sorted(res["download_ms"].items(), key=lambda kv: int(kv[0]))})
    return out


def _size(n: int) -> str:
    return f"{n // 1_000_000} MB" if n >= 1_000_000 else f"{n // 1000} KB"


def pool(docs) -> tuple:
    """``(live, replays)`` of several saved runs (:func:`save`'s documents) as one run: live
    runs of the same cell seed combined into one (the live floor compares seeds, and two
    runs of one seed are not independent of each other), each replay's runs together. A
    run saved without its seeds counts each live run as a seed of its own."""
    by_seed, replays = {}, {}
    for i, doc in enumerate(docs):
        seeds = doc.get("live_seeds") or [None] * len(doc["live"])
        if len(seeds) != len(doc["live"]):
            raise ValueError(f"{len(seeds)} live_seeds for {len(doc['live'])} live runs")
        for k, (seed, r) in enumerate(zip(seeds, doc["live"])):
            by_seed.setdefault(seed if seed is not None else ("run", i, k), []).append(r)
        for name, runs in doc["replays"].items():
            replays.setdefault(name, []).extend(runs)
    return [combine(runs) for runs in by_seed.values()], replays


def combine(results) -> dict:
    """One client result holding the samples of all ``results``."""
    out = {"ping_ms": [], "page_ms": [], "bulk_mbps": [], "train_ms": {}, "download_ms": {}}
    for r in results:
        for key, v in r.items():
            if key == "cell":           # the cell shell's timing of one run (Bench._with_cell), no samples
                continue
            if isinstance(v, dict):
                for n, xs in v.items():
                    out.setdefault(key, {}).setdefault(n, []).extend(xs)
            else:
                out.setdefault(key, []).extend(v)
    return out


def merge(results) -> dict:
    out = {}
    for r in results:
        for k, v in metrics(r).items():
            out.setdefault(k, []).extend(v)
    return out


class Bench:
    def __init__(self, args, tmp: Path, ns: str):
        self.args, self.tmp, self.ns = args, tmp, ns
        (tmp / "server.py").write_text(SERVER)
        (tmp / "client.py").write_text(client_source(args.sizes, args.trains))
        self.procs = []
        #: trials per pass of each workload kind (0: not run)
        self.plan = {k: (args.repeat.get(k, 1) if k in args.workloads else 0) for k in KINDS}
        #: what every ``airlink cell`` of the run gets (``--realtime``)
        self.realtime = ["--realtime"] if args.realtime else []

    def start(self, argv):
        p = subprocess.Popen(["ip", "netns", "exec", self.ns, *map(str, argv)], env=user_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def run(self, argv, timeout):
        """Run to the end (killed after ``timeout``); output goes to files, not pipes: a
        helper a shell leaves behind may hold a pipe open after the shell has ended."""
        with open(self.tmp / "out.txt", "w+") as out, open(self.tmp / "err.txt", "w+") as err:
            p = subprocess.Popen(["ip", "netns", "exec", self.ns, *map(str, argv)], env=user_env(),
                                 stdout=out, stderr=err)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(argv, p.returncode, out.read(), err.read())

    def cell(self, seed: int, inner: str, timeout: float, mac_log=None, stats=None):
        """``inner`` (a shell command for UE 1) in the cell; the others run the background."""
        a = self.args
        stop = self.tmp / f"stop-{seed}-{time.monotonic_ns()}"
        ue_cmd = (f'if [ "$AIRLINK_UE" = 1 ]; then {inner}; touch {stop}; '
                  f'else exec {self.args.client_python} {self.tmp}/client.py /dev/null 1 {seed} 0 - {stop}; fi')
        log = ["--mac-log", mac_log] if mac_log is not None else []
        log += ["--stats", stats] if stats is not None else []
        return self.run([AIRLINK, "delay", a.delay, AIRLINK, "cell", *self.realtime, "--preset", a.preset,
                         "--scheduler", "pf", "--users", 4, "--seed", seed, "--uplink", a.uplink, "--duration", f"{timeout:g}s", *log,
                         "--", "sh", "-c", ue_cmd], timeout=timeout + 60)

    def live(self, seed: int) -> dict | None:
        out, stats = self.tmp / f"live-{seed}.json", self.tmp / f"live-{seed}-stats.json"
        r = self.cell(seed, " ".join(map(str, self.client_argv(out, seed))), timeout=self.budget(),
                      mac_log=self.kept_mac_log(f"live-{seed}"), stats=stats)
        return self._with_cell(self._load(out, r, f"live seed {seed}"), stats, f"live seed {seed}")

    def kept_mac_log(self, name: str):
        """Where a cell run's MAC log goes with ``--mac-logs`` (None without)."""
        return None if self.args.mac_logs is None else self.args.mac_logs / f"{name}.parquet"

    @staticmethod
    def _with_cell(result, stats: Path, what: str):
        """``result`` with the cell shell's timing of the run under ``"cell"`` (from its
        ``--stats``): TTIs, late TTIs (decided more than half a TTI after their time), the
        worst lateness, the chunks the shell waited for its radio process. A stall of the
        replay shows here when the shell fell behind; printed for every cell run, so that a
        run's line says it ran even with no TTI late."""
        if result is None or not stats.exists():
            return result
        st = json.loads(stats.read_text())
        keep = ("ttis", "late_ttis", "late_fraction", "max_lateness_us", "radio_waits", "radio_wait_s",
                "cpu_per_s", "scheduler_step")
        result["cell"] = {k: st.get(k) for k in keep}
        if st.get("ttis") is not None:
            print(f"{what}: {st['late_ttis']} of {st['ttis']} TTIs late, worst {(st.get('max_lateness_us') or 0) / 1e3:.1f} ms, "
                  f"radio waits {st.get('radio_waits')}", flush=True)
        return result

    def budget(self) -> float:
        """The seconds a run of the plan may take (generous: a loaded machine, a slow replay)."""
        n = self.plan
        page = 8 + (PAGE_DOC + sum(PAGE_OBJECTS)) * 8 / 2e6
        per = (n.get("ping", 0) * (20 * 0.2 + 1) + n.get("train", 0) * len(self.args.trains) * 3.0
               + n.get("download", 0) * (sum(4 + s * 8 / 2e6 for s in self.args.sizes) + (60 if self.args.big else 0))
               + n.get("page", 0) * (page + 1) + n.get("bulk", 0) * (BULK_SECONDS + 4))
        return 10 + self.args.passes * (per + 8)

    def record(self) -> Path | None:
        rec = self.tmp / "rec"
        r = self.cell(self.args.record_seed,
                      f"{AIRLINK} record $AIRLINK_BASE --port {RECORD_PORT} --seconds {self.args.record_seconds:g} "
                      f"--peer-timeout 20 "
                      f"-o {rec} --json > {self.tmp}/record.json", timeout=4 * self.args.record_seconds + 60)
        if not (rec / "record.json").exists():
            print(f"recording failed: {r.stderr.strip()[-300:]}", flush=True)
            return None
        s = json.loads((rec / "record.json").read_text())
        print(f"recording: complete={s['complete']} ({s['incomplete'] or 'all phases'}), "
              f"{s.get('trains')} trains, base delay "
              f"{s.get('base_delay_ms', {}).get('median')} ms, heavy down "
              f"{s.get('down_rate_bps', 0) / 1e6:.2f} Mbit/s, up {s.get('up_rate_bps', 0) / 1e6:.2f} Mbit/s, "
              f"CellReplay set {s['cellreplay_set']}", flush=True)
        return rec

    def record_cell(self) -> Path | None:
        """The recorded cell's MAC log for the scheduler-driven replay: UE 1 downloads in
        bulk (the client's bulk branch) for ``--record-seconds``; the log is cut to
        ``[UE 1's first served TTI + 1 s, its last - 0.5 s]``."""
        secs = self.args.record_seconds
        full = self.tmp / "cell-rec-full.parquet"
        bulk = (f"AIRLINK_UE=2 timeout {secs:g} {self.args.client_python} {self.tmp}/client.py /dev/null 1 "
                f"{self.args.record_seed} 0 - {self.tmp}/never")
        r = self.cell(self.args.record_seed, bulk, timeout=secs + 15, mac_log=full)
        if not full.exists():
            print(f"cell recording failed: {r.stderr.strip()[-300:]}", flush=True)
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq
        table = pq.read_table(full)
        frame = table.to_pandas()
        t = (frame["time"] - frame["time"].min()).dt.total_seconds()
        got = t[(frame["user"] == "1") & (frame["served_bytes"] > 0)]
        if got.empty:
            print(f"cell recording: UE 1 was never served: {r.stderr.strip()[-300:]}", flush=True)
            return None
        frame = frame[(t >= got.min() + 1.0) & (t < got.max() - 0.5)]
        ue1 = frame[frame["user"] == "1"]
        cut = self.tmp / "cell-rec.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(
            {b"airlink": table.schema.metadata[b"airlink"]}), cut)
        print(f"cell recording: {len(ue1)} TTIs, UE 1 {ue1['served_bytes'].sum() * 8 / max(len(ue1), 1) / 1e3:.2f} "
              f"Mbit/s, {ue1['subchannels'].mean():.1f} subchannels a TTI, queue empty in "
              f"{100 * (ue1['backlog_bytes'] <= 0).mean():.1f} % of TTIs", flush=True)
        return cut

    def replay_scheduler(self, log: Path, seed: int, others: str = "share", channel: str = "flat"):
        """``airlink cell --from-log`` on the recorded cell's MAC log, UE 1 followed, one live
        UE running the workloads, inside the wired delay of the ground-truth cell; the other
        UEs as their recorded share or as their recorded demand (``--log-others``), the
        replayed UEs' channel selective or flat (``--log-channel``)."""
        a = self.args
        name = f"scheduler-{others}-{channel}-{seed}"
        out, stats = self.tmp / f"{name}.json", self.tmp / f"{name}-stats.json"
        mac = self.kept_mac_log(name)
        r = self.run([AIRLINK, "delay", a.delay, AIRLINK, "cell", *self.realtime, "--from-log", log, "--follow-rnti", 1,
                      "--log-others", others, "--log-channel", channel,
                      "--preset", a.preset, "--scheduler", "pf", "--users", 1, "--seed", seed, "--uplink", a.uplink,
                      "--stats", stats, *(["--mac-log", mac] if mac is not None else []),
                      "--", *self.client_argv(out, seed)], timeout=self.budget() + 60)
        return self._with_cell(self._load(out, r, "airlink cell --from-log"), stats, name)

    def client_argv(self, out: Path, seed: int):
        return [self.args.client_python, self.tmp / "client.py", out, self.args.passes, seed, int(self.args.big),
                ",".join(f"{k}={n}" for k, n in self.plan.items())]

    def replay_airlink(self, rec: Path, base_ms: int, seed: int):
        out = self.tmp / f"airlink-{seed}.json"
        r = self.run([AIRLINK, "delay", base_ms, AIRLINK, "link", rec / "mahimahi.down", "--uplink",
                      rec / "mahimahi.up", "--", *self.client_argv(out, seed)], timeout=self.budget() + 60)
        return self._load(out, r, "airlink link")

    def replay_workload(self, rec: Path, seed: int):
        """``airlink link --mode workload`` on the recording's CellReplay set: the base delay
        and size offsets come from the set, so no delay shell around it."""
        out = self.tmp / f"workload-{seed}.json"
        r = self.run([AIRLINK, "link", "--mode", "workload", rec, "--", *self.client_argv(out, seed)],
                     timeout=self.budget() + 60)
        return self._load(out, r, "airlink link --mode workload")

    def _as_mm_user(self, argv):
        return as_user(self.args.mm_user, argv, self.args.mahimahi_bin, self.args.cellreplay_bin)

    def replay_mahimahi(self, rec: Path, base_ms: int, seed: int):
        out = self.tmp / f"mahimahi-{seed}.json"
        mm = Path(self.args.mahimahi_bin)
        # the base delay comes from `airlink delay` around mm-link, not from mm-delay: nested
        # Mahimahi shells need ip_forward=1 in each namespace they make, which new namespaces
        # inherit from the host's root namespace (not touched here)
        r = self.run([AIRLINK, "delay", base_ms, "--", "sh", "-c",
                      'sysctl -qw net.ipv4.ip_forward=1 && exec "$@"', "sh",
                      *self._as_mm_user([mm / "mm-link", rec / "mahimahi.up", rec / "mahimahi.down", "--",
                                         *self.client_argv(out, seed)])],
                     timeout=self.budget() + 60)
        return self._load(out, r, "mm-link")

    def replay_cellreplay(self, rec: Path, seed: int):
        out = self.tmp / f"cellreplay-{seed}.json"
        cr = Path(self.args.cellreplay_bin) / "mm-cellular"
        files = [rec / "up-delay-light-pdo", rec / "down-delay-light-pdo", rec / "up-heavy-pdo",
                 rec / "down-heavy-pdo", f"--psize-latency-offset-up={rec / 'latency-offset-up'}",
                 f"--psize-latency-offset-down={rec / 'latency-offset-down'}"]
        # mm-cellular's first argument: the argv index where the command starts
        r = self.run(self._as_mm_user([cr, 2 + len(files), *files, *self.client_argv(out, seed)]),
                     timeout=self.budget() + 60)
        return self._load(out, r, "mm-cellular")

    @staticmethod
    def _load(out: Path, r, what: str):
        if out.exists():
            return json.loads(out.read_text())
        print(f"{what}: no result (exit {r.returncode}): {r.stderr.strip()[-300:]}", flush=True)
        return None


def save(path, live, replays, table=None, seeds=None) -> None:
    """The samples so far (and the table at the end) as JSON, when ``--json`` is given: a
    run cut short keeps the replays it finished. ``seeds``: the cell seed of each live run
    (``live_seeds``), so that pooled runs group their live runs by seed (:func:`pool`)."""
    if path is not None:
        doc = {"live": live, "live_seeds": seeds, "replays": replays}
        if table is not None:
            doc["table"] = table
        path.write_text(json.dumps(doc, indent=1))


def installed(args) -> dict:
    """``{row name: runnable here}`` of the Mahimahi and CellReplay replays (why not: printed)."""
    have = {}
    for name, folder, tool in (("Mahimahi (mm-link)", args.mahimahi_bin, "mm-link"),
                               ("CellReplay (mm-cellular)", args.cellreplay_bin, "mm-cellular")):
        why = why_not_runnable(folder, (tool,), args.mm_user)
        if why:
            print(f"{name}: {why}", flush=True)
        have[name] = not why
    return have


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--live-seeds", type=int, nargs="+", default=[1, 2], help="cell seeds of the live runs")
    ap.add_argument("--record-seed", type=int, default=11, help="cell seed of the recording")
    ap.add_argument("--record-seconds", type=float, default=60.0,
                    help="airlink record --seconds, and UE 1's bulk download in the recorded cell (60: a "
                         "representative draw of the cell; shorter recordings replay their window's luck)")
    ap.add_argument("--passes", type=int, default=2, help="workload passes per run")
    ap.add_argument("--replays", type=int, default=2, help="runs of each replay")
    ap.add_argument("--preset", default="quick", help="airlink cell preset (quick)")
    ap.add_argument("--delay", type=float, default=20, help="wired one-way delay around the cell, ms (20)")
    ap.add_argument("--uplink", default="5Mbit/s", help="each UE's uplink in the cell (5Mbit/s)")
    ap.add_argument("--big", action="store_true", help="also 10 MB downloads")
    ap.add_argument("--realtime", action="store_true",
                    help="run every airlink cell (the live ground truth, the cell recording, the scheduler-driven "
                         "replays) with --realtime (SCHED_RR): its TTIs stay on time while the workloads' and "
                         "background's processes share the CPUs, so the ground truth is the cell, not the "
                         "machine's load")
    ap.add_argument("--workloads", nargs="+", choices=KINDS, default=list(KINDS), metavar="KIND",
                    help="the workload kinds to run (default all): " + ", ".join(KINDS))
    ap.add_argument("--sizes", type=_size_arg, nargs="+", default=list(SIZES), metavar="BYTES",
                    help="the downloads' sizes (default " + " ".join(map(str, SIZES)) + "; --big adds 10 MB): "
                         "--sizes 1MB for more 1 MB samples in the same time")
    ap.add_argument("--trains", type=_train_arg, nargs="+", default=list(TRAINS), metavar="PACKETS",
                    help="the trains' lengths in packets (default " + " ".join(map(str, TRAINS)) + "): "
                         "--trains 50 100 200 for more of the long ones in the same time")
    ap.add_argument("--repeat", nargs="+", type=_repeat, default=[], metavar="KIND=N",
                    help="trials of a kind per pass (default 1 each), for more samples of the cheap ones: "
                         "--repeat ping=3 train=6 page=2")
    add_mahimahi_options(ap, tools=("mm-link",))
    ap.add_argument("--cellreplay-bin", default=tool_folder("mm-cellular"),
                    help="folder of CellReplay's mm-cellular (default: from PATH)")
    ap.add_argument("--client-python", default=shutil.which("python3", path="/usr/bin:/bin") or sys.executable,
                    help="interpreter of the workload client (stdlib only; the Mahimahi user must "
                         "be able to run it)")
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS), metavar="ROW",
                    help="the replays to run (default all): " + ", ".join(f"'{r}'" for r in ROWS))
    ap.add_argument("--json", type=Path, help="also write all samples and errors as JSON (saved after every "
                                              "replay)")
    ap.add_argument("--mac-logs", type=Path, metavar="DIR",
                    help="keep the MAC log of every live and scheduler-driven cell run in DIR "
                         "(live-SEED.parquet, scheduler-OTHERS-CHANNEL-SEED.parquet)")
    ap.add_argument("--table", type=Path, nargs="+", metavar="JSON",
                    help="print the table of --json files (of finished or cut runs) and exit; several "
                         "files are pooled: their live runs of one seed as one seed, their replays "
                         "together")
    args = ap.parse_args(argv)
    args.repeat = dict(args.repeat)
    if args.mac_logs is not None:
        args.mac_logs.mkdir(parents=True, exist_ok=True)
    if args.table is not None:          # the table of saved runs (or of the replays they finished)
        docs = []
        for f in args.table:
            try:
                docs.append(json.loads(f.read_text()))
                pool(docs[-1:])
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                ap.error(f"--table {f}: not a saved run ({e})")
        live, replays = pool(docs)
        report(live, replays, [n for n in ROWS if n in replays])
        return 0
    require_root("bench_fidelity_workloads")
    have = installed(args)
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; live seeds {args.live_seeds}, "
          f"record seed {args.record_seed}, {args.passes} passes per run, {args.replays} replay runs"
          f"{', cells --realtime' if args.realtime else ''}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d, throwaway_namespace("fidelity") as ns:
        tmp = Path(d)
        os.chmod(tmp, 0o777)
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        b = Bench(args, tmp, ns)
        b.start([sys.executable, tmp / "server.py", PORT])
        b.start([AIRLINK, "record", "--serve", "--port", RECORD_PORT])
        time.sleep(1.0)
        live, seeds = [], []
        for seed in args.live_seeds:
            r = b.live(seed)
            if r:
                live.append(r)
                seeds.append(seed)
        want = set(args.rows)
        rec = b.record() if want - set(CELL_ROWS) else None
        cell_rec = b.record_cell() if want & set(CELL_ROWS) else None
        replays = {}
        if cell_rec is not None:
            os.system(f"chmod -R a+rwX {tmp}")
            for name, (others, channel) in CELL_ROWS.items():
                if name in want:
                    replays[name] = [r for r in (b.replay_scheduler(cell_rec, 100 + k, others, channel)
                                                 for k in range(args.replays)) if r]
                    save(args.json, live, replays, seeds=seeds)
        if rec is not None:
            os.system(f"chmod -R a+rwX {tmp}")
            s = json.loads((rec / "record.json").read_text())
            base = int(round(s.get("base_delay_ms", {}).get("median", 0)))
            runs = {"airlink link (saturator)": lambda k: b.replay_airlink(rec, base, k)}
            if s["cellreplay_set"]:
                runs[WORKLOAD] = lambda k: b.replay_workload(rec, k)
            if have["Mahimahi (mm-link)"]:
                runs["Mahimahi (mm-link)"] = lambda k: b.replay_mahimahi(rec, base, k)
            if have["CellReplay (mm-cellular)"] and s["cellreplay_set"]:
                runs["CellReplay (mm-cellular)"] = lambda k: b.replay_cellreplay(rec, k)
            for name, fn in runs.items():
                if name in want:
                    replays[name] = [r for r in (fn(100 + k) for k in range(args.replays)) if r]
                    save(args.json, live, replays, seeds=seeds)
        for p in b.procs:
            p.kill()
            p.wait()
    print(f"\n{time.monotonic() - t0:.0f} s in all")
    table = report(live, replays, [n for n in ROWS if n in want], have)
    save(args.json, live, replays, table, seeds)
    return 0


def report(live, replays, names, have=None) -> dict:
    """Print the table of distribution errors (one row per workload, one column per replay
    in ``names``; each error with its bootstrap 10-90 % range and the replayed samples) and
    return it: ``{replay: {workload: (error, replayed samples, p10, p90) or None}}``, or a
    reason instead of the dict."""
    have = have or {}
    live_m = merge(live)
    table = {}
    floor = live_floor(live)
    for name in names:
        if replays.get(name):
            rm = merge(replays[name])
            table[name] = {w: (distribution_error(rm[w], live_m[w]), len(rm[w]), *error_spread(rm[w], live_m[w]))
                           if rm.get(w) and live_m.get(w) else None for w in live_m}
        else:
            table[name] = "not installed" if name in have and not have[name] else "no result"
    print(f"distribution error = EMD(replay, live) / live mean [bootstrap 10-90 %]; live runs {len(live)}")
    print("airlink link (workload) runs on the link shell's C engine (the rule in the link core)")
    print("live floor = the median over live seeds of EMD(that seed's samples, the other seeds') / their mean: "
          "how far the ground truth itself moves between seeds (a replay's error below it cannot be told "
          "from the truth's own spread)")
    head = (f"{'workload':<18} {'live n':>6} {'live mean':>10} {'live floor':>10}  "
            + "  ".join(f"{n[:28]:>28}" for n in names))
    print(head)
    for w, v in live_m.items():
        cells = []
        for n in names:
            t = table[n]
            if isinstance(t, str):
                cells.append(f"{t:>28}")
            elif t.get(w) is None:
                cells.append(f"{'-':>28}")
            else:
                e, k, lo, hi = t[w]
                cells.append(f"{f'{e * 100:.1f} % [{lo * 100:.0f}-{hi * 100:.0f}]':>20} (n={k:>3})")
        unit = "" if w.endswith("Mbit/s") else "ms"
        fl = f"{floor[w] * 100:.1f} %" if floor.get(w) is not None else "-"
        print(f"{w:<18} {len(v):>6} {np.mean(v):>8.1f}{unit:<2} {fl:>10}  " + "  ".join(cells))
    meds = []
    for n in names:
        t = table[n]
        errs = [] if isinstance(t, str) else [v[0] for v in t.values() if v is not None]
        meds.append(f"{f'{np.median(errs) * 100:.1f} %' if errs else '-':>28}")
    floors = [v for v in floor.values() if v is not None]
    fl = f"{np.median(floors) * 100:.1f} %" if floors else "-"
    print(f"{'median':<18} {'':>6} {'':>10} {fl:>10}  " + "  ".join(meds))
    table["live floor"] = floor
    table["noise"] = noise(live)
    return table


#: the error a perfect replay should stay under for a goal of 5 % to be told apart from noise
NOISE_TARGET = 0.025


def noise(live) -> dict:
    """Print and return, per workload, what the ground truth's noise is made of: the live
    floor next to the floor independent samples would give (:func:`bridge_error` of one
    seed's samples against the other seeds', median over seeds), the error a perfect
    replay with as many samples as the live runs would show, and the samples (live and
    replayed each) at which that falls to :data:`NOISE_TARGET`."""
    per = [metrics(r) for r in live]
    pooled = merge(live)
    out = {}
    print(f"\nnoise of the ground truth: live floor vs independent samples' floor (ratio > 1: the seeds "
          f"differ or a run's samples move together - more seeds help more than more samples per seed); "
          f"perfect replay = a replay drawing as many samples from the live distribution; "
          f"n for {NOISE_TARGET * 100:g} % = samples each side at which a perfect replay's error is "
          f"{NOISE_TARGET * 100:g} %")
    print(f"{'workload':<18} {'live floor':>10} {'iid floor':>10} {'ratio':>6} {'perfect replay':>15} "
          f"{'n for ' + format(NOISE_TARGET * 100, 'g') + ' %':>12}")
    for w, v in pooled.items():
        if len(v) < 2 or np.ptp(v) == 0:
            continue
        iid = [bridge_error(v, len(m[w]), len(v) - len(m[w])) for m in per if 0 < len(m.get(w, [])) < len(v)]
        iid_floor = float(np.median(iid)) if iid else None
        fl = live_floor(live).get(w)
        rec = {"iid_floor": iid_floor, "perfect": bridge_error(v, len(v), len(v)),
               "n_needed": samples_needed(v, NOISE_TARGET)}
        out[w] = rec
        ratio = f"{fl / iid_floor:.1f}" if fl is not None and iid_floor else "-"
        print(f"{w:<18} {_pct(fl):>10} {_pct(iid_floor):>10} {ratio:>6} {_pct(rec['perfect']):>15} "
              f"{rec['n_needed']:>12}")
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def live_floor(live) -> dict:
    """``{workload: error}``: for each live run (seed), :func:`distribution_error` of its
    samples against the other runs' samples; the median over the runs. ``None`` where fewer
    than two runs have samples of the workload."""
    per = [metrics(r) for r in live]
    out = {}
    for w in merge(live):
        errs = []
        for i, m in enumerate(per):
            rest = [x for j, o in enumerate(per) if j != i for x in o.get(w, [])]
            if m.get(w) and rest:
                errs.append(distribution_error(m[w], rest))
        out[w] = float(np.median(errs)) if errs else None
    return out


if __name__ == "__main__":
    sys.exit(main())
