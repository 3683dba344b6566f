"""Collectors: packet captures and radio/MAC logs -> validated frames.

Main entry points::

    from airlink import collectors as C
    pk = C.read_pcap("capture.pcap")                 # packets frame (pcap/pcapng/.gz)
    a = C.analyze_tcp(pk, resolution="100ms")        # a.flows, a.series, a.events, a.summary()
    C.collect_capture("capture.pcapng", "frames/")   # all of a capture's frames as Parquet, streamed
    rf = C.read("ucc.csv")                           # any supported log, format sniffed
    tp = C.read("client.json")                       # iperf3 -J -> throughput per interval and stream
    mac = C.read_linklog("downlink.log")             # per-ms capacity/arrivals/departures/backlog
    grid = C.align({"tcp": a.series, "rf": rf}, resolution="1s")

Each reader is one module with ``is_format(path)`` (never raises) and ``read(path, ...)``;
:func:`read` tries them in :data:`READERS` order and, when none fits, names every reader it
tried and why.

The modules, in three parts (each imports only the parts above it; no import cycles):

* capture reading - ``_capture`` (records in batches), ``_decode`` (headers to columns),
  ``_dpktlink``, ``_connections`` (the connection table), ``_timeorder`` (file order to
  time order), ``pcap`` (:func:`read_pcap`, the streamed packets frame), ``_feed``;
* TCP analysis - ``_tcparrays`` (grouped array primitives), ``_tcprules`` (the per-row
  rules, once), ``_tcpframes`` (the result and its frames), ``_tcpinput`` (narrow columns,
  census, flow groups), ``_tcpstream`` (the TCP engine: the rules over many flows, chunk
  after chunk, state carried), ``tcp`` (:func:`analyze_tcp`), ``collect`` (:func:`collect_capture`);
* radio/MAC log readers - one module per format (:data:`READERS`), ``csvmap``, ``_tabular``;
  shared: ``_columns`` (frames written without pandas), ``timegrid`` (the regular time grid;
  its ``align`` is ``collectors.align``).
"""
from __future__ import annotations

from pathlib import Path

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.lazy import lazy_names

# Public name -> (module, attribute), loaded on first use (PEP 562): `airlink collect` on a
# capture reaches the column reader without importing pandas (~0.3 s), which the analysis
# needs only to build its frames.
_LAZY = {"CaptureError": ("_capture", "CaptureError"), "align": ("timegrid", "align"),
         "estimate_clock_offset": ("timegrid", "estimate_clock_offset"),
         "read_callrecords": ("callrecords", "read"), "read_csv": ("csvmap", "read"),
         "read_icellspeed": ("icellspeed", "read"), "read_gnettrack": ("gnettrack", "read"),
         "read_5gtracker": ("fivegtracker", "read"),
         "read_throughput_trace": ("throughputtrace", "read"), "read_transfers": ("transfers", "read"),
         "read_xcal": ("xcal", "read"), "read_iperf3": ("iperf3", "read"),
         "read_linklog": ("linklog", "read"),
         "read_mac": ("macparquet", "read"), "read_pcap": ("pcap", "read"),
         "TcpAnalysis": ("tcp", "TcpAnalysis"), "analyze_tcp": ("tcp", "analyze_tcp"),
         "read_ucc": ("ucc", "read"), "collect_capture": ("collect", "collect_capture"), "check_table_shape": ("_tabular", "check_table_shape")}
_SUBMODULES = {"callrecords", "collect", "csvmap", "fivegtracker", "gnettrack", "icellspeed", "iperf3", "linklog",
               "macparquet", "nrscope", "pcap", "tcp", "throughputtrace", "timegrid", "transfers", "ucc", "xcal"}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, _SUBMODULES)




__all__ = ["read", "read_pcap", "analyze_tcp", "TcpAnalysis", "collect_capture", "CaptureError", "read_linklog",
           "read_ucc", "read_gnettrack", "read_5gtracker", "read_icellspeed", "read_iperf3", "read_throughput_trace",
           "read_transfers", "read_xcal", "read_csv", "read_mac", "read_callrecords", "align",
           "estimate_clock_offset", "check_table_shape", "READERS", "reader_names", "reader_options"]

# name -> module, in sniffing order (most specific first; the generic CSV reader last,
# and only when a mapping is given)
READERS = {"pcap": "pcap", "mac-parquet": "macparquet", "iperf3": "iperf3", "linklog": "linklog",
           "ucc": "ucc", "gnettrack": "gnettrack", "5gtracker": "fivegtracker", "icellspeed": "icellspeed",
           "nrscope": "nrscope",
           "callrecords": "callrecords", "xcal": "xcal", "transfers": "transfers",
           "throughput-trace": "throughputtrace", "csv": "csvmap"}


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
    if kw:
        _check_options(kw, format)
    if not path.exists():
        raise AirlinkError(f"{path}: no such file")
    if path.is_dir():
        raise AirlinkError(f"{path}: is a directory")
    if not path.is_file():          # a FIFO or a device: reading it could block or never end
        raise AirlinkError(f"{path}: not a regular file")
    if format is not None:
        if format not in READERS:
            raise AirlinkError(f"unknown format {format!r} (one of {', '.join(READERS)})")
        return _module(format).read(path, **_options_of(format, kw))
    if path.stat().st_size == 0:
        raise FormatError(f"{path}: empty file (0 bytes)")
    tried = []
    for name in READERS:
        if name == "csv" and kw.get("mapping") is None:
            tried.append("csv (needs a column mapping)")
            continue
        mod = _module(name)
        try:
            ok = mod.is_format(path)
        except Exception as exc:       # is_format must never raise; treat as a refusal
            ok = False
            tried.append(f"{name} ({type(exc).__name__}: {exc})")
            continue
        if ok:
            return mod.read(path, **_options_of(name, kw))
        why = getattr(mod, "why_not", None)
        tried.append(f"{name} ({why(path) if why else 'not recognised'})")
    if path.name.lower().endswith(CAPTURE_SUFFIXES):
        return _module("pcap").read(path, **_options_of("pcap", kw))   # a damaged capture: the pcap reader says where
    raise FormatError(f"{path}: no reader recognises this file; tried " + "; ".join(tried) + _replay_input_hint(path))


def _replay_input_hint(path: Path) -> str:
    """A note when ``path`` is a replay input rather than a measurement: one file of a
    CellReplay trace set, or a Mahimahi packet-delivery trace."""
    from airlink.traces.cellreplay import FILE_NAMES, is_cellreplay_set
    from airlink.traces.mahimahi import is_trace_file
    if path.name in FILE_NAMES.values() and is_cellreplay_set(path.parent):
        return (f"; {path.name} is one file of the CellReplay trace set {path.parent}: a replay input, "
                "read as a whole folder (airlink.traces.read_cellreplay, or as a capacity trace by read_trace)")
    if is_trace_file(path):
        return (f"; {path.name} looks like a Mahimahi packet-delivery trace (one millisecond timestamp per "
                "line): a capacity trace, not a measurement - `airlink trace info` summarises it, "
                "`airlink trace convert` turns it into airlink Parquet, `airlink link` replays it")
    return ""


def _accepted(name: str) -> set:
    """Keyword options of reader ``name``'s ``read`` (none is swallowed by ``**kw``)."""
    import inspect
    params = inspect.signature(_module(name).read).parameters.values()
    return {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "path"}


def _check_options(kw: dict, format) -> None:
    """A misspelled or foreign option is an error, never silently ignored.

    With ``format`` given, every option must be that reader's; when the format is sniffed,
    every option must be some reader's (options of the other formats are then unused).
    """
    names = [format] if format in READERS else list(READERS)
    known = set().union(*(_accepted(n) for n in names))
    unknown = sorted(set(kw) - known)
    if unknown:
        whose = f"the {format} reader" if format in READERS else "any reader"
        raise AirlinkError(f"option(s) {', '.join(map(repr, unknown))} not known to {whose} "
                           f"(known: {', '.join(sorted(known)) or 'none'})")


def reader_options(name: str) -> set:
    """Keyword options reader ``name`` takes (what ``read(..., format=name, **options)``
    accepts)."""
    return set(_accepted(name))


def _options_of(name: str, kw: dict) -> dict:
    accepted = _accepted(name)
    return {k: v for k, v in kw.items() if k in accepted}


CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".dmp")
