"""A sparse grid (only the steps where a user has a row) gives fairness and jitter exactly
the answers of the dense grid, which builds every (step, user) pair."""
import numpy as np
import pandas as pd
import pytest

from airlink import inference as inf
from airlink.collectors.timegrid import grid_times, to_grid


def grants(seed=4, n_slots=3000, users=("7", "12", "30")):
    """Grants on a 1 ms slot grid: each user scheduled in a random fifth of the slots, some
    slots with two rows of one user (merged), long silences in between."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, u in enumerate(users):
        slots = np.sort(rng.choice(n_slots, size=n_slots // (5 + 3 * k), replace=False))
        slots = np.concatenate([slots, slots[:7]])             # repeated slots: merged rows
        rows.append(pd.DataFrame({"time": pd.Timestamp("2024-05-01", tz="UTC") + pd.to_timedelta(slots, unit="ms"),
                                  "user": u, "served_bytes": rng.integers(100, 5000, slots.size),
                                  "prbs": rng.integers(1, 50, slots.size)}))
    return pd.concat(rows, ignore_index=True)


def test_to_grid_sparse_reexpanded_equals_dense():
    f = grants()
    dense = to_grid(f, resolution="1ms", by="user")
    sparse = to_grid(f, resolution="1ms", by="user", sparse=True)
    assert sparse.attrs["sparse"] and not dense.attrs["sparse"]
    assert len(sparse) + sparse.attrs["empty_bins"] == len(dense)
    assert sparse.attrs["empty_bins"] == dense.attrs["empty_bins"]
    assert sparse.attrs["merged_rows"] == dense.attrs["merged_rows"] == 21
    lo, hi = sparse.attrs["grid_bins"]
    full = grid_times(np.arange(lo, hi + 1), origin_ns=sparse.attrs["origin_ns"],
                      resolution_ns=sparse.attrs["resolution_ns"])
    back = (sparse.set_index(["user", "time"])
            .reindex(pd.MultiIndex.from_product([sorted(f["user"].unique()), full], names=["user", "time"]))
            .reset_index()[dense.columns])
    pd.testing.assert_frame_equal(back, dense, check_dtype=False)


@pytest.mark.parametrize("window", [None, "500ms"])
def test_fairness_and_jitter_are_the_same_on_both_grids(window):
    f = grants()
    dense, sparse = inf.prepare(f, resolution="1ms"), inf.prepare(f, resolution="1ms", sparse=True)
    assert len(sparse) < len(dense) / 3
    a = inf.fairness_report(dense, window=window)
    b = inf.fairness_report(sparse, window=window)
    assert a["overall"] == b["overall"]
    pd.testing.assert_frame_equal(a["users"], b["users"])
    pd.testing.assert_frame_equal(a["windows"], b["windows"])
    pd.testing.assert_frame_equal(inf.jitter_report(dense)["users"], inf.jitter_report(sparse)["users"])
    # and the reference by hand: Jain's index of each user's mean rate over the slots it was served in
    mean = f.groupby(["user", "time"])["served_bytes"].sum().groupby("user").mean()
    assert b["overall"]["jain_index"] == pytest.approx(mean.sum() ** 2 / (len(mean) * (mean ** 2).sum()), rel=1e-12)
