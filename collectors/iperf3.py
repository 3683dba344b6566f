"""iPerf3 JSON reports (``iperf3 -J``, client or server, TCP or UDP) -> ``throughput`` frame.

One row per interval and stream (``intervals[].streams[]``; the per-interval ``sum`` is the
row total and is not repeated). A file holding several reports one after another (a server
started without ``-1`` writes one per test) gives them all, numbered in ``test``.

Time: ``time`` is the interval's start, ``start.timestamp.timesecs`` (whole seconds since the
Unix epoch, UTC, when the test began) plus the interval's ``start`` (seconds from the test's
start; the interval's ``sum.start``, common to its streams, whose own starts differ by
microseconds). ``timesecs`` has a resolution of one second, so ``time`` is within a second
of the wall clock; the spacing of the rows is exact.

Columns: ``time``, ``stream`` (the socket number as text), ``interval_s`` (``seconds``),
``bytes``, ``throughput_bps`` (iperf3's ``bits_per_second`` = ``8 * bytes / seconds``),
``sender`` (True on the side that sent the data), ``omitted`` (intervals of ``-O``, which
iperf3 leaves out of its end totals), ``test``; where iperf3 reports them: TCP sender
``retransmissions`` (``retransmits``), ``snd_cwnd_bytes``, ``snd_wnd_bytes``, ``rtt_ms`` and
``rttvar_ms`` (iperf3 writes microseconds); UDP ``packets``, ``lost_packets``,
``lost_percent`` and ``jitter_ms``.

``attrs``: ``role`` (``client``/``server``), ``protocol``, ``reverse`` (``-R``), ``streams``,
``side`` (``sent`` or ``received``: what this host's intervals count) and ``end``: iperf3's own
totals of that side (``end.sum_sent`` or ``end.sum_received``; bytes, bits_per_second,
seconds, and retransmits for a TCP sender). The bytes of the frame's rows that are not
``omitted`` add up to ``end["bytes"]``. A report with an ``error`` and no intervals is an
error naming iperf3's message.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import FormatError
from airlink.core.schema import validate

from ._tabular import head_text

NAME = "iperf3"
#: interval field -> (column, factor)
FIELDS = {"seconds": ("interval_s", 1.0), "bytes": ("bytes", 1.0), "bits_per_second": ("throughput_bps", 1.0),
          "retransmits": ("retransmissions", 1.0), "snd_cwnd": ("snd_cwnd_bytes", 1.0),
          "snd_wnd": ("snd_wnd_bytes", 1.0), "rtt": ("rtt_ms", 1e-3), "rttvar": ("rttvar_ms", 1e-3),
          "packets": ("packets", 1.0), "lost_packets": ("lost_packets", 1.0),
          "lost_percent": ("lost_percent", 1.0), "jitter_ms": ("jitter_ms", 1.0)}


def is_format(path) -> bool:
    """A JSON object whose first key is iperf3's ``start`` block."""
    text = head_text(path, 4096).lstrip("\ufeff \t\r\n")
    if not text.startswith("{"):
        return False
    head = text[:400]
    return '"start"' in head and ('"connected"' in head or '"connecting_to"' in text or
                                  '"accepted_connection"' in text or '"test_start"' in text)


def why_not(path) -> str:
    return "not a JSON report starting with iperf3's \"start\" block"


def _reports(path: Path) -> list:
    text = path.read_text(encoding="utf-8", errors="replace")
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            doc, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
                              + (f"; {len(out)} complete report(s) before it" if out else "")) from None
        if not isinstance(doc, dict) or "start" not in doc:
            raise FormatError(f"{path}: report {len(out) + 1} is not an iperf3 report (no \"start\")")
        out.append(doc)


def _side(doc: dict, role: str, reverse: bool) -> str:
    """What this host's intervals count: ``sent`` or ``received``. iperf3 >= 3.1 marks each
    stream record ``sender``; older reports follow from the role and ``-R``."""
    for iv in doc.get("intervals", []):
        for st in iv.get("streams", []):
            if "sender" in st:
                return "sent" if st["sender"] else "received"
    sends = (role == "client") != reverse
    return "sent" if sends else "received"


def _end(doc: dict, side: str) -> dict:
    end = doc.get("end") or {}
    rec = end.get(f"sum_{side}") or end.get("sum") or {}
    return {k: rec[k] for k in ("bytes", "bits_per_second", "seconds", "retransmits", "packets", "lost_packets")
            if k in rec}


def read(path) -> pd.DataFrame:
    """Read an iperf3 JSON report (or several one after another) into a ``throughput`` frame."""
    path = Path(path)
    docs = _reports(path)
    if not docs:
        raise FormatError(f"{path}: empty file")
    rows, meta = [], []
    for k, doc in enumerate(docs, 1):
        start = doc.get("start") or {}
        ts = (start.get("timestamp") or {}).get("timesecs")
        if not doc.get("intervals"):
            why = doc.get("error") or "no intervals"
            raise FormatError(f"{path}: iperf3 report {k}: {why}")
        if ts is None:
            raise FormatError(f"{path}: iperf3 report {k}: start.timestamp.timesecs is missing (no start time)")
        test = start.get("test_start") or {}
        role = "client" if "connecting_to" in start else "server"
        reverse = bool(test.get("reverse", 0))
        side = _side(doc, role, reverse)
        for iv in doc["intervals"]:
            tick = (iv.get("sum") or {}).get("start")
            for st in iv.get("streams", []):
                if "start" not in st or "bytes" not in st:
                    raise FormatError(f"{path}: iperf3 report {k}: an interval record lacks start/bytes")
                start_s = st["start"] if tick is None else tick
                row = {"t_s": float(ts) + float(start_s), "stream": str(st.get("socket", "")), "test": k,
                       "omitted": bool(st.get("omitted", False)),
                       "sender": bool(st.get("sender", side == "sent"))}
                for f, (col, scale) in FIELDS.items():
                    if f in st:
                        row[col] = float(st[f]) * scale
                rows.append(row)
        meta.append({"role": role, "protocol": test.get("protocol", "TCP"), "reverse": reverse,
                     "streams": int(test.get("num_streams", 1)), "side": side, "end": _end(doc, side),
                     "congestion": (doc.get("end") or {}).get("sender_tcp_congestion"),
                     "error": doc.get("error")})
    frame = pd.DataFrame(rows)
    frame.insert(0, "time", pd.to_datetime(np.round(frame.pop("t_s").to_numpy() * 1e9).astype(np.int64),
                                           unit="ns", utc=True))
    frame = frame.sort_values(["time", "test", "stream"], kind="stable", ignore_index=True)
    frame.attrs.update({"source": str(path), "reader": NAME, "kind": "throughput", "tests": len(docs), **meta[0]})
    if len(docs) > 1:
        frame.attrs["per_test"] = meta
    return validate(frame, "throughput", name=str(path))
