"""``_timeorder.in_time_order``: the rows of a capture's parts in stable time order, part by part,
against ``np.argsort(kind="stable")`` of the whole; parts another thread reads
(``owned=False``) are never changed, and parts in time order pass through uncopied."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from airlink.collectors._timeorder import in_time_order, lateness


def _parts(ts, cuts):
    """Dicts of ``ts_ns`` and the row's file index, cut at ``cuts``."""
    return [{"ts_ns": ts[p].copy(), "idx": p.copy()} for p in np.split(np.arange(len(ts)), cuts)]


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.integers(0, 4), max_size=200),
       late=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 40)), max_size=6),
       cuts=st.lists(st.integers(0, 200), max_size=8), owned=st.booleans())
def test_rows_come_in_stable_time_order(steps, late, cuts, owned):
    ts = np.cumsum(np.array(steps, np.int64))
    for where, back in late:                    # records that came late, as multi-queue capture gives
        if len(ts):
            ts[where % len(ts)] -= back
    parts = _parts(ts, sorted(c for c in cuts if c <= len(ts)))
    before = [{c: v.copy() for c, v in p.items()} for p in parts]
    out = list(in_time_order(iter(parts), lateness(ts)[0], owned=owned))
    got = np.concatenate([o["idx"] for o in out]) if out else np.zeros(0, np.int64)
    assert np.array_equal(got, np.argsort(ts, kind="stable"))
    for o in out:                               # every part's columns stay row-aligned
        assert np.array_equal(o["ts_ns"], ts[o["idx"]])
    if not owned:
        for p, b in zip(parts, before):
            for c in p:
                assert np.array_equal(p[c], b[c])


def test_parts_in_time_order_pass_through_uncopied():
    ts = np.arange(1000, dtype=np.int64) * 10
    parts = _parts(ts, [300, 600, 900])
    out = list(in_time_order(iter(parts), 25, owned=False))
    assert len(out) == len(parts)
    for o, p in zip(out, parts):
        assert o["ts_ns"] is p["ts_ns"] and o["idx"] is p["idx"]


def test_a_part_out_of_order_is_copied_unless_owned():
    ts = np.array([0, 10, 5, 20, 30], np.int64)
    for owned in (False, True):
        part = {"ts_ns": ts.copy(), "idx": np.arange(5)}
        keep = part["ts_ns"]
        (out,) = list(in_time_order(iter([part]), 5, owned=owned))
        assert out["ts_ns"].tolist() == [0, 5, 10, 20, 30] and out["idx"].tolist() == [0, 2, 1, 3, 4]
        assert (out["ts_ns"] is keep) == owned
        assert keep.tolist() == ([0, 5, 10, 20, 30] if owned else ts.tolist())
