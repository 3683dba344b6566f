"""Generic CSV/TSV reader driven by a column mapping (a dict or a YAML file).

Mapping format (YAML)::

    kind: rf                       # frame kind to validate against (rf, mac, ...)
    time: {column: Timestamp, format: "%Y.%m.%d_%H.%M.%S", tz: Europe/Dublin}
    #   or {column: seconds_since_epoch, unit: s}
    columns:
      RSRP: rsrp_dbm               # source column -> schema column
      DL_bitrate: {name: dl_bitrate_bps, unit: kbit/s}
      Speed: {name: speed_kmh, scale: 1.0}
    missing: ["-"]                 # extra strings meaning "no value"
    sep: ","                       # default: sniffed (comma or tab)
    dedupe: last                   # duplicate timestamps: keep last | first | none

Units are converted to the base unit of the target column's suffix (``_bps`` bit/s,
``_ms``, ``_bytes``, ``_kmh``); ``scale`` multiplies after that. Unmapped columns are dropped
unless ``keep_unmapped: true``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.traces.errors import AirlinkError, FormatError
from airlink.traces.schema import validate
from airlink.traces.yamlfile import read_yaml_mapping

from ._tabular import MISSING, check_table_shape, finish, header_columns, numbers, parse_times, require_columns, sep_of, unit_factor

NAME = "csv"


def load_mapping(mapping) -> dict:
    if mapping is None:
        return {}
    if isinstance(mapping, dict):
        return mapping
    m = read_yaml_mapping(mapping, what="mapping", error=FormatError,
                          expect="a mapping file must be a YAML mapping with 'columns' and 'time'")
    if not m:
        raise FormatError(f"{mapping}: a mapping file must be a YAML mapping with 'columns' and 'time'")
    return m


def is_format(path) -> bool:
    """Any delimited text file with a header line (used only with a mapping, or last)."""
    return len(header_columns(path)) >= 2


def why_not(path) -> str:
    return "no header line with delimited column names"


def read(path, *, mapping=None) -> pd.DataFrame:
    """Read a delimited table with ``mapping`` (dict or YAML path; see module notes)."""
    path = Path(path)
    m = load_mapping(mapping)
    if not m:
        raise AirlinkError(f"{path}: the generic CSV reader needs a column mapping (a YAML file or dict naming the time and value columns)")
    cols = m.get("columns") or {}
    tspec = m.get("time") or {}
    if isinstance(tspec, str):
        tspec = {"column": tspec}
    tcol = tspec.get("column")
    if not tcol:
        raise AirlinkError(f"{path}: mapping lacks time.column")
    check_table_shape(path)
    try:
        raw = pd.read_csv(path, sep=m.get("sep") or sep_of(path), na_values=MISSING + list(m.get("missing", [])),
                          keep_default_na=True, engine="python" if m.get("sep") is None else "c",
                          skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as a table ({str(exc).splitlines()[0]})") from None
    require_columns(raw, [tcol, *cols], path, "mapped")
    # a header line repeated inside the file (logs appended to each other) is not data
    header = raw.astype(str).eq(pd.Series(raw.columns, index=raw.columns).astype(str)).all(axis=1)
    repeated_headers = int(header.sum())
    lines = pd.Series(np.arange(len(raw)) + 2)[~header.to_numpy()].to_numpy()
    raw = raw.loc[~header].reset_index(drop=True)
    out = {"time": parse_times(raw[tcol], fmt=tspec.get("format"), tz=tspec.get("tz"),
                               unit=tspec.get("unit"))}
    for src, spec in cols.items():
        if isinstance(spec, str):
            spec = {"name": spec}
        dst = spec["name"]
        col = raw[src]
        numeric = dst.endswith(("_bps", "_bytes", "_db", "_dbm", "_ms", "_kmh", "_s")) or spec.get("unit") \
            or spec.get("scale") is not None
        if numeric:
            col = numbers(col, path=path, column=src, lines=lines) * unit_factor(spec.get("unit", ""), dst) \
                * float(spec.get("scale", 1.0))
        out[dst] = col.to_numpy()
    if m.get("keep_unmapped"):
        for c in raw.columns:
            if c not in cols and c != tcol and c not in out:
                out[c] = raw[c].to_numpy()
    frame = pd.DataFrame(out)
    for k, v in (m.get("constants") or {}).items():
        frame[k] = v
    dd = m.get("dedupe", "last")
    frame = finish(frame, path, m.get("reader", NAME), dedupe=None if dd in (None, "none", False) else dd)
    frame.attrs["repeated_headers"] = repeated_headers
    kind = m.get("kind", "rf")
    return validate(frame, kind, name=str(path))
