#!/usr/bin/env python3
"""Replay fidelity on real data: an iCellSpeed download replayed under a live TCP download.

For each iCellSpeed static file (Purdue, MobiCom 2020; ``../shared/data/icellspeed``):

1. ``airlink trace from-log FILE -o granted.parquet --json`` builds the capacity trace from
   the per-second ``*_tbs`` columns (summed over carriers; what the scheduler granted) and
   measures the log's own offset and ratio between TBS and the logged application
   throughput; ``--column throughput_bps`` builds the application's trace.
2. ``airlink link granted.parquet --once --downlink-tti-log ...`` runs a bulk TCP download
   of the trace's length (a plain socket sender outside, a receiver inside that stamps every
   read with the wall clock), in a throw-away namespace.
3. Printed per file: served bytes vs trace per second (mean ratio, correlation), the share of
   capacity the shell left unused while bytes were queued (the shell's own fidelity: 0 when
   it serves every byte it may) and the share of TTIs not filled because the queue was empty
   (the sender's part); goodput vs the logged application throughput per second (mean ratio,
   correlation) unshifted and with the log's measured offset; goodput vs TBS.

Seconds are counted from the link's first TTI (the TTI log's wall clock); the last partial
second and the first second (TCP slow start over the first RTTs) are left out of the
correlations and ratios. Needs root. Usage::

    sudo .venv/bin/python benchmarks/bench_fidelity.py                    # 4 files x 2 runs (~10 min)
    sudo .venv/bin/python benchmarks/bench_fidelity.py --repeat 1 --files loc_31/default/data_310410_loc-lakeway-018d.csv
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

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from _netns import AIRLINK, TCP_SERVER, require_root, throwaway_namespace  # noqa: E402
from bench_replay import ns_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ICELL = ROOT.parent / "shared" / "data" / "icellspeed" / "D1_static" / "Austin" / "ATT"
FILES = ["loc_31/default/data_310410_loc-lakeway-011d.csv", "loc_31/default/data_310410_loc-lakeway-018d.csv",
         "loc_31/default/data_310410_loc-lakeway-020d.csv", "loc_31/default/data_310410_loc-lakeway-013d.csv"]
PORT = 9009

SENDER = TCP_SERVER + r"""
def bulk(c):                                  # until the receiver goes
    block = bytes(65536)
    while True:
        c.sendall(block)
tcp_server(%d, bulk)
""" % PORT

RECEIVER = r"""
import json, os, signal, socket, sys, time
host, seconds, out = os.environ["AIRLINK_BASE"], float(sys.argv[1]), sys.argv[2]
bins = {}
def dump(*_):
    json.dump({str(k): v for k, v in bins.items()}, open(out, "w"))
    os._exit(0)
signal.signal(signal.SIGTERM, dump)        # the shell stops us at the trace's end (--once)
c = socket.create_connection((host, %d))
end = time.time() + seconds
while time.time() < end:
    c.settimeout(max(0.01, end - time.time()))
    try:
        n = len(c.recv(1 << 20))
    except socket.timeout:
        continue
    if n == 0:
        break
    k = time.time_ns() // 10_000_000          # 10 ms bins of wall-clock time
    bins[k] = bins.get(k, 0) + n
dump()
""" % PORT


def cli(*args) -> str:
    r = subprocess.run([AIRLINK, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_fidelity: airlink {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r.stdout


def corr(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.corrcoef(x, y)[0, 1]) if x.size > 2 and x.std() > 0 and y.std() > 0 else float("nan")


def one_run(ns: str, csv: Path, tmp: Path) -> dict:
    """One download of ``csv``'s granted trace through ``airlink link`` in namespace ``ns``."""
    from airlink.traces import read_trace
    granted, app = tmp / "granted.parquet", tmp / "app.parquet"
    info = json.loads(cli("trace", "from-log", csv, "-o", granted, "--json"))
    cli("trace", "from-log", csv, "--column", "throughput_bps", "-o", app)
    tr, ap = read_trace(granted), read_trace(app)
    seconds = float(tr.duration)
    tti_log, recv = tmp / "tti.parquet", tmp / "recv.json"
    for p in (tti_log, recv):
        p.unlink(missing_ok=True)
    rx = tmp / "rx.py"
    rx.write_text(RECEIVER)
    r = ns_run(ns, [AIRLINK, "link", granted, "--once", "--downlink-tti-log", tti_log, "--",
                    sys.executable, rx, f"{seconds:g}", recv], timeout=seconds + 60)
    if r.returncode != 0 or not recv.exists():
        return {"file": csv.name, "error": (r.stderr or "no receiver output").strip().splitlines()[-1:]}
    log = pd.read_parquet(tti_log)
    t0 = int(log["time"].iloc[0].value)
    n = int(seconds)
    served = np.bincount(((log["time"].astype("int64") - t0) // 10**9).clip(0, n).to_numpy(),
                         weights=log["served_bytes"].to_numpy(float), minlength=n + 1)[:n]
    bins = json.loads(recv.read_text())
    k = (np.array([int(b) for b in bins]) * 10_000_000 - t0) // 10**9
    v = np.array(list(bins.values()), float)
    ok = (k >= 0) & (k < n)
    goodput = np.bincount(k[ok], weights=v[ok], minlength=n)[:n]
    trace_s = tr.values[:n, 0]
    app_s = ap.values[:n, 0]
    lag = int(round(info["comparison"]["best_lag_s"])) if info["comparison"] else 0
    s = slice(1, n)                                 # skip slow start
    shifted_app = app_s[1 + lag:n] if lag >= 0 else app_s[1:n + lag]
    shifted_good = goodput[1:n - lag] if lag >= 0 else goodput[1 - lag:n]
    # capacity the shell left unused although bytes were queued at the TTI's end (should be 0:
    # any shortfall of served vs trace is then the sender's, which had nothing queued)
    busy = log["backlog_bytes"].to_numpy() > 0
    wasted = float((log["capacity_bytes"] - log["served_bytes"]).to_numpy()[busy].clip(0).sum())
    idle_ttis = float((~busy & (log["served_bytes"] < log["capacity_bytes"])).mean())
    return {
        "file": csv.name, "seconds": n, "trace_mbps": trace_s[s].mean() * 8 / 1e6,
        "wasted_while_queued": wasted / float(log["capacity_bytes"].sum()), "ttis_unfilled_empty_queue": idle_ttis,
        "log_tbs_over_app": info["comparison"]["mean_ratio"], "log_offset_s": info["comparison"]["best_lag_s"],
        "log_corr_0": info["comparison"]["corr_0"], "log_corr_offset": info["comparison"]["corr_best"],
        "served_over_trace": served[s].sum() / trace_s[s].sum(), "served_trace_corr": corr(served[s], trace_s[s]),
        "goodput_over_tbs": goodput[s].sum() / trace_s[s].sum(),
        "goodput_over_app": goodput[s].sum() / app_s[s].sum(), "goodput_app_corr": corr(goodput[s], app_s[s]),
        "goodput_over_app_offset": shifted_good.sum() / shifted_app.sum(),
        "goodput_app_corr_offset": corr(shifted_good, shifted_app),
    }


COLUMNS = [("served_over_trace", "served/trace"), ("served_trace_corr", "r(served,trace)"),
           ("wasted_while_queued", "unused while queued"), ("ttis_unfilled_empty_queue", "TTIs short, queue empty"),
           ("goodput_over_tbs", "goodput/TBS"), ("goodput_over_app", "goodput/app"),
           ("goodput_app_corr", "r(goodput,app)"), ("goodput_over_app_offset", "goodput/app@off"),
           ("goodput_app_corr_offset", "r(goodput,app)@off")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", nargs="+", default=FILES, help="paths under icellspeed/D1_static/Austin/ATT")
    ap.add_argument("--repeat", type=int, default=2, help="runs per file (median and min-max printed)")
    ap.add_argument("--json", type=Path, help="also write every run as JSON")
    args = ap.parse_args(argv)
    require_root("bench_fidelity")
    missing = [f for f in args.files if not (ICELL / f).exists()]
    if missing:
        print(f"bench_fidelity: not found under {ICELL}: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; {args.repeat} run(s) per file")
    runs = []
    # the sender runs in the namespace and dies with it when the block ends
    with throwaway_namespace("fidelity") as ns, tempfile.TemporaryDirectory() as d:
        sender = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SENDER],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        tmp = Path(d)
        os.chmod(tmp, 0o755)
        for f in args.files:
            per = [one_run(ns, ICELL / f, tmp) for _ in range(args.repeat)]
            runs += per
            good = [p for p in per if "error" not in p]
            if not good:
                print(f"{Path(f).name}: error: {per[0]['error']}", flush=True)
                continue
            p = good[0]
            print(f"{p['file']}: {p['seconds']} s, trace {p['trace_mbps']:.1f} Mbit/s; log: TBS/app "
                  f"{p['log_tbs_over_app']:.3f}, app trails TBS by {p['log_offset_s']:+g} s "
                  f"(r {p['log_corr_0']:.2f} -> {p['log_corr_offset']:.2f})", flush=True)
            for key, label in COLUMNS:
                vals = [q[key] for q in good]
                print(f"    {label:<20} median {statistics.median(vals):.3f}  "
                      f"[{min(vals):.3f} .. {max(vals):.3f}]", flush=True)
    sender.wait()
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
