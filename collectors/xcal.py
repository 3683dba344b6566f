"""XCAL-style drive-test exports (Accuver XCAL / XCAL-Solo CSVs, 20 ms rows) -> ``mac`` or
``rf`` frame, without a hand-written mapping.

No public column list of XCAL exports exists (the tool is commercial and its exports are
configured per project), so two layouts seen in published datasets are recognised, and
this is an assumption to check against your own files:

1. **MAC summary** (the layout of the public 5G uplink-resource dataset exported with
   XCAL-Solo): a time column ``td`` and transport-block columns ``5G_TBS`` and/or
   ``4G_TBS`` (**bits** scheduled in the row), with ``5G_MCS``/``4G_MCS``, ``5G_RB``/``4G_RB``
   (resource blocks) and ``5G_BLER``. -> ``mac`` frame, one user ``ue``: ``nr_tbs_bytes``,
   ``lte_tbs_bytes``, ``tbs_bytes`` (their sum; a missing one counts 0 when the other is
   present, NaN when both are), ``nr_mcs``/``lte_mcs``, ``nr_prbs``/``lte_prbs``,
   ``prbs`` (their sum), ``nr_bler``. ``airlink trace from-log`` takes ``tbs_bytes`` by
   default (amounts per row, TTI = the 20 ms row spacing).
2. **KPI export**: a ``TIME_STAMP`` column and columns named ``<RAT> KPI <carrier> <group>
   <name> [<unit>]`` (``5G KPI PCell RF Serving SS-RSRP [dBm]``, ``5G KPI PCell Layer1 DL
   MCS``, ``LTE KPI PCell Serving RSRP [dBm]``) and optionally ``Event Technology``.
   -> ``rf`` frame: NR PCell SS-RSRP/SS-RSRQ/SS-SINR as ``rsrp_dbm``/``rsrq_db``/``sinr_db``,
   LTE PCell RSRP/RSRQ/SINR as ``lte_rsrp_dbm``/..., ``Event Technology`` as
   ``network_mode``; every other column keeps its name in snake case with the unit in
   brackets as suffix (``[dBm]`` -> ``_dbm``, ``[dB]`` -> ``_db``, ``[Mbps]``/``[kbps]`` ->
   ``_bps`` converted, ``[ms]`` -> ``_ms``, ``[bits]`` -> ``_bits``, ``[bytes]`` ->
   ``_bytes``), e.g. ``5G KPI PCell Layer1 DL MCS`` -> ``5g_kpi_pcell_layer1_dl_mcs``.

Times: ``td``/``TIME_STAMP`` are date-times (``2021-04-13 14:22:05.020``) in the logging
PC's local zone, which the file does not record - ``tz`` (default UTC) names it. Rows
without a time are dropped and counted; ``-`` and empty cells are missing. Any other
XCAL layout needs a column mapping (``format="csv"``).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import FormatError
from airlink.core.schema import validate

from ._tabular import MISSING, finish, header_columns, numbers, parse_times, sep_of

NAME = "xcal"
MAC_COLUMNS = {"5G_TBS": ("nr_tbs_bytes", 1 / 8), "4G_TBS": ("lte_tbs_bytes", 1 / 8), "5G_MCS": ("nr_mcs", 1),
               "4G_MCS": ("lte_mcs", 1), "5G_RB": ("nr_prbs", 1), "4G_RB": ("lte_prbs", 1),
               "5G_BLER": ("nr_bler", 1)}
_KPI = re.compile(r"^(5G|NR|LTE)\s+KPI\s", re.I)
#: (pattern on the column name, frame column) for the well-known KPI columns
ALIASES = [(re.compile(r"^(5G|NR) KPI PCell .*SS-RSRP", re.I), "rsrp_dbm"),
           (re.compile(r"^(5G|NR) KPI PCell .*SS-RSRQ", re.I), "rsrq_db"),
           (re.compile(r"^(5G|NR) KPI PCell .*SS-SINR", re.I), "sinr_db"),
           (re.compile(r"^LTE KPI PCell .*\bRSRP\b", re.I), "lte_rsrp_dbm"),
           (re.compile(r"^LTE KPI PCell .*\bRSRQ\b", re.I), "lte_rsrq_db"),
           (re.compile(r"^LTE KPI PCell .*\bSINR\b", re.I), "lte_sinr_db")]
#: unit in brackets -> (suffix, factor to the suffix's base unit)
UNITS = {"dbm": ("_dbm", 1.0), "db": ("_db", 1.0), "mbps": ("_bps", 1e6), "kbps": ("_bps", 1e3),
         "bps": ("_bps", 1.0), "ms": ("_ms", 1.0), "bits": ("_bits", 1.0), "bytes": ("_bytes", 1.0),
         "km/h": ("_kmh", 1.0)}
_BRACKET = re.compile(r"\s*\[([^\]]*)\]\s*$")


def _layout(cols) -> str | None:
    cols = set(cols)
    if "td" in cols and cols & {"5G_TBS", "4G_TBS"}:
        return "mac"
    if "TIME_STAMP" in cols and any(_KPI.match(c) for c in cols):
        return "kpi"
    return None


def is_format(path) -> bool:
    return _layout(header_columns(path)) is not None


def why_not(path) -> str:
    return "header has neither td with 5G_TBS/4G_TBS nor TIME_STAMP with '5G KPI ...' columns"


def _snake(name: str) -> tuple[str, float]:
    m = _BRACKET.search(name)
    unit = m.group(1).strip().lower() if m else ""
    base = name[:m.start()] if m else name
    snake = re.sub(r"[^0-9a-z]+", "_", base.lower()).strip("_")
    suffix, factor = UNITS.get(unit, ("", 1.0))
    return snake + suffix, factor


def read(path, *, tz: str = "UTC") -> pd.DataFrame:
    """Read an XCAL-style export (see the module notes for the two layouts); ``tz`` is the
    zone of its local times."""
    path = Path(path)
    try:
        raw = pd.read_csv(path, sep=sep_of(path), na_values=MISSING, keep_default_na=True, engine="python")
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as a table ({str(exc).splitlines()[0]})") from None
    layout = _layout(raw.columns)
    if layout is None:
        raise FormatError(f"{path}: not an XCAL-style export ({why_not(path)})")
    tcol = "td" if layout == "mac" else "TIME_STAMP"
    out = {"time": parse_times(raw[tcol], fmt="ISO8601", tz=tz)}
    if layout == "mac":
        for src, (dst, scale) in MAC_COLUMNS.items():
            if src in raw.columns:
                out[dst] = numbers(raw[src], path=path, column=src).to_numpy() * scale
        for total, parts in (("tbs_bytes", ("nr_tbs_bytes", "lte_tbs_bytes")), ("prbs", ("nr_prbs", "lte_prbs"))):
            have = [out[p] for p in parts if p in out]
            if have:
                stack = np.vstack(have)
                s = np.nansum(stack, axis=0)
                s[np.isnan(stack).all(axis=0)] = np.nan
                out[total] = s
        out["user"] = "ue"
    else:
        for c in raw.columns:
            if c == tcol:
                continue
            alias = next((dst for pat, dst in ALIASES if pat.search(c)), None)
            if c.strip().lower() == "event technology":
                out["network_mode"] = raw[c].to_numpy()
                continue
            dst, factor = (alias, 1.0) if alias else _snake(c)
            if dst in out:
                continue
            num = pd.to_numeric(raw[c], errors="coerce")
            if dst.endswith(tuple(s for s, _ in UNITS.values())) or num.notna().sum() == raw[c].notna().sum():
                out[dst] = numbers(raw[c], path=path, column=c).to_numpy() * factor
            else:
                out[dst] = raw[c].to_numpy()
    frame = finish(pd.DataFrame(out), path, NAME, dedupe=None)
    frame.attrs.update({"layout": layout, "time_zone": tz})
    return validate(frame, "mac" if layout == "mac" else "rf", name=str(path))
