"""Rate tables, the BLER model and traffic models."""
import numpy as np
import pytest

from airlink.sim import RATE_TABLES, Traffic, rate_table, read_rate_table
from airlink.traces import AirlinkError


def test_evdo_table_is_the_papers():
    t = rate_table("evdo")
    assert t.rate([-13, -12.5, -9.5, 9.5, 20]).tolist() == [0, 38.4e3, 76.8e3, 2457.6e3, 2457.6e3]
    assert t.rate(1.3) == 921.6e3 and t.rate(1.29) == 614.4e3


def test_imt_and_lte_tables():
    imt = rate_table("imt-advanced")
    assert imt.rate_bps[0] == 15.128e6 and imt.rate_bps[-1] == 274e6 and len(imt) == 9
    lte = rate_table("lte-cqi", bandwidth_hz=1e6)
    assert len(lte) == 15 and lte.rate_bps[-1] == pytest.approx(5.5547e6)
    assert np.all(np.diff(lte.threshold_db) > 0)


def test_egprs_schemes_and_throughput_curves():
    t = rate_table("egprs")
    assert t.rate_bps.tolist() == [22.8e3, 34.3e3, 41.25e3, 51.6e3, 57.35e3, 69.2e3]
    ci = np.arange(0, 36, 1.0)
    s = np.stack([t.throughput(m, ci) for m in range(len(t))])
    # S_n = R_n (1 - BLER_n): each curve rises with C/I towards R_n
    assert np.all(np.diff(s, axis=1) >= 0)
    assert np.allclose(s[:, -1], t.rate_bps, rtol=0.1)
    # more robust schemes win at low C/I, the fastest at high C/I
    assert np.argmax(s[:, 0]) == 0 and np.argmax(s[:, -1]) == len(t) - 1
    lat = t.throughput(2, 10.0, latency=True)
    assert lat < t.throughput(2, 10.0)
    assert len(rate_table("gprs-cs")) == 4


def test_bler_model_meets_target_at_threshold():
    for name in ("evdo", "imt-advanced", "lte-cqi", "hsdpa"):
        t = rate_table(name)
        b = t.bler(np.arange(len(t)), t.threshold_db)
        assert np.allclose(b, 0.1)
        assert np.all(t.bler(0, [-30, 0, 30])[::-1] == np.sort(t.bler(0, [-30, 0, 30])))


def test_user_rate_table_from_csv(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text("mcs,sinr_db,rate_bps\nlow,-2,1e6\nhigh,10,8e6\nmid,4,3e6\n")
    t = read_rate_table(p)
    assert t.mcs == ["low", "mid", "high"] and t.rate(5.0) == 3e6
    q = tmp_path / "eff.csv"
    q.write_text("sinr_db,efficiency_bps_hz\n0,0.5\n10,3\n")
    assert rate_table(str(q), bandwidth_hz=2e6).rate_bps.tolist() == [1e6, 6e6]
    bad = tmp_path / "bad.csv"
    bad.write_text("snr,rate\n1,2\n")
    with pytest.raises(AirlinkError, match="sinr_db"):
        read_rate_table(bad)
    with pytest.raises(AirlinkError, match="unknown rate table"):
        rate_table("nope")
    assert set(RATE_TABLES) >= {"evdo", "imt-advanced", "lte-cqi", "egprs"}


def test_cbr_traffic_rate_is_exact():
    tr = Traffic("cbr", n_users=2, tti_s=1e-3, rate_bps=[1.2e6, 120e3], packet_bytes=1500, seed=1)
    a = np.concatenate([tr.chunk(0, 3000), tr.chunk(3000, 7000)])
    rate = a.sum(axis=0) * 8 / 10.0
    assert np.allclose(rate, [1.2e6, 120e3], rtol=0.01)
    assert np.all(a % 1500 == 0)


def test_onoff_traffic_period_and_rate():
    tr = Traffic("onoff", n_users=1, tti_s=0.02, rate_bps=76.8e3, packet_bytes=500,
                 on_s=1.0, off_s=5.0, seed=2)
    a = tr.chunk(0, 3000)[:, 0]          # 60 s
    t = np.flatnonzero(a) * 0.02
    bursts = 1 + int((np.diff(t) > 2.0).sum())
    assert 9 <= bursts <= 11              # one 1 s burst every 6 s
    starts = np.concatenate([[t[0]], t[1:][np.diff(t) > 2.0]])
    assert np.allclose(np.diff(starts), 6.0, atol=0.1)
    assert a.sum() * 8 / 60 == pytest.approx(76.8e3 / 6, rel=0.1)


def test_poisson_traffic_mean():
    tr = Traffic("poisson", n_users=3, tti_s=1e-3, rate_bps=2e6, packet_bytes=1000, seed=3)
    a = tr.chunk(0, 20000)
    assert a.sum(axis=0).mean() * 8 / 20 == pytest.approx(2e6, rel=0.03)


def test_trace_traffic_from_a_mahimahi_trace(tmp_path):
    p = tmp_path / "arr.trace"
    p.write_text("\n".join(str(i) for i in range(1, 101)) + "\n")   # 1 packet per ms, 100 ms loop
    tr = Traffic("trace", n_users=2, tti_s=1e-3, trace=p, packet_bytes=1500, seed=0)
    a = tr.chunk(0, 1000)
    assert a.sum(axis=0).tolist() == [1000 * 1500.0] * 2


def test_bad_traffic_model():
    with pytest.raises(AirlinkError, match="unknown traffic model"):
        Traffic("bursty", n_users=1, tti_s=1e-3)
