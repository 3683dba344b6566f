"""One point of a sweep: run it (on a Dask worker), check its folder, read its key results.

A point's folder is ``CAMPAIGN/runs/<point id>/``: the run's own artifacts (as ``airlink run``
writes them) plus ``point.json``, written last, with the point's parameters, its fingerprint
(what was run), its status and row for the campaign table, and the size and sha256 of every
file in the folder. A run is made in ``runs/.tmp-<id>-<nonce>/`` and renamed into place only
when ``point.json`` is written, so a folder under its final name is either complete or was
damaged afterwards - which :func:`verify_point` detects (a file missing, resized or changed).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import math
import os
import shutil
import socket
import tarfile
import tempfile
import time
import traceback
import uuid
from pathlib import Path

from airlink.rundir import utc_now_iso
from airlink.traces import AirlinkError
from airlink.core.atomic import write_bytes

POINT_FILE = "point.json"
TOKEN_FILE = ".campaign-token"
RUNS = "runs"
LIVE_LOCK_DIR = Path(tempfile.gettempdir()) / "airlink-live-slots"


# ---------------------------------------------------------------------------- small helpers
def sha256_file(path, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def atomic_write_json(path: Path, obj) -> None:
    """``obj`` as JSON (NaN refused) into ``path``, through a temporary name and a rename."""
    write_bytes(path, (json.dumps(obj, indent=1, default=str, allow_nan=False) + "\n").encode())


def _finite(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


# ---------------------------------------------------------------------------- key results
def key_results(folder) -> dict:
    """The scalars of a run folder that a campaign table keeps, by file:

    - ``summary.json`` (simulator): every top-level number as ``summary.<key>`` and each
      user's ``summary.user<u>.throughput_mbps`` / ``.resource_fraction``;
    - ``run.json``: each application's numbers as ``app<i>.<key>`` (i from 1, e.g.
      ``app1.goodput_bps``), and ``stages`` = ``radio:done,live:skipped,...``;
    - ``link-stats.json`` (the link shell): top-level numbers as ``link.<key>`` and each
      direction's as ``link.<direction>.<key>`` (``link.downlink.drops_packets``);
    - ``nmi.json``: each factor's ``nmi.<target>.<factor>.peak_nmi`` and ``.p_value``
      (``nmi.ue<u>.<target>.<factor>...`` for a live cell's per-UE analyses);
    - ``cell.json`` (a live cell): top-level numbers as ``cell.<key>`` (``cell.late_fraction``)
      and each UE's as ``cell.ue<u>.<key>`` (``cell.ue1.mac_throughput_bps``,
      ``cell.ue1.app_goodput_bps``); ``fairness.json``: ``fairness.<key>`` of its overall
      numbers (``fairness.jain_index``).
    A file that is absent contributes nothing. Non-finite numbers become None."""
    folder = Path(folder)
    out: dict = {}

    def load(name):
        p = folder / name
        return json.loads(p.read_text()) if p.is_file() else None

    summary = load("summary.json") or {}
    for k, v in summary.items():
        if _finite(v) is not None:
            out[f"summary.{k}"] = float(v)
    for u in summary.get("users") or []:
        for k in ("throughput_mbps", "resource_fraction"):
            if k in u:
                out[f"summary.user{u.get('user')}.{k}"] = _finite(u[k])
    info = load("run.json") or {}
    out["stages"] = ",".join(f"{s['name']}:{s['status']}" for s in info.get("stages") or [])
    for i, app in enumerate(info.get("applications") or [], 1):
        for k, v in app.items():
            if _finite(v) is not None and k not in ("status", "elapsed_s"):
                out[f"app{i}.{k}"] = float(v)
    for k, v in (load("link-stats.json") or {}).items():
        if _finite(v) is not None and k != "status":
            out[f"link.{k}"] = float(v)
        elif isinstance(v, dict):  # per direction: link.downlink.drops_packets, ...
            for k2, v2 in v.items():
                if _finite(v2) is not None:
                    out[f"link.{k}.{k2}"] = float(v2)
    for a in (load("nmi.json") or {}).get("analyses") or []:
        ue = f"ue{a['user']}." if a.get("user") is not None and (folder / "cell.json").is_file() else ""
        for f in a.get("factors") or []:
            out[f"nmi.{ue}{a.get('target')}.{f.get('factor')}.peak_nmi"] = _finite(f.get("peak_nmi"))
            out[f"nmi.{ue}{a.get('target')}.{f.get('factor')}.p_value"] = _finite(f.get("p_value"))
    cell = load("cell.json") or {}
    for k, v in cell.items():
        if _finite(v) is not None:
            out[f"cell.{k}"] = float(v)
    for u in cell.get("ues") or []:
        for k, v in u.items():
            if _finite(v) is not None and k != "ue":
                out[f"cell.ue{u.get('ue')}.{k}"] = float(v)
    for k, v in ((load("fairness.json") or {}).get("report") or {}).get("overall", {}).items():
        if _finite(v) is not None:
            out[f"fairness.{k}"] = float(v)
    return out


def run_outcome(folder, *, live_expected: bool = False) -> tuple[str, str | None]:
    """("done", None) when ``run.json`` says the run finished with no failed stage (and, with
    ``live_expected``, its live stage ran: a campaign of live points must not fill up with
    offline ones where the machine cannot run them), else ("failed", why)."""
    p = Path(folder) / "run.json"
    if not p.is_file():
        return "failed", "the run wrote no run.json"
    try:
        info = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        return "failed", f"run.json is unreadable ({exc})"
    failed = [s for s in info.get("stages") or [] if s.get("status") != "done" and s.get("status") not in ("skipped",)]
    if failed:
        return "failed", "; ".join(f"{s['name']} {s['status']}: {s.get('note') or ''}".strip() for s in failed)
    live = next((s for s in info.get("stages") or [] if s.get("name") == "live"), None)
    if live_expected and live is not None and live.get("status") != "done":
        return "failed", (f"live stage {live.get('status')}: {live.get('note') or ''} (a sweep with "
                          "offline: true runs the offline stages only)")
    if not info.get("finished"):
        return "failed", "run.json has no finish time (the run was interrupted)"
    try:
        from airlink.rundir import MANIFEST, read_manifest
    except ImportError:  # before run folders had a manifest
        return "done", None
    from airlink.rundir import run_state
    doc = read_manifest(folder)
    if (Path(folder) / MANIFEST).exists() and (doc or {}).get("status") != "finished":
        state = run_state(folder) or "unreadable"
        return "failed", f"{MANIFEST} says the run is {state}"
    return "done", None


def file_manifest(folder) -> dict:
    """``{relative path: [size, sha256]}`` of every file in ``folder`` except point.json."""
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != POINT_FILE:
            out[p.relative_to(folder).as_posix()] = [p.stat().st_size, sha256_file(p)]
    return out


def verify_point(folder, *, fingerprint: str | None = None) -> tuple[dict | None, str]:
    """``(point.json content, "")`` when ``folder`` holds a complete run of this fingerprint
    whose files are all present, of their recorded size and sha256; else ``(doc or None, why)``.
    A failed run verifies as such (the caller re-runs it)."""
    folder = Path(folder)
    p = folder / POINT_FILE
    if not folder.is_dir():
        return None, "not run yet"
    if not p.is_file():
        return None, f"{folder.name}: no {POINT_FILE} (half-written run)"
    try:
        doc = json.loads(p.read_text())
        files = doc["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{folder.name}/{POINT_FILE}: unreadable ({exc})"
    if fingerprint is not None and doc.get("fingerprint") != fingerprint:
        return doc, f"{folder.name}: made from a different experiment or inputs"
    for rel, (size, digest) in files.items():
        f = folder / rel
        if not f.is_file():
            return doc, f"{folder.name}/{rel}: missing"
        if f.stat().st_size != size:
            return doc, f"{folder.name}/{rel}: {f.stat().st_size} bytes, {size} when written"
        if sha256_file(f) != digest:
            return doc, f"{folder.name}/{rel}: content changed since written"
    return doc, ""


def replace_dir(src: Path, dst: Path) -> None:
    """Put folder ``src`` at ``dst``: an old ``dst`` is renamed aside first, then removed."""
    if dst.exists():
        aside = dst.with_name(f".trash-{dst.name}-{uuid.uuid4().hex[:8]}")
        os.replace(dst, aside)
        os.replace(src, dst)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(src, dst)


# ---------------------------------------------------------------------------- live slots
@contextlib.contextmanager
def live_slot(slots: int, *, poll_s: float = 0.5, folder=None):
    """Hold one of ``slots`` per-machine live slots (``flock`` on ``slot<i>.lock`` in
    ``folder``, default the temporary folder's ``airlink-live-slots``), waiting while all are
    taken: live runs of any sweep, worker or cluster on this machine share the same slots, so
    they never exceed what the cores carry."""
    folder = Path(folder) if folder is not None else LIVE_LOCK_DIR
    folder.mkdir(exist_ok=True)
    while True:
        for i in range(max(1, slots)):
            f = open(folder / f"slot{i}.lock", "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            try:
                yield i
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        time.sleep(poll_s)


def _wants_live(task: dict) -> bool:
    if task["offline"] or not task.get("has_applications"):
        return False
    from airlink.experiment import live_unavailable_reason
    return live_unavailable_reason() is None


# ---------------------------------------------------------------------------- on a worker
def _pack(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def unpack(data: bytes, dest: Path) -> None:
    """Unpack a run folder shipped back by a worker that does not see the campaign folder."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def run_point(task: dict) -> dict:
    """Run one point (called on a Dask worker) and return its campaign row.

    ``task``: campaign (absolute path), token, point_id, params, experiment (absolute path),
    offline, reports, fingerprint, live_slots, has_applications. When the worker sees the
    campaign folder (same token file) the run is made there and renamed into
    ``runs/<id>``; otherwise it is made in a local temporary folder and returned packed in
    ``row["archive"]`` for the client to unpack. A failing run is a row with status
    ``failed`` and the error, never an exception."""
    campaign = Path(task["campaign"])
    try:
        shared = (campaign / TOKEN_FILE).read_text().strip() == task["token"]
    except OSError:
        shared = False
    parent = campaign / RUNS if shared else Path(tempfile.mkdtemp(prefix="airlink-sweep-"))
    work = parent / f".tmp-{task['point_id']}-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    host = socket.gethostname()
    # who runs it, beside the folder (a run wants its folder empty): what a person (or a
    # test) looking at a stuck sweep needs to find the process
    beside = parent / f"{work.name}.worker.json"
    beside.write_text(json.dumps({"host": host, "pid": os.getpid(), "started": utc_now_iso()}))
    row = {"point_id": task["point_id"], "status": "failed", "error": None, "host": host,
           "started": utc_now_iso(), "finished": None, "seconds": None}
    t0 = time.monotonic()
    try:
        from airlink.experiment import load_experiment, run_experiment
        exp = load_experiment(task["experiment"], overrides=task["params"])
        report = True if task["reports"] is None else bool(task["reports"])
        live = False if task["offline"] else None
        if _wants_live(task):
            t_wait = time.monotonic()
            with live_slot(task["live_slots"]):
                row["slot_wait_s"] = time.monotonic() - t_wait
                run_experiment(exp, work, live=live, progress=False, report=report)
        else:
            run_experiment(exp, work, live=live, progress=False, report=report)
        row["status"], row["error"] = run_outcome(work, live_expected=not task["offline"] and task.get("has_applications"))
    except Exception as exc:  # recorded in the row; the other points go on
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        row["error"] = (f"{type(exc).__name__}: {exc}" if isinstance(exc, AirlinkError)
                        else f"{type(exc).__name__}: {exc} | {''.join(tb[-3:]).strip()}")[:4000]
    row["seconds"] = time.monotonic() - t0
    row["finished"] = utc_now_iso()
    try:
        row.update(key_results(work))
    except (OSError, ValueError) as exc:
        row["error"] = (row["error"] + "; " if row["error"] else "") + f"results unreadable: {exc}"
        row["status"] = "failed"
    cap = work / "capacity.parquet"
    row["trace_sha256"] = sha256_file(cap) if cap.is_file() else None
    try:  # what the machine that ran it had (workers of one campaign may differ)
        v = json.loads((work / "versions.json").read_text())
    except (OSError, ValueError):
        v = {}
    row.update({"airlink_version": v.get("airlink"), "git_commit": v.get("git_commit"), "kernel": v.get("kernel"),
                "congestion_controls": v.get("tcp_congestion_controls")})
    doc = {"point_id": task["point_id"], "params": task["params"], "fingerprint": task["fingerprint"],
           "status": row["status"], "row": row, "files": file_manifest(work)}
    atomic_write_json(work / POINT_FILE, doc)
    beside.unlink(missing_ok=True)
    if shared:
        replace_dir(work, campaign / RUNS / task["point_id"])
        return row
    try:
        return {**row, "archive": _pack(work)}
    finally:
        shutil.rmtree(parent, ignore_errors=True)


__all__ = ["run_point", "verify_point", "key_results", "run_outcome", "file_manifest", "live_slot",
           "replace_dir", "unpack", "atomic_write_json", "sha256_file", "POINT_FILE"]
