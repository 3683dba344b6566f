"""Reading and shaping the frames inference works on.

A frame is any Parquet or CSV table that collectors, the simulator or replay write: a
``time`` column or index (UTC nanoseconds, datetimes, or seconds as floats) and, for
per-user kinds such as ``mac``, a ``user`` column. Pandas reads them directly so that
inference does not depend on the collectors package. Several frames are aligned on the
first one's time grid (nearest sample within one sampling period).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.traces.errors import AirlinkError

TIME_COLUMNS = ("time", "timestamp", "seconds_since_epoch", "time_s")


def _to_datetime_index(values, source: str) -> pd.DatetimeIndex:
    s = pd.Series(values)
    if pd.api.types.is_datetime64_any_dtype(s):
        idx = pd.DatetimeIndex(s)
        return idx.tz_convert("UTC") if idx.tz is not None else idx.tz_localize("UTC")
    num = pd.to_numeric(s, errors="coerce")
    if num.isna().all():
        try:
            return pd.DatetimeIndex(pd.to_datetime(s, utc=True))
        except (ValueError, TypeError):
            raise AirlinkError(f"{source}: cannot read the time column as times") from None
    big = float(np.nanmax(np.abs(num.to_numpy(dtype=float)))) if len(num) else 0.0
    unit = "ns" if big > 1e14 else "s"  # UTC ns (airlink frames) or seconds (epoch or relative)
    return pd.DatetimeIndex(pd.to_datetime(num, unit=unit, utc=True))


def with_time_index(frame: pd.DataFrame, source: str = "frame") -> pd.DataFrame:
    """The frame indexed by a UTC DatetimeIndex named ``time`` (from a time column or index)."""
    if isinstance(frame.index, pd.DatetimeIndex):
        out = frame.copy()
        out.index = _to_datetime_index(frame.index, source)
    else:
        col = next((c for c in TIME_COLUMNS if c in frame.columns), None)
        if col is None:
            if frame.index.name in TIME_COLUMNS:
                out = frame.copy()
                out.index = _to_datetime_index(frame.index.to_numpy(), source)
            else:
                raise AirlinkError(f"{source}: no time column or index (expected one of "
                                   f"{', '.join(TIME_COLUMNS)})")
        else:
            out = frame.drop(columns=[col])
            out.index = _to_datetime_index(frame[col].to_numpy(), source)
    out.index.name = "time"
    return out.sort_index(kind="stable")


def read_frame(path) -> pd.DataFrame:
    """One Parquet or CSV frame, indexed by time (``None``/``-`` read as missing)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif path.suffix.lower() in (".csv", ".txt", ".gz"):
            frame = pd.read_csv(path, na_values=["None", "-", ""])
        else:
            raise AirlinkError(f"{path}: unknown frame format {path.suffix!r} (use .parquet or .csv)")
    except AirlinkError:
        raise
    except Exception as exc:  # pyarrow / parser errors -> one line
        raise AirlinkError(f"{path}: cannot read frame: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise AirlinkError(f"{path}: frame has no rows")
    return with_time_index(frame, str(path))


def sample_period_s(frame: pd.DataFrame) -> float:
    """Median spacing of distinct times in seconds (NaN for fewer than two)."""
    t = np.unique(frame.index.asi8)
    return float(np.median(np.diff(t))) / 1e9 if t.size > 1 else float("nan")


def read_frames(paths) -> pd.DataFrame:
    """Read one or several frames; later ones are aligned on the first one's times
    (nearest sample within one period; columns already present are not overwritten)."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise AirlinkError("no frame given")
    base = read_frame(paths[0])
    for p in paths[1:]:
        other = read_frame(p)
        if "user" in other.columns and "user" in base.columns:
            raise AirlinkError(f"{p}: aligning two per-user frames is not supported; merge them first")
        tol = pd.Timedelta(seconds=max(sample_period_s(base), sample_period_s(other)) or 1.0)
        new = [c for c in other.columns if c not in base.columns]
        right = other[new].reset_index()
        left = base.reset_index()
        merged = pd.merge_asof(left.sort_values("time"), right.sort_values("time"), on="time",
                               direction="nearest", tolerance=tol)
        base = merged.set_index("time")
    return base


ENTITY_COLUMNS = ("user", "carrier", "flow", "direction")


def with_entities(frame: pd.DataFrame) -> pd.DataFrame:
    """One ``user`` key per independent series: the user, or the combination of the
    entity columns present (``carrier`` of a MAC log, ``flow``/``direction`` of a TCP frame),
    e.g. ``"1/pcell"`` or ``"3/fwd"``. Frames with one series are returned unchanged."""
    present = [c for c in ENTITY_COLUMNS if c in frame.columns]
    if not present or present == ["user"]:
        return frame
    key = frame[present[0]].astype(str)
    for c in present[1:]:
        key = key + "/" + frame[c].astype(str)
    out = frame.drop(columns=[c for c in present if c != "user"] if "user" in present else present)
    out = out.assign(user=key.to_numpy())
    return out


def users_of(frame: pd.DataFrame) -> list:
    return sorted(frame["user"].unique().tolist(), key=str) if "user" in frame.columns else [None]


def column(frame: pd.DataFrame, name: str, source: str = "frame") -> pd.Series:
    if name not in frame.columns:
        have = ", ".join(str(c) for c in frame.columns[:25])
        raise AirlinkError(f"{source}: no column {name!r} (columns: {have})")
    values = pd.to_numeric(frame[name], errors="coerce")
    if values.isna().all():
        raise AirlinkError(f"{source}: column {name!r} has no numeric values")
    return values.astype(float)


def wide(frame: pd.DataFrame, name: str, source: str = "frame") -> pd.DataFrame:
    """A column as a ``(time, user)`` table (one column named ``"1"`` for a frame without users)."""
    return wide_many(frame, [name], source)[name]


def wide_many(frame: pd.DataFrame, names, source: str = "frame") -> dict:
    """Several columns as ``(time, user)`` tables on one shared time index."""
    values = {n: column(frame, n, source).to_numpy() for n in names}
    if "user" not in frame.columns:
        return {n: pd.DataFrame({"1": v}, index=frame.index) for n, v in values.items()}
    t = pd.DataFrame(values, index=pd.MultiIndex.from_arrays(
        [frame.index, frame["user"].astype(str).to_numpy()], names=["time", "user"]))
    t = t.groupby(level=["time", "user"], sort=True).mean().unstack("user")
    return {n: t[n] for n in names}


def pooled_series(frame: pd.DataFrame, names, *, user=None, gap: int = 0, source: str = "frame"):
    """Columns as aligned 1-D arrays with every user's series end to end, separated by
    ``gap`` NaN samples (so no pair within ``gap`` lags spans two users); ``user`` keeps one."""
    users = users_of(frame)
    if user is not None:
        if "user" not in frame.columns:
            raise AirlinkError(f"{source}: frame has no user column, cannot select user {user}")
        match = [u for u in users if str(u) == str(user)]
        if not match:
            raise AirlinkError(f"{source}: no user {user!r} (users: {', '.join(map(str, users))})")
        users = match
    tables = wide_many(frame, list(names), source)
    out = {n: [] for n in names}
    for u in users:
        key = "1" if u is None else str(u)
        for n in names:
            out[n].append(tables[n][key].to_numpy())
            out[n].append(np.full(gap, np.nan))
    return {n: np.concatenate(v[:-1]) if v else np.array([]) for n, v in out.items()}
