"""Multi-carrier Proportional Fair (MC-PFS, Kakuda & Tsuru): PF deciding per subchannel,
``argmax_m R_{m,c}(n) / T_m(n)``, ``T_m(n+1) = (1 - 1/L) T_m(n) + (1/L) sum_c R_{m,c}(n)
d_{m,c}(n)``, ``L = min(n, t_a)``.

This is :class:`~airlink.sim.sched_pf.ProportionalFair` with the window form of the average;
``pf`` on a preset with several subchannels is the same scheduler.
"""
from __future__ import annotations

from .sched_pf import ProportionalFair


class MultiCarrierPF(ProportionalFair):
    name = "mcpfs"

    def __init__(self, *, window: int = 1000, a: float = 0.001):
        super().__init__(a=a, window=window)
