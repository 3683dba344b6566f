"""Helpers of the sweep tests: small offline sweeps of the simulator's quick cell, a real
dask.distributed cluster - a scheduler and workers started as separate processes on loopback
with the ``dask`` command - and process bookkeeping (imported by plain name, see
tests/conftest.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

DASK = Path(sys.executable).parent / "dask"


def write_sweep(folder: Path, *, grid: dict, seeds=None, duration: str = "0.5s", name: str = "t") -> Path:
    """A base experiment (quick preset, one user replayed, no inference, no report page) and
    a sweep file over ``grid`` (and ``seeds``) in ``folder``; returns the sweep file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(yaml.safe_dump({
        "name": "base", "radio": {"preset": "quick", "seed": 1, "duration": duration, "scheduler": "pf", "user": 1},
        "infer": {"enabled": False}, "report": False}))
    doc = {"name": name, "experiment": "base.yaml", "offline": True, "grid": grid}
    if seeds:
        doc["seeds"] = list(seeds)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def descendants(pid: int) -> list:
    import psutil
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def wait_gone(pids, timeout: float = 20.0) -> list:
    """The pids still alive after ``timeout`` seconds (zombies count as gone)."""
    import psutil
    t0 = time.monotonic()
    alive = list(pids)
    while alive and time.monotonic() - t0 < timeout:
        still = []
        for p in alive:
            try:
                if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                    still.append(p)
            except psutil.NoSuchProcess:
                pass
        alive = still
        if alive:
            time.sleep(0.2)
    return alive


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group a test started (start_new_session=True), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class DaskCluster:
    """``dask scheduler`` on 127.0.0.1 (free port, address from its scheduler file) and
    ``dask worker`` x N, each in its own process group."""

    def __init__(self, folder: Path, n_workers: int = 2):
        self.folder = folder
        self.procs: list = []
        self.address = None
        self.n_workers = n_workers

    def start(self):
        sched_file = self.folder / "scheduler.json"
        env = {**os.environ, "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED": "error"}
        log = open(self.folder / "scheduler.log", "w")
        self.procs.append(subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(sched_file)], stdout=log, stderr=log, start_new_session=True, env=env))
        t0 = time.monotonic()
        while not sched_file.exists() or not sched_file.read_text().strip():
            if time.monotonic() - t0 > 60 or self.procs[0].poll() is not None:
                raise RuntimeError(f"dask scheduler did not start: {(self.folder / 'scheduler.log').read_text()[-2000:]}")
            time.sleep(0.1)
        self.address = json.loads(sched_file.read_text())["address"]
        for i in range(self.n_workers):
            wlog = open(self.folder / f"worker{i}.log", "w")
            self.procs.append(subprocess.Popen(
                [str(DASK), "worker", self.address, "--nthreads", "1", "--no-dashboard",
                 "--host", "127.0.0.1", "--name", f"w{i}"], stdout=wlog, stderr=wlog,
                start_new_session=True, env=env))
        from distributed import Client
        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(self.n_workers, timeout=60)
        return self

    def stop(self):
        pids = [p.pid for p in self.procs] + [d for p in self.procs for d in descendants(p.pid)]
        for p in self.procs:
            kill_group(p)
        left = wait_gone(pids)
        assert not left, f"dask processes left behind: {left}"
