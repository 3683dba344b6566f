"""Collectors: packet captures and radio/MAC logs -> validated frames.

Main entry points::

    from airlink import collectors as C
    pk = C.read_pcap("capture.pcap")                 # packets frame (pcap/pcapng/.gz)
    a = C.analyze_tcp(pk, resolution="100ms")        # a.flows, a.series, a.events, a.summary()
    rf = C.read("ucc.csv")                           # any supported log, format sniffed
    mac = C.read_linklog("downlink.log")             # per-ms capacity/arrivals/departures/backlog
    grid = C.align({"tcp": a.series, "rf": rf}, resolution="1s")

Each reader is one module with ``is_format(path)`` (never raises) and ``read(path, ...)``;
:func:`read` tries them in :data:`READERS` order and, when none fits, names every reader it
tried and why.
"""
from __future__ import annotations

from pathlib import Path

from airlink.traces.errors import AirlinkError, FormatError

from ._capture import CaptureError
from .align import align, estimate_clock_offset
from .callrecords import read as read_callrecords
from .csvmap import read as read_csv
from .icellspeed import read as read_icellspeed
from .linklog import read as read_linklog
from .macparquet import read as read_mac
from .pcap import read as read_pcap
from .tcp import TcpAnalysis, analyze_tcp
from .ucc import read as read_ucc

__all__ = ["read", "read_pcap", "analyze_tcp", "TcpAnalysis", "CaptureError", "read_linklog",
           "read_ucc", "read_icellspeed", "read_csv", "read_mac", "read_callrecords", "align",
           "estimate_clock_offset", "READERS", "reader_names"]

# name -> module, in sniffing order (most specific first; the generic CSV reader last,
# and only when a mapping is given)
READERS = {"pcap": "pcap", "mac-parquet": "macparquet", "linklog": "linklog", "ucc": "ucc",
           "icellspeed": "icellspeed", "nrscope": "nrscope", "callrecords": "callrecords", "csv": "csvmap"}


def _module(name):
    import importlib
    return importlib.import_module(f"{__name__}.{READERS[name]}")


def reader_names() -> list:
    """Names accepted by ``read(..., format=...)``, in sniffing order."""
    return list(READERS)


def read(path, format: str | None = None, **kw):
    """Read any supported file into a frame, sniffing the format unless ``format`` is given.

    Keyword arguments go to the reader (e.g. ``salvage=True`` for captures, ``mapping=``
    for the generic CSV reader). On failure the message names every reader tried and why
    it declined.
    """
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such file")
    if path.is_dir():
        raise AirlinkError(f"{path}: is a directory")
    if format is not None:
        if format not in READERS:
            raise AirlinkError(f"unknown format {format!r} (one of {', '.join(READERS)})")
        return _module(format).read(path, **kw)
    if path.stat().st_size == 0:
        raise FormatError(f"{path}: empty file (0 bytes)")
    tried = []
    for name in READERS:
        if name == "csv" and kw.get("mapping") is None:
            tried.append("csv (needs a column mapping: mapping=... / --mapping M.yaml)")
            continue
        mod = _module(name)
        try:
            ok = mod.is_format(path)
        except Exception as exc:       # is_format must never raise; treat as a refusal
            ok = False
            tried.append(f"{name} ({type(exc).__name__}: {exc})")
            continue
        if ok:
            return mod.read(path, **kw)
        why = getattr(mod, "why_not", None)
        tried.append(f"{name} ({why(path) if why else 'not recognised'})")
    if path.name.lower().endswith(CAPTURE_SUFFIXES):
        return read_pcap(path, **kw)          # a damaged capture: let the pcap reader say where
    raise FormatError(f"{path}: no reader recognises this file; tried " + "; ".join(tried))


CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".dmp")
