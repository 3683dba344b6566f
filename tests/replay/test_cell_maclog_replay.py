"""Scheduler-driven replay of one UE of a recorded airlink cell (``airlink cell --from-log
MAC_LOG --follow-rnti N``), radio side: no root, deterministic.

The recorded cell is ``airlink simulate`` (quick preset: 4 UEs, 24 subchannels, PF, full
buffers), whose ``mac.parquet`` has the same columns as ``airlink cell --mac-log``. The
references are computed here from the log with pandas: the cross-traffic of a TTI is the sum
of the other UEs' ``subchannels``; UE 1's MCS in a TTI is the rounded mean row of its latest
TTI with subchannels and no HARQ retransmission. Hand-edited copies of the log give the
hand-checkable cases: others holding every subchannel, a followed UE without data, and for
``--log-others demand`` neighbours without data, with a standing queue, or an idle live UE;
for ``--log-others flows`` the same log's neighbour as a full buffer, and the on-period rule
on a hand-worked log; for ``--log-others mixed`` a bulk neighbour as a full buffer beside an
on-off one fed by its recorded arrivals.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from airlink.replay.cell import CellShell
from airlink.core.errors import AirlinkError
from tests.replay.test_cell_fromlog import _cli, run_radio

N_TTI = 400
N_SUB = 24


def write_like(frame: pd.DataFrame, like, path):
    """``frame`` as Parquet with the ``airlink`` header of the MAC log ``like``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    header = (pq.read_schema(like).metadata or {})[b"airlink"]
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({b"airlink": header}), path)
    return path


def recorded_cell(folder, *, seconds: float, seed: int = 3):
    """A 4-UE quick cell's MAC log (``airlink simulate``)."""
    from airlink.sim import simulate
    simulate("quick", seed=seed, duration=f"{seconds}s").write(folder)
    return folder / "mac.parquet"


def hand_log(folder, n_tti: int, *, all_taken, none_taken):
    """The recorded cell with the other UEs (2-4) holding all 24 subchannels (8 each) in the
    TTIs ``all_taken`` (UE 1 none) and none in ``none_taken``."""
    src = recorded_cell(folder, seconds=n_tti / 1000)
    log = pd.read_parquet(src)
    tti = np.repeat(np.arange(n_tti), 4)
    other = log["user"].to_numpy() != "1"
    log.loc[other & np.isin(tti, all_taken), "subchannels"] = 8
    log.loc[~other & np.isin(tti, all_taken), "subchannels"] = 0
    log.loc[other & np.isin(tti, none_taken), "subchannels"] = 0
    return write_like(log, src, folder / "hand.parquet")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rec")
    path = recorded_cell(folder, seconds=N_TTI / 1000)
    shell = CellShell(preset="quick", users=1, duration=f"{N_TTI / 1000}s", from_log=path, follow_rnti="1",
                      seed=9, log_channel="flat")
    radio, mac = run_radio(shell, N_TTI)
    return pd.read_parquet(path), radio, mac


def test_cross_traffic_per_tti_equals_the_other_ues(replayed):
    log, _radio, mac = replayed
    tti = np.repeat(np.arange(N_TTI), 4)
    others = log[log["user"] != "1"]
    want = others.groupby(tti[others.index])["subchannels"].sum().reindex(range(N_TTI), fill_value=0)
    cross = mac[mac["cross_traffic"]]
    got = cross.groupby("slot")["prbs"].sum().reindex(range(N_TTI), fill_value=0)
    assert want.sum() > 1000
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    # one row per other UE and TTI it was scheduled in, named log-N, with its logged bytes
    busy = others[others["subchannels"] > 0]
    assert len(cross) == len(busy)
    assert sorted(cross["user"]) == sorted("log-" + busy["user"])
    assert cross["tbs_bytes"].sum() == pytest.approx(busy["tx_bytes"].sum())


def test_full_queue_gets_every_subchannel_the_others_left(replayed):
    log, _radio, mac = replayed
    tti = np.repeat(np.arange(N_TTI), 4)
    others = log[log["user"] != "1"]
    held = others.groupby(tti[others.index])["subchannels"].sum().reindex(range(N_TTI), fill_value=0)
    live = mac[~mac["cross_traffic"]].set_index("slot")["subchannels"].reindex(range(N_TTI), fill_value=0)
    np.testing.assert_array_equal(live.to_numpy(), N_SUB - held.to_numpy())


def test_followed_ue_gets_its_recorded_mcs(replayed):
    log, _radio, mac = replayed
    ue = log[log["user"] == "1"].reset_index(drop=True)          # row k = TTI k
    new = (ue["subchannels"] > 0) & (ue["harq_retransmissions"] == 0)
    held = np.rint(ue["mcs"].where(new)).ffill().bfill().to_numpy()
    live = mac[~mac["cross_traffic"] & (mac["subchannels"] > 0) & (mac["harq_retransmissions"] == 0)]
    assert len(live) > 100
    np.testing.assert_array_equal(live["mcs"].to_numpy(), held[live["slot"].to_numpy()])


def test_all_taken_means_nothing_for_the_replayed_ue(tmp_path):
    """Hand-checkable: in TTIs 100-149 the other UEs hold all 24 subchannels, in 150-199
    none. A UE with a full queue gets 0 subchannels and 0 bytes in the first, all 24 in the
    second."""
    path = hand_log(tmp_path, 200, all_taken=range(100, 150), none_taken=range(150, 200))
    # flat: no subchannel of the live UE fades below the lowest row
    shell = CellShell(preset="quick", users=1, duration="0.2s", from_log=path, follow_rnti="1",
                      log_channel="flat")
    _radio, mac = run_radio(shell, 200)
    live = mac[~mac["cross_traffic"]].set_index("slot")
    assert (live.loc[100:149, "subchannels"] == 0).all() and (live.loc[100:149, "served_bytes"] == 0).all()
    assert (live.loc[150:199, "subchannels"] == N_SUB).all() and (live.loc[150:199, "served_bytes"] > 0).all()
    assert (live.loc[:99, "served_bytes"] > 0).any()


def test_mac_log_header_is_read(replayed):
    _log, radio, _mac = replayed
    m = radio.measured
    assert m.mcs_rows and m.n_slots == N_TTI and m.follow == ["1"]
    assert m.describe()["cross_traffic_rntis"] == 3


@pytest.mark.parametrize("args, message", [
    (["--preset", "imt-advanced"], "the recorded cell has rate_table 'lte-cqi'"),
    (["--preset", "quick", "--set", "n_subchannels=12"], "the recorded cell has n_subchannels 24"),
    (["--preset", "quick", "--follow-rnti", "7"], "UE 7 has no downlink DCIs"),
    (["--preset", "quick", "--log-direction", "uplink"], "holds the downlink only"),
    (["--preset", "quick", "--tti", "2ms"], "slots last 1 ms"),
])
def test_bad_options_name_the_log(tmp_path, capsys, args, message):
    path = recorded_cell(tmp_path, seconds=0.05)
    assert _cli("--from-log", path, *args, "--", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith("airlink: error: ") and message in err and str(path) in err, err


def test_a_log_without_header_is_refused(tmp_path):
    src = recorded_cell(tmp_path, seconds=0.05)
    bare = tmp_path / "bare.parquet"
    pd.read_parquet(src).to_parquet(bare)
    with pytest.raises(AirlinkError, match="no TTI in the MAC log's airlink header"):
        CellShell(preset="quick", users=1, from_log=bare)



def test_tti_where_the_followed_ue_had_no_data_holds_the_last_share(tmp_path):
    """Hand-checkable: UE 1 has no data in TTIs 100-149 (queue empty, nothing served) and the
    others hold all 24 subchannels there. What they took beside an idle UE says nothing of
    what they would have left it: those TTIs get the cross-traffic of TTI 99 (per user and
    subchannels); with ``hold_idle=False`` the recorded 24."""
    from fractions import Fraction

    from airlink.replay.cell_fromlog import measured_cell
    path = hand_log(tmp_path, 200, all_taken=range(100, 150), none_taken=[])
    log = pd.read_parquet(path)
    tti = np.repeat(np.arange(200), 4)
    idle = (log["user"] == "1").to_numpy() & (tti >= 100) & (tti < 150)
    log.loc[idle, ["backlog_bytes", "served_bytes", "subchannels"]] = 0
    write_like(log, path, path)
    kw = dict(n_users=1, n_prbs=N_SUB, tti=Fraction(1, 1000), follow="1")
    held = measured_cell(path, **kw)
    kept = measured_cell(path, **kw, hold_idle=False)
    at = log[(tti == 99) & (log["user"] != "1").to_numpy() & (log["subchannels"] > 0).to_numpy()]
    want = sorted(zip("log-" + at["user"], at["subchannels"]))
    assert sum(n for _, n in want) < N_SUB
    for k in (100, 125, 149):
        c = held.cross[held.cross["slot"] == k]
        assert sorted(zip(c["user"], c["prbs"])) == want
        assert kept.cross[kept.cross["slot"] == k]["prbs"].sum() == N_SUB
    assert held.held_slots == 50 and kept.held_slots == 0
    # elsewhere the same as recorded
    other = ~held.cross["slot"].between(100, 149)
    pd.testing.assert_frame_equal(held.cross[other].reset_index(drop=True),
                                  kept.cross[~kept.cross["slot"].between(100, 149)].reset_index(drop=True))


def demand_log(folder, n_tti, *, busy_users, row=10, arrivals=0.0):
    """The recorded cell with every UE on MCS row ``row``, its wideband SINR that row's
    threshold, and the UEs ``busy_users`` holding 500 KB at every decision and ``arrivals``
    bytes arriving every TTI, the others no data at all."""
    from airlink.sim.rates import rate_table
    src = recorded_cell(folder, seconds=n_tti / 1000)
    log = pd.read_parquet(src)
    busy = log["user"].isin(busy_users).to_numpy()
    log["mcs"] = float(row)
    log["sinr_db"] = float(rate_table("lte-cqi").threshold_db[row - 1])
    log["harq_retransmissions"] = 0
    log["arrivals_bytes"] = 0.0
    log.loc[busy, "arrivals_bytes"] = float(arrivals)
    log.loc[busy, "backlog_bytes"] = 500_000.0
    log.loc[busy, "served_bytes"] = 0.0
    log.loc[~busy & (log["user"] != "1").to_numpy(), ["backlog_bytes", "served_bytes", "subchannels"]] = 0
    return write_like(log, src, folder / "demand.parquet")


def demand_run(path, n, backlog, others="demand", channel="flat"):
    shell = CellShell(preset="quick", users=1, duration=f"{n / 1000}s", from_log=path, follow_rnti="1",
                      log_others=others, seed=4, log_channel=channel)
    radio = shell._radio()
    inp = radio.inputs(0, n)
    out = radio.new_outputs(n)
    for i in range(n):
        radio.step(inp, i, i + 1, {k: v[i:i + 1] for k, v in out.items()}, backlog=np.array([backlog]))
    return radio, out


def test_demand_others_without_data_leave_everything(tmp_path):
    """Hand-checkable: the other UEs had no data in the recording (whatever subchannels the
    log shows): a full live queue gets all 24 subchannels in every TTI."""
    path = demand_log(tmp_path, 100, busy_users=[])
    radio, out = demand_run(path, 100, 1e9)
    assert (out["nsub"][:, 0] == N_SUB).all() and (out["served"][:, 0] > 0).all()
    assert radio.others_served.sum() == 0


def test_demand_idle_live_ue_leaves_everything_to_the_others(tmp_path):
    """UE 2 holds 500 KB and nothing arrives; the live UE has no data: the live UE gets
    nothing, UE 2 is served at most the 500 KB it had."""
    path = demand_log(tmp_path, 100, busy_users=["2"])
    radio, out = demand_run(path, 100, 0.0)
    assert (out["nsub"][:, 0] == 0).all()
    assert 0 < radio.others_served[0] <= 500_000 and radio.others_served[1:].sum() == 0


def test_demand_pf_shares_equally_between_equal_ues(tmp_path):
    """PF between the live UE (full queue) and UE 2 (500 KB standing, same recorded row,
    the same flat channel): after the first TTIs (PF averages from 0) each gets half of the
    subchannels over time: the others react to the live UE's demand."""
    path = demand_log(tmp_path, 400, busy_users=["2"])
    radio, out = demand_run(path, 400, 1e9)
    share = out["nsub"][100:, 0].sum() / (300 * N_SUB)
    assert 0.4 < share < 0.6, share
    assert radio.measured.demand.users == ["2", "3", "4"]


def test_demand_others_are_open_loop(tmp_path):
    """Hand-checkable: UE 2 recorded 300 bytes arriving every TTI and an empty queue; the
    live UE is idle. The cell has room for far more (24 subchannels on row 10), but UE 2 is
    served only what arrived: its recorded arrivals, not the room the idle UE leaves (a TCP
    neighbour would grow into it; docs/replay.md). Every byte that arrived before the last
    32 TTIs (4 transmissions 8 TTIs apart) is served by the end, none more than arrived."""
    n, per_tti = 200, 300.0
    path = demand_log(tmp_path, n, busy_users=["2"], arrivals=per_tti)
    log = pd.read_parquet(path)
    log.loc[log["user"] == "2", ["backlog_bytes", "served_bytes"]] = 0.0
    write_like(log, path, path)
    radio, out = demand_run(path, n, 0.0)
    served = radio.others_served[0]
    assert (n - 32) * per_tti <= served <= n * per_tti, served
    assert radio.others_served[1:].sum() == 0 and (out["nsub"][:, 0] == 0).all()


def test_flows_others_grow_into_the_room(tmp_path):
    """The log of the open-loop test above (UE 2: 300 bytes arriving every TTI, an empty queue
    before them: data at every decision) with ``--log-others flows``: UE 2 had data in every TTI, so it is a full
    buffer and takes the room the idle live UE leaves - all 24 subchannels of row 10 in
    every TTI (after the first 8, whose blocks can fail and wait for their retransmission),
    far more than the 300 bytes a TTI that arrived."""
    n, per_tti = 200, 300.0
    path = demand_log(tmp_path, n, busy_users=["2"], arrivals=per_tti)
    log = pd.read_parquet(path)
    log.loc[log["user"] == "2", ["backlog_bytes", "served_bytes"]] = 0.0
    write_like(log, path, path)
    radio, out = demand_run(path, n, 0.0, others="flows")
    assert radio.measured.demand.full.tolist() == [True, False, False]
    assert radio.measured.describe()["others"] == "flows"
    # 24 subchannels of row 10 a TTI, 90 % of first transmissions good at the threshold
    room = (n - 8) * N_SUB * radio.bytes_per_mcs[9]
    assert 0.8 * room <= radio.others_served[0] <= n * N_SUB * radio.bytes_per_mcs[9]
    assert radio.others_served[0] > 4 * n * per_tti
    assert radio.others_served[1:].sum() == 0 and (out["nsub"][:, 0] == 0).all()


def test_as_flows_by_hand():
    """:func:`as_flows` on a hand-worked log of 8 slots. Periods (slots with data): 1-2 and
    5-7. Period 1-2 brought its queue at slot 1 (10) and 100 + 50 arriving: 160 at slot 1;
    a replay starting at slot 2 holds slot 2's queue (80) and the period's arrivals from
    slot 2 on (50): 130. Period 5-7: 0 + 30 + 0 + 20 = 50 at slot 5; from slot 6, 25 + 20;
    from slot 7, 5 + 20. Slots without data hold nothing."""
    from airlink.replay.cell_fromlog import as_flows
    had = np.array([0, 1, 1, 0, 0, 1, 1, 1], bool)
    arrivals = np.array([0, 100, 50, 0, 0, 30, 0, 20], float)
    backlog = np.array([0, 10, 80, 0, 0, 0, 25, 5], float)
    a, b, full = as_flows(arrivals, backlog, had)
    assert a.tolist() == [0, 160, 0, 0, 0, 50, 0, 0]
    assert b.tolist() == [0, 0, 130, 0, 0, 0, 45, 25]
    assert full is False
    # the log repeats: data at slots 3, 4 and 0 is one period, which starts at slot 3
    a, b, full = as_flows([7, 0, 0, 40, 2], [3, 0, 0, 1, 30], [1, 0, 0, 1, 1])
    assert a.tolist() == [0, 0, 0, 1 + 40 + 2 + 7, 0]
    assert b.tolist() == [3 + 7, 0, 0, 0, 30 + 2 + 7]
    assert full is False
    # data in every slot, or in 19 of 20 (FULL_SHARE): a full buffer, its recorded demand
    # kept; 18 of 20 is two periods, slots 6-9 and 11-4 (cyclic); no data: nothing
    a, b, full = as_flows([1, 2], [3, 4], [1, 1])
    assert (a.tolist(), b.tolist(), full) == ([1, 2], [3, 4], True)
    assert as_flows(np.ones(20), np.zeros(20), np.arange(20) != 5)[2] is True
    a, b, full = as_flows(np.ones(20), np.zeros(20), ~np.isin(np.arange(20), [5, 10]))
    assert full is False and a.tolist() == [0] * 6 + [4] + [0] * 4 + [9 + 5] + [0] * 8   # 6-9; 11-19, 0-4
    a, b, full = as_flows([0, 0], [0, 0], [0, 0])
    assert (a.tolist(), b.tolist(), full) == ([0, 0], [0, 0], False)


def test_mixed_others_bulk_full_on_off_open_loop(tmp_path):
    """``--log-others mixed`` on a hand-edited log of 200 TTIs, every UE on row 10 and the
    live UE idle. UE 2 had 1,000 bytes queued at every decision and none arriving (data in
    200 of 200 TTIs >= 95 %: a full buffer); UE 3 had nothing queued, 300 bytes arriving in each of TTIs 0-99 and
    nothing after (data in 100 of 200: open loop, its recorded arrivals); UE 4 no data.
    UE 3 is served what arrived, 100 x 300 = 30,000 bytes (the last 100 TTIs before the end:
    4 transmissions 8 TTIs apart fit), not the flow of 30,000 bytes at TTI 0 that
    ``flows`` makes of the same period; UE 2 takes the rest of the 24 subchannels, as in
    ``flows``, where ``demand`` serves it only the 1,000 bytes it held at the start."""
    from fractions import Fraction

    from airlink.replay.cell_fromlog import measured_cell
    n, per_tti = 200, 300.0
    path = demand_log(tmp_path, n, busy_users=["2", "3"])
    log = pd.read_parquet(path)
    tti = np.repeat(np.arange(n), 4)
    ue3 = (log["user"] == "3").to_numpy()
    log.loc[ue3, ["backlog_bytes", "served_bytes"]] = 0.0
    log.loc[ue3 & (tti < 100), "arrivals_bytes"] = per_tti
    log.loc[ue3 & (tti >= 100), ["arrivals_bytes", "subchannels"]] = 0
    log.loc[(log["user"] == "2").to_numpy(), "backlog_bytes"] = 1000.0
    write_like(log, path, path)
    recorded = np.where(np.arange(n) < 100, per_tti, 0.0)
    kw = dict(n_users=1, n_prbs=N_SUB, tti=Fraction(1, 1000), follow="1")
    mixed, flows, demand = (measured_cell(path, **kw, others=o).demand for o in ("mixed", "flows", "demand"))
    assert mixed.mode == "mixed" and mixed.full.tolist() == [True, False, False]
    assert flows.full.tolist() == [True, False, False] and demand.full.tolist() == [False] * 3
    np.testing.assert_array_equal(mixed.arrivals[1], recorded)
    np.testing.assert_array_equal(mixed.backlog[1], np.zeros(n))
    assert flows.arrivals[1].tolist() == [100 * per_tti] + [0.0] * (n - 1)
    np.testing.assert_array_equal(mixed.arrivals, demand.arrivals)
    np.testing.assert_array_equal(mixed.backlog, demand.backlog)

    radio, out = demand_run(path, n, 0.0, others="mixed")
    assert radio.measured.describe()["others"] == "mixed"
    assert radio.others_served[1] == pytest.approx(100 * per_tti)
    room = (n - 8) * N_SUB * radio.bytes_per_mcs[9]
    assert 0.8 * room - 100 * per_tti <= radio.others_served[0] <= n * N_SUB * radio.bytes_per_mcs[9]
    assert radio.others_served[2] == 0 and (out["nsub"][:, 0] == 0).all()
    radio, _out = demand_run(path, n, 0.0, others="demand")
    assert radio.others_served[0] <= 1000 + 1e-6 and radio.others_served[1] == pytest.approx(100 * per_tti)


def test_selective_channel_is_the_recorded_wideband_sinr_over_the_cells_fading(tmp_path):
    """``--log-channel selective`` on a MAC log: UE 1's real SINR on subchannel ``c`` in TTI
    ``k`` is its recorded ``sinr_db`` of TTI ``k`` (linear) times ``|H(k, c)|^2 / mean_c
    |H(k, c)|^2`` of the quick preset's fading (Pedestrian A, 3 km/h, the replay's seed),
    computed here from the channel model alone; the reported one is the same two TTIs
    earlier (``csi_delay_tti`` 2); the replay's MAC log keeps the recorded wideband SINR;
    the cross-traffic's subchannels stay masked."""
    from airlink.replay.cell_fromlog import MASKED
    from airlink.sim.channel import ChannelModel
    n = 300
    path = recorded_cell(tmp_path, seconds=n / 1000)
    log = pd.read_parquet(path)
    rec_db = log[log["user"] == "1"]["sinr_db"].to_numpy()             # row k = TTI k
    shell = CellShell(preset="quick", users=1, duration=f"{n / 1000}s", from_log=path, follow_rnti="1", seed=9,
                      log_channel="selective")
    radio = shell._radio()
    assert radio.measured.channel == "selective" and radio.measured.describe()["channel"] == "selective"
    inp = radio.inputs(0, n)
    model = ChannelModel(n_users=1, n_subchannels=N_SUB, tti_s=1e-3, snr_db=0.0, profile="ped-a", speed_kmh=3,
                         carrier_hz=2.0e9, subchannel_hz=180e3, seed=9)
    gain = model.fading_chunk(-2, n + 2)[:, 0, :].astype(np.float64)      # TTIs -2 .. n-1
    shape = gain / gain.mean(axis=1, keepdims=True)
    lin = 10 ** (rec_db / 10)
    want_real = lin[:, None] * shape[2:]
    # two TTIs earlier: the log's slots repeat, the fading before TTI 0 is TTI 0's (the cell's own line)
    want_rep = lin[np.arange(-2, n - 2) % n][:, None] * shape[2:][np.maximum(np.arange(n) - 2, 0)]
    free = inp.real[:, 0, :] != MASKED
    assert free.sum() > 1000 and (~free).sum() > 1000
    np.testing.assert_allclose(inp.real[:, 0, :][free], want_real[free], rtol=1e-4)
    np.testing.assert_allclose(inp.rep[:, 0, :][free], want_rep[free], rtol=1e-4)
    assert (inp.rep[:, 0, :][~free] == MASKED).all()
    assert np.ptp(np.log10(want_real), axis=1).mean() > 0.1               # not flat: > 1 dB across the band
    np.testing.assert_allclose(inp.sinr_db[:, 0], rec_db, atol=1e-3)
    np.testing.assert_allclose(inp.sinr_rep_db[2:, 0], rec_db[:-2], atol=1e-3)


def test_selective_channel_lets_pf_split_ttis(tmp_path):
    """The live UE (full queue) beside UE 2 (500 KB standing), the same recorded row 10 and
    wideband SINR at its threshold. Flat: every subchannel is the same to PF, so the UE
    with the higher metric takes the band but for what the other's HARQ retransmissions
    hold - the live UE gets at most a quarter or at least two thirds of it, never about
    half - and each first transmission is at the row's threshold, where the table's BLER
    target (10 %) fails. Selective: PF takes each UE's better subchannels, so the live UE
    gets between a third and two thirds of the band in most TTIs, the share is still about
    half, and link adaptation picks rows below the reported SINR: fewer errors."""
    from airlink.sim.rates import rate_table
    path = demand_log(tmp_path, 600, busy_users=["2"])
    got = {}
    for channel in ("flat", "selective"):
        radio, out = demand_run(path, 600, 1e9, channel=channel)
        nsub = out["nsub"][100:, 0]
        got[channel] = (np.mean((nsub >= 8) & (nsub <= 16)), nsub.sum() / (500 * N_SUB),
                        out["retx"][:, 0].sum() / out["blocks"][:, 0].sum())
    (flat_half, flat_share, flat_bler), (sel_half, sel_share, sel_bler) = got["flat"], got["selective"]
    assert flat_half < 0.05 and sel_half > 0.5, got
    assert 0.4 < flat_share < 0.6 and 0.4 < sel_share < 0.6, got
    assert 0.06 < flat_bler < 0.14 and sel_bler < 0.06, got
    # the neighbours' channel: their recorded wideband SINR (row 10's threshold) over their own
    # fading, the reported one two slots earlier
    real, rep = radio._others_channel(7, 7)
    thr = 10 ** (rate_table("lte-cqi").threshold_db[9] / 10)
    np.testing.assert_allclose(real.mean(axis=1), thr, rtol=1e-4)
    np.testing.assert_allclose(rep, thr * radio._others_shape[5], rtol=1e-5)
    assert np.ptp(10 * np.log10(real), axis=1).min() > 1.0


def test_the_default_channel_is_selective_where_the_log_has_the_sinr(tmp_path, capsys):
    """Unasked, a MAC log with each UE's wideband SINR replays selective (the closer model:
    docs/replay.md), the same log without ``sinr_db`` flat; ``--log-channel`` without
    ``--from-log`` is refused."""
    path = recorded_cell(tmp_path, seconds=0.05)
    for log, want in ((path, "selective"),
                      (write_like(pd.read_parquet(path).drop(columns="sinr_db"), path, tmp_path / "no-sinr.parquet"),
                       "flat")):
        shell = CellShell(preset="quick", users=1, duration="0.05s", from_log=log, follow_rnti="1")
        assert shell._radio().measured.channel == want
    assert _cli("--log-channel", "flat", "--", "true") == 2
    assert "--log-channel needs --from-log" in capsys.readouterr().err


def test_nrscope_log_replays_flat(shared_data):
    """An NR-Scope log has no wideband SINR: the replay keeps the recorded MCS row on every
    subchannel, whatever channel was asked for (selective by default)."""
    from airlink.replay.cell_fromlog import measured_cell
    from tests.replay.test_cell_fromlog import AFTERNOON, FOLLOW
    from fractions import Fraction
    m = measured_cell(shared_data / AFTERNOON, n_users=1, n_prbs=52, tti=Fraction(1, 1000), follow=FOLLOW)
    assert m.channel == "flat" and m.sinr_series == {}
    with pytest.raises(AirlinkError, match="channel: 'selective' or 'flat'"):
        measured_cell(shared_data / AFTERNOON, n_users=1, n_prbs=52, tti=Fraction(1, 1000), channel="fading")


def test_demand_needs_an_airlink_mac_log(shared_data):
    from tests.replay.test_cell_fromlog import AFTERNOON
    with pytest.raises(AirlinkError, match="need an airlink MAC log"):
        CellShell(preset="nr-tmobile-10mhz", users=1, from_log=shared_data / AFTERNOON, log_others="demand")


def test_log_others_needs_from_log(capsys):
    assert _cli("--log-others", "demand", "--", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith("airlink: error: ") and "--log-others needs --from-log" in err


def test_a_folder_is_not_a_cell_log(tmp_path, capsys):
    assert _cli("--from-log", tmp_path, "--preset", "quick", "--", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith("airlink: error: ") and f"{tmp_path}: not a file" in err
