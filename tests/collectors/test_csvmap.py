"""The column mapping of the generic CSV reader is checked like an experiment file: unknown
keys and wrong types are errors naming the file and the key path; ``constants`` add columns."""
from __future__ import annotations

import pandas as pd
import pytest

from airlink import collectors as C
from airlink.traces import FormatError

LOG = "when,q,rate\n2024-01-01 10:00:00,-100,1.5\n2024-01-01 10:00:01,-101,2\n"


@pytest.mark.parametrize("yaml, message", [
    ("time: when\ncolums: {q: rsrp_dbm}\n", "m.yaml: colums: unknown key"),
    ("time: when\ncolumns: {q: {name: rsrp_dbm, scle: 2}}\n", "m.yaml: columns.q.scle: unknown key"),
    ("time: when\ncolumns: {q: {name: rsrp_dbm, scale: big}}\n", "m.yaml: columns.q.scale: Input should be a valid number"),
    ("time: {column: when, fromat: '%Y'}\ncolumns: {q: rsrp_dbm}\n", "m.yaml: time.fromat: unknown key"),
    ("time: {column: when, unit: days}\ncolumns: {q: rsrp_dbm}\n", "m.yaml: time.unit: Input should be 's', 'ms', 'us' or 'ns'"),
    ("columns: {q: rsrp_dbm}\n", "m.yaml: time: required key is missing"),
    ("kind: radio\ntime: when\ncolumns: {q: rsrp_dbm}\n", "m.yaml: kind: Input should be 'packets'"),
    ("time: when\n", "m.yaml: columns: no column is mapped"),
    ("time: when\ncolumns: {q: rsrp_dbm}\ndedupe: newest\n", "m.yaml: dedupe: Input should be 'last', 'first' or 'none'"),
    ("time: when\ncolumns: {q: rsrp_dbm}\nconstants: {rsrp_dbm: 1}\n", "constants: rsrp_dbm is also a mapped column"),
])
def test_mapping_errors_name_the_key_path(tmp_path, run_airlink, yaml, message):
    data = tmp_path / "log.csv"
    data.write_text(LOG)
    mp = tmp_path / "m.yaml"
    mp.write_text(yaml)
    with pytest.raises(FormatError) as exc:
        C.read(data, mapping=mp)
    assert message in str(exc.value) and str(exc.value).startswith(str(mp))
    status, _, err = run_airlink("collect", data, "--mapping", mp, "-o", tmp_path / "o")
    assert status == 2 and err.startswith("airlink: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").glob("*.parquet"))


def test_constants_and_short_forms(tmp_path):
    data = tmp_path / "log.csv"
    data.write_text(LOG)
    mapping = {"kind": "mac", "time": "when", "columns": {"rate": {"name": "tbs_bps", "unit": "Mbit/s"}},
               "constants": {"user": "ue", "carrier": "pcell", "prbs_max": 50}}
    fr = C.read(data, mapping=mapping)
    assert list(fr["tbs_bps"]) == [1.5e6, 2e6]
    assert list(fr["user"]) == ["ue", "ue"] and list(fr["carrier"]) == ["pcell"] * 2 and list(fr["prbs_max"]) == [50, 50]
    assert fr["time"].iloc[1] == pd.Timestamp("2024-01-01 10:00:01", tz="UTC")
    with pytest.raises(FormatError, match=r"^mapping: colums: unknown key$"):
        C.read(data, mapping={"time": "when", "colums": {"q": "rsrp_dbm"}})


def test_a_time_column_without_one_readable_time_is_an_error(tmp_path):
    data = tmp_path / "log.csv"
    data.write_text(LOG)
    with pytest.raises(FormatError, match=r"log.csv: when: no value is a readable time as '%d/%m/%Y' "
                                          r"\(line 2: '2024-01-01 10:00:00'\)$"):
        C.read(data, mapping={"time": {"column": "when", "format": "%d/%m/%Y"}, "columns": {"q": "rsrp_dbm"}})
