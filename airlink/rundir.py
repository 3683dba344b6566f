"""The run folder: one module names every artifact, writes it atomically and records it.

A run folder (what ``airlink run`` writes, and what ``airlink report`` reads) is an
interface, so it is declared here once:

* :data:`ARTIFACTS` - every artifact's name pattern, kind, format and the stage that
  produces it. Readers find artifacts by kind (:meth:`RunFolder.find`), never by sniffing
  columns; a Parquet artifact carries its kind in the file metadata (``airlink.kind``) and
  its provenance as JSON (``airlink.provenance``), stamped by :func:`write_frame`.
* ``manifest.json`` - the artifacts this run wrote (path, kind, stage), and the run's
  ``status``: ``running`` while it works, ``finished`` or ``failed`` at the end. A folder
  whose manifest is missing or says ``running`` is not a complete run
  (:func:`is_complete`).
* Atomic writers - every artifact is written under a temporary name in the same folder
  (``<name>.partial``, :mod:`airlink.traces.atomic`, the one implementation the shells'
  logs use too) and renamed into place, so an interrupted writer never leaves a file under
  the final name (:func:`atomic_path`, :func:`write_frame`, :func:`write_text`,
  :class:`FrameStreamWriter` for row groups).
* Safety under ``sudo`` - an existing non-empty folder is refused unless ``overwrite`` is
  given; then only the artifacts the previous manifest lists are removed (anything else in
  the folder stays). :meth:`RunFolder.give_to_sudo_user` changes the owner of what this run
  created and of nothing else.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path

from airlink.traces.atomic import PARTIAL_SUFFIX, atomic_path, commit, partial_path, write_text
from airlink.traces.errors import AirlinkError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "airlink-run/1"
KIND_KEY = b"airlink.kind"
PROVENANCE_KEY = b"airlink.provenance"
STATUSES = ("running", "finished", "failed")


class FolderNotEmptyError(AirlinkError):
    """The output folder of a new run exists and holds files (see :meth:`RunFolder.create`)."""


@dataclass(frozen=True)
class Artifact:
    """One declared artifact: ``pattern`` (relative path, ``fnmatch`` wildcards), ``kind``,
    ``format`` (parquet, json, yaml, text, pcap, mahimahi-log, html) and the producing
    ``stage`` (run, radio, live, collect, infer, report)."""

    pattern: str
    kind: str
    format: str
    stage: str
    description: str = ""


#: Every artifact a run folder can hold, in the order a reader should prefer them.
ARTIFACTS: tuple = (
    Artifact(MANIFEST, "manifest", "json", "run", "artifacts and status of the run"),
    Artifact("experiment.yaml", "experiment", "yaml", "run", "the experiment file as run"),
    Artifact("versions.json", "versions", "json", "run", "versions of airlink, libraries and tools"),
    Artifact("run.json", "run-info", "json", "run", "stage status, timings, notes, application results"),
    Artifact("capacity.parquet", "capacity", "parquet", "radio", "capacity trace, bytes per TTI per user"),
    Artifact("link-trace.parquet", "link-trace", "parquet", "radio", "replayed user's trace split into TTIs <= 10 ms"),
    Artifact("mac.parquet", "mac", "parquet", "radio", "simulator's per-TTI MAC log, all users"),
    Artifact("summary.json", "sim-summary", "json", "radio", "simulator's summary (throughput, fairness)"),
    Artifact("config.yaml", "sim-config", "yaml", "radio", "simulator's resolved configuration"),
    Artifact("user*.down", "mahimahi-trace", "text", "radio", "Mahimahi trace per user"),
    Artifact("cell-mac.parquet", "mac", "parquet", "live", "the live cell's per-TTI MAC log, all UEs (airlink cell)"),
    Artifact("cell-stats.json", "cell-stats", "json", "live", "the live cell's counters per UE, TTIs, late TTIs"),
    Artifact("cell-logs/ue*.log", "cell-log", "mahimahi-log", "live", "the live cell's Mahimahi-format log per UE"),
    Artifact("capture/ue*.pcap", "capture", "pcap", "live", "tcpdump inside a UE's namespace (cell)"),
    Artifact("cell.json", "cell-summary", "json", "collect", "per UE: MAC-log bytes and throughput, applications' bytes"),
    Artifact("fairness.json", "fairness", "json", "infer", "fairness across the cell's UEs (airlink infer fairness)"),
    Artifact("jitter.json", "jitter", "json", "infer", "inter-service gaps per UE (airlink infer jitter)"),
    Artifact("link-*.parquet", "link-tti", "parquet", "live", "link shell's per-TTI log (capacity, backlog)"),
    Artifact("link-stats.json", "link-stats", "json", "live", "link shell's counters"),
    Artifact("downlink.log", "link-log", "mahimahi-log", "live", "Mahimahi-format downlink log"),
    Artifact("uplink.log", "link-log", "mahimahi-log", "live", "Mahimahi-format uplink log"),
    Artifact("capture/inside.pcap", "capture", "pcap", "live", "tcpdump inside the namespace (client side)"),
    Artifact("capture/host.pcap", "capture", "pcap", "live", "tcpdump on the host (server side)"),
    Artifact("apps/*", "app-output", "text", "live", "application plan, results and logs"),
    Artifact("series-*.parquet", "series", "parquet", "infer", "the regular frame an NMI analysis ran on"),
    Artifact("packets.parquet", "packets", "parquet", "collect", "one row per IP packet"),
    Artifact("*-packets.parquet", "packets", "parquet", "collect", "packets of a further capture"),
    Artifact("flows.parquet", "flows", "parquet", "collect", "one row per connection"),
    Artifact("*-flows.parquet", "flows", "parquet", "collect", "flows of a further capture"),
    Artifact("tcp.parquet", "tcp", "parquet", "collect", "TCP time series per flow and direction"),
    Artifact("*-tcp.parquet", "tcp", "parquet", "collect", "TCP series of a further capture"),
    Artifact("events.parquet", "tcp-events", "parquet", "collect", "retransmissions, dupacks, ... per packet"),
    Artifact("*-events.parquet", "tcp-events", "parquet", "collect", "TCP events of a further capture"),
    Artifact("*.packets.parquet", "packets", "parquet", "collect", "airlink collect: packets of <stem>"),
    Artifact("*.flows.parquet", "flows", "parquet", "collect", "airlink collect: flows of <stem>"),
    Artifact("*.tcp.parquet", "tcp", "parquet", "collect", "airlink collect: TCP series of <stem>"),
    Artifact("*.events.parquet", "tcp-events", "parquet", "collect", "airlink collect: TCP events of <stem>"),
    Artifact("*.mac.parquet", "mac", "parquet", "collect", "airlink collect: per-user MAC/radio frame"),
    Artifact("*.rf.parquet", "rf", "parquet", "collect", "airlink collect: radio (RF) frame"),
    Artifact("collect.json", "collect-summary", "json", "collect", "per capture: flows and counts"),
    Artifact("nmi.json", "nmi", "json", "infer", "NMI factor rankings with curves"),
    Artifact("report.html", "report", "html", "report", "the report page"),
)

#: kinds a collect stage writes, with the file-name part (``<stem>.<part>.parquet`` for
#: ``airlink collect``, ``<prefix><part>.parquet`` in a run folder)
COLLECT_KINDS = {"packets": "packets", "flows": "flows", "tcp": "tcp", "tcp-events": "events"}


def declared(relpath: str) -> Artifact | None:
    """The declared artifact a relative path matches (first match in :data:`ARTIFACTS`)."""
    rel = str(relpath).replace(os.sep, "/")
    for a in ARTIFACTS:
        if fnmatch.fnmatchcase(rel, a.pattern):
            return a
    return None


def utc_now_iso() -> str:
    """Now, UTC, ISO 8601 to the second: the time stamps of manifests and campaign rows."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------- atomic writes
# atomic_path, write_text, partial_path, commit: airlink.traces.atomic (re-exported here)


def write_json(path, obj) -> Path:
    """Write ``obj`` as indented JSON (numpy scalars, timestamps as plain values) atomically."""
    return write_text(path, json.dumps(obj, indent=2, default=json_default) + "\n")


def json_default(o):
    """``json.dumps`` default for numpy scalars and timestamps."""
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "isoformat"):
        return o.isoformat()
    return str(o)


def provenance_of(frame) -> dict:
    """The JSON-able part of a frame's ``attrs`` plus the airlink version."""
    from airlink import __version__
    prov = {k: v for k, v in getattr(frame, "attrs", {}).items()
            if isinstance(v, (str, int, float, list, bool, dict))}
    prov["airlink_version"] = __version__
    return prov


def _stamp(schema, *, kind: str, provenance: dict | None):
    meta = dict(schema.metadata or {})
    prov = json.dumps(provenance or {}, default=json_default).encode()
    meta[KIND_KEY] = kind.encode()
    meta[PROVENANCE_KEY] = prov
    meta.setdefault(b"airlink", prov)  # what readers before the run-folder module looked at
    return schema.with_metadata(meta)


def write_frame(path, frame, *, kind: str, provenance: dict | None = None) -> Path:
    """Write a DataFrame (or a pyarrow Table, or a frame with ``to_arrow()`` such as the
    capture analysis's column frames) as Parquet atomically, with ``airlink.kind`` and
    ``airlink.provenance`` (JSON; default: the frame's ``attrs``) in the file metadata.
    Returns ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = frame if isinstance(frame, pa.Table) else frame.to_arrow() if hasattr(frame, "to_arrow") \
        else pa.Table.from_pandas(frame, preserve_index=False)
    if provenance is None:
        provenance = provenance_of(frame)
    table = table.replace_schema_metadata(_stamp(table.schema, kind=kind, provenance=provenance).metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


class FrameStreamWriter:
    """Write a Parquet artifact one row group at a time, atomically::

        with FrameStreamWriter(path, schema, kind="packets", provenance={...}) as w:
            for chunk in chunks:
                w.write(chunk)            # a DataFrame or a pyarrow Table of ``schema``

    The file appears under ``path`` only when the block ends without an error.
    ``use_dictionary``: pyarrow's option - True (every column tried) or the list of columns
    to dictionary-encode (the others skip the dictionary pass); ``write_statistics`` likewise
    (True, or the columns whose row groups get min/max statistics for readers' filters).
    ``background=True``: row groups are encoded and written by a thread of the writer's own
    (at most two waiting), so the caller makes the next chunk meanwhile - Parquet encoding
    runs in C without the GIL; an error there is raised by the next :meth:`write` or when
    the block ends."""

    def __init__(self, path, schema, *, kind: str, provenance: dict | None = None, use_dictionary=True,
                 write_statistics=True, background: bool = False):
        self.path = Path(path)
        self.schema = _stamp(schema, kind=kind, provenance=provenance)
        self.use_dictionary = use_dictionary
        self.write_statistics = write_statistics
        self.background = background
        self._cm = None
        self._writer = None
        self._queue = self._thread = self._error = None

    def __enter__(self):
        import pyarrow.parquet as pq
        self._cm = atomic_path(self.path)
        tmp = self._cm.__enter__()
        self._writer = pq.ParquetWriter(tmp, self.schema, use_dictionary=self.use_dictionary,
                                        write_statistics=self.write_statistics)
        if self.background:
            import queue
            import threading
            self._queue = queue.Queue(maxsize=2)
            self._thread = threading.Thread(target=self._drain, name="airlink-parquet-writer", daemon=True)
            self._thread.start()
        return self

    def write(self, chunk) -> None:
        import pyarrow as pa
        table = chunk if isinstance(chunk, pa.Table) else pa.Table.from_pandas(
            chunk, schema=self.schema, preserve_index=False)
        table = table.cast(self.schema) if table.schema != self.schema else table
        if self._thread is None:
            self._writer.write_table(table)
            return
        if self._error is not None:
            raise self._error
        self._queue.put(table)

    def _drain(self) -> None:
        """The background thread: write each queued table until None (after an error, the
        rest is taken and dropped, so a writer never waits on a full queue)."""
        while True:
            table = self._queue.get()
            if table is None:
                return
            if self._error is None:
                try:
                    self._writer.write_table(table)
                except BaseException as exc:        # raised in the caller's thread
                    self._error = exc

    def __exit__(self, exc_type, exc, tb):
        own = None                 # the writer's own error, when the block itself raised none
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            own = self._error if exc_type is None else None
        try:
            self._writer.close()
        except BaseException as err:
            own = err if exc_type is None and own is None else own
        if own is not None:        # the file is then discarded like after the block's own error
            exc_type, exc, tb = type(own), own, own.__traceback__
        if self._cm.__exit__(exc_type, exc, tb):
            return True
        if own is not None:
            raise own
        return False


# ---------------------------------------------------------------------------- reading
def kind_of(path) -> str | None:
    """The ``airlink.kind`` of a Parquet file (older files: the ``kind`` in the ``airlink``
    JSON), or None. Reads the footer only."""
    import pyarrow.parquet as pq
    try:
        meta = pq.read_schema(path).metadata or {}
    except Exception:
        return None
    if KIND_KEY in meta:
        return meta[KIND_KEY].decode()
    try:
        kind = json.loads(meta.get(b"airlink", b"{}")).get("kind")
    except (ValueError, AttributeError):
        return None
    return {"trace": "capacity"}.get(kind, kind)


def read_manifest(folder) -> dict | None:
    """The manifest of a run folder, or None when it has none (or it is not readable)."""
    p = Path(folder) / MANIFEST
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_complete(folder) -> bool:
    """True when the folder's manifest says the run finished."""
    doc = read_manifest(folder)
    return bool(doc) and doc.get("status") == "finished"


# ---------------------------------------------------------------------------- the folder
class RunFolder:
    """One run's output folder: creates it (refusing a non-empty one unless ``overwrite``),
    records what the run writes in ``manifest.json``, and finds artifacts by kind."""

    def __init__(self, path):
        self.path = Path(path)
        self.created: list = []        # files and folders this run created (relative paths)
        self.artifacts: dict = {}      # relative path -> {"kind", "stage"}
        self.status = "running"
        self.started = utc_now_iso()
        self._created_abs: list = []   # absolute paths of the folders this run made

    # -- opening --------------------------------------------------------------------
    @classmethod
    def create(cls, path, *, overwrite: bool = False) -> "RunFolder":
        """Make the output folder for a new run. An existing non-empty folder is an error
        unless ``overwrite``; then the artifacts its manifest lists are removed and every
        other file stays."""
        rf = cls(path)
        p = rf.path
        if p.exists() and not p.is_dir():
            raise AirlinkError(f"{p}: exists and is not a folder")
        if p.exists() and any(p.iterdir()):
            if not overwrite:
                raise FolderNotEmptyError(f"{p}: output folder exists and is not empty (choose another "
                                          "folder, or overwrite the earlier run's artifacts)")
            rf._remove_previous()
        rf.mkdir(p)
        rf.write_manifest()
        return rf

    def _remove_previous(self) -> None:
        doc = read_manifest(self.path) or {}
        entries = doc.get("artifacts") or []
        dirs = set()
        for e in entries:
            rel = e.get("path") if isinstance(e, dict) else None
            if not rel or rel.startswith("/") or ".." in Path(rel).parts:
                continue
            target = self.path / rel
            if target.is_file() or target.is_symlink():
                target.unlink()
            for parent in Path(rel).parents:
                if str(parent) != ".":
                    dirs.add(parent)
        for d in sorted(dirs, key=lambda x: -len(x.parts)):
            with contextlib.suppress(OSError):
                (self.path / d).rmdir()  # only when empty: foreign files keep their folder
        for stale in self.path.glob(f"**/*{PARTIAL_SUFFIX}"):
            with contextlib.suppress(OSError):
                stale.unlink()
        with contextlib.suppress(OSError):
            (self.path / MANIFEST).unlink()

    # -- making things --------------------------------------------------------------
    def rel(self, path) -> str:
        return Path(path).resolve().relative_to(self.path.resolve()).as_posix()

    def file(self, name) -> Path:
        """Absolute path of an artifact name (``capture/inside.pcap``); makes its folder."""
        p = self.path / name
        self.mkdir(p.parent)
        return p

    def mkdir(self, folder) -> Path:
        """Make ``folder`` and its missing parents, remembering each one made (they are this
        run's, so their owner changes under sudo)."""
        folder = Path(folder)
        if not folder.exists():
            missing = []
            q = folder
            while not q.exists():
                missing.append(q)
                q = q.parent
            folder.mkdir(parents=True, exist_ok=True)
            self._created_abs += list(reversed(missing))
        return folder

    def record(self, path, *, stage: str | None = None, kind: str | None = None) -> Path:
        """Add an existing file to the manifest (kind and stage from :data:`ARTIFACTS`)."""
        path = Path(path)
        rel = self.rel(path)
        decl = declared(rel)
        self.artifacts[rel] = {"kind": kind or (decl.kind if decl else "other"),
                               "stage": stage or (decl.stage if decl else "run")}
        return path

    def record_tree(self, folder, *, stage: str) -> None:
        """Record every file under ``folder`` (one this run created)."""
        for p in sorted(Path(folder).rglob("*")):
            if p.is_file() and not p.name.endswith(PARTIAL_SUFFIX):
                self.record(p, stage=stage)

    def write_frame(self, name, frame, *, kind: str | None = None, stage: str | None = None,
                    provenance: dict | None = None) -> Path:
        decl = declared(name)
        kind = kind or (decl.kind if decl else None)
        if kind is None:
            raise AirlinkError(f"{name}: not a declared artifact; give its kind")
        p = write_frame(self.file(name), frame, kind=kind, provenance=provenance)
        return self.record(p, stage=stage, kind=kind)

    def write_text(self, name, text: str, *, stage: str | None = None) -> Path:
        return self.record(write_text(self.file(name), text), stage=stage)

    def write_json(self, name, obj, *, stage: str | None = None) -> Path:
        return self.record(write_json(self.file(name), obj), stage=stage)

    @contextlib.contextmanager
    def staging(self, *, stage: str):
        """A fresh temporary folder inside the run folder for a writer that makes several
        files at once (the simulator); on success each file is renamed into the run folder
        and recorded, on error the folder is removed."""
        import shutil
        tmp = partial_path(self.path / f".{stage}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            yield tmp
            for p in sorted(tmp.rglob("*")):
                if p.is_file():
                    dest = self.file(p.relative_to(tmp))
                    os.replace(p, dest)
                    self.record(dest, stage=stage)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- the manifest ---------------------------------------------------------------
    def manifest(self) -> dict:
        doc = {"format": MANIFEST_FORMAT, "status": self.status, "started": self.started,
               "artifacts": [{"path": k, **v} for k, v in sorted(self.artifacts.items())]}
        if self.status != "running":
            doc["ended"] = utc_now_iso()
        return doc

    def write_manifest(self) -> None:
        write_json(self.path / MANIFEST, self.manifest())

    def finish(self, status: str = "finished") -> None:
        if status not in STATUSES:
            raise AirlinkError(f"run status {status!r}: one of {', '.join(STATUSES)}")
        self.status = status
        self.write_manifest()

    # -- ownership ------------------------------------------------------------------
    def give_to_sudo_user(self, environ=None) -> list:
        """Under sudo (euid 0 and ``SUDO_UID`` set), give what this run created - the
        folders it made and the artifacts in its manifest - to the user who ran sudo.
        Files that were in the folder before are never touched. Returns the paths changed."""
        env = os.environ if environ is None else environ
        uid, gid = env.get("SUDO_UID"), env.get("SUDO_GID")
        if not uid or os.geteuid() != 0:
            return []
        try:
            uid_i, gid_i = int(uid), int(gid or uid)
        except ValueError:
            return []
        paths = list(self._created_abs) + [self.path / r for r in self.artifacts] + [self.path / MANIFEST]
        done = []
        for p in paths:
            with contextlib.suppress(OSError):
                os.chown(p, uid_i, gid_i, follow_symlinks=False)
                done.append(p)
        return done

    # -- finding --------------------------------------------------------------------
    def find(self, kind: str) -> list:
        """Paths of the artifacts of ``kind`` (see :func:`find`)."""
        return find(self.path, kind)


def find(folder, kind: str) -> list:
    """Artifacts of ``kind`` in a run folder, preferred first: from the manifest when there
    is one, else by the declared name patterns (Parquet files are checked against their
    ``airlink.kind`` when they carry one)."""
    folder = Path(folder)
    doc = read_manifest(folder)
    if doc and doc.get("artifacts"):
        listed = [folder / e["path"] for e in doc["artifacts"]
                  if isinstance(e, dict) and e.get("kind") == kind and (folder / e["path"]).exists()]
        return sorted(listed, key=lambda p: _order(folder, p))
    out = []
    for a in ARTIFACTS:
        if a.kind != kind:
            continue
        for p in sorted(folder.glob(a.pattern)):
            if p in out or not p.is_file() or p.name.endswith(PARTIAL_SUFFIX):
                continue
            if declared(p.relative_to(folder).as_posix()).kind != kind:
                continue
            if a.format == "parquet":
                k = kind_of(p)
                if k is not None and k != kind:
                    continue
            out.append(p)
    return out


def _order(folder: Path, p: Path) -> tuple:
    rel = p.relative_to(folder).as_posix()
    for i, a in enumerate(ARTIFACTS):
        if fnmatch.fnmatchcase(rel, a.pattern):
            return (i, rel)
    return (len(ARTIFACTS), rel)


__all__ = ["ARTIFACTS", "Artifact", "FolderNotEmptyError", "MANIFEST", "PARTIAL_SUFFIX", "RunFolder", "FrameStreamWriter",
           "atomic_path", "commit", "declared", "find", "is_complete", "kind_of", "read_manifest",
           "write_frame", "write_json", "write_text", "partial_path", "provenance_of",
           "json_default"]
