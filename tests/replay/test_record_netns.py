"""`airlink record` through real namespaces: a recording of known shells gives back what the
shells were told (the independent truth), and an interrupted recording keeps what it has.

The record server runs in the test namespace (the shells' outer side); the recorder runs
inside `airlink delay` / `airlink link` shells, as a user runs it against a path.
"""
import json
import signal
import subprocess

import numpy as np
import pytest

from tests.replay._replay_netns import AIRLINK
from airlink.traces import cellreplay, read_cellreplay, read_trace

PORT = 9050


@pytest.fixture
def ns(test_ns):
    return test_ns


def _server(ns):
    return ns.server([AIRLINK, "record", "--serve", "--port", str(PORT)], PORT, "record server")


def _rate_bps(heavy_ms, opportunity_bytes):
    """Mean rate of an opportunity trace: bytes over the span of its milliseconds."""
    return heavy_ms.size * opportunity_bytes * 8 / ((int(heavy_ms[-1]) + 1) / 1000)


def test_recording_of_a_constant_link_gives_its_rate_and_delay(ns, tmp_path):
    rate = 12e6
    trace = tmp_path / "c12.down"
    r = ns.airlink("trace", "constant", "12Mbps", "--duration", "1s", "-o", trace)
    assert r.returncode == 0, r.stderr
    _server(ns)
    out = tmp_path / "rec"
    r = ns.exec([AIRLINK, "delay", "15", AIRLINK, "link", trace, "--uplink", trace, "--",
                 "sh", "-c", f"{AIRLINK} record $AIRLINK_BASE --port {PORT} --seconds 4 "
                             f"--train-packets 5,20 -o {out} --json"], timeout=180)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["complete"] and summary["cellreplay_set"]
    tr = read_cellreplay(out)
    # every heavy opportunity is one 1400-byte packet through a 12 Mbit/s link: rate within 2 %
    for d in (tr.up, tr.down):
        assert _rate_bps(d.heavy_ms, cellreplay.PDO_BYTES) == pytest.approx(rate, rel=0.02)
    # the Mahimahi saturator trace carries the same capacity in 1500-byte opportunities
    for name in ("mahimahi.down", "mahimahi.up"):
        m = read_trace(out / name)
        assert float(m.values.sum()) * 8 / float(m.duration) == pytest.approx(rate, rel=0.02)
    # base delay: the delay shell's 15 ms one way, plus at most one 1 ms TTI of the link
    # for a 100-byte probe in each direction and the scheduling of the processes
    _, base = tr.base_delay_ms
    assert 15 <= np.median(base) <= 17
    assert len(tr.down.light) >= 3
    # a train's packets leave back to back at 1400 bytes each: a 20-packet train cannot be
    # delivered faster than the link's rate (19 packets after the first at 12 Mbit/s)
    long_trains = [p for p in tr.down.light.pdo_ms if p.size == 20]
    assert long_trains
    floor_ms = 19 * cellreplay.PDO_BYTES * 8 / rate * 1000
    for p in long_trains:
        assert p[-1] >= int(floor_ms) - 1


def test_ctrl_c_keeps_what_was_recorded(ns, tmp_path):
    _server(ns)
    out = tmp_path / "rec"
    p = ns.popen([AIRLINK, "record", "127.0.0.1", "--port", str(PORT), "--seconds", "60",
                  "--train-gap", "50", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                 text=True)
    try:
        # wait for the recorder to report 20 trains sent, then press Ctrl-C
        for line in p.stderr:
            if "light: 20/" in line:
                break
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, stderr
    assert "INCOMPLETE (interrupted)" in stdout
    summary = json.loads((out / "record.json").read_text())
    assert summary["complete"] is False and summary["incomplete"] == "interrupted"
    assert summary["phases_done"] == []
    up = cellreplay.parse_light((out / "up-delay-light-pdo").read_text())
    down = cellreplay.parse_light((out / "down-delay-light-pdo").read_text())
    assert len(up) == len(down) >= 20
    assert not (out / "down-heavy-pdo").exists() and not (out / "mahimahi.down").exists()


def test_a_lost_server_ends_the_recording_with_what_it_has(ns, tmp_path):
    server = _server(ns)
    out = tmp_path / "rec"
    p = ns.popen([AIRLINK, "record", "127.0.0.1", "--port", str(PORT), "--seconds", "2",
                  "--peer-timeout", "2", "-o", str(out)], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stderr:
            if "[3/4] heavy downlink" in line:
                break
        server.kill()
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 1, stderr
    summary = json.loads((out / "record.json").read_text())
    assert summary["incomplete"].startswith("peer lost")
    assert summary["phases_done"] == ["light", "size offset"]
    assert (out / "up-delay-light-pdo").exists() and (out / "latency-offset-down").exists()


@pytest.mark.parametrize("argv,what", [
    (["record"], "give the record server's HOST and -o DIR"),
    (["record", "10.0.0.1", "-o", "x", "--train-packets", "5,0"], "train lengths must be positive"),
    (["record", "10.0.0.1", "-o", "x", "--seconds", "0"], "--seconds: must be greater than 0"),
    (["record", "--serve", "10.0.0.1"], "--serve takes no HOST"),
])
def test_bad_options_are_one_line_errors(argv, what):
    r = subprocess.run([AIRLINK, *argv], capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 or "usage:" in r.stderr, r.stderr
    assert what in r.stderr


def test_an_unreachable_server_is_reported(ns, tmp_path):
    r = ns.airlink("record", "127.0.0.1", "--port", str(PORT), "--seconds", "1", "--peer-timeout", "1",
                   "-o", tmp_path / "rec")
    assert r.returncode == 1
    assert "INCOMPLETE (peer lost: cannot reach the record server at 127.0.0.1:9050" in r.stdout
