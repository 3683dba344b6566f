"""Measured logs -> capacity traces, and the one rule for TTIs longer than a link serves.

:func:`from_log` turns one column of a log frame (what ``airlink.collectors`` readers
return: a ``time`` column in UTC plus value columns) into a byte-granular capacity
:class:`~airlink.traces.Trace`. Two kinds of column exist, told apart by the unit:

- **amounts per row** (``bytes``, ``bits``; e.g. NR-Scope's transport block of one DCI, a
  20 ms TBS sum): each row's bytes go into the TTI that contains the row's time,
  ``c_k = sum_{i : floor((t_i - t_0) / tti) = k} x_i``;
- **rates** (``bit/s``, ``kbit/s``, ``Mbit/s``; e.g. iCellSpeed's per-second ``*_tbs``,
  UCC's ``DL_bitrate``): row ``i``'s rate holds from ``t_i`` until the next row, at most one
  row spacing ``d`` (the median spacing of the log; the last row one spacing, or its own
  ``interval_s`` where the log has one, as throughput reports do; gaps are filled by a
  stated rule, see :func:`from_log`), and
  ``c_k = (1/8) * integral over TTI k of rate(t) dt``, exact for any TTI, finer or coarser
  than the rows.

Rows of several carriers (a ``carrier`` column) or iperf3 streams (``stream``) at one time
are summed when the column differs between them, and taken once when it is the same on every carrier row of
every time (a per-device value repeated per carrier, such as iCellSpeed's application
throughput). Rows marked ``retransmission`` (HARQ retransmissions) carry no new bytes and
are left out; the share of such rows is reported as ``meta["harq_retransmission_ratio"]``.

:func:`compare` measures how two traces of one log relate (mean ratio, offset of best
correlation), e.g. scheduled TBS against application throughput.

:func:`split_long_ttis` (defined with the Trace model in traces/trace.py) is the one rule by
which a trace whose TTI is longer than a link serves (1xRTT's and EGPRS's 20 ms frames, 20 ms XCAL rows) becomes replayable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from airlink.core.bounds import COMPARE_MAX_LAG, DEFAULT_FILL_LIMIT as _FILL_LIMIT_TEXT, DEFAULT_SESSION_GAP as _SESSION_GAP_TEXT
from airlink.core.errors import AirlinkError, SchemaError, frame_source
from .trace import Trace, split_long_ttis  # noqa: F401 - split_long_ttis is also this module's API
from airlink.core.units import parse_duration, parse_tti, snap_fraction

#: bytes per unit for per-row amounts
AMOUNT_UNITS = {"bytes": 1.0, "byte": 1.0, "b": 1.0, "bits": 1 / 8, "bit": 1 / 8}
#: bit/s per unit for rates
RATE_UNITS = {"bit/s": 1.0, "bps": 1.0, "kbit/s": 1e3, "kbps": 1e3, "mbit/s": 1e6, "mbps": 1e6,
              "gbit/s": 1e9, "gbps": 1e9}
#: unit implied by a column-name suffix
SUFFIX_UNITS = {"_bps": "bit/s", "_kbps": "kbit/s", "_mbps": "Mbit/s", "_bytes": "bytes", "_bits": "bits"}


def _norm_unit(unit: str) -> str:
    u = str(unit).strip()
    low = u.lower()
    if u.endswith(("Bps", "B/s")):
        raise AirlinkError(f"unknown unit {unit!r}: byte rates are not accepted (MBps is a common typo "
                           f"for Mbps); use bit/s, kbit/s or Mbit/s")
    if low in AMOUNT_UNITS or low in RATE_UNITS:
        return low
    raise AirlinkError(f"unknown unit {unit!r}: use bytes or bits (per row) or bit/s, kbit/s, Mbit/s")


def column_unit(column: str, unit: str | None = None) -> str:
    """The unit of ``column``: its name's suffix (``_bps``, ``_bytes``, ...) or ``unit``.

    A given unit that contradicts the suffix is an error (``tbs_bps`` is in bit/s by its name;
    calling it Mbit/s would scale it a million-fold); a column without either is an error.
    """
    implied = next((u for s, u in SUFFIX_UNITS.items() if column.lower().endswith(s)), None)
    if unit is None:
        if implied is None:
            raise AirlinkError(f"column {column!r}: its name carries no unit; say which it is "
                               f"(bytes or bits per row, bit/s, kbit/s, Mbit/s)")
        return _norm_unit(implied)
    u = _norm_unit(unit)
    if implied is not None:
        imp = _norm_unit(implied)
        same = (AMOUNT_UNITS.get(u), RATE_UNITS.get(u)) == (AMOUNT_UNITS.get(imp), RATE_UNITS.get(imp))
        if not same:
            raise AirlinkError(f"column {column!r} is in {implied} by its name, not {unit}")
    return u


def _tti_of(tti, what: str) -> Fraction:
    if isinstance(tti, pd.Timedelta):
        return Fraction(int(tti.value), 10**9)
    t = parse_tti(tti) if isinstance(tti, str) else Fraction(tti)
    if t <= 0:
        raise AirlinkError(f"{what}: TTI must be positive")
    return t


def _times_ns(frame: pd.DataFrame, time_column: str, source: str) -> np.ndarray:
    if time_column in frame.columns:
        t = frame[time_column]
    elif time_column == "time" and isinstance(frame.index, pd.DatetimeIndex):
        t = frame.index.to_series()
    else:
        raise SchemaError(f"{source}: no time column {time_column!r} "
                          f"(columns: {', '.join(map(str, frame.columns[:12]))})")
    if not pd.api.types.is_datetime64_any_dtype(t):
        raise SchemaError(f"{source}: column {time_column!r} holds {t.dtype} values, not times")
    if t.isna().any():
        raise SchemaError(f"{source}: column {time_column!r}: row {int(np.flatnonzero(t.isna().to_numpy())[0])} "
                          f"has no time")
    if getattr(t.dt, "tz", None) is None:
        t = t.dt.tz_localize("UTC")
    return t.dt.tz_convert("UTC").array.asi8.astype(np.int64)


def _values(frame: pd.DataFrame, column, source: str) -> np.ndarray:
    if not isinstance(column, str):             # several columns: their per-row sum
        parts = np.vstack([_values(frame, c, source) for c in column])
        total = np.nansum(parts, axis=0)
        total[np.isnan(parts).all(axis=0)] = np.nan
        return total
    if column not in frame.columns:
        raise SchemaError(f"{source}: no column {column!r} "
                          f"(columns: {', '.join(map(str, frame.columns[:16]))})")
    raw = frame[column]
    v = pd.to_numeric(raw, errors="coerce")
    bad = v.isna() & raw.notna()
    if bad.any():
        r = int(np.flatnonzero(bad.to_numpy())[0])
        raise SchemaError(f"{source}: column {column!r}: row {r}: {raw.iloc[r]!r} is not a number")
    v = v.to_numpy(float)
    if (v < 0).any():
        r = int(np.flatnonzero(v < 0)[0])
        raise SchemaError(f"{source}: column {column!r}: row {r}: negative value {v[r]:g}")
    return v


def _select_user(frame: pd.DataFrame, user, source: str) -> tuple[pd.DataFrame, str]:
    if "user" not in frame.columns:
        return frame, str(user) if user not in (None, "cell") else "1"
    users = frame["user"].astype(str)
    names = pd.unique(users)
    if user is None:
        if len(names) == 1:
            return frame, str(names[0])
        raise AirlinkError(f"{source}: {len(names)} users in the log; choose one (user=), "
                           f"or 'cell' for the sum of all, or 'busiest' (first users: {', '.join(map(str, names[:8]))})")
    if str(user) == "cell":
        return frame, "cell"
    if str(user) == "busiest":
        counts = users.value_counts()
        user = counts.index[0]
    sel = users == str(user)
    if not sel.any():
        raise AirlinkError(f"{source}: no user {user!r} in the log (users: {', '.join(map(str, names[:8]))}"
                           f"{', ...' if len(names) > 8 else ''})")
    return frame[sel.to_numpy()], str(user)


def _combine_carriers(t: np.ndarray, v: np.ndarray, carrier) -> tuple[np.ndarray, np.ndarray, str]:
    """Per-time value from per-carrier rows: sum, or once if equal on every carrier row."""
    if carrier is None:
        return t, v, "one row per time"
    df = pd.DataFrame({"t": t, "v": v, "c": np.asarray(carrier)})
    multi = df.groupby("t")["v"].transform("size") > 1
    if not multi.any():
        return t, v, "one carrier row per time"
    g = df[multi].groupby("t")["v"].agg(["min", "max", "count", "size"])
    # one value per time (nunique with NaN counted): all missing, or none missing and min == max
    same = (g["count"] == 0) | ((g["count"] == g["size"]) & (g["min"] == g["max"]))
    if same.all():
        g = df.groupby("t", sort=True)["v"].first()
        return g.index.to_numpy(np.int64), g.to_numpy(float), "same value on every carrier row: taken once"
    g = df.groupby("t", sort=True)["v"].sum(min_count=1)
    return g.index.to_numpy(np.int64), g.to_numpy(float), "summed over carriers"


def _row_spacing_ns(t: np.ndarray) -> int | None:
    d = np.diff(np.unique(t))
    return int(np.median(d)) if d.size else None


def _tti_from_rows(t: np.ndarray, source: str) -> Fraction:
    """The TTI a log's rows imply: their median spacing, snapped to a simple fraction."""
    sp = _row_spacing_ns(t)
    if sp is None or sp <= 0:
        raise AirlinkError(f"{source}: one time only: the TTI cannot come from the rows; give it")
    return snap_fraction(Fraction(sp, 10**9))


#: how the silence of a gap is filled (:func:`from_log`)
GAP_RULES = ("hold", "zero", "interpolate", "error")
#: the default longest gap ``hold``/``interpolate`` fill, in seconds (declared in airlink.core.bounds)
DEFAULT_FILL_LIMIT = parse_duration(_FILL_LIMIT_TEXT)
#: the default silence that ends a session (:func:`split_sessions`), in seconds
DEFAULT_SESSION_GAP = parse_duration(_SESSION_GAP_TEXT)
#: a step up to this many row spacings is clock jitter, not a gap
JITTER_STEPS = 1.5


def _merge_times(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Rates of rows sharing one time -> their mean (the rule of the inference grid, so a
    UCC log's duplicate timestamps count the same everywhere); returns the count merged."""
    u, inv = np.unique(t, return_inverse=True)
    if u.size == t.size:
        return t, v, 0
    sums = np.bincount(inv, weights=v)
    return u, sums / np.bincount(inv), int(t.size - u.size)


def _rate_segments(t, v, sp: int, rule: str, fill_limit_ns: float, source: str, last_ns: int | None = None):
    """The rate of a log as pieces ``[a, b)`` with a rate going linearly from ``ra`` to ``rb``
    (bytes per ns), plus the fill intervals of each gap rule.

    Row ``i`` holds its rate to the next row when the step is at most :data:`JITTER_STEPS`
    row spacings ``sp``; a longer step is a **gap**: the row holds one spacing and the rest,
    ``[t_i + sp, t_{i+1})``, is filled by ``rule`` when the step is at most
    ``fill_limit_ns`` (``hold``: the row's rate; ``interpolate``: linear from row ``i``'s
    rate to row ``i+1``'s; ``zero``: nothing) and left at zero capacity when it is longer.
    The last row holds one spacing, or ``last_ns`` when the log says how long it lasted."""
    n = t.size
    step = np.append(np.diff(t), sp if last_ns is None else last_ns).astype(np.float64)
    gap = step > JITTER_STEPS * sp
    if rule == "error" and gap.any():
        i = int(np.flatnonzero(gap)[0])
        raise AirlinkError(f"{source}: {int(gap.sum())} gap(s) in the log (the first: {step[i] / 1e9:g} s without "
                           f"rows after {pd.Timestamp(int(t[i]), tz='UTC')}, row spacing {sp / 1e9:g} s)")
    held = np.where(gap, sp, step)
    a, b, ra, rb = [t.astype(np.float64)], [t + held], [v], [v]
    fill = {r: (np.empty(0), np.empty(0)) for r in ("hold", "interpolate", "zero")}
    gi = np.flatnonzero(gap)
    if gi.size:
        g0, g1 = t[gi] + float(sp), t[gi] + step[gi]
        within = step[gi] <= fill_limit_ns
        if rule in ("hold", "interpolate"):
            k = gi[within]
            nxt = np.minimum(k + 1, n - 1)
            a.append(g0[within]); b.append(g1[within])
            ra.append(v[k]); rb.append(v[k] if rule == "hold" else v[nxt])
            fill[rule] = (g0[within], g1[within])
            fill["zero"] = (g0[~within], g1[~within])
        else:
            fill["zero"] = (g0, g1)
    a, b, ra, rb = (np.concatenate(x).astype(np.float64) for x in (a, b, ra, rb))
    order = np.argsort(a, kind="stable")
    return a[order], b[order], ra[order], rb[order], fill


def _cumulative(a, b, ra, rb, y):
    """Integral of the piecewise-linear rate from the first piece to each point of ``y``
    (exact: a linear rate integrates to a quadratic)."""
    widths = b - a
    area = widths * (ra + rb) / 2
    before = np.concatenate([[0.0], np.cumsum(area)])
    j = np.searchsorted(a, y, side="right") - 1
    out = np.zeros(y.size)
    ok = j >= 0
    jj = j[ok]
    x = np.clip(y[ok] - a[jj], 0.0, widths[jj])
    slope = np.divide(rb[jj] - ra[jj], widths[jj], out=np.zeros(jj.size), where=widths[jj] > 0)
    out[ok] = before[jj] + x * ra[jj] + x * x * slope / 2
    return out


def _touched(intervals, w0: float, tti_ns: float, n: int) -> np.ndarray:
    """Which of the ``n`` TTIs from ``w0`` overlap any of the intervals ``(lo, hi)`` (bool per TTI)."""
    lo, hi = (np.asarray(x, np.float64) for x in intervals)
    if lo.size == 0 or n == 0:
        return np.zeros(n, bool)
    k0 = np.clip(np.floor((lo - w0) / tti_ns), 0, n).astype(np.int64)
    k1 = np.clip(np.ceil((hi - w0) / tti_ns), 0, n).astype(np.int64)
    keep = k1 > k0
    marks = np.zeros(n + 1, np.int64)
    np.add.at(marks, k0[keep], 1)
    np.add.at(marks, k1[keep], -1)
    return np.cumsum(marks[:n]) > 0


def _ttis_touched(intervals, w0: float, tti_ns: float, n: int) -> int:
    """How many of the ``n`` TTIs from ``w0`` overlap any of the intervals."""
    return int(_touched(intervals, w0, tti_ns, n).sum())


def _filled_spans_ns(fill: dict, r0: float, wend: float, origin: int) -> list:
    """The fill intervals of every rule, clipped to ``[r0, wend)`` and merged, as
    ``[start, end)`` pairs of integer ns since the epoch (``origin`` is their zero)."""
    lo = np.concatenate([f[0] for f in fill.values()]).astype(np.float64)
    hi = np.concatenate([f[1] for f in fill.values()]).astype(np.float64)
    lo, hi = np.maximum(lo, r0), np.minimum(hi, wend)
    keep = hi > lo
    order = np.argsort(lo[keep], kind="stable")
    out: list = []
    for a, b in zip(lo[keep][order], hi[keep][order]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [[origin + int(round(a)), origin + int(round(b))] for a, b in out]


def measured_ttis(tr: Trace) -> np.ndarray:
    """Per TTI of a :func:`from_log` trace, whether the log measured it: False where a gap
    rule (hold, interpolate, or zero for want of rows) filled any part of the TTI
    (``meta["filled_ns"]``); all True for a trace without that record."""
    spans = tr.meta.get("filled_ns") or []
    if not spans:
        return np.ones(tr.n_tti, bool)
    lo, hi = np.array(spans, dtype=np.int64).T
    start = int(tr.meta.get("start_ns", 0))
    return ~_touched(((lo - start).astype(np.float64), (hi - start).astype(np.float64)), 0.0,
                     float(tr.tti * 10**9), tr.n_tti)


def _clipped_s(intervals, w0: float, w1: float) -> float:
    lo, hi = intervals
    return float(np.clip(np.minimum(hi, w1) - np.maximum(lo, w0), 0, None).sum()) / 1e9


def _log_start_ns(frame: pd.DataFrame, time_column: str, source: str) -> int:
    """The instant a ``start`` duration counts from: the log's first row, of any user,
    direction or value - not the chosen user's first row (in the NR-Scope afternoon log RNTI
    25864's first grant comes 64 s after the log's first DCI). A log numbered in slots from
    its first logged DCI (``slot`` with ``attrs["tti_s"]``: NR-Scope, airlink's MAC logs) starts
    at slot 0, also when that DCI held no allocation and the reader dropped it - the slot
    ``airlink cell --log-start`` counts from."""
    t = _times_ns(frame, time_column, source)
    i = int(np.argmin(t))
    if "slot" in frame.columns and frame.attrs.get("tti_s"):
        slot = pd.to_numeric(frame["slot"], errors="coerce").to_numpy(float)
        if np.isfinite(slot[i]) and slot[i] >= 0:
            return int(t[i]) - int(round(slot[i] * float(Fraction(frame.attrs["tti_s"])) * 1e9))
    return int(t[i])


def _instant_ns(value, first_ns: int, what: str) -> int:
    """``value`` as ns since the epoch: a duration (``30s``, a number of seconds) counts from
    ``first_ns``; a date or Timestamp is absolute (UTC unless it names its zone)."""
    if not isinstance(value, (pd.Timestamp, np.datetime64)):
        try:
            return first_ns + int(parse_duration(value) * 10**9)
        except (AirlinkError, ValueError, TypeError):
            pass
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise AirlinkError(f"{what} {value!r} is neither a duration from the log's start (30s) nor a date "
                           f"(2019-12-16T11:55:00)") from None
    return int((ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")).value)


def from_log(frame: pd.DataFrame, *, column: str, unit: str | None = None, user=None,
             time_column: str = "time", tti=None, source: str | None = None, gaps: str = "hold",
             fill_limit=DEFAULT_FILL_LIMIT, start=None, duration=None) -> Trace:
    """A byte-granular capacity :class:`Trace` from one column of a log frame.

    Parameters
    ----------
    frame : DataFrame
        A log with a UTC ``time`` column (or ``time_column``) and ``column``; optional
        ``user``, ``carrier`` and ``retransmission`` columns are honoured (module notes).
    column : str or list of str
        Transport-block or throughput column, e.g. ``tbs_bytes``, ``tbs_bps``; several
        columns (e.g. ``["5G_TBS", "4G_TBS"]`` of an EN-DC log) are summed row by row.
    unit : str, optional
        ``bytes``/``bits`` (amount per row) or ``bit/s``/``kbit/s``/``Mbit/s`` (rate). ``None``
        takes it from the column name's suffix; a contradicting unit is an error.
    user : str, optional
        One user of a multi-user log, ``"cell"`` (sum of all users) or ``"busiest"`` (the user
        with the most rows). Needed when the log has several users.
    tti : str, Timedelta or Fraction (seconds), optional
        TTI of the trace. ``None``: the log's slot timing (``frame.attrs["tti_s"]``, set by
        readers of per-slot logs), else the median spacing of the rows.
    source : str, optional
        Provenance; default ``frame.attrs["source"]``.
    gaps : {"hold", "zero", "interpolate", "error"}
        How a gap of a rate column (a step longer than 1.5 row spacings) is filled after its
        row's own spacing: the row's rate held, zero capacity, the rate interpolated linearly
        to the next row's, or an error. Amounts per row have no gaps (no row, no bytes).
    fill_limit : duration, default 10 s
        The longest step ``hold`` and ``interpolate`` fill; the silence of a longer step is
        zero capacity (and with :func:`split_sessions`, a step longer than its threshold
        ends a session instead).
    start, duration : optional
        The span of the trace: ``start`` a duration from the log's first row, of any user
        (:func:`_log_start_ns`: slot 0 of a slot-numbered log; ``"30s"``), or a date;
        ``duration`` its length. Rates are integrated over exactly that span (a row before
        ``start`` holds into it by the rules above); amounts of rows inside it are kept.

    Returns
    -------
    Trace
        One user, bytes per TTI, TTI 0 at the span's start (``meta["start_ns"]``);
        ``meta`` names source, reader, column, unit, user and the rule applied, plus
        ``rows``, ``gap_s`` (seconds of zero capacity for want of rows), ``gaps`` (the rule,
        its limit, how many gaps and how many TTIs each rule filled), ``filled_ns`` (the
        ``[start, end)`` spans, ns since the epoch, that a gap rule filled; absent when none:
        :func:`measured_ttis`) and, for logs with HARQ marks, ``harq_retransmission_ratio``.
    """
    src = source or frame_source(frame, "log")
    if "time_axis" in frame.attrs and frame.attrs["time_axis"] is None:
        raise AirlinkError(f"{src}: a trace needs times: {frame.attrs.get('note', 'the table has no time axis')}")
    if gaps not in GAP_RULES:
        raise AirlinkError(f"{src}: unknown gap rule {gaps!r} (one of {', '.join(GAP_RULES)})")
    fill_s = parse_duration(fill_limit) if not isinstance(fill_limit, Fraction) else fill_limit
    columns = [column] if isinstance(column, str) else list(column)
    if not columns:
        raise AirlinkError(f"{src}: no column given")
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise SchemaError(f"{src}: no column {absent[0]!r} "
                          f"(columns: {', '.join(map(str, frame.columns[:16]))})")
    try:
        units = {column_unit(c, unit) for c in columns}
    except AirlinkError as exc:
        raise AirlinkError(f"{src}: {exc}") from None
    if len(units) > 1:
        raise AirlinkError(f"{src}: columns {', '.join(columns)} are in different units ({', '.join(sorted(units))})")
    u = units.pop()
    column = columns[0] if len(columns) == 1 else columns
    rate = u in RATE_UNITS
    if frame.empty:
        raise AirlinkError(f"{src}: the log has no rows")
    log_start = _log_start_ns(frame, time_column, src) if start is not None else None
    frame, uname = _select_user(frame, user, src)
    retx_ratio = None
    if "retransmission" in frame.columns:
        rt = frame["retransmission"].astype(bool).to_numpy()
        retx_ratio = float(rt.mean()) if rt.size else float("nan")
        frame = frame[~rt]
    t = _times_ns(frame, time_column, src)
    v = _values(frame, column, src)
    ok = ~np.isnan(v)
    t, v = t[ok], v[ok]
    if t.size == 0:
        raise AirlinkError(f"{src}: column {column!r} has no values" + (f" for user {uname}" if user else ""))
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    part_col = next((c for c in ("carrier", "stream") if c in frame.columns), None)
    carrier = frame[part_col].to_numpy()[ok][order] if part_col else None
    t_all = t
    merged = 0
    if rate:
        t, v, carrier_rule = _combine_carriers(t, v, carrier)
        if carrier is None:
            t, v, merged = _merge_times(t, v)
            if merged:
                carrier_rule = f"{merged} row(s) sharing a time with another: their mean rate"
    else:
        carrier_rule = "amounts summed per TTI"
    if tti is not None:
        tti_f, tti_from = _tti_of(tti, src), "given"
    elif frame.attrs.get("tti_s"):
        tti_f, tti_from = Fraction(frame.attrs["tti_s"]), "the log's slot timing"
    else:
        tti_f, tti_from = _tti_from_rows(t_all, src), "median row spacing"
    tti_ns = tti_f * 10**9
    sp = (_row_spacing_ns(t) or int(tti_ns)) if rate else None
    last_ns = None
    if rate and "interval_s" in frame.columns:        # a throughput report: the last row's own length
        iv = pd.to_numeric(frame["interval_s"], errors="coerce").to_numpy(float)[ok][order]
        at_last = iv[t_all == t_all[-1]]
        if np.isfinite(at_last).any() and np.nanmax(at_last) > 0:
            last_ns = int(round(float(np.nanmax(at_last)) * 1e9))
    first = int(t[0])
    w0 = _instant_ns(start, log_start, "start") if start is not None else first
    if duration is not None:
        dur = parse_duration(duration) if not isinstance(duration, Fraction) else duration
        if dur <= 0:
            raise AirlinkError(f"{src}: duration must be positive")
        w1 = w0 + int(dur * 10**9)
    else:
        w1 = int(t[-1]) + ((sp if last_ns is None else last_ns) if rate else 1)
    if w1 <= w0:
        raise AirlinkError(f"{src}: the span from {pd.Timestamp(w0, tz='UTC')} is empty (the log runs "
                           f"{pd.Timestamp(first, tz='UTC')} to {pd.Timestamp(int(t[-1]), tz='UTC')})")
    gap_meta = {"rule": gaps, "fill_limit_s": float(fill_s)}
    filled_ns: list = []
    if not rate:
        inside = (t >= w0) & (t < w1) if duration is not None else t >= w0
        t, v = t[inside], v[inside]
        if t.size == 0:
            raise AirlinkError(f"{src}: no rows between {pd.Timestamp(w0, tz='UTC')} and {pd.Timestamp(w1, tz='UTC')}")
        k = ((t - w0) * tti_ns.denominator) // tti_ns.numerator
        n = int(np.ceil(Fraction(w1 - w0) / tti_ns)) if duration is not None else int(k[-1]) + 1
        vals = np.bincount(k, weights=v * AMOUNT_UNITS[u], minlength=n)[:n]
        gap_s = 0.0
        gap_meta = {"rule": "not applicable: amounts per row (no row, no bytes)"}
        rule = f"bytes of each row in the TTI holding its time ({u} per row)"
    else:
        # times in ns from an integer origin: floats near zero keep ns precision over days
        origin = min(int(t[0]), w0)
        a, b, ra, rb, fill = _rate_segments(t - origin, v * RATE_UNITS[u] / 8 / 1e9, sp, gaps,
                                              float(fill_s) * 1e9, src, last_ns)
        n = int(np.ceil(Fraction(w1 - w0) / tti_ns))
        r0 = float(w0 - origin)
        edges = r0 + np.arange(n + 1) * float(tti_ns)
        vals = np.diff(_cumulative(a, b, ra, rb, edges))
        vals[vals < 0] = 0.0
        wend = float(edges[-1])
        covered = float((np.clip(np.minimum(b, wend) - np.maximum(a, r0), 0, None)).sum()) / 1e9
        gap_s = max(0.0, (wend - r0) / 1e9 - covered)
        gap_meta.update({
            "gaps": int(sum(f[0].size for f in fill.values())),
            "filled_s": {r: _clipped_s(f, r0, wend) for r, f in fill.items() if f[0].size},
            "filled_ttis": {r: _ttis_touched(f, r0, float(tti_ns), n) for r, f in fill.items() if f[0].size}})
        filled_ns = _filled_spans_ns(fill, r0, wend, origin)
        filled = {"hold": "held", "interpolate": "interpolated linearly to the next row's rate",
                  "zero": "left at zero", "error": "refused"}[gaps]
        rule = (f"rate of each row ({u}) held until the next row; a step over {JITTER_STEPS:g} row spacings "
                f"({sp / 1e6:g} ms) is a gap: {filled} after the row's spacing"
                + (f" up to {float(fill_s):g} s, zero beyond" if gaps in ("hold", "interpolate") else "")
                + "; integrated over each TTI")
    meta = {"source": src, "reader": frame.attrs.get("reader"), "column": "+".join(columns), "unit": u,
            "user": uname, "rule": rule, "carriers": carrier_rule, "tti_from": tti_from,
            "rows": int(t_all.size), "gap_s": gap_s, "gaps": gap_meta, "start_ns": int(w0)}
    if filled_ns:
        meta["filled_ns"] = filled_ns
    if start is not None or duration is not None:
        meta["span"] = {"start_ns": int(w0), "end_ns": int(w0 + n * tti_ns)}
    if retx_ratio is not None:
        meta["harq_retransmission_ratio"] = retx_ratio
        meta["retransmissions"] = "left out (a HARQ retransmission carries no new bytes)"
    return Trace(vals, tti_f, [uname], "bytes", meta)


def split_sessions(frame: pd.DataFrame, gap=DEFAULT_SESSION_GAP, *, time_column: str = "time") -> list:
    """The sessions of a log: a step between consecutive row times longer than ``gap``
    (a duration, default 60 s) ends one. Returns the frames of the sessions in time order,
    each with the log's ``attrs`` plus ``session`` (1-based) and ``sessions`` (the count)."""
    g = parse_duration(gap) if not isinstance(gap, Fraction) else gap
    if g <= 0:
        raise AirlinkError("a session gap must be positive")
    t = _times_ns(frame, time_column, frame_source(frame, "log"))
    order = np.argsort(t, kind="stable")
    ts = t[order]
    cuts = np.flatnonzero(np.diff(ts) > int(g * 10**9)) + 1
    parts = np.split(order, cuts)
    out = []
    for i, rows in enumerate(parts, 1):
        sub = frame.iloc[np.sort(rows)]
        sub.attrs = {**frame.attrs, "session": i, "sessions": len(parts)}
        out.append(sub)
    return out


def from_log_sessions(frame: pd.DataFrame, *, column, gap=DEFAULT_SESSION_GAP, user=None,
                      time_column: str = "time", tti=None, start=None, duration=None, **kw) -> list:
    """One :func:`from_log` trace per session of a log (a silence longer than ``gap`` ends
    one, :func:`split_sessions`), all at one TTI: ``tti``, else the log's slot timing, else
    the median spacing of the user's rows with values (over the whole log). Sessions are found on the rows of the chosen user
    that hold a value of ``column``; ``start``/``duration`` first keep the rows in that span.
    Each trace's ``meta["session"]`` holds its number, the count and the gap."""
    src = kw.get("source") or frame_source(frame, "log")
    columns = [column] if isinstance(column, str) else list(column)
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise SchemaError(f"{src}: no column {absent[0]!r} (columns: {', '.join(map(str, frame.columns[:16]))})")
    attrs = dict(frame.attrs)
    log_start = _log_start_ns(frame, time_column, src) if start is not None else None
    sel, uname = _select_user(frame, user, src)
    if "user" in frame.columns and str(user) != "cell":
        user = uname
    has = np.zeros(len(sel), bool)
    for c in columns:
        has |= pd.to_numeric(sel[c], errors="coerce").notna().to_numpy()
    sel = sel[has]
    if sel.empty:
        raise AirlinkError(f"{src}: column {'+'.join(columns)!r} has no values")
    t = _times_ns(sel, time_column, src)
    if tti is not None:
        tti_f, tti_from = _tti_of(tti, src), "given"
    elif attrs.get("tti_s"):
        tti_f, tti_from = Fraction(attrs["tti_s"]), "the log's slot timing"
    else:
        tti_f, tti_from = _tti_from_rows(t, src), "median row spacing of the whole log"
    if start is not None or duration is not None:
        w0 = _instant_ns(start, log_start, "start") if start is not None else int(t.min())
        w1 = w0 + int(parse_duration(duration) * 10**9) if duration is not None else int(t.max()) + 1
        sel, t = sel[(t >= w0) & (t < w1)], t[(t >= w0) & (t < w1)]
        if sel.empty:
            raise AirlinkError(f"{src}: no rows between {pd.Timestamp(w0, tz='UTC')} and {pd.Timestamp(w1, tz='UTC')}")
    sel.attrs = attrs
    g = parse_duration(gap) if not isinstance(gap, Fraction) else gap
    out = []
    for part in split_sessions(sel, g, time_column=time_column):
        tr = from_log(part, column=column, user=user, time_column=time_column, tti=tti_f, **kw)
        tr.meta["tti_from"] = tti_from
        tr.meta["session"] = {"number": part.attrs["session"], "of": part.attrs["sessions"], "gap_s": float(g)}
        out.append(tr)
    return out


@dataclass
class Comparison:
    """How trace ``a`` relates to trace ``b`` of the same log (same TTI).

    Only TTIs the log measured in both traces are paired (:func:`measured_ttis`: a TTI a gap
    rule filled is left out, since a held or zeroed second says nothing about how the two
    columns relate). ``mean_ratio`` = sum(a) / sum(b) over the measured TTIs of the common
    span; ``corr_0`` the Pearson correlation of those per-TTI values unshifted; ``best_lag_s``
    the shift of ``b`` against ``a`` (positive: ``b`` trails ``a``) that maximises the
    correlation ``corr_best`` of the pairs measured in both, over lags up to ``max_lag_s``.
    ``measured_ttis`` counts the pairs unshifted and ``filled_left_out`` the TTIs of the
    common span left out for a fill.
    """
    a: str
    b: str
    tti_s: float
    mean_ratio: float
    corr_0: float
    best_lag_s: float
    corr_best: float
    corr_by_lag: dict = field(default_factory=dict)
    measured_ttis: int = 0
    filled_left_out: int = 0

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("a", "b", "tti_s", "mean_ratio", "corr_0", "best_lag_s",
                                              "corr_best", "measured_ttis", "filled_left_out")}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"lag_s": list(self.corr_by_lag), "corr": list(self.corr_by_lag.values())})


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def compare(a: Trace, b: Trace, *, max_lag=COMPARE_MAX_LAG) -> Comparison:
    """Mean ratio and best-correlation offset of two one-user traces on the same TTI, over
    the TTIs both logs measured (:class:`Comparison`).

    Both are aligned by their ``meta["start_ns"]`` onto the common span; lag ``L`` TTIs
    pairs ``a[k]`` with ``b[k + L]``.
    """
    if a.tti != b.tti:
        raise AirlinkError(f"traces to compare need the same TTI ({a.tti_ms:g} ms vs {b.tti_ms:g} ms)")
    tti_ns = float(a.tti * 10**9)
    off = int(round((int(b.meta.get("start_ns", 0)) - int(a.meta.get("start_ns", 0))) / tti_ns))
    x, y = a.values[:, 0], b.values[:, 0]
    mx, my = measured_ttis(a), measured_ttis(b)
    # put both on a's index: b[j] sits at a-index j + off
    lo, hi = max(0, off), min(x.size, y.size + off)
    if hi - lo < 3:
        raise AirlinkError("the traces hardly overlap in time")
    both = mx[lo:hi] & my[lo - off:hi - off]
    if both.sum() < 3:
        raise AirlinkError("the traces share fewer than 3 measured TTIs (the rest were filled over gaps)")
    xa, yb = x[lo:hi][both], y[lo - off:hi - off][both]
    mean_ratio = float(xa.mean() / yb.mean()) if yb.mean() > 0 else float("nan")
    max_l = int(float(parse_duration(max_lag)) / float(a.tti)) if not isinstance(max_lag, (int, float)) \
        else int(max_lag / float(a.tti))
    corr = {}
    for L in range(-max_l, max_l + 1):
        i0, i1 = max(lo, lo - L), min(hi, hi - L)
        if i1 - i0 >= 3:
            j0, j1 = i0 + L - off, i1 + L - off
            m = mx[i0:i1] & my[j0:j1]
            corr[L * float(a.tti)] = _corr(x[i0:i1][m], y[j0:j1][m])
    valid = {k: c for k, c in corr.items() if c == c}
    best = max(valid, key=valid.get) if valid else float("nan")
    return Comparison(a.meta.get("column", "a"), b.meta.get("column", "b"), float(a.tti), mean_ratio,
                      corr.get(0.0, float("nan")), best, valid.get(best, float("nan")), corr,
                      int(both.sum()), int(both.size - both.sum()))
