"""Time-shifted normalized mutual information over all lags in one pass.

Mattar et al. (TCP over CDMA2000 Networks) report the **peak over all shifts d** of ``I_N(X; Y; d)``. Computing a joint
histogram per lag costs ``O(n D)``; here every joint count for every lag comes from the
cross-correlations of the bin-indicator series,

    N_d[i, j] = sum_t 1[x_t in bin i] * 1[y_{t-d} in bin j],

computed with FFTs in overlap-save blocks (block length ~2D, so the inverse transforms
stay short), accumulated per frequency as a ``K x K`` matrix product. Counts are
integers; the floating-point result is rounded, so the values are *identical* to the
direct per-lag computation (``method="direct"``), which the tests check.

**Sign convention** (stated once, used everywhere in airlink): at lag ``d`` the target
``x_t`` is paired with the factor ``y_{t-d}`` (the paper's ``Y_d``, Y delayed by d).
A **positive lag means the factor leads**: its value ``d`` samples earlier goes with the
target now. A factor that is itself recorded ``k`` samples later moves the peak from
``d`` to ``d - k``. NaN on either side drops the pair; all entropies at one lag use the
same pairs, so every value is within 0..1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from airlink.core.errors import AirlinkError

from .information import NORMALIZATIONS, Discretized, discretize

METHODS = ("auto", "fft", "direct")


@dataclass
class LagScan:
    """Result of :func:`lag_scan`.

    Attributes
    ----------
    values : pandas.Series
        NMI per lag, indexed by lag in samples (``index.name == "lag"``).
    lag_s : numpy.ndarray
        The same lags in seconds (NaN when the sample period is unknown).
    peak : float
        Largest value over the lags.
    peak_lag : int
        Its lag in samples (positive: the factor leads; ties go to the smallest ``|lag|``).
    peak_lag_s : float
        Its lag in seconds.
    pairs : numpy.ndarray
        Number of non-NaN pairs behind each lag.
    """

    values: pd.Series
    lag_s: np.ndarray
    peak: float
    peak_lag: int
    peak_lag_s: float
    pairs: np.ndarray
    sample_period_s: float = float("nan")
    params: dict = field(default_factory=dict)

    @property
    def max_lag(self) -> int:
        """``D``: the largest |lag| scanned, in samples."""
        return int(self.params.get("max_lag", 0))

    @property
    def peak_at_edge(self) -> bool:
        """The peak sits at ``|lag| = max_lag``: the scan may have cut off a larger value
        beyond its range (widen ``max_lag``)."""
        return bool(self.max_lag > 0 and abs(self.peak_lag) == self.max_lag)

    def as_seconds(self) -> pd.Series:
        """The values indexed by lag in seconds."""
        return pd.Series(self.values.to_numpy(), index=pd.Index(self.lag_s, name="lag_s"),
                         name=self.values.name)


def _indicators(codes: np.ndarray, k: int, start: int, length: int, size: int) -> np.ndarray:
    """``(k, size)`` float indicators of ``codes[start:start+length]`` (zero outside the
    series, for NaN codes and in the padding)."""
    out = np.zeros((k, size))
    lo, hi = max(start, 0), min(start + length, codes.size)
    if hi > lo:
        seg = codes[lo:hi]
        pos = np.nonzero(seg >= 0)[0]
        out[seg[pos], pos + (lo - start)] = 1.0
    return out


def _counts_fft(cx: np.ndarray, kx: int, cy: np.ndarray, ky: int, max_lag: int,
                block: int | None = None) -> np.ndarray:
    import scipy.fft          # with scipy.special, which it imports: only when a scan uses the FFT
    n, D = cx.size, max_lag
    B = int(block) if block else max(2 * D, 2048)
    size = scipy.fft.next_fast_len(B + 2 * D, real=True)
    B = size - 2 * D  # use the whole transform
    starts = np.arange(0, n, B)
    nf = size // 2 + 1
    acc = np.zeros((nf, kx, ky), dtype=complex)
    group = max(1, int(4e7 // (16 * (kx + ky) * nf)))  # ~40 MB of spectra per group
    for g0 in range(0, starts.size, group):
        gs = starts[g0:g0 + group]
        xi = np.stack([_indicators(cx, kx, s, B, size) for s in gs])          # (g, kx, size)
        yi = np.stack([_indicators(cy, ky, s - D, B + 2 * D, size) for s in gs])
        fx = scipy.fft.rfft(xi, axis=-1, workers=1)
        fy = scipy.fft.rfft(yi, axis=-1, workers=1)
        del xi, yi
        # per frequency: sum over blocks of conj(FX_i) FY_j  -> (nf, kx, ky)
        acc += np.matmul(np.conj(fx).transpose(2, 1, 0), fy.transpose(2, 0, 1))
    r = scipy.fft.irfft(acc, n=size, axis=0, workers=1)  # r[m] = sum_t x_t y_{t+m-D} per block
    counts = np.rint(r[:2 * D + 1][::-1])                # lag d = D - m, from -D to D
    return counts.astype(np.int64)


def _counts_direct(cx: np.ndarray, kx: int, cy: np.ndarray, ky: int, max_lag: int,
                   lags=None) -> np.ndarray:
    n = cx.size
    lags = np.arange(-max_lag, max_lag + 1) if lags is None else np.asarray(lags)
    out = np.zeros((lags.size, kx, ky), dtype=np.int64)
    for k, d in enumerate(lags):
        a = cx[max(d, 0):n + min(d, 0)]
        b = cy[max(-d, 0):n - max(d, 0)]
        ok = (a >= 0) & (b >= 0)
        out[k] = np.bincount(a[ok] * ky + b[ok], minlength=kx * ky).reshape(kx, ky)
    return out


def lag_counts(x: Discretized, y: Discretized, *, max_lag: int, method: str = "auto") -> np.ndarray:
    """Joint histograms ``N_d[i, j]`` for ``d = -max_lag .. max_lag`` (array ``(2D+1, Kx, Ky)``)."""
    if method not in METHODS:
        raise AirlinkError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    n = x.codes.size
    if method == "auto":
        # the direct loop wins for short scans; the FFT for long ones (see benchmarks)
        method = "direct" if n * (2 * max_lag + 1) < 2e6 * x.n_levels * y.n_levels / 16 else "fft"
    if method == "fft":
        return _counts_fft(x.codes, x.n_levels, y.codes, y.n_levels, max_lag)
    return _counts_direct(x.codes, x.n_levels, y.codes, y.n_levels, max_lag)


def _entropies(counts: np.ndarray, axes) -> tuple[np.ndarray, np.ndarray]:
    """Entropy (nats) of each histogram and its count. A histogram with at most one occupied
    cell has entropy exactly 0: ``log n - n log n / n`` rounds to +-1e-16 there, and a
    rounding residue as ``H(X)`` made ``I / H(X)`` of a constant pair of series 1.0."""
    from scipy.special import xlogy
    c = counts.astype(float)
    n = c.sum(axis=axes)
    occupied = np.count_nonzero(counts, axis=axes)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(occupied > 1, np.log(np.maximum(n, 1)) - xlogy(c, c).sum(axis=axes) / np.maximum(n, 1), 0.0)
    return np.maximum(h, 0.0), n


def nmi_from_counts(counts: np.ndarray, normalization: str = "x") -> np.ndarray:
    """Normalized mutual information for a stack of joint histograms ``(L, Kx, Ky)``,
    with the conventions of :func:`airlink.inference.information.normalize`, vectorized."""
    if normalization not in NORMALIZATIONS:
        raise AirlinkError(f"unknown normalization {normalization!r} (one of {', '.join(NORMALIZATIONS)})")
    hxy, _ = _entropies(counts, (1, 2))
    hx, _ = _entropies(counts.sum(axis=2), 1)
    hy, _ = _entropies(counts.sum(axis=1), 1)
    mi = np.maximum(hx + hy - hxy, 0.0)
    tiny = np.finfo(float).eps
    if normalization == "none":
        return mi
    if normalization in ("x", "y"):
        h = hx if normalization == "x" else hy
        return np.where(h > 0, np.minimum(mi / np.maximum(h, tiny), 1.0), 0.0)
    if normalization == "joint":
        out = np.where(hxy > 0, mi / np.maximum(hxy, tiny), 0.0)
    else:
        denom = {"arithmetic": (hx + hy) / 2, "geometric": np.sqrt(hx * hy),
                 "min": np.minimum(hx, hy), "max": np.maximum(hx, hy)}[normalization]
        out = np.where(mi > 0, mi / np.maximum(denom, tiny), 0.0)
    out = np.where((hx == 0) & (hy == 0), 1.0, out)
    return np.minimum(out, 1.0)


def _sample_period(x, y, sample_period) -> float:
    if sample_period is not None:
        from airlink.core.units import parse_duration
        return float(parse_duration(sample_period)) if isinstance(sample_period, str) else float(sample_period)
    for s in (x, y):
        idx = getattr(s, "index", None)
        if isinstance(idx, pd.DatetimeIndex) and len(idx) > 1:
            return float(np.median(np.diff(idx.asi8))) / 1e9
    return float("nan")


def peak_of(values: np.ndarray, lags: np.ndarray) -> tuple[float, int]:
    """The largest value and its lag; ties go to the smallest ``|lag|`` (then the negative)."""
    v = np.where(np.isnan(values), -np.inf, values)
    best = np.flatnonzero(v == v.max())
    k = best[np.lexsort((lags[best], np.abs(lags[best])))[0]]
    return float(values[k]), int(lags[k])


def lag_scan(x, y, *, max_lag=None, bins=16, binning: str = "uniform", keep_levels: bool = True,
             normalization: str = "x", sample_period=None, method: str = "auto") -> LagScan:
    """``I_N(X; Y; d)`` for every lag ``d`` in ``[-max_lag, max_lag]``, its peak and peak lag.

    Parameters
    ----------
    x, y : array-like or pandas.Series, same length, regular sampling
        Target ``X`` (normalized by its entropy) and factor ``Y``; NaN drops a pair.
    max_lag : int or str
        ``D`` in samples, or a duration such as ``"60s"`` (needs ``sample_period`` or a
        DatetimeIndex on ``x``). Default ``min(n // 4, 1000)``.
    bins, binning, keep_levels
        Discretization, see :func:`airlink.inference.discretize`. Pre-discretized
        :class:`~airlink.inference.information.Discretized` inputs are used as they are.
    normalization : str
        ``"x"`` is Mattar et al.'s ``I_N``; see :func:`airlink.inference.normalize` for the others.
    sample_period : float seconds or str, optional
        Sampling period, for lags in seconds.
    method : {"auto", "fft", "direct"}
        Same values either way; ``fft`` is the fast one for long series and many lags.
    """
    dx = x if isinstance(x, Discretized) else discretize(x, bins=bins, binning=binning, keep_levels=keep_levels)
    dy = y if isinstance(y, Discretized) else discretize(y, bins=bins, binning=binning, keep_levels=keep_levels)
    n = dx.codes.size
    if dy.codes.size != n:
        raise AirlinkError(f"series lengths differ: {n} and {dy.codes.size}")
    if n < 2:
        raise AirlinkError(f"need at least 2 samples for a lag scan, got {n}")
    period = _sample_period(x, y, sample_period)
    if max_lag is None:
        D = min(n // 4, 1000)
    elif isinstance(max_lag, str):
        from airlink.core.units import parse_duration
        if not np.isfinite(period) or period <= 0:
            raise AirlinkError(f"max lag {max_lag!r} is a duration but the sample period is unknown")
        D = int(round(float(parse_duration(max_lag)) / period))
    else:
        D = int(max_lag)
    D = max(0, min(D, n - 1))
    counts = lag_counts(dx, dy, max_lag=D, method=method)
    lags = np.arange(-D, D + 1)
    vals = nmi_from_counts(counts, normalization)
    peak, peak_lag = peak_of(vals, lags)
    name = getattr(y, "name", None)
    series = pd.Series(vals, index=pd.Index(lags, name="lag"), name=name if isinstance(name, str) else "nmi")
    return LagScan(series, lags * period, peak, peak_lag, peak_lag * period,
                   counts.sum(axis=(1, 2)), period,
                   dict(bins=bins if np.ndim(bins) == 0 else list(np.asarray(bins)), binning=binning,
                        normalization=normalization, max_lag=D))
