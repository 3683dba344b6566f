"""The bundled examples run end to end: live inside a fresh network namespace when this
machine allows it (root, ip netns, TUN), else their offline part (and the test says so)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _live_reason():
    from airlink.experiment import live_unavailable_reason
    return live_unavailable_reason()


@pytest.fixture
def example_netns(fresh_netns):
    """A namespace of its own for the live stage, or None: the example then runs offline."""
    return None if _live_reason() else fresh_netns


def _run_example(name, out, netns, *extra):
    exe = str(Path(sys.executable).parent / "airlink")
    argv = [exe, "run", str(REPO / "examples" / f"{name}.yaml"), "-o", str(out), "--json", "--quiet", *extra]
    if netns:
        argv = ["ip", "netns", "exec", netns] + argv
    else:
        argv.append("--offline")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    info = json.loads(r.stdout)
    assert all(s["status"] != "failed" for s in info["stages"]), info["stages"]
    assert (out / "report.html").exists() and (out / "experiment.yaml").exists()
    assert info["live"] is bool(netns)
    return info


@pytest.mark.slow
def test_pf_cell(tmp_path, example_netns):
    info = _run_example("pf-cell", tmp_path / "o", example_netns)
    if example_netns:
        from airlink.traces import Trace
        cap = Trace.read_parquet(tmp_path / "o" / "capacity.parquet").select("1").mean_rate_bps()[0]
        (app,) = info["applications"]
        assert app["cc"] == "cubic" and 0.7 * cap < app["goodput_bps"] < 1.05 * cap, (app, cap)
    else:
        assert (tmp_path / "o" / "tcp.parquet").exists()  # the offline capture was collected


@pytest.mark.slow
def test_backlog_onoff_reproduces_seed_003(tmp_path, example_netns):
    _run_example("backlog-onoff", tmp_path / "o", example_netns)
    nmi = json.loads((tmp_path / "o" / "nmi.json").read_text())
    (analysis,) = nmi["analyses"]
    peaks = {f["factor"]: f for f in analysis["factors"]}
    # Mattar et al.: the assigned rate follows the backlog (0.57), not the channel (0.15)
    assert peaks["backlog_bytes"]["peak_nmi"] > 0.4
    assert peaks["backlog_bytes"]["peak_nmi"] > 2 * peaks["sinr_db"]["peak_nmi"]


@pytest.mark.slow
def test_lte_cubic_bbr(tmp_path, example_netns, shared_data):
    trace = shared_data / "mahimahi-traces" / "TMobile-LTE-short.down"
    info = _run_example("lte-cubic-bbr", tmp_path / "o", example_netns, "--trace", str(trace))
    assert "TMobile-LTE-short.down" in info["stages"][0]["note"]
    if example_netns:
        apps = {a["cc"]: a for a in info["applications"]}
        assert set(apps) == {"cubic", "bbr"}
        for a in apps.values():
            assert a["goodput_bps"] > 5e6, a  # the trace averages 16.7 Mbit/s


def test_pf_cell_offline_collects_its_bundled_capture(tmp_path):
    """Without the live stage the example still ends in a report: the collect stage reads
    the capture of the example's own live run shipped in examples/data (no ../shared)."""
    info = _run_example("pf-cell", tmp_path / "o", None)
    stages = {s["name"]: s for s in info["stages"]}
    assert stages["live"]["status"] == "skipped" and stages["collect"]["status"] == "done"
    (flow,) = json.loads((tmp_path / "o" / "collect.json").read_text())["pf-cell-host.pcap.gz"]
    assert flow["packets"] == 12301 and 4.5e6 < flow["goodput_bps"] < 5.6e6
    assert (tmp_path / "o" / "report.html").stat().st_size > 10_000


@pytest.mark.slow
def test_cell_example(tmp_path, example_netns):
    """examples/cell.yaml as docs/loop.md runs it: two UEs share one live PF downlink."""
    info = _run_example("cell", tmp_path / "o", example_netns)
    if not example_netns:
        assert [s["status"] for s in info["stages"]][:2] == ["skipped", "skipped"]
        return
    apps = {a["ue"]: a for a in info["applications"]}
    assert (apps[1]["cc"], apps[2]["cc"]) == ("cubic", "reno")
    cell = json.loads((tmp_path / "o" / "cell.json").read_text())
    for u in cell["ues"]:
        assert 0 < u["app_bytes"] <= u["served_bytes"], u     # payload under the IP bytes served
    assert cell["ttis"] > 8000 and cell["late_ttis"] == cell["late_ttis_mac"]
    assert "Live cell" in (tmp_path / "o" / "report.html").read_text()
