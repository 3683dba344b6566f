"""How sure: surrogate null distribution, p-value, bias correction and bootstrap interval
for the peak of a lag scan.

Mattar et al. (TCP over CDMA2000 Networks) report peak NMI values without saying which of them could arise by chance. A
peak over ``2D+1`` lags of a finite, autocorrelated sample is biased upwards, so every
peak airlink reports comes with:

- a **null distribution** of the peak from surrogates that keep each series' own
  autocorrelation but break their alignment: ``circular`` shifts the factor by a random
  offset (outside ``[-D, D]`` when the series is long enough), ``block`` shuffles blocks of
  the factor;
- the **p-value** ``(1 + #{null >= peak}) / (1 + N)`` and the **threshold**, the
  ``1 - alpha`` quantile of the null peaks;
- a **bias-corrected** value, ``peak - mean(null peaks)`` (not clipped: a value near or
  below zero says the peak is what chance alone gives);
- a **bootstrap interval** for the value at the peak lag: moving-block bootstrap of the
  aligned pairs (block length ``~sqrt(n)``), basic (reverse-percentile) interval, because
  resampled series have upward-biased plug-in NMI and a percentile interval would sit
  above the estimate. The lag itself is held
  fixed, so the interval does not include lag-selection uncertainty.

**Enough pairs, or "cannot tell".** The plug-in entropy of a histogram with ``m`` occupied
cells from ``n`` samples is biased downwards by about ``(m - 1) / 2n`` nats (Miller-Madow;
Paninski 2003, "Estimation of entropy and mutual information"), so the plug-in mutual
information ``H(X) + H(Y) - H(X,Y)`` is biased upwards by about that much for the joint
histogram; with about one pair per cell it reaches its maximum from chance alone (9 pairs
in 16 bins give ``I_N`` near 1 for independent series). An estimate is reported only when
the pairs at the peak lag number at least :data:`MIN_PAIRS_PER_CELL` per occupied cell of
their joint histogram, ``n >= 5 m`` (the expected-count-of-5 rule of the chi-square test,
which the G-statistic ``2 n I`` of mutual information follows), which keeps the joint
entropy's bias below 0.1 nats. Below it the result says ``cannot tell`` with the reason;
the p-value and threshold are not given (no significance from too few pairs) while the
raw and bias-corrected values are kept beside it.

**A null made of too few pairs is "cannot tell" too.** The same rule holds for each
surrogate's peak. A sparse series (a per-user grid where one RNTI has a value in a few
percent of the slots) has enough pairs aligned, but shifted in time its values meet the
target's in only a handful of steps: those surrogate peaks reach 1 from chance alone,
the threshold with them, and no peak could ever be significant. When more than ``alpha``
of the surrogate peaks come from fewer than :data:`MIN_PAIRS_PER_CELL` pairs per occupied
cell (so the ``1 - alpha`` quantile may be one of them), or the threshold is the largest
value the normalization allows, the result says ``cannot tell`` with both figures.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from airlink.core.errors import AirlinkError

from .information import Discretized, discretize
from .lagscan import LagScan, _sample_period, lag_counts, lag_scan, nmi_from_counts, peak_of

SURROGATES = ("circular", "block")
#: fewest pairs per occupied cell of the joint histogram for an estimate (module notes)
MIN_PAIRS_PER_CELL = 5
#: what every "cannot tell" from too few pairs per cell says (:func:`too_few_pairs`,
#: :func:`degenerate_null`), for a caller that suggests how to get more
TOO_FEW_PAIRS = "per occupied cell"


@dataclass
class PeakSignificance:
    """The peak of a lag scan with its uncertainty (see module docstring)."""

    peak_nmi: float
    lag: int
    lag_s: float
    p_value: float
    threshold: float
    null_mean: float
    bias_corrected: float
    ci_low: float
    ci_high: float
    surrogates: int
    n_pairs: int
    min_pairs: int = 0
    cannot_tell: str | None = None

    @property
    def significant(self) -> bool:
        """p-value below ``alpha`` of the test that made it, and enough pairs."""
        return self.cannot_tell is None and bool(self.p_value == self.p_value and self.p_value <= self.alpha)

    alpha: float = 0.05

    def to_dict(self) -> dict:
        return {**asdict(self), "significant": self.significant}


def occupied_cells(dx: Discretized, dy: Discretized, lag: int = 0) -> int:
    """Occupied cells of the joint histogram of ``x[t]`` and ``y[t - lag]`` (NaN pairs dropped)."""
    n = dx.codes.size
    a = dx.codes[max(lag, 0):n + min(lag, 0)]
    b = dy.codes[max(-lag, 0):n - max(lag, 0)]
    ok = (a >= 0) & (b >= 0)
    ky = max(dy.n_levels, 1)
    return int(np.count_nonzero(np.bincount(a[ok] * ky + b[ok], minlength=max(dx.n_levels, 1) * ky)))


def too_few_pairs(n_pairs: int, cells: int) -> str | None:
    """The reason ``n_pairs`` pairs in ``cells`` occupied cells cannot give an estimate, or None."""
    need = MIN_PAIRS_PER_CELL * max(cells, 1)
    if n_pairs >= need:
        return None
    return (f"{n_pairs} pairs in {cells} occupied cells of the joint histogram: fewer than "
            f"{MIN_PAIRS_PER_CELL} {TOO_FEW_PAIRS} (need {need}); the plug-in estimate's upward bias, "
            f"~(m-1)/2n = {(cells - 1) / (2 * max(n_pairs, 1)):.2f} nats, can reach its maximum from chance alone")


def degenerate_null(few: int, surrogates: int, threshold: float, alpha: float, normalization: str,
                    valid: tuple) -> str | None:
    """The reason a surrogate null cannot decide significance, or None (module notes).

    ``few``: surrogate peaks from too few pairs (:func:`too_few_pairs`) of ``surrogates``;
    ``valid``: the steps with a target value, with a factor value, and in all."""
    at_max = normalization != "none" and threshold >= 1.0 - 1e-12
    if few <= alpha * surrogates and not at_max:
        return None
    nx, ny, n = valid
    why = f"the surrogate threshold is {threshold:.3f}"
    if at_max:
        why += ", the largest value I_N takes: no peak can be shown significant"
    if few > alpha * surrogates:
        why += (f"; {few} of {surrogates} surrogates (the factor shifted in time) pair fewer than "
                f"{MIN_PAIRS_PER_CELL} values {TOO_FEW_PAIRS} with the target, so chance alone reaches "
                f"it: too few steps have a value (target {nx}, factor {ny} of {n})")
    return why


def _surrogate_codes(d: Discretized, rng, kind: str, max_lag: int, block: int) -> Discretized:
    n = d.codes.size
    if kind == "circular":
        lo, hi = (max_lag + 1, n - max_lag - 1) if n > 2 * max_lag + 3 else (1, n - 1)
        shift = int(rng.integers(lo, hi + 1))
        return Discretized(np.roll(d.codes, shift), d.n_levels, d.edges, d.levels)
    starts = np.arange(0, n, block)
    order = rng.permutation(starts.size)
    codes = np.concatenate([d.codes[s:s + block] for s in starts[order]])
    return Discretized(codes, d.n_levels, d.edges, d.levels)


def _block_bootstrap(cx: np.ndarray, kx: int, cy: np.ndarray, ky: int, lag: int, bootstrap: int,
                     rng, normalization: str, block: int) -> np.ndarray:
    n = cx.size
    a = cx[max(lag, 0):n + min(lag, 0)]
    b = cy[max(-lag, 0):n - max(lag, 0)]
    ok = (a >= 0) & (b >= 0)
    joint = (a * ky + b)[ok]
    m = joint.size
    if m < 2 or bootstrap <= 0:
        return np.array([])
    block = max(1, min(block, m))
    n_blocks = int(np.ceil(m / block))
    out = np.empty((bootstrap, kx, ky), dtype=np.int64)
    offsets = np.arange(block)
    for k in range(bootstrap):
        starts = rng.integers(0, m - block + 1, n_blocks)
        idx = (starts[:, None] + offsets).ravel()[:m]
        out[k] = np.bincount(joint[idx], minlength=kx * ky).reshape(kx, ky)
    return nmi_from_counts(out, normalization)


def peak_significance(x, y, *, max_lag=None, bins=16, binning: str = "uniform",
                      keep_levels: bool = True, normalization: str = "x", sample_period=None,
                      surrogates: int = 200, surrogate: str = "circular", bootstrap: int = 200,
                      alpha: float = 0.05, block=None, seed: int = 0,
                      scan: LagScan | None = None, progress: bool = False) -> PeakSignificance:
    """Peak NMI over lags with p-value, threshold, bias-corrected value and interval.

    Parameters are those of :func:`airlink.inference.lag_scan`, plus
    ``surrogates`` (0 turns the test off: p-value and threshold are NaN), ``surrogate``
    (``circular`` or ``block``), ``bootstrap`` bootstrap resamples, ``alpha`` (threshold at
    the ``1 - alpha`` null quantile, ``1 - alpha`` interval), ``block`` length in samples
    for block surrogates and the bootstrap (default ``sqrt(n)``) and ``seed``.
    """
    if surrogate not in SURROGATES:
        raise AirlinkError(f"unknown surrogate {surrogate!r} (one of {', '.join(SURROGATES)})")
    if not 0 < alpha < 1:
        raise AirlinkError(f"alpha must be between 0 and 1, got {alpha}")
    dx = x if isinstance(x, Discretized) else discretize(x, bins=bins, binning=binning, keep_levels=keep_levels)
    dy = y if isinstance(y, Discretized) else discretize(y, bins=bins, binning=binning, keep_levels=keep_levels)
    if scan is None:
        period = _sample_period(x, y, sample_period)
        scan = lag_scan(dx, dy, max_lag=max_lag, normalization=normalization,
                        sample_period=period if np.isfinite(period) else None)
    D = int(scan.params["max_lag"])
    n = dx.codes.size
    blk = int(block) if block else max(1, int(round(np.sqrt(n))))
    rng = np.random.default_rng(seed)
    lags = np.arange(-D, D + 1)
    null = np.empty(max(int(surrogates), 0))
    it = range(null.size)
    if progress:
        from tqdm import tqdm
        it = tqdm(it, desc="surrogates", leave=False)
    few = 0             # surrogate peaks from too few pairs (module notes)
    for k in it:
        ds = _surrogate_codes(dy, rng, surrogate, D, blk)
        counts = lag_counts(dx, ds, max_lag=D)
        null[k], at = peak_of(nmi_from_counts(counts, normalization), lags)
        c = counts[at + D]
        few += too_few_pairs(int(c.sum()), int(np.count_nonzero(c))) is not None
    if null.size:
        p_value = float((1 + np.sum(null >= scan.peak - 1e-12)) / (1 + null.size))
        threshold = float(np.quantile(null, 1 - alpha))
        null_mean = float(null.mean())
    else:
        p_value = threshold = null_mean = float("nan")
    boots = _block_bootstrap(dx.codes, dx.n_levels, dy.codes, dy.n_levels, scan.peak_lag, bootstrap,
                             rng, normalization, blk)
    if boots.size:
        # basic (reverse-percentile) interval: resampling duplicates blocks, which lowers the
        # joint entropy and biases replicates upwards; reflecting about the estimate undoes
        # that bias instead of doubling it (a percentile interval can miss the estimate).
        q_lo, q_hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
        lo, hi = max(2 * scan.peak - q_hi, 0.0), min(2 * scan.peak - q_lo, 1.0)
    else:
        lo = hi = float("nan")
    n_pairs = int(scan.pairs[scan.peak_lag + D])
    cells = occupied_cells(dx, dy, scan.peak_lag)
    why = too_few_pairs(n_pairs, cells) or (null.size and degenerate_null(
        few, null.size, threshold, alpha, normalization,
        (int(np.count_nonzero(dx.codes >= 0)), int(np.count_nonzero(dy.codes >= 0)), n))) or None
    if why:
        p_value = threshold = float("nan")
    return PeakSignificance(
        peak_nmi=scan.peak, lag=scan.peak_lag, lag_s=scan.peak_lag_s, p_value=p_value,
        threshold=threshold, null_mean=null_mean,
        bias_corrected=scan.peak - null_mean if null.size else float("nan"),
        ci_low=float(lo), ci_high=float(hi), surrogates=int(null.size),
        n_pairs=n_pairs, min_pairs=MIN_PAIRS_PER_CELL * max(cells, 1), cannot_tell=why, alpha=alpha)
