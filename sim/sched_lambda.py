"""Generalized proportional fair with fairness exponent lambda (the EV-DO study):
``argmax_u R_u(t) / T_u(t)**lambda``.

lambda = 0 is MaxCIR (max rate), 1 is PF, large lambda tends to rate fairness (the user
with the lowest average wins). ``T`` as in :mod:`airlink.sim.sched_pf`. Ties at random.
"""
from __future__ import annotations

import numpy as np

from .sched_base import AveragingScheduler, argmax_ties


class GeneralizedPF(AveragingScheduler):
    name = "lambda"
    kernel_id = 3

    def __init__(self, *, lam: float = 1.0, a: float = 0.001, window: int | None = None):
        super().__init__(a=a, window=window)
        self.lam = float(lam)

    def assign(self, ctx):
        r = ctx.rate_bytes
        if self.lam == 0:
            metric = r
        else:
            # rate * (1 / T**lambda), exactly as the compiled twin computes it
            with np.errstate(divide="ignore", over="ignore"):
                t = self.avg if self.lam == 1 else self.avg ** self.lam
                weight = np.where(self.avg > 0, 1.0 / t, 1e150)
            metric = r * weight[:, None]
        score = np.where(ctx.eligible[:, None] & (r > 0), metric, -1.0)
        return argmax_ties(score, ctx.order)

    def kernel_params(self):
        return {**super().kernel_params(), "lam": self.lam}

    def params(self):
        return {"lam": self.lam, **super().params()}
