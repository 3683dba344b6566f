"""Datetime-typed time columns are converted as whole int64 arrays by
collectors.timegrid.parse_times: the same instants as the value-by-value path of Python
Timestamp objects (what a column of objects still takes), on real frames; and align's
common grid is budgeted before it is made."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors.timegrid import parse_times, time_of
from airlink.core.bounds import BoundError


def test_zone_aware_column_equals_object_path(shared_data):
    rf = C.read(shared_data / "ucc-5g/Download/Static/B_2019.12.16_13.40.04.csv")
    col = rf["time"]
    assert isinstance(col.dtype, pd.DatetimeTZDtype) and len(col) > 100
    for values in (col, col.dt.tz_convert("Europe/Dublin"), pd.DatetimeIndex(col)):
        fast = parse_times(values)
        old = parse_times(list(values))                  # objects: the value-by-value path
        assert fast.equals(old) and fast.dtype == old.dtype == "datetime64[ns, UTC]"
        assert np.array_equal(fast.asi8, col.to_numpy().astype("datetime64[ns]").astype(np.int64))


def test_naive_column_in_a_zone_equals_object_path(shared_data):
    rf = C.read(shared_data / "ucc-5g/Download/Static/B_2019.12.16_13.40.04.csv")
    local = rf["time"].dt.tz_convert("Europe/Dublin").dt.tz_localize(None).astype("datetime64[us]")
    local.iloc[3] = pd.NaT
    fast, old = parse_times(local, tz="Europe/Dublin"), parse_times(list(local), tz="Europe/Dublin")
    assert fast.equals(old) and fast.dtype == "datetime64[ns, UTC]" and fast.isna().sum() == 1


def test_time_of_index_and_column(shared_data):
    rf = C.read(shared_data / "ucc-5g/Download/Static/B_2019.12.16_13.40.04.csv")
    t1, rest = time_of(rf)
    t2, _ = time_of(rf.set_index("time"))
    assert t1.equals(t2) and t1.equals(parse_times(list(rf["time"]))) and "time" not in rest.columns


def test_align_refuses_a_grid_over_its_budget_before_making_it():
    # two one-row frames 10 years apart: at 1 s the common grid needs 315,360,001 steps
    # (10 x 365 x 86,400 + 1), over MAX_GRID_POINTS (10^8); each frame alone needs one
    a = pd.DataFrame({"time": pd.to_datetime([0], unit="s", utc=True), "rsrp_dbm": [-90.0]})
    b = pd.DataFrame({"time": pd.to_datetime([10 * 365 * 86_400], unit="s", utc=True), "rsrp_dbm": [-80.0]})
    with pytest.raises(BoundError, match=r"frame 'old'.* frame 'new' \(3\.1536e\+08 s\) needs 3\.15e\+08 grid points"):
        C.align({"old": a, "new": b}, resolution="1s")
    assert C.align({"old": a, "new": b}, resolution="86400s").shape == (3651, 3)
