"""Block-error thresholds: the random draw of each slot and resource turned into the ``z``
the compiled step compares a block's SINR with.

A block sent with MCS ``m`` at (effective, linear) SINR ``s`` fails with probability
``BLER_m(s) = 1 / (1 + (s / s50_m)^beta)`` (:mod:`airlink.sim.rates`; ``beta`` = slope in
dB^-1 x 10 / ln 10). For a uniform draw ``u`` in [0, 1) the block fails when
``BLER_m(s) > u``, that is when ``s < s50_m * z`` with::

    z = ((1 - u) / u) ^ (1 / beta)          (u = 0 gives z = inf: the block fails)

:func:`error_thresholds_reference` computes it element by element with the C library's
``pow`` (Python's ``math.pow``); :func:`error_thresholds` is the same arithmetic in one
compiled pass (numba, no fast-math: the same float64 division and the same ``pow``), so both
give the same bits. Not numpy's power: on CPUs with AVX-512 numpy computes float64 powers
with its own vector routine, whose results differ from the C library's in the last bit for
about one draw in twenty, so a run's thresholds would depend on the machine.
"""
from __future__ import annotations

import math

import numpy as np

from airlink.core.envflags import env_flag


_c_pow = np.frompyfunc(math.pow, 2, 1)


def error_thresholds_reference(u: np.ndarray, inv_beta: float) -> np.ndarray:
    """``((1 - u) / u) ** inv_beta`` (float64, same shape as ``u``; ``u = 0`` gives inf), the
    power by the C library's ``pow`` element by element (module notes)."""
    with np.errstate(divide="ignore"):
        x = (1 - np.asarray(u, dtype=np.float64)) / u
    return _c_pow(x, float(inv_beta)).astype(np.float64)


def _thresholds_loop(u, inv_beta, out):
    flat_u = u.ravel()
    flat_o = out.ravel()
    for i in range(flat_u.size):
        x = flat_u[i]
        flat_o[i] = ((1.0 - x) / x) ** inv_beta


def _thresholds_compiled(u: np.ndarray, inv_beta: float) -> np.ndarray:
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
