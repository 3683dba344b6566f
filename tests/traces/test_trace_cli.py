"""``airlink trace``: info (text and JSON), convert, constant, plot, and clean errors."""
import json

import pytest

from airlink.traces import read_trace


def test_info_json_tmobile(shared_data, run_airlink):
    status, out, err = run_airlink("trace", "info",
                                   shared_data / "mahimahi-traces" / "TMobile-LTE-short.down", "--json")
    assert status == 0, err
    s = json.loads(out)
    assert s["format"] == "mahimahi" and s["tti_ms"] == 1.0
    assert s["duration_s"] == pytest.approx(139.986)
    assert len(s["users"]) == 1
    assert s["users"][0]["mean_mbps"] == pytest.approx(16.7, abs=0.05)
    u = s["users"][0]
    assert u["p5_mbps"] <= u["median_mbps"] <= u["p95_mbps"]
    assert 0 <= u["zero_capacity_fraction"] <= 1


def test_info_text(shared_data, run_airlink):
    status, out, _ = run_airlink("trace", "info", shared_data / "mahimahi-traces" / "Verizon-LTE-short.up")
    assert status == 0 and "mean" in out and "zero-capacity" in out


def test_constant_convert_round_trip(tmp_path, run_airlink):
    down = tmp_path / "48.down"
    assert run_airlink("trace", "constant", "48Mbps", "--duration", "10s", "-o", down)[0] == 0
    assert down.read_text().split()[:5] == ["1"] * 4 + ["2"]
    pq = tmp_path / "48.parquet"
    assert run_airlink("trace", "convert", down, pq)[0] == 0
    tr = read_trace(pq)
    assert tr.n_tti == 10000 and tr.mean_rate_bps()[0] == pytest.approx(48e6)
    back = tmp_path / "back.down"
    assert run_airlink("trace", "convert", pq, back)[0] == 0
    assert back.read_bytes() == down.read_bytes()
    status, out, _ = run_airlink("trace", "info", pq, "--json")
    assert json.loads(out)["format"] == "mahimahi"  # provenance kept through Parquet


def test_constant_sub_ms_parquet(tmp_path, run_airlink):
    out = tmp_path / "c.parquet"
    assert run_airlink("trace", "constant", "12Mbps", "--duration", "1s", "--tti", "0.125ms", "-o", out)[0] == 0
    tr = read_trace(out)
    assert tr.n_tti == 8000 and tr.values[0, 0] == 187.5


def test_plot_trace_and_log(shared_data, tmp_path, run_airlink):
    png = tmp_path / "c.png"
    status, out, err = run_airlink("trace", "plot", shared_data / "mahimahi-traces" / "Verizon-LTE-short.down",
                                   "-o", png)
    assert status == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000
    log = tmp_path / "d.log"
    from airlink.traces import LinkLogWriter
    with LinkLogWriter(log) as w:
        for t in range(2000):
            w.opportunity(t, 1504)
            if t % 2 == 0:
                w.arrival(t, 1504)
                w.departure(t + 1, 1504, 1)
    status, out, err = run_airlink("trace", "plot", log, "-o", tmp_path / "l.png")
    assert status == 0, err
    assert "utilisation" in out and "95th percentile" in out
    status, out, err = run_airlink("trace", "info", log, "--json")
    s = json.loads(out)
    assert s["format"] == "linklog" and s["utilization"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("content, fragment", [
    ("1\n3\n2\n", "line 3: timestamps must not decrease"),
    ("", "empty trace file"),
    ("1\nfoo\n", "line 2: not a non-negative integer"),
])
def test_bad_input_is_one_line(tmp_path, run_airlink, content, fragment):
    p = tmp_path / "bad.trace"
    p.write_text(content)
    status, out, err = run_airlink("trace", "info", p)
    assert status == 2
    assert err.startswith("airlink: error: ") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_file(tmp_path, run_airlink):
    status, _, err = run_airlink("trace", "info", tmp_path / "nope.trace")
    assert status == 2 and "no such file" in err


def test_help_has_example(run_airlink):
    status, out, _ = run_airlink("trace", "info", "--help")
    assert status == 0 and "example:" in out
    status, out, _ = run_airlink("trace", "--help")
    assert status == 0 and "airlink trace info " in out and "airlink trace convert " in out
