"""Run a sweep on Dask into a campaign folder, and read the campaign back.

A campaign folder holds::

    CAMPAIGN/campaign.parquet   one row per point (see below), provenance in the metadata
    CAMPAIGN/sweep.yaml         the sweep as run (checked spec, absolute experiment path)
    CAMPAIGN/runs/<point id>/   each point's run folder, with point.json (airlink.sweep.runs)

Rows of ``campaign.parquet``: ``point_id``, ``status`` (``done``, ``failed`` or ``pending`` =
not run yet, e.g. the sweep was interrupted), ``error``, one column per swept key (named by
the dotted key, e.g. ``radio.scheduler``), the key results of the run
(:func:`airlink.sweep.runs.key_results`: ``summary.*``, ``app<i>.*``, ``link.*``, ``nmi.*``,
``stages``), ``artifacts`` (the run folder, relative to the campaign), ``host``, ``started``,
``finished``, ``seconds`` (wall time of the run), ``slot_wait_s`` (of which a live run
waited for its live slot), ``fingerprint`` and ``trace_sha256`` (of
the run's ``capacity.parquet``), and from the run's ``versions.json`` what the machine that
ran it had: ``airlink_version``, ``git_commit``, ``kernel``, ``congestion_controls``. The Parquet metadata key ``airlink`` holds the sweep, the
versions of the machine that wrote the table (airlink and its git commit, Python, libraries,
kernel, available congestion controls) and the sha256 of the experiment file and of every
input file the experiment names (measured traces, offline captures).

The folders are the truth and the table is derived from them: each start verifies every
finished folder (:func:`airlink.sweep.runs.verify_point`) and runs what is missing, failed,
damaged or made from a different experiment; the table is rewritten (temporary file +
rename) after every point, so an interrupted sweep leaves a table whose unfinished points
say ``pending``. One sweep at a time may use a campaign folder (the folder lock every
airlink output folder has, :class:`airlink.outfolder.FolderLock`), and a non-empty folder
that is not a campaign is refused (:func:`airlink.rundir.claim_output`, as for a run).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from airlink.sweep.runs import POINT_FILE, RUNS, TOKEN_FILE, replace_dir, run_point, sha256_file, unpack, verify_point
from airlink.core.atomic import write_bytes
from airlink.sweep.spec import Sweep, canonical, check_points, load_sweep, value_label
from airlink.traces import AirlinkError

STORE = "campaign.parquet"
FIXED = ["point_id", "status", "error"]
TAIL = ["artifacts", "host", "started", "finished", "seconds", "slot_wait_s", "fingerprint", "trace_sha256",
        "airlink_version", "git_commit", "kernel", "congestion_controls"]


# ---------------------------------------------------------------------------- results
@dataclass
class SweepResult:
    """What :func:`run_sweep` returns: the campaign folder, its table and what this call did
    (``ran``: ids run now, ``reused``: ids whose verified folders were kept)."""

    campaign: Path
    frame: pd.DataFrame
    ran: list
    reused: list

    @property
    def counts(self) -> dict:
        return {k: int(v) for k, v in self.frame["status"].value_counts().items()}

    def to_frame(self) -> pd.DataFrame:
        return self.frame.copy()

    def to_dict(self) -> dict:
        return {"campaign": str(self.campaign), "points": len(self.frame), "counts": self.counts,
                "ran": list(self.ran), "reused": list(self.reused)}


# ---------------------------------------------------------------------------- the store
def _column(values: list):
    """A column Parquet can hold: one Python type kept, ints with floats as floats, any
    other mix as text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} and float in kinds:
        return [None if v is None else float(v) for v in values]
    if len(kinds) <= 1:
        return values
    return [None if v is None else str(v) for v in values]


def _frame(rows: list, keys: list) -> pd.DataFrame:
    results = sorted({k for r in rows for k in r if k not in FIXED + TAIL + keys + ["params"]})
    cols = FIXED + keys + results + TAIL
    data = {}
    for c in cols:
        if c in keys:  # a list or mapping value as its JSON text
            data[c] = _column([value_label(r["params"][c]) if isinstance(r["params"].get(c), (list, dict))
                               else r["params"].get(c) for r in rows])
        else:
            data[c] = _column([r.get(c) for r in rows])
    return pd.DataFrame(data, columns=cols)


def write_store(campaign: Path, rows: list, keys: list, meta: dict) -> Path:
    """Write ``campaign.parquet`` atomically (temporary file in the folder, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pandas(_frame(rows, keys), preserve_index=False)
    md = dict(table.schema.metadata or {})
    md[b"airlink"] = json.dumps({"kind": "campaign", **meta}, default=str).encode()
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(md), buf)
    path = campaign / STORE
    write_bytes(path, buf.getvalue())
    return path


def read_campaign(campaign) -> tuple[pd.DataFrame, dict]:
    """(table, metadata) of a campaign folder (or of its ``campaign.parquet``)."""
    import pyarrow.parquet as pq
    path = Path(campaign)
    path = path / STORE if path.is_dir() else path
    if not path.is_file():
        raise AirlinkError(f"{path}: no campaign table (run airlink sweep into this folder first)")
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise AirlinkError(f"{path}: not a readable Parquet file ({exc})") from None
    raw = (table.schema.metadata or {}).get(b"airlink")
    meta = json.loads(raw) if raw else {}
    if meta.get("kind") != "campaign":
        raise AirlinkError(f"{path}: not an airlink campaign table (no campaign metadata)")
    return table.to_pandas(), meta


# ---------------------------------------------------------------------------- provenance
def _inputs(exp) -> dict:
    """``{path: sha256}`` of the files an experiment reads: a measured ``radio.trace``, a
    cell's preset file, uplink trace and replayed log (``from_log``; when they are files), and
    the ``offline.captures``."""
    spec = exp.spec
    names = []
    radio = spec.get("radio") or {}
    if isinstance(radio, dict) and radio.get("trace"):
        names.append(radio["trace"])
    cell = spec.get("cell") or {}
    if isinstance(cell, dict):
        names += [str(cell[k]) for k in ("preset", "uplink", "from_log")
                  if cell.get(k) and exp.resolve(str(cell[k])).is_file()]
    names += list((spec.get("offline") or {}).get("captures") or [])
    out = {}
    for n in names:
        p = exp.resolve(n)
        out[str(p)] = sha256_file(p) if p.is_file() else None
    return out


def _fingerprint(exp, sweep: Sweep, inputs: dict) -> str:
    import hashlib
    doc = {"experiment": exp.spec, "offline": sweep.spec.offline, "reports": sweep.spec.reports,
           "inputs": inputs}
    return hashlib.sha256(canonical(doc).encode()).hexdigest()


def _provenance(sweep: Sweep, inputs: dict) -> dict:
    from airlink.experiment import versions
    return {"sweep": sweep.to_dict(), "versions": versions(),
            "experiment_sha256": sha256_file(sweep.experiment_path), "inputs": inputs}


# ---------------------------------------------------------------------------- the cluster
@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None, n_tasks: int):
    """A ``distributed.Client``: on the scheduler at ``scheduler``, or on a LocalCluster of
    ``workers`` processes (default: the cores, at most the number of tasks), one thread each
    (a run is CPU-bound Python); its workers die with this process."""
    import logging

    from distributed import Client, LocalCluster

    from airlink.interrupts import interrupts_held
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if scheduler:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address
            raise AirlinkError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or max(1, min(os.cpu_count() or 1, n_tasks))
    # SIGTERM while the cluster starts or closes waits for that step to end (a cluster cut in
    # half ends in a traceback at exit, distributed's own clean-up). SIGINT is ignored while
    # the workers start - they inherit that disposition, and Ctrl-C, which reaches the whole
    # process group, is then the sweep's to handle (it closes the cluster) instead of a
    # traceback from a worker interrupted while it starts; pressed then, Ctrl-C is lost
    cluster = client = error = None
    with interrupts_held() as held:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                   # the scheduler's HTTP routes on a free port (not 8787, which a
                                   # lab's own scheduler may hold), without the dashboard
                                   dashboard_address=":0", scheduler_kwargs={"dashboard": False},
                                   preload=["airlink.sweep._worker"], silence_logs=logging.ERROR)
            client = Client(cluster)
        except Exception as exc:
            error = exc
            if cluster is not None:
                cluster.close()
    if error is not None:
        held.raise_pending()
        raise error
    try:
        held.raise_pending()
        yield client
    finally:
        with interrupts_held():            # ending anyway: a further interrupt is dropped
            client.close()
            cluster.close()


def _campaign_or_why(folder: Path) -> str | None:
    """None when a non-empty ``folder`` is a campaign this sweep may resume, else why not."""
    if any((folder / n).exists() for n in (STORE, "sweep.yaml", TOKEN_FILE)):
        return None
    return (f"is not empty and holds no {STORE}: not an airlink campaign, so nothing in it is "
            "replaced (choose another folder)")


def _remove_leftovers(runs: Path, progress: bool = False) -> None:
    """Remove what runs that never finished left (the sweep or a worker was killed): their
    ``.tmp-*`` folders and files and ``.trash-*`` folders; a run folder whose manifest says
    running while its process is gone is reported as interrupted."""
    from airlink.rundir import run_state
    for p in runs.iterdir():
        if p.name.startswith((".tmp-", ".trash-")):
            if p.is_dir() and run_state(p) == "interrupted":
                _say(progress, f"{p.name}: an interrupted run (its process is gone); removed, the "
                               "point runs again")
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


def _say(progress: bool, text: str):
    if progress:
        print(f"airlink sweep: {text}", file=sys.stderr, flush=True)


def _failed_row(point_id: str, error: str) -> dict:
    return {"point_id": point_id, "status": "failed", "error": error}


# ---------------------------------------------------------------------------- public
def run_sweep(sweep, campaign, *, scheduler: str | None = None, workers: int | None = None,
              live_slots: int | None = None, progress: bool = True) -> SweepResult:
    """Run every point of ``sweep`` (a path, a mapping or a :class:`Sweep`) that ``campaign``
    does not hold finished and intact, on Dask, and return the campaign's table.

    ``scheduler``: address of a running Dask scheduler (``tcp://host:8786``); None starts a
    LocalCluster of ``workers`` processes (None: one per core, at most one per point).
    ``live_slots``: live runs one machine carries at once (None: cores // 2, at least 1);
    each live run holds a per-machine slot for its whole run, whichever worker runs it.
    A point that fails, or whose worker dies (Dask retries it on another worker, then gives
    up), is recorded as ``failed`` with the error; the others go on.
    """
    from airlink.rundir import claim_output
    sweep = sweep if isinstance(sweep, Sweep) else load_sweep(sweep)
    exps = check_points(sweep)
    campaign, _, lock = claim_output(campaign, accept=_campaign_or_why,
                                     busy="another sweep is running into this campaign folder")
    with lock:
        (campaign / RUNS).mkdir(exist_ok=True)
        return _run_locked(sweep, campaign, exps, scheduler=scheduler, workers=workers,
                           live_slots=live_slots, progress=progress)


def _run_locked(sweep, campaign, exps, *, scheduler, workers, live_slots, progress) -> SweepResult:
    import yaml
    points = sweep.points()
    keys = sweep.keys
    all_inputs: dict = {}
    tasks = {}
    token_path = campaign / TOKEN_FILE
    token = token_path.read_text().strip() if token_path.is_file() else uuid.uuid4().hex
    write_bytes(token_path, (token + "\n").encode())
    slots = live_slots or max(1, (os.cpu_count() or 1) // 2)
    for p in points:
        exp = exps[p.id]
        inputs = _inputs(exp)
        all_inputs.update(inputs)
        tasks[p.id] = {"campaign": str(campaign), "token": token, "point_id": p.id, "params": p.params,
                       "experiment": str(sweep.experiment_path), "offline": sweep.spec.offline,
                       "reports": sweep.spec.reports, "fingerprint": _fingerprint(exp, sweep, inputs),
                       "live_slots": slots, "has_applications": bool(exp.spec.get("applications") or exp.spec.get("cell"))}
    meta = _provenance(sweep, all_inputs)
    write_bytes(campaign / "sweep.yaml", yaml.safe_dump(sweep.to_dict(), sort_keys=False).encode())
    _remove_leftovers(campaign / RUNS, progress)
    rows, todo, reused = {}, [], []
    for p in points:
        doc, why = verify_point(campaign / RUNS / p.id, fingerprint=tasks[p.id]["fingerprint"])
        if not why and doc.get("status") == "done":
            rows[p.id] = {**doc["row"], "params": p.params}
            reused.append(p.id)
            continue
        if doc is not None and doc.get("status") == "done":
            _say(progress, f"re-running {why}")
        rows[p.id] = {"point_id": p.id, "status": "pending", "params": p.params}
        todo.append(p.id)

    def store():
        for pid, r in rows.items():
            r["artifacts"] = f"{RUNS}/{pid}" if (campaign / RUNS / pid).is_dir() else None
            r["fingerprint"] = tasks[pid]["fingerprint"]
        write_store(campaign, list(rows.values()), keys, meta)

    store()
    _say(progress, f"{len(points)} point(s): {len(reused)} already done, {len(todo)} to run")
    if todo:
        _execute(campaign, tasks, todo, rows, store, scheduler=scheduler, workers=workers, progress=progress)
        _remove_leftovers(campaign / RUNS)  # of runs whose worker died: every task has ended
    frame, _ = read_campaign(campaign)
    return SweepResult(campaign, frame, todo, reused)


def _execute(campaign, tasks, todo, rows, store, *, scheduler, workers, progress):
    from distributed import as_completed
    t0 = time.monotonic()
    with _client(scheduler, workers, len(todo)) as client:
        nonce = uuid.uuid4().hex[:6]
        futures = {client.submit(run_point, tasks[pid], key=f"airlink-sweep-{pid}-{nonce}", pure=False): pid
                   for pid in todo}
        done = 0
        try:
            for fut in as_completed(list(futures)):
                pid = futures[fut]
                try:
                    row = fut.result()
                except Exception as exc:  # the worker died (KilledWorker), the scheduler went away, ...
                    row = _failed_row(pid, f"{type(exc).__name__}: {exc}")
                    _record_failure(campaign / RUNS / pid, tasks[pid], row)
                archive = row.pop("archive", None)
                if archive is not None:
                    tmp = campaign / RUNS / f".tmp-{pid}-{uuid.uuid4().hex[:8]}"
                    unpack(archive, tmp)
                    replace_dir(tmp, campaign / RUNS / pid)
                rows[pid] = {**row, "params": tasks[pid]["params"]}
                store()
                done += 1
                err = f" - {row['error'][:200]}" if row.get("error") else ""
                _say(progress, f"[{done}/{len(todo)}] {pid} {row['status']} "
                               f"({row.get('seconds') or 0:.1f} s, {time.monotonic() - t0:.0f} s in){err}")
        except BaseException:
            for fut in futures:
                fut.cancel()
            store()
            raise


def _record_failure(folder: Path, task: dict, row: dict) -> None:
    """A point whose worker died has no folder of its own: write one holding only
    ``point.json`` with the error, so the folders still account for every point."""
    from airlink.sweep.runs import atomic_write_json
    tmp = folder.with_name(f".tmp-{folder.name}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    atomic_write_json(tmp / POINT_FILE, {"point_id": task["point_id"], "params": task["params"],
                                         "fingerprint": task["fingerprint"], "status": "failed",
                                         "row": row, "files": {}})
    replace_dir(tmp, folder)


__all__ = ["run_sweep", "read_campaign", "write_store", "SweepResult", "STORE"]
