"""Shared pieces of the text-table readers: sniffing CSV/TSV, unit conversion, times."""
from __future__ import annotations

import numpy as np
import pandas as pd

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.units import parse_duration, parse_rate, parse_size

MISSING = ["-", "", "None", "none", "NA", "NaN", "nan", "null", "N/A"]


def head_text(path, n=8192) -> str:
    """First ``n`` bytes of a file as text ('' if unreadable or binary)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(n)
    except OSError:
        return ""
    if b"\x00" in raw:
        return ""
    return raw.decode("utf-8", "replace")


def check_table_shape(path, chunk_bytes: int = 1 << 20) -> None:
    """Refuse a text table with a line longer than :data:`~airlink.core.bounds.MAX_LINE_BYTES`
    or a header of more than :data:`~airlink.core.bounds.MAX_COLUMNS` columns, naming the
    file and the line, before a parser builds it (one pass over the bytes, a chunk at a
    time). Compressed files are left to their reader."""
    from airlink.core.bounds import MAX_COLUMNS, MAX_LINE_BYTES
    if str(path).lower().endswith(".gz"):
        return
    line, start, offset = 1, 0, 0          # file line and byte offset where the current line began
    with open(path, "rb") as f:
        while True:
            chunk = f.read(chunk_bytes)
            if not chunk:
                break
            ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10) + offset
            if line == 1 and (ends.size or offset + len(chunk) > MAX_LINE_BYTES):
                first = chunk[: (ends[0] - offset) if ends.size else len(chunk)]
                cols = 1 + max(first.count(b","), first.count(b"\t"), first.count(b";"))
                if cols > MAX_COLUMNS:
                    raise FormatError(f"{path}: line 1: more than {MAX_COLUMNS} columns "
                                      f"({cols} in its first {len(first)} bytes)")
            bounds = np.concatenate([[start], ends + 1]) if ends.size else np.array([start])
            if ends.size:
                longest = int(np.argmax(np.diff(bounds)))
                if bounds[longest + 1] - bounds[longest] > MAX_LINE_BYTES:
                    raise FormatError(f"{path}: line {line + longest}: longer than {MAX_LINE_BYTES} bytes")
                line += ends.size
                start = int(ends[-1]) + 1
            offset += len(chunk)
            if offset - start > MAX_LINE_BYTES:
                raise FormatError(f"{path}: line {line}: longer than {MAX_LINE_BYTES} bytes")


def check_log_times(seconds, lines, path, column: str = "timestamp", place: str = "line") -> None:
    """Refuse log times (Unix seconds, float) outside the plausible window - NaN, before
    :data:`~airlink.core.bounds.EARLIEST_LOG_TIME_S` (1990) or more than
    :data:`~airlink.core.bounds.FUTURE_SLACK_S` past now - naming the file, the line
    (``lines[k]`` is the file line of value ``k``; ``place="row"`` when they are data rows)
    and the value, before a grid is built on them."""
    import time

    from airlink.core.bounds import EARLIEST_LOG_TIME_S, FUTURE_SLACK_S
    ts = np.asarray(seconds, dtype=np.float64)
    latest = time.time() + FUTURE_SLACK_S
    bad = ~((ts >= EARLIEST_LOG_TIME_S) & (ts <= latest))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        v = ts[k]
        why = ("is not a number" if not np.isfinite(v) else
               "is before 1990" if v < EARLIEST_LOG_TIME_S else "is more than a day in the future")
        raise FormatError(f"{path}: {place} {int(np.asarray(lines)[k])}: {column} {v:.17g} {why} "
                          f"({int(bad.sum())} such value(s))")


def header_columns(path) -> list:
    """Column names of a CSV/TSV file's first line ([] when it is not one)."""
    text = head_text(path)
    if not text:
        return []
    first = text.splitlines()[0] if text.splitlines() else ""
    sep = "\t" if first.count("\t") > first.count(",") else ","
    return [c.strip().strip('"') for c in first.split(sep)] if sep in first else []


def sep_of(path) -> str:
    first = head_text(path).splitlines()[0] if head_text(path) else ""
    return "\t" if first.count("\t") > first.count(",") else ("," if "," in first else r"\s+")


def numbers(values: pd.Series, *, path, column: str, lines=None) -> pd.Series:
    """A column as floats; missing cells (:data:`MISSING`) stay NaN, any other text is an
    error naming the file, the column, the line (``lines[k]`` for row ``k``; default ``k + 2``,
    under a one-line header) and the value - never a silent NaN."""
    num = pd.to_numeric(values, errors="coerce")
    bad = num.isna() & values.notna()
    if bad.any():
        if values.dtype == object:
            bad &= ~values.astype(str).str.strip().isin(MISSING)
        if bad.any():
            k = int(np.flatnonzero(bad.to_numpy())[0])
            line = int(lines[k]) if lines is not None else k + 2
            raise FormatError(f"{path}: column {column!r} line {line}: {values.iloc[k]!r} is not a number "
                              f"({int(bad.sum())} such value(s))")
    return num.astype(float)


def require_columns(raw: pd.DataFrame, names, path, what: str = "") -> None:
    """Every name is a column of ``raw``, else an error naming the file and the missing columns."""
    missing = [c for c in names if c not in raw.columns]
    if missing:
        raise FormatError(f"{path}: {what + ' ' if what else ''}column(s) {', '.join(map(repr, missing))} not in the "
                          f"file (it has {', '.join(map(str, raw.columns[:16]))}"
                          f"{', ...' if len(raw.columns) > 16 else ''})")


def unit_factor(unit: str, target: str) -> float:
    """Factor from ``unit`` to the base unit implied by the target column's suffix."""
    if not unit:
        return 1.0
    u = unit.strip()
    try:
        if target.endswith("_bps"):
            return parse_rate("1" + u)
        if target.endswith("_ms"):
            return float(parse_duration("1" + u)) * 1000.0
        if target.endswith("_s"):
            return float(parse_duration("1" + u))
        if target.endswith("_bytes"):
            if u.lower() in ("bit", "bits"):
                return 1 / 8
            return float(parse_size("1" + u))
        if target.endswith("_kmh"):
            return {"km/h": 1.0, "kmh": 1.0, "m/s": 3.6, "mph": 1.609344}[u.lower()]
    except (AirlinkError, KeyError):
        pass
    if u.lower() in ("db", "dbm", "1", "count", target.rsplit("_", 1)[-1]):
        return 1.0
    raise AirlinkError(f"cannot convert unit {unit!r} for column {target!r}")


def parse_times(values: pd.Series, *, fmt=None, tz=None, unit=None, name="time") -> pd.Series:
    """Times as UTC, unreadable ones NaT (the readers drop and count them):
    :func:`airlink.collectors.timegrid.parse_times` with ``unit`` (s, ms, us, ns) for numbers
    since the epoch, ``fmt`` a strftime pattern, ``tz`` the zone of naive local times."""
    from .timegrid import parse_times as parse
    return pd.Series(parse(values, column=name, tz=tz, format=fmt, unit=unit, errors="coerce"))


def finish(frame: pd.DataFrame, path, reader: str, *, dedupe="last") -> pd.DataFrame:
    """Drop rows without time, sort by time (stable), handle duplicate timestamps, count gaps."""
    bad = frame["time"].isna()
    frame = frame.loc[~bad]
    frame = frame.sort_values("time", kind="stable", ignore_index=True)
    keys = ["time"] + [c for c in ("carrier", "user", "cell_id") if c in frame.columns and c != "cell_id"]
    ndup = int(frame.duplicated(keys, keep="first").sum())    # rows beyond the first of their time
    if dedupe:
        frame = frame.loc[~frame.duplicated(keys, keep=dedupe)].reset_index(drop=True)
    t = frame["time"].drop_duplicates().array.asi8
    gaps = int((np.diff(t) > 1.5 * np.median(np.diff(t))).sum()) if len(t) > 2 else 0
    frame.attrs.update({"source": str(path), "reader": reader, "rows_without_time": int(bad.sum()),
                        "duplicate_times": ndup, "gaps": gaps})
    return frame
