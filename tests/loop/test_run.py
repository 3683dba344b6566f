"""`airlink run`: experiment files, the offline part anywhere, the live part in a namespace."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airlink.experiment import load_experiment, run_experiment
from airlink.traces import AirlinkError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("name", ["pf-cell", "backlog-onoff", "lte-cubic-bbr"])
def test_examples_load(name):
    exp = load_experiment(EXAMPLES / f"{name}.yaml")
    assert exp.name == name
    assert exp.spec["applications"]


@pytest.mark.parametrize("spec, message", [
    ({"name": "x", "radoi": {}}, "radoi: unknown key"),
    ({"name": "x", "radio": {"preset": "quick", "trace": "a.down"}}, "either a preset or a trace"),
    ({"name": "x", "shells": [{"lnik": {}}]}, "shells[0]: must be one of delay, loss, link"),
    ({"name": "x", "applications": [{"bulk": {"cc": "vegas"}}]}, "applications[0].bulk.cc: Input should be 'reno', 'cubic' or 'bbr' (got 'vegas')"),
    ({"name": "x", "radio": {"preset": "quick", "duration": "ten"}}, "radio.duration"),
    ({"name": "x", "radio": {"preset": "quick", "scheduler": "fifo9"}},
     "experiment: radio.scheduler: unknown scheduler 'fifo9' (one of rr, maxcir, pf"),
    ({"name": "x", "infer": {"nmi": [{"target": "a"}]}}, "infer.nmi[0].factors: required key is missing"),
    ({"name": "x", "collect": {"resolutoin": "1s"}}, "experiment: collect.resolutoin: unknown key"),
    ({"name": "x", "capture": {"snaplen": "x"}}, "capture.snaplen: Input should be a valid integer"),
    ({"name": "x", "infer": {"surrogates": "many"}}, "infer.surrogates: Input should be a valid integer"),
    ({"name": "x", "applications": [{"onoff": {"rate": "fast"}}]}, "applications[0].onoff.rate: cannot read rate"),
])
def test_bad_experiments_say_where(spec, message):
    with pytest.raises(AirlinkError, match=None) as err:
        load_experiment(spec)
    assert message in str(err.value)


def test_bad_yaml_names_file_and_line(tmp_path, run_airlink):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nradio: [\n")
    status, _, err = run_airlink("run", bad, "-o", tmp_path / "out")
    assert status == 2 and err.startswith("airlink: error:") and "bad.yaml" in err and "line" in err
    assert err.count("\n") == 1


def test_offline_run_simulates_collects_infers_reports(tmp_path, shared_data):
    """Live stage off: radio (simulated PF cell) -> collect (a real capture) -> infer -> report."""
    spec = {"name": "offline", "radio": {"preset": "quick", "seed": 2, "duration": "5s", "user": 1},
            "shells": [{"link": {}}], "applications": [{"bulk": {"cc": "cubic", "seconds": 5}}],
            "collect": {"resolution": "1s"}, "infer": {"surrogates": 10},
            "offline": {"captures": [str(shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"),
                                     "does/not/exist.pcap"]}}
    res = run_experiment(spec, tmp_path / "out", live=False, progress=False)
    out = res.outdir
    stages = {s["name"]: s for s in res.info["stages"]}
    assert [s["name"] for s in res.info["stages"]] == ["radio", "live", "collect", "infer", "report"]
    assert stages["live"]["status"] == "skipped" and stages["live"]["note"] == "turned off"
    assert stages["radio"]["status"] == "done" and stages["collect"]["status"] == "done"
    assert any("does/not/exist.pcap" in n for n in res.info["notes"])
    for name in ("experiment.yaml", "versions.json", "run.json", "capacity.parquet", "mac.parquet",
                 "summary.json", "packets.parquet", "flows.parquet", "tcp.parquet", "nmi.json", "report.html"):
        assert (out / name).exists(), name
    versions = json.loads((out / "versions.json").read_text())
    assert versions["airlink"] and versions["python"] and "numpy" in versions
    nmi = json.loads((out / "nmi.json").read_text())
    targets = {a["target"] for a in nmi["analyses"]}
    assert "assigned_rate_bps" in targets
    for a in nmi["analyses"]:
        for f in a["factors"]:
            assert 0.0 <= f["peak_nmi"] <= 1.0
            assert len(f["curve"]["lag_s"]) == len(f["curve"]["nmi"]) == 2 * a["max_lag_samples"] + 1
    # a 5 s log: 500 steps of 10 ms, short of 4 x 16 x 16 = 1,024 at every grid: the finest
    mac = next(a for a in nmi["analyses"] if a["source"] == "mac")
    assert mac["resolution_s"] == 0.01 and "--resolution 10ms" in mac["command"]
    page = (out / "report.html").read_text()
    assert "time-sequence graph" in page and "NMI against lag" in page
    assert "live stage skipped" in page


@pytest.mark.parametrize("seconds, tti_ms, bins, grid", [
    (20, 1, 16, "10ms"),      # 100 ms: 200 steps, 50 ms 400, 20 ms 1,000 < 1,024; 10 ms 2,000
    (20, 1, 8, "50ms"),       # 4 x 8 x 8 = 256: 100 ms has 200, 50 ms 400
    (20, 1, 4, "100ms"),      # 64: 100 ms has 200
    (60, 1, 16, "50ms"),      # 100 ms 600, 50 ms 1,200
    (2, 1, 16, "10ms"),       # too short for any: the finest
    (200, 10, 16, "100ms"),   # 2,000 steps of 100 ms
])
def test_default_mac_grid_is_the_coarsest_with_enough_pairs(tmp_path, seconds, tti_ms, bins, grid):
    """The default MAC ranking's grid (``mac_grid``): counted by hand from the log's span."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from airlink.experiment.infer_stage import mac_grid
    n = seconds * 1000 // tti_ms
    t = pa.array([i * tti_ms * 1_000_000 for i in range(n)], pa.timestamp("ns", tz="UTC"))
    path = tmp_path / "mac.parquet"
    pq.write_table(pa.table({"time": t, "user": pa.array(["1"] * n)}), path, row_group_size=max(n // 3, 1))
    assert mac_grid(path, bins) == grid
    pq.write_table(pa.table({"time": t, "user": pa.array(["1"] * n)}), path, write_statistics=False)
    assert mac_grid(path, bins) == grid


def test_cli_run_offline_json(tmp_path, run_airlink):
    exp = tmp_path / "e.yaml"
    exp.write_text("name: tiny\nradio: {preset: quick, duration: 2s, seed: 1}\n"
                   "applications: [{bulk: {cc: bbr, seconds: 2}}]\n")
    status, out, err = run_airlink("run", exp, "-o", tmp_path / "o", "--offline", "--json", "--quiet")
    assert status == 0, err
    info = json.loads(out)
    assert info["name"] == "tiny" and info["stages"][0]["status"] == "done"
    assert (tmp_path / "o" / "report.html").exists()


def test_trace_override_replaces_the_radio_section(tmp_path, run_airlink):
    from airlink.traces import constant, write_trace
    tr = tmp_path / "c.down"
    write_trace(constant(12e6, 2), tr)
    exp = tmp_path / "e.yaml"
    exp.write_text("name: t\nradio: {preset: quick}\napplications: [{bulk: {seconds: 1}}]\n")
    status, out, err = run_airlink("run", exp, "-o", tmp_path / "o", "--offline", "--trace", tr,
                                   "--json", "--quiet", "--no-report")     # the radio stage's note is the check
    assert status == 0, err
    info = json.loads(out)
    assert "12.00 Mbit/s" in info["stages"][0]["note"]
    status, _, err = run_airlink("run", exp, "-o", tmp_path / "o2", "--offline", "--trace",
                                 tmp_path / "none.down", "--quiet")
    assert status == 2 and "none.down" in err and "--trace" in err


# ----------------------------------------------------------------------------- live
@pytest.fixture
def test_netns(root_netns, fresh_netns):
    """A fresh network namespace (lo up) that is deleted even on failure: the live runs
    never touch the machine's own namespace."""
    return fresh_netns


def _run_in(netns, *args, timeout=240):
    exe = Path(sys.executable).parent / "airlink"
    return subprocess.run(["ip", "netns", "exec", netns, str(exe), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.netns
def test_live_run_replays_user1_under_cubic_and_bbr(tmp_path, test_netns):
    exp = tmp_path / "live.yaml"
    exp.write_text(
        "name: live\nradio: {preset: quick, seed: 1, duration: 10s, scheduler: pf, user: 1}\n"
        "shells: [{delay: 10}, {link: {queue: droptail, queue_args: packets=100}}]\n"
        "applications: [{bulk: {cc: cubic, seconds: 6}}, {bulk: {cc: bbr, seconds: 6}}]\n"
        "collect: {resolution: 500ms}\ninfer: {surrogates: 10}\n")
    out = tmp_path / "out"
    r = _run_in(test_netns, "run", exp, "-o", out, "--live", "--json", "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    info = json.loads(r.stdout)
    assert info["live"] is True
    apps = info["applications"]
    assert sorted(a["cc"] for a in apps) == ["bbr", "cubic"]
    server = json.loads((out / "apps" / "server.json").read_text())
    assert sorted(s["cc"] for s in server if s["proto"] == "tcp") == ["bbr", "cubic"]  # set per socket
    from airlink.traces import Trace
    cap = Trace.read_parquet(out / "capacity.parquet").select("1").mean_rate_bps()[0]
    total = sum(a["goodput_bps"] for a in apps)
    assert 0.5 * cap < total < 1.05 * cap, (total, cap)  # two flows share user 1's capacity
    for name in ("capture/host.pcap", "capture/inside.pcap", "downlink.log", "link-downlink.parquet",
                 "packets.parquet", "tcp.parquet", "flows.parquet", "nmi.json", "report.html"):
        assert (out / name).exists(), name
    # both captures hold every flow to its end (scapy reads them, not airlink): the server's
    # sequence space spans the bytes it sent (SYN-ACK to last data byte) and a FIN went each way
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap
    for name in ("capture/host.pcap", "capture/inside.pcap"):
        isn, top, fins = {}, {}, {}
        for p in rdpcap(str(out / name)):
            if IP in p and TCP in p:
                ip, tcp = p[IP], p[TCP]
                from_server = ip.src.startswith("100.64.0.")
                client = f"{ip.dst}:{tcp.dport}" if from_server else f"{ip.src}:{tcp.sport}"
                fins[client] = fins.get(client, 0) + bool(tcp.flags.F)
                if from_server and tcp.flags.S:
                    isn[client] = tcp.seq
                elif from_server and ip.len > 4 * ip.ihl + 4 * tcp.dataofs:
                    # bytes of sequence space after the SYN-ACK's, modulo 2^32 (a wrap)
                    end = (tcp.seq - isn[client] - 1) % 2**32 + ip.len - 4 * ip.ihl - 4 * tcp.dataofs
                    top[client] = max(top.get(client, 0), end)
        want = {s["client"]: s["bytes_sent"] for s in server if s["proto"] == "tcp"}
        assert {c: top.get(c) for c in want} == want, name
        assert all(fins.get(c) == 2 for c in want), (name, fins)
    import pandas as pd
    flows = pd.read_parquet(out / "flows.parquet")
    assert len(flows) >= 2
    page = (out / "report.html").read_text()
    assert "Not shown: TCP time-sequence" not in page and "Backlog from the per-TTI link log" in page
    assert "fairness across the TCP flows" in page
    from airlink.report import Artifacts
    labels = sorted(Artifacts(out).flow_labels.values())
    assert len(labels) == 2 and any(lb.endswith("(bbr)") for lb in labels), labels
    assert any(lb.endswith("(cubic)") for lb in labels), labels


def test_without_root_it_says_why_and_goes_offline(tmp_path, monkeypatch, capsys):
    import airlink.experiment as E
    import airlink.experiment.live as live_stage
    monkeypatch.setattr(live_stage.os, "geteuid", lambda: 1000)
    reason = E.live_unavailable_reason()
    assert "needs root" in reason
    spec = {"name": "noroot", "applications": [{"bulk": {"seconds": 1}}]}
    res = run_experiment(spec, tmp_path / "o", progress=True)
    live = [s for s in res.info["stages"] if s["name"] == "live"][0]
    assert live["status"] == "skipped" and "needs root" in live["note"]
    err = capsys.readouterr().err
    assert "live stage skipped: the live stage needs root" in err and "offline part" in err
    assert "needs root" in (tmp_path / "o" / "report.html").read_text()
    with pytest.raises(AirlinkError, match="needs root"):
        run_experiment(spec, tmp_path / "o2", live=True, progress=False)


def test_long_ttis_are_split_for_the_link_shell(tmp_path):
    """A 20 ms-TTI cell (1xRTT) is replayed as 10 ms TTIs: link-trace.parquet holds the
    replayed user's bytes of every 20 ms frame shared evenly by its two halves; a 1 ms cell
    is replayed as it is (no link-trace.parquet)."""
    import numpy as np
    from airlink.traces import Trace
    res = run_experiment({"name": "long-tti", "radio": {"preset": "1xrtt", "duration": "2s", "seed": 1, "user": "4"},
                          "infer": False, "report": False}, tmp_path / "run", progress=False)
    assert res.info["replayed_user"] == "4"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {"path": "link-trace.parquet", "kind": "link-trace", "stage": "radio"} in manifest["artifacts"]
    cap = Trace.read_parquet(tmp_path / "run" / "capacity.parquet")
    sub = Trace.read_parquet(tmp_path / "run" / "link-trace.parquet")
    assert cap.tti_ms == 20 and sub.tti_ms == 10 and sub.users == ["4"]
    frames = cap.select("4").values[:, 0]
    assert frames.sum() > 0
    assert np.array_equal(sub.values[:, 0].reshape(-1, 2), np.c_[frames / 2, frames / 2])
    quick = run_experiment({"name": "short-tti", "radio": {"preset": "quick", "duration": "1s", "seed": 1},
                            "infer": False, "report": False}, tmp_path / "quick", progress=False)
    assert quick.info["stages"][0]["status"] == "done"
    assert not (tmp_path / "quick" / "link-trace.parquet").exists()


@pytest.mark.netns
def test_live_iperf3_and_command_over_a_measured_style_trace(tmp_path, test_netns):
    """A Mahimahi trace given by path (here a constant 12 Mbit/s one airlink writes), iperf3 with
    a chosen congestion control, and an arbitrary command that sees $AIRLINK_BASE."""
    import shutil as sh
    if not sh.which("iperf3"):
        pytest.skip("iperf3 is not installed")
    from airlink.traces import constant, write_trace
    trace = tmp_path / "12mbps.down"
    write_trace(constant(12e6, 2), trace)
    exp = tmp_path / "e.yaml"
    exp.write_text("name: tools\nradio: {preset: quick}\nshells: [{delay: 5}, {link: {}}]\n"
                   "applications:\n  - iperf3: {args: '-R -t 3', cc: cubic}\n"
                   "  - command: 'ping -c 2 -i 0.3 $AIRLINK_BASE'\n")
    out = tmp_path / "out"
    r = _run_in(test_netns, "run", exp, "-o", out, "--live", "--trace", trace, "--json", "--quiet",
                "--no-report")                       # the applications' results are the check
    assert r.returncode == 0, r.stderr + r.stdout
    info = json.loads(r.stdout)
    iperf, cmd = info["applications"]
    assert iperf["app"] == "iperf3" and iperf["cc"] == "cubic"
    assert iperf["goodput_bps"] > 0.8 * 12e6 * 1448 / 1500, iperf
    assert cmd["status"] == 0 and "2 received" in cmd["stdout"]


def test_run_result_is_an_object_with_frame_and_dict(tmp_path):
    spec = {"name": "tiny", "radio": {"preset": "quick", "seed": 1, "duration": "1s"},
            "infer": False, "report": False}
    res = run_experiment(spec, tmp_path / "o", live=False, progress=False)
    frame = res.to_frame()
    assert frame["name"].tolist() == ["radio", "live", "collect", "infer", "report"]
    assert frame.set_index("name").loc["infer", "status"] == "skipped"
    assert res.to_dict()["outdir"] == str(tmp_path / "o") and res.to_dict()["name"] == "tiny"
    assert res.complete


# ----------------------------------------------------------------------------- fuzzed files
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                     st.text(max_size=12))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                       max_leaves=12)
_keys = st.sampled_from(["name", "radio", "shells", "applications", "capture", "collect", "infer",
                         "offline", "report", "description", "radoi"])
_section_values = st.one_of(_values, st.fixed_dictionaries({}, optional={
    "preset": _values, "seed": _values, "duration": _values, "snaplen": _values, "surrogates": _values,
    "resolution": _values, "nmi": _values, "captures": _values}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _section_values, max_size=6))
def test_any_mapping_is_checked_or_refused_with_one_line(spec):
    """Random experiment mappings: either valid, or an AirlinkError of one line that names a
    place - never another exception."""
    try:
        load_experiment(spec)
    except AirlinkError as exc:
        msg = str(exc)
        assert msg.startswith("experiment: ") and "\n" not in msg


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["pf-cell", "backlog-onoff", "lte-cubic-bbr"]), cut=st.floats(0, 1),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=4))
def test_mangled_example_files_give_one_line_naming_the_file(tmp_path, name, cut, flips):
    """The examples truncated and byte-flipped: valid, or one AirlinkError naming the file."""
    data = bytearray((EXAMPLES / f"{name}.yaml").read_bytes())
    for where, byte in flips:
        data[int(where * (len(data) - 1))] = byte
    data = data[: int(cut * len(data))]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(bytes(data))
    try:
        load_experiment(path)
    except AirlinkError as exc:
        msg = str(exc)
        assert (f"{name}.yaml" in msg) and "\n" not in msg, msg


def test_the_cli_lists_exactly_the_commands_that_exist(run_airlink):
    from airlink.cli import COMMANDS
    status, out, _ = run_airlink("--help")
    assert status == 0
    listed = [line.split()[0] for line in out.split("positional arguments:")[1].split("options:")[0]
              .splitlines()[2:] if line.startswith("    ") and not line.startswith("      ")]
    assert listed == COMMANDS
    for name in COMMANDS:
        assert (REPO / "airlink" / "cli" / f"{name}.py").is_file(), name


def test_trace_run_skips_an_analysis_that_needs_a_mac_log(tmp_path, shared_data, run_airlink):
    from airlink.traces import constant, write_trace
    tr = tmp_path / "c.down"
    write_trace(constant(12e6, 2), tr)
    exp = tmp_path / "e.yaml"
    pcap = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    exp.write_text("name: t\nradio: {preset: quick}\napplications: [{bulk: {seconds: 1}}]\n"
                   "infer: {surrogates: 10, nmi: [{source: mac, target: assigned_rate_bps, "
                   "factors: [backlog_bytes]}, {source: tcp, target: goodput_bps, factors: [rtt_ms]}]}\n"
                   f"offline: {{captures: ['{pcap}']}}\n")
    status, out, err = run_airlink("run", exp, "-o", tmp_path / "o", "--offline", "--trace", tr,
                                   "--json", "--quiet", "--no-report")     # the infer stage is the check
    assert status == 0, err
    info = json.loads(out)
    stage = {s["name"]: s for s in info["stages"]}["infer"]
    assert stage["status"] == "done"
    assert any("mac/assigned_rate_bps: skipped, this run has no MAC log" in n for n in info["notes"])
    nmi = json.loads((tmp_path / "o" / "nmi.json").read_text())
    (a,) = nmi["analyses"]
    import pandas as pd
    flows = pd.read_parquet(tmp_path / "o" / "flows.parquet")
    assert a["covers"].startswith("TCP flow ") and f"of {flows['flow'].nunique()} flow(s)" in a["covers"]
    assert f"{a['samples']} sample pairs" in a["covers"]
