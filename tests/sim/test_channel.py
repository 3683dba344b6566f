"""Channel models: Jakes autocorrelation, power-delay profiles, shadowing, path loss,
measured input."""
import numpy as np
import pandas as pd
import pytest
from scipy.special import j0

from airlink.sim import (ChannelModel, SumOfSinusoids, doppler_hz, frequency_correlation,
                         pathloss_db, resample_measured, snr_from_geometry)
from airlink.sim.channel import measured_snr_db, profile
from airlink.traces import AirlinkError


def test_doppler_from_speed_and_carrier():
    assert doppler_hz(120, 2.5e9) == pytest.approx(120 / 3.6 * 2.5e9 / 299792458.0)
    assert doppler_hz(3, 9e8) == pytest.approx(2.5, rel=0.01)


def test_sum_of_sinusoids_autocorrelation_follows_j0():
    fd, dt = 50.0, 1e-3
    sos = SumOfSinusoids(fd, 64, np.random.default_rng(1))
    h = sos.coefficients(np.arange(20000) * dt)
    assert np.mean(np.abs(h) ** 2) == pytest.approx(1.0, abs=0.1)
    lags = np.arange(0, 40)
    acf = np.array([np.mean((h[lag:] * np.conj(h[:len(h) - lag])).real) for lag in lags])
    acf /= acf[0]
    expected = j0(2 * np.pi * fd * lags * dt)
    assert np.max(np.abs(acf - expected)) < 0.1
    # first zero of J0 at 2.405 / (2 pi fD) = 7.66 ms
    assert acf[7] > 0 > acf[9]


def test_rayleigh_envelope_statistics():
    sos = SumOfSinusoids(100.0, 32, np.random.default_rng(2))
    p = np.abs(sos.coefficients(np.arange(50000) * 1e-3)) ** 2
    # exponential power: P(p < 0.1) = 1 - exp(-0.1) ~ 0.095
    assert np.mean(p < 0.1) == pytest.approx(1 - np.exp(-0.1), abs=0.02)


@pytest.mark.parametrize("name", ["gsm-tu6", "ped-a", "ped-b", "veh-a"])
def test_neighbouring_subchannels_correlate_as_the_profile_implies(name):
    ch = ChannelModel(n_users=4, n_subchannels=64, tti_s=1e-3, snr_db=0.0, profile=name,
                      speed_kmh=60, carrier_hz=2e9, subchannel_hz=200e3, seed=3)
    g = ch.sinr_chunk(0, 4000).astype(np.float64)       # linear power gain (snr 0 dB)
    assert g.mean() == pytest.approx(1.0, abs=0.08)
    h_fd = []
    for df in (1, 4):
        a, b = g[:, :, :-df].ravel(), g[:, :, df:].ravel()
        h_fd.append(np.corrcoef(a, b)[0, 1])
    # power correlation of Rayleigh = |frequency correlation|^2
    expected = frequency_correlation(name, [200e3, 800e3]) ** 2
    assert np.allclose(h_fd, expected, atol=0.12)


def test_profiles_are_normalised():
    for name in ("gsm-tu6", "ped-a", "ped-b", "veh-a", "flat"):
        d, p = profile(name)
        assert p.sum() == pytest.approx(1.0) and len(d) == len(p)
    with pytest.raises(AirlinkError, match="unknown power-delay profile"):
        profile("moon")


def test_chunks_do_not_change_the_channel():
    kw = dict(n_users=3, n_subchannels=8, tti_s=1e-3, snr_db=[10, 0, -5], profile="ped-b",
              speed_kmh=30, shadowing_std_db=8, shadowing_corr_m=20, seed=5)
    a = ChannelModel(**kw)
    whole = a.sinr_chunk(0, 1000)
    b = ChannelModel(**kw)
    parts = np.concatenate([b.sinr_chunk(0, 300), b.sinr_chunk(300, 700)])
    assert np.allclose(whole, parts, rtol=1e-5)
    with pytest.raises(AirlinkError, match="in order"):
        b.sinr_chunk(0, 10)


def test_shadowing_std_and_distance_correlation():
    ch = ChannelModel(n_users=50, n_subchannels=1, tti_s=0.01, snr_db=0.0, profile="none",
                      speed_kmh=36, shadowing_std_db=8, shadowing_corr_m=50, seed=7)
    db = 10 * np.log10(ch.sinr_chunk(0, 20000)[:, :, 0].astype(np.float64))
    assert db.std() == pytest.approx(8, rel=0.1)
    # 10 m/s: lag 1 s = 10 m -> correlation exp(-10/50)
    lag = 100
    r = np.mean([np.corrcoef(db[:-lag, u], db[lag:, u])[0, 1] for u in range(50)])
    assert r == pytest.approx(np.exp(-0.2), abs=0.06)


def test_path_loss_formula_and_nominal_snr():
    assert pathloss_db(1000) == pytest.approx(128.1)
    assert pathloss_db(10000) == pytest.approx(128.1 + 37.6)
    s = snr_from_geometry([100, 1000], tx_power_dbm=30, antenna_gain_db=0, noise_figure_db=0,
                          bandwidth_hz=1e6, offset_db=[0, -3])
    noise = -174 + 60
    assert s[1] == pytest.approx(30 - 128.1 - noise - 3)
    assert s[0] - s[1] == pytest.approx(37.6 + 3)


def test_resample_hold_and_linear():
    v = resample_measured([0, 1, 2], [0.0, 10.0, 20.0], 3000, 1e-3)
    assert v[0] == 0 and v[999] == 0 and v[1000] == 10 and v[-1] == 20
    lin = resample_measured([0, 1, 2], [0.0, 10.0, 20.0], 3000, 1e-3, method="linear")
    assert lin[500] == pytest.approx(5.0)
    with pytest.raises(AirlinkError):
        resample_measured([0, 1], [np.nan, np.nan], 10, 1e-3)


def test_measured_channel_from_real_ucc_5g_log(shared_data):
    files = sorted((shared_data / "ucc-5g").rglob("*.csv"))
    if not files:
        pytest.skip("no ucc-5g CSV files in ../shared/data")
    raw = pd.read_csv(files[0], na_values="-")
    assert "SNR" in raw.columns
    t = pd.to_datetime(raw["Timestamp"], format="%Y.%m.%d_%H.%M.%S", utc=True)
    frame = pd.DataFrame({"time": t, "snr_db": pd.to_numeric(raw["SNR"], errors="coerce")})
    frame = frame.dropna().drop_duplicates("time").sort_values("time")
    frame = frame.iloc[:60]
    snr = measured_snr_db(frame, 30_000, 1e-3)
    assert len(snr) == 30_000 and np.isfinite(snr).all()
    first = frame["snr_db"].iloc[0]
    assert snr[0] == first
    # the series follows the log: the set of values is a subset of the logged ones
    assert set(np.unique(snr)) <= set(frame["snr_db"].unique())


def test_sinr_is_the_fading_gain_times_the_nominal_snr():
    # SINR = snr_u * |H|^2 with one float32 product per value, whichever users fade
    kw = dict(n_users=3, n_subchannels=16, tti_s=5e-4, snr_db=[20, 3, -4], profile=["ped-b", "none", "flat"],
              speed_kmh=[3, 3, 60], carrier_hz=3.5e9, subchannel_hz=360e3, seed=9)
    gain = ChannelModel(**kw).fading_chunk(0, 400)
    sinr = ChannelModel(**kw).sinr_chunk(0, 400)
    snr = (10 ** (np.array([20, 3, -4]) / 10)).astype(np.float32)
    assert np.array_equal(sinr, gain * snr[None, :, None])
    assert np.all(gain[:, 1] == 1.0)


def test_compiled_power_rounds_as_the_numpy_reference():
    # |h|^2 * s with float32 roundings in the same order, written into a strided view
    from airlink.sim.channel import scaled_power, scaled_power_reference
    rng = np.random.default_rng(4)
    h = (rng.standard_normal((300, 37)) * 10.0 ** rng.uniform(-15, 15, (300, 37))
         + 1j * rng.standard_normal((300, 37))).astype(np.complex64)
    scale = (10.0 ** rng.uniform(-5, 5, 300)).astype(np.float32)
    a, b = np.empty((300, 3, 37), np.float32), np.empty((300, 37), np.float32)
    scaled_power(h, scale, a[:, 1, :])
    scaled_power_reference(h, scale, b)
    assert np.array_equal(a[:, 1, :], b)
    p = h.real.astype(np.float64) ** 2 + h.imag.astype(np.float64) ** 2
    assert np.allclose(b, p * scale[:, None], rtol=1e-6)


def test_compiled_oscillators_are_the_c_librarys_cos_and_sin():
    # each value: x = t * omega + phase0 in float64, then cos / sin rounded to float32, as
    # Python's math module (the same C library) computes them one by one
    import math
    from airlink.sim.channel import oscillators, oscillators_reference
    rng = np.random.default_rng(5)
    t = np.concatenate([np.arange(40) * 5e-4, rng.uniform(0, 1e5, 40)])
    omega = 2 * np.pi * rng.uniform(-300, 300, 17)
    phase0 = rng.uniform(-np.pi, np.pi, 17)
    basis = np.empty((80, 17), np.complex64)
    oscillators(t, omega, phase0, basis.view(np.float32).reshape(80, 17, 2))
    want = np.array([[complex(np.float32(math.cos(tk * w + p)), np.float32(math.sin(tk * w + p)))
                      for w, p in zip(omega, phase0)] for tk in t], np.complex64)
    assert np.array_equal(basis, want)
    # the numpy form calls numpy's float64 cos and sin: the C library's, unless this numpy
    # build has vector routines of its own for the machine (some builds on AVX-512 do)
    x = np.multiply(t[:, None], omega) + phase0
    own = int(np.sum(np.cos(x) != np.vectorize(math.cos)(x)) + np.sum(np.sin(x) != np.vectorize(math.sin)(x)))
    if own:
        pytest.skip(f"this numpy's float64 cos/sin differ from the C library's at {own} of {2 * x.size} values")
    ref = np.empty_like(basis)
    oscillators_reference(t, omega, phase0, ref.view(np.float32).reshape(80, 17, 2))
    assert np.array_equal(ref, want)
