"""Block-error thresholds: the random draw of each slot and resource turned into the ``z``
the compiled step compares a block's SINR with.

A block sent with MCS ``m`` at (effective, linear) SINR ``s`` fails with probability
``BLER_m(s) = 1 / (1 + (s / s50_m)^beta)`` (:mod:`airlink.sim.rates`; ``beta`` = slope in
dB^-1 x 10 / ln 10). For a uniform draw ``u`` in [0, 1) the block fails when
``BLER_m(s) > u``, that is when ``s < s50_m * z`` with::

    z = ((1 - u) / u) ^ (1 / beta)          (u = 0 gives z = inf: the block fails)

:func:`error_thresholds_reference` is the numpy form; :func:`error_thresholds` is the same
arithmetic in one compiled pass (numba, no fast-math: the same float64 division and the
C library's ``pow``, which numpy's power calls too but for the exponents it computes
otherwise, such as 1/2 by ``sqrt``: those take the numpy form), so both give the same bits.
"""
from __future__ import annotations

import numpy as np

from airlink.core.envflags import env_flag


def error_thresholds_reference(u: np.ndarray, inv_beta: float) -> np.ndarray:
    """``((1 - u) / u) ** inv_beta`` (float64, same shape as ``u``) with numpy."""
    with np.errstate(divide="ignore", over="ignore"):
        return ((1 - u) / u) ** inv_beta


def _thresholds_loop(u, inv_beta, out):
    flat_u = u.ravel()
    flat_o = out.ravel()
    for i in range(flat_u.size):
        x = flat_u[i]
        flat_o[i] = ((1.0 - x) / x) ** inv_beta


#: exponents numpy's power computes by another operation (sqrt, square, ...), not ``pow``
_NUMPY_SPECIAL_EXPONENTS = (-1.0, 0.0, 0.5, 1.0, 2.0)


def _thresholds_compiled(u: np.ndarray, inv_beta: float) -> np.ndarray:
    if float(inv_beta) in _NUMPY_SPECIAL_EXPONENTS:
        return error_thresholds_reference(u, inv_beta)
    u = np.ascontiguousarray(u, dtype=np.float64)
    out = np.empty_like(u)
    _thresholds_kernel(u, float(inv_beta), out)
    return out


error_thresholds = error_thresholds_reference
_NUMBA_WANTED = env_flag("AIRLINK_NUMBA", True)     # a bad value is an error, not "off"
try:  # pragma: no cover - depends on the environment
    if not _NUMBA_WANTED:
        raise ImportError("numba disabled by AIRLINK_NUMBA=0")
    import numba as _numba
    # error_model="numpy": 1 / 0 is inf (a draw of exactly 0), as in numpy
    _thresholds_kernel = _numba.njit(cache=True, nogil=True, error_model="numpy")(_thresholds_loop)
    error_thresholds = _thresholds_compiled
except Exception:  # numba missing or broken: the numpy form
    error_thresholds = error_thresholds_reference
