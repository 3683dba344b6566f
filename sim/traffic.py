"""Traffic models: packets arriving at each user's base-station queue, per TTI.

``full``
    Full buffer: the queue is never empty (every user always has data).
``cbr``
    Constant bit rate ``rate_bps`` in packets of ``packet_bytes``, each user with a random
    phase.
``onoff``
    CBR at ``rate_bps`` during ``on_s`` seconds, silent for ``off_s`` seconds, repeating
    (Mattar et al. used 1 s on / 5 s off at 38.4 and 76.8 kbit/s); each user starts at a random
    point of the cycle. With ``onoff_exponential`` the on and off periods are exponentially
    distributed with those means instead (a two-state Markov source, as the HSDPA study's VoIP).
``poisson``
    Poisson packet arrivals at mean ``rate_bps``.
``trace``
    A given arrival trace: a Mahimahi-format file or an airlink Parquet trace read with
    :func:`airlink.traces.read_trace`; the bytes it offers per TTI arrive as whole packets;
    it loops when shorter than the run.

A list of models gives each user its own (e.g. ``[full, onoff, onoff]``: one bulk user among
VoIP-like sources, as in the HSDPA study).

Arrivals are returned chunk by chunk in **bytes per TTI** (whole packets); the queue and
its drop-tail limit live in the simulation loop.
"""
from __future__ import annotations

import numpy as np

from airlink.core.errors import AirlinkError

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

    Parameters: ``model`` (one of :data:`MODELS`, or a list with one per user, e.g. one
    full-buffer user among on-off VoIP users), ``n_users``, ``tti_s``, ``rate_bps`` and
    ``packet_bytes`` (scalar or per user), ``on_s``/``off_s``/``exponential`` (on-off),
    ``trace`` (path, for ``trace``), ``seed``.
    """

    def __init__(self, model, *, n_users: int, tti_s: float, rate_bps=1e6,
                 packet_bytes=1500, on_s: float = 1.0, off_s: float = 5.0,
                 exponential: bool = False, trace=None, seed: int = 0):
        self.n_users = int(n_users)
        models = list(model) if isinstance(model, (list, tuple)) else [model] * self.n_users
        if len(models) == 1:
            models = models * self.n_users
        if len(models) != self.n_users:
            raise AirlinkError(f"traffic: {len(models)} models for {self.n_users} users")
        for m in models:
            if m not in MODELS:
                raise AirlinkError(f"unknown traffic model {m!r} (one of {', '.join(MODELS)})")
        self.models = np.array(models, dtype=object)
        self.model = models[0] if len(set(models)) == 1 else "mixed"
        self.tti_s = float(tti_s)
        self.packet = _per_user(packet_bytes, self.n_users, "packet_bytes")
        if np.any(self.packet <= 0):
            raise AirlinkError("packet_bytes must be positive")
        self.packet_bytes = float(self.packet[0])
        self.rate = _per_user(rate_bps, self.n_users, "traffic rate_bps")
        self.on_s, self.off_s = float(on_s), float(off_s)
        self.exponential = bool(exponential)
        self.rng = np.random.default_rng([int(seed), 0x7AFF])
        self.phase = self.rng.random(self.n_users)
        self._idx = {m: np.flatnonzero(self.models == m) for m in MODELS if (self.models == m).any()}
        if "onoff" in self._idx:
            if self.on_s <= 0 or self.off_s < 0:
                raise AirlinkError("on-off traffic needs on_s > 0 and off_s >= 0")
            self._on = self.rng.random(self.n_users) < self.on_s / (self.on_s + self.off_s)
            self._left = np.array([self._draw(on) for on in self._on]) * self.rng.random(self.n_users)
            self._credit = np.zeros(self.n_users)
        self._cum = None
        if "trace" in self._idx:
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
    def full_mask(self) -> np.ndarray:
        """True for the full-buffer users."""
        return self.models == "full"

    @property
    def full_buffer(self) -> bool:
        """Every user has a full buffer."""
        return bool(self.full_mask.all())

    def chunk(self, k0: int, n: int) -> np.ndarray:
        """Arrival bytes (whole packets) for TTIs ``k0 .. k0+n-1``: float64 (n, U)."""
        out = np.zeros((n, self.n_users))
        for model, users in self._idx.items():
            if model != "full":
                out[:, users] = getattr(self, "_" + model)(k0, n, users)
        return out

    def _cbr(self, k0, n, users):
        pkt = self.packet[users]
        per_tti = self.rate[users] * self.tti_s / (8 * pkt)
        cum = np.floor((np.arange(k0, k0 + n + 1)[:, None] + self.phase[None, users]) * per_tti[None, :])
        return np.diff(cum, axis=0) * pkt

    def _poisson(self, k0, n, users):
        pkt = self.packet[users]
        return self.rng.poisson(self.rate[users] * self.tti_s / (8 * pkt), size=(n, len(users))) * pkt

    def _trace(self, k0, n, users):
        t = np.arange(k0, k0 + n + 1) * self.tti_s
        loops, within = np.divmod(t, self._period)
        total = self._cum[-1]
        pos = within / self._period * (len(self._cum) - 1)
        i = np.minimum(pos.astype(int), len(self._cum) - 2)
        cum = loops * total + self._cum[i] + (pos - i) * (self._cum[i + 1] - self._cum[i])
        out = np.empty((n, len(users)))
        for col, j in enumerate(users):
            out[:, col] = np.diff(np.floor(cum / self.packet[j])) * self.packet[j]
        return out

    def _onoff(self, k0, n, users):
        # sequential per user (cheap: one step per state change)
        out = np.zeros((n, len(users)))
        for col, j in enumerate(users):
            pkt = self.packet[j]
            per_tti = self.rate[j] * self.tti_s / (8 * pkt)
            k = 0
            while k < n:
                steps = max(int(np.ceil(self._left[j] / self.tti_s - 1e-9)), 1)
                take = min(steps, n - k)
                if self._on[j]:
                    c = self._credit[j] + per_tti * np.arange(1, take + 1)
                    pk = np.floor(c)
                    out[k:k + take, col] = np.diff(np.concatenate([[0.0], pk])) * pkt
                    self._credit[j] = c[-1] - pk[-1]
                self._left[j] -= take * self.tti_s
                k += take
                if self._left[j] <= 1e-12:
                    self._on[j] = not self._on[j]
                    self._left[j] += self._draw(self._on[j])
        return out
