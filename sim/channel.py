"""Channel models: per user, per subchannel, per TTI SINR, generated in chunks.

The SINR of user ``u`` on subchannel ``c`` in TTI ``k`` is

    SINR[k, u, c] = snr_u * S_u(k) * |H_u(k, f_c)|**2

with ``snr_u`` the user's nominal SNR (given directly in dB, or from path loss
``128.1 + 37.6 log10(R_km)`` plus a free-form dB offset), ``S_u`` log-normal shadowing
and ``H_u`` the fading channel, normalised so that ``E|H|**2 = 1``.

Fading (Jakes/Clarke sum of sinusoids)
    Each path of each user is ``h(t) = sum_n w_n exp(j 2 pi f_D cos(alpha_n) t)`` over
    ``M`` oscillators with arrival angles ``alpha_n = 2 pi (n + u_n) / M`` (one random
    ``u_n`` per oscillator, stratified so that every direction is covered) and complex
    Gaussian weights ``w`` scaled to unit power. Its autocorrelation is
    ``(1/M) sum_n exp(j 2 pi f_D cos(alpha_n) tau)``, the Riemann sum of
    ``J0(2 pi f_D tau)`` (Clarke). All paths of the users that share a Doppler frequency
    share the oscillator set and differ in their weights (``M = 128`` by default, so two
    paths correlate by about ``1/sqrt(M)`` at most); this makes the channel one matrix
    product per chunk. ``f_D = v / c * f_carrier``.

Frequency selectivity (power-delay profiles)
    ``H_u(k, f) = sum_p sqrt(P_p) h_{u,p}(k) exp(-j 2 pi f tau_p)`` with the taps of
    :data:`PROFILES` (GSM typical urban 6-path, ITU Pedestrian A/B, Vehicular A) and
    ``f`` the subchannel centre offsets; neighbouring subchannels correlate as the
    profile's frequency correlation ``|sum_p P_p exp(-j 2 pi df tau_p)|``. ``flat`` is
    one Rayleigh path; ``none`` is no fading (AWGN).

Shadowing
    Log-normal, std ``shadowing_std_db``, with Gudmundson's distance correlation
    ``exp(-d / d_corr)``, d = distance moved (speed x time): an AR(1) process per user.

Measured input
    :func:`resample_measured` puts a measured series (e.g. SNR or CQI per second from a
    radio log frame) on the TTI grid (sample and hold, or linear); a
    :class:`MeasuredChannel` uses it as the per-TTI nominal SNR, optionally with fading.

Everything is generated chunk by chunk (``sinr_chunk(k0, n)``), so memory is bounded by
the chunk size, not by the run length; chunk boundaries do not change the result (up
to float32 rounding in the matrix products).
"""
from __future__ import annotations

import contextlib

import math
from dataclasses import dataclass

import numpy as np

from airlink.core.envflags import env_flag
from airlink.core.errors import AirlinkError

SPEED_OF_LIGHT = 299_792_458.0

# Power-delay profiles: (delays in seconds, powers in dB)
PROFILES = {
    # 3GPP TS 45.005 typical urban, 6 taps
    "gsm-tu6": ([0.0, 0.2e-6, 0.5e-6, 1.6e-6, 2.3e-6, 5.0e-6], [-3.0, 0.0, -2.0, -6.0, -8.0, -10.0]),
    # ITU-R M.1225 Pedestrian A / B, Vehicular A
    "ped-a": ([0.0, 110e-9, 190e-9, 410e-9], [0.0, -9.7, -19.2, -22.8]),
    "ped-b": ([0.0, 200e-9, 800e-9, 1200e-9, 2300e-9, 3700e-9], [0.0, -0.9, -4.9, -8.0, -7.8, -23.9]),
    "veh-a": ([0.0, 310e-9, 710e-9, 1090e-9, 1730e-9, 2510e-9], [0.0, -1.0, -9.0, -10.0, -15.0, -20.0]),
    "flat": ([0.0], [0.0]),
}
PROFILE_ALIASES = {"tu6": "gsm-tu6", "typical-urban": "gsm-tu6", "pedestrian-a": "ped-a",
                   "pedestrian-b": "ped-b", "vehicular-a": "veh-a", "rayleigh": "flat"}


def doppler_hz(speed_kmh: float, carrier_hz: float) -> float:
    """Maximum Doppler frequency ``f_D = v f_c / c`` (Hz) at ``speed_kmh``."""
    return float(speed_kmh) / 3.6 * float(carrier_hz) / SPEED_OF_LIGHT


def pathloss_db(distance_m) -> np.ndarray:
    """Macro-cell path loss ``L = 128.1 + 37.6 log10(R)`` dB, R in km (3GPP TR 25.814; the HSDPA study)."""
    r_km = np.maximum(np.asarray(distance_m, dtype=np.float64), 1.0) / 1000.0
    return 128.1 + 37.6 * np.log10(r_km)


def snr_from_geometry(distance_m, *, tx_power_dbm: float = 43.0, antenna_gain_db: float = 14.0,
                      noise_figure_db: float = 9.0, bandwidth_hz: float = 200e3,
                      offset_db=0.0) -> np.ndarray:
    """Nominal SNR (dB) per user from distance: ``P_tx + G - L(R) - (-174 + 10 log10 B + NF)
    + offset`` (``P_tx`` is the power in the bandwidth ``B`` of one subchannel)."""
    noise_dbm = -174.0 + 10 * np.log10(bandwidth_hz) + noise_figure_db
    return tx_power_dbm + antenna_gain_db - pathloss_db(distance_m) - noise_dbm + np.asarray(offset_db)


def profile(name: str):
    """``(delays_s, powers_linear)`` of a power-delay profile, powers summing to 1."""
    key = PROFILE_ALIASES.get(str(name).lower(), str(name).lower())
    if key not in PROFILES:
        raise AirlinkError(f"unknown power-delay profile {name!r} (one of {', '.join(PROFILES)}, none)")
    d, p = PROFILES[key]
    lin = 10 ** (np.asarray(p) / 10)
    return np.asarray(d, dtype=np.float64), lin / lin.sum()


def frequency_correlation(name: str, df_hz) -> np.ndarray:
    """Theoretical correlation ``|E[H(f) H*(f+df)]|`` of a profile at frequency spacing ``df``."""
    d, p = profile(name)
    df = np.atleast_1d(np.asarray(df_hz, dtype=np.float64))
    return np.abs((p[None, :] * np.exp(-2j * np.pi * df[:, None] * d[None, :])).sum(axis=1))


class SumOfSinusoids:
    """Rayleigh fading processes sharing one Doppler frequency (Jakes/Clarke model).

    ``coefficients(t_s)`` returns complex gains of shape ``(len(t_s), n_processes)`` with
    unit mean power; autocorrelation ``~ J0(2 pi f_D tau)`` (see the module docstring).
    """

    def __init__(self, fd_hz: float, n_processes: int, rng: np.random.Generator, n_osc: int = 128):
        self.fd_hz = float(fd_hz)
        m = int(n_osc)
        alpha = 2 * np.pi * (np.arange(m) + rng.random(m)) / m
        self.omega = 2 * np.pi * self.fd_hz * np.cos(alpha)
        self.phase0 = rng.uniform(-np.pi, np.pi, m)
        w = (rng.standard_normal((m, n_processes)) + 1j * rng.standard_normal((m, n_processes)))
        w /= np.sqrt((np.abs(w) ** 2).sum(axis=0, keepdims=True))
        self.weights = w.astype(np.complex64)

    def coefficients(self, t_s) -> np.ndarray:
        """Complex gains ``(len(t_s), n_processes)`` (complex64) at times ``t_s`` (s): the
        oscillators ``exp(j (omega_n t + phi_n))`` (:func:`oscillators`), times the weights."""
        t = np.asarray(t_s, dtype=np.float64).ravel()
        basis, = _workspace(self, (len(t), len(self.omega)), np.complex64)
        oscillators(t, self.omega, self.phase0, basis.view(np.float32).reshape(*basis.shape, 2))
        return basis @ self.weights


def _per_user(value, n_users: int, what: str) -> list:
    if isinstance(value, (list, tuple, np.ndarray)):
        vals = list(value)
        if len(vals) == 1:
            return vals * n_users
        if len(vals) != n_users:
            raise AirlinkError(f"{what}: {len(vals)} values for {n_users} users")
        return vals
    return [value] * n_users


@dataclass
class ChannelModel:
    """SINR per TTI, user and subchannel; see the module docstring for the model.

    Parameters (all keyword, usually from a preset)
    ------------------------------------------------
    n_users, n_subchannels : sizes
    tti_s : TTI length in seconds
    snr_db : nominal SNR per user (dB), scalar or list
    profile : power-delay profile name (or list per user); ``flat`` = one Rayleigh path,
        ``none`` = no fading
    speed_kmh : speed per user (scalar or list), carrier_hz : carrier frequency (Hz)
    subchannel_hz : subchannel spacing (Hz) for the frequency response
    shadowing_std_db, shadowing_corr_m : log-normal shadowing and its decorrelation distance
    seed : random seed of the channel (the run's seed)
    """

    n_users: int
    n_subchannels: int
    tti_s: float
    snr_db: object = 10.0
    profile: object = "flat"
    speed_kmh: object = 3.0
    carrier_hz: float = 2.0e9
    subchannel_hz: float = 200e3
    shadowing_std_db: float = 0.0
    shadowing_corr_m: float = 50.0
    seed: int = 0
    n_osc: int = 128
    snr_series_db: np.ndarray | None = None   # (n_tti, n_users) measured nominal SNR, optional

    def __post_init__(self):
        u, c = int(self.n_users), int(self.n_subchannels)
        if u < 1 or c < 1:
            raise AirlinkError("a channel needs at least one user and one subchannel")
        rng = np.random.default_rng([int(self.seed), 0xC4A7])
        self.snr_lin = (10 ** (np.asarray(_per_user(self.snr_db, u, "snr_db"), dtype=np.float64) / 10)
                        ).astype(np.float32)
        profiles = [str(p).lower() for p in _per_user(self.profile, u, "profile")]
        speeds = [float(s) for s in _per_user(self.speed_kmh, u, "speed_kmh")]
        self.speeds = np.asarray(speeds)
        self.fading = [p != "none" for p in profiles]
        # Frequency response per user: (P_max, C) complex matrix F_u
        f = (np.arange(c) - (c - 1) / 2.0) * float(self.subchannel_hz)
        taps = [profile(p) if p != "none" else (np.zeros(1), np.ones(1)) for p in profiles]
        self.n_paths = max(len(d) for d, _ in taps)
        self.freq = np.zeros((u, self.n_paths, c), dtype=np.complex64)
        for i, (d, p) in enumerate(taps):
            self.freq[i, :len(d)] = np.sqrt(p)[:, None] * np.exp(-2j * np.pi * np.outer(d, f))
        # One oscillator set per distinct Doppler frequency
        fds = [doppler_hz(s, self.carrier_hz) for s in speeds]
        self.groups = []
        for fd in sorted(set(fds)):
            users = [i for i in range(u) if fds[i] == fd and self.fading[i]]
            if users:
                self.groups.append((np.array(users), SumOfSinusoids(fd, len(users) * self.n_paths, rng,
                                                                    self.n_osc)))
        # Shadowing AR(1) state per user
        self._shadow_rng = np.random.default_rng([int(self.seed), 0x5AD0])
        step_m = self.speeds / 3.6 * self.tti_s
        self.shadow_rho = np.exp(-step_m / max(float(self.shadowing_corr_m), 1e-9))
        self._shadow_state = self._shadow_rng.standard_normal(u) * float(self.shadowing_std_db)
        self._next_k = 0

    @property
    def mean_snr_db(self) -> np.ndarray:
        return 10 * np.log10(self.snr_lin.astype(np.float64))

    def _shadowing_db(self, n: int) -> np.ndarray:
        """Next ``n`` TTIs of shadowing (dB), shape (n, U); sequential AR(1)."""
        u = self.n_users
        if self.shadowing_std_db <= 0:
            return np.zeros((n, u))
        from scipy.signal import lfilter
        sd = float(self.shadowing_std_db)
        noise = self._shadow_rng.standard_normal((n, u)) * sd * np.sqrt(1 - self.shadow_rho ** 2)
        out = np.empty((n, u))
        for i in range(u):
            rho = self.shadow_rho[i]
            y, _ = lfilter([1.0], [1.0, -rho], noise[:, i], zi=[rho * self._shadow_state[i]])
            out[:, i] = y
        self._shadow_state = out[-1].copy()
        return out

    def fading_chunk(self, k0: int, n: int) -> np.ndarray:
        """Fading power gain ``|H|**2`` for TTIs ``k0 .. k0+n-1``: float32 (n, U, C)."""
        return self._gain_chunk(k0, n, None)

    def _gain_chunk(self, k0: int, n: int, scale, out=None) -> np.ndarray:
        """``|H|**2`` (float32 (n, U, C)) of TTIs ``k0 .. k0+n-1``, times ``scale`` (float32
        (n, U)) when given: one float32 product per value, as ``gain * scale`` would be;
        into ``out`` when given.

        Computed with one BLAS thread: a float32 matrix product's rounding depends on how
        BLAS splits it between threads, and a seed must draw the same channel in any process
        (``airlink simulate``, the cell's radio process, a library caller)."""
        with _one_blas_thread():
            u, c = self.n_users, self.n_subchannels
            t = (k0 + np.arange(n)) * self.tti_s
            if out is None:
                gain = np.empty((n, u, c), dtype=np.float32)
            elif out.shape != (n, u, c) or out.dtype != np.float32:
                raise AirlinkError(f"channel output array: need float32 {(n, u, c)}, got {out.dtype} {out.shape}")
            else:
                gain = out
            for i in range(u):
                if not self.fading[i]:
                    gain[:, i, :] = 1.0 if scale is None else scale[:, i, None]
            if scale is None:
                scale = np.ones((n, u), np.float32)       # x * 1 = x: the plain |H|^2
            hf, = _workspace(self, (n, c), np.complex64)
            for users, sos in self.groups:
                h = sos.coefficients(t).reshape(n, len(users), self.n_paths)
                for j, ui in enumerate(users):
                    np.matmul(h[:, j, :], self.freq[ui], out=hf)    # (n, C) frequency response
                    scaled_power(hf, scale[:, ui], gain[:, ui, :])
            return gain

    def sinr_chunk(self, k0: int, n: int, out: np.ndarray | None = None) -> np.ndarray:
        """Linear SINR for TTIs ``k0 .. k0+n-1`` as float32 (n, U, C): the fading gain times
        the nominal SNR (and shadowing) of each user and TTI, rounded to float32; written
        into ``out`` (float32 (n, U, C), e.g. rows of a longer array) when given.

        Chunks must be asked for in order (shadowing is a sequential process)."""
        if k0 != self._next_k:
            raise AirlinkError(f"channel chunks must be generated in order (asked {k0}, next {self._next_k})")
        self._next_k = k0 + n
        if self.snr_series_db is not None:
            s = self.snr_series_db
            idx = np.minimum(np.arange(k0, k0 + n), len(s) - 1)
            scale = 10 ** (s[idx] / 10)
        else:
            scale = np.broadcast_to(self.snr_lin.astype(np.float64), (n, self.n_users))
        if self.shadowing_std_db > 0:
            scale = scale * 10 ** (self._shadowing_db(n) / 10)
        return self._gain_chunk(k0, n, np.ascontiguousarray(scale, dtype=np.float32), out)


def scaled_power_reference(h: np.ndarray, scale: np.ndarray, out: np.ndarray) -> None:
    """``out[k, c] = (re(h)^2 + im(h)^2) * scale[k]`` in float32, each operation rounded to
    float32 in this order (``h`` complex64 (n, C), ``scale`` float32 (n,), ``out`` float32
    (n, C)); :func:`scaled_power` is this in one compiled pass when numba is there."""
    parts = np.square(h.view(np.float32).reshape(*h.shape, 2))
    np.add(parts[..., 0], parts[..., 1], out=out)
    np.multiply(out, scale[:, None], out=out)


def oscillators_reference(t: np.ndarray, omega: np.ndarray, phase0: np.ndarray, parts: np.ndarray) -> None:
    """``parts[k, n] = (cos(x), sin(x))`` rounded to float32, ``x = t[k] * omega[n] + phase0[n]``
    in float64 (a product, then a sum: no fused multiply-add); ``parts`` float32 (K, N, 2),
    the real and imaginary parts of a complex64 (K, N) array. :func:`oscillators` is this in
    one compiled pass when numba is there: its cos and sin are the C library's, which numpy's
    float64 cos and sin call too unless the numpy build has vector code of its own for the
    machine (numpy 2.4 on x86-64 calls the C library's, AVX-512 or not); the channel tests
    compare the two."""
    ph = np.multiply(t[:, None], omega)
    ph += phase0
    parts[..., 0] = np.cos(ph)
    parts[..., 1] = np.sin(ph)


def _oscillators_loop(t, omega, phase0, parts):
    for k in range(t.shape[0]):
        tk = t[k]
        for n in range(omega.shape[0]):
            x = tk * omega[n] + phase0[n]
            parts[k, n, 0] = np.float32(math.cos(x))
            parts[k, n, 1] = np.float32(math.sin(x))


def _scaled_power_parts(parts, scale, out):
    # parts: h as float32 (n, 2C), real and imaginary parts interleaved (vectorised as such)
    n = parts.shape[0]
    c = parts.shape[1] // 2
    for k in range(n):
        s = scale[k]
        row = parts[k]
        o = out[k]
        for j in range(c):
            re = row[2 * j]
            im = row[2 * j + 1]
            o[j] = (re * re + im * im) * s


def _scaled_power_compiled(h, scale, out):
    parts = h.view(np.float32) if h.flags.c_contiguous else np.ascontiguousarray(h).view(np.float32)
    _scaled_power_kernel(parts, scale, out)


scaled_power = scaled_power_reference
oscillators = oscillators_reference
_NUMBA_WANTED = env_flag("AIRLINK_NUMBA", True)     # a bad value is an error, not "off"
try:  # pragma: no cover - depends on the environment
    if not _NUMBA_WANTED:
        raise ImportError("numba disabled by AIRLINK_NUMBA=0")
    import numba as _numba
    # float32 throughout and no fast-math: no fused multiply-add, the reference's roundings
    _scaled_power_kernel = _numba.njit(cache=True, nogil=True)(_scaled_power_parts)
    scaled_power = _scaled_power_compiled
    oscillators = _numba.njit(cache=True, nogil=True)(_oscillators_loop)
except Exception:  # numba missing or broken: the numpy form
    scaled_power = scaled_power_reference
    oscillators = oscillators_reference


def _workspace(owner, shape, *dtypes) -> list:
    """Scratch arrays of ``shape``, one per dtype, kept on ``owner`` between calls of the
    same shape (a chunk's intermediate values need no new memory for every chunk)."""
    key = (tuple(shape), dtypes)
    cached = getattr(owner, "_scratch", None)
    if cached is None or cached[0] != key:
        cached = (key, [np.empty(shape, d) for d in dtypes])
        owner._scratch = cached
    return cached[1]


_BLAS = None


def _one_blas_thread():
    """A context in which BLAS runs on one thread (the thread pools are looked up once).
    Where every BLAS library already runs on one thread (the cell's radio process,
    :mod:`airlink.replay.cell_radio`) it changes nothing: setting an OpenBLAS thread count
    in a forked process starts its thread pool anew, whose threads spin for ~0.1 s of CPU
    each before they sleep, at every chunk."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController
        _BLAS = ThreadpoolController().select(user_api="blas")
    if all(lib.num_threads == 1 for lib in _BLAS.lib_controllers):
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1)


def resample_measured(times_s, values, n_tti: int, tti_s: float, *, method: str = "hold") -> np.ndarray:
    """A measured series (times in seconds from its start, values) on the TTI grid.

    ``method='hold'`` keeps each sample until the next (what a 1 s radio log means);
    ``'linear'`` interpolates. Missing values (NaN) are filled from their neighbours; the
    series is held past its ends. Returns ``n_tti`` values.
    """
    t = np.asarray(times_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(v)
    if ok.sum() == 0:
        raise AirlinkError("measured channel series has no finite values")
    t, v = t[ok], v[ok]
    order = np.argsort(t, kind="stable")
    t, v = t[order] - t[order][0], v[order]
    grid = np.arange(n_tti) * float(tti_s)
    if method == "linear":
        return np.interp(grid, t, v)
    if method != "hold":
        raise AirlinkError(f"unknown resampling method {method!r} (hold or linear)")
    idx = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(v) - 1)
    return v[idx]


def measured_snr_db(frame, n_tti: int, tti_s: float, *, column: str | None = None,
                    method: str = "hold", loop: bool = True) -> np.ndarray:
    """Nominal SNR (dB) per TTI from a radio-log frame (kind ``rf``: ``time`` + ``snr_db``,
    ``sinr_db`` or ``cqi``). CQI is mapped to the SINR threshold of that CQI in the LTE table.
    With ``loop`` the series repeats when the run is longer than the log."""
    import pandas as pd
    from .rates import rate_table
    if column is None:
        column = next((c for c in ("sinr_db", "snr_db", "cqi", "ecio_db") if c in frame.columns), None)
        if column is None:
            raise AirlinkError("measured channel frame needs a sinr_db, snr_db, cqi or ecio_db column")
    if column not in frame.columns:
        raise AirlinkError(f"measured channel frame has no column {column!r}")
    t = frame.index if "time" not in frame.columns else frame["time"]
    t = pd.to_datetime(pd.Series(np.asarray(t)), utc=True)
    ts = (t - t.iloc[0]).dt.total_seconds().to_numpy()
    v = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
    if column == "cqi":
        thr = rate_table("lte-cqi").threshold_db
        c = np.clip(np.nan_to_num(v, nan=1), 1, 15).astype(int)
        v = np.where(np.isfinite(v), thr[c - 1], np.nan)
    span = (np.nanmax(ts) + 1.0) if len(ts) else 1.0
    n_src = int(np.ceil(span / tti_s))
    series = resample_measured(ts, v, min(n_src, n_tti) if loop else n_tti, tti_s, method=method)
    if loop and len(series) < n_tti:
        series = np.resize(series, n_tti)
    return series
