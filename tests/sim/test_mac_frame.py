"""The simulator's MAC frame (airlink.sim.step.Radio.mac_frame): TTI start times as UTC
datetimes, one row per TTI and user, and columns that are each their own memory."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airlink.sim import simulate


def test_mac_frame_times_and_independent_columns():
    mac = simulate("nr-fr1", duration="3ms", seed=1).mac      # 6 slots of 0.5 ms x 10 users
    assert len(mac) == 60 and str(mac["time"].dtype) == "datetime64[ns, UTC]"
    want = pd.Timestamp(0, tz="UTC") + pd.to_timedelta(np.repeat(np.arange(6) * 500_000, 10), unit="ns")
    assert (mac["time"].to_numpy() == want.to_numpy()).all()
    assert list(mac["user"][:10]) == [str(i) for i in range(1, 11)]
    served = mac["served_bytes"].to_numpy().copy()
    np.testing.assert_array_equal(mac["capacity_bytes"], served)
    mac.loc[0, "capacity_bytes"] = -1.0                       # one column changed, not its twin
    np.testing.assert_array_equal(mac["served_bytes"], served)


def test_written_mac_table_equals_the_frames_arrow_table(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    res = simulate("quick", duration="40ms", seed=2)
    res.write(tmp_path)                                   # from the columns, the frame not made yet
    written = pq.read_table(tmp_path / "mac.parquet")
    assert written.equals(pa.Table.from_pandas(res.mac, preserve_index=False))
    assert written.num_rows == 40 * res.capacity.n_users and written.schema.field("user").type == pa.string()


def test_arrow_arrays_from_numpy_equal_pyarrows_own():
    import pyarrow as pa
    from airlink.core.arrowarrays import numpy_array, strings
    x = np.array([[1.5, -2.0, np.inf], [0.0, 3.25, -0.0]])
    assert numpy_array(x[:, 1]).equals(pa.array([-2.0, 3.25]))            # a strided column
    nan = np.array([1.0, np.nan])
    assert numpy_array(nan).equals(pa.array(nan, from_pandas=True))        # NaN is null, as from_pandas
    kept = numpy_array(nan, nan_is_null=False)                             # or a value, as pa.array
    assert kept.null_count == pa.array(nan).null_count == 0
    assert np.array_equal(kept.to_numpy(), nan, equal_nan=True)
    ns = np.array([0, 500_000, 1_000_000], np.int64)
    assert numpy_array(ns, pa.timestamp("ns", tz="UTC")).equals(pa.array(pd.to_datetime(ns, utc=True)))
    assert numpy_array(ns.view("datetime64[ns]")).equals(pa.array(pd.to_datetime(ns, utc=True)))
    assert numpy_array(np.array([3, -1], ">i8")).equals(pa.array([3, -1], pa.int64()))
    assert numpy_array(np.array([True, False, True])).equals(pa.array([True, False, True]))
    names = ["1", "2", "10", "é"]
    codes = np.array([2, 0, 3, 3, 1])
    assert strings(names, codes).equals(pa.array(["10", "1", "é", "é", "2"], pa.string()))
    assert strings(names).equals(pa.array(names, pa.string()))
    with pytest.raises(ValueError):
        numpy_array(np.array([1, 2], np.int32), pa.timestamp("ns", tz="UTC"))   # widths differ
    with pytest.raises(ValueError):
        strings(names, np.array([4]))


def test_mac_table_with_nan_kept_equals_pyarrows_own_arrays():
    """The cell's MAC log (replay/cell.py's _MacLog) builds its rows with MacColumns.table(
    nan_is_null=False): the same table as pyarrow.array over each numpy column, NaN kept as a
    value, bool and int columns as they are."""
    import pyarrow as pa
    from airlink.sim.result import MacColumns
    res = simulate("quick", duration="20ms", seed=3)
    cols = {name: res.mac[name].to_numpy() for name in res.mac.columns if name not in ("time", "user")}
    n = len(res.mac)
    cols = {"time": np.arange(n, dtype=np.int64) * 1000, "user": res.mac["user"].to_numpy(object), **cols,
            "late": np.arange(n) % 3 == 0, "backlog_seen_bytes": np.where(np.arange(n) % 5 == 0, np.nan, 1.5)}
    users = [str(i + 1) for i in range(res.capacity.n_users)]
    got = MacColumns(cols, users).table(nan_is_null=False)
    want = pa.table({name: pa.array(v, pa.string()) if name == "user" else
                     pa.array(v, pa.timestamp("ns", tz="UTC")) if name == "time" else pa.array(v)
                     for name, v in cols.items()})
    assert got.schema == want.schema
    for name in want.column_names:
        a, b = got.column(name).to_numpy(zero_copy_only=False), want.column(name).to_numpy(zero_copy_only=False)
        assert got.column(name).null_count == 0 and (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f"
                                                     else (a == b).all()), name
    assert MacColumns(cols, users).table().column("backlog_seen_bytes").null_count == (np.arange(n) % 5 == 0).sum()


def test_mac_table_keeps_user_labels_that_are_not_repeated_in_order():
    """A measured cell's MAC log has cross-traffic rows between the live users' (replay/
    cell_fromlog.py): a user column that starts as "1", "2" and has an even number of rows is
    not the repeated layout, and every label stays as given."""
    from airlink.sim.result import MacColumns
    users = ["1", "2"]
    labels = np.array(["1", "2", "25864", "2", "1", "1", "2", "25864"], object)
    cols = {"time": np.arange(len(labels), dtype=np.int64), "user": labels, "prbs": np.arange(len(labels))}
    got = MacColumns(cols, users).table().column("user").to_pylist()
    assert got == labels.tolist()
    tiled = np.tile(np.array(users, object), 4)
    assert MacColumns({**cols, "user": tiled}, users).table().column("user").to_pylist() == tiled.tolist()
