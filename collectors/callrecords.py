"""Call records (one row per session: start, end, sector) -> active sessions per sector
per second, the "sector load" of the CDMA2000 study (REFERENCE.md, Mattar et al.).

Accepted headers (case-insensitive): start (``start``, ``start_time``, ``begin``,
``setup``), end (``end``, ``end_time``, ``stop``, ``release``), sector (``sector``,
``sector_id``, ``cell``, ``cell_id``). Times are epoch seconds or date-times (UTC unless
``tz``). A session counts as active in second ``s`` when it overlaps ``[s, s+1)``.
Output: ``rf`` frame with ``time``, ``cell_id`` (the sector) and ``sector_load``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import FormatError
from airlink.core.schema import validate

from ._tabular import MISSING, check_table_shape, head_text, header_columns, parse_times, sep_of

NAME = "callrecords"
START = ("start", "start_time", "begin", "setup", "start_s")
END = ("end", "end_time", "stop", "release", "end_s")
SECTOR = ("sector", "sector_id", "cell", "cell_id")


def _pick(cols, names):
    low = {c.lower(): c for c in cols}
    for n in names:
        if n in low:
            return low[n]
    return None


def is_format(path) -> bool:
    cols = header_columns(path)
    return all(_pick(cols, n) for n in (START, END, SECTOR))


def why_not(path) -> str:
    return "header lacks start, end and sector columns"


def read(path, *, resolution_s: int = 1, tz=None) -> pd.DataFrame:
    """Active sessions per sector per second from call records (see module notes)."""
    path = Path(path)
    if not head_text(path):
        raise FormatError(f"{path}: not a text file (call records are a CSV/TSV table)")
    check_table_shape(path)
    try:
        raw = pd.read_csv(path, sep=sep_of(path), na_values=MISSING, engine="python")
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as CSV ({str(exc).splitlines()[0]})") from None
    cols = list(raw.columns)
    s_c, e_c, k_c = _pick(cols, START), _pick(cols, END), _pick(cols, SECTOR)
    if not (s_c and e_c and k_c):
        raise FormatError(f"{path}: call records need start, end and sector columns (has {', '.join(cols)})")

    def times(c):
        num = pd.to_numeric(raw[c], errors="coerce")
        if num.notna().all():
            return parse_times(num, unit="s")
        return parse_times(raw[c], tz=tz)
    start, end = times(s_c), times(e_c)
    ok = start.notna() & end.notna()
    bad = raw.index[~ok | (end < start)]
    if len(bad):
        raise FormatError(f"{path}: line {int(bad[0]) + 2}: session without valid start/end or ending "
                          f"before it starts")
    res = int(resolution_s) * 10**9
    s_bin = start.array.asi8 // res
    e_bin = (end.array.asi8 - 1) // res
    e_bin = np.maximum(e_bin, s_bin)
    sectors = raw[k_c].astype(str).to_numpy()
    usec, sidx = np.unique(sectors, return_inverse=True)
    b0, b1 = int(s_bin.min()), int(e_bin.max())
    nb = b1 - b0 + 1
    diff = np.zeros((len(usec), nb + 1), np.int64)
    np.add.at(diff, (sidx, s_bin - b0), 1)
    np.add.at(diff, (sidx, e_bin - b0 + 1), -1)
    load = np.cumsum(diff[:, :nb], axis=1)
    t = (np.arange(nb) + b0) * res
    frame = pd.DataFrame({
        "time": pd.to_datetime(np.tile(t, len(usec)), unit="ns", utc=True),
        "cell_id": np.repeat(usec, nb), "sector_load": load.ravel()})
    frame = frame.sort_values(["time", "cell_id"], kind="stable", ignore_index=True)
    frame.attrs.update({"source": str(path), "reader": NAME, "sessions": int(len(raw))})
    return validate(frame, "rf", name=str(path))
