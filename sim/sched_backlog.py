"""Backlog-driven rate assignment in the style of CDMA2000 1xRTT supplemental channels
(Mattar et al.): the *assigned rate follows the user's queue*, not its channel.

The sector has ``C`` code channels of one base rate each (9.6 kbit/s in the ``1xrtt``
preset). Every ``interval`` TTIs each user gets a number of channels from a discrete set
(default 1, 2, 4, 8, 16: 9.6 ... 153.6 kbit/s, six rates with 0):

1. the smallest number that would drain its backlog within ``drain_s`` seconds;
2. capped by what its wideband reported SINR supports (``thresholds_db`` per step);
3. users that stay *greedy* for more than ``greedy_s`` - backlog above ``greedy_bytes``
   or holding at least ``greedy_channels`` channels (76.8 kbit/s); a greedy interval adds
   to the user's greedy time, a modest one takes from it - are throttled one step down per further interval, to the lowest rate (Mattar et al.: CBR
   throughput tracks the sending rate up to ~50 kbit/s, then falls; a 1 s on-off burst is
   not greedy);
4. if the sector's channels do not suffice, the largest allocations step down first.

Within a TTI the channels are handed out user by user in the TTI's random order.
"""
from __future__ import annotations

import numpy as np

from .sched_base import Scheduler


class BacklogScheduler(Scheduler):
    name = "backlog"
    kernel_id = 4

    def __init__(self, *, channels=(1, 2, 4, 8, 16), thresholds_db=(-14.0, -11.0, -8.0, -5.0, -2.0),
                 interval_s: float = 0.1, drain_s: float = 0.5, greedy_bytes: float = 6000.0,
                 greedy_s: float = 3.0, greedy_channels: int = 8):
        self.channels = np.asarray(channels, dtype=np.int64)
        self.thresholds_db = np.asarray(thresholds_db, dtype=np.float64)
        if len(self.channels) != len(self.thresholds_db):
            from airlink.core.errors import AirlinkError
            raise AirlinkError("backlog scheduler: one SINR threshold per channel step")
        self.interval_s, self.drain_s = float(interval_s), float(drain_s)
        self.greedy_bytes, self.greedy_s = float(greedy_bytes), float(greedy_s)
        self.greedy_channels = int(greedy_channels)

    def assign(self, ctx):  # pragma: no cover - the compiled twin is always used
        raise NotImplementedError("the backlog scheduler runs in the simulation loop only")

    def kernel_params(self):
        return {"bl_channels": self.channels, "bl_thr_db": self.thresholds_db,
                "interval_s": self.interval_s, "drain_s": self.drain_s,
                "greedy_bytes": self.greedy_bytes, "greedy_s": self.greedy_s,
                "greedy_channels": self.greedy_channels}

    def params(self):
        return {"channels": self.channels.tolist(), "thresholds_db": self.thresholds_db.tolist(),
                "interval_s": self.interval_s, "drain_s": self.drain_s,
                "greedy_bytes": self.greedy_bytes, "greedy_s": self.greedy_s,
                "greedy_channels": self.greedy_channels}
