"""The queues' random coins: splitmix64, the same generator as the C link core.

PIE's and DualPI2's coins (:mod:`airlink.replay.queues`) come from :class:`SplitMix64`, and
the C link core (``lc_rng_uniform`` in replay/_linkcore.c) draws from the same generator,
so a queue with a seed makes the same decisions in the Python reference and in C.

splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014): the state advances by 0x9E3779B97F4A7C15 and each output is the state mixed
by two xor-shift-multiply rounds; a uniform double in [0, 1) is the output's top 53 bits
times 2^-53.
"""
from __future__ import annotations

import random

_MASK = (1 << 64) - 1


class SplitMix64:
    """``random()`` in [0, 1) from splitmix64; ``seed`` (an integer, taken modulo 2^64) or
    None for a random one. :attr:`seed` keeps the starting state (hand it to the C core)."""

    def __init__(self, seed: int | None = None):
        self.seed = (random.getrandbits(64) if seed is None else int(seed)) & _MASK
        self._state = self.seed

    def random(self) -> float:
        self._state = z = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return ((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0)
