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

from . import csvmap
from ._tabular import header_columns

NAME = "ucc"
SIGNATURE = {"Timestamp", "NetworkMode", "RSRP", "DL_bitrate", "State"}

MAPPING = {
    "kind": "rf", "reader": NAME, "dedupe": "none",
    "time": {"column": "Timestamp", "format": "%Y.%m.%d_%H.%M.%S", "tz": "Europe/Dublin"},
    "columns": {
        "Speed": {"name": "speed_kmh", "unit": "km/h"}, "CellID": "cell_id",
        "NetworkMode": "network_mode", "RSRP": {"name": "rsrp_dbm"}, "RSRQ": {"name": "rsrq_db"},
        "SNR": {"name": "snr_db"}, "CQI": {"name": "cqi", "scale": 1}, "RSSI": {"name": "rssi_dbm"},
        "DL_bitrate": {"name": "dl_bitrate_bps", "unit": "kbit/s"},
        "UL_bitrate": {"name": "ul_bitrate_bps", "unit": "kbit/s"}, "State": "state",
        "Longitude": {"name": "longitude", "scale": 1}, "Latitude": {"name": "latitude", "scale": 1},
    },
}


def is_format(path) -> bool:
    return SIGNATURE <= set(header_columns(path))


def why_not(path) -> str:
    return f"header lacks {', '.join(sorted(SIGNATURE - set(header_columns(path))))}"


def read(path):
    """Read one UCC CSV into an ``rf`` frame (see module notes)."""
    return csvmap.read(path, mapping=MAPPING)
