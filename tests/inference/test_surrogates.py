"""The surrogate test: independent series stay under the threshold, coupled ones do not."""
import numpy as np
import pytest

import airlink.inference as inf


def ar1(n, rng, phi=0.9):
    e = rng.normal(size=n)
    out = np.empty(n)
    out[0] = e[0]
    for t in range(1, n):
        out[t] = phi * out[t - 1] + e[t]
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["circular", "block"])
def test_independent_series_peak_under_threshold(seed, kind):
    rng = np.random.default_rng(100 + seed)
    x, y = ar1(1500, rng), ar1(1500, rng)      # autocorrelated, independent
    sig = inf.peak_significance(x, y, max_lag=20, bins=8, surrogates=99, bootstrap=50,
                                surrogate=kind, seed=seed)
    assert sig.peak_nmi <= sig.threshold or sig.p_value > 0.01
    assert sig.bias_corrected < 0.02
    assert 0 < sig.p_value <= 1


def test_false_positive_rate_is_about_alpha():
    rng = np.random.default_rng(7)
    p = [inf.peak_significance(ar1(800, rng), ar1(800, rng), max_lag=10, bins=6, surrogates=49,
                               bootstrap=0, seed=k).p_value for k in range(30)]
    assert np.mean(np.array(p) <= 0.05) <= 0.2


def test_coupled_series_are_significant_with_interval():
    rng = np.random.default_rng(1)
    y = ar1(2000, rng)
    x = np.roll(y, 4) + 0.8 * rng.normal(size=2000)
    sig = inf.peak_significance(x, y, max_lag=30, bins=8, surrogates=99, bootstrap=100, seed=0)
    assert sig.lag == 4
    assert sig.p_value == pytest.approx(0.01)
    assert sig.peak_nmi > sig.threshold
    assert sig.ci_low <= sig.peak_nmi <= sig.ci_high
    assert 0 <= sig.ci_low and sig.ci_high <= 1
    assert 0 < sig.bias_corrected < sig.peak_nmi
    assert sig.n_pairs == 2000 - 4


def test_zero_surrogates_turns_the_test_off():
    rng = np.random.default_rng(2)
    sig = inf.peak_significance(rng.normal(size=300), rng.normal(size=300), max_lag=5,
                                surrogates=0, bootstrap=0)
    assert np.isnan(sig.p_value) and np.isnan(sig.threshold) and np.isnan(sig.ci_low)
    assert sig.surrogates == 0
