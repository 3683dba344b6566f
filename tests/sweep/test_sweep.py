"""airlink sweep on a real dask.distributed cluster: equal results to local runs, resume after
SIGKILL, damaged folders re-run, a worker killed mid-run never leaves a point missing."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.sweep._sweep_helpers import descendants, kill_group, wait_gone, write_sweep

from airlink.sweep import load_sweep, read_campaign, run_sweep
from airlink.sweep.runs import POINT_FILE, sha256_file

AIRLINK = Path(sys.executable).parent / "airlink"


def _reference(sweep_path: Path, out: Path) -> dict:
    """Each point run with airlink.experiment directly (no Dask, no sweep code): point id ->
    (summary.json, sha256 of capacity.parquet)."""
    from airlink.experiment import load_experiment, run_experiment
    sweep = load_sweep(sweep_path)
    ref = {}
    for p in sweep.points():
        folder = out / p.id
        run_experiment(load_experiment(sweep.experiment_path, overrides=p.params), folder,
                       live=False, progress=False, report=False)
        ref[p.id] = (json.loads((folder / "summary.json").read_text()), sha256_file(folder / "capacity.parquet"))
    return ref


def test_distributed_cluster_equals_local_runs(tmp_path, dask_cluster):
    sweep_path = write_sweep(tmp_path / "s", grid={"radio.scheduler": ["rr", "maxcir"]}, seeds=[1, 2])
    res = run_sweep(sweep_path, tmp_path / "camp", scheduler=dask_cluster.address, progress=False)
    frame = res.frame.set_index("point_id")
    assert len(frame) == 4 and set(frame["status"]) == {"done"}, frame[["status", "error"]]
    ref = _reference(sweep_path, tmp_path / "ref")
    assert set(ref) == set(frame.index)
    for pid, (summary, cap_sha) in ref.items():
        row = frame.loc[pid]
        assert row["trace_sha256"] == cap_sha                       # byte-identical capacity trace
        for k, v in summary.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                assert row[f"summary.{k}"] == pytest.approx(v, rel=1e-12, abs=0), k
        for u in summary["users"]:
            assert row[f"summary.user{u['user']}.throughput_mbps"] == pytest.approx(u["throughput_mbps"], rel=1e-12)
        # the parameters in the row are those the run used (its experiment.yaml as run)
        import yaml
        spec = yaml.safe_load((tmp_path / "camp" / row["artifacts"] / "experiment.yaml").read_text())
        assert spec["radio"]["scheduler"] == row["radio.scheduler"]
        assert spec["radio"]["seed"] == row["radio.seed"]
        # aggregate throughput from the trace itself: bytes x 8 / duration
        from airlink.traces import Trace
        tr = Trace.read_parquet(tmp_path / "camp" / row["artifacts"] / "capacity.parquet")
        mbps = tr.to_wide().to_numpy().sum() * 8 / float(tr.duration) / 1e6
        assert row["summary.aggregate_throughput_mbps"] == pytest.approx(mbps, rel=1e-9)
    # provenance travels with the table
    _, meta = read_campaign(tmp_path / "camp")
    assert meta["versions"]["kernel"] == os.uname().release
    assert set(frame["kernel"]) == {os.uname().release} and frame["airlink_version"].notna().all()
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        assert set(frame["congestion_controls"]) == {f.read().strip()}
    assert meta["experiment_sha256"] == sha256_file(tmp_path / "s" / "base.yaml")
    assert meta["sweep"]["grid"] == {"radio.scheduler": ["rr", "maxcir"]}


def test_resume_after_sigkill_and_damaged_folders_rerun(tmp_path):
    sweep_path = write_sweep(tmp_path / "s", grid={"radio.scheduler": ["rr", "pf"]}, seeds=[1, 2, 3, 4],
                             duration="1.5s")
    camp = tmp_path / "camp"
    proc = subprocess.Popen([str(AIRLINK), "sweep", str(sweep_path), "-o", str(camp), "--workers", "2", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        finished = []
        t0 = time.monotonic()
        while len(finished) < 2:
            assert proc.poll() is None, f"the sweep ended before it was killed: {proc.stderr.read().decode()[-2000:]}"
            assert time.monotonic() - t0 < 90, "no point finished within 90 s"
            finished = [p for p in (camp / "runs").glob("*/" + POINT_FILE)] if (camp / "runs").exists() else []
            time.sleep(0.05)
        family = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # the LocalCluster's workers die with the sweep (nothing keeps writing into the campaign)
        assert not wait_gone(family), "worker processes outlived the killed sweep"
    finally:
        kill_group(proc)
    frame, _ = read_campaign(camp)
    assert len(frame) == 8 and "pending" in set(frame["status"])      # interrupted: pending, not absent
    done_before = {p.parent.name: p.stat().st_mtime_ns for p in (camp / "runs").glob("*/" + POINT_FILE)}
    assert 2 <= len(done_before) < 8

    import psutil
    before = {c.pid for c in psutil.Process().children(recursive=True)}   # e.g. another test's cluster
    res = run_sweep(sweep_path, camp, workers=2, progress=False)
    assert set(res.frame["status"]) == {"done"} and len(res.frame) == 8
    # the local cluster's workers are gone once run_sweep returns (the multiprocessing
    # resource tracker, one per Python process, is not a worker)

    def cmdline(c):
        try:
            return " ".join(c.cmdline())
        except psutil.Error:  # gone, or a zombie
            return ""
    workers = [c.pid for c in psutil.Process().children(recursive=True)
               if c.pid not in before and "resource_tracker" not in cmdline(c)]
    assert not wait_gone(workers), "local cluster workers outlived run_sweep"
    assert set(res.reused) == set(done_before) and set(res.ran) == set(res.frame["point_id"]) - set(done_before)
    for pid, mtime in done_before.items():
        assert (camp / "runs" / pid / POINT_FILE).stat().st_mtime_ns == mtime, f"{pid} was run again"
    assert not [p for p in (camp / "runs").iterdir() if p.name.startswith(".")]  # no left-overs

    # damage: a changed byte in one run's mac.parquet, a half-written folder (no point.json),
    # a truncated capacity trace; everything else stays as it is
    ids = sorted(res.frame["point_id"])
    mac = camp / "runs" / ids[0] / "mac.parquet"
    data = bytearray(mac.read_bytes())
    data[len(data) // 2] ^= 0xFF
    mac.write_bytes(bytes(data))
    (camp / "runs" / ids[1] / POINT_FILE).unlink()
    cap = camp / "runs" / ids[2] / "capacity.parquet"
    cap.write_bytes(cap.read_bytes()[:100])
    before = {pid: (camp / "runs" / pid / POINT_FILE).stat().st_mtime_ns for pid in ids[3:]}
    res2 = run_sweep(sweep_path, camp, workers=1, progress=False)
    assert sorted(res2.ran) == ids[:3]
    assert set(res2.frame["status"]) == {"done"}
    for pid, mtime in before.items():
        assert (camp / "runs" / pid / POINT_FILE).stat().st_mtime_ns == mtime
    old = res.frame.set_index("point_id")["summary.aggregate_throughput_mbps"]
    new = res2.frame.set_index("point_id")["summary.aggregate_throughput_mbps"]
    pd.testing.assert_series_equal(old.sort_index(), new.sort_index())   # re-run = same numbers


def test_worker_killed_mid_run_leaves_point_failed_or_rerun(tmp_path, dask_cluster):
    # user 9 does not exist in the quick cell: those points fail in the radio stage and must
    # be recorded with the error while the others go on
    sweep_path = write_sweep(tmp_path / "s", grid={"radio.duration": ["0.5s", "40s"], "radio.user": [1, 9]})
    camp = tmp_path / "camp"
    slow = next(p.id for p in load_sweep(sweep_path).points() if p.params == {"radio.duration": "40s", "radio.user": 1})
    out: dict = {}
    th = threading.Thread(target=lambda: out.setdefault("res", run_sweep(sweep_path, camp, scheduler=dask_cluster.address,
                                                                         progress=False)))
    th.start()
    killed = None
    t0 = time.monotonic()
    while killed is None and th.is_alive() and time.monotonic() - t0 < 60:
        for info in (camp / "runs").glob(f".tmp-{slow}-*.worker.json") if (camp / "runs").exists() else []:
            try:
                killed = json.loads(info.read_text())["pid"]
            except (OSError, ValueError):
                continue
            os.kill(killed, signal.SIGKILL)
            break
        time.sleep(0.05)
    th.join(timeout=120)
    assert not th.is_alive()
    assert killed is not None, "the slow point finished before its worker could be killed"
    frame = out["res"].frame.set_index("point_id")
    assert len(frame) == 4 and "pending" not in set(frame["status"])
    row = frame.loc[slow]
    assert row["status"] == "done" or "Killed" in str(row["error"]), row
    assert (camp / "runs" / slow / POINT_FILE).is_file()
    assert not [p.name for p in (camp / "runs").iterdir() if p.name.startswith(".")]  # killed run's left-overs gone
    bad = frame[frame["radio.user"] == 9]
    assert set(bad["status"]) == {"failed"} and bad["error"].str.contains("no user '9'").all(), bad["error"]
    fast = frame[(frame["radio.user"] == 1) & (frame["radio.duration"] == "0.5s")]
    assert set(fast["status"]) == {"done"}


def test_confidence_table_by_hand():
    from airlink.sweep.report import confidence_table
    frame = pd.DataFrame({"status": ["done"] * 5 + ["failed"], "k": ["a", "a", "a", "b", "b", "a"],
                          "m": [1.0, 2.0, 3.0, 10.0, 10.0, 99.0]})
    t = confidence_table(frame, "m", by=["k"]).set_index("k")
    # a: mean 2, s = 1, t(0.975, 2) = 4.302653 (tables) -> half width 4.302653 / sqrt(3)
    assert t.loc["a", "n"] == 3 and t.loc["a", "mean"] == 2.0 and t.loc["a", "std"] == 1.0
    assert t.loc["a", "ci_high"] - 2.0 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    # b: s = 0 -> a zero-width interval; the failed row (99) is left out
    assert t.loc["b", "ci_low"] == t.loc["b", "ci_high"] == 10.0
    one = confidence_table(frame.iloc[:1], "m", by=["k"])
    assert one["n"].iloc[0] == 1 and np.isnan(one["ci_low"].iloc[0])


def test_bad_sweep_files_name_file_and_key(tmp_path):
    from airlink.traces import AirlinkError
    base = write_sweep(tmp_path, grid={"radio.scheduler": ["pf"]})
    cases = {
        "experiment: base.yaml\ngrid: {radio.seed: []}\n": "grid.radio.seed: an empty list sweeps nothing",
        "experiment: base.yaml\ngird: {radio.seed: [1]}\n": "gird: unknown key",
        "grid: {radio.seed: [1]}\n": "experiment: required key is missing",
        "experiment: nothere.yaml\n": "experiment: no such experiment file",
        "experiment: base.yaml\ngrid: {radio.seed: [1, 1]}\n": "radio.seed: value 1 is listed twice",
        "experiment: base.yaml\ngrid: {radio.seed: [1]}\nseeds: [1]\n": "radio.seed is both in grid and given by seeds",
        "experiment: base.yaml\nreport: {metirc: x}\n": "report.metirc: unknown key",
    }
    for i, (text, msg) in enumerate(cases.items()):
        p = tmp_path / f"bad{i}.yaml"
        p.write_text(text)
        with pytest.raises(AirlinkError) as e:
            load_sweep(p)
        assert str(e.value).startswith(f"{p}: ") and msg in str(e.value), str(e.value)
    # a grid key the experiment refuses fails before anything runs, naming the point
    p = tmp_path / "badkey.yaml"
    p.write_text("experiment: base.yaml\ngrid: {radoi.seed: [1]}\n")
    r = subprocess.run([str(AIRLINK), "sweep", str(p), "-o", str(tmp_path / "c")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"airlink: error: {p}: point ")
    assert "base.yaml" in r.stderr and "radoi: unknown" in r.stderr
    assert not (tmp_path / "c").exists()
    assert base.exists()


def test_report_page_from_campaign(tmp_path):
    """The report's table holds the means of the campaign's own values (pandas groupby)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from airlink.sweep.report import write_sweep_report
    camp = tmp_path / "camp"
    camp.mkdir()
    frame = pd.DataFrame({"point_id": [f"p{i}" for i in range(6)], "status": ["done"] * 6, "error": [None] * 6,
                          "radio.scheduler": ["rr", "rr", "rr", "pf", "pf", "pf"], "radio.seed": [1, 2, 3] * 2,
                          "summary.aggregate_throughput_mbps": [8.0, 9.0, 10.0, 11.0, 11.5, 12.5],
                          "seconds": [1.0] * 6, "host": ["h"] * 6})
    meta = {"kind": "campaign", "sweep": {"name": "hand", "grid": {"radio.scheduler": ["rr", "pf"]},
                                          "seeds": [1, 2, 3], "seed_key": "radio.seed", "report": {}}}
    t = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(t.replace_schema_metadata({**(t.schema.metadata or {}), b"airlink": json.dumps(meta).encode()}),
                   camp / "campaign.parquet")
    out = write_sweep_report(camp)
    page = out.read_text()
    assert out == camp / "report.html" and "data:image/png;base64," in page
    assert "<td>rr</td><td class=\"n\">3</td><td class=\"n\">9</td>" in page        # mean of 8, 9, 10
    assert "<td>pf</td><td class=\"n\">3</td><td class=\"n\">11.67</td>" in page    # mean of 11, 11.5, 12.5
    r = subprocess.run([str(AIRLINK), "sweep", "report", str(camp), "--metric", "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "no column 'nope'" in r.stderr and r.stderr.count("\n") == 1


def test_worker_without_the_campaign_folder_ships_the_run_back(tmp_path):
    """A worker on a machine that does not see the campaign folder (another token) runs in a
    temporary folder of its own and returns the folder packed; unpacked, it verifies."""
    from airlink.sweep.runs import run_point, unpack, verify_point
    sweep_path = write_sweep(tmp_path / "s", grid={"radio.scheduler": ["rr"]})
    sweep = load_sweep(sweep_path)
    p = sweep.points()[0]
    camp = tmp_path / "camp"
    (camp / "runs").mkdir(parents=True)
    (camp / ".campaign-token").write_text("the-clients-token\n")
    row = run_point({"campaign": str(camp), "token": "another-machine", "point_id": p.id, "params": p.params,
                     "experiment": str(sweep.experiment_path), "offline": True, "reports": None,
                     "fingerprint": "f", "live_slots": 1, "has_applications": False})
    assert row["status"] == "done", row["error"]
    assert not list((camp / "runs").iterdir())            # nothing written into the campaign
    unpack(row.pop("archive"), camp / "runs" / p.id)
    doc, why = verify_point(camp / "runs" / p.id, fingerprint="f")
    assert why == "" and doc["row"]["summary.aggregate_throughput_mbps"] == row["summary.aggregate_throughput_mbps"]
    summary = json.loads((camp / "runs" / p.id / "summary.json").read_text())
    assert row["summary.aggregate_throughput_mbps"] == summary["aggregate_throughput_mbps"]


def test_run_outcome_from_run_json(tmp_path):
    """done only for a finished run without a failed stage; a live sweep's point whose live
    stage was skipped is failed with the reason (not silently an offline run)."""
    from airlink.sweep.runs import run_outcome

    def folder(stages, finished=True):
        d = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        doc = {"stages": [{"name": n, "status": s, "note": f"{n} note"} for n, s in stages]}
        if finished:
            doc["finished"] = "2026-11-24T00:00:00+00:00"
        (d / "run.json").write_text(json.dumps(doc))
        return d

    ok = folder([("radio", "done"), ("live", "skipped"), ("infer", "done")])
    assert run_outcome(ok) == ("done", None)
    status, why = run_outcome(ok, live_expected=True)
    assert status == "failed" and "live stage skipped: live note" in why
    status, why = run_outcome(folder([("radio", "done"), ("collect", "failed")]))
    assert status == "failed" and why == "collect failed: collect note"
    status, why = run_outcome(folder([("radio", "done")], finished=False))
    assert status == "failed" and "interrupted" in why
    assert run_outcome(tmp_path / "nothing")[0] == "failed"


def test_live_slots_are_shared_by_processes(tmp_path):
    """A live run holds a per-machine slot: another process waits while all are taken and
    goes on when one is freed; with a second slot it does not wait."""
    from airlink.sweep.runs import live_slot
    slots = tmp_path / "slots"   # not the machine's: a live sweep running beside the test would hold those
    code = ("import sys; from pathlib import Path; from airlink.sweep.runs import live_slot\n"
            "with live_slot(int(sys.argv[1]), poll_s=0.05, folder=sys.argv[3]): Path(sys.argv[2]).write_text('in')\n")
    with live_slot(1, folder=slots):
        waiting = subprocess.Popen([sys.executable, "-c", code, "1", str(tmp_path / "one"), str(slots)])
        free = subprocess.run([sys.executable, "-c", code, "2", str(tmp_path / "two"), str(slots)], timeout=60)
        try:
            assert free.returncode == 0 and (tmp_path / "two").exists()      # second slot: no wait
            time.sleep(1.0)
            assert waiting.poll() is None and not (tmp_path / "one").exists()  # one slot, taken: waits
        except BaseException:
            waiting.kill()
            raise
    assert waiting.wait(timeout=60) == 0 and (tmp_path / "one").exists()


def test_example_sweeps_check():
    """Every sweep file in examples/sweeps/ loads and every one of its points is a valid
    experiment (what `airlink sweep` checks before running anything)."""
    import yaml
    from airlink.sweep import check_points
    folder = Path(__file__).resolve().parents[2] / "examples" / "sweeps"
    sweeps = [p for p in sorted(folder.glob("*.yaml")) if "experiment" in (yaml.safe_load(p.read_text()) or {})]
    assert len(sweeps) >= 6
    for p in sweeps:
        sweep = load_sweep(p)
        exps = check_points(sweep)
        assert len(exps) == len(sweep.points()) > 1, p


def test_changed_input_trace_reruns_and_is_hashed(tmp_path):
    """The sha256 of a measured trace the experiment reads is in the table's provenance and in
    each point's fingerprint: change the file and the points run again."""
    import yaml
    folder = tmp_path / "s"
    folder.mkdir()
    trace = folder / "link.down"
    trace.write_text("".join(f"{t}\n" for t in range(1, 2001, 2)))      # one 1500-byte slot every 2 ms
    (folder / "base.yaml").write_text(yaml.safe_dump({"name": "m", "radio": {"trace": "link.down"},
                                                      "infer": {"enabled": False}, "report": False}))
    (folder / "s.yaml").write_text(yaml.safe_dump({"experiment": "base.yaml", "offline": True,
                                                   "grid": {"collect.resolution": ["1s", "500ms"]}}))
    sweep = folder / "s.yaml"
    camp = tmp_path / "camp"
    first = run_sweep(sweep, camp, workers=1, progress=False)
    if set(first.frame["status"]) != {"done"}:
        pytest.fail(f"runs failed: {first.frame['error'].tolist()}")
    _, meta = read_campaign(camp)
    assert meta["inputs"] == {str(trace.resolve()): sha256_file(trace)}
    assert run_sweep(sweep, camp, workers=1, progress=False).ran == []
    trace.write_text("".join(f"{t}\n" for t in range(1, 2001)))          # twice the capacity
    again = run_sweep(sweep, camp, workers=1, progress=False)
    assert sorted(again.ran) == sorted(first.frame["point_id"])
    assert set(again.frame["trace_sha256"]) != set(first.frame["trace_sha256"])


def test_grid_values_may_be_whole_lists(tmp_path):
    """A grid value may be a list (or mapping) put in place of the key's value - how a sweep
    varies the link queue inside the experiment's list of shells; the table holds it as JSON."""
    from airlink.sweep import check_points
    from airlink.sweep.campaign import write_store
    shells = [[{"delay": 10}, {"link": {"queue": "droptail", "queue_args": f"packets={n}"}}] for n in (40, 500)]
    sweep = load_sweep(write_sweep(tmp_path / "s", grid={"shells": shells, "radio.scheduler": ["pf"]}))
    points = sweep.points()
    exps = check_points(sweep)
    assert [exps[p.id].spec["shells"] for p in points] == shells
    assert len({p.id for p in points}) == 2
    rows = [{"point_id": p.id, "status": "done", "params": p.params} for p in points]
    write_store(tmp_path, rows, sweep.keys, {"sweep": sweep.to_dict()})
    frame, _ = read_campaign(tmp_path)
    assert [json.loads(v) for v in frame["shells"]] == shells
    assert list(frame["radio.scheduler"]) == ["pf", "pf"]


def test_short_labels_cut_what_is_common():
    from airlink.sweep.report import short_labels
    long = [json.dumps([{"delay": 10}, {"link": {"queue_args": f"packets={n}"}}]) for n in (40, 500, 1500)]
    assert list(short_labels(long).values()) == ["40", "500", "1500"]
    assert short_labels(["pf", "maxcir"]) == {"pf": "pf", "maxcir": "maxcir"}   # short: as they are
    same_tail = ["x" * 30 + "a", "x" * 30 + "ba"]                               # cut would empty one
    assert short_labels(same_tail) == {v: v for v in same_tail}
