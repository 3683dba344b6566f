"""G-NetTrack-style Android drive-test logs (G-NetTrack Pro, and 5G Tracker-style exports
with the same column names) -> ``rf`` frame.

Recognised by a header (tab- or comma-separated) holding ``Timestamp``, ``NetworkMode`` (or
``NetworkTech``), ``DL_bitrate`` and ``RSRP`` (or ``Level``). The column names and units are
those G-NetTrack Pro writes, as documented by the UCC 5G dataset built from it (Raca et
al., MMSys 2020), which has its own reader (``ucc``: the same columns plus ``State``, local
Irish time):

=================  ==================  ===========================================
G-NetTrack          frame column         unit in the log -> in the frame
=================  ==================  ===========================================
Timestamp           time                 ``YYYY.MM.DD_hh.mm.ss`` (or ISO-style) phone local time -> UTC
Longitude/Latitude  longitude/latitude   degrees
Speed               speed_kmh            km/h
Operatorname        operator             text (``Operator`` in G-NetTrack Lite's export)
CellID              cell_id              as logged
NetworkMode         network_mode         text (LTE, 5G, HSPA+, ...)
RSRP (Level)        rsrp_dbm             dBm
RSRQ (Qual)         rsrq_db              dB
SNR                 snr_db               dB
CQI                 cqi                  index
RSSI (LTERSSI)      rssi_dbm             dBm
DL_bitrate          dl_bitrate_bps       kbit/s -> bit/s
UL_bitrate          ul_bitrate_bps       kbit/s -> bit/s
State               state                D (downloading) / I (idle)
NRxRSRP/NRxRSRQ     nr_rsrp_dbm/nr_rsrq_db  dBm/dB (the NR leg of EN-DC)
=================  ==================  ===========================================

G-NetTrack Lite's export, as a public parser of it reads it (gnt2influx, shunrin824 on GitHub:
``Timestamp Longitude Latitude Speed Operator MCC-MNC CGI CellName Node CellID LAC NetworkTech
NetworkMode Level Qual SNR CQI ARFCN DL_bitrate UL_bitrate``, times such as
``2024-10-01 10:00:00``), is read by the same names; its ``NetworkMode`` (``LTE``, ``NR``) is
taken before ``NetworkTech`` (``4G``, ``5G``). A ``Timestamp`` column none of whose values
is a time is an error, not an empty frame.

Assumptions, stated because the app's documentation does not: ``Level``/``Qual`` are the
serving cell's RSRP/RSRQ on LTE (the app's generic names for signal level and quality);
``Timestamp`` is the phone's local time, whose zone the log does not record - ``tz``
(default UTC) names it. ``-`` is missing. Rows sharing a second are all kept and counted
(``attrs["duplicate_times"]``), as the UCC reader does; the logging step is 1-3 s and gaps
are counted in ``attrs["gaps"]`` (``airlink trace from-log --gaps`` says how they are filled).
Columns not in the table are dropped. A log with the UCC dataset's columns (``State``
among them) is sniffed as ``ucc`` (Irish time); read another such log with
``format="gnettrack"`` and its ``tz``.
"""
from __future__ import annotations

import re
from pathlib import Path

from airlink.core.errors import FormatError

from . import csvmap
from ._tabular import header_columns, sep_of

NAME = "gnettrack"
#: G-NetTrack column -> mapping spec (csvmap); the first of several names present is used
COLUMNS = {
    "Longitude": {"name": "longitude", "scale": 1}, "Latitude": {"name": "latitude", "scale": 1},
    "Speed": {"name": "speed_kmh", "unit": "km/h"}, "Operatorname": "operator", "Operator": "operator",
    "CellID": "cell_id",
    "NetworkMode": "network_mode", "NetworkTech": "network_mode",
    "RSRP": {"name": "rsrp_dbm"}, "Level": {"name": "rsrp_dbm"},
    "RSRQ": {"name": "rsrq_db"}, "Qual": {"name": "rsrq_db"},
    "SNR": {"name": "snr_db"}, "CQI": {"name": "cqi", "scale": 1},
    "RSSI": {"name": "rssi_dbm"}, "LTERSSI": {"name": "rssi_dbm"},
    "DL_bitrate": {"name": "dl_bitrate_bps", "unit": "kbit/s"},
    "UL_bitrate": {"name": "ul_bitrate_bps", "unit": "kbit/s"}, "State": "state",
    "NRxRSRP": {"name": "nr_rsrp_dbm"}, "NRxRSRQ": {"name": "nr_rsrq_db"},
}
TIME_FORMAT = "%Y.%m.%d_%H.%M.%S"
_GNT_TIME = re.compile(r"\d{4}\.\d{2}\.\d{2}_\d{2}\.\d{2}\.\d{2}")
#: the columns that make a G-NetTrack log the UCC dataset's layout (its own reader, :mod:`.ucc`)
UCC_SIGNATURE = frozenset({"Timestamp", "NetworkMode", "RSRP", "DL_bitrate", "State"})


def _signature(cols: set) -> bool:
    return {"Timestamp", "DL_bitrate"} <= cols and bool({"NetworkMode", "NetworkTech"} & cols) \
        and bool({"RSRP", "Level"} & cols)


def is_format(path) -> bool:
    """G-NetTrack's columns, but not the UCC dataset's layout (which the ``ucc`` reader,
    sniffed first, claims)."""
    cols = set(header_columns(path))
    return _signature(cols) and not UCC_SIGNATURE <= cols


def why_not(path) -> str:
    return "header lacks Timestamp, NetworkMode, RSRP and DL_bitrate (G-NetTrack's names)"


def mapping(header, *, tz: str, reader: str = NAME, names=None, time_format: str | None = TIME_FORMAT) -> dict:
    """The csvmap mapping of a G-NetTrack log with columns ``header``: each frame column
    from the first of its G-NetTrack names present (``names``: only these G-NetTrack columns,
    all of which must then be present); ``time_format`` None lets ISO-style times be inferred."""
    cols, taken = {}, set()
    for src in (names or COLUMNS):
        spec = COLUMNS[src]
        dst = spec if isinstance(spec, str) else spec["name"]
        if (names or src in header) and dst not in taken:
            cols[src] = spec
            taken.add(dst)
    return {"kind": "rf", "reader": reader, "dedupe": "none",
            "time": {"column": "Timestamp", "format": time_format, "tz": tz}, "columns": cols}


def _time_format(path) -> str | None:
    """G-NetTrack's ``YYYY.MM.DD_hh.mm.ss`` when the first ``Timestamp`` is written so, else
    None: an export with ISO-style times (``2024-10-01 10:00:00``) is parsed as such."""
    import pandas as pd
    try:
        first = pd.read_csv(path, sep=sep_of(path), usecols=["Timestamp"], nrows=1, dtype=str)["Timestamp"]
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError):
        return TIME_FORMAT
    return TIME_FORMAT if len(first) == 0 or _GNT_TIME.fullmatch(str(first.iloc[0]).strip()) else None


def read(path, *, tz: str = "UTC"):
    """Read a G-NetTrack-style log into an ``rf`` frame (see module notes); ``tz`` is the
    zone of the phone's local ``Timestamp``."""
    path = Path(path)
    header = set(header_columns(path))
    if not _signature(header):
        raise FormatError(f"{path}: not a G-NetTrack-style log ({why_not(path)})")
    frame = csvmap.read(path, mapping=mapping(header, tz=tz, time_format=_time_format(path)))
    frame.attrs["time_zone"] = tz
    return frame
