"""The experiment applications on loopback: congestion control set per socket, on-off UDP,
the bulk download's receive window (``rwnd_bytes``: SO_RCVBUF on the client socket, checked
against the kernel's own value and against the windows on the wire, the capture decoded with
dpkt, not with airlink's collectors)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from airlink import apps
from airlink.core.errors import AirlinkError


@pytest.fixture
def server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = threading.Event()
    log, ready = tmp_path / "server.json", tmp_path / "ready"
    t = threading.Thread(target=apps.serve, args=(port,),
                         kwargs=dict(host="127.0.0.1", log_path=log, ready_path=ready, stop=stop), daemon=True)
    t.start()
    # the log file exists before the sockets listen; the ready file only after
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not ready.exists():
        stop.set()
        pytest.fail("apps.serve did not start listening within 30 s")
    yield port, log
    stop.set()
    t.join(timeout=5)


@pytest.mark.skipif("reno" not in apps.available_congestion_controls(), reason="no reno on this kernel")
def test_bulk_download_sets_the_congestion_control_per_socket(server):
    port, log = server
    a = apps.fetch("127.0.0.1", port, cc="reno", nbytes=3_000_000)
    b = apps.fetch("127.0.0.1", port, cc=None, seconds=0.2)
    assert a["bytes"] == 3_000_000 and a["goodput_bps"] > 0
    assert b["bytes"] > 0
    time.sleep(0.1)
    recs = json.loads(log.read_text())
    ccs = [r["cc"] for r in recs if r["proto"] == "tcp"]
    assert "reno" in ccs and len(ccs) == 2
    assert any(r["bytes_sent"] == 3_000_000 for r in recs)


def test_unknown_congestion_control_is_reported(server):
    port, log = server
    res = apps.fetch("127.0.0.1", port, cc="no-such-cc", seconds=0.2)
    assert res["bytes"] == 0
    time.sleep(0.1)
    recs = json.loads(log.read_text())
    assert "TCP_CONGESTION 'no-such-cc'" in recs[0]["error"]


def test_onoff_udp_follows_the_duty_cycle(server):
    port, log = server
    # 400 kbit/s, 0.3 s on / 0.3 s off for 1.2 s: two on periods of ~15 kB each
    res = apps.onoff("127.0.0.1", port, rate_bps=400e3, on_s=0.3, off_s=0.3, seconds=1.2, size=500)
    expected = 400e3 / 8 * 0.6
    assert 0.6 * expected < res["bytes"] < 1.4 * expected, res


@pytest.mark.parametrize("rwnd", [8192, 65536])
def test_the_kernel_doubles_the_receive_buffer(rwnd):
    # socket(7): "The kernel doubles this value (to allow space for bookkeeping overhead)
    # when it is set using setsockopt(2), and this doubled value is returned by getsockopt(2)."
    with socket.socket() as s:
        got = apps.set_receive_buffer(s, rwnd)
        assert got == 2 * rwnd
        assert s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 2 * rwnd


def test_a_bad_receive_window_is_an_error():
    with socket.socket() as s, pytest.raises(AirlinkError, match="positive"):
        apps.set_receive_buffer(s, 0)


def test_fetch_reports_the_kernels_buffer(server):
    port, _log = server
    res = apps.fetch("127.0.0.1", port, rwnd_bytes=16384, nbytes=400_000)
    assert res["bytes"] == 400_000
    assert res["rwnd_bytes"] == 16384 and res["rcvbuf_bytes"] == 32768
    auto = apps.fetch("127.0.0.1", port, nbytes=100_000)
    assert auto["rwnd_bytes"] is None and auto["bytes"] == 100_000


def _client_windows(pcap_path, client_port):
    """Advertised windows (bytes, scaled) of the client's segments after its SYN."""
    dpkt = pytest.importorskip("dpkt")
    wins, scale = [], 0
    with open(pcap_path, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)  # loopback frames carry a zero Ethernet header
            ip = eth.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != client_port:
                continue
            if tcp.flags & dpkt.tcp.TH_SYN:
                for kind, data in dpkt.tcp.parse_opts(tcp.opts):
                    if kind == dpkt.tcp.TCP_OPT_WSCALE:
                        scale = data[0]
                continue
            wins.append(tcp.win << scale)
    return wins


@pytest.mark.skipif(not shutil.which("tcpdump"), reason="tcpdump is not installed")
@pytest.mark.parametrize("rwnd", [8192, 65536])
def test_the_window_on_the_wire_follows_rwnd(server, tmp_path, rwnd):
    port, _log = server
    if os.geteuid() != 0:
        pytest.skip("capturing on loopback needs root")
    pcap = tmp_path / "lo.pcap"
    dump = subprocess.Popen(["tcpdump", "-Z", "root", "-i", "lo", "-s", "96", "-U", "--immediate-mode", "-n", "-w", str(pcap),
                             f"tcp port {port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        head = b""
        while b"listening" not in head:   # tcpdump says so once it captures
            line = dump.stderr.readline()
            assert line, f"tcpdump did not start: {head!r}"
            head += line
        res = apps.fetch("127.0.0.1", port, rwnd_bytes=rwnd, nbytes=2_000_000)
        time.sleep(0.3)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
    assert res["bytes"] == 2_000_000
    wins = _client_windows(pcap, int(res["local"].rsplit(":", 1)[1]))
    assert len(wins) > 10
    # the window never exceeds the buffer the kernel holds for the socket (2 rwnd; without
    # --rwnd autotuning opens it to megabytes), and it does open to the order of rwnd (the
    # kernel advertises the part of the buffer it expects payload to fill, about half; a
    # receiver slowed by a busy machine advertises less in between, so not every window)
    assert rwnd / 2 <= max(wins) <= 2 * rwnd
