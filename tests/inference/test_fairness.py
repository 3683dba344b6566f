"""Fairness and jitter metrics on values worked out by hand."""
import json

import numpy as np
import pandas as pd
import pytest

import airlink.inference as inf


def test_jain_and_gap():
    assert inf.jain_index([1, 1, 1, 1]) == 1.0
    assert inf.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert inf.jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    assert inf.jain_index([0, 0]) == 1.0
    assert inf.fairness_gap([2, 4, 3]) == pytest.approx(1.0)
    assert inf.fairness_gap([5, 5]) == 0.0
    assert inf.fairness_gap([0, 1]) == float("inf")
    assert inf.fairness_gap([1.0, np.nan, 3.0]) == pytest.approx(2.0)


@pytest.mark.parametrize("values", [[1, 2, 3], [0.1, 10, 7, 7], [5], [3, 3, 0]])
def test_bounds(values):
    j = inf.jain_index(values)
    assert 1 / len(values) - 1e-12 <= j <= 1
    r = inf.min_max_ratio(values)
    assert 0 <= r <= 1
    assert inf.resource_fractions(values).sum() == pytest.approx(1.0)


def test_ratios():
    served = np.array([[1, 0], [1, 0], [0, 2], [1, 0]])
    assert list(inf.selection_ratios(served)) == [0.75, 0.25]
    backlog = np.array([[5, 0], [0, 0], [1, 1], [1, 0]])
    assert list(inf.active_time_ratios(backlog)) == [0.75, 0.25]
    assert list(inf.retransmission_ratios([1, 0], [4, 0])[:1]) == [0.25]
    assert np.isnan(inf.retransmission_ratios([1, 0], [4, 0])[1])
    assert inf.min_max_ratio([1, 3]) == pytest.approx(1 / 3)


def test_service_gaps():
    served = np.array([1, 0, 0, 1, 1, 0, 0, 0, 1])
    (gaps,) = inf.service_gaps(served, tti_s=0.002)
    assert np.allclose(gaps, [0.006, 0.002, 0.008])
    st = inf.gap_stats(gaps)
    assert st["mean"] == pytest.approx(16 / 3 / 1000)
    assert st["max"] == pytest.approx(0.008)
    assert st["cov"] == pytest.approx(np.std(gaps) / np.mean(gaps))
    assert np.isnan(inf.gap_stats([])["mean"])


def toy_mac():
    """Two users, 1 ms TTI: user 1 served 3 of 4 TTIs, user 2 every 4th."""
    n = 400
    t = pd.to_datetime(np.repeat(np.arange(n), 2), unit="ms", utc=True)
    user = np.tile(["1", "2"], n)
    k = np.repeat(np.arange(n), 2)
    one = (user == "1") & (k % 4 != 3)
    two = (user == "2") & (k % 4 == 3)
    served = np.where(one, 100.0, 0) + np.where(two, 50.0, 0)
    return pd.DataFrame({"time": t, "user": user, "served_bytes": served,
                         "subchannels": np.where(one | two, 10, 0),
                         "backlog_bytes": np.where(user == "1", 1000.0, (k % 2) * 10.0),
                         "harq_retransmissions": np.where(one & (k % 8 == 0), 1, 0)})


def test_fairness_report_on_frame():
    rep = inf.fairness_report(toy_mac(), window="100ms")
    o = rep["overall"]
    assert o["rate"] == "served_bytes" and o["resource"] == "subchannels"
    assert o["fairness_gap"] == pytest.approx((75 - 12.5) / 12.5)
    assert o["min_max_resource_ratio"] == pytest.approx(1 / 3)
    u = rep["users"]
    assert list(u["selection_ratio"]) == [0.75, 0.25]
    assert list(u["active_time_ratio"]) == [1.0, 0.5]
    assert u.loc["1", "retransmission_ratio"] == pytest.approx(50 / 3000)   # per subchannel block
    assert len(rep["windows"]) == 4
    assert np.allclose(rep["windows"]["min_max_resource_ratio"], 1 / 3)


def test_jitter_report_on_frame():
    rep = inf.jitter_report(toy_mac())
    j = rep.to_frame()
    assert rep["served"] == "served_bytes" and rep.to_dict()["users"][0]["user"] == "1"
    two = j[j.user == "2"].iloc[0]
    assert two["mean_s"] == pytest.approx(0.004) and two["cov"] == pytest.approx(0.0)
    one = j[j.user == "1"].iloc[0]
    assert one["max_s"] == pytest.approx(0.002)


def test_round_robin_jitter_is_exactly_even():
    """Three users served in turn every 1 ms TTI: every gap is 3 ms, so (hand-worked) the mean
    gap is 0.003 s and the std and CoV are exactly 0, not a float sum's residue (about
    1e-16, which reads as a jitter)."""
    n = 3000
    k = np.repeat(np.arange(n), 3)
    user = np.tile(["1", "2", "3"], n)
    frame = pd.DataFrame({"time": pd.to_datetime(k, unit="ms", utc=True), "user": user,
                          "served_bytes": np.where(k % 3 == user.astype(int) - 1, 100.0, 0.0)})
    j = inf.jitter_report(frame).to_frame()
    assert j["gaps"].tolist() == [999, 999, 999]
    assert j["mean_s"].tolist() == [0.003] * 3 and j["max_s"].tolist() == [0.003] * 3
    assert j["std_s"].tolist() == [0.0] * 3 and j["cov"].tolist() == [0.0] * 3


def test_reports_follow_the_result_convention():
    """Every report is a mapping with to_dict() (plain JSON values) and to_frame() (its table)."""
    import json
    rep = inf.fairness_report(toy_mac(), window="4ms")
    assert rep.to_frame().equals(rep["users"])
    d = rep.to_dict()
    json.dumps(d)                                   # plain values only (NaN -> None)
    assert d["overall"]["users"] == rep["overall"]["users"] and len(d["windows"]) == len(rep["windows"])


def test_users_come_in_numeric_order():
    """Twelve UEs labelled "1".."12" are reported 1, 2, ..., 12 (not "1", "10", "11", "2"),
    each with its own mean: user u serves 100 * u bytes per TTI."""
    import numpy as np
    import pandas as pd
    from airlink.inference import fairness_report
    t = np.repeat(np.arange(50), 12) / 1000
    users = np.tile(np.arange(1, 13), 50)
    frame = pd.DataFrame({"time": t, "user": users.astype(str), "served_bytes": users * 100.0,
                          "subchannels": 1.0, "backlog_bytes": 1.0})
    table = fairness_report(frame, time_column="time")["users"]
    assert table.index.tolist() == [str(u) for u in range(1, 13)]
    assert table["mean_served_bytes"].tolist() == [100.0 * u for u in range(1, 13)]


def test_ucc_device_log_is_one_user_and_two_are_not_users(run_airlink, shared_data):
    """A real UCC log is one device's: fairness reads its downlink bitrate (DL_bitrate,
    kbit/s, as dl_bitrate_bps) and answers that one user has no fairness; two device logs
    are refused naming the second file (it would add no column to the first: FRAMEs are
    layers of one run, and its rows were dropped before)."""
    files = sorted((shared_data / "ucc-5g").rglob("*.csv"))
    if len(files) < 2:
        pytest.skip("fewer than two UCC files in ../shared/data/ucc-5g")
    status, out, err = run_airlink("infer", "fairness", files[0], "--json")
    assert status == 0, err
    overall = json.loads(out)["overall"]
    assert overall["rate"] == "dl_bitrate_bps"
    assert overall["cannot_tell"].startswith("one user")
    status, out, err = run_airlink("infer", "fairness", files[0], files[1])
    assert status != 0 and out == ""
    assert f"{files[1]}: adds no column to {files[0]}" in err and "--by COLUMN" in err
