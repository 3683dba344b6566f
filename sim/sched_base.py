"""The scheduler interface: what a scheduler sees each TTI and what it returns.

A scheduler is any object with these three methods (subclassing :class:`Scheduler` is
optional)::

    class MyScheduler:
        name = "mine"
        def reset(self, *, n_users, n_subchannels, tti_s, rng):
            # start of a run; rng is a numpy Generator seeded from the run's seed
            self.served = np.zeros(n_users)
        def assign(self, ctx):
            # ctx: see Context. Return, per subchannel, the index (0-based) of the user
            # it is given to, or -1 to leave it unused: an int array of shape (C,).
            score = np.where(ctx.eligible[:, None], ctx.rate_bytes, -1.0)
            return np.argmax(score, axis=0)
        def update(self, sent_bits):
            # bits transmitted to each user in this TTI (array (U,), HARQ blocks included)
            self.served += sent_bits

Pass it to :func:`airlink.sim.simulate` as ``scheduler=MyScheduler()`` (or the class, or
``"package.module:MyScheduler"`` / ``"package.module.MyScheduler"`` on the command line).
The simulator calls ``assign`` once per TTI, then transmits: a user given a subchannel
sends its oldest pending HARQ retransmission there, else new data at the MCS its reported
SINR supports (most robust MCS when it supports none), limited by its queue.

The built-in schedulers implement the same interface in numpy (their ``assign`` is the
readable reference) and also name a compiled twin in :mod:`airlink.sim.kernel`
(``kernel_id``), which the simulator uses for speed; both give the same schedule.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Context:
    """What a scheduler sees in one TTI.

    tti : int, index of the TTI from the start of the run
    rate_bytes : float array (U, C), bytes a new block would carry for user u on
        subchannel c at its *reported* SINR (0 where no MCS is supported)
    eligible : bool array (U,), users with data (queued bytes or a pending retransmission)
    backlog_bytes : float array (U,), queued bytes (inf for full-buffer users)
    pending_retx : int array (U,), HARQ blocks waiting for retransmission
    order : int array (U,), a random permutation of the users for breaking ties
        (drawn from the run's seed): among equal metrics, the user earliest in ``order`` wins
    """

    tti: int
    rate_bytes: np.ndarray
    eligible: np.ndarray
    backlog_bytes: np.ndarray
    pending_retx: np.ndarray
    order: np.ndarray


def argmax_ties(score: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per column of ``score`` (U, C), the row with the largest value, ties going to the
    row that comes first in ``order``; -1 where the largest value is negative (nobody)."""
    s = score[order]
    i = np.argmax(s, axis=0)
    best = order[i]
    return np.where(s[i, np.arange(s.shape[1])] < 0, -1, best)


class Scheduler:
    """Base class of the built-in schedulers (and a convenient one for users' own)."""

    name = "scheduler"
    kernel_id: int | None = None

    def reset(self, *, n_users: int, n_subchannels: int, tti_s: float, rng=None) -> None:
        self.n_users, self.n_subchannels, self.tti_s = n_users, n_subchannels, tti_s

    def assign(self, ctx: Context) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def update(self, sent_bits: np.ndarray) -> None:
        pass

    def kernel_params(self) -> dict:
        """Parameters of the compiled twin (built-ins only)."""
        return {}

    def params(self) -> dict:
        """Parameters recorded in the run's metadata."""
        return {}

    def __repr__(self):
        p = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({p})"


class AveragingScheduler(Scheduler):
    """Keeps ``T[u]``, the average bits per TTI sent to each user:
    ``T <- (1 - a) T + a * sent`` with ``a`` fixed or ``1 / min(n, t_a)`` (Kakuda & Tsuru's ``L``)."""

    def __init__(self, *, a: float = 0.001, window: int | None = None):
        self.a = float(a)
        self.window = int(window) if window else 0

    def reset(self, *, n_users, n_subchannels, tti_s, rng=None):
        super().reset(n_users=n_users, n_subchannels=n_subchannels, tti_s=tti_s, rng=rng)
        self.avg = np.zeros(n_users)
        self.n = 0

    def update(self, sent_bits):
        a = 1.0 / min(self.n + 1, self.window) if self.window else self.a
        self.avg = (1 - a) * self.avg + a * np.asarray(sent_bits, dtype=np.float64)
        self.n += 1

    def kernel_params(self):
        return {"pf_a": self.a, "pf_window": self.window}

    def params(self):
        return {"a": self.a, "window": self.window} if self.window else {"a": self.a}
