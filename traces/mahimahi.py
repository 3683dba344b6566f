"""Mahimahi trace files: read into a capacity Trace, write a Trace back out.

A Mahimahi trace has one non-negative integer per line: a millisecond at which one
delivery opportunity for an MTU-sized packet occurs. Repeated values are several
opportunities in that millisecond; values never decrease; the file loops with a period
equal to its last value (mm-link adds the last value to its base time when it wraps).

Mapping used by airlink (1 ms TTIs):

- value ``v >= 1`` is an opportunity at the *end* of millisecond ``v - 1``, so it adds
  ``opportunity_bytes`` to TTI ``v - 1``; a trace whose last value is ``P`` is ``P`` TTIs long.
- value ``0`` happens once, at the start. After the first loop mm-link's opportunities at
  ``0 + P`` coincide with those at ``P``, so in steady state they belong to TTI ``P - 1``;
  airlink puts them there and records how many there were in ``meta["mahimahi_zero_count"]``
  so that writing the Trace back reproduces the file byte for byte.

``opportunity_bytes`` defaults to 1500 (the README of the traces); use 1504 to match
mm-link's own accounting, which counts the 4-byte TUN header of every packet.

Writing (:func:`write_trace`) works at any TTI length with a running reserve: the
exported cumulative bytes after every millisecond ``m`` are
``floor(C(m) / opportunity) * opportunity``, where ``C(m)`` is the Trace's cumulative
capacity at ``m`` ms, so they differ from ``C(m)`` by less than one opportunity. At the
end one extra opportunity is written when a remainder is left, so that the last line
equals the duration and the file loops with the Trace's period.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from airlink.core.bounds import MAX_MAHIMAHI_OPPORTUNITIES, OPPORTUNITY_BYTES, check_budget
from airlink.core.errors import FormatError
from .trace import Trace
from airlink.core.units import DEFAULT_OPPORTUNITY_BYTES

#: Longest trace period airlink accepts, in ms (24 h). A trace is expanded to one value per
#: millisecond of its period (16 bytes per ms while reading), so this bounds the memory a
#: trace file can make the reader allocate at ~1.4 GB whatever its last line says; real
#: cellular traces are seconds to hours long.
MAX_PERIOD_MS = 24 * 3600 * 1000


def parse_trace_text(text: str, name: str = "<trace>") -> np.ndarray:
    """The opportunity timestamps (ms, int64) of Mahimahi trace text, checked line by line."""
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise FormatError(f"{name}: empty trace file (expected one millisecond timestamp per line)")
    try:
        # fast path: every line a plain integer
        values = np.array([int(x) for x in lines], dtype=np.int64)
    except (ValueError, OverflowError):
        values = None
    if values is None or (values < 0).any():
        values = []
        for no, line in enumerate(lines, 1):
            s = line.strip()
            if not s:
                if no == len(lines):
                    continue
                raise FormatError(f"{name}: line {no}: empty line (expected a millisecond timestamp)")
            if not (s.isascii() and s.isdigit()):
                what = "negative timestamp" if s.lstrip("-").isdigit() else f"not a non-negative integer: {s[:40]!r}"
                raise FormatError(f"{name}: line {no}: {what}")
            if len(s.lstrip("0")) > len(str(MAX_PERIOD_MS)) or int(s) > MAX_PERIOD_MS:
                raise FormatError(f"{name}: line {no}: timestamp {s[:20]}{'...' if len(s) > 20 else ''} ms "
                                  f"is beyond airlink's limit of {MAX_PERIOD_MS} ms (24 h) for a trace period")
            values.append(int(s))
        values = np.array(values, dtype=np.int64)
    bad = np.flatnonzero(np.diff(values) < 0)
    if bad.size:
        no = int(bad[0]) + 2
        raise FormatError(f"{name}: line {no}: timestamps must not decrease "
                          f"({values[no - 1]} after {values[no - 2]})")
    if values[-1] == 0:
        raise FormatError(f"{name}: line {len(values)}: the last timestamp is 0, so the trace has "
                          "no period (mm-link loops with period = last value)")
    if values[-1] > MAX_PERIOD_MS:
        raise FormatError(f"{name}: line {len(values)}: timestamp {int(values[-1])} ms is beyond "
                          f"airlink's limit of {MAX_PERIOD_MS} ms (24 h) for a trace period")
    return values


def read_trace(path, opportunity_bytes: int = DEFAULT_OPPORTUNITY_BYTES) -> Trace:
    """Read a Mahimahi trace file into a one-user capacity Trace of 1 ms TTIs (bytes per TTI)."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text file (a Mahimahi trace is one integer per line)") from None
    return trace_from_timestamps(parse_trace_text(text, str(path)), opportunity_bytes,
                                 source=str(path))


def trace_from_timestamps(values, opportunity_bytes: int = DEFAULT_OPPORTUNITY_BYTES,
                          source: str = "mahimahi") -> Trace:
    """A capacity Trace from Mahimahi opportunity timestamps (see the module notes)."""
    OPPORTUNITY_BYTES.check(opportunity_bytes)
    values = np.asarray(values, dtype=np.int64)
    period = int(values[-1])
    if period > MAX_PERIOD_MS:
        raise FormatError(f"{source}: trace period {period} ms is beyond airlink's limit of "
                          f"{MAX_PERIOD_MS} ms (24 h)")
    zeros = int(np.count_nonzero(values == 0))
    bins = np.where(values == 0, period - 1, values - 1)
    counts = np.bincount(bins, minlength=period)
    meta = {"source": source, "format": "mahimahi",
            "parameters": {"opportunity_bytes": int(opportunity_bytes)},
            "mahimahi_zero_count": zeros}
    return Trace(counts.astype(np.float64) * opportunity_bytes, Fraction(1, 1000), ["1"], "bytes", meta)


def opportunities_per_ms(trace: Trace, user=None,
                         opportunity_bytes: int = DEFAULT_OPPORTUNITY_BYTES) -> np.ndarray:
    """Opportunities in each millisecond of ``trace`` by the running reserve (int64 array)."""
    OPPORTUNITY_BYTES.check(opportunity_bytes)
    col = trace.column(user if user is not None else trace.users[0])
    one = Trace(col, trace.tti, ["1"], trace.unit)
    n_ms = int(np.ceil(float(one.duration * 1000) - 1e-9))
    if n_ms <= 0:
        raise FormatError("trace is empty: nothing to write")
    check_budget(n_ms, MAX_PERIOD_MS, f"a Mahimahi trace of {float(one.duration):g} s has a period of", "ms")
    check_budget(float(col.sum()) / opportunity_bytes, MAX_MAHIMAHI_OPPORTUNITIES,
                 f"{float(col.sum()):.3g} bytes in opportunities of {opportunity_bytes} bytes need",
                 "lines of Mahimahi trace")
    cum = _cumulative_at_ms(col, one.tti, n_ms)
    total = float(col.sum())
    cum[-1] = total  # the last partial millisecond ends the trace
    emitted = np.floor(cum / opportunity_bytes + 1e-9).astype(np.int64)
    if total - emitted[-1] * opportunity_bytes > 1e-6:
        emitted[-1] += 1  # round the remainder up so the loop period is the duration
    return np.diff(np.concatenate([[0], emitted]))


def _cumulative_at_ms(col: np.ndarray, tti: Fraction, n_ms: int) -> np.ndarray:
    """Cumulative capacity at the end of each millisecond 1..n_ms, with the position of each
    millisecond boundary on the TTI grid computed in exact integer arithmetic (capacity is
    spread uniformly within a TTI)."""
    per_ms = Fraction(1, 1000) / tti          # TTIs per millisecond, exact
    m = np.arange(1, n_ms + 1, dtype=np.int64)
    whole = (m * per_ms.numerator) // per_ms.denominator
    part = ((m * per_ms.numerator) % per_ms.denominator) / per_ms.denominator
    cum = np.concatenate([[0.0], np.cumsum(col)])
    whole = np.minimum(whole, col.size)
    nxt = np.where(whole < col.size, col[np.minimum(whole, col.size - 1)], 0.0)
    return cum[whole] + part * nxt


def format_trace(trace: Trace, user=None, opportunity_bytes: int = DEFAULT_OPPORTUNITY_BYTES) -> str:
    """Mahimahi trace text of one user of ``trace`` (see :func:`write_trace`)."""
    counts = opportunities_per_ms(trace, user, opportunity_bytes)
    same_grid = (trace.tti == Fraction(1, 1000) and trace.meta.get("format") == "mahimahi"
                 and trace.meta.get("parameters", {}).get("opportunity_bytes") == opportunity_bytes)
    zeros = int(trace.meta.get("mahimahi_zero_count", 0)) if same_grid else 0
    zeros = min(zeros, int(counts[-1]))
    counts = counts.copy()
    counts[-1] -= zeros
    stamps = np.repeat(np.arange(1, counts.size + 1, dtype=np.int64), counts)
    if stamps.size == 0 and zeros == 0:
        raise FormatError("trace has no capacity: a Mahimahi trace needs at least one opportunity")
    if zeros:
        stamps = np.concatenate([np.zeros(zeros, dtype=np.int64), stamps])
    return "\n".join(map(str, stamps.tolist())) + "\n"


def write_trace(trace: Trace, path, user=None,
                opportunity_bytes: int = DEFAULT_OPPORTUNITY_BYTES) -> Path:
    """Write one user of a capacity Trace as a Mahimahi trace file (any TTI length)."""
    from airlink.core.atomic import write_text
    return write_text(path, format_trace(trace, user, opportunity_bytes))


def is_trace_file(path) -> bool:
    """True when the first kilobytes look like a Mahimahi trace (integers, one per line)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if not head:
        return False
    lines = head.split(b"\n")
    if len(head) == 4096:
        lines = lines[:-1]
    return all(line.strip().isdigit() for line in lines if line.strip()) and any(l.strip() for l in lines)
