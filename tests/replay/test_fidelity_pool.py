"""The fidelity benchmark's pooling of saved runs (``--table A.json B.json``): live runs of one
cell seed count as one seed for the live floor, replays' runs are put together. The
expected values are worked by hand below, not with the benchmark's own functions."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fidelity_workloads.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fidelity_workloads", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _res(page=(), train50=()):
    """A workload client's result with page loads and 50-packet trains (ms)."""
    return {"ping_ms": [], "page_ms": list(page), "bulk_mbps": [],
            "train_ms": {"50": list(train50)} if train50 else {}, "download_ms": {}}


RUN_A = {"live": [_res([10, 20], [5]), _res([30])], "live_seeds": [1, 2],
         "replays": {"airlink cell (sched, demand)": [_res([11], [6])]}}
RUN_B = {"live": [_res([40], [7])], "live_seeds": [1],
         "replays": {"airlink cell (sched, demand)": [_res([12])], "CellReplay (mm-cellular)": [_res([50])]}}


def test_pool_groups_live_runs_by_seed(bench):
    live, replays = bench.pool([RUN_A, RUN_B])
    assert len(live) == 2                                   # seeds 1 and 2
    assert sorted(live[0]["page_ms"]) == [10, 20, 40] and live[0]["train_ms"] == {"50": [5, 7]}
    assert live[1]["page_ms"] == [30]
    assert [r["page_ms"] for r in replays["airlink cell (sched, demand)"]] == [[11], [12]]
    assert [r["page_ms"] for r in replays["CellReplay (mm-cellular)"]] == [[50]]
    # the live floor by hand: seed 1 {10, 20, 40} against seed 2 {30}: the EMD to a point
    # mass is the mean distance to it, (20 + 10 + 10) / 3, over seed 2's mean 30; seed 2
    # against seed 1: the same EMD over seed 1's mean 70 / 3; the floor is their median
    emd = 40 / 3
    assert bench.live_floor(live)["page load"] == pytest.approx((emd / 30 + emd / (70 / 3)) / 2)


def test_pool_without_seeds_counts_each_live_run(bench):
    old = {k: v for k, v in RUN_A.items() if k != "live_seeds"}      # a run file without live_seeds
    live, _ = bench.pool([old, RUN_B])
    assert [sorted(r["page_ms"]) for r in live] == [[10, 20], [30], [40]]


def test_table_of_pooled_files(tmp_path):
    files = []
    for name, doc in (("a.json", RUN_A), ("b.json", RUN_B)):
        files.append(tmp_path / name)
        files[-1].write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, BENCH, "--table", *files], capture_output=True, text=True, check=True)
    row = next(line for line in out.stdout.splitlines() if line.startswith("page load"))
    # 4 live page loads of mean 25 ms; demand replay {11, 12} against {10, 20, 30, 40}: the
    # EMD matches quantiles, 11 with 10 and 20, 12 with 30 and 40, a quarter each:
    # 0.25 * (1 + 9 + 18 + 28) = 14, so 14 / 25 = 56 %
    assert row.split()[2:4] == ["4", "25.0ms"]
    assert "56.0 %" in row
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**RUN_B, "live_seeds": [1, 2]}))
    out = subprocess.run([sys.executable, BENCH, "--table", files[0], bad], capture_output=True, text=True)
    assert out.returncode == 2 and f"--table {bad}: not a saved run" in out.stderr


def test_pool_ignores_a_runs_cell_timing(bench):
    """A cell run's result carries the cell shell's timing under ``cell`` (late TTIs): not
    samples, so pooling leaves it out and keeps the samples as they are."""
    timed = {**_res([10, 20], [5]), "cell": {"ttis": 1000, "late_ttis": 3, "max_lateness_us": 900}}
    live, _ = bench.pool([{"live": [timed, _res([40], [7])], "live_seeds": [1, 1], "replays": {}}])
    assert len(live) == 1 and "cell" not in live[0]
    assert sorted(live[0]["page_ms"]) == [10, 20, 40] and live[0]["train_ms"] == {"50": [5, 7]}
