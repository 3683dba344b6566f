"""The experiment applications on loopback: congestion control set per socket, on-off UDP."""
from __future__ import annotations

import json
import threading
import time

import pytest

from airlink import apps


@pytest.fixture
def server(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = threading.Event()
    log = tmp_path / "server.json"
    t = threading.Thread(target=apps.serve, args=(port,),
                         kwargs=dict(host="127.0.0.1", log_path=log, stop=stop), daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
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
