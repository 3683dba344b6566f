"""airlink's own ``mac.parquet`` (written by sim/ and replay/) -> ``mac`` frame, validated."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.parquetframe import read_parquet_frame
from airlink.core.schema import validate

NAME = "mac-parquet"


def _columns(path):
    import pyarrow.parquet as pq
    return pq.read_schema(path).names


def is_format(path) -> bool:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PAR1":
                return False
        names = set(_columns(path))
        return {"user"} <= names and ("time" in names or "time_ms" in names or "tti" in names)
    except Exception:
        return False


def why_not(path) -> str:
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PAR1":
                return "not a Parquet file"
        return f"Parquet without time and user columns (has {', '.join(_columns(path)[:8])})"
    except Exception as exc:
        return str(exc)


def _written_cell(path) -> dict:
    """``tti_s`` (``"num/den"`` seconds) and ``cell_prbs`` of a MAC log written by ``airlink
    simulate`` or ``airlink cell``, from its ``airlink`` metadata (the TTI and subchannels of
    the run's parameters when the file predates them); empty for other files."""
    import json

    import pyarrow.parquet as pq
    try:
        meta = json.loads((pq.read_schema(path).metadata or {})[b"airlink"])["meta"]
    except (KeyError, ValueError, TypeError, AttributeError):
        return {}
    params = meta.get("parameters") if isinstance(meta.get("parameters"), dict) else {}
    found = {"tti_s": meta.get("tti_s"), "cell_prbs": meta.get("cell_prbs") or params.get("n_subchannels")}
    if found["tti_s"] is None and params.get("tti") is not None:
        from airlink.core.units import parse_tti
        try:
            tti = parse_tti(params["tti"])
            found["tti_s"] = f"{tti.numerator}/{tti.denominator}"
        except AirlinkError:
            pass
    return {k: v for k, v in found.items() if v is not None}


def read(path) -> pd.DataFrame:
    """Read a MAC log Parquet file; a ``time_ms`` column becomes UTC ``time``."""
    path = Path(path)
    try:
        frame = read_parquet_frame(path)
    except Exception as exc:
        raise FormatError(f"{path}: cannot read Parquet ({str(exc).splitlines()[0]})") from None
    if frame.index.name == "time":
        frame = frame.reset_index()
    if "time" not in frame.columns and "time_ms" in frame.columns:
        frame.insert(0, "time", pd.to_datetime((frame["time_ms"].to_numpy() * 1e6).round().astype("int64"),
                                               unit="ns", utc=True))
    if "time" in frame.columns and not isinstance(frame["time"].dtype, pd.DatetimeTZDtype):
        if pd.api.types.is_datetime64_any_dtype(frame["time"]):
            frame["time"] = frame["time"].dt.tz_localize("UTC")
    if "time" in frame.columns and not frame["time"].is_monotonic_increasing:
        frame = frame.sort_values("time", kind="stable", ignore_index=True)
    frame.attrs.setdefault("source", str(path))
    frame.attrs["reader"] = NAME
    for key, value in _written_cell(path).items():   # the slot and cell of a MAC log airlink wrote
        frame.attrs.setdefault(key, value)
    return validate(frame, "mac", name=str(path))
