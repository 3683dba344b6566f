"""Generic CSV/TSV reader driven by a column mapping (a dict or a YAML file).

Mapping format (YAML)::

    kind: rf                       # frame kind to validate against (rf, mac, ...)
    time: {column: Timestamp, format: "%Y.%m.%d_%H.%M.%S", tz: Europe/Dublin}
    #   or {column: seconds_since_epoch, unit: s}, or just the column's name
    columns:
      RSRP: rsrp_dbm               # source column -> schema column
      DL_bitrate: {name: dl_bitrate_bps, unit: kbit/s}
      Speed: {name: speed_kmh, scale: 1.0}
    constants:                     # columns with one value on every row
      user: ue                     #   (the mac kind needs a user; a one-phone log has one)
      carrier: pcell
    missing: ["-"]                 # extra strings meaning "no value"
    sep: ","                       # default: sniffed (comma or tab)
    dedupe: last                   # duplicate timestamps: keep last | first | none
    keep_unmapped: false           # true keeps the columns not named under columns, as they are

Units are converted to the base unit of the target column's suffix (``_bps`` bit/s,
``_ms``, ``_bytes``, ``_kmh``); ``scale`` multiplies after that. Unmapped columns are dropped
unless ``keep_unmapped: true``. ``constants`` adds columns holding one value (text or
number) on every row, after the mapped ones (a constant may not share a mapped column's name).

The mapping is checked like an experiment file (pydantic, unknown keys refused): a
misspelled key is an error naming the file and the key path
(``mapping.yaml: colums: unknown key``), as is a value of the wrong type
(``columns.RSRP.scale: ...``), an unknown ``kind`` or a mapping that names no column.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from typing import Annotated, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.schema import KINDS, validate
from airlink.core.yamlfile import error_key_path, error_message, read_yaml_mapping

from ._tabular import MISSING, check_table_shape, finish, header_columns, numbers, parse_times, require_columns, sep_of, unit_factor

NAME = "csv"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimeSpec(_Model):
    """Where the time is: a ``column``, read with a strftime ``format`` or as numbers since
    the epoch in ``unit``; naive local times are in zone ``tz``."""
    column: str
    format: str | None = None
    tz: str | None = None
    unit: Literal["s", "ms", "us", "ns"] | None = None


class ColumnSpec(_Model):
    """A source column's schema ``name``, the ``unit`` it is in and a ``scale`` applied after."""
    name: str
    unit: str | None = None
    scale: float | None = None


def _named(value):
    return {"column": value} if isinstance(value, str) else value


def _renamed(value):
    return {"name": value} if isinstance(value, str) else value


class Mapping(_Model):
    """A column mapping, checked (see the module notes for each key)."""
    kind: Literal[tuple(KINDS)] = "rf"
    time: Annotated[TimeSpec, BeforeValidator(_named)]
    columns: dict[str, Annotated[ColumnSpec, BeforeValidator(_renamed)]] = {}
    constants: dict[str, Union[bool, int, float, str]] = {}
    missing: list[str] = []
    sep: str | None = None
    dedupe: Literal["last", "first", "none"] | None = "last"
    keep_unmapped: bool = False
    reader: str = NAME

    @model_validator(mode="after")
    def _names_something(self):
        if not self.columns and not self.keep_unmapped:
            raise ValueError("columns: no column is mapped (name at least one, or keep_unmapped: true)")
        clash = sorted(set(self.constants) & {c.name for c in self.columns.values()})
        if clash:
            raise ValueError(f"constants: {', '.join(clash)} is also a mapped column")
        return self


def check_mapping(m: dict, *, where: str = "mapping") -> Mapping:
    """The checked :class:`Mapping` of a dict; the first problem is a FormatError
    ``WHERE: KEY.PATH: what is wrong``."""
    try:
        return Mapping.model_validate(m)
    except ValidationError as exc:
        err = max(exc.errors(), key=lambda e: (len(error_key_path(e["loc"])), e["type"] == "extra_forbidden"))
        path, msg = error_key_path(err["loc"]), error_message(err)
        raise FormatError(f"{where}: {path + ': ' if path and not msg.startswith(path) else ''}{msg}") from None


def load_mapping(mapping) -> Mapping | None:
    """The checked mapping of a dict or a YAML file (None for None)."""
    if mapping is None:
        return None
    if isinstance(mapping, Mapping):
        return mapping
    if isinstance(mapping, dict):
        return check_mapping(mapping)
    m = read_yaml_mapping(mapping, what="mapping", error=FormatError,
                          expect="a mapping file must be a YAML mapping with 'columns' and 'time'")
    if not m:
        raise FormatError(f"{mapping}: a mapping file must be a YAML mapping with 'columns' and 'time'")
    return check_mapping(m, where=str(mapping))


def is_format(path) -> bool:
    """Any delimited text file with a header line (used only with a mapping, or last)."""
    return len(header_columns(path)) >= 2


def why_not(path) -> str:
    return "no header line with delimited column names"


def read(path, *, mapping=None) -> pd.DataFrame:
    """Read a delimited table with ``mapping`` (dict or YAML path; see module notes)."""
    path = Path(path)
    m = load_mapping(mapping)
    if m is None:
        raise AirlinkError(f"{path}: the generic CSV reader needs a column mapping (a YAML file or dict naming the time and value columns)")
    cols, tspec = m.columns, m.time
    tcol = tspec.column
    check_table_shape(path)
    try:
        raw = pd.read_csv(path, sep=m.sep or sep_of(path), na_values=MISSING + list(m.missing),
                          keep_default_na=True, engine="python" if m.sep is None else "c",
                          skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as a table ({str(exc).splitlines()[0]})") from None
    require_columns(raw, [tcol, *cols], path, "mapped")
    # a header line repeated inside the file (logs appended to each other) is not data
    header = raw.astype(str).eq(pd.Series(raw.columns, index=raw.columns).astype(str)).all(axis=1)
    repeated_headers = int(header.sum())
    lines = pd.Series(np.arange(len(raw)) + 2)[~header.to_numpy()].to_numpy()
    raw = raw.loc[~header].reset_index(drop=True)
    out = {"time": parse_times(raw[tcol], fmt=tspec.format, tz=tspec.tz, unit=tspec.unit)}
    if len(raw) and out["time"].isna().all():     # every row would be dropped: an empty frame is no answer
        how = f" as {tspec.format!r}" if tspec.format else f" in {tspec.unit}" if tspec.unit else ""
        raise FormatError(f"{path}: {tcol}: no value is a readable time{how} (line {lines[0]}: "
                          f"{raw[tcol].iloc[0]!r})")
    for src, spec in cols.items():
        dst = spec.name
        col = raw[src]
        numeric = dst.endswith(("_bps", "_bytes", "_db", "_dbm", "_ms", "_kmh", "_s")) or spec.unit \
            or spec.scale is not None
        if numeric:
            col = numbers(col, path=path, column=src, lines=lines) * unit_factor(spec.unit or "", dst) \
                * float(1.0 if spec.scale is None else spec.scale)
        out[dst] = col.to_numpy()
    if m.keep_unmapped:
        for c in raw.columns:
            if c not in cols and c != tcol and c not in out:
                out[c] = raw[c].to_numpy()
    frame = pd.DataFrame(out)
    for k, v in m.constants.items():
        frame[k] = v
    dd = m.dedupe
    frame = finish(frame, path, m.reader, dedupe=None if dd in (None, "none") else dd)
    frame.attrs["repeated_headers"] = repeated_headers
    return validate(frame, m.kind, name=str(path))
