"""The one split rule with real packets: a 20 ms trace (what `from-log` makes of a 20 ms XCAL
log, what 1xRTT/EGPRS frames are) replayed by `airlink link` through a namespace."""
import json

import pyarrow.parquet as pq
import pytest

from airlink.traces import Trace
from tests.replay._replay_netns import iperf_goodput_bps

PAYLOAD = 1448 / 1500          # TCP payload of a 1500-byte packet with timestamps


@pytest.fixture
def ns(test_ns):
    return test_ns


def test_20ms_trace_is_served_as_two_10ms_halves(ns, tmp_path):
    trace = tmp_path / "frames20.parquet"
    Trace([30000.0] * 50, "20ms").write_parquet(trace)          # 12 Mbit/s in 20 ms frames
    tti_log, out = tmp_path / "tti.parquet", tmp_path / "ip.json"
    ns.iperf_server()
    r = ns.airlink("link", trace, "--downlink-tti-log", tti_log, "--", "sh", "-c",
                   f"iperf3 -c $AIRLINK_BASE -R -t 5 -O 1 --json > {out}")
    assert r.returncode == 0, r.stderr
    meta = json.loads(pq.read_schema(tti_log).metadata[b"airlink"])
    assert meta["tti_s"] == "1/100"
    log = pq.read_table(tti_log).to_pandas()
    assert (log["capacity_bytes"] == 15000).all()              # 30000 bytes / 2 sub-TTIs
    assert iperf_goodput_bps(out.read_text()) == pytest.approx(12e6 * PAYLOAD, rel=0.03)
