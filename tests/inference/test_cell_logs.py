"""All-user scheduling logs: ``inference.cell_logs.analyze_cell`` and ``airlink infer cell``.

Real NR-Scope cells: expected per-user numbers come from a plain pandas groupby on the raw
CSV; per-window Jain's index from its formula written out here. Verdicts are also checked on
hand-made contended cells whose rule is known (turns; channel-proportional shares)."""
import json

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors.nrscope import select_direction
from airlink.inference.cell_logs import analyze_cell
from tests.traces._nrscope_expect import downlink_and_raw

AFTERNOON = "nr-scope/t_mobile1_ueactivity_afternoon_1.csv"   # no duplicate DCIs in this file


@pytest.fixture(scope="module")
def afternoon(shared_data):
    dl, raw = downlink_and_raw(shared_data / AFTERNOON)
    return dl, raw, analyze_cell(dl)


def test_per_user_numbers_match_a_plain_groupby(afternoon):
    _, raw, res = afternoon
    g = raw.groupby(raw["rnti"].astype(str))
    users = res.users.set_index("user")
    assert set(users.index) == set(g.groups)
    prbs = g["frequency_length"].sum()
    assert (users["prbs"] == prbs.loc[users.index]).all()
    assert np.allclose(users["resource_fraction"], prbs.loc[users.index] / raw["frequency_length"].sum())
    assert users["resource_fraction"].sum() == pytest.approx(1.0)
    assert np.allclose(users["new_bytes"], g["transport_block_size"].sum().loc[users.index] / 8)
    retx = g["transport_block_size"].apply(lambda s: (s == 0).mean())
    assert np.allclose(users["retransmission_ratio"], retx.loc[users.index])
    assert np.allclose(users["mcs_mean"], g["mcs_index"].mean().loc[users.index])
    assert res.summary["cell_prbs"] == int((raw["frequency_start"] + raw["frequency_length"]).max()) == 52


def test_windows_jain_utilisation_and_gaps_by_hand(afternoon):
    dl, raw, res = afternoon
    slot = dl["slot"] - dl["slot"].min()
    per = dl.assign(w=slot // 1000).groupby(["w", "user"])["prbs"].sum()
    expect = {}
    for w, y in per.groupby(level=0):
        y = y.to_numpy(float)
        if y.size >= 2:
            expect[w] = y.sum() ** 2 / (y.size * (y ** 2).sum())
    got = res.windows.set_index("window")["jain_index"].dropna()
    assert set(got.index) == set(expect)
    assert np.allclose(got.loc[list(expect)], list(expect.values()))
    n_slots = int(slot.max()) + 1
    assert res.summary["prb_utilization"] == pytest.approx(raw["frequency_length"].sum() / (52 * n_slots))
    top = res.users.iloc[0]
    s = np.unique(dl.loc[dl["user"] == top["user"], "slot"].to_numpy())
    d = np.diff(s) / 1000
    assert top["gap_mean_s"] == pytest.approx(d.mean()) and top["gap_max_s"] == pytest.approx(d.max())
    assert top["gap_cov"] == pytest.approx(d.std() / d.mean())


def test_real_cells_are_too_idle_for_a_verdict(shared_data):
    for name in ("t_mobile1_ueactivity_afternoon_1.csv", "t_mobile2_ueactivity_morning_1.csv",
                 "t_mobile2_ueactivity_night_1.csv"):
        frame = C.read(shared_data / "nr-scope" / name)
        dl = select_direction(frame, "downlink")
        v = analyze_cell(dl).verdict
        assert v["label"] == "cannot tell" and not v["confident"], name
        assert any("rarely competed" in r for r in v["reasons"])
        assert v["evidence"]["prb_utilization"] < 0.05


def _cell(choose, n_slots=20000, users=4, prbs=50, seed=1):
    """One user per 1 ms slot with the whole band; user i's MCS is 5 + 5 i (+-1)."""
    rng = np.random.default_rng(seed)
    base = np.arange(users) * 5 + 5.0
    k = np.arange(n_slots)
    u = choose(k, rng, base)
    f = pd.DataFrame({"slot": k, "user": u.astype(str), "prbs": prbs,
                      "mcs": (base[u] + rng.integers(-1, 2, n_slots)).astype(int), "tbs_bytes": 1000.0})
    f["time"] = pd.to_datetime(f["slot"] * 1_000_000, unit="ns", utc=True)
    f["prb_start"] = 0
    f.attrs["tti_s"] = "1/1000"
    return f


def test_turns_are_recognised():
    res = analyze_cell(_cell(lambda k, rng, base: k % base.size))
    v = res.verdict
    assert v["label"] == "equal shares (turns)" and v["confident"]
    assert res.summary["jain_index_median"] == pytest.approx(1.0)
    assert res.summary["prb_utilization"] == pytest.approx(1.0)


def test_channel_following_is_recognised():
    def by_channel(k, rng, base):
        p = base ** 2 / (base ** 2).sum()
        return rng.choice(base.size, size=k.size, p=p)
    v = analyze_cell(_cell(by_channel)).verdict
    assert v["label"] == "channel-aware (share follows MCS)" and v["confident"]
    assert v["evidence"]["share_vs_mcs_spearman_contended"] > 0.8


def test_cli_text_json_and_errors(shared_data, run_airlink, tmp_path):
    path = shared_data / AFTERNOON
    status, out, err = run_airlink("infer", "cell", path)
    assert status == 0, err
    assert "cannot tell" in out and "utilisation" in out and "25864" in out
    status, out, _ = run_airlink("infer", "cell", path, "--json", "--window", "500ms")
    d = json.loads(out)
    assert d["params"]["window_s"] == 0.5 and d["verdict"]["label"] == "cannot tell"
    assert len(d["users"]) == 137
    status, _, err = run_airlink("infer", "cell", tmp_path / "absent.csv")
    assert status == 2 and "absent.csv" in err and err.count("\n") == 1
    status, _, err = run_airlink("infer", "cell", path, "--cell-prbs", "0")
    assert status == 2 and err == "airlink: error: --cell-prbs: must be between 1 and 1000 (got 0)\n"
    icell = next((shared_data / "icellspeed" / "D1_static").rglob("*.csv"))
    status, _, err = run_airlink("infer", "cell", icell)
    assert status == 2 and err.startswith("airlink: error: ") and icell.name in err and "one phone's carriers" in err


def test_collected_frame_gives_the_same_answers(shared_data, run_airlink, tmp_path):
    """`airlink collect` keeps the slot timing, so the Parquet frame answers like the CSV."""
    path = shared_data / "nr-scope" / "t_mobile2_ueactivity_morning_1.csv"
    assert run_airlink("collect", path, "-o", tmp_path)[0] == 0
    pq = next(tmp_path.glob("*.parquet"))
    a = json.loads(run_airlink("infer", "cell", path, "--json")[1])
    b = json.loads(run_airlink("infer", "cell", pq, "--json")[1])
    assert a["summary"] | {"source": None} == b["summary"] | {"source": None}
    assert a["users"] == b["users"]
    for src, out in ((path, tmp_path / "a.parquet"), (pq, tmp_path / "b.parquet")):
        assert run_airlink("trace", "from-log", src, "--user", "24520", "-o", out)[0] == 0
    from airlink.traces import read_trace
    assert read_trace(tmp_path / "a.parquet") == read_trace(tmp_path / "b.parquet")


def test_simulated_nr_cell_is_read_like_a_decoded_one(run_airlink, tmp_path):
    """`airlink simulate`'s mac.parquet (PRBs in `subchannels`): users, slots, PRBs,
    utilisation and per-user numbers equal what the simulator's own frame says."""
    import airlink.sim as S
    # user 5 at -40 dB reaches no MCS on any PRB: four users are ever served
    res = S.simulate("nr-fr1", seed=3, duration="300ms", n_users=5, snr_db=[24, 18, 12, 6, -40],
                     traffic=["full", "full", "full", "cbr", "full"], traffic_rate_bps=[0, 0, 0, 20e6, 0])
    res.write(tmp_path)
    status, out, err = run_airlink("infer", "cell", tmp_path / "mac.parquet", "--json")
    assert status == 0, err
    d = json.loads(out)
    s, users = d["summary"], pd.DataFrame(d["users"]).set_index("user")
    mac = res.mac
    alloc = mac[mac["subchannels"] > 0]
    assert s["users"] == 4 and set(users.index) == {"1", "2", "3", "4"}
    assert s["cell_prbs"] == 273 and s["tti_s"] == 0.0005 and s["slots"] == 600
    assert s["prb_utilization"] == pytest.approx(mac["subchannels"].sum() / (273 * 600))
    assert s["prb_utilization"] > 0.99       # full-buffer users leave no PRB unused
    g = alloc.groupby("user")
    assert (users["allocations"] == g.size().loc[users.index]).all()
    assert (users["prbs"] == g["subchannels"].sum().loc[users.index]).all()
    retx = alloc["harq_retransmissions"] == alloc["subchannels"]
    assert np.allclose(users["retransmission_ratio"], retx.groupby(alloc["user"]).mean().loc[users.index])
    assert np.allclose(users["new_bytes"], alloc["tx_bytes"].where(~retx, 0).groupby(alloc["user"]).sum()
                       .loc[users.index])
    assert users.loc["4", "prbs"] < users.loc["3", "prbs"]      # 20 Mbit/s asks for less than a fair share
    # a cell in which nobody was served: one error line naming the file
    from airlink.sim.result import SimResult
    SimResult(res.capacity, mac.assign(subchannels=0), res.summary, res.config).write(tmp_path / "idle")
    status, _, err = run_airlink("infer", "cell", tmp_path / "idle" / "mac.parquet")
    assert status == 2 and err.count("\n") == 1 and "mac.parquet: no allocations" in err
    # a MAC log written before the slot and cell were in its metadata: both from its parameters
    import pyarrow.parquet as pq
    table = pq.read_table(tmp_path / "mac.parquet")
    header = json.loads(table.schema.metadata[b"airlink"])
    del header["meta"]["tti_s"], header["meta"]["cell_prbs"]
    pq.write_table(table.replace_schema_metadata({b"airlink": json.dumps(header).encode()}), tmp_path / "old.parquet")
    old = C.read(tmp_path / "old.parquet")
    assert old.attrs["tti_s"] == "1/2000" and old.attrs["cell_prbs"] == 273


@pytest.mark.parametrize("scheduler, label", [("rr", "equal shares (turns)"),
                                              ("maxcir", "channel-aware (share follows MCS)")])
def test_simulated_schedulers_get_their_verdict(tmp_path, scheduler, label):
    """A simulated NR cell whose scheduler is known, read from its mac.parquet: round robin
    per PRB shares equally, MaxCIR follows the channel (12 contended windows of 25 ms)."""
    import airlink.sim as S
    S.simulate("nr-fr1", seed=3, duration="300ms", n_users=5, snr_db=[24, 18, 12, 6, -40],
               scheduler=scheduler).write(tmp_path)
    v = analyze_cell(C.read(tmp_path / "mac.parquet"), window="25ms").verdict
    assert v["label"] == label and v["confident"] and v["evidence"]["contended_windows"] == 12


def test_one_active_user_has_no_window_medians_and_no_warning(afternoon):
    # a cell in which only the busiest RNTI was served (a live replay whose UEs idled): no
    # window has two users, so the medians are NaN - without numpy's empty-slice warning
    import warnings
    dl, raw, _ = afternoon
    busiest = raw.groupby(raw["rnti"].astype(str))["frequency_length"].sum().idxmax()
    one = dl[dl["user"] == busiest]
    one.attrs.update(dl.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = analyze_cell(one)
    assert res.summary["users"] == 1 and res.summary["windows_with_2_users"] == 0
    assert np.isnan(res.summary["jain_index_median"]) and np.isnan(res.summary["fairness_gap_median"])
    assert res.summary["allocations"] == int((raw["rnti"].astype(str) == busiest).sum())


def test_a_cell_smaller_than_the_logs_allocations_is_refused(shared_data, run_airlink):
    # --cell-prbs 52 on the night log (a 15 MHz cell: grants reach PRB 79) gave a utilisation
    # and full-slot share of PRBs that do not exist; now one error line names the grant
    from tests.errorline import one_error_line
    from tests.traces._nrscope_expect import raw_with_slots
    log = shared_data / "nr-scope" / "t_mobile2_ueactivity_night_1.csv"
    r = raw_with_slots(log)
    dl = r[(r["dci_format"] == "1_1") & (r["frequency_length"] > 0)].sort_values("abs_slot", kind="stable")
    end = dl["frequency_start"].astype(int) + dl["frequency_length"]
    widest = dl[end == end.max()].iloc[0]
    assert end.max() == 79
    for action in ("cell", "pf"):
        status, out, err = run_airlink("infer", action, log, "--cell-prbs", "52")
        assert status == 2 and out == ""
        one_error_line(err, str(log), f"user {int(widest['rnti'])} holds PRBs {int(widest['frequency_start'])}-78",
                       "beyond a cell of 52 PRBs (the log's allocations reach 79 PRBs)")
    status, given, err = run_airlink("infer", "cell", log, "--cell-prbs", "79", "--json")
    assert status == 0, err
    status, default, err = run_airlink("infer", "cell", log, "--json")
    assert given == default


def test_one_phones_carrier_log_is_not_a_cell_log(shared_data, run_airlink):
    # iCellSpeed: a row per carrier and second of one phone - no other user and no slot; it
    # asked for a slot length that infer cell has no option for
    from tests.errorline import one_error_line
    log = shared_data / "icellspeed" / "D1_static" / "Austin" / "ATT" / "loc_32" / "default" / \
        "data_310410_loc-star-001d.csv"
    raw = pd.read_csv(log, na_values=["None"])
    assert raw["seconds_since_epoch"].is_unique and raw["scell_1_cid"].notna().any()   # one phone, 2+ carriers
    for action in ("cell", "pf"):
        status, out, err = run_airlink("infer", action, log)
        assert status == 2
        one_error_line(err, str(log), "one phone's carriers", "not a log of every user's allocations per slot")
