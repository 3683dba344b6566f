"""Parsing of the quantities users type: rates, durations, sizes and TTI lengths.

All functions accept a number (taken in the base unit) or a string with a unit and
return the value in the base unit: bits per second, seconds (as :class:`fractions.Fraction`
for durations that must stay exact), bytes.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import AirlinkError

#: Bytes of one Mahimahi delivery opportunity (one MTU-sized packet), in trace files.
DEFAULT_OPPORTUNITY_BYTES = 1500

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "bps": 1, "bit/s": 1, "b/s": 1,
    "kbps": 1e3, "kbit/s": 1e3, "kb/s": 1e3,
    "mbps": 1e6, "mbit/s": 1e6, "mb/s": 1e6,
    "gbps": 1e9, "gbit/s": 1e9, "gb/s": 1e9,
}
_DURATION_UNITS = {
    "ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "ms": Fraction(1, 1000),
    "s": Fraction(1), "sec": Fraction(1), "min": Fraction(60), "m": Fraction(60),
    "h": Fraction(3600),
}
_SIZE_UNITS = {
    "b": 1, "byte": 1, "bytes": 1,
    "kb": 1000, "k": 1000, "kib": 1024,
    "mb": 1000**2, "m": 1000**2, "mib": 1024**2,
    "gb": 1000**3, "gib": 1024**3,
}


def _finite(value, what: str):
    """A number given as a number (not text): refused when NaN or infinite."""
    if isinstance(value, bool) or not math.isfinite(value):
        raise AirlinkError(f"cannot read {what} {value!r}: expected a finite number")
    return value


def _split(text: str, what: str) -> tuple[str, str]:
    m = re.fullmatch(r"\s*" + _NUM + r"\s*([A-Za-z/]*)\s*", str(text))
    if not m:
        raise AirlinkError(f"cannot read {what} {text!r}: expected a number with a unit")
    if not math.isfinite(float(m.group(1))):
        raise AirlinkError(f"cannot read {what} {text!r}: the number is out of range")
    return m.group(1), m.group(2).lower()


def parse_rate(text, default_unit: str = "bps") -> float:
    """Rate in bits per second from ``48Mbps``, ``12 Mbit/s``, ``500kbps`` or a number.

    Byte rates are rejected on purpose: ``MBps`` is a common typo for ``Mbps``.
    """
    if isinstance(text, (int, float)):
        return float(_finite(text, "rate")) * _RATE_UNITS[default_unit]
    num, unit = _split(text, "rate")
    unit = unit or default_unit
    if unit not in _RATE_UNITS:
        raise AirlinkError(
            f"cannot read rate {text!r}: unknown unit {unit!r} (use bps, kbps, Mbps or Gbps)")
    value = float(num) * _RATE_UNITS[unit]
    if not math.isfinite(value):
        raise AirlinkError(f"cannot read rate {text!r}: the number is out of range")
    return value


def parse_duration(text, default_unit: str = "s") -> Fraction:
    """Duration in seconds (exact Fraction) from ``10s``, ``500ms``, ``2min`` or a number."""
    if isinstance(text, Fraction):
        return text
    if isinstance(text, (int, float)):
        return Fraction(str(_finite(text, "duration"))) * _DURATION_UNITS[default_unit]
    num, unit = _split(text, "duration")
    unit = unit or default_unit
    if unit not in _DURATION_UNITS:
        raise AirlinkError(
            f"cannot read duration {text!r}: unknown unit {unit!r} (use ms, s, min or h)")
    return Fraction(num) * _DURATION_UNITS[unit]


def parse_size(text, default_unit: str = "b") -> int:
    """Size in bytes from ``1500``, ``64KB``, ``16KiB``, ``1MB``."""
    if isinstance(text, (int, float)):
        return int(_finite(text, "size") * _SIZE_UNITS[default_unit])
    num, unit = _split(text, "size")
    unit = unit or default_unit
    if unit not in _SIZE_UNITS:
        raise AirlinkError(f"cannot read size {text!r}: unknown unit {unit!r} (use B, KB, KiB, MB)")
    value = float(num) * _SIZE_UNITS[unit]
    if not math.isfinite(value):
        raise AirlinkError(f"cannot read size {text!r}: the number is out of range")
    return int(round(value))


def snap_fraction(value, rel_tol: float = 5e-4, max_den: int = 10**6) -> Fraction:
    """The simplest fraction within ``rel_tol`` of ``value``.

    TTIs are typed rounded: an EV-DO slot is 1/600 s, written ``1.667ms``. Snapping
    finds the fraction with the smallest denominator inside the tolerance, so
    ``1.667`` -> 5/3 while ``0.125`` and ``2`` stay exact.
    """
    exact = Fraction(str(value)) if not isinstance(value, Fraction) else value
    if exact.denominator == 1:
        return exact
    for den in range(1, 10001):
        cand = Fraction(round(exact * den), den)
        if cand > 0 and abs(cand - exact) <= rel_tol * exact:
            return cand
    return exact.limit_denominator(max_den)


def parse_tti(text) -> Fraction:
    """TTI length in seconds (exact) from ``1ms``, ``1.667ms``, ``0.125ms``, ``1/600s``.

    A bare number is taken in milliseconds. Values are snapped with
    :func:`snap_fraction`, so ``1.667ms`` is exactly 1/600 s.
    """
    if isinstance(text, Fraction):
        return text
    s = str(text).strip()
    m = re.fullmatch(r"(\d+)\s*/\s*(\d+)\s*([a-z]*)", s.lower())
    if m:
        if int(m.group(2)) == 0:
            raise AirlinkError(f"cannot read TTI {text!r}: division by zero")
        value = Fraction(int(m.group(1)), int(m.group(2)))
        unit = m.group(3) or "ms"
        if unit not in _DURATION_UNITS:
            raise AirlinkError(f"cannot read TTI {text!r}: unknown unit {unit!r}")
        tti = value * _DURATION_UNITS[unit]
    else:
        num, unit = _split(s, "TTI")
        unit = unit or "ms"
        if unit not in _DURATION_UNITS:
            raise AirlinkError(f"cannot read TTI {text!r}: unknown unit {unit!r}")
        tti = snap_fraction(Fraction(num) * 1000 * _DURATION_UNITS[unit]) / 1000
    if tti <= 0:
        raise AirlinkError(f"TTI must be positive, got {text!r}")
    return tti


def format_rate(bps: float) -> str:
    """``48000000`` -> ``'48 Mbit/s'`` (3 significant digits)."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} bit/s"
