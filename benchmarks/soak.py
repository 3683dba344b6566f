#!/usr/bin/env python3
"""Soak: a long bulk download through `airlink delay` + `airlink link` with every log on, or
through the cell shell with one bulk download per UE.

What users run, as whole processes, in a throw-away namespace:

- link (default, 10 minutes at 100 Mbit/s): ``airlink delay 10 airlink link TRACE
  --downlink-log --downlink-tti-log --stats -- iperf3 -c $AIRLINK_BASE -R -t T``;
- cell (``--cell UES``): ``airlink delay 10 airlink cell --preset imt-advanced --scheduler
  pf --users UES --mac-log --log-dir --stats -- iperf3 ... -R -t T`` (one server per UE).

Checked and printed:

- memory: resident set size of the shell processes sampled every few seconds; RSS at
  minute 1 vs the last minute (goal: within 5 %);
- conservation, exact: per direction (per UE for the cell) arrivals = departures + drops +
  still queued, and for the link the mm-link log's arrival/departure/drop bytes equal them;
- no late-TTI drift: link - one per-TTI log row per TTI of the run and, per minute, bytes
  served while backlogged = capacity; cell - the late-TTI fraction per minute;
- goodput / achievable per minute (link; iperf3 intervals).

There is no reference tool for a soak (Mahimahi's mm-link is not installable here).
Usage (root)::

    sudo .venv/bin/python benchmarks/soak.py                   # 10 min at 100 Mbit/s
    sudo .venv/bin/python benchmarks/soak.py --minutes 2 --rate 50
    sudo .venv/bin/python benchmarks/soak.py --cell 4          # the cell shell, 4 UEs
    sudo .venv/bin/python benchmarks/soak.py --cell 10 --realtime   # 10 UEs, SCHED_RR loop
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import (AIRLINK, PAYLOAD, require_root, rss_change, run_sampling_rss, sh,  # noqa: E402
                    throwaway_namespace)


def unaccounted_bytes(counters: dict) -> int:
    """Conservation residual of one direction's counters: arrivals - (departures + drops +
    still queued), in bytes; 0 when every byte is accounted for."""
    return counters["arrivals_bytes"] - (counters["departures_bytes"] + counters["drops_bytes"]
                                         + counters["queued_bytes"])

def soak_link(a, seconds: int, work: Path) -> tuple:
    import pandas as pd

    from airlink.traces import read_log
    trace = work / "constant.down"
    sh(AIRLINK, "trace", "constant", f"{a.rate:g}Mbit/s", "-o", trace).check_returncode()
    with throwaway_namespace("soak", iperf_ports=[5210]) as ns:
        status, err, samples = run_sampling_rss(
            ["ip", "netns", "exec", ns, AIRLINK, "delay", "10", AIRLINK, "link", str(trace),
             "--downlink-log", str(work / "down.log"), "--downlink-tti-log", str(work / "down.parquet"),
             "--stats", str(work / "stats.json"), "--",
             "sh", "-c", f"iperf3 -c $AIRLINK_BASE -p 5210 -R -t {seconds} -i 60 --json > {work}/iperf.json"],
            shells=("delay", "link"), every_s=a.sample_s)
    if status != 0:
        raise SystemExit(f"soak: the shells exited {status}: {err.strip()}")
    report = {"minutes": a.minutes, "rate_mbps": a.rate, "rss": rss_change(samples, seconds, ("delay", "link"))}
    st = json.loads((work / "stats.json").read_text())
    cons = {d: unaccounted_bytes(st[d]) for d in ("downlink", "uplink")}
    by = read_log(work / "down.log").pipe(lambda log: log.groupby(log["event"].astype(str))["bytes"].sum())
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
    report["served_over_capacity_when_backlogged_per_minute"] = \
        (per_min["served_bytes"] / per_min["capacity_bytes"]).round(4).tolist()
    ip = json.loads((work / "iperf.json").read_text())
    report["goodput_over_achievable_per_minute"] = [round(i["sum"]["bits_per_second"] / (a.rate * 1e6 * PAYLOAD), 4)
                                                    for i in ip["intervals"]]
    report["shell_cpu_s"] = st["cpu_s"]
    return report, [cons["downlink"], cons["uplink"], *cons["log_vs_counters"].values()]


def soak_cell(a, seconds: int, work: Path) -> tuple:
    import pandas as pd
    ports = [5210 + i for i in range(1, a.cell + 1)]
    with throwaway_namespace("soak-cell", iperf_ports=ports) as ns:
        status, err, samples = run_sampling_rss(
            ["ip", "netns", "exec", ns, AIRLINK, "delay", "10", AIRLINK, "cell", "--preset", "imt-advanced",
             "--scheduler", "pf", "--users", str(a.cell), "--seed", "1", "--mac-log", str(work / "mac.parquet"),
             "--log-dir", str(work / "logs"), "--stats", str(work / "stats.json"),
             *(["--realtime"] if a.realtime else []), "--",
             "sh", "-c", f"iperf3 -c $AIRLINK_BASE -p $((5210 + AIRLINK_UE)) -R -t {seconds} >/dev/null"],
            shells=("delay", "cell"), every_s=a.sample_s)
    if status != 0:
        raise SystemExit(f"soak: the shells exited {status}: {err.strip()}")
    report = {"minutes": a.minutes, "ues": a.cell,
              "rss": rss_change(samples, seconds, ("delay", "cell", "cell child"))}
    st = json.loads((work / "stats.json").read_text())
    cons = {f"ue{ue['ue']}.{d}": unaccounted_bytes(ue[d]) for ue in st["ues"] for d in ("downlink", "uplink")}
    report["conservation_residuals_bytes"] = cons
    mac = pd.read_parquet(work / "mac.parquet")
    t = (mac["time"] - mac["time"].iloc[0]).dt.total_seconds()
    report["late_tti_fraction_per_minute"] = [round(float(x), 4) for x in mac.groupby(t // 60)["late"].mean()]
    report["late_fraction"] = st.get("late_fraction")
    report["shell_cpu_per_s"] = st.get("cpu_per_s")
    return report, list(cons.values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0, help="Mbit/s of the link's constant trace")
    ap.add_argument("--sample-s", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--keep", help="folder to keep the logs in (default: a new temporary folder)")
    ap.add_argument("--cell", type=int, metavar="UES",
                    help="soak the cell shell instead: UES users, each with its own bulk download")
    ap.add_argument("--realtime", action="store_true", help="with --cell: the cell's loop under SCHED_RR")
    a = ap.parse_args(argv)
    require_root("soak")
    work = Path(a.keep or tempfile.mkdtemp(prefix="airlink-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    seconds = int(a.minutes * 60)
    report, residuals = (soak_cell if a.cell else soak_link)(a, seconds, work)
    print(json.dumps(report, indent=2, default=float))
    ok = all(abs(m["change"]) <= 0.05 for m in report["rss"].values()) and all(v == 0 for v in residuals)
    print("soak:", "memory flat and conservation exact" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
