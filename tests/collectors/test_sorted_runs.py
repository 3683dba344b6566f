"""collectors._sortedruns: frames spilled to disk as sorted runs and merged back give what
joining them in memory and sorting stably gives (Columns.concat + Columns.sort_by), value,
type, category and row order alike - with windows of a few rows, runs merged on disk when
they accumulate, and chunks cut anywhere."""
from __future__ import annotations

import numpy as np
import pytest

from airlink.collectors import _sortedruns
from airlink.collectors._columns import Coded, Columns
from airlink.collectors._sortedruns import SortedRuns

KEYS = ["time", "flow", "direction"]


def _run(rng, j: int, n: int) -> Columns:
    """Run ``j``: ``n`` rows of flows of its own (j, and j + 1000 for every third run), few
    distinct times (many rows of equal keys: their order is the stable sort's), a category
    column whose values differ between runs, an int column int32 in odd runs and int64 in
    even ones, and the row's identity."""
    t = rng.integers(0, 30, n).astype("datetime64[ns]")
    flow = rng.choice([j, j + 1000], n) if j % 3 == 0 else np.full(n, j, np.int64)
    values = [["b", "a"], ["c"], ["a", "d", "b"]][j % 3]
    return Columns({"time": t, "flow": flow,
                    "direction": Coded(rng.integers(0, 2, n), ["fwd", "rev"], True),
                    "event": Coded(rng.integers(0, len(values), n), values, True),
                    "kind": Coded(rng.integers(0, 2, n), ["x", "y"], False),
                    "count": rng.integers(0, 9, n).astype(np.int32 if j % 2 else np.int64),
                    "rtt": rng.random(n), "row": np.arange(n) + 10**6 * j}, {"source": "s"})


def _copy(frame: Columns) -> Columns:
    return Columns({k: (Coded(v.codes.copy(), v.values, v.categorical) if isinstance(v, Coded) else v.copy())
                    for k, v in frame.data.items()}, frame.attrs)


def _assert_same(got: Columns, ref: Columns):
    assert got.columns == ref.columns and len(got) == len(ref)
    for name in ref.columns:
        a, b = ref[name], got[name]
        if isinstance(a, Coded):
            assert (b.values, b.categorical, b.codes.dtype) == (a.values, a.categorical, a.codes.dtype), name
            a, b = a.codes, b.codes
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(b, a, err_msg=name)


@pytest.mark.parametrize("max_runs,window,rows", [(64, 4096, 1 << 18), (3, 2, 5), (2, 1, 1), (4, 3, 64)])
def test_merged_runs_equal_the_sorted_join(monkeypatch, max_runs, window, rows):
    monkeypatch.setattr(_sortedruns, "MAX_RUNS", max_runs)
    monkeypatch.setattr(_sortedruns, "MIN_WINDOW", window)
    rng = np.random.default_rng(max_runs)
    frames = [_run(rng, j, int(rng.integers(0, 40))) for j in range(25)]
    frames[3] = frames[3].take(np.zeros(0, np.int64))          # a group without rows
    ref = Columns.concat([_copy(f) for f in frames if len(f)]).sort_by(KEYS)
    runs = SortedRuns(KEYS, {"source": "s"})
    for f in frames:
        runs.add(_copy(f))
    assert len(runs) == len(ref)
    parts = list(runs.chunks(rows))
    assert all(len(p) >= rows for p in parts[:-1])
    _assert_same(Columns.concat(parts), ref)
    _assert_same(runs.whole(), ref)
    assert runs.whole().attrs == {"source": "s"}
    # every row's column once (the runs' order, not merged)
    np.testing.assert_array_equal(np.sort(np.concatenate(list(runs.column_parts("row", 7)))), np.sort(ref["row"]))


def test_no_rows_gives_the_first_frame():
    empty = Columns({"time": np.zeros(0, "datetime64[ns]"), "flow": np.zeros(0, np.int64),
                     "direction": Coded(np.zeros(0, np.int8), ["fwd", "rev"], True)})
    runs = SortedRuns(KEYS)
    runs.add(empty)
    [only] = list(runs.chunks())
    assert len(only) == 0 and only.columns == ["time", "flow", "direction"]


def test_key_columns_must_code_alike():
    runs = SortedRuns(KEYS)
    one = Columns({"time": np.zeros(2, "datetime64[ns]"), "flow": np.arange(2),
                   "direction": Coded([0, 1], ["fwd", "rev"], True)})
    runs.add(one)
    other = Columns({"time": np.zeros(2, "datetime64[ns]"), "flow": np.arange(2) + 5,
                     "direction": Coded([0, 1], ["rev", "fwd"], True)})
    with pytest.raises(ValueError, match="direction"):
        runs.add(other)


@pytest.mark.parametrize("kind", [SortedRuns, _sortedruns.JoinedRuns])
def test_runs_on_disk_and_in_memory_give_the_sorted_join_through_finish(kind):
    """Both shapes: the join sorted stably, the runs' united values, and the finishing
    functions applied once to the rows (a code remap and an added column)."""
    rng = np.random.default_rng(7)
    frames = [_run(rng, j, int(rng.integers(1, 30))) for j in range(9)]
    ref = Columns.concat([_copy(f) for f in frames]).sort_by(KEYS)
    runs = kind(KEYS, {"source": "s"})
    for f in frames:
        runs.add(_copy(f))
    assert runs.values("event") == ["b", "a", "c", "d"]      # in order of first appearance
    assert runs.columns == ref.columns

    def doubled(frame):
        frame["count"] = frame["count"] * 2
        return frame
    runs.finish.append(doubled)
    got = runs.whole()
    ref["count"] = ref["count"] * 2
    _assert_same(got, ref)
    _assert_same(Columns.concat(list(runs.chunks())), ref)    # not finished twice
    assert got.attrs == {"source": "s"}


def test_joined_runs_without_rows_give_the_first_frame():
    empty = Columns({"time": np.zeros(0, "datetime64[ns]"), "flow": np.zeros(0, np.int64)})
    runs = _sortedruns.JoinedRuns(KEYS[:2])
    runs.add(empty)
    runs.add(Columns({"time": np.zeros(0, "datetime64[ns]")}))
    assert len(runs) == 0 and runs.whole().columns == ["time", "flow"]


@pytest.mark.parametrize("kind,chunk_bytes", [(SortedRuns, 16 << 20), (SortedRuns, 100), (_sortedruns.JoinedRuns, 0)])
def test_rows_by_position_equal_the_join_s_rows(kind, chunk_bytes, monkeypatch):
    """A few rows picked by their position among the runs' rows (as column_parts lists
    them) come back as those rows of the join, sorted by the keys, in the joined types
    (the int column int32 in some runs, int64 in the join; categories united), finished;
    read a window of rows at a time (windows of two rows when ``chunk_bytes`` is 100)."""
    monkeypatch.setattr(_sortedruns, "MIN_WINDOW", 1)
    monkeypatch.setattr(_sortedruns, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(11)
    frames = [_run(rng, j, int(rng.integers(1, 30))) for j in range(9)]
    added = Columns.concat([_copy(f) for f in frames])            # the runs one after another
    runs = kind(KEYS, {"source": "s"})
    for f in frames:
        runs.add(_copy(f))

    def doubled(frame):
        frame["count"] = frame["count"] * 2
        return frame
    runs.finish.append(doubled)
    listed = np.concatenate(list(runs.column_parts("row")))         # each row's identity
    pick = rng.choice(len(added), 17, replace=False)
    ref = added.take(np.sort(np.flatnonzero(np.isin(added["row"], listed[pick])))).sort_by(KEYS)
    ref["count"] = ref["count"] * 2
    got = runs.rows(pick)
    _assert_same(got, ref)
    assert got.attrs == {"source": "s"}
    assert len(runs.rows(np.zeros(0, np.int64))) == 0


def test_chunks_of_wide_rows_are_cut_by_bytes(monkeypatch):
    """A chunk holds at most about CHUNK_BYTES of columns (a flows table's rows are wide):
    more, smaller chunks, the same frame."""
    rng = np.random.default_rng(5)
    frames = [_run(rng, j, 40) for j in range(6)]
    ref = Columns.concat([_copy(f) for f in frames]).sort_by(KEYS)
    runs = SortedRuns(KEYS, {"source": "s"})
    for f in frames:
        runs.add(_copy(f))
    whole = list(runs.chunks())
    monkeypatch.setattr(_sortedruns, "MIN_WINDOW", 1)
    width = 8 + 8 + 1 + 1 + 1 + 8 + 8 + 8      # bytes of a row of _run's columns (int64 count)
    monkeypatch.setattr(_sortedruns, "CHUNK_BYTES", 10 * width)
    cut = list(runs.chunks())
    assert len(whole) == 1 and len(cut) >= len(ref) // 20
    _assert_same(Columns.concat(cut), ref)
