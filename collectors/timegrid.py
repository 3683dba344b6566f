"""Put frames on a regular time grid, and estimate the clock offset between two captures.

This is airlink's **one** regular-grid step: inference, the CLI and the experiment runner put
every frame through :func:`to_grid` (one frame, long format) or :func:`align` (several frames,
one wide table). A frame's ``time`` (column or index) is binned onto a grid of ``resolution``
aligned to the Unix epoch (bin ``k`` holds ``[k * res, (k + 1) * res)``), and every column is
aggregated over the rows of a bin with one rule, chosen from the column's name and type:

* ``sum`` for amounts and counts: names ending ``_bytes`` or ``_packets``, and ``packets``,
  ``bytes``, ``retransmissions``, ``dupacks``, ``drops``, ... (:data:`SUM_NAMES`);
* ``last`` for states and identifiers: non-numeric or boolean columns, ``cell_id``, ``rnti``,
  ``harq_id``, ``pci``, ``earfcn``, ``frequency``, names ending ``_id``, ``_cid``, ``_freq``,
  ``_state``, ``_mode`` (:data:`LAST_NAMES`, :data:`LAST_SUFFIX`);
* ``mean`` for every other number: levels in dB/dBm, rates in ``_bps``, ``_ms`` delays,
  MCS, CQI, PRBs per sample;
* ``rate`` (only when asked): the sum of a ``_bytes`` column as bit/s, ``x * 8 / resolution``,
  renamed ``..._bps``; ``max``, ``min``, ``median`` when asked.

Duplicate timestamps are simply several rows in one bin and follow the same rule. A bin no
row falls into is a **gap** and stays missing (NaN) in every column: gaps are never closed up
and never read as zero. ``gaps="zero"`` is for event frames (one row per packet), where an
empty bin truly means nothing was sent: there the ``sum``/``rate`` columns of empty bins are 0.
A bin whose rows are all NaN in a column is NaN in that column.

``how`` overrides the rules: one rule for every column, or ``{column: rule}``.
"""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pandas as pd

from airlink.core.bounds import MAX_GRID_POINTS, MAX_GRID_VALUES, RESOLUTION, check_budget
from airlink.core.errors import AirlinkError
from airlink.core.units import parse_duration

KEYS = ("flow", "direction", "user", "carrier")
SUM_SUFFIX = ("_bytes", "_packets")
SUM_NAMES = {"packets", "bytes", "retransmissions", "fast_retransmissions", "timeout_retransmissions",
             "spurious_retransmissions", "dupacks", "zero_windows", "frame_errors",
             "harq_retransmissions", "rlp_retransmissions", "drops"}
LAST_NAMES = {"cell_id", "rnti", "harq_id", "pci", "earfcn", "arfcn", "frequency", "state", "network_mode",
              "carrier", "user", "flow", "direction"}
LAST_SUFFIX = ("_id", "_cid", "_freq", "_state", "_mode")
RULES = ("mean", "sum", "last", "rate", "max", "min", "median")
GAPS = ("nan", "zero")
TIME_COLUMNS = ("time", "timestamp", "seconds_since_epoch", "time_s")
_UCC = re.compile(r"^\d{4}\.\d{2}\.\d{2}_\d{2}\.\d{2}\.\d{2}$")


def default_rule(column: str, dtype) -> str:
    """The aggregation rule of a column (see the module notes)."""
    if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return "last"
    if column in LAST_NAMES or column.endswith(LAST_SUFFIX):
        return "last"
    if column.endswith(SUM_SUFFIX) or column in SUM_NAMES:
        return "sum"
    return "mean"


def resolution_ns(resolution) -> int:
    """A resolution (``"1s"``, ``"20ms"``, a Timedelta or seconds) in integer nanoseconds."""
    return int(round(_resolution_float_ns(resolution)))


def _resolution_float_ns(resolution) -> float:
    """A resolution in nanoseconds, keeping fractions (``1/600`` s -> 1666666.67 ns)."""
    if isinstance(resolution, pd.Timedelta):
        ns = float(resolution.value)
    elif isinstance(resolution, (float, np.floating)):
        ns = float(resolution) * 1e9
    else:
        try:
            ns = float(parse_duration(resolution) * 10**9)
        except (AirlinkError, TypeError, ValueError):
            raise AirlinkError(f"resolution {resolution!r}: expected a duration such as 100ms or 1s") from None
    if not np.isfinite(ns) or ns <= 0:
        raise AirlinkError(f"resolution must be positive, got {resolution!r}")
    RESOLUTION.check(Fraction(ns) / 10**9)     # exact: 1000 ns is 1 us
    return ns


def bin_of(t_ns: np.ndarray, res_ns: float, origin_ns: int = 0) -> np.ndarray:
    """Grid bin of each time: ``floor((t - origin) / res + 1e-6)`` (integer ``res``: exact)."""
    d = np.asarray(t_ns, dtype=np.int64) - np.int64(origin_ns)
    if float(res_ns).is_integer():
        return d // np.int64(res_ns)
    return np.floor(d / res_ns + 1e-6).astype(np.int64)


_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_NAT = np.iinfo(np.int64).min


def _epoch_ns(v: np.ndarray, mult: int) -> np.ndarray:
    """Numbers of ``1/mult``-second units since the epoch as int64 ns (NaN -> NaT), the whole
    units and the fraction apart: float64 cannot hold 1.6e18 ns to the nanosecond."""
    ok = np.isfinite(v)
    whole = np.floor(np.where(ok, v, 0))
    ns = whole.astype(np.int64) * mult + np.round((np.where(ok, v, 0) - whole) * mult).astype(np.int64)
    ns[~ok] = _NAT
    return ns


def parse_times(values, *, source: str = "frame", column: str = "time", tz=None, format=None, unit=None,
                errors: str = "raise") -> pd.DatetimeIndex:
    """Timestamps of any form airlink meets, as a UTC :class:`pandas.DatetimeIndex`.

    * datetimes (naive ones are in ``tz``, default UTC);
    * numbers since the Unix epoch, in ``unit`` (``s``, ``ms``, ``us``, ``ns``) or, without
      one, the unit chosen by magnitude: above 1e17 ns, above 1e14 us, above 1e11 ms, else
      seconds (so ``1583371396`` and ``1583371396.25`` are seconds, small numbers are seconds
      from 1970);
    * text in ``format`` (a strftime pattern), or without one: UCC / G-NetTrack
      ``YYYY.MM.DD_hh.mm.ss`` (local time: give ``tz``) or ISO 8601 with or without zone and
      with any number of fractional digits per row (``2024-03-01 10:00:00``,
      ``2024-03-01T10:00:00.25``, ``...00.125+01:00``), naive ones in ``tz``; text that is
      neither is parsed value by value by pandas (``03/05/2020`` is read month first).

    With ``errors="raise"`` a value that cannot be read is an error naming ``source``,
    ``column``, the row (0-based, of the table) and the value; with ``"coerce"`` it is NaT.
    Missing values are NaT.

    Datetime-typed input (a ``datetime64`` column or index, with or without a zone) is
    converted as a whole: its int64 nanoseconds are never turned into Python objects.
    """
    if unit is None and pd.api.types.is_datetime64_any_dtype(getattr(values, "dtype", None)):
        return _utc(pd.DatetimeIndex(values).as_unit("ns"), tz, source)
    s = pd.Series(np.asarray(values, dtype=object) if not isinstance(values, pd.Series) else values.to_numpy())
    coerce = errors == "coerce"

    def fail(k, why):
        raise AirlinkError(f"{source}: column {column!r} row {k}: {why} {s.iloc[k]!r}")

    if pd.api.types.is_datetime64_any_dtype(s) and unit is None:
        t = pd.DatetimeIndex(s)
    elif unit is not None or format is None and pd.to_numeric(s, errors="coerce").notna().any():
        if unit is not None and unit not in _UNITS:
            raise AirlinkError(f"{source}: time unit {unit!r} is not one of {', '.join(_UNITS)}")
        num = pd.to_numeric(s, errors="coerce")
        bad = s.notna().to_numpy() & num.isna().to_numpy()
        if bad.any() and not coerce:
            fail(int(np.flatnonzero(bad)[0]), "a number is expected, got")
        v = num.to_numpy(dtype=float)
        if unit is not None:
            mult = _UNITS[unit]
        else:
            big = float(np.nanmax(np.abs(v)))
            mult = 1 if big > 1e17 else 10**3 if big > 1e14 else 10**6 if big > 1e11 else 10**9
        t = pd.DatetimeIndex(pd.to_datetime(_epoch_ns(v, mult), unit="ns", utc=True))
    else:
        strs = s.where(s.notna()).astype("string").str.strip()
        first = strs.dropna().iloc[0] if strs.notna().any() else ""
        fmt = format or ("%Y.%m.%d_%H.%M.%S" if _UCC.match(str(first)) else "ISO8601")
        # rows with a zone (Z, +01:00) are exact instants; the others are in tz
        aware = strs.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$", regex=True).fillna(False).to_numpy(bool)
        naive = ~aware & strs.notna().to_numpy(bool)
        how = "coerce" if coerce else "raise"

        def read(fmt):
            ns = np.full(len(strs), _NAT, dtype=np.int64)
            if aware.any():
                ns[aware] = pd.DatetimeIndex(pd.to_datetime(strs[aware], format=fmt, utc=True, errors=how)).asi8
            if naive.any():
                loc = pd.DatetimeIndex(pd.to_datetime(strs[naive], format=fmt, errors=how))
                ns[naive] = loc.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT").asi8
            return ns
        try:
            try:
                ns = read(fmt)
            except (ValueError, TypeError):
                if format is not None or fmt != "ISO8601":
                    raise
                ns = read("mixed")  # other spellings (03/05/2020 10:00): parsed one by one
            if format is None and fmt == "ISO8601" and coerce and (ns == _NAT).all() and naive.any():
                ns = read("mixed")
        except (ValueError, TypeError):
            bad = pd.to_datetime(strs, format=fmt, errors="coerce", utc=True).isna() & strs.notna()
            fail(int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0,
                 f"cannot read as a time ({'format ' + format if format else 'expected epoch seconds, ISO 8601 or YYYY.MM.DD_hh.mm.ss'}):")
        except Exception as exc:  # unknown zone name
            raise AirlinkError(f"{source}: time zone {tz!r}: {exc}") from None
        t = pd.DatetimeIndex(pd.to_datetime(ns, unit="ns", utc=True))
    return _utc(t, tz, source)


def _utc(t: pd.DatetimeIndex, tz, source: str) -> pd.DatetimeIndex:
    """``t`` in UTC; naive times are in ``tz`` (default UTC)."""
    if t.tz is None:
        try:
            t = t.tz_localize(tz or "UTC", ambiguous="NaT", nonexistent="NaT")
        except Exception as exc:  # unknown zone name
            raise AirlinkError(f"{source}: time zone {tz!r}: {exc}") from None
    return t.tz_convert("UTC")


def time_of(frame: pd.DataFrame, *, time_column=None, tz=None, source: str = "frame"):
    """``(times, rest)``: the frame's timestamps (UTC DatetimeIndex, via :func:`parse_times`)
    from ``time_column``, else the ``time`` column, a DatetimeIndex, or the first of
    :data:`TIME_COLUMNS` present; ``rest`` is the frame without that column (index reset).
    A frame its reader marked as having no time axis (``attrs["time_axis"] is None``, e.g. a
    per-transfer table) is refused with the reader's note."""
    if "time_axis" in frame.attrs and frame.attrs["time_axis"] is None and time_column is None:
        raise AirlinkError(f"{source}: cannot tell: {frame.attrs.get('note', 'the table has no time axis')}")
    if time_column is not None:
        if time_column in frame.columns:
            return (parse_times(frame[time_column], source=source, column=time_column, tz=tz),
                    frame.drop(columns=[time_column]).reset_index(drop=True))
        if frame.index.name == time_column:
            return parse_times(frame.index, source=source, column=time_column, tz=tz), frame.reset_index(drop=True)
        have = ", ".join(map(str, frame.columns[:25]))
        raise AirlinkError(f"{source}: no time column {time_column!r} (columns: {have})")
    if "time" not in frame.columns and isinstance(frame.index, pd.DatetimeIndex):
        return parse_times(frame.index, source=source, column="index", tz=tz), frame.reset_index(drop=True)
    col = next((c for c in TIME_COLUMNS if c in frame.columns), None)
    if col is None and frame.index.name in TIME_COLUMNS:
        return (parse_times(frame.index, source=source, column=str(frame.index.name), tz=tz),
                frame.reset_index(drop=True))
    if col is None:
        raise AirlinkError(f"{source}: no time column or index (expected one of {', '.join(TIME_COLUMNS)}, "
                           f"or name it)")
    return parse_times(frame[col], source=source, column=col, tz=tz), frame.drop(columns=[col]).reset_index(drop=True)


def _rule_of(how, col, dtype, source):
    rule = (how.get(col) if isinstance(how, dict) else how) or default_rule(col, dtype)
    if rule not in RULES:
        raise AirlinkError(f"{source}: unknown aggregation {rule!r} for {col!r} (one of {', '.join(RULES)})")
    return rule


def grid_times(bins, *, origin_ns: int, resolution_ns: float) -> pd.DatetimeIndex:
    """The start times (UTC) of grid bins ``bins``: ``origin + bin * resolution`` rounded to
    the nanosecond - the one formula of :func:`to_grid`'s ``time`` column."""
    bins = np.asarray(bins)
    if float(resolution_ns).is_integer():     # exact in int64 (float64 holds 2**53 ns: 104 days)
        ns = np.int64(origin_ns) + bins.astype(np.int64) * np.int64(resolution_ns)
    else:
        ns = np.round(origin_ns + bins * resolution_ns).astype(np.int64)
    return pd.DatetimeIndex(pd.to_datetime(ns, unit="ns", utc=True))


def to_grid(frame: pd.DataFrame, *, resolution="1s", how=None, by=None, gaps: str = "nan",
            time_column=None, tz=None, origin=None, start_bin=None, stop_bin=None,
            source: str = "frame", sparse: bool = False) -> pd.DataFrame:
    """One frame on a regular grid, long format: ``time`` (UTC, bin start), the ``by`` key
    columns, then every other column aggregated per bin with its rule (module notes).

    ``by`` (a column name or list) keeps one series per key value: each key gets every grid
    step from the frame's first to its last bin (missing where it has no row). Without
    ``by`` all rows of a bin are aggregated together. ``origin`` (a time; default the Unix
    epoch) anchors the grid: bin ``k`` holds ``[origin + k res, origin + (k + 1) res)``, with
    ``k = floor((t - origin) / res + 1e-6)`` so that timestamps rounded to the nanosecond on a
    non-integer period (1.667 ms slots) stay in their own bin. ``resolution`` may then be
    seconds as a float (``1/600``). ``start_bin``/``stop_bin`` (bin numbers) widen the grid. ``frame.attrs`` of the result carry
    ``resolution_s``, ``empty_bins`` (grid steps with no row, per key summed), ``merged_rows``
    (rows that shared a bin with an earlier row: duplicates and sub-resolution samples) and
    ``rules`` (column -> rule), ``origin_ns``, ``resolution_ns`` and ``grid_bins`` (first and
    last bin).

    ``sparse=True`` (with ``by``) keeps only the (bin, key) steps that hold a row: the steps
    the dense result would hold as missing are implied, not built (an allocation log of 44
    users on 218 000 slots is 9.6 M dense rows, most of them empty). Re-expanded on
    :func:`grid_times` of ``grid_bins`` with missing values, it equals the dense result.
    ``attrs["sparse"]`` says which.
    """
    if gaps not in GAPS:
        raise AirlinkError(f"gaps must be one of {', '.join(GAPS)}, got {gaps!r}")
    if isinstance(how, str) and how not in RULES:
        raise AirlinkError(f"unknown aggregation {how!r} (one of {', '.join(RULES)})")
    res = _resolution_float_ns(resolution)
    org = 0 if origin is None else int(pd.Timestamp(origin).tz_localize("UTC").value
                                       if pd.Timestamp(origin).tz is None else pd.Timestamp(origin).value)
    t, data = time_of(frame, time_column=time_column, tz=tz, source=source)
    keys = [by] if isinstance(by, str) else list(by or [])
    for k in keys:
        if k not in data.columns:
            raise AirlinkError(f"{source}: no column {k!r} to split by (columns: {', '.join(map(str, data.columns[:25]))})")
    ok = ~t.isna()
    data = data.loc[ok].reset_index(drop=True)
    if ok.any():        # the grid's size, before any bin is computed or allocated
        span_ns = float(t[ok].max().value - t[ok].min().value)      # int first: float64 of epoch ns is 256 ns coarse
        series = max(1, len(data[keys].drop_duplicates())) if keys else 1
        check_budget((span_ns / res + 1) * series, MAX_GRID_POINTS,
                     f"{source}: resolution {res / 1e9:g} s over {span_ns / 1e9:.6g} s"
                     + (f" and {series} series" if series > 1 else "") + " needs", "grid points")
        columns = len([c for c in data.columns if c not in keys])
        if not (sparse and keys) and columns > 1:       # a dense grid holds every column at every point
            steps = int(span_ns / res + 1e-6) + 1
            check_budget(steps * series * columns, MAX_GRID_VALUES,
                         f"{source}: a dense grid of {steps} steps of {res / 1e9:g} s x {series} series x "
                         f"{columns} columns needs", "values (a coarser resolution, fewer series or fewer "
                         "columns make it smaller)")
    b = bin_of(t[ok].asi8, res, org)
    lo = int(b.min()) if b.size else None
    hi = int(b.max()) if b.size else None
    if start_bin is not None:
        lo = int(start_bin) if lo is None else min(lo, int(start_bin))
    if stop_bin is not None:
        hi = int(stop_bin) if hi is None else max(hi, int(stop_bin))
    rules, out_cols = {}, {}
    if lo is None:
        empty = pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns, UTC]"),
                              **{k: pd.Series([], dtype=data[k].dtype) for k in keys}})
        empty.attrs.update(resolution_s=res / 1e9, origin_ns=org, empty_bins=0, merged_rows=0, rules={})
        return empty
    grid = np.arange(lo, hi + 1)
    if not keys and _one_float_row_per_bin(data, b):
        return _placed_on_grid(data, b, grid, how, gaps, res, org, source)
    data = data.assign(_bin=b)
    groups = ["_bin", *keys]
    sparse = bool(sparse and keys)
    gb = data.groupby(groups, observed=True, sort=False, dropna=False)
    if sparse:      # the occupied steps only, in the dense result's order: key-major, then bin
        occupied = gb.size().index.to_frame(index=False).sort_values([*keys, "_bin"], kind="stable")
        index = pd.MultiIndex.from_frame(occupied[groups])
        n_dense = grid.size * len(occupied[keys].drop_duplicates())
    elif keys:
        combos = data[keys].drop_duplicates().sort_values(keys, kind="stable")
        arrays = [np.tile(grid, len(combos))] + [np.repeat(combos[k].to_numpy(), grid.size) for k in keys]
        index = pd.MultiIndex.from_arrays(arrays, names=groups)
    else:
        index = pd.Index(grid, name="_bin")
    counts = gb.size().reindex(index)
    present = counts.notna().to_numpy()
    for col in [c for c in data.columns if c not in keys and c != "_bin"]:
        rule = _rule_of(how, col, data[col].dtype, source)
        agg = "sum" if rule == "rate" else rule
        if agg != "last" and not pd.api.types.is_numeric_dtype(data[col].dtype):
            raise AirlinkError(f"{source}: cannot take the {rule} of non-numeric column {col!r}")
        if agg == "sum":
            v = gb[col].sum(min_count=1)
        elif agg == "last":
            v = gb[col].last()
        else:
            v = gb[col].agg(agg)
        v = v.reindex(index)
        if agg == "sum" and gaps == "zero":
            v = v.where(present | v.notna(), 0)
        if rule == "rate":
            v = v * 8e9 / res
        name = col[:-len("_bytes")] + "_bps" if rule == "rate" and col.endswith("_bytes") else col
        rules[name] = rule
        out_cols[name] = v.to_numpy()
    bins = index.get_level_values("_bin").to_numpy() if keys else grid
    out = pd.DataFrame({"time": grid_times(bins, origin_ns=org, resolution_ns=res)})
    for k in keys:
        out[k] = index.get_level_values(k).to_numpy()
    for name, v in out_cols.items():
        out[name] = v
    empty = n_dense - len(index) if sparse else int((~present).sum())
    out.attrs.update(resolution_s=res / 1e9, origin_ns=org, empty_bins=int(empty),
                     merged_rows=int(len(data) - present.sum()), rules=rules, resolution_ns=res,
                     grid_bins=[int(lo), int(hi)], sparse=sparse)
    return out


def _one_float_row_per_bin(data: pd.DataFrame, b: np.ndarray) -> bool:
    """Every row in a bin of its own (bins strictly increasing) and every column float64:
    the case of a series already sampled on the grid, where every rule is the row itself."""
    return (len(b) > 0 and bool((b[1:] > b[:-1]).all())
            and all(dt == np.float64 for dt in data.dtypes))


def _placed_on_grid(data: pd.DataFrame, b: np.ndarray, grid: np.ndarray, how, gaps: str, res: float,
                    org: int, source: str) -> pd.DataFrame:
    """:func:`to_grid` without ``by`` when :func:`_one_float_row_per_bin` holds: each row's
    values put at its bin, NaN in the other steps. A rule over one value is that value
    (``sum`` and ``mean`` add it to 0, so -0.0 becomes 0.0 as a group sum makes it), ``rate``
    is ``value * 8e9 / res``; no row is merged."""
    at = b - grid[0]
    present = np.zeros(grid.size, bool)
    present[at] = True
    rules, out = {}, pd.DataFrame({"time": grid_times(grid, origin_ns=org, resolution_ns=res)})
    for col in data.columns:
        rule = _rule_of(how, col, data[col].dtype, source)
        v = np.full(grid.size, np.nan)
        x = data[col].to_numpy()
        v[at] = x + 0.0 if rule in ("sum", "mean", "rate") else x
        if rule in ("sum", "rate") and gaps == "zero":
            v[~present] = 0.0
        if rule == "rate":
            v = v * 8e9 / res
        name = col[:-len("_bytes")] + "_bps" if rule == "rate" and col.endswith("_bytes") else col
        rules[name] = rule
        out[name] = v
    out.attrs.update(resolution_s=res / 1e9, origin_ns=org, empty_bins=int(grid.size - len(b)),
                     merged_rows=0, rules=rules, resolution_ns=res,
                     grid_bins=[int(grid[0]), int(grid[-1])], sparse=False)
    return out


def align(frames, resolution="1s", how=None, *, by=None, gaps="nan") -> pd.DataFrame:
    """Several frames as one table on a common grid: ``time`` plus ``name.column`` per input
    column (from the earliest to the latest time in any frame; see :func:`to_grid` for the
    rules, gaps and ``how``).

    ``frames`` is a dict ``{name: frame}`` or a list (named ``f0``, ``f1``, ...). ``by``
    (default: the key columns ``flow``, ``direction``, ``user``, ``carrier`` a frame has)
    spreads each key value into its own column ``name.column[key]``; pass ``by=[]`` to
    aggregate across them instead. ``gaps`` is one value for all frames or ``{name: value}``
    (``"zero"`` for event frames such as packets; missing names mean ``"nan"``).
    """
    if not isinstance(frames, dict):
        frames = {f"f{i}": f for i, f in enumerate(frames)}
    if not frames:
        raise AirlinkError("align needs at least one frame")
    res = resolution_ns(resolution)
    if isinstance(how, str) and how not in RULES:
        raise AirlinkError(f"unknown aggregation {how!r} (one of {', '.join(RULES)})")
    spans = {}
    for name, fr in frames.items():
        t, _ = time_of(fr, source=f"frame {name!r}")
        t = t[~t.isna()]
        if len(t):
            spans[name] = (int(bin_of(t.asi8.min(), res)), int(bin_of(t.asi8.max(), res)))
    if not spans:
        return pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns, UTC]")})
    lo = min(s[0] for s in spans.values())
    hi = max(s[1] for s in spans.values())
    # the common grid runs from the earliest frame's start to the latest's end: frames from
    # clocks years apart make it huge even when each frame alone is small
    first = min(spans, key=lambda n: spans[n][0])
    last = max(spans, key=lambda n: spans[n][1])
    check_budget(hi - lo + 1, MAX_GRID_POINTS,
                 f"align: resolution {res / 1e9:g} s from the start of frame {first!r} to the end of "
                 f"frame {last!r} ({(hi - lo) * res / 1e9:.6g} s) needs", "grid points")
    out = {"time": pd.to_datetime(np.arange(lo, hi + 1) * res, unit="ns", utc=True)}
    for name, fr in frames.items():
        keys = [k for k in KEYS if k in fr.columns] if by is None else ([by] if isinstance(by, str) else list(by))
        g = to_grid(fr, resolution=pd.Timedelta(res, unit="ns"), how=how, by=keys,
                    gaps=gaps.get(name, "nan") if isinstance(gaps, dict) else gaps,
                    start_bin=lo, stop_bin=hi, source=f"frame {name!r}")
        cols = [c for c in g.columns if c != "time" and c not in keys]
        if keys:
            wide = g.set_index(["time", *keys])[cols].unstack(keys)
            for col, *k in wide.columns:
                out[f"{name}.{col}[{','.join(map(str, k))}]"] = wide[(col, *k)].to_numpy()
        else:
            for col in cols:
                out[f"{name}.{col}"] = g[col].to_numpy()
    frame = pd.DataFrame(out)
    frame.attrs["resolution_s"] = res / 1e9
    return frame


def estimate_clock_offset(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """Clock offset of capture ``b`` relative to capture ``a`` of the same traffic.

    Packets are matched on (src, dst, sport, dport, seq, ack, ip_len, tsval). With matches in
    both directions, ``delta = t_b - t_a`` is ``offset + owd`` for packets going a->b and
    ``offset - owd`` for b->a; assuming equal minimum one-way delays,
    ``offset = (min(delta_ab) + max(delta_ba)) / 2``. With one direction only, the minimum
    (or maximum) delta is returned with ``symmetric=False`` (offset plus the one-way delay).

    Returns ``offset_s``, ``owd_min_s`` (one-way delay estimate), ``matched``, ``symmetric``.
    """
    cols = [c for c in ("src", "dst", "sport", "dport", "seq", "ack", "ip_len_bytes", "tsval")
            if c in a.columns and c in b.columns]
    if not {"src", "dst"} <= set(cols):
        raise AirlinkError("clock offset needs two packets frames (read_pcap)")

    def prep(f):
        d = f[cols].copy()
        for c in ("src", "dst"):
            d[c] = d[c].astype(str)
        d["_t"] = pd.DatetimeIndex(f["time"]).asi8
        return d.drop_duplicates(cols, keep="first")
    pa, pb = prep(a), prep(b)
    m = pa.merge(pb, on=cols, suffixes=("_a", "_b"))
    if m.empty:
        raise AirlinkError("no packets match between the two captures (different traffic or filters?)")
    delta = (m["_t_b"] - m["_t_a"]).to_numpy(np.float64) / 1e9
    # direction: the side where the packet was seen first in most flows is the sender side;
    # packets from a's host have src equal to an address that appears as src first in a
    first_src = str(a["src"].iloc[0])
    ab = (m["src"] == first_src).to_numpy()
    if ab.any() and (~ab).any():
        lo_ab = float(np.min(delta[ab]))
        hi_ba = float(np.max(delta[~ab]))
        if lo_ab < hi_ba:                       # a's first source sits on the b side: swap
            lo_ab, hi_ba = float(np.min(delta[~ab])), float(np.max(delta[ab]))
        offset = (lo_ab + hi_ba) / 2
        owd = (lo_ab - hi_ba) / 2
        return {"offset_s": offset, "owd_min_s": owd, "matched": int(len(m)), "symmetric": True}
    return {"offset_s": float(np.min(delta)), "owd_min_s": float("nan"), "matched": int(len(m)),
            "symmetric": False}
