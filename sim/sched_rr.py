"""Round Robin: users with data are served in turn (the EV-DO study), whatever their channel.

Each subchannel goes to the next user in cyclic order (from the one after the last user
served) that has data and whose reported SINR supports some MCS there.
"""
from __future__ import annotations

import numpy as np

from .sched_base import Scheduler


class RoundRobin(Scheduler):
    name = "rr"
    kernel_id = 0

    def reset(self, *, n_users, n_subchannels, tti_s, rng=None):
        super().reset(n_users=n_users, n_subchannels=n_subchannels, tti_s=tti_s, rng=rng)
        self.next = 0

    def assign(self, ctx):
        u_n, c_n = ctx.rate_bytes.shape
        out = np.full(c_n, -1, dtype=np.int64)
        for c in range(c_n):
            for i in range(u_n):
                u = (self.next + i) % u_n
                if ctx.eligible[u] and ctx.rate_bytes[u, c] > 0:
                    out[c] = u
                    self.next = (u + 1) % u_n
                    break
        return out
