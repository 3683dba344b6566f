"""ECN and L4S in the cell's per-UE base-station queues, through real namespaces.

- An ECN-capable TCP download (CUBIC, ``net.ipv4.tcp_ecn=1`` in the server's namespace and
  in the UE's) to one UE of a cell whose queues are CoDel with ``--ecn`` sees CE marks (counted
  by tshark on a capture inside the UE, independently of airlink's counters) and no drops,
  where the same download through drop-tail queues of the same size loses packets.
- ECT(1) UDP bursts (the L4S identifier; no congestion control needed) to one UE of a cell
  whose queues are ``l4s``: every packet the UE receives with CE waited longer than the
  step in the queue, nearly every packet that waited 3 ms or more (the step plus a TTI, plus
  rounding) arrives with CE, and a step above the bursts' queueing delay marks nothing. The
  UE reads each packet's ECN field from the socket (``IP_RECVTOS``); the waiting times are
  the per-UE log's departures, matched to the received packets in order (one FIFO).
"""
from __future__ import annotations

import json
import shutil
import sys
import textwrap

import pytest

from tests.replay.test_ecn_netns import CLIENT, PORT, SIZE, start_server, tshark_count

pytestmark = [pytest.mark.netns]

CELL = ["--preset", "quick", "--users", "2", "--seed", "1", "--scheduler", "pf"]


def _cell(test_ns, tmp_path, name, inside_ue1, *cell_args):
    """Run a 2-UE cell: UE 1 runs ``inside_ue1`` (sh), UE 2 nothing; the stats (per UE)."""
    stats = tmp_path / f"{name}.json"
    script = f'if [ "$AIRLINK_UE" = 1 ]; then {inside_ue1}; fi'
    r = test_ns.airlink("cell", *CELL, *cell_args, "--stats", stats, "--", "sh", "-c", script, timeout=180)
    assert r.returncode == 0, r.stderr
    st = json.loads(stats.read_text())
    for ue in st["ues"]:
        d = ue["downlink"]
        assert d["arrivals_packets"] == d["departures_packets"] + d["drops_packets"] + d["queued_packets"], d
    return st, r


@pytest.mark.skipif(shutil.which("tshark") is None or shutil.which("tcpdump") is None,
                    reason="tshark and tcpdump are needed to count CE marks independently")
def test_codel_with_ecn_marks_where_droptail_drops(test_ns, tmp_path):
    start_server(test_ns, "cubic")      # CUBIC halves on CE as on a loss
    pcap = tmp_path / "ue1.pcap"
    download = f"{sys.executable} -c '{CLIENT}' > {tmp_path}/got.txt"
    # on a busy machine tcpdump lags behind: immediate mode (no packets held in a ring
    # block when it is stopped), a 16 MB buffer, and it is stopped only once its file
    # stopped growing (checked below: the capture holds every packet)
    capture = (f"tcpdump -Z root -i airlink0 -s 96 -B 16384 --immediate-mode -U -w {pcap} 2>{tmp_path}/tcpdump.err & pid=$!; "
               f"for i in $(seq 400); do [ -s {pcap} ] && break; sleep 0.05; done; sleep 0.2; "
               f"{download}; st=$?; n=-1; while [ $(stat -c %s {pcap}) != $n ]; do "
               f"n=$(stat -c %s {pcap}); sleep 0.5; done; kill $pid; wait $pid; exit $st")
    marking, _ = _cell(test_ns, tmp_path, "codel-ecn", "sysctl -qw net.ipv4.tcp_ecn=1; " + capture,
                       "--queue", "codel", "--queue-args", "target=2ms,interval=20ms,packets=100", "--ecn",
                       "--mac-log", tmp_path / "mac.parquet")
    assert (tmp_path / "got.txt").read_text().split() == [str(SIZE)]
    dropping, _ = _cell(test_ns, tmp_path, "droptail", "sysctl -qw net.ipv4.tcp_ecn=1; " + download,
                        "--queue", "droptail", "--queue-args", "packets=100")
    assert (tmp_path / "got.txt").read_text().split() == [str(SIZE)]
    m, d = marking["ues"][0]["downlink"], dropping["ues"][0]["downlink"]
    assert "ecn" in m["queue"] and m["queue"].startswith("codel")
    assert d["drops_packets"] > 0 and d["marks_packets"] == 0          # the dropping queue drops ...
    assert m["drops_packets"] == 0 and m["marks_packets"] > 0          # ... the marking one marks
    # the capture (after the queue, inside the UE) holds every packet and sees every mark
    # as a CE data packet
    assert tshark_count(pcap, f"tcp.srcport == {PORT}") == m["departures_packets"]
    ce = tshark_count(pcap, "ip.dsfield.ecn == 3 && tcp.len > 0")
    ect = tshark_count(pcap, "ip.dsfield.ecn == 2 && tcp.len > 0")
    assert ce == m["marks_packets"]
    assert ect > 10 * ce        # the rest of the data arrived ECT(0): ECN was negotiated
    # the MAC log's per-TTI marks add up to the UE's
    import pandas as pd
    mac = pd.read_parquet(tmp_path / "mac.parquet")
    per_ue = mac.groupby("user")["marks_packets"].sum()
    assert per_ue["1"] == m["marks_packets"] and per_ue["2"] == 0


# ECT(1) bursts: a UE sends "BURSTS PACKETS GAP_S"; the source answers with BURSTS bursts of
# PACKETS 200-byte IP packets (ECT(1)), GAP_S apart, then one packet b"end".
L4S_SOURCE = textwrap.dedent('''
    import socket, time
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 1)        # ECN field ECT(1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    s.bind(("0.0.0.0", 9001))
    print("ready", flush=True)
    while True:
        msg, addr = s.recvfrom(64)
        bursts, packets, gap = msg.decode().split()
        for _ in range(int(bursts)):
            for _ in range(int(packets)):
                s.sendto(bytes(172), addr)
            time.sleep(float(gap))
        s.sendto(b"end", addr)
''')
# UE 1: ask for the bursts, write one character per packet received: 1 if it came with CE
L4S_UE = textwrap.dedent('''
    import os, socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.settimeout(10)
    s.sendto(b"20 60 0.05", (os.environ["AIRLINK_BASE"], 9001))
    ce = []
    while True:
        data, anc, _, _ = s.recvmsg(2048, 64)
        tos = next(c[2][0] for c in anc if c[0] == socket.IPPROTO_IP and c[1] == socket.IP_TOS)
        ce.append("1" if tos & 3 == 3 else "0")
        if data == b"end":
            break
    with open(sys.argv[1], "w") as f:
        f.write("".join(ce))
''')


def test_ect1_packets_are_marked_above_the_step(test_ns, tmp_path):
    from airlink.traces import read_log
    (tmp_path / "source.py").write_text(L4S_SOURCE)
    (tmp_path / "ue.py").write_text(L4S_UE)
    test_ns.script_server(tmp_path / "source.py")
    runs = {}
    for step in ("1ms", "100ms"):
        out = tmp_path / f"ce-{step}.txt"
        st, _ = _cell(test_ns, tmp_path, f"l4s-{step}", f"{sys.executable} {tmp_path / 'ue.py'} {out}",
                      "--queue", "l4s", "--queue-args", f"step={step}", "--log-dir", tmp_path / step)
        runs[step] = st["ues"][0]["downlink"], [c == "1" for c in out.read_text()], \
            read_log(tmp_path / step / "ue1.down.log")
    d, ce, log = runs["1ms"]
    assert d["queue"].startswith("l4s [step=1ms") and d["drops_packets"] == 0
    assert len(ce) == 20 * 60 + 1 == d["departures_packets"]
    assert sum(ce) == d["marks_packets"] > 0                    # the UE saw every mark ...
    assert log.loc[log["event"] == "mark", "packets"].sum() == d["marks_packets"]     # ... so did the log
    delays = log.loc[log["event"] == "departure", "delay_ms"].to_numpy()
    assert len(delays) == len(ce)
    # a CE packet waited more than the step (1 ms; the log rounds to whole ms) ...
    assert all(delay >= 1 for delay, marked in zip(delays, ce) if marked)
    # ... and a packet that waited 3 ms or more did: the step, a TTI of service, rounding
    late = [marked for delay, marked in zip(delays, ce) if delay >= 3]
    assert len(late) > 200 and sum(late) >= 0.95 * len(late)
    # the same bursts under a step above their queueing delay: no mark at all
    d100, ce100, log100 = runs["100ms"]
    assert log100.loc[log100["event"] == "departure", "delay_ms"].max() < 100
    assert d100["marks_packets"] == 0 == sum(ce100) and d100["drops_packets"] == 0
