"""Per-transfer tables without timestamps (one row per upload or download with the radio
indicators measured around it; e.g. TU Dortmund's LTE uplink data) -> ``transfers`` frame.

Recognised by a header (comma, tab or ``;``) with **no** time column (no name containing
``time`` or ``date``, nor ``td``/``ts``/``epoch``), at least two radio indicators among
``rsrp``, ``rsrq``, ``sinr``, ``snr``, ``cqi``, ``rssi`` and a ``payload``, ``throughput``,
``datarate`` or ``goodput`` column (names compared case-insensitively; a unit in brackets,
``throughput [Mbit/s]``, is read).

**There is no time axis.** The frame is indexed by ``transfer`` (the row number from 0, also
a column); ``attrs["time_axis"]`` is None and ``attrs["note"]`` says so. Analyses that need
a time grid (alignment, NMI, traces) cannot use it; per-transfer statistics (throughput
against RSRP or SINR) can.

Units, where the header does not give them (assumptions, stated): ``rsrp``/``rssi`` dBm,
``rsrq``/``sinr``/``snr`` dB, ``payload`` **MB** (10^6 bytes; ``payload_unit=``),
``throughput``/``datarate``/``goodput`` **Mbit/s** (``throughput_unit=``); a throughput
median above 100 000 "Mbit/s" is refused as a wrong unit. Other columns are kept under their
names (numbers where every value is one).

Columns: ``transfer``, ``rsrp_dbm``, ``rsrq_db``, ``sinr_db``, ``snr_db``, ``cqi``,
``rssi_dbm``, ``payload_bytes``, ``throughput_bps`` (those present), the rest as logged.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.schema import validate
from airlink.core.units import parse_rate, parse_size

from ._tabular import MISSING, head_text, numbers

NAME = "transfers"
RADIO = {"rsrp": "rsrp_dbm", "rsrq": "rsrq_db", "sinr": "sinr_db", "snr": "snr_db", "cqi": "cqi", "rssi": "rssi_dbm"}
RATES = ("throughput", "datarate", "data_rate", "goodput")
TIME_WORDS = ("time", "date")
TIME_NAMES = {"td", "ts", "epoch", "t"}
_UNIT = re.compile(r"^(.*?)\s*[\[(]([^\])]+)[\])]\s*$")


def _split(name: str) -> tuple[str, str | None]:
    m = _UNIT.match(name.strip())
    return (m.group(1).strip().lower(), m.group(2).strip()) if m else (name.strip().lower(), None)


def _header(path) -> tuple[list, str]:
    text = head_text(path, 8192)
    first = text.splitlines()[0] if text.splitlines() else ""
    sep = max(("\t", ",", ";"), key=first.count)
    if first.count(sep) == 0:
        return [], sep
    return [c.strip().strip('"') for c in first.split(sep)], sep


def _recognised(cols) -> bool:
    base = [_split(c)[0] for c in cols]
    if any(any(w in b for w in TIME_WORDS) or b in TIME_NAMES for b in base):
        return False
    radio = sum(b in RADIO for b in base)
    return radio >= 2 and any(b == "payload" or b in RATES for b in base)


def is_format(path) -> bool:
    return _recognised(_header(path)[0])


def why_not(path) -> str:
    return "not a header with radio indicators (rsrp, sinr, ...) and payload/throughput but no time column"


def read(path, *, payload_unit: str = "MB", throughput_unit: str = "Mbit/s") -> pd.DataFrame:
    """Read a per-transfer table (see the module notes: no time axis, the units assumed)."""
    path = Path(path)
    cols, sep = _header(path)
    try:
        raw = pd.read_csv(path, sep=sep, na_values=MISSING, keep_default_na=True, skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as a table ({str(exc).splitlines()[0]})") from None
    out = {"transfer": np.arange(len(raw))}
    for c in raw.columns:
        base, unit = _split(str(c))
        if base in RADIO:
            out[RADIO[base]] = numbers(raw[c], path=path, column=c).to_numpy()
        elif base == "payload":
            try:
                factor = float(parse_size("1" + (unit or payload_unit)))
            except AirlinkError as exc:
                raise AirlinkError(f"{path}: column {c!r}: {exc}") from None
            out["payload_bytes"] = numbers(raw[c], path=path, column=c).to_numpy() * factor
        elif base in RATES:
            try:
                factor = float(parse_rate("1" + (unit or throughput_unit)))
            except AirlinkError as exc:
                raise AirlinkError(f"{path}: column {c!r}: {exc}") from None
            v = numbers(raw[c], path=path, column=c).to_numpy()
            med = float(np.nanmedian(v[v > 0])) if (v > 0).any() else 0.0
            if factor == 1e6 and med > 1e5:
                raise FormatError(f"{path}: column {c!r}: median {med:g} is not plausible in Mbit/s "
                                  f"(pass throughput_unit='bit/s' or 'kbit/s')")
            out["throughput_bps" if "throughput_bps" not in out else f"{base}_bps"] = v * factor
        else:
            num = pd.to_numeric(raw[c], errors="coerce")
            out[str(c)] = num.to_numpy() if num.notna().sum() == raw[c].notna().sum() else raw[c].to_numpy()
    frame = pd.DataFrame(out)
    frame.index = pd.Index(frame["transfer"].to_numpy(), name="transfer")
    frame.attrs.update({"source": str(path), "reader": NAME, "kind": "transfers", "time_axis": None,
                        "note": "no time axis: one row per transfer; analyses that need a time grid "
                                "cannot use this table", "payload_unit": payload_unit,
                        "throughput_unit": throughput_unit})
    return validate(frame, "transfers", name=str(path))
