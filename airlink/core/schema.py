"""Frame schemas: the columns of every kind of frame airlink passes between packages.

A frame is a :class:`pandas.DataFrame` of irregular events or samples with a sorted
``time`` column (``datetime64[ns, UTC]``; simulated data start at the Unix epoch) or a
``time`` index. Column names are snake_case and carry their unit (``_bytes``, ``_bps``,
``_db``, ``_dbm``, ``_ms``, ``_kmh``); counts and codes carry none (``mcs``, ``cqi``).

``validate(frame, kind)`` is called where a frame crosses a package boundary. It checks
that required columns are present, that unit-suffixed and numeric columns are numeric, and
that time is sorted; unknown extra columns are allowed (readers keep what a source offers).

Kinds
-----
packets   one row per captured packet (collectors)
flows     one row per bidirectional connection (collectors)
tcp       regular per-flow, per-direction TCP time series (collectors)
rf        radio measurements: signal quality per time (collectors, readers of radio logs)
mac       per-TTI or per-second scheduling per user (sim, collectors, replay logs)
capacity  per-TTI capacity per user (a Trace in long form)
linklog   Mahimahi/airlink link-log events (one row per event)
throughput application throughput per interval (and stream): iperf3 reports, throughput traces
transfers one row per upload/download with its radio indicators and no time axis
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SchemaError


@dataclass(frozen=True)
class Kind:
    name: str
    required: tuple
    optional: tuple
    doc: str
    timed: bool = True


KINDS = {k.name: k for k in [
    Kind("packets",
         ("time", "src", "dst", "proto", "ip_len_bytes"),
         ("sport", "dport", "flow", "direction", "seq", "ack", "flags", "window", "window_bytes",
          "payload_bytes", "tsval", "tsecr", "sack_blocks", "dsack", "interface", "captured_bytes",
          "teid", "qfi"),
         "one row per captured IP packet; seq/ack are absolute 32-bit values"),
    Kind("flows",
         ("flow", "src", "dst", "sport", "dport", "proto", "start", "end"),
         ("packets_fwd", "packets_rev", "bytes_fwd", "bytes_rev", "mss_bytes", "wscale_fwd",
          "wscale_rev", "sack_permitted", "timestamps", "retransmissions",
          "spurious_retransmissions", "rtt_ms_median"),
         "one row per bidirectional connection; fwd = direction of the first SYN", timed=False),
    Kind("tcp",
         ("time", "flow", "direction"),
         ("throughput_bps", "goodput_bps", "rtt_ms", "inflight_bytes", "inflight_packets",
          "retransmissions", "fast_retransmissions", "timeout_retransmissions",
          "spurious_retransmissions", "dupacks", "rwnd_bytes", "zero_windows", "loss_rate",
          "packets", "bytes"),
         "regular TCP time series per flow and direction at a chosen resolution"),
    Kind("rf",
         ("time",),
         ("carrier", "cell_id", "network_mode", "rsrp_dbm", "rsrq_db", "rssi_dbm", "snr_db",
          "sinr_db", "ecio_db", "cqi", "speed_kmh", "dl_bitrate_bps", "ul_bitrate_bps",
          "state", "throughput_bps", "frame_errors", "sector_load"),
         "radio measurements at the terminal or logger"),
    Kind("mac",
         ("time", "user"),
         ("carrier", "prbs", "prbs_max", "subchannels", "mcs", "tbs_bps", "assigned_rate_bps",
          "served_bytes", "capacity_bytes", "harq_retransmissions", "rlp_retransmissions",
          "backlog_bytes", "backlog_packets", "sinr_db", "sinr_reported_db", "cqi",
          "arrivals_bytes", "drops_packets", "drops_bytes", "sector_load"),
         "per-TTI or per-second scheduling per user"),
    Kind("capacity",
         ("time", "user", "capacity_bytes"),
         (),
         "per-TTI capacity per user in bytes per TTI"),
    Kind("throughput",
         ("time", "throughput_bps"),
         ("stream", "interval_s", "bytes", "retransmissions", "snd_cwnd_bytes", "snd_wnd_bytes", "rtt_ms",
          "rttvar_ms", "packets", "lost_packets", "lost_percent", "jitter_ms", "omitted", "sender", "test"),
         "application throughput per interval (time = interval start) and stream"),
    Kind("transfers",
         ("transfer",),
         ("payload_bytes", "throughput_bps", "duration_s", "rsrp_dbm", "rsrq_db", "sinr_db", "snr_db", "cqi",
          "rssi_dbm", "speed_kmh", "direction"),
         "one row per upload/download with its radio indicators; no time axis", timed=False),
    Kind("linklog",
         ("time_ms", "event", "bytes"),
         ("delay_ms", "packets"),
         "link-log events: opportunity, arrival, departure, drop; time_ms from the log's base",
         timed=False),
]}

_NUMERIC_SUFFIXES = ("_bytes", "_bps", "_db", "_dbm", "_ms", "_kmh", "_s")


def kinds() -> list:
    """Names of all frame kinds."""
    return list(KINDS)


def columns(kind: str) -> tuple:
    """Required and optional columns of a kind, required first."""
    k = _kind(kind)
    return k.required + k.optional


def _kind(kind: str) -> Kind:
    if kind not in KINDS:
        raise SchemaError(f"unknown frame kind {kind!r} (one of {', '.join(KINDS)})")
    return KINDS[kind]


def validate(frame: pd.DataFrame, kind: str, *, name: str = "frame") -> pd.DataFrame:
    """Check ``frame`` against the schema of ``kind`` and return it.

    Raises :class:`SchemaError` naming every missing column, each non-numeric unit
    column, and an unsorted or non-UTC time. A ``time`` index counts as the ``time`` column.
    """
    import pandas as pd
    if not isinstance(frame, pd.DataFrame):
        raise SchemaError(f"{name}: expected a pandas DataFrame, got {type(frame).__name__}")
    cols = set(frame.columns)
    has_time_index = frame.index.name == "time"
    t = frame.index if has_time_index and "time" not in cols else frame["time"] if "time" in cols else None
    time_dtype = time_sorted = None
    if t is not None:
        time_dtype = str(t.dtype)
        if isinstance(t.dtype, pd.DatetimeTZDtype) and str(t.dtype.tz) == "UTC":
            time_dtype = "UTC"
            tv = pd.DatetimeIndex(t).asi8
            time_sorted = not (len(tv) > 1 and (np.diff(tv) < 0).any())
    check_columns(kind, name, {c: (pd.api.types.is_numeric_dtype(frame[c]), str(frame[c].dtype))
                               for c in frame.columns},
                  time_dtype=time_dtype, time_sorted=time_sorted, has_time_index=has_time_index)
    return frame


def check_columns(kind: str, name: str, types: dict, *, time_dtype, time_sorted,
                  has_time_index: bool = False) -> None:
    """The checks of :func:`validate` on a frame's description, whatever holds it:
    ``types`` (column name -> (whether its type is numeric, the type as text)), ``time_dtype`` ("UTC" for
    times in UTC, else the time column's type as text; None without one) and
    ``time_sorted`` (whether UTC times never go back)."""
    k = _kind(kind)
    missing = [c for c in k.required if c not in types and not (c == "time" and has_time_index)]
    problems = []
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    for c, (is_numeric, dtype) in types.items():
        if str(c).endswith(_NUMERIC_SUFFIXES) and c not in ("start", "end") and not is_numeric:
            problems.append(f"column {c!r} must be numeric, is {dtype}")
    if k.timed and not missing:
        if time_dtype != "UTC":
            problems.append(f"time must be datetime64[ns, UTC], is {time_dtype}")
        elif not time_sorted:
            problems.append("time is not sorted")
    if problems:
        raise SchemaError(f"{name} is not a valid {kind} frame: " + "; ".join(problems))


def utc(times, unit: str = "ns") -> pd.Series:
    """Times (numbers since the Unix epoch in ``unit``, or datetimes) as UTC datetimes."""
    import pandas as pd
    if isinstance(times, (pd.Series, pd.Index)) and isinstance(times.dtype, pd.DatetimeTZDtype):
        return pd.Series(times).dt.tz_convert("UTC")
    return pd.Series(pd.to_datetime(times, unit=unit if np.issubdtype(np.asarray(times).dtype, np.number) else None, utc=True))
