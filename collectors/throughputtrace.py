"""Headerless throughput traces (Lumos5G-style ``seconds<TAB>Mbit/s``) -> ``throughput`` frame.

Recognised by text lines of exactly two numbers (separated by a tab, a comma, ``;`` or
spaces) with no header line, the first column never decreasing: a time in seconds and the
throughput measured from that time to the next row. A one-column file (a Mahimahi trace)
or a file with a header line is not this format.

Assumptions, stated because such files carry no names or units:

- the second column is **Mbit/s** (``unit=`` says otherwise: ``bit/s``, ``kbit/s``,
  ``Gbit/s``); a median above 100 000 "Mbit/s" is refused as a wrong unit rather than read;
- the first column is **seconds**: above 10^8 it is seconds since the Unix epoch (UTC),
  otherwise seconds from the trace's own start, placed at the Unix epoch
  (``attrs["time_origin"]`` says which) - the convention of simulated data;
- each row's rate holds until the next row; ``interval_s`` is that step (the last row's is
  the median step).

Columns: ``time``, ``throughput_bps``, ``interval_s``, ``bytes`` (``throughput_bps *
interval_s / 8``).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.schema import validate

from ._tabular import head_text

NAME = "throughput-trace"
UNITS = {"bit/s": 1.0, "kbit/s": 1e3, "mbit/s": 1e6, "gbit/s": 1e9}
_SEP = re.compile(r"[\t,; ]+")
EPOCH_S = 1e8


def _pairs(lines):
    out = []
    for ln in lines:
        ln = ln.strip()
        if not ln:
            continue
        parts = _SEP.split(ln)
        if len(parts) != 2:
            return None
        try:
            out.append((float(parts[0]), float(parts[1])))
        except ValueError:
            return None
    return out


def is_format(path) -> bool:
    text = head_text(path, 4096)
    if not text:
        return False
    lines = text.splitlines()
    if len(text) == 4096 and not text.endswith("\n"):
        lines = lines[:-1]                       # a line cut by the read
    pairs = _pairs(lines)
    if not pairs or len(pairs) < 2:
        return False
    t = np.array([p[0] for p in pairs])
    v = np.array([p[1] for p in pairs])
    return bool(np.isfinite(t).all() and np.isfinite(v).all() and (np.diff(t) >= 0).all()
                and (np.diff(t) > 0).any() and (v >= 0).all())


def why_not(path) -> str:
    return "not lines of two numbers (seconds, throughput) without a header"


def read(path, *, unit: str = "Mbit/s") -> pd.DataFrame:
    """Read a headerless ``seconds  throughput`` trace (see the module notes for the units)."""
    path = Path(path)
    u = UNITS.get(str(unit).strip().lower().replace("bps", "bit/s"))
    if u is None:
        raise AirlinkError(f"{path}: unknown throughput unit {unit!r} (bit/s, kbit/s, Mbit/s, Gbit/s)")
    try:
        raw = pd.read_csv(path, sep=r"[\t,; ]+", header=None, engine="python", comment="#",
                          skip_blank_lines=True, dtype=str)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as two columns ({str(exc).splitlines()[0]})") from None
    if raw.shape[1] != 2:
        raise FormatError(f"{path}: {raw.shape[1]} columns; a throughput trace has two (seconds, throughput)")
    num = raw.apply(pd.to_numeric, errors="coerce")
    bad = num.isna().any(axis=1).to_numpy()
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise FormatError(f"{path}: row {r + 1}: {' '.join(map(str, raw.iloc[r].tolist()))!r} is not two numbers")
    t, v = num[0].to_numpy(float), num[1].to_numpy(float)
    if (np.diff(t) < 0).any():
        r = int(np.flatnonzero(np.diff(t) < 0)[0]) + 2
        raise FormatError(f"{path}: row {r}: time {t[r - 1]:g} s goes back")
    if (v < 0).any():
        r = int(np.flatnonzero(v < 0)[0]) + 1
        raise FormatError(f"{path}: row {r}: negative throughput {v[r - 1]:g}")
    med = float(np.median(v[v > 0])) if (v > 0).any() else 0.0
    if u == 1e6 and med > 1e5:
        raise FormatError(f"{path}: median throughput {med:g} is not plausible in Mbit/s (pass unit='bit/s' "
                          f"or 'kbit/s')")
    epoch = bool(t[0] > EPOCH_S)
    steps = np.diff(t)
    last = float(np.median(steps[steps > 0])) if (steps > 0).any() else 1.0
    interval = np.append(steps, last)
    bps = v * u
    frame = pd.DataFrame({"time": pd.to_datetime(np.round(t * 1e9).astype(np.int64), unit="ns", utc=True),
                          "throughput_bps": bps, "interval_s": interval, "bytes": bps * interval / 8})
    frame.attrs.update({"source": str(path), "reader": NAME, "kind": "throughput", "unit": unit,
                        "time_origin": "seconds since the Unix epoch (UTC)" if epoch else
                        "seconds from the trace's start, placed at the Unix epoch"})
    return validate(frame, "throughput", name=str(path))
