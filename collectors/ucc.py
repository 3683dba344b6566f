"""UCC 4G/5G dataset (Raca et al., MMSys 2020; G-NetTrack Pro logs) -> ``rf`` frame.

``Timestamp`` is local Irish time ``YYYY.MM.DD_hh.mm.ss`` (taken as Europe/Dublin and
converted to UTC), ``-`` marks missing values, ``DL_bitrate``/``UL_bitrate`` are kbit/s
(converted to ``_bps``). One row per second of the phone's clock; rows with a duplicate
timestamp (two samples stamped with one second, often beside a missing one, with different
bit rates) are all kept and counted in ``frame.attrs["duplicate_times"]`` (rows beyond the
first of their second): the grid step of inference merges them by its rules (the mean of the
rates), the same whether the frame comes from this reader or from the raw CSV. Gaps of 2-3 s
are left as gaps and counted in ``frame.attrs["gaps"]``.
"""
from __future__ import annotations

from . import csvmap, gnettrack
from ._tabular import header_columns

NAME = "ucc"
SIGNATURE = gnettrack.UCC_SIGNATURE

#: the UCC columns, read by the G-NetTrack table (every one must be present)
UCC_COLUMNS = ("Speed", "CellID", "NetworkMode", "RSRP", "RSRQ", "SNR", "CQI", "RSSI", "DL_bitrate",
               "UL_bitrate", "State", "Longitude", "Latitude")
MAPPING = gnettrack.mapping(UCC_COLUMNS, tz="Europe/Dublin", reader=NAME, names=UCC_COLUMNS)


def is_format(path) -> bool:
    return SIGNATURE <= set(header_columns(path))


def why_not(path) -> str:
    return f"header lacks {', '.join(sorted(SIGNATURE - set(header_columns(path))))}"


def read(path):
    """Read one UCC CSV into an ``rf`` frame (see module notes)."""
    return csvmap.read(path, mapping=MAPPING)
