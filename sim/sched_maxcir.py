"""MaxCIR (max rate): each subchannel goes to the user with the highest rate there
(Kakuda & Tsuru: ``argmax_m R_{m,c}(n)``; the EV-DO study's lambda = 0). Ties at random."""
from __future__ import annotations

import numpy as np

from .sched_base import Scheduler, argmax_ties


class MaxCIR(Scheduler):
    name = "maxcir"
    kernel_id = 1

    def assign(self, ctx):
        score = np.where(ctx.eligible[:, None] & (ctx.rate_bytes > 0), ctx.rate_bytes, -1.0)
        return argmax_ties(score, ctx.order)
