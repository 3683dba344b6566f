"""Reading frames and putting them on the regular grid inference works on.

A frame is any Parquet or CSV table that collectors, the simulator or replay write, or a
measured log: a time column or index (see :func:`airlink.collectors.timegrid.parse_times` for
the forms read: datetimes, epoch s/ms/us/ns, ISO 8601 with any fractional digits, UCC's
``YYYY.MM.DD_hh.mm.ss``) and data columns.

Inference never works on row numbers. :func:`prepare` is the one way a frame enters an
analysis: it puts the frame on a regular grid with :func:`airlink.collectors.timegrid.to_grid`
(sum for bytes and counts, mean for levels and rates, last for states and ids; duplicate
timestamps follow the same rules; a grid step without a row stays missing and a lag scan
skips it). Rows are split into separate series (pooled like users) only by a ``user``
column or by the columns named in ``by``; a ``carrier``, ``flow`` or ``direction`` column
holding several values without ``by`` is an error, never a silent split or a silent mix.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.collectors import check_table_shape
from airlink.collectors.timegrid import TIME_COLUMNS, grid_times, time_of, to_grid
from airlink.core.errors import AirlinkError, frame_source
from airlink.core.parquetframe import read_parquet_frame

from .allocations import allocation_view

ENTITY_COLUMNS = ("carrier", "flow", "direction")
# a grid made from the data is the median spacing of distinct times; when every spacing is
# within this fraction of the median the data are already regular and keep their own origin
REGULAR_TOLERANCE = 0.01

__all__ = ["TIME_COLUMNS", "read_frame", "read_frames", "prepare", "with_time_index", "column", "wide",
           "wide_many", "pooled_series", "users_of", "sample_period_s"]


def _time_indexed(frame: pd.DataFrame, source: str, time_column=None, tz=None) -> pd.DataFrame:
    t, rest = time_of(frame, time_column=time_column, tz=tz, source=source)
    rest.index = t
    rest.index.name = "time"
    rest.attrs.update(frame.attrs)
    return rest


def with_time_index(frame: pd.DataFrame, source: str = "frame", *, time_column=None, tz=None) -> pd.DataFrame:
    """The frame indexed by a UTC DatetimeIndex named ``time`` (rows without a time dropped,
    sorted stably). No grid is applied: see :func:`prepare`."""
    out = _time_indexed(frame, source, time_column, tz)
    out = out[~out.index.isna()]
    return out.sort_index(kind="stable")


#: Radio/MAC logs read through their collectors reader, as ``airlink collect`` reads them,
#: rather than as plain tables (by the reader's name in :func:`airlink.collectors.read`):
#: an NR-Scope log read plainly had every RNTI and both directions in one series on the grid
#: of the decoding timestamps' median spacing (15 ms on the morning log); an iCellSpeed log
#: read plainly had a column per carrier in the logger's units (Mbit/s or bit/s) and no
#: allocation or user columns, so ``infer scheduler`` found nothing the scheduler gave. A
#: phone's drive-test log (UCC / G-NetTrack, 5G Tracker, XCAL-style exports) read plainly had
#: no time column an analysis knows (``Timestamp``, ``td``): every command stopped at "no
#: time column", and its own columns are in the logger's units (kbit/s) and local time.
LOG_READERS = ("nrscope", "icellspeed", "ucc", "gnettrack", "5gtracker", "xcal")

#: Of those, the logs whose own columns still make a table of one device, read as they are
#: when a command names the logger's columns (``pcell_sum_nRB``, ``pcell_snr``; UCC's
#: ``DL_bitrate``, ``SNR``) or its own time column (``Timestamp``, ``td``): one phone's
#: samples. An NR-Scope log's rows mix every RNTI, so its own columns are refused with the
#: reader's names.
RAW_COLUMNS_READ_PLAIN = ("icellspeed", "ucc", "gnettrack", "5gtracker", "xcal")


def _log_format(path: Path) -> str | None:
    """The name of the reader of :data:`LOG_READERS` whose format ``path`` is (sniffed from
    its header), else None."""
    import importlib

    from airlink import collectors
    for name in LOG_READERS:
        try:
            if importlib.import_module(f"{collectors.__name__}.{collectors.READERS[name]}").is_format(path):
                return name
        except Exception:   # not a text table with a header: the CSV reader says what is wrong
            return None
    return None


def _names_raw_columns(path: Path, columns, time_column=None) -> bool:
    """True when ``columns`` (the names a command reads) are all in the CSV's own header, or
    none is named and ``time_column`` is: the user asked for the logger's columns as they are."""
    if not columns and not time_column:
        return False
    header = pd.read_csv(path, nrows=0).columns
    return all(c in header for c in columns) if columns else time_column in header


def _own_columns_without_time(path: Path, log: str, columns) -> str:
    """What to do with a log of :data:`RAW_COLUMNS_READ_PLAIN` whose own ``columns`` were
    named but whose time column (``Timestamp``, ``td``) no analysis knows by itself."""
    from airlink import collectors
    mine = collectors.read(path, format=log).columns
    header = [str(c) for c in pd.read_csv(path, nrows=0).columns]
    times = [c for c in header if "time" in c.lower() or c.lower() == "td"] or header[:1]
    return (f"{path}: this {log} log's own columns ({', '.join(columns)}) are read as they are only "
            f"with its time column named ({' or '.join(times)}); or name the {log} reader's columns "
            f"({', '.join(c for c in mine if c != 'time')}): times in UTC, the reader's units")


def read_table(path, columns=(), time_column=None) -> pd.DataFrame:
    """One Parquet or CSV table as it is (``None``, ``-``, empty read as missing).

    A radio/MAC log of :data:`LOG_READERS` is read through its reader; one of
    :data:`RAW_COLUMNS_READ_PLAIN` is read as it is when ``columns`` (the names the caller
    reads) are all in the CSV's own header, or none is named and ``time_column`` is."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            frame = read_parquet_frame(path)
        elif suffix not in (".csv", ".txt", ".gz"):
            raise AirlinkError(f"{path}: unknown frame format {path.suffix!r} (use .parquet or .csv)")
        else:
            frame = None
            log = _log_format(path)
            if log and not (log in RAW_COLUMNS_READ_PLAIN and _names_raw_columns(path, columns, time_column)):
                from airlink import collectors
                frame = collectors.read(path, format=log)      # as airlink collect reads it
            if frame is None:
                check_table_shape(path)
                frame = pd.read_csv(path, na_values=["None", "-", ""])
                if log and time_column is None and not any(c in frame.columns for c in TIME_COLUMNS):
                    raise AirlinkError(_own_columns_without_time(path, log, columns))
    except AirlinkError:
        raise
    except Exception as exc:  # pyarrow / parser errors -> one line
        raise AirlinkError(f"{path}: cannot read frame: {str(exc).splitlines()[0]}") from None
    if frame.empty:
        raise AirlinkError(f"{path}: frame has no rows")
    if isinstance(frame.index, pd.DatetimeIndex) or frame.index.name in TIME_COLUMNS:
        frame = frame.reset_index()
    frame.attrs["source"] = str(path)
    return frame


def read_frame(path, *, time_column=None, tz=None) -> pd.DataFrame:
    """One Parquet or CSV frame indexed by time (not yet on a grid; see :func:`read_frames`)."""
    frame = read_table(path, time_column=time_column)
    return with_time_index(frame, str(path), time_column=time_column, tz=tz)


def sample_period_s(frame: pd.DataFrame) -> float:
    """The frame's grid step (``attrs["resolution_s"]``) or else the median spacing of its
    distinct times in seconds (NaN for fewer than two)."""
    if np.isfinite(frame.attrs.get("resolution_s", np.nan)):
        return float(frame.attrs["resolution_s"])
    idx = frame.index if isinstance(frame.index, pd.DatetimeIndex) else pd.DatetimeIndex(frame["time"])
    t = np.unique(idx.asi8)
    return float(np.median(np.diff(t))) / 1e9 if t.size > 1 else float("nan")


def _keys_of(frame: pd.DataFrame, by, source: str) -> list:
    keys = [by] if isinstance(by, str) else list(by or [])
    for k in keys:
        if k not in frame.columns:
            have = ", ".join(str(c) for c in frame.columns[:25])
            raise AirlinkError(f"{source}: no column {k!r} to split by (columns: {have})")
    if "user" in frame.columns and "user" not in keys:
        keys = ["user", *keys]
    mixed = []
    for c in ENTITY_COLUMNS:
        if c in frame.columns and c not in keys:
            values = frame[c].dropna().unique()
            if len(values) > 1:
                shown = ", ".join(map(str, sorted(values, key=str)[:6]))
                mixed.append((c, f"column {c!r} holds {len(values)} different values ({shown})"))
    if mixed:
        names = [c for c, _ in mixed]
        raise AirlinkError(f"{source}: " + "; ".join(why for _, why in mixed) + "; their rows would be mixed "
                           f"into one series: split them with by={names[0] if len(names) == 1 else names!r} "
                           f"or keep one {' and one '.join(names)}")
    return keys


def _numbers(raw: pd.Series, name: str, source: str, place) -> pd.Series:
    """``raw`` as floats; a value that is neither a number nor missing is an error naming the
    column, its place (``place(k)`` for position ``k``) and the value."""
    if pd.api.types.is_bool_dtype(raw.dtype):
        return raw.astype(float)
    values = pd.to_numeric(raw, errors="coerce")
    bad = values.isna() & raw.notna()
    if bad.any():
        k = int(np.flatnonzero(bad.to_numpy())[0])
        raise AirlinkError(f"{source}: column {name!r} {place(k)}: {raw.iloc[k]!r} is not a number "
                           f"({int(bad.sum())} such value(s))")
    return values.astype(float)


def _check_columns(frame: pd.DataFrame, columns, source: str) -> None:
    """Each named column exists and holds numbers: a missing column, or a text value among
    numbers (``12,5`` or ``n/a`` in a rate), is an error naming the column (and the row and
    value), before any grid step could hide it."""
    for c in columns or ():
        if c not in frame.columns:
            have = ", ".join(str(x) for x in frame.columns[:25])
            raise AirlinkError(f"{source}: no column {c!r} (columns: {have})")
        _numbers(frame[c], c, source, lambda k: f"row {k + 1}")


def _grid_of(t: pd.DatetimeIndex, resolution, source: str):
    """``(resolution, origin)`` for :func:`to_grid`: the given resolution on the epoch grid,
    or one made from the data (see :data:`REGULAR_TOLERANCE`)."""
    if resolution is not None:
        return resolution, None
    u = np.unique(t[~t.isna()].asi8)
    if u.size < 2:
        raise AirlinkError(f"{source}: fewer than two distinct times, cannot tell the sampling period "
                           f"(give a resolution)")
    d = np.diff(u)
    med = float(np.median(d))
    if np.all(np.abs(d - med) <= REGULAR_TOLERANCE * med):
        return (u[-1] - u[0]) / (u.size - 1) / 1e9, pd.Timestamp(int(u[0]), unit="ns", tz="UTC")
    return pd.Timedelta(int(round(med)), unit="ns"), None


def prepare(frame: pd.DataFrame, *, resolution=None, time_column=None, tz=None, by=None, how=None,
            columns=None, source: str | None = None, direction=None, sparse: bool = False,
            user=None, only_columns: bool = False, may_read=()) -> pd.DataFrame:
    """A frame on a regular grid, as every analysis receives it: indexed by ``time`` (the
    start of each grid step), one ``user`` column naming the series when there are several
    (the ``user`` column and/or the ``by`` columns joined by ``/``, e.g. ``"ue/pcell"``), and
    the data columns aggregated per step (rules in :mod:`airlink.collectors.timegrid`).

    ``resolution`` is a duration (``"1s"``, ``"20ms"``, a Timedelta); ``None`` takes the
    median spacing of the distinct timestamps (data already regular within 1 % keep their own
    first timestamp as grid origin, so 1.667 ms slots stay one per step). ``attrs`` of the
    result: ``resolution_s``, ``empty_bins`` (missing steps), ``merged_rows`` (rows that
    shared a step with another: duplicates or finer sampling), ``by``. ``columns``: names the
    caller will read as numbers, checked on the rows before the grid (missing column, or a
    text value, is an error naming column, row and value).

    An allocation log (NR-Scope DCIs, iCellSpeed carriers) is first read the one way every
    analysis reads it (:func:`~airlink.inference.allocations.allocation_view`): the grants of
    ``direction`` (default downlink; ``"both"`` as separate series), on the log's slot as the
    grid (unless ``resolution`` is given), with ``attrs["allocation"]`` saying what was chosen
    (direction, slot, default rate column, notes).

    ``sparse=True`` keeps only the steps where a series has a row (``attrs["sparse"]``; see
    :func:`~airlink.collectors.timegrid.to_grid`): for analyses that read the frame through
    :func:`wide_many` only (fairness, jitter), which re-expands it onto the whole grid.

    ``user`` keeps one series (its label as in the result's ``user`` column) and grids only
    its rows, on the grid the whole frame would have: one RNTI of a 137-RNTI log is one
    series, not 137.

    ``only_columns=True`` says ``columns`` are all the caller reads: the other data columns
    are left out of the grid (a 17-column TCP series at 1 ms is refused by the grid's budget
    past 1.6 h, the two an NMI reads not before 13.9 h). ``may_read``: with ``only_columns``,
    further columns the caller reads where the frame has them (candidates it chooses among,
    such as the scheduler's channel columns), kept on the grid unchecked.
    """
    if not isinstance(frame, pd.DataFrame):
        raise AirlinkError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    if frame.attrs.get("gridded") and resolution is None and by is None and how is None:
        for c in columns or ():
            column(frame, c)
        return frame
    source = source or frame_source(frame)
    view = allocation_view(frame, direction)
    frame = view.frame
    t, rest = time_of(frame, time_column=time_column, tz=tz, source=source)
    _check_columns(rest, columns, source)
    by = [by] if isinstance(by, str) else list(by or [])
    keys = _keys_of(rest, by + [k for k in view.by if k not in by], source)
    if only_columns:
        rest = rest[list(dict.fromkeys([*keys, *columns, *(c for c in may_read if c in rest.columns)]))]
    if resolution is None and view.resolution is not None:
        # the slot grid starts at the log's first slot, so each slot is one step
        res, origin = view.resolution, t.min()
    else:
        res, origin = _grid_of(t, resolution, source)
    rest = rest.assign(time=t)
    if user is not None and keys:       # one series only: the grid (origin, step) stays the whole log's
        label = rest[keys[0]].astype(str)
        for k in keys[1:]:
            label = label + "/" + rest[k].astype(str)
        keep = (label == str(user)).to_numpy()
        if not keep.any():
            names = sorted(pd.unique(label), key=user_order)
            raise AirlinkError(f"{source}: no user {user!r} (users: {', '.join(map(str, names[:12]))}"
                               f"{', ...' if len(names) > 12 else ''})")
        rest = rest[keep]
    g = to_grid(rest, resolution=res, how=how, by=keys, origin=origin, source=source, sparse=sparse)
    attrs = dict(g.attrs)
    if resolution is not None and view.resolution is not None:     # the grid asked for, not the slot
        view.notes[:] = [n for n in view.notes if not n.startswith("grid: ")]
        view.notes.append(f"grid: {attrs['resolution_s']:g} s as asked (the log's slot is "
                          f"{view.resolution.value / 1e6:g} ms)")
    if keys:
        key = g[keys[0]].astype(str)
        for k in keys[1:]:
            key = key + "/" + g[k].astype(str)
        g = g.drop(columns=keys).assign(user=key.to_numpy())
    g = g.set_index("time")
    g.attrs.update(frame.attrs)
    g.attrs.update(attrs, by=keys, gridded=True, source=source)
    if view.direction or view.rate or view.resolution is not None:
        g.attrs["allocation"] = view.describe()
    return g


def read_tables(paths, columns=(), time_column=None) -> list:
    """Each of ``paths`` by :func:`read_table`, as :func:`read_frames` reads them."""
    return [read_table(p, columns, time_column) for p in paths]


def read_frames(paths, *, resolution=None, time_column=None, tz=None, by=None, columns=None,
                direction=None, sparse: bool = False, user=None, only_columns: bool = False,
                may_read=(), tables=None) -> pd.DataFrame:
    """Read one or several frames and put them on one regular grid (:func:`prepare`).

    Several frames share the grid of the first (its ``resolution`` or its sampling period):
    each is gridded on it and joined by grid step; a column already present is not taken
    again, and a frame that would add no column is refused (several frames are layers of
    one run, not users). At most one of them may hold several series (users or ``by`` keys). ``columns``
    (names to be read as numbers) are checked in the file that has them, and must exist in one.
    ``direction``: the grants of an allocation log to keep (see :func:`prepare`). ``sparse``:
    a single frame's grid keeps only its occupied steps (see :func:`prepare`); several frames
    are joined on the whole grid. ``user``: the one series of the frame that holds several to
    keep (see :func:`prepare`). ``only_columns``: ``columns`` are all the caller reads, the
    others stay off the grid, but for those of ``may_read`` a frame has (see :func:`prepare`). ``tables``: the ``paths`` already read
    by :func:`read_tables` with these ``columns`` and ``time_column`` (a caller that looked
    at a table before choosing ``by``), so no file is read twice.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise AirlinkError("no frame given")
    columns = list(columns or [])
    tables = list(tables) if tables is not None else read_tables(paths, columns, time_column)
    for c in columns:
        if not any(c in t.columns for t in tables):
            have = ", ".join(dict.fromkeys(str(x) for t in tables for x in t.columns[:25]))
            raise AirlinkError(f"{', '.join(map(str, paths))}: no column {c!r} (columns: {have})")

    def mine(t):
        return [c for c in columns if c in t.columns]
    base = prepare(tables[0], resolution=resolution, time_column=time_column, tz=tz, by=by,
                   columns=mine(tables[0]), source=str(paths[0]), direction=direction,
                   sparse=sparse and len(tables) == 1, user=user, only_columns=only_columns,
                   may_read=may_read)
    res = pd.Timedelta(round(base.attrs["resolution_s"] * 1e9), unit="ns")
    for p, raw in zip(paths[1:], tables[1:]):
        keys = [k for k in ([by] if isinstance(by, str) else (by or [])) if k in raw.columns]
        other = prepare(raw, resolution=res, time_column=time_column if time_column in raw.columns else None,
                        tz=tz, by=keys or None, columns=mine(raw), source=str(p), direction=direction,
                        only_columns=only_columns, may_read=may_read)
        if "user" in other.columns and "user" in base.columns:
            raise AirlinkError(f"{p}: aligning two frames that both hold several series is not supported; "
                               f"merge them first")
        new = [c for c in other.columns if c not in base.columns]
        if not new and "user" not in other.columns:
            raise AirlinkError(
                f"{p}: adds no column to {paths[0]} (all of its columns are there already): several "
                f"FRAMEs are layers of one run joined on one time grid (e.g. a MAC log and a "
                f"capture's flows), not users; to compare devices, put their rows in one frame "
                f"with a column naming the device and pass --by COLUMN")
        if "user" in other.columns:
            base, other = other, base
            new = [c for c in other.columns if c not in base.columns]
        attrs = dict(base.attrs)
        base = base.join(other[new], how="left")
        base.attrs.update(attrs)
    return base


def user_order(label) -> tuple:
    """Sort key of a user label: numbers by value (UE 2 before UE 10), then other labels
    (RNTIs in hex, names) as text."""
    text = str(label)
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def users_of(frame: pd.DataFrame) -> list:
    return sorted(frame["user"].unique().tolist(), key=user_order) if "user" in frame.columns else [None]


def column(frame: pd.DataFrame, name: str, source: str | None = None) -> pd.Series:
    """A column as floats. Missing column, or a value that is not a number (other than an
    empty cell), is an error naming the column (and the first such time and value)."""
    source = source or frame_source(frame)
    if name not in frame.columns:
        have = ", ".join(str(c) for c in frame.columns[:25])
        raise AirlinkError(f"{source}: no column {name!r} (columns: {have})")
    values = _numbers(frame[name], name, source, lambda k: f"at {frame.index[k]}")
    if values.isna().all():
        raise AirlinkError(f"{source}: column {name!r} has no values")
    return values.astype(float)


def wide(frame: pd.DataFrame, name: str, source: str | None = None) -> pd.DataFrame:
    """A column as a ``(time, user)`` table (one column named ``"1"`` for a frame without users)."""
    return wide_many(frame, [name], source)[name]


def wide_many(frame: pd.DataFrame, names, source: str | None = None) -> dict:
    """Several columns as ``(time, user)`` tables on one shared time index (the whole grid,
    also of a sparse frame: its implied steps are missing values, as in the dense grid)."""
    values = {n: column(frame, n, source).to_numpy() for n in names}
    if "user" not in frame.columns:
        return {n: pd.DataFrame({"1": v}, index=frame.index) for n, v in values.items()}
    t = pd.DataFrame(values, index=pd.MultiIndex.from_arrays(
        [frame.index, frame["user"].astype(str).to_numpy()], names=["time", "user"]))
    t = t.groupby(level=["time", "user"], sort=True).mean().unstack("user")
    a = frame.attrs
    if a.get("sparse"):     # the steps no series had a row in, implied by a sparse grid: missing
        lo, hi = a["grid_bins"]
        t = t.reindex(grid_times(np.arange(lo, hi + 1), origin_ns=a["origin_ns"], resolution_ns=a["resolution_ns"]))
        t.index.name = "time"
    return {n: t[n][sorted(t[n].columns, key=user_order)] for n in names}


def pooled_series(frame: pd.DataFrame, names, *, user=None, gap: int = 0, source: str | None = None):
    """Columns as aligned 1-D arrays with every user's series end to end, separated by
    ``gap`` NaN samples (so no pair within ``gap`` lags spans two users); ``user`` keeps one."""
    source = source or frame_source(frame)
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
