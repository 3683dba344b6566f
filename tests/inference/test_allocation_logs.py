"""Allocation logs (NR-Scope DCIs, iCellSpeed carriers) are read one way by every analysis:
downlink grants, the log's slot as the grid, the transport block size as the rate, and one
phone's carriers as one user. Expected values are computed here from the raw CSV rows."""
import json

import numpy as np
import pandas as pd
import pytest

from airlink import inference as inf
from airlink.cli import main
from airlink.core.errors import AirlinkError
from tests.errorline import one_error_line
from tests.traces._nrscope_expect import raw_with_slots


def jain(y):
    y = np.asarray(y, float)
    return y.sum() ** 2 / (y.size * (y * y).sum())


@pytest.fixture(scope="module")
def morning(shared_data, tmp_path_factory):
    log = shared_data / "nr-scope" / "t_mobile2_ueactivity_morning_1.csv"
    out = tmp_path_factory.mktemp("nrs")
    assert main(["collect", str(log), "-o", str(out)]) == 0
    (mac,) = out.glob("*.mac.parquet")
    return log, mac


def downlink_tbs_per_served_slot(log) -> pd.Series:
    """Per RNTI: mean transport block (bits) over the slots in which it had a downlink grant,
    straight from NR-Scope's rows (format 1_x, PRBs > 0; one (SFN, slot) is one slot within a
    10.24 s SFN wrap; a DCI logged twice counted once)."""
    r = pd.read_csv(log)
    dl = r[r["dci_format"].astype(str).str.startswith("1_") & (r["frequency_length"] > 0)]
    dl = dl.assign(wrap=(dl["timestamp"] - dl["timestamp"].min()) // 10.24)
    dl = dl.drop_duplicates(["system_frame_index", "slot_index", "rnti", "dci_format", "harq_id", "wrap"])
    per_slot = dl.groupby(["rnti", "wrap", "system_frame_index", "slot_index"])["transport_block_size"].sum()
    return per_slot.groupby("rnti").mean()


def test_fairness_reads_downlink_tbs_on_the_slot(run_airlink, morning):
    log, mac = morning
    status, out, err = run_airlink("infer", "fairness", mac, "--json")
    assert status == 0, err
    o = json.loads(out)["overall"]
    expected = downlink_tbs_per_served_slot(log)
    assert o["rate"] == "tbs_bytes" and o["users"] == len(expected)
    assert o["allocation"]["direction"] == "downlink" and o["allocation"]["slot_s"] == pytest.approx(1e-3)
    assert o["jain_index"] == pytest.approx(jain(expected), rel=1e-9)
    assert o["cannot_tell"] is None
    # a user's share is its part of all the bytes granted (a slot without a grant gave it
    # nothing), not of the per-grant means: RNTI 24520 had 46.9 % of the bytes, not 11.7 %
    r = pd.read_csv(log)
    dl = r[r["dci_format"].astype(str).str.startswith("1_") & (r["frequency_length"] > 0)]
    dl = dl.assign(wrap=(dl["timestamp"] - dl["timestamp"].min()) // 10.24)
    dl = dl.drop_duplicates(["system_frame_index", "slot_index", "rnti", "dci_format", "harq_id", "wrap"])
    bytes_share = dl.groupby("rnti")["transport_block_size"].sum() / dl["transport_block_size"].sum()
    users = {int(u["user"]): u for u in json.loads(out)["users"]}
    assert set(users) == set(bytes_share.index)
    for rnti, share in bytes_share.items():
        assert users[rnti]["share"] == pytest.approx(share, rel=1e-12)
    assert bytes_share.idxmax() == 24520 and bytes_share.max() == pytest.approx(0.4688, abs=1e-4)
    # the cell granted PRBs in few of its slots: the shares say demand more than the rule
    raw = raw_with_slots(log)
    dl_slots = raw[raw["dci_format"].astype(str).str.startswith("1_") & (raw["frequency_length"] > 0)]["abs_slot"]
    busy = dl_slots.nunique() / (dl_slots.max() - dl_slots.min() + 1)
    assert busy < 0.5
    assert o["caution"].startswith(f"the cell granted anything in {busy * 100:.2g} % of its slots")
    # uplink grants are analysed only when asked, apart from the downlink ones
    status, out, _ = run_airlink("infer", "fairness", mac, "--json", "--direction", "ul")
    assert status == 0
    r = pd.read_csv(log)
    ul_users = r[r["dci_format"].astype(str).str.startswith("0_") & (r["frequency_length"] > 0)]["rnti"].nunique()
    assert json.loads(out)["overall"]["users"] == ul_users


def test_jitter_and_cell_share_the_reading(morning):
    log, mac = morning
    frame = inf.read_frames([mac])
    assert frame.attrs["resolution_s"] == pytest.approx(1e-3)
    rep = inf.jitter_report(frame)
    assert len(rep["users"]) == len(downlink_tbs_per_served_slot(log))
    both = inf.read_frames([mac], direction="both")
    assert {u.rsplit("/", 1)[1] for u in both["user"].unique()} == {"downlink", "uplink"}


def test_icellspeed_carriers_are_one_user(shared_data, tmp_path, run_airlink):
    static = sorted((shared_data / "icellspeed" / "D1_static").rglob("*.csv"))
    if not static:
        pytest.skip("no iCellSpeed static file in the shared data")
    raw = pd.read_csv(static[0], na_values=["None", ""])
    carriers = [c for c in ("pcell", "scell_1", "scell_2", "scell_3")
                if f"{c}_cid" in raw.columns and raw[f"{c}_cid"].notna().any()]
    assert len(carriers) >= 2, "the first static file should aggregate carriers"
    assert main(["collect", str(static[0]), "-o", str(tmp_path)]) == 0
    (mac,) = tmp_path.glob("*.mac.parquet")
    status, out, err = run_airlink("infer", "fairness", mac, "--by", "carrier", "--json")
    assert status == 0, err
    o = json.loads(out)["overall"]
    assert o["rate"] == "tbs_bps"                          # the carrier's TBS, not the device throughput
    assert o["users"] == 1 and o["jain_index"] is None
    assert "one user" in o["cannot_tell"] and "carrier aggregation" in o["note"]
    status, out, err = run_airlink("infer", "fairness", mac, "--by", "carrier")
    assert "fairness: cannot tell: one user" in out and "Jain" not in out


def test_scheduler_reads_the_same_downlink_slots(run_airlink, morning):
    log, mac = morning
    status, out, err = run_airlink("infer", "scheduler", mac, "--json")
    assert status == 0, err
    res = json.loads(out)
    expected = downlink_tbs_per_served_slot(log)
    assert sorted(res["users_used"]) == sorted(str(u) for u in expected.index)     # downlink RNTIs only
    assert res["sample_period_s"] == pytest.approx(1e-3)                            # the slot, not the row spacing
    assert res["allocation"]["direction"] == "downlink" and res["allocation"]["slot_s"] == pytest.approx(1e-3)


def downlink_slots_and_users(log) -> tuple[int, int, int]:
    """(slots from the first to the last downlink grant, inclusive; RNTIs with one; distinct
    (slot, RNTI) grants), from the raw rows (:func:`tests.traces._nrscope_expect.raw_with_slots`)."""
    r = raw_with_slots(log)
    dl = r[r["dci_format"].astype(str).str.startswith("1_") & (r["frequency_length"] > 0)]
    return (int(dl["abs_slot"].max() - dl["abs_slot"].min() + 1), int(dl["rnti"].nunique()),
            len(dl.drop_duplicates(["abs_slot", "rnti"])))


def test_a_dense_grid_too_big_for_memory_is_refused_with_its_size(shared_data, tmp_path, run_airlink):
    # 137 RNTIs x 301 715 slots x 16 columns would be some 25 GB while pandas builds it: the
    # guard refuses it with the sizes before anything is allocated.
    log = shared_data / "nr-scope" / "t_mobile1_ueactivity_afternoon_1.csv"
    assert main(["collect", str(log), "-o", str(tmp_path)]) == 0
    (mac,) = tmp_path.glob("*.mac.parquet")
    slots, users, grants = downlink_slots_and_users(log)
    assert (slots, users) == (301715, 137)
    with pytest.raises(AirlinkError) as e:
        inf.read_frames([mac])
    assert f"a dense grid of {slots} steps of 0.001 s x {users} series x 16 columns" in str(e.value)
    assert "at most 1e+08" in str(e.value)
    # infer scheduler grids only the columns it may read (here the PRBs): it answers, and
    # on a log with no channel and 137 users the answer is "cannot tell", with both reasons
    status, out, err = run_airlink("infer", "scheduler", mac, "--json")
    assert status == 0, err
    res = json.loads(out)
    assert res["scheduler"] == "unknown" and res["samples"] == slots and res["users"] == users
    assert res["columns"]["alloc"] == "prbs" and res["columns"]["channel"] is None
    assert any(f"{users} users" in r for r in res["reasons"]) and any("no channel" in r for r in res["reasons"])
    # the sparse grid of fairness and jitter stays within reach; its size is said per series
    status, out, err = run_airlink("infer", "jitter", mac)
    assert status == 0, err
    assert out.startswith(f"grid 0.001 s: {slots} steps x {users} series, {slots * users - grants} of the "
                          f"{slots * users} without a row"), out[:200]


def test_jitter_cannot_tell_from_one_second_samples(shared_data, tmp_path, run_airlink):
    # An iCellSpeed second holds the PRBs of 1000 slots: when a carrier's PRBs in a second
    # exceed what one slot can give (sum_nRB > max_nRB), it was served in two slots or more,
    # so its gaps were shorter than the second the old table reported as the shortest gap.
    log = shared_data / "icellspeed" / "D1_static" / "Austin" / "ATT" / "loc_32" / "default" / \
        "data_310410_loc-star-001d.csv"
    raw = pd.read_csv(log, na_values=["None"])
    assert float(np.median(np.diff(raw["seconds_since_epoch"]))) == 1.0
    several_slots = raw["pcell_sum_nRB"] > raw["pcell_max_nRB"]
    assert several_slots.mean() > 0.9
    assert main(["collect", str(log), "-o", str(tmp_path)]) == 0
    (mac,) = tmp_path.glob("*.mac.parquet")
    status, out, err = run_airlink("infer", "jitter", mac, "--by", "carrier")
    assert status == 0, err
    assert "jitter: cannot tell: one sample per 1 s" in out and "mean_s" not in out
    status, out, err = run_airlink("infer", "jitter", mac, "--by", "carrier", "--json")
    rows = json.loads(out)
    assert {r["user"] for r in rows} == {"ue/pcell", "ue/scell_1", "ue/scell_2"}
    assert all(r["mean_s"] is None and "one sample per 1 s" in r["cannot_tell"] for r in rows)


def test_a_raw_icellspeed_csv_is_read_through_its_reader(shared_data, tmp_path, run_airlink):
    # Read as a plain table an iCellSpeed log had a column per carrier and no allocation
    # column ("scheduler: cannot tell ... no allocation column"); through its reader it is
    # the per-carrier mac frame airlink collect writes, and each question gets the answer
    # the collected frame gets
    log = shared_data / "icellspeed" / "D1_static" / "Austin" / "ATT" / "loc_32" / "control" / \
        "data_310410_loc-star-022c.csv"
    assert main(["collect", str(log), "-o", str(tmp_path)]) == 0
    (mac,) = tmp_path.glob("*.mac.parquet")
    answers = {}
    for args in (["scheduler"], ["nmi", "--target", "tbs_bps", "--factor", "snr_db", "--by", "carrier",
                                 "--max-lag", "5s"]):
        status, from_csv, err = run_airlink("infer", *args, log, "--json")
        assert status == 0, err
        status, from_mac, err = run_airlink("infer", *args, mac, "--json")
        assert status == 0, err
        assert from_csv == from_mac, args
        answers[args[0]] = json.loads(from_csv)
    answer = answers["scheduler"]
    raw = pd.read_csv(log, na_values=["None"])
    t = raw["seconds_since_epoch"]
    # one sample a second from the first to the last second, the primary carrier's PRBs
    assert answer["samples"] == t.max() - t.min() + 1 and answer["columns"]["alloc"] == "prbs"
    assert answer["users_used"] == ["ue/pcell"]


def test_a_raw_nrscope_csv_is_read_through_its_reader(shared_data, run_airlink, morning):
    # The raw CSV goes through the NR-Scope reader (as a plain table it would be one series
    # of every RNTI and both directions on a 15 ms grid): it gives what its collected frame
    # gives, the RNTIs' downlink grants on the 1 ms slot.
    log, mac = morning
    status, from_csv, err = run_airlink("infer", "jitter", log, "--json")
    assert status == 0, err
    status, from_mac, err = run_airlink("infer", "jitter", mac, "--json")
    assert status == 0, err
    assert from_csv == from_mac
    rows = json.loads(from_csv)
    r = raw_with_slots(log)
    dl = r[(r["dci_format"] == "1_1") & (r["frequency_length"] > 0)]
    assert sorted(int(u["user"]) for u in rows) == sorted(dl["rnti"].unique())
    busiest = dl.groupby("rnti").size().idxmax()
    slots = np.unique(dl[dl["rnti"] == busiest]["abs_slot"])
    row = next(u for u in rows if int(u["user"]) == busiest)
    assert row["gaps"] == slots.size - 1 and row["max_s"] == pytest.approx(np.diff(slots).max() / 1000)
    status, _, err = run_airlink("infer", "jitter", log, "--served", "frequency_length")
    assert status == 2
    one_error_line(err, str(log), "no column 'frequency_length'", "prbs")


def test_fairness_windows_with_one_user_have_no_index(run_airlink, morning):
    # per 10 s window (epoch-aligned) a user's rate is its mean TBS over its granted slots
    # in the window; a window in which one RNTI alone was granted compares nobody: no Jain
    # index (a 1.0 there would lift the mean over windows)
    log, mac = morning
    status, out, err = run_airlink("infer", "fairness", mac, "--window", "10s", "--json")
    assert status == 0, err
    windows = json.loads(out)["windows"]
    r = raw_with_slots(log)
    dl = r[(r["dci_format"] == "1_1") & (r["frequency_length"] > 0)].drop_duplicates(["abs_slot", "rnti", "harq_id"])
    # a grant's slot start: the reader's clock, slot 0 at the first row's timestamp less the
    # smallest decoding latency; 10 s windows of the epoch
    first = (r["timestamp"] - r["abs_slot"] / 1000).min()
    win = np.floor((first + dl["abs_slot"] / 1000) / 10).astype(int)
    per_slot = dl.assign(win=win).groupby(["win", "rnti", "abs_slot"])["transport_block_size"].sum() / 8
    per = per_slot.groupby(level=["win", "rnti"]).mean()      # the mean over the user's granted slots
    expected = {w: (jain(g.to_numpy()) if g.size >= 2 else None) for w, g in per.groupby(level=0)}
    got = {int(pd.Timestamp(w["time"]).timestamp()) // 10: w["jain_index"] for w in windows if w["users"]}
    assert got.keys() == expected.keys()
    for w, j in expected.items():
        assert (got[w] is None) if j is None else got[w] == pytest.approx(j, rel=1e-9), w
    assert sum(j is None for j in expected.values()) == 3


def test_nmi_of_one_user_grids_that_user_only(shared_data, run_airlink):
    # the afternoon log is too big a dense grid for all 137 RNTIs; --user 25864 grids that
    # RNTI's slots alone (from its first to its last grant, on the log's slot grid)
    log = shared_data / "nr-scope" / "t_mobile1_ueactivity_afternoon_1.csv"
    r = raw_with_slots(log)
    mine = r[(r["rnti"] == 25864) & (r["dci_format"] == "1_1") & (r["frequency_length"] > 0)]
    slots = np.unique(mine["abs_slot"])
    args = ["infer", "nmi", log, "--target", "tbs_bytes", "--factor", "mcs", "--user", "25864",
            "--max-lag", "50ms", "--surrogates", "9", "--bootstrap", "0"]
    status, out, err = run_airlink(*args, "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert row["lag"] == 0 and row["n_pairs"] == slots.size == 1935     # one pair per granted slot
    status, out, err = run_airlink(*args)
    assert out.startswith(f"grid 0.001 s: {slots[-1] - slots[0] + 1} steps, ") and "series: 25864\n" in out
    status, out, err = run_airlink("infer", "nmi", log, "--target", "tbs_bytes", "--factor", "mcs", "--user", "7")
    assert status == 2
    one_error_line(err, str(log), "no user '7' (users: ")
