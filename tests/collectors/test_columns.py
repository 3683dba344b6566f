"""Column frames (collectors/_columns.py): the capture analysis's frames without pandas.

Every conversion is checked against what pandas and pyarrow make of the same data - the
frame the Python API always returned, and ``pyarrow.Table.from_pandas`` of it (types,
values, nulls and the pandas metadata byte for byte) - so files written without pandas
read back as before."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlink.collectors._columns import (Coded, Columns, arrow_array, iso_utc_times, pandas_version,
                                         utc_times)
from airlink.collectors._tcparrays import grouped_median_min

# times pandas can hold (datetime64[ns]: 1677-09-22 .. 2262-04-11)
NS = st.integers(min_value=-(2**63) + 2**40, max_value=2**63 - 2**40)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)


def mixed_frame(times, ints, floats, flags, words, codes, n_values):
    n = len(times)
    values = [f"v{i}" for i in range(n_values)]
    return Columns({"time": utc_times(times), "flow": np.asarray(ints[:n], np.int64),
                    "small": np.asarray(ints[:n], np.int64).astype(np.uint16),
                    "rtt_ms": np.asarray(floats[:n], np.float64), "ok": np.asarray(flags[:n], bool),
                    "src": np.asarray(words[:n], object), "kind": Coded(codes[:n], values, False),
                    "event": Coded(codes[:n], values, True), "constant": 7},
                   attrs={"source": "x.pcap", "resolution_s": 0.1})


@st.composite
def frames(draw):
    n = draw(st.integers(min_value=1, max_value=40))
    n_values = draw(st.integers(min_value=1, max_value=5))
    return mixed_frame(draw(st.lists(NS, min_size=n, max_size=n)),
                       draw(st.lists(st.integers(0, 2**16 - 1), min_size=n, max_size=n)),
                       draw(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=n, max_size=n)),
                       draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                       draw(st.lists(TEXT, min_size=n, max_size=n)),
                       draw(st.lists(st.integers(0, n_values - 1), min_size=n, max_size=n)), n_values)


@settings(max_examples=150, deadline=None)
@given(frames())
def test_arrow_table_is_from_pandas_of_the_pandas_frame(frame):
    """to_arrow() == pyarrow.Table.from_pandas(to_pandas()): types, values, NaN as null,
    schema metadata (pandas's included) byte for byte."""
    mine = frame.to_arrow()
    ref = pa.Table.from_pandas(frame.to_pandas(), preserve_index=False)
    assert mine.schema.equals(ref.schema, check_metadata=True)
    assert mine.schema.metadata == ref.schema.metadata
    assert mine.equals(ref)
    for name in mine.column_names:
        assert mine.column(name).null_count == ref.column(name).null_count, name


def test_pandas_frame_has_the_types_users_had():
    f = mixed_frame([0, 10**18], [1, 2], [1.5, np.nan], [True, False], ["a", "b"], [1, 0], 2)
    df = f.to_pandas()
    assert str(df["time"].dtype) == "datetime64[ns, UTC]" and df["time"][1] == pd.Timestamp(10**18, tz="UTC")
    assert isinstance(df["event"].dtype, pd.CategoricalDtype) and list(df["event"].cat.categories) == ["v0", "v1"]
    assert df["event"].tolist() == ["v1", "v0"] and df["kind"].dtype == object and df["kind"].tolist() == ["v1", "v0"]
    assert df["src"].dtype == object and df["constant"].tolist() == [7, 7]
    assert df.attrs == {"source": "x.pcap", "resolution_s": 0.1}


def test_an_empty_frame_goes_through_pandas_for_its_types():
    f = Columns({"time": utc_times([]), "flow": np.zeros(0), "direction": Coded([], ["fwd", "rev"], True)})
    ref = pa.Table.from_pandas(pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns, UTC]"), "flow": [],
                                             "direction": pd.Categorical([], categories=["fwd", "rev"])}),
                               preserve_index=False)
    assert f.to_arrow().equals(ref) and f.to_arrow().schema.equals(ref.schema, check_metadata=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=60))
def test_sort_and_concat_as_pandas(rows):
    """sort_by is pandas's stable multi-key sort (a categorical by its codes); concat unites
    the parts' categories (present() keeps those used, in order)."""
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([r[1] % 2 for r in rows], np.int8)
    f = Columns({"a": a, "d": Coded(b, ["fwd", "rev"], True), "i": np.arange(len(rows))})
    ref = f.to_pandas().sort_values(["a", "d"], kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(f.sort_by(["a", "d"]).to_pandas(), ref)
    half = len(rows) // 2
    p1 = Columns({"e": Coded(np.zeros(half, np.int8), ["rtt"], True)})
    p2 = Columns({"e": Coded(np.arange(len(rows) - half) % 2, ["dupack", "rtt"], True)})
    joined = Columns.concat([p1, p2])
    assert joined["e"].strings().tolist() == p1["e"].strings().tolist() + p2["e"].strings().tolist()
    ev = Coded(np.array([3, 3, 1]), ["a", "b", "c", "d"], True).present()
    assert ev.values == ["b", "d"] and ev.strings().tolist() == ["d", "d", "b"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.floats(0, 1e4, allow_nan=False)), min_size=1, max_size=80),
       st.integers(1, 90))
def test_grouped_median_min_is_pandas_groupby(pairs, piece):
    """Median ((a + b) / 2 of the middle two when even), minimum and count per group as
    pandas's groupby gives them, bit for bit - both ways of sorting the groups' values
    (a slice per group; all groups at once), and with the values taken in ranges of
    groups of about ``piece`` values (as a long flow's samples are)."""
    from airlink.collectors import _tcparrays
    g = np.array([p[0] for p in pairs], np.int64)
    v = np.array([p[1] for p in pairs], np.float64)
    ref = pd.Series(v).groupby(g)
    few, whole = _tcparrays._FEW_GROUPS, _tcparrays._MEDIAN_PIECE
    for limit, size in ((few, whole), (0, whole), (few, piece), (0, piece)):
        _tcparrays._FEW_GROUPS, _tcparrays._MEDIAN_PIECE = limit, size
        try:
            at, med, low, count = grouped_median_min(v, g)
        finally:
            _tcparrays._FEW_GROUPS, _tcparrays._MEDIAN_PIECE = few, whole
        np.testing.assert_array_equal(at, ref.size().index.to_numpy())
        assert med.tobytes() == ref.median().to_numpy().tobytes()
        assert low.tobytes() == ref.min().to_numpy().tobytes()
        np.testing.assert_array_equal(count, ref.size().to_numpy())


@settings(max_examples=300, deadline=None)
@given(st.lists(NS, min_size=1, max_size=20))
def test_iso_times_as_pandas_writes_them(ns):
    edge = [0, 1, 999, 1000, 1001, 10**9, -1, -1001]
    values = np.array(ns + edge, np.int64)
    assert iso_utc_times(utc_times(values)) == [pd.Timestamp(int(x), tz="UTC").isoformat() for x in values]


def test_arrow_arrays_of_every_type():
    cols = [np.array([1, 2], np.int8), np.array([3, 4], np.uint32), np.array([True, False] * 9, bool),
            np.array([np.nan, 2.5]), np.array(["é", ""], object), np.array(["ab", "c"])]
    for col in cols:
        assert arrow_array(col).equals(pa.array(col, from_pandas=True)), col.dtype
    t = arrow_array(utc_times([5, 6]))
    assert t.type == pa.timestamp("ns", tz="UTC") and t.cast(pa.int64()).to_pylist() == [5, 6]
    text = arrow_array(Coded([2, 0, 2, 1], ["", "fast", "timeout"], False))
    assert text.type == pa.string() and text.to_pylist() == ["timeout", "", "timeout", "fast"]


def test_pandas_version_without_pandas():
    assert pandas_version() == pd.__version__


@pytest.mark.parametrize("max_packets", [None, 50])
def test_collect_of_a_capture_never_imports_pandas(shared_data, tmp_path, max_packets):
    """`airlink collect` of a capture - read whole, or in flow groups with its long flows
    streamed and the packets pass fed - writes every frame without importing pandas, scipy
    or another command's modules (the parser is built for `collect` alone), and the files
    are those the Python API's pandas frames make."""
    from airlink import collectors as C
    cap = shared_data / "tcp-pcaps/zeek-head/ssh.pcap"
    args = ["collect", str(cap), "-o", str(tmp_path / "out")] + ([] if max_packets is None else
                                                                 ["--max-packets", str(max_packets)])
    code = ("import json, sys\nfrom airlink.cli import main\n"
            f"status = main({args!r})\n"
            "print(json.dumps({'status': status, 'modules': sorted(sys.modules)}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout.splitlines()[-1])
    assert done["status"] == 0
    assert not [m for m in done["modules"] if m.split(".")[0] in ("pandas", "scipy", "sklearn")]
    assert [m for m in done["modules"] if m.startswith("airlink.cli.") and not m.startswith("airlink.cli._")] \
        == ["airlink.cli.collect"]
    a = C.analyze_tcp(cap, max_packets=max_packets)
    for name, kind in (("flows", "flows"), ("series", "tcp"), ("events", "events")):
        written = pq.read_table(tmp_path / "out" / f"ssh.{kind}.parquet")
        ref = pa.Table.from_pandas(getattr(a, name), preserve_index=False)
        assert written.equals(ref), name
        assert written.schema.metadata[b"pandas"] == ref.schema.metadata[b"pandas"], name
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out" / f"ssh.{kind}.parquet"), getattr(a, name))
