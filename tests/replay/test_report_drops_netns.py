"""A real link shell overloaded by a UDP flood: the report's dropped-packets banner gives the
share iperf3's receiver counted as lost, and the iperf3 reader reads that receiver's report."""
from __future__ import annotations

import json
import re

import pytest

from airlink.report import write_report

pytestmark = [pytest.mark.netns]


def test_overloaded_link_shell_gets_a_dropped_packets_banner_with_iperfs_loss(test_ns, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "c12.down").write_text("1\n")          # one 1500-byte opportunity per ms: 12 Mbit/s
    test_ns.iperf_server()
    r = test_ns.airlink("link", tmp_path / "c12.down", "--downlink-queue", "droptail",
                        "--downlink-queue-args", "packets=20", "--downlink-log", run / "downlink.log",
                        "--stats", run / "link-stats.json", "--", "sh", "-c",
                        f"iperf3 -c $AIRLINK_BASE -u -R -b 30M -l 1400 -t 2 --json > {tmp_path}/ip.json")
    assert r.returncode == 0, r.stderr
    end = json.loads((tmp_path / "ip.json").read_text())["end"]["sum"]
    lost = end["lost_packets"] / end["packets"]        # the receiver's own count (about 1 - 12/30)
    assert lost > 0.3
    # the iperf3 reader on the report of a run through the shell: the receiver's own totals
    from airlink import collectors as C
    frame = C.read(tmp_path / "ip.json")
    kept = frame[~frame["omitted"]]
    assert frame.attrs["reader"] == "iperf3" and frame.attrs["protocol"] == "UDP"
    received = json.loads((tmp_path / "ip.json").read_text())["end"]["sum_received"]
    assert frame.attrs["side"] == "received"
    assert kept["packets"].sum() == received["packets"] and kept["lost_packets"].sum() == received["lost_packets"]
    page = write_report(run).read_text()
    found = re.findall(r"<b>Packets dropped:</b> ([\d.]+) % of the packets \((\d+) of (\d+)\) "
                       r"\[link-stats.json: downlink", page)
    assert len(found) == 1, page[:3000]
    pct, dropped, total = found[0]
    # the queue's arrivals include iperf3's few control packets; the receiver counts losses up
    # to the last datagram it saw, the packets sent after it (dropped, or still queued: 20 at
    # most) are in no count of its own
    assert float(pct) / 100 == pytest.approx(lost, abs=0.02)
    unseen = end["packets"] - received["packets"]
    assert received["lost_packets"] <= int(dropped) <= received["lost_packets"] + unseen
    assert "Results suspect" not in page                 # no kernel drops at the devices
