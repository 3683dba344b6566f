"""The cell shell with real packets through real namespaces (airlink cell).

Every test runs the shell inside a throw-away namespace (``test_ns``); a UDP source in that
namespace (the shell's outer side) sends to each UE what the UE asks for, so the UEs'
base-station queues fill with real packets. The reference for "same decisions" is
``airlink simulate``'s output for the same preset, seed and duration.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pytest

from tests.replay._replay_netns import AIRLINK, marked_processes
from tests.replay.test_offload_netns import CLIENT as OFFLOAD_CLIENT

pytestmark = pytest.mark.netns

# The UDP source (outer side): a UE sends "RATE_BPS SECONDS BURST_PACKETS [ON_S OFF_S
# [PACKET_BYTES]]" to port 9000; the source answers with BURST packets at once, then
# RATE_BPS of PACKET_BYTES-byte IP packets (1500) for SECONDS, ON_S on / OFF_S off when given.
SOURCE = textwrap.dedent('''
    import select, socket, sys, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.bind(("0.0.0.0", 9000))
    flows = {}          # addr -> [next send, end, interval, on_s, off_s, start, payload]
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        due = [f[0] for f in flows.values()]
        timeout = max(0.0, min(due) - now) if due else None
        if select.select([s], [], [], timeout)[0]:
            msg, addr = s.recvfrom(2048)
            words = msg.decode().split()
            rate, secs, burst = float(words[0]), float(words[1]), int(words[2])
            on_s, off_s = (float(words[3]), float(words[4])) if len(words) > 3 else (0.0, 0.0)
            size = int(words[5]) if len(words) > 5 else 1500
            payload = b"x" * (size - 28)
            for _ in range(burst):
                s.sendto(payload, addr)
            now = time.monotonic()
            flows[addr] = [now, now + secs, size * 8 / rate, on_s, off_s, now, payload]
        now = time.monotonic()
        for addr, f in list(flows.items()):
            while f[0] <= now:
                if now >= f[1]:
                    flows.pop(addr)
                    break
                period = f[3] + f[4]
                if period > 0 and (f[0] - f[5]) % period >= f[3]:
                    f[0] += period - (f[0] - f[5]) % period     # off: skip to the next on
                    continue
                s.sendto(f[6], addr)
                f[0] += f[2]
''')

# What each UE runs: ask for a flow, receive until told to stop, report bytes received.
UE = textwrap.dedent('''
    import os, socket, sys, time
    rate, secs, burst = sys.argv[1], sys.argv[2], sys.argv[3]
    extra = sys.argv[4:]
    ue = int(os.environ["AIRLINK_UE"])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.settimeout(0.5)
    s.sendto(" ".join([rate, secs, burst, *extra]).encode(), (os.environ["AIRLINK_BASE"], 9000))
    got = 0
    end = time.monotonic() + float(secs) + 2
    try:
        while time.monotonic() < end:
            try:
                got += len(s.recv(4096))
            except socket.timeout:
                pass
    finally:
        out = os.environ.get("UE_OUT")
        if out:
            with open(f"{out}/ue{ue}.txt", "w") as f:
                f.write(str(got))
''')


@pytest.fixture
def udp_source(test_ns, tmp_path):
    (tmp_path / "source.py").write_text(SOURCE)
    (tmp_path / "ue.py").write_text(UE)
    test_ns.script_server(tmp_path / "source.py")
    return tmp_path / "ue.py"


def _mac(path):
    m = pd.read_parquet(path)
    return {c: m.pivot(index="time", columns="user", values=c).sort_index(axis=1, key=lambda s: s.astype(int))
            for c in ("served_bytes", "backlog_bytes", "late", "drops_packets", "arrivals_bytes", "tx_bytes")
            if c in m.columns}


SMALL = ["--set", "bandwidth_hz=1080000"]   # the quick preset at a quarter of its bandwidth: 2.7 Mbit/s


# radio inputs in chunks of 400 TTIs (4 UEs x 24 subchannels): a 2 s run takes five, the
# fourth and fifth in the radio process's slots of the first two (the cell keeps each slot's
# compiled-step block from the start)
CHUNKS = ["--set", "chunk_elements=38400"]


def test_full_queues_get_the_simulators_decisions(test_ns, udp_source, tmp_path):
    """UDP above capacity to 4 UEs (300 packets at once, then 2 Mbit/s each against a 2.7
    Mbit/s cell), the clock held until every queue is full: per-UE served bytes per TTI
    equal `airlink simulate`'s full-buffer run with the same preset, seed and duration."""
    r = test_ns.airlink("cell", "--preset", "quick", *SMALL, *CHUNKS, "--users", "4", "--seed", "7",
                        "--scheduler", "pf", "--duration", "2s", "--queue-args", "packets=300",
                        "--warmup", "400000", "--mac-log", tmp_path / "mac.parquet",
                        "--stats", tmp_path / "stats.json", "--",
                        sys.executable, udp_source, "2e6", "4", "300", timeout=60)
    assert r.returncode in (0, 143), r.stderr
    sim_dir = tmp_path / "sim"
    s = subprocess.run([AIRLINK, "simulate", "--preset", "quick", *SMALL, *CHUNKS, "--seed", "7", "--scheduler", "pf",
                        "--duration", "2s", "-o", sim_dir, "--no-progress"], capture_output=True, text=True)
    assert s.returncode == 0, s.stderr
    sim = _mac(sim_dir / "mac.parquet")
    live = _mac(tmp_path / "mac.parquet")
    assert live["served_bytes"].shape == sim["served_bytes"].shape == (2000, 4)
    # the precondition: no UE's queue ran dry (else its service would differ for a reason)
    assert (live["backlog_bytes"].to_numpy() > 20000).all(), live["backlog_bytes"].min()
    on_time = ~live["late"].to_numpy().any(axis=1)
    a, b = live["served_bytes"].to_numpy(), sim["served_bytes"].to_numpy()
    assert np.array_equal(a[on_time], b[on_time])
    assert on_time.mean() > 0.5, "most TTIs were late: the machine is overloaded"
    # every TTI's decision is the simulator's (late ones too: the queues were full anyway)
    assert np.array_equal(a, b)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["ttis"] == 2000
    assert stats["late_ttis"] == int((~on_time).sum())
    from airlink.sim import kernel
    assert stats["scheduler_step"].startswith("compiled" if kernel.COMPILED and _c_path_built() else "Python")


def _c_path_built():
    try:
        from airlink.replay import _cellpath  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("queue,logs,uplink,python", [
    ("droptail", True, True, True), ("drophead", True, True, True), ("droptail", True, False, False),
    ("drophead", True, False, False), ("droptail", False, False, "no-offload"), ("drophead", False, True, False),
    ("droptail", True, True, "writer")],
    ids=["python-path-droptail", "python-path-drophead", "c-path-droptail", "c-path-drophead",
         "c-path-no-logs-no-offload", "c-path-uplink", "c-path-uplink-logs-writer"])
def test_conservation_per_ue(test_ns, udp_source, tmp_path, queue, logs, uplink, python):
    """Per UE: packets in = out + dropped + still queued; the bytes the MAC log says were
    served equal the bytes that left the queue (up to the fractional carry, < 1 byte); what
    each UE's application received is what left its queue; the Mahimahi-format logs (the
    downlink's, and the constrained uplink's) tell the same. Through the Python packet loop
    (``AIRLINK_PURE_PYTHON=1``) and the C one (its TUN devices with offloads, and once
    without: ``AIRLINK_OFFLOAD=0``), with drop-tail and drop-head queues, an unconstrained
    uplink and one of 100 Mbit/s (which holds nothing back here); once with the TUN writes in
    the writer thread (``AIRLINK_CELL_WRITER=1``: every served packet still reaches its UE)."""
    no_offload = python == "no-offload"
    writer = python == "writer"
    python = python is True
    t_before = time.time_ns()
    r = test_ns.airlink("cell", "--preset", "quick", *SMALL, "--users", "3", "--seed", "1",
                        "--scheduler", "maxcir", "--queue", queue, "--queue-args", "packets=40",
                        "--mac-log", tmp_path / "mac.parquet", "--stats", tmp_path / "stats.json",
                        *(["--log-dir", tmp_path / "logs"] if logs else []),
                        *(["--uplink", "100Mbit/s"] if uplink else []), "--",
                        sys.executable, udp_source, "1.5e6", "1.5", "60", timeout=60,
                        env={"UE_OUT": str(tmp_path), **({"AIRLINK_PURE_PYTHON": "1"} if python else {}),
                             **({"AIRLINK_OFFLOAD": "0"} if no_offload else {}),
                             **({"AIRLINK_CELL_WRITER": "1"} if writer else {})})
    t_after = time.time_ns()
    assert r.returncode == 0, r.stderr
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["packet_path"] == ("C" if not python and _c_path_built() else "Python")
    assert stats["offload"] is (not python and not no_offload and _c_path_built())
    assert stats["tun_writer"] == ("thread" if writer and _c_path_built() else "loop")
    if python:
        assert stats["scheduler_step"].startswith("Python (")
    mac = _mac(tmp_path / "mac.parquet")
    # the MAC log's times are the TTIs' wall-clock times: inside the run, one TTI apart
    times = mac["served_bytes"].index.as_unit("ns").asi8
    assert t_before <= times[0] and times[-1] <= t_after, (t_before, times[0], times[-1], t_after)
    assert (np.diff(times) == 1_000_000).all()
    for ue in stats["ues"]:
        d = ue["downlink"]
        assert d["arrivals_packets"] == d["departures_packets"] + d["drops_packets"] + d["queued_packets"], d
        assert d["arrivals_bytes"] >= d["departures_bytes"] + d["drops_bytes"]
        assert d["drops_packets"] > 0, "40 packets against 1.5 Mbit/s each must overflow"
        col = str(ue["ue"])
        served = mac["served_bytes"][col].sum()
        departed_and_in_service = d["arrivals_bytes"] - d["drops_bytes"] - d["queued_bytes"]
        assert abs(served - departed_and_in_service) < 1.0, (served, departed_and_in_service)
        assert mac["drops_packets"][col].sum() == d["drops_packets"]
        # what the UE's application received is what left the queue (minus IP/UDP headers)
        got = int((tmp_path / f"ue{col}.txt").read_text())
        assert got == d["departures_packets"] * 1472
        assert ue["kernel"]["inner"]["tx_dropped"] == 0 and ue["kernel"]["outer"]["rx_dropped"] == 0
        if not logs:
            continue
        # the Mahimahi-format log, read back by airlink's own reader, tells the same story
        from airlink.traces.mmlinklog import read_log
        log = read_log(tmp_path / "logs" / f"ue{col}.down.log")
        ev = log.groupby("event", observed=True)["bytes"].agg(["sum", "count"])
        assert ev.loc["arrival", "count"] == d["arrivals_packets"]
        assert ev.loc["departure", "sum"] == d["departures_bytes"]
        assert log.loc[log.event == "drop", "packets"].sum() == d["drops_packets"]
        assert log.loc[log.event == "drop", "bytes"].sum() == d["drops_bytes"]
        assert ev.loc["opportunity", "sum"] == pytest.approx(served, abs=1.0)
        assert (log.loc[log.event == "departure", "delay_ms"] >= 0).all()
        if uplink:
            up = ue["uplink"]
            assert up["stage"] == "link" and up["arrivals_packets"] >= 1
            assert up["arrivals_packets"] == up["departures_packets"] + up["drops_packets"] + up["queued_packets"]
            ulog = read_log(tmp_path / "logs" / f"ue{col}.up.log")
            uev = ulog.groupby("event", observed=True)["bytes"].agg(["sum", "count"])
            assert uev.loc["arrival", "count"] == up["arrivals_packets"]
            assert uev.loc["departure", "sum"] == up["departures_bytes"]
            # an opportunity per uplink TTI with capacity: 100 Mbit/s of 1 ms TTIs = 12500 bytes
            assert (ulog.loc[ulog.event == "opportunity", "bytes"] == 12500).all()
            assert uev.loc["opportunity", "count"] == up["ttis"]


def test_failing_command_gives_the_worst_status_and_cleans_up(test_ns):
    before = test_ns.links(), test_ns.routes()
    r = test_ns.airlink("cell", "--users", "3", "--", "sh", "-c", 'exit $((AIRLINK_UE * 2))')
    assert r.returncode == 6, r.stderr
    assert test_ns.links() == before[0] and test_ns.routes() == before[1]


def test_missing_command_and_bad_options_fail_with_one_line(test_ns):
    r = test_ns.airlink("cell", "--users", "2", "--", "/no/such/program")
    assert r.returncode == 127
    r = test_ns.airlink("cell", "--tti", "20ms", "--", "true")
    assert r.returncode == 2 and r.stderr.startswith("airlink: error: a cell's TTI must be 0.125 to 10 ms")
    r = test_ns.airlink("cell", "--queue-args", "packets=-1", "--", "true")
    assert r.returncode == 2 and "must not be negative" in r.stderr


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_signals_to_the_shell_leave_nothing_behind(test_ns, tmp_path, how):
    """Ctrl-C, SIGTERM and SIGKILL of the shell: no TUN, route or process of it (or of the
    UEs' commands, background ones included) is left."""
    before = test_ns.links(), test_ns.routes()
    marker = f"CELLTEST={tmp_path.name}-{int(how)}"
    p = test_ns.popen([AIRLINK, "cell", "--users", "3", "--", "sh", "-c", "sleep 60 & sleep 60"],
                      env={"CELLTEST": marker.split("=")[1]}, start_new_session=True,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(150):
            if len(marked_processes(marker, "sleep")) >= 6:
                break
            time.sleep(0.1)
        sleepers = marked_processes(marker, "sleep")
        assert len(sleepers) == 6
        assert any(": al" in line for line in test_ns.links().splitlines())
        if how == signal.SIGINT:   # the terminal sends Ctrl-C to the whole foreground group
            os.killpg(p.pid, how)
        else:
            p.send_signal(how)
        status = p.wait(timeout=20)
        assert status != 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for _ in range(50):
        if not marked_processes(marker) and test_ns.links() == before[0]:
            break
        time.sleep(0.1)
    assert not marked_processes(marker)
    assert test_ns.links() == before[0]
    assert test_ns.routes() == before[1]


def test_nests_inside_delay(test_ns, udp_source, tmp_path):
    """airlink delay 10 airlink cell: the UEs reach the outside through both shells, each
    UE's round trip carries the delay shell's 2 x 10 ms."""
    r = test_ns.airlink("delay", "10", AIRLINK, "cell", "--users", "2", "--",
                        "sh", "-c", "ping -c 3 -i 0.2 $AIRLINK_BASE | tail -1", timeout=60)
    assert r.returncode == 0, r.stderr
    rtts = [float(line.split("=")[1].split("/")[0]) for line in r.stdout.splitlines() if "min/avg" in line]
    assert len(rtts) == 2 and all(x >= 20.0 for x in rtts), r.stdout


@pytest.mark.parametrize("slots", [True, False])
def test_the_slotted_uplink_puts_a_ping_on_the_tti_grid(test_ns, tmp_path, slots):
    """The UEs' unconstrained uplink leaves at TTI ends (docs/cell.md, "The uplink"): a ping's
    request waits for the end of the TTI it was sent in, and its reply, read after that TTI
    was decided, for the end of the next one - every round trip is at least one TTI (10 ms
    here). ``AIRLINK_CELL_UPLINK_SLOTS=0`` turns it off (the stats say which)."""
    stats = tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--preset", "quick", "--tti", "10ms", "--users", "1", "--stats", stats, "--",
                        "sh", "-c", "ping -c 8 -i 0.113 $AIRLINK_BASE",
                        timeout=60, env={"AIRLINK_CELL_UPLINK_SLOTS": "1" if slots else "0"})
    assert r.returncode == 0, r.stderr
    assert json.loads(stats.read_text())["uplink_slots"] is slots
    rtts = [float(w.split("=")[1]) for w in r.stdout.split() if w.startswith("time=")]
    assert len(rtts) == 8, r.stdout
    if slots:
        assert min(rtts) >= 10.0, rtts


@pytest.mark.parametrize("python", [False, True])
def test_a_constrained_uplinks_ttis_end_with_the_downlinks(test_ns, tmp_path, python):
    """The constrained uplink and the downlink share the cell's TTI grid (docs/cell.md, "Time,
    and late TTIs"). Worked by hand for 10 ms TTIs: a ping sent at a phase p after a TTI
    boundary leaves the uplink at the next boundary b (10 - p ms later); its reply, back from
    the base side a fraction of a millisecond after b, missed b's downlink decision and leaves
    at b + 10 ms (or a TTI later, where the radio gave it nothing). Every round trip is
    20 - p ms or more: never below one TTI. On grids offset by some o, a ping sent in
    (0, o) would come back in 10 - p ms: the pings' interval (113 ms, no multiple of the
    TTI) spreads their phases so that some would. With and without the compiled packet
    path."""
    stats = tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--preset", "quick", "--tti", "10ms", "--users", "1", "--uplink", "5Mbit/s",
                        "--stats", stats, "--", "sh", "-c", "ping -c 12 -i 0.113 $AIRLINK_BASE",
                        timeout=60, env={"AIRLINK_PURE_PYTHON": "1"} if python else None)
    assert r.returncode == 0, r.stderr
    assert json.loads(stats.read_text())["ues"][0]["uplink"]["stage"] == "link"
    rtts = [float(w.split("=")[1]) for w in r.stdout.split() if w.startswith("time=")]
    assert len(rtts) == 12, r.stdout
    # the first may have gone before the clock started (packets then go as they come)
    assert min(rtts[1:]) >= 9.5, rtts


def _ranked(mac_path, user):
    """rank_factors of the live MAC log: assigned rate against backlog (after the TTI, and as
    the scheduler saw it) and channel quality."""
    from airlink.inference import rank_factors
    frame = pd.read_parquet(mac_path)
    r = rank_factors(frame, target="assigned_rate_bps",
                     factors=["backlog_bytes", "backlog_seen_bytes", "sinr_reported_db"],
                     user=user, max_lag="100ms", surrogates=100, bootstrap=20, bins=8)
    return r.set_index("factor")


def test_closed_loop_backlog_scheduler_follows_the_live_backlog(test_ns, udp_source, tmp_path):
    """Mattar et al. (CDMA2000): on-off UDP sources (1 s on / 5 s off at 38.4 and 76.8 kbit/s,
    500-byte packets, 30 KB base-station buffers) behind the backlog-driven scheduler (the
    1xrtt preset at 10 ms TTIs): in the live MAC log the assigned rate follows the backlog
    the applications create (peak NMI > 0.4, significant against surrogates) far more than
    the channel."""
    mac = tmp_path / "mac.parquet"
    r = test_ns.airlink("cell", "--preset", "1xrtt", "--tti", "10ms", "--users", "2", "--seed", "3",
                        "--queue-args", "bytes=30000", "--duration", "7s", "--mac-log", mac, "--",
                        "sh", "-c", f'exec {sys.executable} {udp_source} $((AIRLINK_UE * 38400)) 7 0 1 5 500',
                        timeout=60)
    assert r.returncode in (0, 143), r.stderr
    for user in ("1", "2"):
        ranked = _ranked(mac, user)
        c = ranked.loc["sinr_reported_db"]
        for backlog in ("backlog_bytes", "backlog_seen_bytes"):
            b = ranked.loc[backlog]
            assert b["peak_nmi"] > 0.4, ranked
            assert b["p_value"] < 0.05, ranked
            assert b["peak_nmi"] > c["peak_nmi"], ranked


def test_closed_loop_maxcir_with_full_queues_follows_the_channel(test_ns, udp_source, tmp_path):
    """The reverse: MaxCIR with every queue kept full by UDP above capacity assigns rate by
    the channel; NMI(assigned rate; channel) is above NMI(assigned rate; backlog the
    scheduler saw). (The backlog *after* the TTI of a queue pinned at its limit is the limit
    less what was just served: it mirrors the rate itself, so it is not the factor here.)"""
    mac = tmp_path / "mac.parquet"
    r = test_ns.airlink("cell", "--preset", "quick", *SMALL, "--set", "snr_db=[12,10]", "--users", "2",
                        "--seed", "3", "--scheduler", "maxcir", "--queue-args", "packets=200", "--warmup", "250000",
                        "--duration", "2s", "--mac-log", mac, "--",
                        sys.executable, udp_source, "3e6", "4", "200", timeout=60)
    assert r.returncode in (0, 143), r.stderr
    for user in ("1", "2"):
        ranked = _ranked(mac, user)
        b, c = ranked.loc["backlog_seen_bytes"], ranked.loc["sinr_reported_db"]
        assert c["peak_nmi"] > b["peak_nmi"], ranked
        assert c["p_value"] < 0.05, ranked


def test_uplink_rate_limits_each_ue(test_ns, tmp_path):
    """--uplink 1Mbit/s: each UE's upload (UDP, about 6 Mbit/s offered for 1 s: at least 3
    even on a busy machine) leaves the shell at about 1 Mbit/s; the stats count what the
    uplink stage held back."""
    stats = tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--users", "2", "--uplink", "1Mbit/s", "--stats", stats, "--",
                        sys.executable, "-c",
                        "import os, socket, time\n"
                        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                        "end = time.monotonic() + 1\n"
                        "while time.monotonic() < end:\n"
                        "    s.sendto(b'x' * 1000, (os.environ['AIRLINK_BASE'], 9))\n"
                        "    time.sleep(1028 * 8 / 6e6)\n", timeout=60)
    assert r.returncode == 0, r.stderr
    st = json.loads(stats.read_text())
    for ue in st["ues"]:
        up = ue["uplink"]
        assert up["stage"] == "link"
        assert up["arrivals_packets"] == up["departures_packets"] + up["drops_packets"] + up["queued_packets"]
        # 1 Mbit/s over the run (the UE ran ~1 s, the shell drains at most 1 s more)
        assert up["departures_bytes"] <= 1e6 / 8 * (st["duration_s"] + 0.01)
        assert up["arrivals_bytes"] > 2 * up["departures_bytes"]      # >= 3 Mbit/s offered


def test_bad_uplink_and_unknown_parameter_fail_before_any_namespace(test_ns):
    before = test_ns.links()
    r = test_ns.airlink("cell", "--uplink", "2 Mbyte", "--", "true")
    assert r.returncode == 2 and r.stderr.strip() == (
        "airlink: error: cannot read rate '2 Mbyte': unknown unit 'mbyte' (use bps, kbps, Mbps or Gbps)")
    r = test_ns.airlink("cell", "--set", "subchanels=4", "--", "true")
    assert r.returncode == 2 and "unknown preset parameter 'subchanels'" in r.stderr
    assert test_ns.links() == before


def test_each_ue_can_run_its_own_command(test_ns, tmp_path):
    """A list of commands, one per UE (what an experiment file's per-UE applications become)."""
    from airlink.replay.cell import CellShell
    script = (
        "import os, sys\n"
        "from airlink.replay.cell import run_cell\n"
        f"out = {str(tmp_path)!r}\n"
        "cmds = [['sh', '-c', f'echo first $AIRLINK_UE > {out}/a'], ['sh', '-c', f'echo second $AIRLINK_UE > {out}/b']]\n"
        "sys.exit(run_cell(cmds, users=2, preset='quick'))\n")
    r = test_ns.exec([sys.executable, "-c", script], timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a").read_text() == "first 1\n"
    assert (tmp_path / "b").read_text() == "second 2\n"
    with pytest.raises(Exception, match="3 commands for 2 UEs"):
        CellShell(users=2).run([["true"]] * 3)


def test_tun_device_removed_under_a_running_cell(test_ns, tmp_path):
    """The cell's outside TUN device deleted while the UEs run: one clear line, status 2,
    no MAC log claiming to be complete, nothing left behind."""
    before_routes = test_ns.routes()
    mac = tmp_path / "mac.parquet"
    p = test_ns.popen([AIRLINK, "cell", "--users", "2", "--mac-log", str(mac), "--",
                       "sh", "-c", "ping -i 0.05 $AIRLINK_BASE > /dev/null"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            devices = [l.split(":")[1].strip() for l in test_ns.links().splitlines() if ": al" in l]
            if devices:
                break
            time.sleep(0.1)
        assert devices
        time.sleep(1.0)
        test_ns.exec(["ip", "link", "del", devices[0]])
        status = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().strip().splitlines()
    assert status == 2, err
    assert err[0].startswith("airlink: error: airlink cell: a network device of the cell failed"), err
    assert not mac.exists()
    assert test_ns.routes() == before_routes


# A TCP source (outer side): every connection gets the same known 1 MB, then is closed; the
# UE's client prints how many bytes it received and their SHA-256.
TCP_BYTES = 1_000_000
FAST = ["--set", "n_subchannels=100", "--set", "bandwidth_hz=18e6"]   # the quick preset at 100 RBs
TCP_SOURCE = textwrap.dedent(f'''
    import random, socket, threading
    data = random.Random(7).randbytes({TCP_BYTES})
    s = socket.create_server(("0.0.0.0", 9100), backlog=16)
    print("ready", flush=True)
    def send(c):
        c.sendall(data)
        c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=send, args=(c,), daemon=True).start()
''')
TCP_CLIENT = OFFLOAD_CLIENT.format(port=9100)   # the bytes it got and their SHA-256


def test_tcp_streams_cross_the_cell_intact_in_super_packets(test_ns, tmp_path):
    """Two UEs download 1 MB each over TCP through 60-packet drop-tail queues (a cell of 100
    RBs). With offload (the default) the TUN devices carry GSO super-packets, which the
    queues hold whole and the scheduler's budgets cut into pieces: each stream arrives
    intact (SHA-256 of the sender's bytes), every queue conserves its packets (segments),
    the MAC log's served bytes per UE are the bytes that left its queue, and the kernel
    dropped nothing at the TUN devices. (Without offload: test_conservation_per_ue's
    ``c-path-no-offload``; the same service per TTI: test_cell_path.py.)"""
    import hashlib
    import random
    (tmp_path / "source.py").write_text(TCP_SOURCE)
    test_ns.script_server(tmp_path / "source.py")
    r = test_ns.airlink("cell", "--preset", "quick", *FAST, "--users", "2", "--seed", "2",
                        "--queue-args", "packets=60", "--mac-log", tmp_path / "mac.parquet",
                        "--stats", tmp_path / "stats.json", "--", sys.executable, "-c", TCP_CLIENT, timeout=60)
    assert r.returncode == 0, r.stderr
    want = f"{TCP_BYTES} {hashlib.sha256(random.Random(7).randbytes(TCP_BYTES)).hexdigest()}"
    assert r.stdout.splitlines() == [want, want]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["offload"] is _c_path_built()
    mac = _mac(tmp_path / "mac.parquet")
    for ue in stats["ues"]:
        d = ue["downlink"]
        assert d["arrivals_packets"] == d["departures_packets"] + d["drops_packets"] + d["queued_packets"], d
        assert d["queued_packets"] == 0 and d["departures_bytes"] >= TCP_BYTES
        served = mac["served_bytes"][str(ue["ue"])].sum()
        assert abs(served - (d["arrivals_bytes"] - d["drops_bytes"] - d["queued_bytes"])) < 1.0
        assert ue["kernel"]["inner"]["tx_dropped"] == 0 and ue["kernel"]["outer"]["rx_dropped"] == 0
        if stats["offload"]:
            # the kernel handed over super-packets and TTIs ended inside some of them
            assert d["superpackets"] > 0 and d["pieces_cut"] > 0
    assert stats["write_errors"] == 0


def _bitmap(text: str) -> set:
    """The CPUs of a kernel cpumask as sysfs prints it (hex, 32-bit groups joined by commas)."""
    mask = int(text.strip().replace(",", ""), 16)
    return {c for c in range(mask.bit_length()) if mask >> c & 1}


@pytest.mark.parametrize("mode", ["off", "all", "pin"])
def test_rps_is_set_on_each_ues_device_and_goes_with_it(test_ns, tmp_path, mode):
    """``--rps``: each UE reads its own device's rps_cpus from inside its namespace (a sysfs
    mounted there, in a mount namespace of its own): the shell's CPUs (all), every CPU but
    the loop's (pin), untouched (off: the kernel's default, none); nothing is left behind."""
    cpus = os.sched_getaffinity(0)      # the shell inherits the test's CPU set through ip netns exec
    if mode != "off" and len(cpus) < 2:
        pytest.skip("RPS moves work to another CPU: this machine gives the tests one")
    before = test_ns.links(), test_ns.routes()
    read = ("unshare -m sh -c 'mount -t sysfs sysfs /sys && "
            f"cat /sys/class/net/airlink0/queues/rx-0/rps_cpus' > {tmp_path}/ue$AIRLINK_UE.txt")
    r = test_ns.airlink("cell", "--users", "3", "--rps", mode, "--stats", tmp_path / "stats.json",
                        "--", "sh", "-c", read)
    assert r.returncode == 0, r.stderr
    run = json.loads((tmp_path / "stats.json").read_text())
    stats = run["rps"]
    seen = [_bitmap((tmp_path / f"ue{u}.txt").read_text()) for u in (1, 2, 3)]
    if mode == "off":
        assert stats == {"mode": "off"} and seen == [set()] * 3
    elif mode == "all":
        assert seen == [cpus] * 3 and stats["applied"] == 3
    else:
        assert stats["loop_cpu"] in cpus and stats["applied"] == 3 and run["loop_rescues"] == 0
        assert seen == [cpus - {stats["loop_cpu"]}] * 3
    # the UEs' devices went with their namespaces; the shell's namespace is as it was
    assert test_ns.links() == before[0] and test_ns.routes() == before[1]
    assert _bitmap(test_ns.exec(["cat", "/sys/class/net/lo/queues/rx-0/rps_cpus"]).stdout or "0") == set()
