#!/usr/bin/env python3
"""Reproduce the source papers' TCP-over-scheduler results with the live cell (``airlink cell``).

Three studies, each a few short live runs (``--realtime``) with real TCP downloads
(``python -m airlink.apps``: congestion control per socket, receive window per client),
measured with airlink's own tools only - the cell's MAC log and stats,
``airlink collect`` on a capture at the server (RTT, packets in flight), and the metrics of
:mod:`airlink.inference.fairness` / :func:`airlink.inference.rank_factors` - and each
compared with ``airlink simulate`` (same preset, scheduler, seed; full buffers) and with the
paper's numbers:

``kakuda``  Kakuda & Tsuru (IMT-Advanced): the imt-advanced preset's 10 UEs (10 distance
            groups, User 1 nearest), MaxCIR vs PF (MC-PFS), base-station buffers of 40 / 500 /
            1500 packets, TCP cubic and reno, behind ``airlink delay`` (the paper's wired
            path: 10 ms core + 1-5 ms + 1.75 ms radio one way; 13 ms here). Per run: User 1's
            active-time ratio, RTT and TCP goodput, every UE's goodput, the aggregate.
``evdo``    The EV-DO opportunistic-scheduling study: 16 UEs on the evdo preset, per-flow
            drop-tail of 10 packets, TCP Reno, PF's averaging constant ``a`` swept: aggregate
            MAC throughput vs TCP goodput, scheduling-jitter CoV.
``mattar``  Mattar et al. (TCP over CDMA2000): the 1xrtt preset at 10 ms TTIs with the
            backlog-driven scheduler, 30 KB base-station queues, ``airlink delay 250`` (their
            450-550 ms path): the fairness gap of 1-4 concurrent downloads; NMI(RTT; packets
            in flight) with an 8 KB and a 64 KB receive window.

Needs root, tcpdump. Every namespace, server and capture it starts is gone when it ends.
The machine this ran on was shared: the load average is recorded with every run, and so are
the late TTIs (a late TTI is decided and served late, never stretched: see docs/cell.md).

    sudo .venv/bin/python benchmarks/repro_cell.py kakuda --out results/repro/kakuda    # 12 runs, ~5 min
    sudo .venv/bin/python benchmarks/repro_cell.py evdo --out results/repro/evdo        # 3 runs, ~2 min
    sudo .venv/bin/python benchmarks/repro_cell.py mattar --out results/repro/mattar    # 6 runs, ~9 min
    sudo .venv/bin/python benchmarks/repro_cell.py all --out results/repro              # the three, ~16 min

Each study prints one line per run and writes OUT/results.json (every number, the command,
late TTIs, load; for kakuda and evdo also the senders' own retransmission counters, the
reference for the capture's retransmission counts and their timeout/fast classification,
and - where the kernel has tracefs - its reason for each retransmission, paired with the
capture's packet by packet: the congestion state it was sent in, from the events
``tcp:tcp_cong_state_set`` and ``tcp:tcp_retransmit_skb`` of a trace instance of the
script's own, removed afterwards);
OUT/<run>/ keeps the MAC log, stats, the applications' results and the ``airlink collect``
frames (the capture itself only with ``--keep``).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _netns import (AIRLINK, kernel_retransmissions, kernel_tcp_counters, kinds_against_kernel,  # noqa: E402
                    require_root, start_tcpdump, throwaway_namespace, user_env)

from airlink.inference import fairness as F  # noqa: E402

PORT = 5201
PY = sys.executable


# ----------------------------------------------------------------------------- one live run
# the senders' own count of why they retransmitted (the server namespace's MIB counters,
# /proc/net/snmp and /proc/net/netstat, which are per network namespace): the reference the
# capture's classification into timeout and fast retransmissions is read against. The
# kernel counts segments of one MSS, the capture packets, which at the sender are GSO
# packets of up to 64 KB where the path offloads (the shells do): kakuda's 40-packet MaxCIR
# cubic run of 2026-11-29 resent 1,224 packets in the capture, 2,425 segments by payload /
# MSS, all fast - the kernel's TCPFastRetrans 2,425
KERNEL_TCP = ("Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPFastRetrans", "TcpExt.TCPSlowStartRetrans",
              "TcpExt.TCPLossProbes", "TcpExt.TCPSackRecovery", "TcpExt.TCPRenoRecovery",
              "TcpExt.TCPSpuriousRTOs")


def live_run(out: Path, *, preset: str, users: int, scheduler: str, seed: int, seconds: float,
             queue_args: str, cc: str | None = None, rwnd: str | None = None, sets=(), tti=None,
             delay_ms: float | None = None, capture: bool = False, realtime: bool = True,
             server_sysctls=()) -> dict:
    """One ``airlink cell`` run (inside ``airlink delay`` when ``delay_ms``) with one bulk
    download per UE from a server outside; returns the paths and the per-UE app results.
    ``server_sysctls``: ``NAME=VALUE`` set in the server's namespace only (the TCP senders'
    stack, e.g. ``net.ipv4.tcp_frto=0``)."""
    out.mkdir(parents=True, exist_ok=True)
    fetch = f"{PY} -m airlink.apps fetch $AIRLINK_BASE {PORT} --seconds {seconds} --json"
    if cc:
        fetch += f" --cc {cc}"
    if rwnd:
        fetch += f" --rwnd {rwnd}"
    fetch += f" > {out}/ue$AIRLINK_UE.json"
    cell = [AIRLINK, "cell", "--preset", preset, "--users", str(users), "--seed", str(seed),
            "--scheduler", scheduler, "--queue-args", queue_args, "--stats", str(out / "stats.json"),
            "--mac-log", str(out / "mac.parquet")]
    for s in sets:
        cell += ["--set", s]
    if tti:
        cell += ["--tti", tti]
    if realtime:
        cell.append("--realtime")
    cell += ["--", "sh", "-c", fetch]
    cmd = ([AIRLINK, "delay", f"{delay_ms:g}"] if delay_ms else []) + cell
    (out / "command.txt").write_text(" ".join(cmd) + "\n")
    load0 = os.getloadavg()
    with throwaway_namespace(f"repro-{os.getpid() % 10000}") as ns:
        for kv in server_sysctls:
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", kv], check=True)
        server = subprocess.Popen(["ip", "netns", "exec", ns, PY, "-m", "airlink.apps", "serve", "--port", str(PORT),
                                   "--log", str(out / "server.json"), "--ready", str(out / "server.ready")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dump = None
        try:
            deadline = time.monotonic() + 10
            while not (out / "server.ready").exists():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the application server did not start")
                time.sleep(0.05)
            if capture:
                dump = start_tcpdump(["ip", "netns", "exec", ns, "tcpdump", "-Z", "root", "-i", "any", "-s", "96",
                                      "-U", "--immediate-mode", "-n", "-w", out / "server.pcap", f"tcp port {PORT}"])
            k0 = kernel_tcp_counters(ns)
            t0 = time.monotonic()
            with kernel_retransmissions(PORT) if capture else nullcontext() as why:
                r = subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                                   env=user_env(), timeout=seconds * 4 + 120)
            wall = time.monotonic() - t0
            k1 = kernel_tcp_counters(ns)
            kernel = {k: k1.get(k, 0) - k0.get(k, 0) for k in KERNEL_TCP}
        finally:
            if dump is not None:
                time.sleep(0.5)
                dump.send_signal(signal.SIGINT)
                dump.wait(timeout=30)
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    load1 = os.getloadavg()
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}\nfailed ({r.returncode}): {r.stderr.strip()[-800:]}")
    stats = json.loads((out / "stats.json").read_text())
    apps = [json.loads((out / f"ue{u}.json").read_text()) for u in range(1, users + 1)]
    return {"out": str(out), "command": " ".join(cmd), "wall_s": wall, "stats": stats, "apps": apps,
            "load_before": load0[0], "load_after": load1[0], "mac": out / "mac.parquet", "kernel_tcp": kernel,
            "pcap": out / "server.pcap" if capture else None, "kernel_retx": why}


def late(run: dict) -> dict:
    s = run["stats"]
    return {"ttis": s["ttis"], "late_ttis": s["late_ttis"], "late_pct": 100 * s["late_fraction"],
            "max_lateness_ms": s["max_lateness_us"] / 1000, "shell_cpu_per_s": s["cpu_per_s"],
            "load_avg": [round(run["load_before"], 2), round(run["load_after"], 2)]}


def mac_tables(path, users: int, window=None) -> dict:
    """The MAC log as (TTI x UE) tables of its columns, cut to the window where every UE's
    download ran (``window``: (start, end) timestamps; default from every UE's first to
    the earliest last arrival)."""
    mac = pd.read_parquet(path)
    ues = sorted(mac["user"].unique(), key=int)          # user ids are strings: "10" after "9"
    tab = {c: mac.pivot(index="time", columns="user", values=c).sort_index()[ues]
           for c in ("served_bytes", "backlog_seen_bytes", "backlog_bytes", "subchannels", "arrivals_bytes",
                     "drops_packets", "late")}
    arr = tab["arrivals_bytes"]
    if window is None:
        firsts = [arr.index[np.flatnonzero(arr[u].to_numpy() > 0)[0]] for u in arr.columns]
        lasts = [arr.index[np.flatnonzero(arr[u].to_numpy() > 0)[-1]] for u in arr.columns]
        window = (max(firsts), min(lasts))
    cut = {k: v.loc[window[0]:window[1]] for k, v in tab.items()}
    cut["window_s"] = (window[1] - window[0]).total_seconds()
    return cut


def flows_by_ue(run: dict, resolution: str) -> dict:
    """``airlink collect`` on the server's capture: ``{ue: (flow summary, tcp series of the
    data direction)}``, a UE's flow found by its address."""
    pcap = Path(run["pcap"])
    outdir = pcap.parent / "frames"
    r = subprocess.run([AIRLINK, "collect", str(pcap), "-o", str(outdir), "--resolution", resolution,
                        "--no-packets", "--json"], capture_output=True, text=True, env=user_env())
    if r.returncode != 0:
        raise SystemExit(f"airlink collect failed: {r.stderr.strip()[-500:]}")
    recs = json.loads(r.stdout)["files"][0]["flows"]
    series = pd.read_parquet(outdir / f"{pcap.stem}.tcp.parquet")
    out = {}
    for u, app in enumerate(run["apps"], start=1):
        addr, port = app["local"].rsplit(":", 1)
        for rec in recs:
            if {rec["src"], rec["dst"]} >= {addr} and port in (str(rec["sport"]), str(rec["dport"])):
                s = series[(series["flow"] == rec["flow"]) & (series["direction"] == rec["data_direction"])]
                out[u] = (rec, s)
    return out


def simulate(preset: str, *, scheduler: str, seed: int, seconds: float, users: int, buffer=None, sets=(),
             tti=None) -> dict:
    """``airlink simulate`` (full buffers) with the same preset, scheduler and seed: its summary."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="repro-sim-") as d:
        cmd = [AIRLINK, "simulate", "--preset", preset, "--scheduler", scheduler, "--seed", str(seed),
               "--duration", f"{seconds:g}s", "--users", str(users), "-o", d, "--json", "--no-progress",
               "--no-mac-log"]
        if buffer:
            cmd += ["--buffer", str(buffer)]
        for s in sets:
            cmd += ["--set", s]
        if tti:
            cmd += ["--set", f"tti={tti}"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=user_env())
        if r.returncode != 0:
            raise SystemExit(f"airlink simulate failed: {r.stderr.strip()[-500:]}")
        return json.loads(r.stdout)


def per_packet_kinds(run: dict) -> dict | None:
    """The server's retransmissions as ``airlink collect`` classed them against the
    kernel's own reason for each (:func:`_netns.kinds_against_kernel`), from the frames
    :func:`flows_by_ue` wrote; None without the kernel's trace (no tracefs)."""
    if run["kernel_retx"] is None:
        return None
    frames = Path(run["pcap"]).parent / "frames"
    stem = Path(run["pcap"]).stem
    got = kinds_against_kernel(pd.read_parquet(frames / f"{stem}.events.parquet"),
                               pd.read_parquet(frames / f"{stem}.flows.parquet"), run["kernel_retx"], PORT)
    return {f"{k}/{a}": n for (k, a), n in sorted(got.items())}


def _versus_line(v: dict | None) -> str:
    if v is None:
        return "per packet: no kernel trace (tracefs)"
    return "per packet, kernel/airlink: " + ", ".join(f"{k} {n}" for k, n in v.items())


def goodput_mbps(app: dict) -> float:
    return app["goodput_bps"] / 1e6


def _kernel_line(k: dict) -> str:
    return (f"{k['Tcp.RetransSegs']} segments resent, {k['TcpExt.TCPTimeouts']} timeouts, "
            f"{k['TcpExt.TCPFastRetrans']} fast, {k['TcpExt.TCPSlowStartRetrans']} in slow start after a loss, "
            f"{k['TcpExt.TCPLossProbes']} loss probes, {k['TcpExt.TCPSpuriousRTOs']} spurious RTOs")


def _fmt(x, nd=3):
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{nd}g}"


# ----------------------------------------------------------------------------- Kakuda & Tsuru
def kakuda(args, out: Path) -> list:
    rows = []
    sims = {}
    for sched in args.schedulers:
        sims[sched] = simulate("imt-advanced", scheduler=sched, seed=args.seed, seconds=args.seconds, users=10)
        s = sims[sched]
        print(f"simulated {sched}: aggregate {s['aggregate_throughput_mbps']:.1f} Mbit/s, "
              f"user 1 {s['users'][0]['throughput_mbps']:.1f} Mbit/s, active {s['users'][0]['active_time_ratio']:.2f}",
              flush=True)
    for cc in args.cc:
        for sched in args.schedulers:
            for buf in args.buffers:
                run = live_run(out / f"{sched}-{buf}-{cc}", preset="imt-advanced", users=10, scheduler=sched,
                               seed=args.seed, seconds=args.seconds, queue_args=f"packets={buf}", cc=cc,
                               delay_ms=args.delay, capture=True)
                t = mac_tables(run["mac"], 10)
                act_seen = F.active_time_ratios(t["backlog_seen_bytes"].to_numpy())
                act_after = F.active_time_ratios(t["backlog_bytes"].to_numpy())
                sel = F.selection_ratios(t["subchannels"].to_numpy())
                mac_mbps = t["served_bytes"].sum().to_numpy() * 8 / t["window_s"] / 1e6
                flows = flows_by_ue(run, "100ms")
                good = [goodput_mbps(a) for a in run["apps"]]
                row = {"study": "kakuda", "scheduler": sched, "buffer_packets": buf, "cc": cc,
                       "user1_active_time_ratio": float(act_seen[0]),
                       "user1_active_time_ratio_after_service": float(act_after[0]),
                       "user1_rtt_ms_median": flows[1][0]["rtt_ms_median"] if 1 in flows else None,
                       "user1_goodput_mbps": good[0], "user1_mac_mbps": float(mac_mbps[0]),
                       "user1_selection_ratio": float(sel[0]),
                       "aggregate_goodput_mbps": float(sum(good)), "aggregate_mac_mbps": float(mac_mbps.sum()),
                       "goodput_mbps": [round(g, 2) for g in good],
                       "rtt_ms_median": [round(flows[u][0]["rtt_ms_median"] or float("nan"), 1) if u in flows else None
                                         for u in range(1, 11)],
                       "retransmissions": [flows[u][0]["retransmissions"] if u in flows else None for u in range(1, 11)],
                       "kernel_tcp": run["kernel_tcp"],
                       "drops_packets": [int(x) for x in t["drops_packets"].sum().to_numpy()],
                       "window_s": t["window_s"],
                       "sim_aggregate_mbps": sims[sched]["aggregate_throughput_mbps"],
                       "sim_user1_mbps": sims[sched]["users"][0]["throughput_mbps"],
                       **late(run), "command": run["command"]}
                rows.append(row)
                print(f"{sched:>6} {buf:>5} pkts {cc:>5}: user 1 active {row['user1_active_time_ratio']:.2f} "
                      f"(after service {row['user1_active_time_ratio_after_service']:.2f}), "
                      f"RTT {_fmt(row['user1_rtt_ms_median'])} ms, goodput {row['user1_goodput_mbps']:.1f} Mbit/s; "
                      f"aggregate {row['aggregate_goodput_mbps']:.1f} Mbit/s (MAC {row['aggregate_mac_mbps']:.1f}); "
                      f"late {row['late_pct']:.2f} % of {row['ttis']} TTIs; load {row['load_avg']}", flush=True)
                if not args.keep:
                    (out / f"{sched}-{buf}-{cc}" / "server.pcap").unlink(missing_ok=True)
    return rows


# ----------------------------------------------------------------------------- EV-DO study
def evdo(args, out: Path) -> list:
    rows = []
    for a in args.a:
        sets = [f"pf_a={a}"]
        sim = simulate("evdo", scheduler="pf", seed=args.seed, seconds=args.seconds, users=16, sets=sets)
        run = live_run(out / f"a{a}", preset="evdo", users=16, scheduler="pf", seed=args.seed,
                       seconds=args.seconds, queue_args="packets=10", cc="reno", sets=sets, capture=True,
                       delay_ms=args.delay, server_sysctls=args.server_sysctl)
        t = mac_tables(run["mac"], 16)
        tti_s = 1 / 600
        gaps = [F.gap_stats(g) for g in F.service_gaps(t["subchannels"].to_numpy(), tti_s=tti_s)]
        covs = [g["cov"] for g in gaps]
        flows = flows_by_ue(run, "100ms")
        recs = [flows[u][0] for u in sorted(flows)]
        versus = per_packet_kinds(run)
        mac_mbps = float(t["served_bytes"].to_numpy().sum() * 8 / t["window_s"] / 1e6)
        good = [goodput_mbps(x) for x in run["apps"]]
        sim_cov = float(np.nanmean([u["gap_cov"] for u in sim["users"]]))
        # the study's "MAC throughput" is what the scheduler gives saturated users (airlink
        # simulate, full buffers); what TCP got through the air is the live MAC log's served
        # bytes while every download ran (headers and retransmissions included)
        row = {"study": "evdo", "a": a, "aggregate_mac_mbps": mac_mbps, "aggregate_goodput_mbps": float(sum(good)),
               "live_over_sim": mac_mbps / sim["aggregate_throughput_mbps"],
               "gap_cov_mean": float(np.nanmean(covs)), "sim_aggregate_mbps": sim["aggregate_throughput_mbps"],
               "sim_gap_cov_mean": sim_cov, "goodput_mbps": [round(g, 3) for g in good],
               "drops_packets": int(t["drops_packets"].to_numpy().sum()), "window_s": t["window_s"],
               "ue1_gap_mean_ms": gaps[0]["mean"] * 1000, "ue1_gap_max_ms": gaps[0]["max"] * 1000,
               "timeout_retransmissions": sum(r["timeout_retransmissions"] for r in recs),
               "fast_retransmissions": sum(r["fast_retransmissions"] for r in recs),
               "spurious_retransmissions": sum(r["spurious_retransmissions"] for r in recs),
               "retransmitted_segments": sum(r["retransmitted_segments"] for r in recs),
               "kernel_tcp": run["kernel_tcp"], "kinds_vs_kernel": versus,
               "rtt_ms_median": [round(r["rtt_ms_median"] or float("nan"), 1) for r in recs],
               **late(run), "command": run["command"]}
        rows.append(row)
        if not args.keep:
            (out / f"a{a}" / "server.pcap").unlink(missing_ok=True)
        print(f"a={a}: live served {mac_mbps:.3f} Mbit/s ({row['live_over_sim']:.2f} of the simulated full-buffer "
              f"MAC throughput), sum of TCP goodputs {row['aggregate_goodput_mbps']:.3f}, gap CoV "
              f"{row['gap_cov_mean']:.2f}, UE 1's gaps mean {row['ue1_gap_mean_ms']:.0f} ms max {row['ue1_gap_max_ms']:.0f} ms; "
              f"retransmissions: {row['timeout_retransmissions']} by timeout ({row['spurious_retransmissions']} spurious), "
              f"{row['fast_retransmissions']} fast, {row['retransmitted_segments']} segments (the senders' kernel: "
              f"{_kernel_line(run['kernel_tcp'])}; {_versus_line(versus)}); simulated "
              f"{row['sim_aggregate_mbps']:.3f} Mbit/s, CoV {sim_cov:.2f}; late {row['late_pct']:.2f} %; "
              f"load {row['load_avg']}", flush=True)
    return rows


# ----------------------------------------------------------------------------- Mattar et al.
# The preset's greedy throttle (a user with more than 6000 bytes queued for 3 s steps down to
# 9.6 kbit/s: Mattar et al.'s UDP CBR observation) locks a bulk TCP download at 9.6 kbit/s
# for good - TCP keeps the 30 KB queue full, so the user stays "greedy" - while the paper's
# TCP downloads ran at tens of kbit/s and more: it is switched off for these TCP runs.
NO_THROTTLE = ("backlog_greedy_s=1e9",)
MATTAR = dict(preset="1xrtt", scheduler="backlog", tti="10ms", queue_args="bytes=30000", sets=NO_THROTTLE)


def mattar(args, out: Path) -> list:
    from airlink.inference import rank_factors
    rows = []
    for n in args.users:
        run = live_run(out / f"users{n}", users=n, seed=args.seed, seconds=args.seconds, cc="reno",
                       delay_ms=args.delay, **MATTAR)
        good = [goodput_mbps(a) * 1000 for a in run["apps"]]
        t = mac_tables(run["mac"], n)
        mac_kbps = t["served_bytes"].sum().to_numpy() * 8 / t["window_s"] / 1e3
        sim = simulate("1xrtt", scheduler="backlog", seed=args.seed, seconds=args.seconds, users=n,
                       sets=["traffic=full", *NO_THROTTLE], tti="10ms")
        row = {"study": "mattar-fairness", "users": n, "goodput_kbps": [round(g, 1) for g in good],
               "fairness_gap_goodput": F.fairness_gap(good), "jain_goodput": F.jain_index(good),
               "mac_kbps": [round(x, 1) for x in mac_kbps], "fairness_gap_mac": F.fairness_gap(mac_kbps),
               "sim_fairness_gap": sim["fairness_gap"],
               "sim_throughput_kbps": [round(u["throughput_mbps"] * 1000, 1) for u in sim["users"]],
               **late(run), "command": run["command"]}
        rows.append(row)
        print(f"{n} users: goodput {row['goodput_kbps']} kbit/s, fairness gap {_fmt(row['fairness_gap_goodput'])} "
              f"(MAC {_fmt(row['fairness_gap_mac'])}; simulated full buffers {_fmt(sim['fairness_gap'])}); "
              f"late {row['late_pct']:.2f} %; load {row['load_avg']}", flush=True)
    for rwnd in args.rwnd:
        run = live_run(out / f"rwnd{rwnd}", users=1, seed=args.seed, seconds=args.rwnd_seconds, cc="reno",
                       rwnd=rwnd, delay_ms=args.delay, capture=True, **MATTAR)
        flows = flows_by_ue(run, args.resolution)
        rec, s = flows[1]
        s = s.dropna(subset=["rtt_ms"])
        nmi = rank_factors(s.drop(columns=["flow", "direction"]), target="rtt_ms",
                           factors=["inflight_packets", "goodput_bps"], max_lag=args.max_lag, bins=args.bins,
                           surrogates=100)
        pk = nmi.set_index("factor")
        row = {"study": "mattar-rwnd", "rwnd": rwnd, "rcvbuf_bytes": run["apps"][0]["rcvbuf_bytes"],
               "nmi_rtt_inflight": float(pk.loc["inflight_packets", "peak_nmi"]),
               "p_rtt_inflight": float(pk.loc["inflight_packets", "p_value"]),
               "lag_s_rtt_inflight": float(pk.loc["inflight_packets", "lag_s"]),
               "nmi_rtt_goodput": float(pk.loc["goodput_bps", "peak_nmi"]),
               "rtt_ms_median": rec["rtt_ms_median"], "inflight_packets_median": float(s["inflight_packets"].median()),
               "goodput_kbps": goodput_mbps(run["apps"][0]) * 1000, "samples": int(len(s)),
               **late(run), "command": run["command"]}
        rows.append(row)
        print(f"rwnd {rwnd}: NMI(RTT; in flight) {row['nmi_rtt_inflight']:.3f} (p {row['p_rtt_inflight']:.2f}), "
              f"RTT median {_fmt(row['rtt_ms_median'])} ms, in flight {row['inflight_packets_median']:.1f} packets, "
              f"goodput {row['goodput_kbps']:.1f} kbit/s; late {row['late_pct']:.2f} %; load {row['load_avg']}",
              flush=True)
        if not args.keep:
            (out / f"rwnd{rwnd}" / "server.pcap").unlink(missing_ok=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", choices=["kakuda", "evdo", "mattar", "all"])
    ap.add_argument("--out", default="results/repro-cell", help="folder for every run's MAC log, stats and results")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=None, help="length of each download (default per study)")
    ap.add_argument("--keep", action="store_true", help="keep the captures")
    ap.add_argument("--schedulers", default="maxcir,pf")
    ap.add_argument("--buffers", default="40,500,1500")
    ap.add_argument("--cc", default="cubic,reno")
    ap.add_argument("--a", default="0.1,0.01,0.001", help="evdo: PF averaging constants")
    ap.add_argument("--users", default="1,2,3,4", help="mattar: numbers of concurrent downloads ('' for none)")
    ap.add_argument("--rwnd", default="8KiB,64KiB", help="mattar: receive windows ('' for none)")
    ap.add_argument("--rwnd-seconds", type=float, default=120)
    ap.add_argument("--resolution", default="500ms", help="mattar: grid of the RTT / in-flight series")
    ap.add_argument("--max-lag", default="5s")
    ap.add_argument("--bins", type=int, default=8)
    ap.add_argument("--delay", type=float, default=None,
                    help="one-way delay in ms around the cell (default: kakuda 13, mattar 250, evdo none)")
    ap.add_argument("--server-sysctl", action="append", default=[], metavar="NAME=VALUE",
                    help="evdo: a sysctl of the senders' namespace, e.g. net.ipv4.tcp_frto=0 (repeatable)")
    args = ap.parse_args(argv)
    require_root("repro_cell", "tcpdump")
    args.schedulers = args.schedulers.split(",")
    args.buffers = [int(b) for b in args.buffers.split(",")]
    args.cc = args.cc.split(",")
    args.a = [float(a) for a in args.a.split(",")]
    args.users = [int(n) for n in args.users.split(",") if n]      # "" runs none
    args.rwnd = [r for r in args.rwnd.split(",") if r]
    out = Path(args.out)
    studies = ["kakuda", "evdo", "mattar"] if args.study == "all" else [args.study]
    defaults = {"kakuda": 8, "evdo": 15, "mattar": 30}
    results = {}
    for st in studies:
        a = argparse.Namespace(**vars(args))
        a.seconds = args.seconds or defaults[st]
        a.delay = args.delay if args.delay is not None else {"kakuda": 13, "mattar": 250}.get(st)
        d = out / st if args.study == "all" else out
        d.mkdir(parents=True, exist_ok=True)
        print(f"== {st} ({a.seconds:g} s per download)", flush=True)
        results[st] = {"kakuda": kakuda, "evdo": evdo, "mattar": mattar}[st](a, d)
        (d / "results.json").write_text(json.dumps(results[st], indent=1, default=float))
    print(f"results in {out}")


if __name__ == "__main__":
    main()
