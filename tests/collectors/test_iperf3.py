"""iPerf3 JSON reports from real ``iperf3`` runs on loopback: the frame's totals equal the
totals iperf3 itself computed (``end.sum_sent`` / ``end.sum_received``, per stream
``end.streams[]``), read here with the json module."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess

import pandas as pd
import pytest

from airlink import collectors as C
from airlink.traces import FormatError, validate

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None or shutil.which("ss") is None,
                                reason="iperf3 or ss (iproute2) is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, *client_args):
    """One test: ``iperf3 -s -1 -J`` and ``iperf3 -c 127.0.0.1 -J -t 2 ARGS``; both reports."""
    port = _free_port()
    srv_out, cli_out = tmp_path / "server.json", tmp_path / "client.json"
    with open(srv_out, "w") as f:
        server = subprocess.Popen(["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=f,
                                  stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):           # wait until it listens (a probe connection would be its one test)
            if f":{port} " in subprocess.run(["ss", "-Hltn"], capture_output=True, text=True).stdout:
                break
            assert server.poll() is None, f"iperf3 -s ended: {srv_out.read_text()[-500:]}"
            subprocess.run(["sleep", "0.05"])
        else:
            raise AssertionError(f"iperf3 -s does not listen on port {port} after 30 s")
        with open(cli_out, "w") as f:
            r = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-t", "2", *client_args],
                               stdout=f, timeout=60)
        assert r.returncode == 0, f"iperf3 -c failed: {cli_out.read_text()[-500:]}"
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return cli_out, srv_out


def _check(path, role):
    doc = json.loads(path.read_text())
    reverse = bool(doc["start"]["test_start"]["reverse"])
    sends = (role == "client") != reverse
    side = "sum_sent" if sends else "sum_received"
    frame = C.read(path)                                 # sniffed
    validate(frame, "throughput")
    assert frame.attrs["reader"] == "iperf3" and frame.attrs["role"] == role
    assert frame.attrs["side"] == ("sent" if sends else "received")
    kept = frame[~frame["omitted"]]
    assert kept["bytes"].sum() == doc["end"][side]["bytes"] > 0
    n_streams = doc["start"]["test_start"]["num_streams"]
    assert frame["stream"].nunique() == n_streams
    who = "sender" if sends else "receiver"
    for rec in doc["end"]["streams"]:                    # per stream: iperf3's own end figures (TCP)
        r = rec.get(who)
        if r is None:                                    # UDP: one "udp" record, not per side
            continue
        assert kept.loc[kept["stream"] == str(r["socket"]), "bytes"].sum() == r["bytes"]
    assert frame["time"].iloc[0] == pd.Timestamp(doc["start"]["timestamp"]["timesecs"], unit="s", tz="UTC")
    # iperf3's bits_per_second is its bytes over its seconds; a last sliver of an interval
    # (tens of microseconds) can carry no byte, and then reports 0
    idle = frame["throughput_bps"] == 0
    assert (frame.loc[idle, "bytes"] == 0).all()
    busy = frame[~idle]
    assert ((busy["bytes"] * 8 / busy["interval_s"]) / busy["throughput_bps"]).between(0.999, 1.001).all()
    return doc, frame, sends


@pytest.mark.parametrize("args", [["-P", "2"], ["-R"]], ids=["tcp-P2", "tcp-R"])
def test_tcp_reports_add_up_to_iperf3_totals(tmp_path, args):
    cli, srv = _run(tmp_path, *args)
    for path, role in ((cli, "client"), (srv, "server")):
        doc, frame, sends = _check(path, role)
        assert frame.attrs["protocol"] == "TCP"
        if sends:                                        # the TCP sender's counters
            assert frame["retransmissions"].sum() == doc["end"]["sum_sent"]["retransmits"]
            assert frame["rtt_ms"].gt(0).all() and frame["snd_cwnd_bytes"].gt(0).all()


@pytest.mark.parametrize("args", [["-u", "-b", "20M"], ["-u", "-b", "20M", "-R"]], ids=["udp", "udp-R"])
def test_udp_reports_add_up_to_iperf3_totals(tmp_path, args):
    cli, srv = _run(tmp_path, *args)
    for path, role in ((cli, "client"), (srv, "server")):
        doc, frame, sends = _check(path, role)
        assert frame.attrs["protocol"] == "UDP"
        side = "sum_sent" if sends else "sum_received"
        assert frame["packets"].sum() == doc["end"][side]["packets"]
        if not sends:
            assert "jitter_ms" in frame and "lost_packets" in frame


def test_two_reports_in_one_file_and_errors(tmp_path):
    cli, _ = _run(tmp_path, "-t", "1")
    text = cli.read_text()
    both = tmp_path / "two.json"
    both.write_text(text + "\n" + text)
    fr = C.read(both)
    assert fr.attrs["tests"] == 2 and sorted(fr["test"].unique()) == [1, 2]
    assert fr["bytes"].sum() == 2 * json.loads(text)["end"]["sum_sent"]["bytes"]
    failed = tmp_path / "refused.json"
    failed.write_text('{\n\t"start":\t{\n\t\t"connected":\t[],\n\t\t"version":\t"iperf 3.12"},\n'
                      '\t"intervals":\t[],\n\t"end":\t{},\n\t"error":\t"unable to connect to server: '
                      'Connection refused"\n}\n')
    with pytest.raises(FormatError, match="refused.json: iperf3 report 1: unable to connect to server"):
        C.read(failed)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(FormatError, match="cut.json: not valid JSON at line"):
        C.read(cut)


def test_iperf3_report_to_capacity_trace(tmp_path, run_airlink):
    """`trace from-log` on a report: streams summed per interval, each interval's rate held for
    its length, so the trace's bytes are iperf3's own total (to the microseconds by which the
    streams' intervals differ)."""
    cli, _ = _run(tmp_path, "-P", "2")
    doc = json.loads(cli.read_text())
    out = tmp_path / "iperf.parquet"
    status, text, err = run_airlink("trace", "from-log", cli, "-o", out, "--json")
    assert status == 0, err
    s = json.loads(text)
    assert s["column"] == "throughput_bps" and s["carriers"] == "summed over carriers"
    from airlink.traces import read_trace
    assert read_trace(out).values.sum() == pytest.approx(doc["end"]["sum_sent"]["bytes"], rel=1e-4)
