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
Timestamp           time                 ``YYYY.MM.DD_hh.mm.ss`` phone local time -> UTC
Longitude/Latitude  longitude/latitude   degrees
Speed               speed_kmh            km/h
Operatorname        operator             text
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

from pathlib import Path

from airlink.traces.errors import FormatError

from . import csvmap
from ._tabular import header_columns

NAME = "gnettrack"
#: G-NetTrack column -> mapping spec (csvmap); the first of several names present is used
COLUMNS = {
    "Longitude": {"name": "longitude", "scale": 1}, "Latitude": {"name": "latitude", "scale": 1},
    "Speed": {"name": "speed_kmh", "unit": "km/h"}, "Operatorname": "operator", "CellID": "cell_id",
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


def mapping(header, *, tz: str, reader: str = NAME, names=None) -> dict:
    """The csvmap mapping of a G-NetTrack log with columns ``header``: each frame column
    from the first of its G-NetTrack names present (``names``: only these G-NetTrack columns,
    all of which must then be present)."""
    cols, taken = {}, set()
    for src in (names or COLUMNS):
        spec = COLUMNS[src]
        dst = spec if isinstance(spec, str) else spec["name"]
        if (names or src in header) and dst not in taken:
            cols[src] = spec
            taken.add(dst)
    return {"kind": "rf", "reader": reader, "dedupe": "none",
            "time": {"column": "Timestamp", "format": TIME_FORMAT, "tz": tz}, "columns": cols}


def read(path, *, tz: str = "UTC"):
    """Read a G-NetTrack-style log into an ``rf`` frame (see module notes); ``tz`` is the
    zone of the phone's local ``Timestamp``."""
    path = Path(path)
    header = set(header_columns(path))
    if not _signature(header):
        raise FormatError(f"{path}: not a G-NetTrack-style log ({why_not(path)})")
    frame = csvmap.read(path, mapping=mapping(header, tz=tz))
    frame.attrs["time_zone"] = tz
    return frame
