#!/usr/bin/env python3
"""Soak: a long bulk download through `airlink delay` + `airlink link` with every log on.

What users run, as a whole process: ``airlink delay 10 airlink link TRACE
--downlink-log --downlink-tti-log --stats -- iperf3 -c $AIRLINK_BASE -R -t T``
in a throw-away namespace (default 10 minutes at 100 Mbit/s). Checked and printed:

- memory: resident set size of both shell processes sampled every few seconds; RSS at
  minute 1 vs the last minute (goal: within 5 %);
- conservation, exact: per direction arrivals = departures + drops + still queued (the
  shell's counters), and the mm-link log's arrival/departure/drop bytes equal them;
- no late-TTI drift: the per-TTI log has one row per TTI of the run (TTIs counted = run
  time / TTI), and per minute the bytes served while the queue was backlogged equal the
  trace's capacity (served/capacity per minute, first vs last);
- goodput / achievable per minute (iperf3 intervals), first vs last.

There is no reference tool for a soak; Mahimahi's mm-link is not installable here.
Usage (root)::

    sudo .venv/bin/python benchmarks/soak.py                   # 10 min at 100 Mbit/s
    sudo .venv/bin/python benchmarks/soak.py --minutes 2 --rate 50
"""
from __future__ import annotations

import argparse
import json
import os
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


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def shell_pids(ns: str) -> dict:
    """Pids of the airlink shell processes (delay, link) running in namespace ``ns`` or below."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if len(words) >= 3 and words[1].endswith("/airlink") and words[2] in ("delay", "link", "cell"):
            out.setdefault(words[2], int(pid))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0, help="Mbit/s")
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--keep", help="folder to keep the logs in")
    ap.add_argument("--cell", type=int, metavar="UES",
                    help="soak the cell shell instead: UES users, each with its own bulk download, "
                         "under `airlink cell --preset imt-advanced --scheduler pf`")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("soak: needs root (namespaces, TUN)", file=sys.stderr)
        return 2
    seconds = int(a.minutes * 60)
    if a.cell:
        return soak_cell(a, seconds)
    work = Path(a.keep or tempfile.mkdtemp(prefix="airlink-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    trace = work / "constant.down"
    sh(AIRLINK, "trace", "constant", f"{a.rate:g}Mbit/s", "-o", trace).check_returncode()
    ns = f"airlink-soak-{os.getpid()}"
    sh("ip", "netns", "add", ns).check_returncode()
    server = None
    try:
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        server = subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-p", "5210"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        cmd = ["ip", "netns", "exec", ns, AIRLINK, "delay", "10", AIRLINK, "link", str(trace),
               "--downlink-log", str(work / "down.log"), "--downlink-tti-log", str(work / "down.parquet"),
               "--stats", str(work / "stats.json"), "--",
               "sh", "-c", f"iperf3 -c $AIRLINK_BASE -p 5210 -R -t {seconds} -i 60 --json > {work}/iperf.json"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        samples = []          # (t_s, {name: rss_kib})
        pids = {}
        while p.poll() is None:
            time.sleep(a.sample_s)
            if len(pids) < 2:
                pids = shell_pids(ns)
            samples.append((time.monotonic() - t0, {k: rss_kib(v) for k, v in pids.items()}))
        err = p.stderr.read()
        if p.returncode != 0:
            print(f"soak: the shells exited {p.returncode}: {err.strip()}", file=sys.stderr)
            return 1
    finally:
        if server:
            server.kill()
            server.wait()
        for pid in sh("ip", "netns", "pids", ns).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns)

    import numpy as np
    import pandas as pd

    from airlink.traces import read_log
    report = {"minutes": a.minutes, "rate_mbps": a.rate}
    # memory: minute 1 vs the last minute, per shell
    mem = {}
    for name in ("delay", "link"):
        first = [s[name] for t, s in samples if 55 <= t <= 65 and s.get(name)]
        last = [s[name] for t, s in samples if t >= seconds - 60 and s.get(name)]
        if first and last:
            mem[name] = {"minute1_mib": np.median(first) / 1024, "last_mib": np.median(last) / 1024,
                         "change": np.median(last) / np.median(first) - 1}
    report["rss"] = mem
    st = json.loads((work / "stats.json").read_text())
    cons = {}
    for d in ("downlink", "uplink"):
        s = st[d]
        cons[d] = s["arrivals_bytes"] - (s["departures_bytes"] + s["drops_bytes"] + s["queued_bytes"])
    log = read_log(work / "down.log")
    by = log.groupby(log["event"].astype(str))["bytes"].sum()
    s = st["downlink"]
    cons["log_vs_counters"] = {"arrivals": int(by.get("arrival", 0)) - s["arrivals_bytes"],
                               "departures": int(by.get("departure", 0)) - s["departures_bytes"],
                               "drops": int(by.get("drop", 0)) - s["drops_bytes"]}
    report["conservation_residuals_bytes"] = cons
    tti = pd.read_parquet(work / "down.parquet")
    report["ttis_logged"] = int(len(tti))
    report["ttis_expected"] = int(round(st["duration_s"] * 1000))
    tti["minute"] = (tti["tti"] // 60000).astype(int)
    busy = tti[tti["backlog_bytes"] > tti["capacity_bytes"]]
    per_min = busy.groupby("minute")[["served_bytes", "capacity_bytes"]].sum()
    ratio = (per_min["served_bytes"] / per_min["capacity_bytes"]).round(4)
    report["served_over_capacity_when_backlogged_per_minute"] = ratio.tolist()
    ip = json.loads((work / "iperf.json").read_text())
    achievable = a.rate * 1e6 * PAYLOAD
    report["goodput_over_achievable_per_minute"] = [round(i["sum"]["bits_per_second"] / achievable, 4)
                                                    for i in ip["intervals"]]
    report["shell_cpu_s"] = st["cpu_s"]
    print(json.dumps(report, indent=2, default=float))
    ok = (all(abs(m["change"]) <= 0.05 for m in mem.values()) and
          all(v == 0 for v in (cons["downlink"], cons["uplink"], *cons["log_vs_counters"].values())))
    print("soak:", "memory flat and conservation exact" if ok else "CHECK FAILED")
    return 0 if ok else 1


def soak_cell(a, seconds: int) -> int:
    """The cell shell with ``a.cell`` UEs, each with its own bulk download, behind delay 10."""
    import numpy as np
    import pandas as pd
    work = Path(a.keep or tempfile.mkdtemp(prefix="airlink-soak-cell-"))
    work.mkdir(parents=True, exist_ok=True)
    ns = f"airlink-soak-{os.getpid()}"
    sh("ip", "netns", "add", ns).check_returncode()
    servers = []
    try:
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        for i in range(1, a.cell + 1):
            servers.append(subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-p", str(5210 + i)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        cmd = ["ip", "netns", "exec", ns, AIRLINK, "delay", "10", AIRLINK, "cell", "--preset", "imt-advanced",
               "--scheduler", "pf", "--users", str(a.cell), "--seed", "1", "--mac-log", str(work / "mac.parquet"),
               "--log-dir", str(work / "logs"), "--stats", str(work / "stats.json"), "--",
               "sh", "-c", f"iperf3 -c $AIRLINK_BASE -p $((5210 + AIRLINK_UE)) -R -t {seconds} >/dev/null"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        samples, pids = [], {}
        while p.poll() is None:
            time.sleep(a.sample_s)
            if len(pids) < 2:
                pids = shell_pids(ns)
            samples.append((time.monotonic() - t0, {k: rss_kib(v) for k, v in pids.items()}))
        err = p.stderr.read()
        if p.returncode != 0:
            print(f"soak: the shells exited {p.returncode}: {err.strip()}", file=sys.stderr)
            return 1
    finally:
        for s in servers:
            s.kill()
            s.wait()
        for pid in sh("ip", "netns", "pids", ns).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", ns)
    report = {"minutes": a.minutes, "ues": a.cell}
    mem = {}
    for name in ("delay", "cell"):
        first = [s[name] for t, s in samples if 55 <= t <= 65 and s.get(name)]
        last = [s[name] for t, s in samples if t >= seconds - 60 and s.get(name)]
        if first and last:
            mem[name] = {"minute1_mib": np.median(first) / 1024, "last_mib": np.median(last) / 1024,
                         "change": np.median(last) / np.median(first) - 1}
    report["rss"] = mem
    st = json.loads((work / "stats.json").read_text())
    cons = {}
    for ue in st["ues"]:
        for d in ("downlink", "uplink"):
            c = ue[d]
            cons[f"ue{ue['ue']}.{d}"] = c["arrivals_bytes"] - (c["departures_bytes"] + c["drops_bytes"] + c["queued_bytes"])
    report["conservation_residuals_bytes"] = cons
    mac = pd.read_parquet(work / "mac.parquet")
    t = (mac["time"] - mac["time"].iloc[0]).dt.total_seconds()
    late = mac.groupby(t // 60)["late"].mean() if "late" in mac else pd.Series(dtype=float)
    report["late_tti_fraction_per_minute"] = [round(float(x), 4) for x in late]
    report["late_fraction"] = st.get("late_fraction")
    report["shell_cpu_per_s"] = st.get("cpu_per_s")
    print(json.dumps(report, indent=2, default=float))
    ok = all(abs(m["change"]) <= 0.05 for m in mem.values()) and all(v == 0 for v in cons.values())
    print("soak:", "memory flat and conservation exact" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
