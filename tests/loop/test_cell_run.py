"""`cell:` in experiment files: the section's checks anywhere, and a 2-UE live cell end to end
through real namespaces (as root), its results checked against independent counts."""
from __future__ import annotations

import copy
import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from airlink.experiment import load_experiment
from airlink.traces import AirlinkError

REPO = Path(__file__).resolve().parents[2]
AIRLINK = [sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())"]
BASE = {"name": "c", "cell": {"preset": "quick", "users": 2, "applications": [{"bulk": {"seconds": 2}}]}}


def _with(**changes):
    spec = copy.deepcopy(BASE)
    for key, value in changes.items():
        node = spec
        *parents, last = key.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return spec


# ----------------------------------------------------------------------------- the section
@pytest.mark.parametrize("spec, message", [
    (_with(radio={"preset": "quick"}), "radio: a cell experiment has no radio section"),
    (_with(applications=[{"bulk": {}}]), "applications: a cell experiment gives its applications in cell.applications"),
    (_with(shells=[{"delay": 10}, {"link": {}}]), "shells[1].link: a cell is its own link"),
    (_with(cell__ues={"2-3": ["bulk"]}), "cell.ues.2-3: UE 3 but the cell has 2 UEs (cell.users)"),
    (_with(cell__ues={1: ["bulk"], "1,2": ["bulk"]}), "cell.ues.1,2: UE 1 is also in cell.ues.1"),
    (_with(cell__ues={"two": ["bulk"]}), "cell.ues.two: a UE number (3), a range (2-4) or a list (1,3,5-7)"),
    (_with(cell__ues={"3-1": ["bulk"]}), "cell.ues.3-1: UE numbers count from 1 and a range goes upwards"),
    (_with(cell__ues={2: [{"onoff": {"rate": "fast"}}]}), "cell.ues.2[0].onoff.rate: cannot read rate 'fast'"),
    (_with(cell__ues={2: [{"bulk": {"cc": "vegas"}}]}), "cell.ues.2[0].bulk.cc: Input should be 'reno', 'cubic' or 'bbr'"),
    (_with(cell__applications=[], cell__ues={}), "cell: no application for any UE"),
    (_with(cell__set={"pf_aa": 0.1}), "cell.set.pf_aa: unknown preset parameter"),
    (_with(cell__preset="nope"), "cell.preset: unknown preset 'nope'"),
    (_with(cell__users=None, cell__ues={5: ["bulk"]}), "cell.ues.5: UE 5 but the cell has 4 UEs"),  # quick: 4 users
    (_with(cell__queue="red"), "cell.queue: Input should be 'infinite', 'droptail', 'drophead', 'codel', 'pie' or 'l4s' (got 'red')"),
    (_with(cell__warmup="lots"), "cell.warmup: cannot read size 'lots'"),
    (_with(cell__tti="ten"), "cell.tti: cannot read duration 'ten'"),
    (_with(cell__users=0), "cell.users: must be between 1 and 64 (got 0)"),
    (_with(cell__quue=1), "cell.quue: unknown key"),
])
def test_bad_cell_sections_name_the_key_path(tmp_path, spec, message):
    path = tmp_path / "bad-cell.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(AirlinkError) as err:
        load_experiment(path)
    assert str(err.value).startswith("bad-cell.yaml: ") and message in str(err.value), str(err.value)


def test_a_bad_cell_section_is_one_cli_line(tmp_path, run_airlink):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(_with(cell__ues={"1-9": ["bulk"]})))
    status, _, err = run_airlink("run", path, "-o", tmp_path / "out")
    assert status == 2 and err == "airlink: error: x.yaml: cell.ues.1-9: UE 3 but the cell has 2 UEs (cell.users)\n"
    assert not (tmp_path / "out").exists()


def test_ues_replace_applications_for_the_ues_they_name():
    exp = load_experiment(_with(cell__users=6, cell__ues={1: [{"onoff": {"rate": "38.4kbps"}}],
                                                          "3-4,6": [{"bulk": {"cc": "reno"}}, "bulk"]}))
    kinds = [[(a.kind, getattr(a.options, "cc", None)) for a in apps] for apps in exp.model.cell.per_ue(6)]
    assert kinds == [[("onoff", None)], [("bulk", None)], [("bulk", "reno"), ("bulk", None)],
                     [("bulk", "reno"), ("bulk", None)], [("bulk", None)], [("bulk", "reno"), ("bulk", None)]]


def test_the_docs_cell_section_and_the_example_load():
    """docs/loop.md's `cell:` block is a valid section as written; examples/cell.yaml loads."""
    text = (REPO / "docs" / "loop.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith("cell:"))
    exp = load_experiment(yaml.safe_load(block))
    assert exp.model.cell.overrides == {"pf_a": 0.01} and exp.model.cell.warmup == "300KB"
    assert [len(a) for a in exp.model.cell.per_ue(5)] == [1, 2, 2, 2, 1]
    ex = load_experiment(REPO / "examples" / "cell.yaml")
    assert ex.model.cell.users == 2 and ex.model.shells[0].kind == "delay"


def test_cli_argv_carries_every_option(tmp_path):
    from airlink.experiment.live import cell_shell_argv
    exp = load_experiment(_with(cell__scheduler="maxcir", cell__seed=3, cell__tti="2ms", cell__duration="5s",
                                cell__set={"pf_a": 0.01}, cell__queue_args="bytes=30000", cell__uplink="2Mbit/s",
                                cell__warmup="10KB", cell__late_after="1ms", cell__realtime=True))
    argv = cell_shell_argv(exp.model.cell, exp, tmp_path, tmp_path / "set.yaml")
    text = " ".join(argv)
    for part in ("cell --preset quick --scheduler maxcir --users 2 --seed 3 --tti 2ms --duration 5s --queue droptail "
                 "--queue-args bytes=30000 --uplink 2Mbit/s --warmup 10KB --late-after 1ms",
                 f"--config {tmp_path / 'set.yaml'} --realtime", f"--mac-log {tmp_path / 'cell-mac.parquet'}"):
        assert part in text, text
    # and the CLI parses it (the same options the cell shell takes)
    from airlink.cli import build_parser
    args = build_parser().parse_args(argv[argv.index("cell"):])
    assert (args.scheduler, args.users, args.seed, args.tti, args.queue_args) == ("maxcir", 2, 3, "2ms", "bytes=30000")


def test_sweep_over_cell_keys_makes_valid_points(tmp_path):
    from airlink.sweep.spec import check_points, load_sweep
    exp = tmp_path / "cell.yaml"
    exp.write_text(yaml.safe_dump(BASE))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"experiment": "cell.yaml", "grid": {
        "cell.queue_args": ["packets=40", "packets=500"], "cell.set.pf_a": [0.1, 0.001],
        "cell.scheduler": ["pf"]}, "seeds": [1, 2]}))
    sw = load_sweep(sweep)
    assert sw.spec.seed_key == "cell.seed"          # a cell has no radio section
    exps = check_points(sw)
    assert len(exps) == 8
    got = sorted((e.model.cell.queue_args, e.model.cell.overrides["pf_a"], e.model.cell.seed) for e in exps.values())
    assert got == sorted((q, a, s) for q in ("packets=40", "packets=500") for a in (0.1, 0.001) for s in (1, 2))
    sweep.write_text(yaml.safe_dump({"experiment": "cell.yaml", "grid": {"cell.set.pf_aa": [0.1]}}))
    with pytest.raises(AirlinkError, match=r"point .*cell\.set\.pf_aa: unknown preset parameter"):
        check_points(load_sweep(sweep))


# ----------------------------------------------------------------------------- live
def _capture_bytes_to(pcap: Path, address: str) -> int:
    """IP bytes (total length) of the packets to ``address`` in a capture, by dpkt."""
    import dpkt
    total = 0
    with open(pcap, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        link = reader.datalink()
        for _, buf in reader:
            if link == dpkt.pcap.DLT_LINUX_SLL:
                ip = dpkt.sll.SLL(buf).data
            elif link in (dpkt.pcap.DLT_RAW, 101):
                ip = dpkt.ip.IP(buf)
            else:
                ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, dpkt.ip.IP) and socket.inet_ntoa(ip.dst) == address:
                total += ip.len
    return total


def _departed_bytes(log: Path) -> int:
    """Bytes of the departure lines (``<ms> - <bytes> <delay>``) of a Mahimahi-format log."""
    total = 0
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "-":
            total += int(parts[2])
    return total


def _stages_and_notes(stdout: str) -> str:
    """What a failed run's --json says, short: its stages and notes."""
    try:
        info = json.loads(stdout)
    except ValueError:
        return stdout[-3000:]
    return json.dumps({"stages": info.get("stages"), "notes": info.get("notes"),
                       "applications": info.get("applications")}, indent=1)


@pytest.fixture(scope="module")
def cell_run(tmp_path_factory, root_netns):
    """A 2-UE cell (quick preset, PF, 100-packet queues) behind 5 ms of delay: UE 1 a cubic
    download, UE 2 a reno download and a command; run by the CLI in a fresh namespace."""
    tmp = tmp_path_factory.mktemp("cell")
    exp = tmp / "cell.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "cell-test", "cell": {"preset": "quick", "scheduler": "pf", "users": 2, "seed": 2,
                                      "queue_args": "packets=100", "set": {"pf_a": 0.01}},
        "shells": [{"delay": 5}], "collect": {"resolution": "500ms"}, "infer": {"surrogates": 10, "bootstrap": 10}}))
    spec = yaml.safe_load(exp.read_text())
    spec["cell"]["ues"] = {1: [{"bulk": {"cc": "cubic", "seconds": 3}}],
                           2: [{"bulk": {"cc": "reno", "seconds": 3}}, {"command": "echo ue=$AIRLINK_UE"}]}
    exp.write_text(yaml.safe_dump(spec))
    ns = f"airlink-test-cellrun-{tmp.name[-12:]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        out = tmp / "out"
        r = subprocess.run(["ip", "netns", "exec", ns, *AIRLINK, "run", str(exp), "-o", str(out), "--live",
                            "--json", "--quiet"], capture_output=True, text=True, timeout=400, cwd=REPO)
        assert r.returncode == 0, r.stderr + _stages_and_notes(r.stdout)
        left = subprocess.run(["ip", "netns", "exec", ns, "ip", "-o", "link"], capture_output=True, text=True).stdout
        assert "tun" not in left, left           # the cell took its devices with it
        return out, json.loads(r.stdout)
    finally:
        subprocess.run(["ip", "netns", "del", ns])


@pytest.mark.netns
def test_cell_run_writes_the_mac_log_per_ue_logs_stats_and_report(cell_run):
    out, info = cell_run
    stages = {s["name"]: s["status"] for s in info["stages"]}
    assert stages == {"radio": "skipped", "live": "done", "collect": "done", "infer": "done", "report": "done"}
    for name in ("cell-mac.parquet", "cell-stats.json", "cell-logs/ue1.down.log", "cell-logs/ue2.down.log",
                 "capture/host.pcap", "capture/ue1.pcap", "capture/ue2.pcap", "cell.json", "fairness.json",
                 "jitter.json", "nmi.json", "report.html", "apps/ue1/app1-bulk.json", "apps/ue2/app2-command.json"):
        assert (out / name).is_file(), name
    from airlink import rundir
    manifest = rundir.read_manifest(out)
    kinds = {a["path"]: a["kind"] for a in manifest["artifacts"]}
    assert manifest["status"] == "finished"
    assert kinds["cell-mac.parquet"] == "mac" and kinds["cell-stats.json"] == "cell-stats"
    assert kinds["cell-logs/ue1.down.log"] == "cell-log" and kinds["capture/ue2.pcap"] == "capture"
    assert kinds["cell.json"] == "cell-summary" and kinds["fairness.json"] == "fairness"
    command = (out / "apps" / "command.txt").read_text()
    assert " delay 5 " in command and " cell --preset quick --scheduler pf --users 2 --seed 2 " in command
    assert yaml.safe_load((out / "apps" / "cell-set.yaml").read_text()) == {"pf_a": 0.01}
    apps = {(a["ue"], a["app"]): a for a in info["applications"]}
    assert apps[(1, "bulk")]["cc"] == "cubic" and apps[(2, "bulk")]["cc"] == "reno"
    assert apps[(2, "command")]["stdout"].strip() == "ue=2"        # each UE runs its own list
    stats = json.loads((out / "cell-stats.json").read_text())
    assert (stats["preset"], stats["scheduler"], stats["seed"], stats["users"]) == ("quick", "pf", 2, 2)
    server = json.loads((out / "apps" / "server.json").read_text())
    assert sorted(s["cc"] for s in server if s["proto"] == "tcp") == ["cubic", "reno"]   # set per socket


@pytest.mark.netns
def test_cell_bytes_agree_with_independent_counts(cell_run):
    out, info = cell_run
    mac = pd.read_parquet(out / "cell-mac.parquet")
    served = mac.groupby("user")["served_bytes"].sum()
    stats = {u["ue"]: u for u in json.loads((out / "cell-stats.json").read_text())["ues"]}
    summary = {u["ue"]: u for u in json.loads((out / "cell.json").read_text())["ues"]}
    ttis = mac["time"].nunique()
    for ue in (1, 2):
        s = float(served[str(ue)])
        bulk = next(a for a in info["applications"] if a["ue"] == ue and a["app"] == "bulk")
        # the application's own received payload: below the IP bytes served (headers), and
        # at least 85 % of them (1448 of 1500 bytes per full segment; retransmissions)
        assert 0.85 * s <= bulk["bytes"] <= s, (ue, bulk["bytes"], s)
        # the UE's Mahimahi log counts exactly the bytes the MAC log says were served
        assert _departed_bytes(out / "cell-logs" / f"ue{ue}.down.log") == pytest.approx(s, abs=1)
        assert stats[ue]["downlink"]["departures_bytes"] == pytest.approx(s, abs=1)
        # tcpdump inside the UE sees no more than was served (it may miss some under load)
        address = bulk["local"].split(":")[0]
        assert 0 < _capture_bytes_to(out / "capture" / f"ue{ue}.pcap", address) <= s + 1
        # cell.json: the sum, and 8 * bytes / (first to last TTI that served the UE, 1 ms TTIs)
        assert summary[ue]["served_bytes"] == pytest.approx(s)
        t = mac.loc[(mac["user"] == str(ue)) & (mac["served_bytes"] > 0), "time"]
        span_s = (t.max() - t.min()).total_seconds() + 1e-3
        assert summary[ue]["mac_throughput_bps"] == pytest.approx(8 * s / span_s)
        assert 0 < span_s <= ttis * 1e-3
        assert summary[ue]["app_bytes"] == bulk["bytes"]
    late = mac.loc[mac["late"].astype(bool), "time"].nunique()
    assert json.loads((out / "cell-stats.json").read_text())["late_ttis"] == late


@pytest.mark.netns
def test_cell_infer_is_airlink_infer_on_the_run_files(cell_run, run_airlink):
    out, _ = cell_run
    import os
    mac = pd.read_parquet(out / "cell-mac.parquet")
    fair = json.loads((out / "fairness.json").read_text())
    here = os.getcwd()
    try:
        os.chdir(out)
        argv = shlex.split(fair["command"])
        status, stdout, err = run_airlink(*argv[1:])
        assert status == 0, err
        assert json.loads(stdout) == fair["report"]
        jit = json.loads((out / "jitter.json").read_text())
        status, stdout, err = run_airlink(*shlex.split(jit["command"])[1:])
        assert status == 0, err
        assert json.loads(stdout) == jit["users"]
    finally:
        os.chdir(here)
    # Jain's index from its definition on the per-UE mean bytes served per TTI
    x = mac.groupby("user")["served_bytes"].sum().to_numpy() / mac["time"].nunique()
    assert fair["report"]["overall"]["jain_index"] == pytest.approx(x.sum() ** 2 / (len(x) * (x ** 2).sum()))
    # per-UE NMI analyses of the MAC log, each reproducible by its command
    per_ue = [a for a in json.loads((out / "nmi.json").read_text())["analyses"] if a["source"] == "mac"]
    assert sorted(a["user"] for a in per_ue) == ["1", "2"]
    for a in per_ue:
        assert a["frame"] == "cell-mac.parquet" and "--user " + a["user"] in a["command"]
        r = subprocess.run([*AIRLINK, *shlex.split(a["command"])[1:], "--json"], capture_output=True, text=True,
                           cwd=out, timeout=300)
        assert r.returncode == 0, r.stderr
        table = {row["factor"]: row for row in json.loads(r.stdout)}
        for f in a["factors"]:
            assert table[f["factor"]]["peak_nmi"] == pytest.approx(f["peak_nmi"])


@pytest.mark.netns
def test_cell_report_page(cell_run):
    out, _ = cell_run
    page = (out / "report.html").read_text()
    assert '<section id="cell"><h2>Live cell</h2>' in page
    assert "Per-UE NMI of the MAC log" in page and "late</b>" in page
    assert "could not be drawn" not in page
    stats = json.loads((out / "cell-stats.json").read_text())
    assert f"{stats['ttis']} TTIs of 1 ms" in page and f"<b>{stats['late_ttis']} late</b>" in page
    assert "live cell&#x27;s MAC log" in page                     # backlog and jitter from it
    assert "airlink infer fairness cell-mac.parquet --json" in page
    n_fig = page.count('<img class="plot"')
    assert n_fig >= 6, n_fig
    from airlink.report import Artifacts
    labels = sorted(Artifacts(out).flow_labels.values())      # the goodput figure's legend
    assert len(labels) == 2 and re.fullmatch(r"UE 1 flow \d+ \(cubic\)", labels[0]), labels
    assert re.fullmatch(r"UE 2 flow \d+ \(reno\)", labels[1]), labels


@pytest.mark.netns
def test_live_sweep_over_cell_keys(tmp_path, fresh_netns, root_netns):
    """`airlink sweep` over cell.set.pf_a: every point a live cell run, its per-UE results
    in the campaign table (the same numbers as the run's cell.json)."""
    (tmp_path / "cell.yaml").write_text(yaml.safe_dump({
        "name": "swcell", "cell": {"preset": "quick", "users": 2, "seed": 1, "queue_args": "packets=50",
                                   "applications": [{"bulk": {"cc": "cubic", "seconds": 1}}]},
        "capture": {"inside": False, "host": False}, "infer": {"surrogates": 5, "bootstrap": 5},
        "report": False}))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"experiment": "cell.yaml",
                                                     "grid": {"cell.set.pf_a": [0.1, 0.01]}}))
    camp = tmp_path / "camp"
    r = subprocess.run(["ip", "netns", "exec", fresh_netns, *AIRLINK, "sweep", str(tmp_path / "s.yaml"),
                        "-o", str(camp), "--workers", "1", "--quiet"],
                       capture_output=True, text=True, timeout=400, cwd=REPO)
    assert r.returncode == 0, r.stderr + r.stdout
    table = pd.read_parquet(camp / "campaign.parquet")
    assert sorted(table["cell.set.pf_a"]) == [0.01, 0.1] and set(table["status"]) == {"done"}
    for _, row in table.iterrows():
        run = camp / "runs" / row["point_id"]
        assert yaml.safe_load((run / "apps" / "cell-set.yaml").read_text()) == {"pf_a": row["cell.set.pf_a"]}
        summary = json.loads((run / "cell.json").read_text())
        for u in summary["ues"]:
            assert row[f"cell.ue{u['ue']}.served_bytes"] == pytest.approx(u["served_bytes"])
        assert "live:done" in row["stages"]


# ----------------------------------------------------------------------------- anywhere
def _synthetic_cell_folder(out: Path) -> dict:
    """A cell run folder by hand: 2 UEs, 3000 TTIs of 1 ms; UE 1 served 1500 bytes in every
    other TTI for 3 s, UE 2 served 500 bytes in every TTI of the second second only; TTIs
    100..149 late. Returns what was put in."""
    n, tti = 3000, 1e-3
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    times = t0 + pd.to_timedelta(np.arange(n) * tti, unit="s")
    k = np.arange(n)
    served = {"1": np.where(k % 2 == 0, 1500.0, 0.0), "2": np.where((k >= 1000) & (k < 2000), 500.0, 0.0)}
    rows = []
    for u, s in served.items():
        rows.append(pd.DataFrame({
            "time": times, "user": u, "served_bytes": s, "capacity_bytes": np.full(n, 1500.0),
            "subchannels": (s > 0) * 12.0, "sinr_db": np.full(n, 10.0 if u == "1" else -2.0),
            "backlog_bytes": np.full(n, 3000.0), "assigned_rate_bps": s * 8 / tti,
            "harq_retransmissions": np.zeros(n), "arrivals_bytes": s, "drops_packets": np.zeros(n),
            "late": (k >= 100) & (k < 150), "lateness_us": np.where((k >= 100) & (k < 150), 900.0, 0.0)}))
    out.mkdir(parents=True)
    pd.concat(rows, ignore_index=True).to_parquet(out / "cell-mac.parquet")
    (out / "cell-stats.json").write_text(json.dumps({
        "preset": "quick", "scheduler": "pf", "seed": 1, "users": 2, "tti_ms": 1.0, "ttis": n, "late_ttis": 50,
        "late_fraction": 50 / n, "max_lateness_us": 900, "cpu_per_s": 0.3,
        "ues": [{"ue": 1, "status": 0, "downlink": {"departures_bytes": served["1"].sum()}},
                {"ue": 2, "status": 0, "downlink": {"departures_bytes": served["2"].sum()}}]}))
    apps = [{"ue": 1, "app": "bulk", "cc": "cubic", "bytes": 2_000_000, "goodput_bps": 5.3e6},
            {"ue": 2, "app": "onoff", "bytes": 400_000}]
    (out / "run.json").write_text(json.dumps({"name": "synthetic-cell", "stages": [], "applications": apps}))
    return {"served": {u: float(s.sum()) for u, s in served.items()}, "apps": apps}


def test_cell_summary_reports_and_page_from_a_folder_made_by_hand(tmp_path, run_airlink):
    from airlink.experiment.cellrun import cell_reports, cell_summary
    from airlink.report import build_report_html
    out = tmp_path / "run"
    made = _synthetic_cell_folder(out)
    summary = cell_summary(out)
    ues = {u["ue"]: u for u in summary["ues"]}
    assert ues[1]["served_bytes"] == 1500 * 1500 and ues[2]["served_bytes"] == 1000 * 500
    # active spans: UE 1 from TTI 0 to the end of TTI 2998, UE 2 from TTI 1000 to the end of 1999
    assert ues[1]["active_s"] == pytest.approx(2.999) and ues[2]["active_s"] == pytest.approx(1.0)
    assert ues[1]["mac_throughput_bps"] == pytest.approx(8 * 1500 * 1500 / 2.999)
    assert ues[2]["mac_throughput_bps"] == pytest.approx(8 * 500_000 / 1.0)
    assert (ues[1]["app_bytes"], ues[1]["app_goodput_bps"], ues[2]["app_bytes"], ues[2]["app_goodput_bps"]) == \
        (2_000_000, 5.3e6, 400_000, None)
    assert (summary["late_ttis"], summary["late_ttis_mac"], summary["mac_ttis"]) == (50, 50, 3000)
    reps = cell_reports(out)
    mean = np.array([1500 * 1500, 1000 * 500]) / 3000
    overall = reps["fairness"]["report"]["overall"]
    assert overall["jain_index"] == pytest.approx(mean.sum() ** 2 / (2 * (mean ** 2).sum()))
    assert overall["fairness_gap"] == pytest.approx((mean.max() - mean.min()) / mean.min())
    gaps = {u["user"]: u for u in reps["jitter"]["users"]}
    assert gaps["1"]["mean_s"] == pytest.approx(0.002) and gaps["1"]["cov"] == pytest.approx(0.0, abs=1e-9)
    import os
    here = os.getcwd()
    try:
        os.chdir(out)
        status, stdout, _ = run_airlink(*shlex.split(reps["fairness"]["command"])[1:])
        assert status == 0 and json.loads(stdout) == reps["fairness"]["report"]
    finally:
        os.chdir(here)
    (out / "cell.json").write_text(json.dumps(summary))
    (out / "fairness.json").write_text(json.dumps(reps["fairness"]))
    (out / "jitter.json").write_text(json.dumps(reps["jitter"]))
    page = build_report_html(out)
    assert '<section id="cell"><h2>Live cell</h2>' in page and "could not be drawn" not in page
    assert "<b>50 late</b> (1.667 %; the MAC log marks 50)" in page and "3000 TTIs of 1 ms" in page
    assert '<td class="n">2250000</td>' in page and '<td class="n">500000</td>' in page      # served bytes
    assert f'<td class="n">{8 * 1500 * 1500 / 2.999 / 1e6:.3f}</td>' in page                   # MAC Mbit/s
    assert f"Jain&#x27;s index {overall['jain_index']:.3f}" in page or f"Jain's index {overall['jain_index']:.3f}" in page
    assert "per-UE NMI table: no per-UE MAC analysis in nmi.json" in page    # none was run here


@pytest.mark.netns
def test_cell_tcp_series_joins_the_flows_ue_by_real_time(cell_run):
    """The TCP analyses' frame takes capacity and backlog from the MAC log rows of the UE that
    ran the busiest flow: per 500 ms bin, capacity_bps = 8 x that UE's capacity_bytes / 0.5 s."""
    out, info = cell_run
    series = pd.read_parquet(out / "series-tcp.parquet")
    from airlink import rundir
    import pyarrow.parquet as pq
    prov = json.loads(pq.read_schema(out / "series-tcp.parquet").metadata[rundir.PROVENANCE_KEY])
    assert prov["sources"] == ["tcp.parquet", "cell-mac.parquet"]
    flow = pd.read_parquet(out / "flows.parquet").set_index("flow").loc[prov["flow"]]
    ends = {f"{flow['src']}:{flow['sport']}", f"{flow['dst']}:{flow['dport']}"}
    ue = next(a["ue"] for a in info["applications"] if a.get("local") in ends)
    mac = pd.read_parquet(out / "cell-mac.parquet")
    mac = mac[mac["user"] == str(ue)]
    ns = pd.DatetimeIndex(mac["time"]).asi8
    bins = ns // 500_000_000 * 500_000_000
    expect = mac.groupby(bins)["capacity_bytes"].sum() * 8 / 0.5
    got = series.set_index(pd.DatetimeIndex(series["time"]).asi8)["capacity_bps"].dropna()
    common = got.index.intersection(expect.index)
    assert len(common) >= 4
    np.testing.assert_allclose(got.loc[common].to_numpy(), expect.loc[common].to_numpy(), rtol=1e-9)


@pytest.mark.netns
def test_a_failing_ue_fails_the_live_stage_and_the_rest_still_runs(tmp_path, fresh_netns, root_netns):
    """UE 2's command fails, UE 3 runs nothing: the cell's status is the worst, the live stage
    says so, collect/infer/report still run on what the cell wrote."""
    exp = tmp_path / "fail.yaml"
    exp.write_text(yaml.safe_dump({
        "name": "fail", "cell": {"preset": "quick", "users": 3, "seed": 1,
                                 "ues": {1: [{"bulk": {"seconds": 1}}], 2: [{"command": "exit 3"}]}},
        "capture": {"inside": False, "host": True}, "infer": {"surrogates": 5, "bootstrap": 5}}))
    out = tmp_path / "out"
    r = subprocess.run(["ip", "netns", "exec", fresh_netns, *AIRLINK, "run", str(exp), "-o", str(out), "--json",
                        "--quiet"], capture_output=True, text=True, timeout=400, cwd=REPO)
    assert r.returncode == 1, r.stderr + r.stdout
    info = json.loads(r.stdout)
    stages = {s["name"]: s for s in info["stages"]}
    assert stages["live"]["status"] == "failed" and "UE 2 command: exit status 3" in stages["live"]["note"]
    assert any("exited with status 1" in n for n in info["notes"])
    assert [stages[s]["status"] for s in ("collect", "infer", "report")] == ["done", "done", "done"]
    cmd = next(a for a in info["applications"] if a["ue"] == 2)
    assert (cmd["status"], cmd["error"]) == (3, "exit status 3")
    ues = {u["ue"]: u for u in json.loads((out / "cell.json").read_text())["ues"]}
    assert (ues[1]["status"], ues[2]["status"], ues[3]["status"]) == (0, 1, 0)
    assert ues[3]["applications"] == "none" and ues[3]["served_bytes"] == 0
    assert ues[1]["served_bytes"] > 0
    assert rundir_status(out) == "finished"


def rundir_status(out: Path) -> str:
    from airlink import rundir
    return rundir.read_manifest(out)["status"]


@pytest.mark.parametrize("damage", [
    {"cell.json": '{"ues": "x", "ttis": "many"}'}, {"cell.json": "[1, 2"},
    {"cell-stats.json": '{"ttis": 10, "tti_ms": null, "late_ttis": null}'}, {"fairness.json": '{"report": 3}'},
])
def test_a_damaged_cell_file_is_a_note_not_a_crash(tmp_path, damage):
    from airlink.report import build_report_html
    out = tmp_path / "run"
    _synthetic_cell_folder(out)
    for name, text in damage.items():
        (out / name).write_text(text)
    page = build_report_html(out)
    assert "Live cell" in page and "</html>" in page


def test_a_preset_file_is_found_beside_the_experiment(tmp_path, monkeypatch):
    """cell.preset may name a YAML file relative to the experiment file (not the working
    directory); the UE count it sets bounds cell.ues, and a sweep fingerprints the file."""
    (tmp_path / "my-preset.yaml").write_text("preset: quick\nn_users: 3\n")
    (tmp_path / "exp.yaml").write_text("name: r\ncell: {preset: my-preset.yaml, ues: {3: [bulk]}}\n")
    monkeypatch.chdir(REPO)
    exp = load_experiment(tmp_path / "exp.yaml")
    assert exp.cell_preset_path() == str(tmp_path / "my-preset.yaml")
    assert [len(a) for a in exp.model.cell.per_ue(3)] == [0, 0, 1]
    (tmp_path / "exp.yaml").write_text("name: r\ncell: {preset: my-preset.yaml, ues: {4: [bulk]}}\n")
    with pytest.raises(AirlinkError, match="exp.yaml: cell.ues.4: UE 4 but the cell has 3 UEs"):
        load_experiment(tmp_path / "exp.yaml")
    from airlink.sweep import input_files
    exp = load_experiment(tmp_path / "exp.yaml", overrides={"cell.ues": {"3": ["bulk"]}})
    import hashlib
    digest = hashlib.sha256((tmp_path / "my-preset.yaml").read_bytes()).hexdigest()
    assert input_files(exp) == {str(tmp_path / "my-preset.yaml"): digest}


def test_bulk_receive_window_reaches_the_inside_runner(tmp_path):
    """cell.ues.N[i].bulk.rwnd is a size; the plan entry the inside runner reads carries it
    in bytes (8KiB = 8192), and a bulk app without it leaves the kernel's autotuning."""
    from airlink.experiment.live import plan_entry
    exp = load_experiment(_with(cell__ues={1: [{"bulk": {"rwnd": "8KiB"}}], 2: [{"bulk": {"rwnd": 65536}}]}))
    entries = [plan_entry(0, apps[0], tmp_path, 5201, [5300], [])
               for apps in exp.model.cell.per_ue(2)]
    assert [e["rwnd_bytes"] for e in entries] == [8192, 65536]
    plain = load_experiment(_with(cell__ues={1: ["bulk"]})).model.cell.per_ue(2)[0][0]
    assert plan_entry(0, plain, tmp_path, 5201, [5300], [])["rwnd_bytes"] is None
    path = tmp_path / "bad-rwnd.yaml"
    path.write_text(yaml.safe_dump(_with(cell__ues={2: [{"bulk": {"rwnd": "big"}}]})))
    with pytest.raises(AirlinkError, match=r"bad-rwnd.yaml: cell.ues.2\[0\].bulk.rwnd: cannot read size 'big'"):
        load_experiment(path)
