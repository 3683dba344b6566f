"""Mahimahi / airlink link logs -> per-ms ``mac`` frame with queue backlog.

Built on :func:`airlink.traces.read_log` and :func:`airlink.traces.per_ms`. Per bin:
``capacity_bytes`` (delivery opportunities), ``arrivals_bytes``/``arrivals_packets``,
``served_bytes``/``departures_packets`` (departures), ``drops_bytes``/``drops_packets``,
``delay_ms`` (mean queueing delay of departures) and the queue backlog at the end of the bin
``backlog_bytes``/``backlog_packets`` = cumulative arrivals - departures - drops (the log
starts with an empty queue). ``time`` = base timestamp (ms since the epoch, from the header)
+ bin start; ``user`` is ``link``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.traces.mmlinklog import is_log_file, per_ms, read_log
from airlink.core.schema import validate

NAME = "linklog"


def is_format(path) -> bool:
    try:
        return is_log_file(path)
    except Exception:
        return False


def why_not(path) -> str:
    return "first lines are not mm-link log headers or 'TIME EVENT SIZE' events"


def read(path, *, bin_ms: float = 1.0) -> pd.DataFrame:
    """Per-``bin_ms`` capacity, arrivals, departures, drops and backlog of a link log."""
    path = Path(path)
    log = read_log(path)
    base = int(log.attrs.get("header", {}).get("base_timestamp", 0) or 0)
    pm = per_ms(log, bin_ms)
    n = len(pm)
    if n:
        tb = np.floor(log["time_ms"].to_numpy(np.float64) / bin_ms).astype(np.int64)
        tb -= tb.min() if tb.min() < 0 else 0
        ev = log["event"].astype(str).to_numpy()
        pk = log["packets"].to_numpy(np.float64)

        def count(e):
            m = ev == e
            return np.bincount(tb[m], weights=pk[m], minlength=n)[:n].astype(np.int64)
        arr_p, dep_p, drop_p = count("arrival"), count("departure"), count("drop")
    else:
        arr_p = dep_p = drop_p = np.zeros(0, np.int64)
    backlog_b = np.cumsum(pm["arrivals_bytes"].to_numpy() - pm["departures_bytes"].to_numpy()
                          - pm["drops_bytes"].to_numpy())
    backlog_p = np.cumsum(arr_p - dep_p - drop_p)
    t_ns = (np.int64(base) * 1_000_000 + np.round(pm["time_ms"].to_numpy(np.float64) * 1e6).astype(np.int64))
    frame = pd.DataFrame({
        "time": pd.to_datetime(t_ns, unit="ns", utc=True), "user": "link",
        "capacity_bytes": pm["capacity_bytes"].to_numpy(np.int64),
        "arrivals_bytes": pm["arrivals_bytes"].to_numpy(np.int64), "arrivals_packets": arr_p,
        "served_bytes": pm["departures_bytes"].to_numpy(np.int64), "departures_packets": dep_p,
        "drops_bytes": pm["drops_bytes"].to_numpy(np.int64), "drops_packets": drop_p,
        "delay_ms": pm["delay_ms"].to_numpy(), "backlog_bytes": backlog_b.astype(np.int64),
        "backlog_packets": backlog_p.astype(np.int64)})
    frame.attrs.update({"source": str(path), "reader": NAME, "bin_ms": bin_ms,
                        "header": dict(log.attrs.get("header", {}))})
    return validate(frame, "mac", name=str(path))
