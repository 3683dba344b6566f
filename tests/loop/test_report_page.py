"""The report page: every section renders from a full folder, says what is missing otherwise."""
from __future__ import annotations

import json
import re
from pathlib import Path

from airlink import rundir
from airlink.report import Artifacts, fig_time_sequence, write_report

FIGURE_SECTIONS = ["TCP time-sequence graph", "goodput against trace capacity", "RTT and data in flight",
                   "queue backlog", "NMI against lag", "fairness: throughput", "jitter: inter-service gaps"]


def _figures(page: str) -> list:
    return re.findall(r'<img class="plot" alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)


def test_full_folder_renders_every_figure(synthetic_run, run_airlink):
    """`airlink report OUTDIR --json` on a folder with every input: the page it names."""
    out, info = synthetic_run
    status, stdout, err = run_airlink("report", out, "--json")
    assert status == 0, err
    path = Path(json.loads(stdout)["report"])
    assert path == out / "report.html"
    page = path.read_text()
    alts = [a for a, _ in _figures(page)]
    for name in FIGURE_SECTIONS:
        assert any(name in a for a in alts), f"{name} missing; figures: {alts}"
    assert 'class="missing"' not in page, re.findall(r'class="missing">([^<]*)', page)
    # self-contained: no scripts, no external URLs
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    # the factor table lists both factors with their numbers and significance
    assert "backlog_bytes" in page and "0.570" in page and "sinr_db" in page
    assert page.count(">yes<") == 2
    # parameters and versions are shown
    assert "preset: evdo" in page and "versions" in page.lower()


def test_time_sequence_marks_the_retransmissions(synthetic_run):
    out, info = synthetic_run
    art = Artifacts(out)
    fig, stats = fig_time_sequence(art.packets, events=art.events)
    assert stats["retransmissions"] == info["retransmissions"]
    assert stats["segments"] == info["segments"]
    assert stats["flow"].startswith("10.0.0.1:5001>")


def test_time_sequence_without_events_marks_nothing(synthetic_run):
    """The report has no retransmission rule of its own: no events frame, no red marks."""
    out, _ = synthetic_run
    (out / "events.parquet").unlink()
    art = Artifacts(out)
    assert art.events is None
    _, stats = fig_time_sequence(art.packets, events=None)
    assert stats["retransmissions"] is None
    assert "retransmissions not marked: no TCP events frame" in write_report(out).read_text()


def test_empty_folder_says_what_is_missing(tmp_path):
    page = write_report(tmp_path).read_text()
    assert _figures(page) == []
    missing = re.findall(r'class="missing">([^<]*)', page)
    joined = " ".join(missing)
    for needed in ("experiment.yaml", "summary.json", "tcp.parquet", "nmi.json", "mac.parquet",
                   "capacity.parquet", "no packets frame"):
        assert needed in joined, f"no word about {needed}: {missing}"


def test_partial_folder_renders_what_exists(synthetic_run):
    out, _ = synthetic_run
    for name in ("packets.parquet", "tcp.parquet", "flows.parquet", "nmi.json"):
        (out / name).unlink()
    page = write_report(out).read_text()
    alts = [a for a, _ in _figures(page)]
    assert any("goodput against trace capacity" in a for a in alts)  # capacity alone suffices
    assert any("queue backlog" in a for a in alts)
    assert any("jitter" in a for a in alts)
    assert not any("time-sequence" in a for a in alts)
    assert "no nmi.json" in page


def test_broken_input_becomes_a_note_not_a_crash(synthetic_run):
    out, _ = synthetic_run
    (out / "nmi.json").write_text("{not json")
    (out / "tcp.parquet").write_bytes(b"PAR1garbage")
    page = write_report(out).read_text()
    assert "nmi.json: not readable JSON" in page
    assert "tcp.parquet: not readable as Parquet" in page


def test_cli_report_of_a_missing_folder(tmp_path, run_airlink):
    status, _, err = run_airlink("report", tmp_path / "nope")
    assert status == 2 and err.startswith("airlink: error:") and "no such folder" in err


def test_report_of_a_collect_folder(tmp_path, shared_data, run_airlink):
    """`airlink collect` output alone (real capture) gives the TCP figures."""
    status, _, err = run_airlink("collect", shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap",
                                 "-o", tmp_path)
    assert status == 0, err
    page = write_report(tmp_path).read_text()
    alts = [a for a, _ in _figures(page)]
    assert any("time-sequence" in a for a in alts)
    assert any("goodput against trace capacity" in a for a in alts)
    assert any("RTT and data in flight" in a for a in alts)
    assert "could not be drawn" not in page      # a figure's own failure shows as a note: not here


def test_report_of_a_simulate_folder(tmp_path, run_airlink):
    status, _, err = run_airlink("simulate", "--preset", "quick", "--duration", "1s", "-o", tmp_path)
    assert status == 0, err
    page = write_report(tmp_path).read_text()
    alts = [a for a, _ in _figures(page)]
    for name in ("goodput against trace capacity", "queue backlog", "fairness", "jitter"):
        assert any(name in a for a in alts), (name, alts)
    assert "aggregate_throughput_mbps" in page
    assert "could not be drawn" not in page


def test_report_reads_the_json_of_airlink_infer_nmi(tmp_path):
    import json
    (tmp_path / "nmi.json").write_text(json.dumps([
        {"factor": "backlog_bytes", "peak_nmi": 0.6, "lag_s": 0.0, "p_value": 0.01, "threshold": 0.3,
         "ci_low": 0.5, "ci_high": 0.7},
        {"factor": "sinr_db", "peak_nmi": 0.1, "lag_s": 2.0, "p_value": 0.5, "threshold": 0.2,
         "ci_low": None, "ci_high": None}]))
    page = write_report(tmp_path).read_text()
    assert "backlog_bytes" in page and "0.600" in page and "0.500 .. 0.700" in page
    assert page.count(">yes<") == 1 and page.count(">no<") == 1


def test_report_warns_when_late_ttis_exceed_the_threshold(tmp_path):
    import json

    from airlink.report.banners import LATE_TTI_BANNER
    stats = {"ttis": 3000, "tti_ms": 1, "late_ttis": 1000, "late_fraction": 1000 / 3000}
    (tmp_path / "cell-stats.json").write_text(json.dumps(stats))
    page = write_report(tmp_path).read_text()
    assert "Results suspect:" in page and "33.3 % of the cell's TTIs (1000 of 3000)" in page
    assert f"threshold {100 * LATE_TTI_BANNER:g} %" in page
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    (quiet / "cell-stats.json").write_text(json.dumps({**stats, "late_ttis": 3, "late_fraction": 0.001}))
    assert "Results suspect" not in write_report(quiet).read_text()


def test_nmi_table_shows_cannot_tell_what_it_covers_and_the_corrected_value(tmp_path):
    import json
    reason = "9 pairs in 9 occupied cells of the joint histogram: fewer than 5 per cell (need 45)"
    (tmp_path / "nmi.json").write_text(json.dumps({"analyses": [{
        "source": "tcp", "target": "goodput_bps", "covers": "TCP flow 3 (fwd), the busiest direction of 2 flow(s)",
        "factors": [{"factor": "backlog_bytes", "peak_nmi": 1.0, "bias_corrected": 0.12, "n_pairs": 9,
                     "lag_s": 0.0, "p_value": None, "threshold": None, "ci": [None, None],
                     "significant": False, "cannot_tell": reason}]}]}))
    page = write_report(tmp_path).read_text()
    assert "Covers: TCP flow 3 (fwd), the busiest direction of 2 flow(s)." in page
    assert reason in page and "0.120" in page and ">no<" in page


def test_flows_that_never_overlapped_get_no_jain_index(tmp_path):
    import numpy as np
    import pandas as pd
    # flow 1 runs 0-10 s, flow 2 runs 20-30 s: comparing them says nothing about sharing
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    rows = [{"time": t0 + pd.Timedelta(seconds=s), "flow": f, "direction": "fwd", "goodput_bps": 5e6 * f}
            for f, start in ((1, 0), (2, 20)) for s in np.arange(start, start + 10)]
    pd.DataFrame(rows).to_parquet(tmp_path / "tcp.parquet")
    page = write_report(tmp_path).read_text()
    assert "cannot tell: the flows never overlapped in time: flow 1 ended at 9.0 s before flow 2 began at 20.0 s" \
        in page
    assert "Jain index" not in " ".join(a for a, _ in _figures(page))


def test_jitter_of_a_split_trace_is_not_drawn(tmp_path):
    import numpy as np
    import pandas as pd

    from airlink.traces import constant, split_long_ttis
    tr = constant(8e6, 5, tti="1s")
    split = split_long_ttis(tr)
    split.write_parquet(tmp_path / "link-trace.parquet")
    n = int(5 / float(split.tti))
    t = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.arange(n) * float(split.tti), unit="s")
    pd.DataFrame({"time": t, "served_bytes": 1000.0, "capacity_bytes": 1000.0}).to_parquet(
        tmp_path / "link-downlink.parquet")
    import html
    page = html.unescape(write_report(tmp_path).read_text())
    assert ("jitter: inter-service gaps: not drawn, cannot tell: the replayed trace's TTIs of 1000 ms were "
            f"split into {float(split.tti) * 1e3:g} ms pieces") in page
    assert not any("jitter" in a for a, _ in _figures(page))


def test_report_of_a_collected_mac_log(tmp_path, shared_data, run_airlink):
    """`airlink collect` writes a log's frame as `<stem>.mac.parquet`; the report finds it by
    that name, with or without the manifest: a simulator MAC log collected gives the backlog
    and jitter figures, and an NR-Scope DCI log (no served_bytes, no backlog_bytes) gets notes
    naming that file and the column it lacks - not "no MAC log"."""
    status, _, err = run_airlink("simulate", "--preset", "quick", "--duration", "1s", "-o", tmp_path / "sim")
    assert status == 0, err
    status, _, err = run_airlink("collect", tmp_path / "sim" / "mac.parquet", "-o", tmp_path / "col")
    assert status == 0, err
    col = tmp_path / "col"
    assert (col / "mac.mac.parquet").is_file()
    # every kind collect writes has its name declared, so a folder without manifest finds it
    for kind in ("mac", "rf", "throughput", "transfers", "packets", "flows", "tcp", "tcp-events"):
        assert rundir.declared(rundir.collected_name("x", kind)).kind == kind
    alts = [a for a, _ in _figures(write_report(col).read_text())]
    assert "queue backlog" in alts and "jitter: inter-service gaps" in alts
    assert Artifacts(col).mac_source == "collected MAC log mac.mac.parquet"
    (col / "manifest.json").unlink()
    assert Artifacts(col).mac_path == col / "mac.mac.parquet"

    night = shared_data / "nr-scope/t_mobile2_ueactivity_night_1.csv"
    status, _, err = run_airlink("collect", night, "-o", tmp_path / "nrs")
    assert status == 0, err
    page = write_report(tmp_path / "nrs").read_text()
    assert "jitter: t_mobile2_ueactivity_night_1.mac.parquet has no served_bytes column" in page
    assert "t_mobile2_ueactivity_night_1.mac.parquet has no backlog_bytes column" in page
    assert "no MAC log" not in page
