"""Traffic models: packets arriving at each user's base-station queue, per TTI.

``full``
    Full buffer: the queue is never empty (every user always has data).
``cbr``
    Constant bit rate ``rate_bps`` in packets of ``packet_bytes``, each user with a random
    phase.
``onoff``
    CBR at ``rate_bps`` during ``on_s`` seconds, silent for ``off_s`` seconds, repeating
    (seed 003 used 1 s on / 5 s off at 38.4 and 76.8 kbit/s); each user starts at a random
    point of the cycle. With ``onoff_exponential`` the on and off periods are exponentially
    distributed with those means instead (a two-state Markov source, as seed 002's VoIP).
``poisson``
    Poisson packet arrivals at mean ``rate_bps``.
``trace``
    A given arrival trace: a Mahimahi-format file or an airlink Parquet trace read with
    :func:`airlink.traces.read_trace`; the bytes it offers per TTI arrive as whole packets;
    it loops when shorter than the run.

Arrivals are returned chunk by chunk in **bytes per TTI** (whole packets); the queue and
its drop-tail limit live in the simulation loop.
"""
from __future__ import annotations

import numpy as np

from airlink.traces.errors import AirlinkError

MODELS = ("full", "cbr", "onoff", "poisson", "trace")


def _per_user(value, n: int, what: str) -> np.ndarray:
    v = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if v.size == 1:
        return np.full(n, float(v[0]))
    if v.size != n:
        raise AirlinkError(f"{what}: {v.size} values for {n} users")
    return v


class Traffic:
    """Arrivals per TTI and user; ``chunk(k0, n)`` must be called in order.

    Parameters: ``model`` (one of :data:`MODELS`), ``n_users``, ``tti_s``, ``rate_bps``
    (scalar or per user), ``packet_bytes``, ``on_s``/``off_s``/``exponential`` (on-off),
    ``trace`` (path, for ``trace``), ``seed``.
    """

    def __init__(self, model: str, *, n_users: int, tti_s: float, rate_bps=1e6,
                 packet_bytes: int = 1500, on_s: float = 1.0, off_s: float = 5.0,
                 exponential: bool = False, trace=None, seed: int = 0):
        if model not in MODELS:
            raise AirlinkError(f"unknown traffic model {model!r} (one of {', '.join(MODELS)})")
        self.model = model
        self.n_users = int(n_users)
        self.tti_s = float(tti_s)
        self.packet_bytes = float(packet_bytes)
        if self.packet_bytes <= 0:
            raise AirlinkError("packet_bytes must be positive")
        self.rate = _per_user(rate_bps, self.n_users, "traffic rate_bps")
        self.on_s, self.off_s = float(on_s), float(off_s)
        self.exponential = bool(exponential)
        self.rng = np.random.default_rng([int(seed), 0x7AFF])
        self.phase = self.rng.random(self.n_users)
        self._pkts_done = np.zeros(self.n_users)   # cumulative packets released so far
        if model == "onoff":
            if self.on_s <= 0 or self.off_s < 0:
                raise AirlinkError("on-off traffic needs on_s > 0 and off_s >= 0")
            self._on = self.rng.random(self.n_users) < self.on_s / (self.on_s + self.off_s)
            self._left = np.array([self._draw(on) for on in self._on]) * self.rng.random(self.n_users)
            self._credit = np.zeros(self.n_users)
        self._cum = None
        if model == "trace":
            if trace is None:
                raise AirlinkError("traffic 'trace' needs a trace file (traffic_trace)")
            from airlink.traces import read_trace
            tr = read_trace(trace)
            edges = np.arange(0, tr.n_tti + 1) * float(tr.tti)
            self._cum = tr.cumulative_bytes(edges)[:, 0]
            self._period = float(tr.duration)

    def _draw(self, on: bool) -> float:
        mean = self.on_s if on else self.off_s
        return float(self.rng.exponential(mean)) if self.exponential else mean

    @property
    def full_buffer(self) -> bool:
        return self.model == "full"

    def chunk(self, k0: int, n: int) -> np.ndarray:
        """Arrival bytes (whole packets) for TTIs ``k0 .. k0+n-1``: float64 (n, U)."""
        u = self.n_users
        out = np.zeros((n, u))
        if self.model == "full":
            return out
        pkt = self.packet_bytes
        if self.model == "cbr":
            per_tti = self.rate * self.tti_s / (8 * pkt)
            cum = np.floor((np.arange(k0, k0 + n + 1)[:, None] + self.phase[None, :]) * per_tti[None, :])
            return np.diff(cum, axis=0) * pkt
        if self.model == "poisson":
            return self.rng.poisson(self.rate * self.tti_s / (8 * pkt), size=(n, u)).astype(float) * pkt
        if self.model == "trace":
            t = (np.arange(k0, k0 + n + 1) * self.tti_s)
            loops, within = np.divmod(t, self._period)
            total = self._cum[-1]
            pos = within / self._period * (len(self._cum) - 1)
            i = np.minimum(pos.astype(int), len(self._cum) - 2)
            cum = loops * total + self._cum[i] + (pos - i) * (self._cum[i + 1] - self._cum[i])
            pk = np.floor(cum / pkt)
            col = np.diff(pk) * pkt
            return np.repeat(col[:, None], u, axis=1)
        # on-off, sequential per user (cheap: U loops over state changes)
        per_tti = self.rate * self.tti_s / (8 * pkt)
        for j in range(u):
            k = 0
            while k < n:
                steps = int(np.ceil(self._left[j] / self.tti_s - 1e-9))
                steps = max(steps, 1)
                take = min(steps, n - k)
                if self._on[j]:
                    c = self._credit[j] + per_tti[j] * np.arange(1, take + 1)
                    pk = np.floor(c)
                    out[k:k + take, j] = np.diff(np.concatenate([[0.0], pk])) * pkt
                    self._credit[j] = c[-1] - pk[-1]
                self._left[j] -= take * self.tti_s
                k += take
                if self._left[j] <= 1e-12:
                    self._on[j] = not self._on[j]
                    self._left[j] += self._draw(self._on[j])
        return out
