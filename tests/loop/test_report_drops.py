"""The report's dropped-packets banner: the fraction, the counts and where they came from,
from the shells' counters or, without them, the Mahimahi-format link logs."""
from __future__ import annotations

import json
import re

from airlink.report import write_report
from airlink.report.banners import DROPPED_PACKETS_BANNER, drop_counts
from airlink.report.artifacts import Artifacts


def _banners(page: str) -> list:
    return re.findall(r'<p class="missing" id="drops-\d+"><b>([^<]*)</b>([^<]*)</p>', page)


def _link_stats(down_drops, down_arrivals, *, kernel_tx_dropped=0):
    direction = {"arrivals_bytes": 0, "departures_packets": 0, "departures_bytes": 0, "drops_bytes": 0,
                 "queued_packets": 0, "queued_bytes": 0}
    return {"tool": "airlink link",
            "downlink": {**direction, "arrivals_packets": down_arrivals, "drops_packets": down_drops},
            "uplink": {**direction, "arrivals_packets": 500, "drops_packets": 0},
            "kernel": {"outer": {"rx_packets": 700, "rx_dropped": 0, "tx_packets": 900,
                                 "tx_dropped": kernel_tx_dropped},
                       "inner": {"rx_packets": 900, "rx_dropped": 0, "tx_packets": 500, "tx_dropped": 0}}}


def test_queue_drops_above_the_threshold_make_a_banner_naming_the_file(tmp_path):
    (tmp_path / "link-stats.json").write_text(json.dumps(_link_stats(40, 1000)))
    page = write_report(tmp_path).read_text()
    (head, text), = _banners(page)
    assert head == "Packets dropped:"
    assert "4.0 % of the packets (40 of 1000)" in text
    assert "link-stats.json: downlink drops_packets / arrivals_packets" in text
    assert f"threshold {100 * DROPPED_PACKETS_BANNER:g} %" in text and "downlink queue" in text
    # the banner stands before the first section
    assert page.index("Packets dropped:") < page.index('<section id="parameters">')


def test_drops_at_or_below_the_threshold_make_no_banner(tmp_path):
    (tmp_path / "link-stats.json").write_text(json.dumps(_link_stats(10, 1000)))   # exactly 1 %
    page = write_report(tmp_path).read_text()
    assert _banners(page) == [] and "Packets dropped" not in page
    down = [c for c in drop_counts(Artifacts(tmp_path)) if c["direction"] == "downlink"]
    assert down[0]["fraction"] == 0.01


def test_kernel_drops_at_the_devices_make_the_results_suspect(tmp_path):
    # 700 + 900 + 900 + 500 packets passed the devices, 100 more were dropped: 100 / 3100
    (tmp_path / "link-stats.json").write_text(json.dumps(_link_stats(0, 1000, kernel_tx_dropped=100)))
    (head, text), = _banners(write_report(tmp_path).read_text())
    assert head == "Results suspect:"
    assert f"{100 * 100 / 3100:.1f} % of the packets (100 of 3100)" in text
    assert "kernel rx_dropped + tx_dropped" in text


def test_cell_run_sums_the_ues_per_direction(tmp_path):
    ue = lambda n, d, a: {"ue": n, "downlink": {"arrivals_packets": a, "drops_packets": d},    # noqa: E731
                          "uplink": {"arrivals_packets": 100, "drops_packets": 0},
                          "kernel": {"outer": {"rx_packets": 1, "rx_dropped": 0, "tx_packets": 1,
                                               "tx_dropped": 0}, "inner": None}}
    stats = {"ttis": 1000, "late_ttis": 0, "late_fraction": 0.0, "ues": [ue(1, 0, 900), ue(2, 60, 100)]}
    (tmp_path / "cell-stats.json").write_text(json.dumps(stats))
    (head, text), = _banners(write_report(tmp_path).read_text())
    assert "6.0 % of the packets (60 of 1000)" in text          # (0 + 60) / (900 + 100)
    assert "cell-stats.json: downlink drops_packets / arrivals_packets summed over 2 UE(s)" in text


def test_without_counters_the_mahimahi_log_drop_lines_count(tmp_path):
    # 20 arrivals, one 'd' line dropping 3 packets: 15 %
    lines = ["# mahimahi mm-link [12.down] [12.up] -- sh", "# queue: droptail [packets=5]",
             "# base timestamp: 0"]
    lines += [f"{t} + 1500" for t in range(20)] + ["20 d 3 4500", "21 # 1500", "21 - 1500 2"]
    (tmp_path / "downlink.log").write_text("\n".join(lines) + "\n")
    (head, text), = _banners(write_report(tmp_path).read_text())
    assert head == "Packets dropped:" and "15.0 % of the packets (3 of 20)" in text
    assert "downlink.log: packets of its &#x27;d&#x27; lines / its &#x27;+&#x27; lines" in text


def test_a_folder_without_drop_counters_has_no_banner(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"users": [], "aggregate_throughput_mbps": 1.0}))
    assert drop_counts(Artifacts(tmp_path)) == []
    assert _banners(write_report(tmp_path).read_text()) == []
