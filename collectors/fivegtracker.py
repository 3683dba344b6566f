"""5G Tracker CSVs in the layout of the Lumos5G dataset -> ``rf`` frame.

5G Tracker is the Android app of Narayanan et al. ("Lumos5G: Mapping and Predicting
Commercial mmWave 5G Throughput", IMC 2020); the Lumos5G 1.0 dataset publishes its per-second
samples as one CSV whose columns, from left to right, its README documents as ``run_num``,
``seq_num``, ``abstractSignalStr``, ``latitude``, ``longitude``, ``movingSpeed``,
``compassDirection``, ``nrStatus``, ``lte_rssi``, ``lte_rsrp``, ``lte_rsrq``, ``lte_rssnr``,
``nr_ssRsrp``, ``nr_ssRsrq``, ``nr_ssSinr``, ``Throughput``, ``mobility_mode``,
``trajectory_direction``, ``tower_id``. Recognised by a header holding ``run_num``,
``seq_num``, ``nrStatus`` and ``Throughput`` (comma- or tab-separated).

==================  ====================  =========================================
5G Tracker          frame column          unit in the log -> in the frame
==================  ====================  =========================================
run_num             run                   the experiment run (one walk or drive)
seq_num             time                  seconds from the run's start (see below)
abstractSignalStr   signal_level          Android's 0..4 level of the LTE signal
latitude/longitude  latitude/longitude    degrees
movingSpeed         speed_kmh             m/s -> km/h
compassDirection    bearing_deg           degrees
nrStatus            nr_status             CONNECTED when on 5G; else NOT_RESTRICTED, NONE
lte_rssi            rssi_dbm              dBm (primary LTE cell)
lte_rsrp            rsrp_dbm              dBm
lte_rsrq            rsrq_db               dB
lte_rssnr           snr_db                dB
nr_ssRsrp/Rsrq/Sinr nr_rsrp_dbm/nr_rsrq_db/nr_sinr_db  dBm/dB/dB (TS 38.215)
Throughput          dl_bitrate_bps        Mbit/s -> bit/s (iPerf's per-second TCP downlink)
mobility_mode       mobility_mode         walking / driving
trajectory_direction trajectory_direction CW / ACW
tower_id            cell_id               anonymised tower
==================  ====================  =========================================

Assumptions, stated because the file does not carry them: the file has no clock, so
``time`` is ``seq_num`` seconds placed at the Unix epoch (``attrs["time_origin"]``) and the
runs share that axis - select one run (``frame[frame.run == k]``) before making a trace
from it, or give ``--by run`` to an NMI analysis. ``Throughput`` is Mbit/s (the paper's
unit). Android's "unavailable" value (``CellInfo.UNAVAILABLE``, 2147483647) and ``-`` are
missing. Rows of one second are all kept (``attrs["duplicate_times"]`` counts the seconds
several runs share).
"""
from __future__ import annotations

from pathlib import Path

from airlink.core.errors import FormatError

from . import csvmap
from ._tabular import header_columns

NAME = "5gtracker"
SIGNATURE = {"run_num", "seq_num", "nrStatus", "Throughput"}
#: Android's CellInfo.UNAVAILABLE (Integer.MAX_VALUE): the API had no value
UNAVAILABLE = "2147483647"
COLUMNS = {
    "run_num": {"name": "run", "scale": 1}, "abstractSignalStr": {"name": "signal_level", "scale": 1},
    "latitude": {"name": "latitude", "scale": 1}, "longitude": {"name": "longitude", "scale": 1},
    "movingSpeed": {"name": "speed_kmh", "unit": "m/s"}, "compassDirection": {"name": "bearing_deg", "scale": 1},
    "nrStatus": "nr_status", "lte_rssi": {"name": "rssi_dbm"}, "lte_rsrp": {"name": "rsrp_dbm"},
    "lte_rsrq": {"name": "rsrq_db"}, "lte_rssnr": {"name": "snr_db"}, "nr_ssRsrp": {"name": "nr_rsrp_dbm"},
    "nr_ssRsrq": {"name": "nr_rsrq_db"}, "nr_ssSinr": {"name": "nr_sinr_db"},
    "Throughput": {"name": "dl_bitrate_bps", "unit": "Mbit/s"}, "mobility_mode": "mobility_mode",
    "trajectory_direction": "trajectory_direction", "tower_id": "cell_id",
}


def is_format(path) -> bool:
    return SIGNATURE <= set(header_columns(path))


def why_not(path) -> str:
    return "header lacks run_num, seq_num, nrStatus and Throughput (5G Tracker's Lumos5G columns)"


def read(path):
    """Read a 5G Tracker CSV (Lumos5G layout) into an ``rf`` frame (see module notes)."""
    path = Path(path)
    header = set(header_columns(path))
    if not SIGNATURE <= header:
        raise FormatError(f"{path}: not a 5G Tracker CSV ({why_not(path)})")
    mapping = {"kind": "rf", "reader": NAME, "dedupe": "none", "missing": [UNAVAILABLE],
               "time": {"column": "seq_num", "unit": "s"},
               "columns": {src: spec for src, spec in COLUMNS.items() if src in header}}
    frame = csvmap.read(path, mapping=mapping)
    frame.attrs["time_origin"] = "seq_num: seconds from each run's start, placed at the Unix epoch"
    frame.attrs["runs"] = int(frame["run"].nunique()) if "run" in frame else 1
    return frame
