"""A measured cell replayed live through real namespaces (airlink cell --from-log).

Two UEs download with iperf3 for 1 s in the afternoon NR-Scope cell from second 68.5 of
the log, where RNTI 25864 holds about half the PRBs: the MAC log's cross-traffic rows must
be the log's DCIs (PRBs per slot computed here from the raw CSV), the UEs must never get a
PRB the cross-traffic holds, and every UE's bytes must be conserved.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.replay.test_cell_fromlog import AFTERNOON, FOLLOW, START_S, raw_downlink

pytestmark = pytest.mark.netns


def test_live_measured_cell(test_ns, tmp_path, shared_data):
    for port in (5201, 5202):
        test_ns.iperf_server(port)
    log = shared_data / AFTERNOON
    mac_path, stats_path = tmp_path / "mac.parquet", tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--from-log", log, "--preset", "nr-tmobile-10mhz", "--log-start", f"{START_S}s",
                        "--follow-rnti", FOLLOW, "--users", "2", "--duration", "8s", "--mac-log", mac_path,
                        "--stats", stats_path, "--",
                        "sh", "-c", "iperf3 -c $AIRLINK_BASE -p $((5200 + AIRLINK_UE)) -R -t 1 > /dev/null",
                        timeout=120)
    assert r.returncode == 0, r.stderr
    stats = json.loads(stats_path.read_text())
    mac = pd.read_parquet(mac_path)
    n = stats["ttis"]
    # iperf3 -R -t 1 ends 1.8-2.6 s after the cell starts here (connect, 1 s of data, the
    # end-of-test exchange behind a full queue); the duration only caps a run that hangs
    assert 1000 <= n < 8000

    # cross-traffic rows = the log's other RNTIs' DCIs, slot by slot
    raw = raw_downlink(log)
    first = int(START_S * 1000)
    others = raw[(raw["rnti"] != int(FOLLOW)) & raw["slot"].between(first, first + n - 1)]
    want = others.groupby(others["slot"] - first)["prbs"].sum().reindex(range(n), fill_value=0).to_numpy()
    cross = mac[mac["cross_traffic"]]
    got = cross.groupby("slot")["prbs"].sum().reindex(range(n), fill_value=0).to_numpy()
    assert want.sum() > 10_000
    np.testing.assert_array_equal(got, want)
    assert len(cross) == len(others)

    # the UEs got PRBs, never more than the cross-traffic left
    live = mac[~mac["cross_traffic"]]
    assert set(live["user"]) == {"1", "2"}
    per_tti = live.groupby("slot")["subchannels"].sum().reindex(range(n), fill_value=0).to_numpy()
    assert per_tti.sum() > 0
    assert (per_tti <= 52 - want).all()      # PRB ranges of one slot's DCIs do not overlap here

    # conservation per UE: arrivals = served + drops + queued, row by row of the MAC log, and
    # the log's served bytes are the bytes that left the queue
    for ue in stats["ues"]:
        d = ue["downlink"]
        assert d["arrivals_bytes"] == d["departures_bytes"] + d["drops_bytes"] + d["queued_bytes"], d
        rows = live[live["user"] == str(ue["ue"])].sort_values("slot")
        assert rows["served_bytes"].sum() > 50_000
        balance = (rows["arrivals_bytes"].cumsum() - rows["served_bytes"].cumsum() - rows["drops_bytes"].cumsum()
                   - rows["backlog_bytes"])
        assert np.abs(balance.to_numpy()).max() < 1.0
        assert abs(rows["served_bytes"].sum() - ue["downlink"]["departures_bytes"]) < 1.0
    assert stats["measured_cell"]["follow_rnti"] == [FOLLOW, FOLLOW]

    # airlink infer cell reads the live MAC log like a decoded one: the live UEs and the RNTIs
    from airlink import collectors
    from airlink.inference.cell_logs import analyze_cell
    res = analyze_cell(collectors.read(mac_path))
    users = res.to_frame()
    assert res.summary["cell_prbs"] == 52 and res.summary["tti_s"] == 0.001
    assert set(users["user"] if "user" in users.columns else users.index.astype(str)) == \
        {"1", "2", *others["rnti"].astype(str)}


def test_live_replay_of_one_ue_of_an_airlink_cell(test_ns, tmp_path):
    """Scheduler-driven replay of UE 1 of a recorded airlink cell (a 4-UE quick cell's MAC
    log, hand-edited: UEs 2-4 hold all 24 subchannels in TTIs 700-1099, none in 1100-1499).
    One live UE downloads with iperf3 for 2 s: the MAC log's cross-traffic per TTI is the
    other UEs' recorded subchannels (summed here from the log), the live UE gets nothing in
    the TTIs the others took whole although it has data queued, never more than they left,
    and its bytes are conserved."""
    from tests.replay.test_cell_maclog_replay import hand_log
    n_log = 2000
    log_path = hand_log(tmp_path, n_log, all_taken=range(700, 1100), none_taken=range(1100, 1500))
    test_ns.iperf_server(5201)
    mac_path, stats_path = tmp_path / "mac.parquet", tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--from-log", log_path, "--preset", "quick", "--follow-rnti", "1", "--users", "1",
                        "--duration", "8s", "--mac-log", mac_path, "--stats", stats_path, "--",
                        "sh", "-c", "iperf3 -c $AIRLINK_BASE -p 5201 -R -t 2 > /dev/null", timeout=120)
    assert r.returncode == 0, r.stderr
    stats = json.loads(stats_path.read_text())
    mac = pd.read_parquet(mac_path)
    n = stats["ttis"]
    assert 1600 <= n <= 2500

    rec = pd.read_parquet(log_path)
    tti = np.repeat(np.arange(n_log), 4)
    others = rec[rec["user"] != "1"]
    per_slot = others.groupby(tti[others.index])["subchannels"].sum().reindex(range(n_log), fill_value=0)
    want = per_slot.to_numpy()[np.arange(n) % n_log]        # the log repeats after its last TTI
    cross = mac[mac["cross_traffic"]]
    got = cross.groupby("slot")["prbs"].sum().reindex(range(n), fill_value=0).to_numpy()
    np.testing.assert_array_equal(got, want)
    assert (want[700:1100] == 24).all() and (want[1100:1500] == 0).all()

    live = mac[~mac["cross_traffic"]].set_index("slot")
    sub = live["subchannels"].reindex(range(n), fill_value=0).to_numpy()
    served = live["served_bytes"].reindex(range(n), fill_value=0).to_numpy()
    seen = live["backlog_seen_bytes"].reindex(range(n), fill_value=0).to_numpy()
    assert (sub <= 24 - want).all()
    assert (sub[700:1100] == 0).all() and (served[700:1100] == 0).all()
    assert (seen[700:1100] > 0).mean() > 0.5          # the download wanted them
    assert served[1100:1500].sum() > 0 and served[:700].sum() > 0
    d = stats["ues"][0]["downlink"]
    assert d["arrivals_bytes"] == d["departures_bytes"] + d["drops_bytes"] + d["queued_bytes"], d
    assert abs(live["served_bytes"].sum() - d["departures_bytes"]) < 1.0
    balance = (live["arrivals_bytes"].cumsum() - live["served_bytes"].cumsum() - live["drops_bytes"].cumsum()
               - live["backlog_bytes"])
    assert np.abs(balance.to_numpy()).max() < 1.0
    assert stats["measured_cell"]["follow_rnti"] == ["1"]


def test_live_replay_with_the_other_ues_as_demand(test_ns, tmp_path):
    """``--log-others demand`` through the live loop. The log: UE 2 holds every subchannel UE
    1 did not, UEs 3 and 4 none; as demand, UEs 3 and 4 had no data and UE 2 gets 3000
    bytes every TTI (more than the whole cell carries at its row), all on the same row. A
    live download then shares the cell with UE 2 as PF shares it between two equal UEs:
    in the TTIs where its queue held more than the cell carries, it gets some subchannels
    but seldom all (a replay without the others would give it all 24, a recorded share
    none where UE 2 had them all). No cross-traffic rows are logged; bytes are conserved."""
    from tests.replay.test_cell_maclog_replay import demand_log, write_like
    path = demand_log(tmp_path, 1000, busy_users=["2"], arrivals=3000.0)
    log = pd.read_parquet(path)
    ue1 = log["user"].to_numpy() == "1"
    log.loc[~ue1, "subchannels"] = 0
    log.loc[log["user"].to_numpy() == "2", "subchannels"] = 24 - log.loc[ue1, "subchannels"].to_numpy()
    write_like(log, path, path)
    test_ns.iperf_server(5201)
    mac_path, stats_path = tmp_path / "mac.parquet", tmp_path / "stats.json"
    r = test_ns.airlink("cell", "--from-log", path, "--log-others", "demand", "--log-channel", "flat", "--preset",
                        "quick", "--follow-rnti", "1", "--users", "1", "--duration", "2s", "--mac-log", mac_path, "--stats", stats_path, "--",
                        "sh", "-c", "iperf3 -c $AIRLINK_BASE -p 5201 -R -t 1 > /dev/null", timeout=120)
    assert r.returncode == 0, r.stderr
    stats = json.loads(stats_path.read_text())
    mac = pd.read_parquet(mac_path)
    assert not mac["cross_traffic"].any() and set(mac["user"]) == {"1"}
    assert mac["served_bytes"].sum() > 100_000
    full = mac[mac["backlog_seen_bytes"] > 30_000]          # more than a whole TTI of the cell
    assert len(full) > 100
    assert 0.25 < full["subchannels"].mean() / 24 < 0.75
    assert (full["subchannels"] == 24).mean() < 0.5
    assert stats["measured_cell"]["others"] == "demand"
    # the others are scheduled by a radio of their own, in Python: the compiled step called
    # from the C loop would serve the live UE alone
    assert stats["scheduler_step"].startswith("Python (the recorded cell's other users")
    d = stats["ues"][0]["downlink"]
    assert d["arrivals_bytes"] == d["departures_bytes"] + d["drops_bytes"] + d["queued_bytes"], d
    assert abs(mac["served_bytes"].sum() - d["departures_bytes"]) < 1.0
