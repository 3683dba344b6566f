"""Trace data model, frame schemas, and the Mahimahi trace and link-log formats.

It imports only airlink.core from airlink; every other package may import it.

Main entry points::

    from airlink.traces import Trace, read_trace, write_trace, validate
    tr = read_trace("TMobile-LTE-short.down")          # Mahimahi text -> 1 ms capacity Trace
    tr.write_parquet("tmobile.parquet")                # keeps TTI and provenance
    write_trace(tr, "copy.down")                       # byte-identical Mahimahi text
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from airlink.core.errors import AirlinkError, FormatError, SchemaError
from airlink.core.lazy import lazy_names

if TYPE_CHECKING:  # the annotations name it; importing it at run time would load the trace module
    from .trace import Trace

TRACE_FORMATS = ("mahimahi", "parquet")

# Public names load on first use (PEP 562): importing the package, or only its errors (as
# every `airlink` command does), does not import numpy or pandas (~0.3 s).
_LAZY = {name: (module, name) for module, names in {
    "cellreplay": ("CellReplayTraces", "read_cellreplay", "write_cellreplay"),
    "fromlog": ("Comparison", "GAP_RULES", "compare", "from_log", "from_log_sessions", "measured_ttis",
                "split_sessions"),
    "mmlinklog": ("LinkLogWriter", "per_ms", "read_log", "write_log"),
    "airlink.core.schema": ("KINDS", "columns", "kinds", "validate"),
    "trace": ("Trace", "constant", "jsonable", "split_long_ttis"),
    "airlink.core.units": ("DEFAULT_OPPORTUNITY_BYTES", "format_rate", "parse_duration", "parse_rate",
              "parse_size", "parse_tti"),
}.items() for name in names}

__all__ = [
    "AirlinkError", "FormatError", "SchemaError", "Trace", "constant", "jsonable", "read_trace",
    "write_trace", "detect_format", "read_log", "write_log", "LinkLogWriter", "per_ms",
    "validate", "kinds", "columns", "KINDS", "parse_rate", "parse_duration", "parse_size",
    "parse_tti", "format_rate", "DEFAULT_OPPORTUNITY_BYTES", "example_path",
    "from_log", "compare", "Comparison", "measured_ttis", "split_long_ttis", "split_sessions", "from_log_sessions",
    "CellReplayTraces", "read_cellreplay", "write_cellreplay",
]

__getattr__, __dir__ = lazy_names(__name__, _LAZY, submodules=("mahimahi", "cellreplay"))


def detect_format(path, fmt: str | None = None) -> str:
    """``mahimahi``, ``parquet``, ``linklog`` or ``cellreplay`` (a folder holding a CellReplay
    trace set) for ``path``: the given one, else by extension (``.parquet``/``.pq``;
    ``.log``), else by content."""
    p = Path(path)
    if fmt in (None, "cellreplay") and p.is_dir():
        from .cellreplay import is_cellreplay_set
        if is_cellreplay_set(p):
            return "cellreplay"
    if p.exists() and not p.is_file():      # a FIFO or a device would block the sniffing, or never end
        raise AirlinkError(f"{p}: {'is a directory' if p.is_dir() else 'not a regular file'}")
    if fmt:
        if fmt not in TRACE_FORMATS + ("linklog",):
            raise AirlinkError(f"unknown trace format {fmt!r} (one of mahimahi, parquet, linklog)")
        return fmt
    if p.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    if p.exists():
        from . import mahimahi
        with open(p, "rb") as f:
            if f.read(4) == b"PAR1":
                return "parquet"
        if not mahimahi.is_trace_file(p):
            from .mmlinklog import is_log_file      # (imports pandas: only when not a trace)
            if is_log_file(p):
                return "linklog"
    return "mahimahi"


def read_trace(path, format: str | None = None, *, user=None,
               opportunity_bytes: int | None = None) -> Trace:
    """Read a capacity Trace from a Mahimahi trace file, an airlink Parquet trace or a
    CellReplay trace-set folder (its heavy trace: ``user`` ``downlink``, the default, or
    ``uplink``; see :func:`airlink.traces.cellreplay.heavy_trace`).

    ``user`` selects one user's column of a multi-user trace; ``opportunity_bytes`` is the
    bytes of one Mahimahi delivery opportunity (None: ``DEFAULT_OPPORTUNITY_BYTES``, 1500).
    """
    from . import mahimahi
    from .trace import Trace
    if opportunity_bytes is None:
        opportunity_bytes = mahimahi.DEFAULT_OPPORTUNITY_BYTES
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such file")
    fmt = detect_format(path, format)
    if fmt == "parquet":
        tr = Trace.read_parquet(path)
    elif fmt == "mahimahi":
        tr = mahimahi.read_trace(path, opportunity_bytes)
    elif fmt == "cellreplay":           # one direction's heavy trace; PDO_BYTES per opportunity
        from .cellreplay import heavy_trace, read_cellreplay
        return heavy_trace(read_cellreplay(path), "downlink" if user is None else user)
    else:
        raise AirlinkError(f"{path}: is a link log, not a trace (use read_log)")
    return tr.select(user) if user is not None else tr


def write_trace(trace: Trace, path, format: str | None = None, *, user=None,
                opportunity_bytes: int | None = None) -> Path:
    """Write a Trace as Parquet (all users) or Mahimahi text (one user, default the first);
    ``opportunity_bytes`` as in :func:`read_trace`."""
    from . import mahimahi
    if opportunity_bytes is None:
        opportunity_bytes = mahimahi.DEFAULT_OPPORTUNITY_BYTES
    path = Path(path)
    fmt = format or ("parquet" if path.suffix.lower() in (".parquet", ".pq") else "mahimahi")
    if fmt == "parquet":
        return (trace.select(user) if user is not None else trace).write_parquet(path)
    if fmt == "mahimahi":
        return mahimahi.write_trace(trace, path, user, opportunity_bytes)
    raise AirlinkError(f"cannot write a trace as {fmt!r} (mahimahi or parquet)")


def example_path(name: str = "") -> Path:
    """Path of a bundled example file (generated by airlink itself), or the folder."""
    folder = Path(__file__).parent / "examples"
    return folder / name if name else folder
