"""Invariants of the information measures and the lag scan, and agreement with sklearn."""
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import mutual_info_score, normalized_mutual_info_score

import airlink.inference as inf
from airlink.traces import AirlinkError

NORMS = list(inf.NORMALIZATIONS)
SYMMETRIC = ["arithmetic", "geometric", "min", "max", "joint", "none"]


def series(n=3000, seed=0, lag=0, noise=0.7):
    rng = np.random.default_rng(seed)
    y = np.convolve(rng.normal(size=n + 20), np.ones(5) / 5, mode="same")[:n]
    x = np.roll(y, lag) + noise * rng.normal(size=n)
    return x, y


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bounds(norm, seed):
    x, y = series(seed=seed)
    v = inf.normalized_mutual_info(x, y, bins=8, normalization=norm)
    assert v >= 0
    if norm != "none":
        assert v <= 1
    scan = inf.lag_scan(x, y, max_lag=20, bins=8, normalization=norm)
    assert (scan.values >= 0).all()
    if norm != "none":
        assert (scan.values <= 1 + 1e-12).all()


@pytest.mark.parametrize("norm", SYMMETRIC)
def test_symmetry_where_it_holds(norm):
    x, y = series()
    a = inf.normalized_mutual_info(x, y, bins=8, normalization=norm)
    b = inf.normalized_mutual_info(y, x, bins=8, normalization=norm)
    assert a == pytest.approx(b, rel=1e-12, abs=1e-15)


def test_paper_normalization_is_not_symmetric():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, 4000)              # 1 bit
    y = x * 4 + rng.integers(0, 4, 4000)      # 3 bits, determines x
    assert inf.normalized_mutual_info(x, y) == pytest.approx(1.0)
    assert inf.normalized_mutual_info(y, x) == pytest.approx(np.log(2) / np.log(8), rel=0.05)


@pytest.mark.parametrize("binning", ["uniform", "quantile"])
@pytest.mark.parametrize("method", ["arithmetic", "geometric", "min", "max"])
def test_lag0_agrees_with_sklearn(binning, method):
    x, y = series(seed=5)
    dx, dy = inf.discretize(x, bins=16, binning=binning), inf.discretize(y, bins=16, binning=binning)
    assert inf.mutual_info(dx, dy) == pytest.approx(mutual_info_score(dx.codes, dy.codes), rel=1e-9)
    assert inf.normalized_mutual_info(dx, dy, normalization=method) == pytest.approx(
        normalized_mutual_info_score(dx.codes, dy.codes, average_method=method), rel=1e-9)
    scan = inf.lag_scan(dx, dy, max_lag=3, normalization=method)
    assert scan.values.loc[0] == pytest.approx(
        normalized_mutual_info_score(dx.codes, dy.codes, average_method=method), rel=1e-9)


def test_uniform_bins_match_kbinsdiscretizer():
    from sklearn.preprocessing import KBinsDiscretizer
    x, _ = series(seed=7)
    kb = KBinsDiscretizer(n_bins=16, encode="ordinal", strategy="uniform")
    ref = kb.fit_transform(x[:, None]).ravel().astype(int)
    assert (inf.discretize(x, bins=16).codes == ref).all()


def test_integer_levels_are_kept_and_edges_given():
    codes = inf.discretize([0, 2, 2, 7, 7, 7], bins=16)
    assert codes.n_levels == 3 and list(codes.codes) == [0, 1, 1, 2, 2, 2]
    many = inf.discretize(np.arange(100), bins=16)
    assert many.n_levels == 16
    e = inf.discretize([0.5, 1.5, 2.5, 10], bins=[0, 1, 2, 3])
    assert list(e.codes) == [0, 1, 2, 2]
    with pytest.raises(AirlinkError):
        inf.discretize([1, 2], bins=[3, 1])


def test_nan_pairs_dropped():
    x, y = series(n=2000)
    xn = x.copy()
    xn[::7] = np.nan
    keep = ~np.isnan(xn)
    d = inf.discretize(x, bins=8)
    dn = inf.discretize(xn, bins=8)
    # same edges are not guaranteed, so compare on the kept codes directly
    assert inf.mutual_info(dn, inf.discretize(y, bins=8)) == pytest.approx(
        mutual_info_score(dn.codes[keep], inf.discretize(y, bins=8).codes[keep]))
    assert d.codes.min() >= 0 and (dn.codes == -1).sum() == (~keep).sum()


def test_constant_series_handled():
    rng = np.random.default_rng(0)
    c, y = np.ones(500), rng.normal(size=500)
    assert inf.entropy(c) == 0.0
    assert inf.normalized_mutual_info(c, y) == 0.0
    assert inf.normalized_mutual_info(y, c) == 0.0
    assert inf.normalized_mutual_info(c, c, normalization="arithmetic") == 1.0
    assert normalized_mutual_info_score(np.zeros(5), np.zeros(5)) == 1.0
    scan = inf.lag_scan(c, y, max_lag=5)
    assert (scan.values == 0).all() and not scan.values.isna().any()


@pytest.mark.parametrize("shift", [-13, -1, 0, 4, 25])
def test_shift_moves_peak(shift):
    x, y = series(n=4000, lag=10, noise=0.3)
    base = inf.lag_scan(x, y, max_lag=60, bins=8)
    assert base.peak_lag == 10
    moved = inf.lag_scan(x, np.roll(y, shift), max_lag=60, bins=8)
    assert moved.peak_lag == base.peak_lag - shift
    assert moved.peak == pytest.approx(base.peak, abs=0.02)


def test_fft_equals_direct_with_nans_and_uneven_levels():
    rng = np.random.default_rng(11)
    x, y = series(n=9000, lag=3)
    x[rng.integers(0, 9000, 300)] = np.nan
    y[rng.integers(0, 9000, 300)] = np.nan
    dx, dy = inf.discretize(x, bins=16), inf.discretize(y, bins=5, binning="quantile")
    a = inf.lag_counts(dx, dy, max_lag=700, method="fft")
    b = inf.lag_counts(dx, dy, max_lag=700, method="direct")
    assert a.dtype == b.dtype and np.array_equal(a, b)
    sa = inf.lag_scan(dx, dy, max_lag=700, method="fft")
    sb = inf.lag_scan(dx, dy, max_lag=700, method="direct")
    assert np.array_equal(sa.values.to_numpy(), sb.values.to_numpy())


def test_lags_in_seconds_from_time_index():
    x, y = series(n=600, lag=5, noise=0.2)
    idx = pd.date_range("2026-01-01", periods=600, freq="100ms", tz="UTC")
    scan = inf.lag_scan(pd.Series(x, idx), pd.Series(y, idx), max_lag="3s", bins=8)
    assert scan.params["max_lag"] == 30
    assert scan.peak_lag == 5 and scan.peak_lag_s == pytest.approx(0.5)
    assert scan.as_seconds().index[0] == pytest.approx(-3.0)


def test_bad_input_is_one_clear_error():
    with pytest.raises(AirlinkError, match="lengths differ"):
        inf.lag_scan([1, 2, 3], [1, 2])
    with pytest.raises(AirlinkError, match="normalization"):
        inf.normalized_mutual_info([1, 2], [1, 2], normalization="nope")
    with pytest.raises(AirlinkError, match="sample period"):
        inf.lag_scan(np.arange(10.0), np.arange(10.0), max_lag="1s")


@pytest.mark.parametrize("n,max_lag,kx,ky", [(2, 0, 2, 2), (5, 4, 3, 1), (50, 0, 4, 4), (100, 99, 16, 3),
                                             (3000, 1, 1, 16), (5000, 2500, 7, 9)])
def test_fft_equals_direct_edge_cases(n, max_lag, kx, ky):
    rng = np.random.default_rng(n + max_lag)
    x = rng.integers(0, kx, n).astype(float)
    y = rng.integers(0, ky, n).astype(float)
    x[rng.random(n) < 0.1] = np.nan
    dx = inf.discretize(x, binning="levels")
    dy = inf.discretize(y, binning="levels")
    a = inf.lag_counts(dx, dy, max_lag=max_lag, method="fft")
    b = inf.lag_counts(dx, dy, max_lag=max_lag, method="direct")
    assert a.shape == (2 * max_lag + 1, dx.n_levels, dy.n_levels)
    assert np.array_equal(a, b)
