"""``schedule_rates``: the simulator's metric schedulers on rates you give.

The simulator derives each user's rate per subchannel from its SINR; this runs the same
MaxCIR / PF (MC-PFS) / ``R/T**lambda`` decision and average update on a rate array you
already have (from measurements, another link model, or to study a scheduler alone), in
the same compiled code and arithmetic, so the decisions match the simulator's on the same
rates. No HARQ, no queues: every user always has data.
"""
from __future__ import annotations

import numpy as np

from airlink.core.errors import AirlinkError

from . import kernel as K

_SCHEDULERS = {"maxcir": 1, "pf": 2, "mcpfs": 2, "lambda": 3}


def schedule_rates(rate_bytes, *, scheduler: str = "pf", window: int = 1000, pf_a: float = 0.001,
                   lam: float = 1.0, order=None, seed: int = 0, avg_bits=None):
    """Which user gets each subchannel, TTI by TTI, for given rates.

    Parameters
    ----------
    rate_bytes : array (n_tti, n_users, n_subchannels), bytes each user would get on each
        subchannel in each TTI (0 = cannot use it)
    scheduler : ``"maxcir"`` (``argmax R``), ``"pf"``/``"mcpfs"`` (``argmax R/T``, seeds
        000/001) or ``"lambda"`` (``argmax R/T**lam``)
    window : ``t_a`` of ``a = 1 / min(n, t_a)`` (Kakuda & Tsuru); 0 = fixed ``pf_a`` (the EV-DO study)
    order : (n_tti, n_users) user order per TTI for ties (the earliest wins); default a
        random permutation per TTI from ``seed``
    avg_bits : starting average ``T`` per user (bits per TTI), default 0 (top priority)

    Returns
    -------
    (best, avg_bits): ``best`` (n_tti, n_subchannels) int64, the user of each subchannel
    (-1 = nobody could use it); ``avg_bits`` the averages after the last TTI.
    """
    rate = np.ascontiguousarray(rate_bytes, dtype=np.float64)
    if rate.ndim != 3 or min(rate.shape) < 1:
        raise AirlinkError(f"rate_bytes: need shape (n_tti, n_users, n_subchannels), got {rate.shape}")
    if scheduler not in _SCHEDULERS:
        raise AirlinkError(f"unknown scheduler {scheduler!r} (one of {', '.join(_SCHEDULERS)})")
    n, n_u, n_c = rate.shape
    if order is None:
        order = np.random.default_rng(seed).permuted(np.tile(np.arange(n_u), (n, 1)), axis=1)
    order = np.ascontiguousarray(order, dtype=np.int64)
    identity = np.broadcast_to(np.arange(n_u), (n, n_u))
    if order.shape != (n, n_u) or not np.array_equal(np.sort(order, axis=1), identity):
        raise AirlinkError(f"order: need one permutation of 0..{n_u - 1} per TTI, shape ({n}, {n_u})")
    avg = np.zeros(n_u) if avg_bits is None else np.array(avg_bits, dtype=np.float64).reshape(n_u)
    best = np.empty((n, n_c), dtype=np.int64)
    K.schedule_rates(rate, order, _SCHEDULERS[scheduler], float(lam), float(pf_a), int(window), avg, best)
    return best, avg
