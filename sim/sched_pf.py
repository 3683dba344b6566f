"""Proportional Fair: ``argmax_u R_u(t) / T_u(t)`` (the EV-DO study), per subchannel when there
are several (MC-PFS, Kakuda & Tsuru: ``argmax_m R_{m,c}(n) / T_m(n)``).

``T_u`` is the average bits per TTI sent to user ``u``:
``T(t+1) = (1 - a) T(t) + a R(t)`` with EWMA constant ``a`` (the EV-DO study, 1xEV-DO), or with
window ``t_a``: ``a = 1 / L``, ``L = min(n, t_a)`` (Kakuda & Tsuru), which makes the first
``t_a`` TTIs a running mean. ``R(t)`` counts all bits sent in the TTI over all
subchannels (HARQ blocks included) and 0 for users not served. A user never served yet
(``T = 0``) has top priority. Ties at random.
"""
from __future__ import annotations

import numpy as np

from .sched_base import AveragingScheduler, argmax_ties


class ProportionalFair(AveragingScheduler):
    name = "pf"
    kernel_id = 2

    def assign(self, ctx):
        # rate * (1 / T), exactly as the compiled twin computes it
        with np.errstate(divide="ignore"):
            weight = np.where(self.avg > 0, 1.0 / self.avg, 1e150)
        metric = ctx.rate_bytes * weight[:, None]
        score = np.where(ctx.eligible[:, None] & (ctx.rate_bytes > 0), metric, -1.0)
        return argmax_ties(score, ctx.order)
