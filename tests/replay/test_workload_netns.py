"""`airlink link --mode workload` through real namespaces: a trace set with a known rule (light
trains of 10 PDOs 1 ms apart, a heavy trace of one opportunity every 6 ms, 5 ms base delay
each way) gives a short train after idle the light delivery and a backlogged flow the heavy one,
on the C engine (the rule in the link core; the Python loop with AIRLINK_PURE_PYTHON=1).

A UDP server in the test namespace answers ``T n`` with ``n`` packets of 1400 IP bytes back
to back; the client inside the shell stamps arrivals with the kernel's receive time."""
import json
import sys

import numpy as np
import pytest

from tests.replay._replay_netns import AIRLINK

PORT = 9071
LIGHT_PDOS = 10
HEAVY_STEP_MS = 6
BASE_MS = 5

SERVER = r"""
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", int(sys.argv[1])))
while True:
    data, addr = u.recvfrom(2048)
    n = int(data.split()[1])
    for k in range(n):
        u.sendto(b"D %d " % k + bytes(1400 - 28 - 8), addr)
"""

CLIENT = r"""
import json, os, socket, struct, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, 35, 1)              # SO_TIMESTAMPNS
u.connect((os.environ["AIRLINK_BASE"], int(sys.argv[2])))
u.settimeout(5)
out = {}
for n in (5, 60):
    time.sleep(0.4)                                  # idle: the queue is empty
    sent = time.time_ns(); u.send(b"T %d" % n)
    arrivals = []
    while len(arrivals) < n:
        data, anc, _, _ = u.recvmsg(2048, 64)
        sec, nsec = struct.unpack("@qq", anc[0][2][:16])
        arrivals.append(sec * 10**9 + nsec)
    out[str(n)] = {"sent": sent, "arrivals": arrivals}
json.dump(out, open(sys.argv[1], "w"))
"""


def _trace_set(folder):
    """Trains every 250 ms for 10 s; heavy opportunities every 6 ms for 10 s (both ways)."""
    folder.mkdir()
    pdos = " ".join(str(k) for k in range(LIGHT_PDOS))
    light = "".join(f"{t} {BASE_MS} {pdos}\n" for t in range(0, 10_001, 250))
    heavy = "".join(f"{t}\n" for t in range(HEAVY_STEP_MS, 10_001, HEAVY_STEP_MS))
    for d in ("up", "down"):
        (folder / f"{d}-delay-light-pdo").write_text(light)
        (folder / f"{d}-heavy-pdo").write_text(heavy)
    return folder


def test_idle_train_gets_light_delivery_and_backlog_the_heavy(test_ns, tmp_path):
    traces = _trace_set(tmp_path / "set")
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    test_ns.popen([sys.executable, str(tmp_path / "server.py"), str(PORT)])
    out, stats = tmp_path / "out.json", tmp_path / "stats.json"
    log = tmp_path / "down.log"
    r = test_ns.exec([AIRLINK, "link", "--mode", "workload", str(traces), "--stats", str(stats),
                      "--downlink-log", str(log), "--",
                      sys.executable, str(tmp_path / "client.py"), str(out), str(PORT)], timeout=120,
                     env={"AIRLINK_OFFLOAD": "1"})
    assert r.returncode == 0, r.stderr
    s = json.loads(stats.read_text())
    # the rule runs in the C link core, in offload mode (a super-packet served as its segments)
    assert s["engine"] == "c" and s["offload"] is True and "offload_reason" not in s
    down = s["downlink"]
    # the 65 train packets (and whatever else the kernel sends, e.g. a stray ICMP)
    assert down["stage"] == "workload" and down["departures_packets"] >= 65
    # the 5-packet train and the first 10 of the 60 ride light trains; a sender that paused
    # mid-train could start a new burst (more light), but most of the 60 are heavy
    assert down["light_packets"] + down["heavy_packets"] == down["departures_packets"]
    assert down["light_packets"] >= 5 + LIGHT_PDOS and down["heavy_packets"] >= 40
    # the C engine's log: a line per arrival and departure, each packet at least the base
    # delay in the shell
    from airlink.traces import read_log
    ev = read_log(log)
    deps = ev[ev["event"] == "departure"]
    assert (ev["event"] == "arrival").sum() == down["arrivals_packets"]
    assert len(deps) == down["departures_packets"] and deps["bytes"].sum() == down["departures_bytes"]
    assert deps["delay_ms"].min() >= BASE_MS
    res = json.loads(out.read_text())
    # times from the request (ms); the processes' scheduling on a busy machine may add a
    # few ms to any of them, never take any away
    short = (np.array(res["5"]["arrivals"]) - res["5"]["sent"]) / 1e6
    long = (np.array(res["60"]["arrivals"]) - res["60"]["sent"]) / 1e6
    # request up and first packet down: the base delay each way
    assert 2 * BASE_MS <= short[0] <= 2 * BASE_MS + 8
    # light PDOs 0..4 ms: the train completes 4 ms after its first packet could leave (a
    # saturator replay of the heavy trace would take 4 x 6 = 24 ms)
    assert 2 * BASE_MS + 4 <= short[-1] <= 2 * BASE_MS + 4 + 8
    # the 60-packet train: its first 10 on the light PDOs 0..9 ms
    assert 2 * BASE_MS + LIGHT_PDOS - 1 <= long[LIGHT_PDOS - 1] <= 2 * BASE_MS + LIGHT_PDOS - 1 + 8
    # then one packet per heavy opportunity: 6 ms apart
    assert np.median(np.diff(long[-40:])) == pytest.approx(HEAVY_STEP_MS, abs=1)
    # the Python loop (the reference) is still there on request
    r = test_ns.exec([AIRLINK, "link", "--mode", "workload", str(traces), "--stats", str(stats), "--", "true"],
                     timeout=60, env={"AIRLINK_PURE_PYTHON": "1"})
    assert r.returncode == 0, r.stderr
    s = json.loads(stats.read_text())
    assert s["engine"] == "python" and "C fast path is off" in s["engine_reason"]


def test_a_recording_replayed_serves_a_bulk_download_at_the_recorded_rate(test_ns, tmp_path):
    """Record a 12 Mbit/s link, replay a bulk download through the workload mode: while the
    download is heavy it takes every opportunity of the recorded saturator trace (so its
    rate is the recording's), counted by the shell, not timed by the test."""
    trace, rec, stats = tmp_path / "c12.down", tmp_path / "rec", tmp_path / "stats.json"
    assert test_ns.airlink("trace", "constant", "12Mbps", "--duration", "1s", "-o", trace).returncode == 0
    test_ns.server([AIRLINK, "record", "--serve", "--port", "9050"], 9050, "record server")
    r = test_ns.exec([AIRLINK, "delay", "5", AIRLINK, "link", trace, "--uplink", trace, "--",
                      "sh", "-c", f"{AIRLINK} record $AIRLINK_BASE --port 9050 --seconds 3 "
                                  f"--train-packets 5,20 -o {rec}"], timeout=180)
    assert r.returncode == 0, r.stderr
    test_ns.iperf_server(5202)
    r = test_ns.exec([AIRLINK, "link", "--mode", "workload", str(rec), "--stats", str(stats), "--",
                      "sh", "-c", "iperf3 -c $AIRLINK_BASE -p 5202 -R -n 3M"], timeout=180)
    assert r.returncode == 0, r.stderr
    down = json.loads(stats.read_text())["downlink"]
    # ~2100 packets: the first of each round of slow start ride light trains, the rest the heavy trace
    assert down["heavy_packets"] >= 0.8 * down["departures_packets"]
    # the span counts every opportunity from the first used to the last, including those
    # that came while TCP had nothing queued (its slow-start rounds, a sender behind on a
    # loaded machine, e.g. beside a real-time cell): the bound leaves room for that load and
    # still catches a fault (half the rate)
    assert down["heavy_bytes"] >= 0.8 * 1400 * down["heavy_opportunities"]
