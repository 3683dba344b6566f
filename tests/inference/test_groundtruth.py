"""Ground truth from the simulator: who drives the assigned rate (the Table 1 setting of Mattar et al., CDMA2000)."""
import pandas as pd
import pytest

import airlink.inference as inf
from airlink import sim


@pytest.fixture(scope="module")
def backlog_onoff():
    return sim.simulate("1xrtt", seed=1, duration="60s", scheduler="backlog", traffic="onoff").mac


@pytest.fixture(scope="module")
def maxcir_full():
    return sim.simulate("1xrtt", seed=1, duration="60s", scheduler="maxcir", traffic="full").mac


def peaks(mac, channel="sinr_reported_db"):
    t = inf.rank_factors(mac, target="assigned_rate_bps", factors=["backlog_bytes", channel],
                         max_lag="2s", surrogates=19, bootstrap=20)
    return t.set_index("factor")


def test_backlog_scheduler_with_onoff_follows_backlog(backlog_onoff):
    t = peaks(backlog_onoff)
    assert t.loc["backlog_bytes", "peak_nmi"] > 0.4
    assert t.loc["backlog_bytes", "peak_nmi"] > t.loc["sinr_reported_db", "peak_nmi"]
    assert t.loc["backlog_bytes", "p_value"] == pytest.approx(0.05)   # above all 19 surrogates
    assert t.loc["backlog_bytes", "peak_nmi"] > t.loc["backlog_bytes", "threshold"]


def test_maxcir_with_full_buffers_follows_channel(maxcir_full):
    t = peaks(maxcir_full)
    assert t.loc["sinr_reported_db", "peak_nmi"] > t.loc["backlog_bytes", "peak_nmi"]
    assert t.loc["sinr_reported_db", "p_value"] == pytest.approx(0.05)


def test_backlog_dependence_report(backlog_onoff):
    rep = inf.backlog_dependence(backlog_onoff, surrogates=9)
    assert rep["backlog_dominates"] is True
    assert rep["nmi_backlog"]["peak_nmi"] > 0.4
    assert rep["sending"] == "arrivals_bytes"
    # the rate follows each burst within a second (Mattar et al. Sec. 4)
    assert 0 <= rep["response_lag_s"] < 1.0
    assert rep["curve"]


def test_throttling_begins_where_cbr_stops_being_followed():
    frames = []
    for k, rate in enumerate([20e3, 40e3, 60e3, 80e3]):
        m = sim.simulate("1xrtt", seed=1, duration="20s", scheduler="backlog", traffic="cbr",
                         traffic_rate_bps=rate, n_users=2).mac.copy()
        m["time"] = m["time"] + pd.Timedelta(seconds=30 * k)
        m["user"] = m["user"].astype(str) + f"@{int(rate)}"
        frames.append(m)
    rep = inf.backlog_dependence(pd.concat(frames, ignore_index=True), surrogates=0, window="2s")
    xs = [c["sending_rate_bps"] for c in rep["curve"]]
    assert min(xs) == pytest.approx(20e3, rel=0.1) and max(xs) == pytest.approx(80e3, rel=0.1)
    assert 40e3 <= rep["throttle_onset_bps"] <= 80e3


def test_fairness_of_simulated_cell():
    mac = sim.simulate("quick", seed=0, duration="5s", scheduler="rr").mac
    rep = inf.fairness_report(mac)
    ref = sim.simulate("quick", seed=0, duration="5s", scheduler="rr").summary
    o = rep["overall"]
    assert o["jain_index"] == pytest.approx(ref["jain_index"], rel=1e-6)
    assert o["fairness_gap"] == pytest.approx(ref["fairness_gap"], rel=1e-6)
    assert o["min_max_resource_ratio"] == pytest.approx(ref["resource_fraction_min_max_ratio"], rel=1e-6)
    users = rep["users"]
    assert list(users["selection_ratio"]) == pytest.approx([u["selection_ratio"] for u in ref["users"]], rel=1e-6)
    assert list(users["retransmission_ratio"]) == pytest.approx([u["retransmission_ratio"] for u in ref["users"]], rel=1e-3)
    mac = sim.simulate("quick", seed=0, duration="5s", scheduler="maxcir").mac
    assert inf.fairness_report(mac)["overall"]["jain_index"] < rep["overall"]["jain_index"]
