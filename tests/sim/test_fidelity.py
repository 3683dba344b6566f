"""Fidelity against the papers (seeds 000, 001, 003, 004), at reduced size where needed.

Each check is one qualitative result of a paper, run on the presets; the runs are fixed by
their seeds, so these are deterministic.
"""
import numpy as np
import pytest

import airlink.sim as S
from airlink.sim import kernel as K

from tests.sim._simnmi import nmi, per_second

if not K.COMPILED:
    pytest.skip("the fidelity runs (minutes of simulated time) need the compiled kernel: "
                "pip install numba (the Python kernel gives identical results, see "
                "test_python_kernel_gives_the_same_result, but too slowly for minutes of cell time)", allow_module_level=True)


@pytest.fixture(scope="module")
def evdo_a():
    """EV-DO (the EV-DO study), 16 users, PF at a = 0.1, 0.01, 0.001; 60 s = 36,000 slots."""
    return {a: S.simulate("evdo", duration="60s", pf_a=a).summary for a in (0.1, 0.01, 0.001)}


def test_evdo_pf_gives_every_user_about_one_sixteenth_of_the_slots(evdo_a):
    s = evdo_a[0.001]
    fractions = np.array([u["resource_fraction"] for u in s["users"]])
    assert len(fractions) == 16 and fractions.sum() == pytest.approx(1.0)
    assert np.all(np.abs(fractions - 1 / 16) <= 0.15 / 16)
    # stronger nominal SNR -> more throughput with the same share of slots
    thr = [u["throughput_mbps"] for u in s["users"]]
    assert thr[-1] > 2 * thr[0]


def test_evdo_mac_throughput_does_not_fall_as_a_falls_while_jitter_rises(evdo_a):
    thr = [evdo_a[a]["aggregate_throughput_mbps"] for a in (0.1, 0.01, 0.001)]
    cov = [np.mean([u["gap_cov"] for u in evdo_a[a]["users"]]) for a in (0.1, 0.01, 0.001)]
    assert thr[0] <= thr[1] <= thr[2]
    assert cov[0] < cov[1] < cov[2]


def test_evdo_round_robin_is_below_pf_even_at_a_0_1(evdo_a):
    rr = S.simulate("evdo", duration="60s", scheduler="rr").summary
    assert rr["aggregate_throughput_mbps"] < evdo_a[0.1]["aggregate_throughput_mbps"]
    fr = [u["resource_fraction"] for u in rr["users"]]
    # RR: about equal shares of slots (users in a fade below -12.5 dB are skipped)
    assert np.all(np.abs(np.array(fr) - 1 / 16) <= 0.1 / 16)


def test_lambda_sweep_throughput_falls_and_fairness_peaks_at_one():
    lams = [0, 0.5, 1, 2, 5, 10]
    runs = [S.simulate("evdo", duration="40s", scheduler="lambda", lam=lam).summary for lam in lams]
    thr = [r["aggregate_throughput_mbps"] for r in runs]
    fair = [r["resource_fraction_min_max_ratio"] or 0.0 for r in runs]
    assert all(b <= a for a, b in zip(thr, thr[1:]))
    assert int(np.argmax(fair)) == lams.index(1)


@pytest.fixture(scope="module")
def imt():
    """IMT-Advanced (Kakuda & Tsuru) at reduced size: 100 subchannels of 800 kHz (same 80 MHz), 3 s."""
    kw = dict(duration="3s", n_subchannels=100, subchannel_hz=800e3)
    return {s: S.simulate("imt-advanced", scheduler=s, **kw).summary for s in ("pf", "maxcir")}


def test_imt_maxcir_beats_pf_and_user_1_dominates(imt):
    assert imt["maxcir"]["aggregate_throughput_mbps"] > 1.5 * imt["pf"]["aggregate_throughput_mbps"]
    sel = [u["selection_ratio"] for u in imt["maxcir"]["users"]]
    assert int(np.argmax(sel)) == 0
    pf = [u["selection_ratio"] for u in imt["pf"]["users"]]
    assert all(abs(x - 0.1) <= 0.03 for x in pf)


def test_higher_speed_with_stale_csi_raises_retransmissions():
    kw = dict(duration="1s", n_subchannels=50, subchannel_hz=1.6e6, csi_delay_tti=3)
    slow = S.simulate("imt-advanced", speed_kmh=3, **kw).summary
    fast = S.simulate("imt-advanced", speed_kmh=120, **kw).summary
    assert fast["retransmission_ratio"] > 2 * slow["retransmission_ratio"]
    assert fast["aggregate_throughput_mbps"] < slow["aggregate_throughput_mbps"]
    # without CSI delay the speed matters much less
    fresh = S.simulate("imt-advanced", speed_kmh=120, **{**kw, "csi_delay_tti": 0}).summary
    assert fresh["retransmission_ratio"] < fast["retransmission_ratio"]


def test_imt_small_buffer_with_bursty_arrivals_lowers_active_time():
    kw = dict(duration="2s", n_subchannels=50, subchannel_hz=1.6e6, scheduler="maxcir",
              traffic="onoff", on_s=0.05, off_s=0.05, traffic_rate_bps=400e6)
    small = S.simulate("imt-advanced", buffer_packets=40, **kw).summary
    large = S.simulate("imt-advanced", buffer_packets=1500, **kw).summary
    u_small, u_large = small["users"][0], large["users"][0]
    assert u_small["drops_packets"] > u_large["drops_packets"]
    assert u_small["throughput_mbps"] < u_large["throughput_mbps"]


def test_egprs_hybrid_link_adaptation_is_as_good_as_each_single_method():
    """Tan, Lo and Seah (TCP/IP over EDGE): hybrid (BLER method when poor, C/I method when good) >= each single method
    over 6-30 dB; C/I averaging near ideal at high C/I; S_n rises with C/I for every method.
    At the switch point hybrid alternates between the methods, hence 2.5 % of slack for the
    Monte Carlo noise of 20,000 blocks of a 3 km/h fading channel."""
    ci_db = [6, 10, 14, 18, 22, 26, 30]
    thr = {la: np.array([S.simulate("egprs", duration="400s", snr_db=c, link_adaptation=la)
                         .summary["aggregate_throughput_mbps"] for c in ci_db])
           for la in ("ci", "bler", "hybrid", "ideal")}
    best_single = np.maximum(thr["ci"], thr["bler"])
    assert np.all(thr["hybrid"] >= 0.975 * best_single), thr
    assert thr["hybrid"].mean() >= 0.995 * max(thr["ci"].mean(), thr["bler"].mean())
    for la in ("ci", "bler", "hybrid"):
        assert np.all(thr[la] <= thr["ideal"] * 1.01)
        assert np.all(np.diff(thr[la]) > 0)      # S rises with C/I
    assert thr["ci"][-1] >= 0.9 * thr["ideal"][-1]


def test_backlog_scheduler_rate_follows_backlog_not_channel():
    """Mattar et al.: NMI(assigned rate; backlog) >> NMI(assigned rate; channel), on-off sources."""
    r = S.simulate("1xrtt", duration="240s")
    # resources are the sector's 32 code channels
    assert 0 < sum(u["resource_fraction"] for u in r.summary["users"]) <= 1
    for u in r.capacity.users:
        rate = per_second(r.mac, u, "assigned_rate_bps", 0.02)
        backlog = per_second(r.mac, u, "backlog_bytes", 0.02)
        channel = per_second(r.mac, u, "sinr_db", 0.02)
        assert nmi(rate, backlog) > 0.4
        assert nmi(rate, backlog) > 3 * nmi(rate, channel)


def test_maxcir_full_buffer_rate_follows_channel_not_backlog():
    r = S.simulate("imt-advanced", duration="2s", n_subchannels=50, subchannel_hz=1.6e6,
                   scheduler="maxcir")
    for u in ("1", "2", "3"):
        f = r.mac[r.mac.user == u]
        rate = f["assigned_rate_bps"].to_numpy()
        assert nmi(rate, f["backlog_bytes"].to_numpy(), max_shift=0) == 0.0   # full buffer: constant
        assert nmi(rate, f["sinr_db"].to_numpy(), max_shift=0) > 0.02


def test_backlog_scheduler_throttles_greedy_cbr_users():
    """Mattar et al.: CBR throughput tracks the sending rate up to ~50 kbit/s, then decreases."""
    def served(rate):
        r = S.simulate("1xrtt", duration="60s", traffic="cbr", traffic_rate_bps=[rate, 9600, 9600, 9600])
        return r.summary["users"][0]["throughput_mbps"] * 1e3
    assert served(38.4e3) == pytest.approx(38.4, rel=0.05)
    assert served(50e3) == pytest.approx(50, rel=0.05)
    assert served(100e3) < 0.5 * served(50e3)
