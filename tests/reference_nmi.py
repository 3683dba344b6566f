"""A reference normalized mutual information, written from the definition for the tests
(Mattar et al.): ``I_N(X;Y) = (H(X) + H(Y) - H(X,Y)) / H(X)`` on discretized series, over
the pairs ``(x[t], y[t - lag])`` where neither value is missing. Any logarithm base gives
the same ratio."""
from __future__ import annotations

import numpy as np


def uniform_codes(values, k: int) -> np.ndarray:
    """An integer series with at most ``k`` distinct values keeps them as levels; anything
    else falls in ``k`` equal-width bins over its range (np.histogram's edges). NaN is -1."""
    v = np.asarray(values, dtype=float)
    ok = ~np.isnan(v)
    levels = np.unique(v[ok])
    if levels.size <= k and np.all(levels == np.round(levels)):
        c = np.searchsorted(levels, v)
    else:
        edges = np.histogram_bin_edges(v[ok], bins=k)
        c = np.clip(np.digitize(v, edges[1:-1]), 0, k - 1)
    return np.where(ok, c, -1)


def quantile_codes(values, k: int) -> np.ndarray:
    """``k`` equal-frequency bins (repeated edges merged)."""
    x = np.asarray(values, dtype=np.float64)
    edges = np.unique(np.quantile(x, np.linspace(0, 1, k + 1)[1:-1]))
    return np.searchsorted(edges, x, side="right")


def entropy(*cols) -> float:
    """Joint Shannon entropy (nats) of the code columns."""
    _, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def nmi_at(x, y, lag: int) -> float:
    """``I_N`` of codes ``x`` and ``y`` over the pairs ``(x[t], y[t - lag])`` with no -1;
    0 when ``X`` is constant there."""
    a, b = (x[lag:], y[:len(y) - lag]) if lag >= 0 else (x[:lag], y[-lag:])
    ok = (a >= 0) & (b >= 0)
    a, b = a[ok], b[ok]
    hx = entropy(a)
    return (hx + entropy(b) - entropy(a, b)) / hx if hx else 0.0


def nmi_curve(x, y, max_lag: int) -> list:
    """``[I_N at lag -max_lag, ..., I_N at lag max_lag]``."""
    return [nmi_at(x, y, d) for d in range(-max_lag, max_lag + 1)]
