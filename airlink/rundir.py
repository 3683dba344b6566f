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
  (``<name>.partial``, :mod:`airlink.core.atomic`, the one implementation the shells'
  logs use too) and renamed into place, so an interrupted writer never leaves a file under
  the final name (:func:`atomic_path`, :func:`write_frame`, :func:`write_text`,
  :class:`FrameStreamWriter` for row groups).
* Safety under ``sudo`` - the folder is taken by :func:`claim_output` (resolved once,
  made folder by folder, locked, refused when not empty) - the one way ``run``, ``simulate``,
  ``collect`` and ``sweep`` take theirs. A non-empty folder is refused unless ``overwrite`` is
  given and it holds an earlier run's manifest; then only the artifacts that manifest lists
  are removed, never through a symbolic link (:mod:`airlink.outfolder`). What was in the
  folder before the run is :attr:`RunFolder.foreign`: never replaced, recorded, given away or
  removed. :meth:`RunFolder.give_to_sudo_user` changes the owner of what this run created
  and of nothing else. The manifest names the process that writes it, so a ``running``
  manifest whose process is gone reads as ``interrupted`` (:func:`run_state`).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path

from airlink.outfolder import (FolderBusyError, FolderLock, FolderNotEmptyError, chown_beneath, is_empty, is_locked,
                               make_folders, process_gone, process_identity, relative_parts, remove_made,
                               resolve_output, rmdir_beneath, unlink_beneath, walk_files)
from airlink.core.atomic import PARTIAL_SUFFIX, atomic_path, commit, create_partial, partial_path, write_text
from airlink.core.errors import AirlinkError

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "airlink-run/1"
KIND_KEY = b"airlink.kind"
PROVENANCE_KEY = b"airlink.provenance"
STATUSES = ("running", "finished", "failed")


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
    Artifact("*.throughput.parquet", "throughput", "parquet", "collect",
             "airlink collect: iperf3 interval reports, per interval and stream"),
    Artifact("*.transfers.parquet", "transfers", "parquet", "collect", "airlink collect: one row per transfer"),
    Artifact("collect.json", "collect-summary", "json", "collect", "per capture: flows and counts"),
    Artifact("nmi.json", "nmi", "json", "infer", "NMI factor rankings with curves"),
    Artifact("report.html", "report", "html", "report", "the report page"),
)

#: kinds a collect stage writes, with the file-name part (``<stem>.<part>.parquet`` for
#: ``airlink collect``, ``<prefix><part>.parquet`` in a run folder)
COLLECT_KINDS = {"packets": "packets", "flows": "flows", "tcp": "tcp", "tcp-events": "events"}


def collected_name(stem: str, kind: str) -> str:
    """The file ``airlink collect`` writes for a frame of ``kind`` read from input ``stem``:
    ``<stem>.<part>.parquet``, part from :data:`COLLECT_KINDS` else the kind itself
    (``data.mac.parquet``) - the names :data:`ARTIFACTS` declares as ``*.<part>.parquet``."""
    return f"{stem}.{COLLECT_KINDS.get(kind, kind)}.parquet"


def patterns(kind: str) -> list:
    """The declared file-name patterns of ``kind``, preferred first (for messages naming
    what a reader looked for)."""
    return [a.pattern for a in ARTIFACTS if a.kind == kind]


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
# atomic_path, write_text, partial_path, commit: airlink.core.atomic (re-exported here)


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
    meta.setdefault(b"airlink", prov)  # the provenance key every airlink version's readers look up
    return schema.with_metadata(meta)


def write_frame(path, frame, *, kind: str, provenance: dict | None = None, use_dictionary=True,
                write_statistics=True) -> Path:
    """Write a DataFrame (or a pyarrow Table, or a frame with ``to_arrow()`` such as the
    capture analysis's column frames) as Parquet atomically, with ``airlink.kind`` and
    ``airlink.provenance`` (JSON; default: the frame's ``attrs``) in the file metadata.
    ``use_dictionary``, ``write_statistics``: True (every column) or the names of the
    columns to dictionary-encode / to keep row-group min/max statistics of, as pyarrow's
    options (names the frame lacks are ignored). They change the file's encoding, never the
    table read back. Returns ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = frame if isinstance(frame, pa.Table) else frame.to_arrow() if hasattr(frame, "to_arrow") \
        else pa.Table.from_pandas(frame, preserve_index=False)
    if provenance is None:
        provenance = provenance_of(frame)
    table = table.replace_schema_metadata(_stamp(table.schema, kind=kind, provenance=provenance).metadata)
    names = set(table.column_names)
    use_dictionary, write_statistics = (opt if isinstance(opt, bool) else [c for c in opt if c in names]
                                        for opt in (use_dictionary, write_statistics))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, use_dictionary=use_dictionary, write_statistics=write_statistics)
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
def run_state(folder) -> str | None:
    """What the manifest of ``folder`` says, made true: ``finished``, ``failed``, ``running``
    (its writer still works), ``interrupted`` (the manifest says running, but the process that
    wrote it is gone - killed, or the machine rebooted) or None (no readable manifest)."""
    doc = read_manifest(folder)
    if doc is None:
        return None
    status = doc.get("status")
    if status != "running":
        return status if status in STATUSES else None
    gone = process_gone(doc.get("process"))
    if gone is None:                 # no identity (an older manifest) or another host: the lock tells
        gone = not is_locked(folder)
    return "interrupted" if gone else "running"


def interrupted_note(folder) -> str | None:
    """One line saying that the run in ``folder`` was interrupted, or None."""
    if run_state(folder) != "interrupted":
        return None
    pid = ((read_manifest(folder) or {}).get("process") or {}).get("pid")
    who = f"its process {pid} is gone" if pid else "no process is writing it"
    return (f"{folder}: the run was interrupted ({MANIFEST} says running but {who}); "
            "its artifacts are incomplete")


def claim_output(path, *, accept=None, busy: str = "another airlink process is writing into this folder"):
    """The one way a command takes an output folder (``run``, ``simulate``, ``collect``,
    ``sweep``): resolve ``path`` once (:func:`airlink.outfolder.resolve_output`), make what is
    missing (remembering what was made), lock it (:class:`~airlink.outfolder.FolderLock`;
    ``busy`` says why when another process holds it) and refuse it when it is not empty -
    unless ``accept(folder)`` returns None (else the reason, after "output folder").
    Returns ``(folder, made, lock)``; on a refusal nothing is left changed."""
    folder = resolve_output(path)
    if os.path.lexists(folder) and not folder.is_dir():
        raise AirlinkError(f"{folder}: exists and is not a folder")
    made = make_folders(folder)
    try:
        lock = FolderLock(folder, busy=busy)
    except BaseException:
        remove_made(made)
        raise
    try:
        if not is_empty(folder):
            why = "exists and is not empty" if accept is None else accept(folder)
            if why:
                raise FolderNotEmptyError(f"{folder}: output folder {why}")
    except BaseException:
        lock.release()
        remove_made(made)
        raise
    return folder, made, lock


class RunFolder:
    """One run's output folder: takes it (:func:`claim_output`: resolved, made, locked,
    refused when not empty unless ``overwrite`` and it holds an earlier run's manifest),
    records what the run writes in ``manifest.json``, and finds artifacts by kind.

    What was in the folder before the run (after ``overwrite`` removed the earlier run's
    artifacts) is :attr:`foreign`: never replaced (:meth:`file`, :meth:`claim`), never
    recorded, never given to the ``sudo`` user, never removed."""

    def __init__(self, path):
        self.path = resolve_output(path)
        self.artifacts: dict = {}      # relative path -> {"kind", "stage"[, "complete": False]}
        self.status = "running"
        self.started = utc_now_iso()
        self.process = process_identity()
        self.foreign: set = set()      # relative paths of files that were there before the run
        self.previous: str | None = None   # what the folder held: an earlier run's state
        self._created_abs: list = []   # absolute paths of the folders this run made
        self._lock: FolderLock | None = None

    # -- opening --------------------------------------------------------------------
    @classmethod
    def create(cls, path, *, overwrite: bool = False, manifest: bool = True) -> "RunFolder":
        """Take the output folder for a new run. A non-empty folder is an error
        (:class:`FolderNotEmptyError`) unless ``overwrite`` and it holds an earlier run's
        ``manifest.json``; then the artifacts that manifest lists are removed (never through a
        symbolic link) and every other file stays. A folder another process is writing is an
        error (:class:`FolderBusyError`). ``manifest``: write the ``running`` manifest now
        (a command whose failure should leave no file writes it only at :meth:`finish`)."""
        rf = cls(path)

        def accept(folder):
            if not overwrite:
                return ("exists and is not empty (choose another folder, or overwrite the earlier "
                        "run's artifacts)")
            state = run_state(folder)
            if state is None:
                return (f"is not empty and holds no readable {MANIFEST}: not an airlink run folder, "
                        "so nothing in it is replaced (choose another folder)")
            rf.previous = state
            return None

        rf.path, made, rf._lock = claim_output(
            rf.path, accept=accept, busy="another airlink run is writing into this folder (wait for it "
                                         "to end, or choose another folder)")
        rf._created_abs = made
        try:
            if rf.previous is not None:
                rf._remove_previous()
            rf.foreign = set(walk_files(rf._lock.fd))
            if manifest:
                rf.write_manifest()
        except BaseException:
            rf.release()
            raise
        return rf

    def _remove_previous(self) -> None:
        """Remove the artifacts of the earlier run's manifest (entries that are absolute, have
        ``..`` or lead through a symbolic link name nothing here), their folders when that
        leaves them empty, the ``.partial`` files of declared artifacts an interrupted run
        left, and the manifest."""
        fd = self._lock.fd
        doc = read_manifest(self.path) or {}
        dirs = set()
        for e in doc.get("artifacts") or []:
            rel = e.get("path") if isinstance(e, dict) else None
            parts = relative_parts(rel)
            if parts is None:
                continue
            unlink_beneath(fd, rel)
            dirs.update("/".join(parts[:k]) for k in range(1, len(parts)))
        if self.previous == "interrupted":      # killed before it could list its partial files
            for rel in list(walk_files(fd)):
                if rel.endswith(PARTIAL_SUFFIX) and declared(rel[:-len(PARTIAL_SUFFIX)]) is not None:
                    unlink_beneath(fd, rel)
        for d in sorted(dirs, key=lambda x: -x.count("/")):
            rmdir_beneath(fd, d)        # only when empty: foreign files keep their folder
        unlink_beneath(fd, MANIFEST)

    def release(self) -> None:
        """Let go of the folder's lock (another run may then take it)."""
        if self._lock is not None:
            self._lock.release()

    def abandon(self) -> None:
        """For a command that writes its manifest only when it succeeds (:meth:`create` with
        ``manifest=False``) and failed: the folders it made that are still empty are removed
        (deepest first, ``rmdir`` only: a folder holding anything stays, given to the sudo
        user), nothing is listed, the folder is released."""
        try:
            for folder in reversed(self._created_abs):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            self.give_to_sudo_user()
        finally:
            self.release()

    @contextlib.contextmanager
    def writing(self, *, sudo: bool = True):
        """``with folder.writing(): ...`` - the block's outputs, then :meth:`finish` and (with
        ``sudo``) :meth:`give_to_sudo_user` when it succeeds, :meth:`abandon` when it raises
        (what was written is left unlisted; the atomic writers left no complete-looking file)."""
        try:
            yield self
        except BaseException:
            self.abandon()
            raise
        try:
            self.finish("finished")
            if sudo:
                self.give_to_sudo_user()
        finally:
            self.release()

    # -- making things --------------------------------------------------------------
    def rel(self, path) -> str:
        """``path`` relative to the run folder (POSIX); an AirlinkError when it leads out."""
        real = resolve_output(path)
        try:
            return real.relative_to(self.path).as_posix()
        except ValueError:
            raise AirlinkError(f"{path}: not inside the run folder {self.path} (a symbolic link "
                               "out of it?); airlink writes only inside its run folder") from None

    def claim(self, *names) -> None:
        """Refuse (AirlinkError) when one of ``names`` (relative paths an artifact will be
        written under, by this process or a child), or its ``.partial``, was in the folder
        before the run or leads out of it."""
        for name in names:
            p = self.path / name
            rel = self.rel(p.parent)
            rel = p.name if rel == "." else f"{rel}/{p.name}"
            for r in (rel, rel + PARTIAL_SUFFIX):
                if r in self.foreign:
                    raise AirlinkError(f"{self.path / r}: was in the run folder before this run (not "
                                       "airlink's); it is not replaced - move it away or choose "
                                       "another folder")

    def file(self, name) -> Path:
        """Absolute path of an artifact name (``capture/inside.pcap``); makes its folder.
        Refused when a file of that name was there before the run (:meth:`claim`)."""
        p = self.path / name
        self.mkdir(p.parent)
        self.claim(name)
        return p

    def mkdir(self, folder) -> Path:
        """Make ``folder`` (inside the run folder) and its missing parents, remembering each
        one made (they are this run's, so their owner changes under sudo)."""
        folder = Path(folder)
        self.rel(folder)
        self._created_abs += make_folders(resolve_output(folder))
        self.rel(folder)             # a link put there meanwhile is refused as well
        return folder

    def record(self, path, *, stage: str | None = None, kind: str | None = None,
               complete: bool = True) -> Path:
        """Add a file this run wrote to the manifest (kind and stage from :data:`ARTIFACTS`);
        ``complete=False`` lists a ``.partial`` file an interrupted writer left. A file that
        was in the folder before the run is never recorded (AirlinkError)."""
        path = Path(path)
        rel = self.rel(path.parent)
        rel = path.name if rel == "." else f"{rel}/{path.name}"
        if rel in self.foreign:
            raise AirlinkError(f"{self.path / rel}: was in the run folder before this run; not "
                               "recorded as the run's")
        decl = declared(rel[:-len(PARTIAL_SUFFIX)] if not complete and rel.endswith(PARTIAL_SUFFIX) else rel)
        entry = {"kind": kind or (decl.kind if decl else "other"),
                 "stage": stage or (decl.stage if decl else "run")}
        if not complete:
            entry["complete"] = False
        self.artifacts[rel] = entry
        return path

    def record_if_exists(self, names, *, stage: str) -> list:
        """Record those of ``names`` (relative paths this run's stage - or a process it started
        - writes) that exist as files now; returns them."""
        done = []
        for name in names:
            p = self.path / name
            if p.is_file() and not p.is_symlink():
                self.record(p, stage=stage)
                done.append(name)
        return done

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
        """A fresh temporary folder inside the run folder (made exclusively, a name no other
        file has) for a writer that makes several files at once (the simulator); on success
        each file is renamed into the run folder and recorded, on error the folder is removed."""
        import shutil
        import tempfile
        tmp = Path(tempfile.mkdtemp(prefix=f".{stage}-", suffix=PARTIAL_SUFFIX, dir=self.path))
        try:
            yield tmp
            for p in sorted(tmp.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    dest = self.file(p.relative_to(tmp))
                    os.replace(p, dest)
                    self.record(dest, stage=stage)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def partial_outputs(self) -> list:
        """Relative paths of the ``.partial`` files of declared artifacts in the folder now
        that were not there before the run (what an interrupted writer left)."""
        if self._lock is None or self._lock.fd is None:
            return []
        return [rel for rel in walk_files(self._lock.fd)
                if rel.endswith(PARTIAL_SUFFIX) and rel not in self.foreign
                and declared(rel[:-len(PARTIAL_SUFFIX)]) is not None]

    # -- the manifest ---------------------------------------------------------------
    def manifest(self) -> dict:
        doc = {"format": MANIFEST_FORMAT, "status": self.status, "started": self.started,
               "process": self.process,
               "artifacts": [{"path": k, **v} for k, v in sorted(self.artifacts.items())]}
        if self.status != "running":
            doc["ended"] = utc_now_iso()
        return doc

    def write_manifest(self) -> None:
        write_json(self.path / MANIFEST, self.manifest())

    def finish(self, status: str = "finished") -> None:
        """Write the final manifest (``status``: finished or failed) and release the folder.
        A failed run lists the ``.partial`` files its writers left, as ``"complete": false``
        (so they are its own: given to the sudo user, removed by the next ``overwrite``)."""
        if status not in STATUSES:
            raise AirlinkError(f"run status {status!r}: one of {', '.join(STATUSES)}")
        self.status = status
        if status == "failed":
            for rel in self.partial_outputs():
                self.record(self.path / rel, complete=False)
        self.write_manifest()

    # -- ownership ------------------------------------------------------------------
    def give_to_sudo_user(self, environ=None) -> list:
        """Under sudo (euid 0 and ``SUDO_UID`` set), give what this run created - the
        folders it made and the artifacts in its manifest - to the user who ran sudo.
        Files that were in the folder before are never touched; inside the folder, no
        symbolic link is followed (:func:`airlink.outfolder.chown_beneath`). Returns the
        paths changed."""
        env = os.environ if environ is None else environ
        uid, gid = env.get("SUDO_UID"), env.get("SUDO_GID")
        if not uid or os.geteuid() != 0:
            return []
        try:
            uid_i, gid_i = int(uid), int(gid or uid)
        except ValueError:
            return []
        done = []
        fd = self._lock.fd if self._lock is not None else None
        own_fd = fd is None
        if own_fd:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                return []
        try:
            for p in self._created_abs:
                if p == self.path:
                    rel = "."
                elif self.path in p.parents:
                    rel = p.relative_to(self.path).as_posix()
                else:                       # a parent of the run folder this run made
                    with contextlib.suppress(OSError):
                        os.chown(p, uid_i, gid_i, follow_symlinks=False)
                        done.append(p)
                    continue
                if chown_beneath(fd, rel, uid_i, gid_i):
                    done.append(p)
            for rel in [*self.artifacts, MANIFEST]:
                if rel not in self.foreign and chown_beneath(fd, rel, uid_i, gid_i):
                    done.append(self.path / rel)
        finally:
            if own_fd:
                os.close(fd)
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


__all__ = ["ARTIFACTS", "Artifact", "FolderBusyError", "FolderNotEmptyError", "MANIFEST", "claim_output",
           "create_partial", "interrupted_note", "run_state", "PARTIAL_SUFFIX", "RunFolder", "FrameStreamWriter",
           "atomic_path", "commit", "declared", "find", "is_complete", "kind_of", "read_manifest",
           "write_frame", "write_json", "write_text", "partial_path", "provenance_of",
           "json_default"]
