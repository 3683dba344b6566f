"""Discretization, entropy, mutual information and normalized mutual information.

The paper's measure (Mattar et al., Sec. 3) is

    I_N(X; Y; d) = (H(X) + H(Y) - H(X, Y_d)) / H(X)

with ``Y_d`` the series ``Y`` delayed by ``d`` samples and entropies of discretized
values. Here it is ``normalized_mutual_info(x, y, normalization="x")`` at ``d = 0``
and :func:`airlink.inference.lag_scan` over ``d``.

Choices made where the paper is silent (also in docs/inference.md):

- Entropies are in nats (natural log) so that raw mutual information agrees with
  ``sklearn.metrics.mutual_info_score``; normalized values do not depend on the base.
- All entropies of one estimate use the **same pairs**: a pair with a NaN on either
  side is dropped before the marginals are counted, so ``0 <= I_N <= 1`` always holds.
- A constant series has zero entropy. With the paper's normalization by ``H(X)``
  a constant ``X`` gives ``I_N = 0.0`` (nothing to explain, and no factor is credited).
  The symmetric normalizations follow scikit-learn: both constant -> 1.0, otherwise
  zero mutual information -> 0.0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from airlink.core.errors import AirlinkError

BINNINGS = ("uniform", "quantile", "levels")
NORMALIZATIONS = ("x", "y", "arithmetic", "geometric", "min", "max", "joint", "none")


@dataclass(frozen=True)
class Discretized:
    """Integer codes ``0..n_levels-1`` (``-1`` where the input was NaN) and the bin edges
    (``None`` when the values were kept as levels)."""

    codes: np.ndarray
    n_levels: int
    edges: np.ndarray | None
    levels: np.ndarray | None = None


def _as_float_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise AirlinkError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "OUS":
        raise AirlinkError(f"{name} must be numeric; use integer codes for categorical values")
    return arr.astype(float, copy=False)


def _is_integer_coded(values: np.ndarray) -> bool:
    return values.size > 0 and bool(np.all(values == np.round(values)))


def discretize(x, *, bins=16, binning: str = "uniform", keep_levels: bool = True) -> Discretized:
    """Map a numeric series to integer bin codes.

    Parameters
    ----------
    x : array-like, 1-D
        Values; NaN is kept as code ``-1`` (the pair is dropped later).
    bins : int or array-like
        Number of bins ``K``, or the bin edges themselves (``binning`` is then ignored).
        Edges are ``e_0 < e_1 < ... < e_K``; values outside are clipped into the end bins.
    binning : {"uniform", "quantile", "levels"}
        ``uniform``: ``K`` equal-width bins over the observed range (as
        ``KBinsDiscretizer(strategy="uniform")``); ``quantile``: edges at the ``K``-quantiles
        (repeated edges merged); ``levels``: every distinct value is its own code.
    keep_levels : bool
        A series that is already integer-coded with at most ``K`` distinct values keeps
        its levels (one code per value) instead of being re-binned.
    """
    values = _as_float_1d(x, "series")
    valid = ~np.isnan(values)
    codes = np.full(values.shape, -1, dtype=np.int64)
    v = values[valid]
    if binning not in BINNINGS:
        raise AirlinkError(f"unknown binning {binning!r} (one of {', '.join(BINNINGS)})")
    if v.size == 0:
        return Discretized(codes, 1, None)
    if np.ndim(bins) == 1:
        edges = np.asarray(bins, dtype=float)
        if edges.size < 2 or np.any(np.diff(edges) <= 0):
            raise AirlinkError("bin edges must be at least two strictly increasing values")
        k = edges.size - 1
        codes[valid] = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, k - 1)
        return Discretized(codes, k, edges)
    k = int(bins)
    if k < 1:
        raise AirlinkError(f"bins must be at least 1, got {bins}")
    levels = np.unique(v)
    if binning == "levels" or (keep_levels and levels.size <= k and _is_integer_coded(levels)):
        codes[valid] = np.searchsorted(levels, v)
        return Discretized(codes, int(levels.size), None, levels)
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:  # constant series: one level, zero entropy
        codes[valid] = 0
        return Discretized(codes, 1, np.array([lo, hi]))
    if binning == "uniform":
        edges = np.linspace(lo, hi, k + 1)
    else:
        edges = np.unique(np.quantile(v, np.linspace(0, 1, k + 1)))
        k = edges.size - 1
    # Interior edges only: values equal to an edge go to the upper bin, the maximum to the last.
    codes[valid] = np.searchsorted(edges[1:-1], v, side="right")
    return Discretized(codes, k, edges)


def _codes(x, bins, binning, keep_levels) -> Discretized:
    if isinstance(x, Discretized):
        return x
    return discretize(x, bins=bins, binning=binning, keep_levels=keep_levels)


def entropy_from_counts(counts) -> float:
    """Shannon entropy (nats) of a histogram: ``H = log n - sum c log c / n``; exactly 0 with
    at most one occupied cell (where the formula leaves a rounding residue)."""
    c = np.asarray(counts, dtype=float).ravel()
    c = c[c > 0]
    n = c.sum()
    if c.size <= 1:
        return 0.0
    return float(max(np.log(n) - np.sum(c * np.log(c)) / n, 0.0))


def joint_counts(x, y, *, bins=16, binning="uniform", keep_levels=True) -> np.ndarray:
    """Joint histogram ``N[i, j]`` of the discretized pairs (NaN pairs dropped)."""
    dx = _codes(x, bins, binning, keep_levels)
    dy = _codes(y, bins, binning, keep_levels)
    if dx.codes.shape != dy.codes.shape:
        raise AirlinkError(f"series lengths differ: {dx.codes.size} and {dy.codes.size}")
    ok = (dx.codes >= 0) & (dy.codes >= 0)
    flat = dx.codes[ok] * dy.n_levels + dy.codes[ok]
    return np.bincount(flat, minlength=dx.n_levels * dy.n_levels).reshape(dx.n_levels, dy.n_levels)


def entropy(x, *, bins=16, binning: str = "uniform", keep_levels: bool = True) -> float:
    """Entropy ``H(X)`` in nats of the discretized series (NaN dropped)."""
    d = _codes(x, bins, binning, keep_levels)
    return entropy_from_counts(np.bincount(d.codes[d.codes >= 0], minlength=d.n_levels))


def measures_from_counts(counts: np.ndarray) -> tuple[float, float, float]:
    """``(H(X), H(Y), H(X, Y))`` in nats from a joint histogram ``N[i, j]`` (X on rows)."""
    return (entropy_from_counts(counts.sum(axis=1)), entropy_from_counts(counts.sum(axis=0)),
            entropy_from_counts(counts))


def normalize(hx: float, hy: float, hxy: float, normalization: str = "x") -> float:
    """Mutual information ``I = H(X) + H(Y) - H(X,Y)`` divided as ``normalization`` says.

    ``x``: ``I / H(X)`` (Mattar et al.'s ``I_N``); ``y``: ``I / H(Y)``; ``arithmetic``,
    ``geometric``, ``min``, ``max``: ``I`` over that mean of ``H(X)`` and ``H(Y)``
    (scikit-learn's ``average_method``); ``joint``: ``I / H(X, Y)``; ``none``: ``I`` in nats.
    """
    mi = max(hx + hy - hxy, 0.0)
    if normalization == "none":
        return float(mi)
    if normalization not in NORMALIZATIONS:
        raise AirlinkError(f"unknown normalization {normalization!r} (one of {', '.join(NORMALIZATIONS)})")
    if normalization == "x":
        return float(min(mi / hx, 1.0)) if hx > 0 else 0.0
    if normalization == "y":
        return float(min(mi / hy, 1.0)) if hy > 0 else 0.0
    if normalization == "joint":
        return float(min(mi / hxy, 1.0)) if hxy > 0 else (1.0 if hx == hy == 0 else 0.0)
    if hx == 0 and hy == 0:
        return 1.0  # scikit-learn: two constant labelings are a perfect match
    if mi <= 0:
        return 0.0
    denom = {"arithmetic": (hx + hy) / 2, "geometric": np.sqrt(hx * hy),
             "min": min(hx, hy), "max": max(hx, hy)}[normalization]
    return float(min(mi / max(denom, np.finfo(float).eps), 1.0))


def mutual_info(x, y, *, bins=16, binning: str = "uniform", keep_levels: bool = True) -> float:
    """Mutual information ``I(X; Y)`` in nats of the discretized pairs, NaN pairs dropped.

    Equals ``sklearn.metrics.mutual_info_score`` on the same bin codes.
    """
    return normalize(*measures_from_counts(joint_counts(x, y, bins=bins, binning=binning,
                                                        keep_levels=keep_levels)), "none")


def normalized_mutual_info(x, y, *, bins=16, binning: str = "uniform", keep_levels: bool = True,
                           normalization: str = "x") -> float:
    """Normalized mutual information at lag 0, default Mattar et al.'s ``I_N = I(X;Y) / H(X)``.

    ``X`` is the series being explained (the target), ``Y`` the factor. With
    ``normalization="arithmetic"`` (or ``geometric``, ``min``, ``max``) this equals
    ``sklearn.metrics.normalized_mutual_info_score`` on the same bin codes.
    """
    return normalize(*measures_from_counts(joint_counts(x, y, bins=bins, binning=binning,
                                                        keep_levels=keep_levels)), normalization)
