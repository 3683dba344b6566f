"""The public API contract of airlink.sim.simulate, its output folder and the CLI."""
import json

import numpy as np
import pandas as pd
import pytest

import airlink.sim as S
from airlink.sim import kernel as K
from airlink.traces import AirlinkError, Trace, read_trace, validate

MAC_COLUMNS = ["time", "user", "subchannels", "mcs", "sinr_db", "sinr_reported_db", "served_bytes",
               "harq_retransmissions", "backlog_bytes", "backlog_packets", "assigned_rate_bps"]


@pytest.fixture(scope="module")
def quick():
    return S.simulate("quick", seed=1, duration="1s")


def test_result_contract(quick):
    r = quick
    assert isinstance(r, S.SimResult)
    assert isinstance(r.capacity, Trace) and r.capacity.users == ["1", "2", "3", "4"]
    assert r.capacity.n_tti == 1000 and r.capacity.tti_ms == 1
    meta = r.capacity.meta
    assert meta["preset"] == "quick" and meta["scheduler"] == "pf" and meta["seed"] == 1
    assert meta["parameters"]["n_subchannels"] == 24
    validate(r.mac, "mac")
    assert set(MAC_COLUMNS) <= set(r.mac.columns)
    assert len(r.mac) == 4000
    # capacity trace and MAC log agree
    per_user = r.mac.groupby("user")["served_bytes"].sum()
    assert np.allclose(per_user[["1", "2", "3", "4"]].to_numpy(), r.capacity.values.sum(axis=0))
    s = r.summary
    for key in ("aggregate_throughput_mbps", "jain_index", "fairness_gap",
                "resource_fraction_min_max_ratio", "users"):
        assert key in s
    for u in s["users"]:
        for key in ("user", "throughput_mbps", "selection_ratio", "resource_fraction",
                    "active_time_ratio", "retransmission_ratio", "gap_mean_ms", "gap_std_ms",
                    "gap_cov", "gap_max_ms"):
            assert key in u
    assert s["aggregate_throughput_mbps"] == pytest.approx(sum(u["throughput_mbps"] for u in s["users"]))
    assert sum(u["selection_ratio"] for u in s["users"]) == pytest.approx(1.0)
    assert 0 < s["jain_index"] <= 1
    # full buffer: every subchannel used in every TTI
    assert sum(u["resource_fraction"] for u in s["users"]) == pytest.approx(1.0)
    assert r.config["seed"] == 1 and r.config["preset"] == "quick"


def test_presets_and_registry():
    assert {"evdo", "imt-advanced", "hsdpa", "egprs", "quick"} <= set(S.PRESETS)
    for name in S.PRESETS:
        p = S.load_preset(name)
        assert "n_users" in p and "tti" in p
    assert set(S.schedulers) >= {"rr", "maxcir", "pf", "lambda", "backlog"}
    assert S.schedulers["pf"] is S.ProportionalFair
    with pytest.raises(AirlinkError, match="unknown preset"):
        S.load_preset("lte-9000")
    with pytest.raises(AirlinkError, match="unknown preset parameter 'bogus'"):
        S.simulate("quick", duration="10ms", bogus=1)
    with pytest.raises(AirlinkError, match="unknown scheduler"):
        S.simulate("quick", duration="10ms", scheduler="fastest")


def test_overrides_and_yaml_preset_files(tmp_path):
    r = S.simulate("quick", duration="200ms", n_users=3, n_subchannels=5, scheduler="maxcir", lam=2.0)
    assert r.capacity.n_users == 3 and r.summary["n_subchannels"] == 5
    assert r.config["scheduler"] == "maxcir" and len(r.config["snr_db"]) in (3, 4)
    f = tmp_path / "cell.yaml"
    f.write_text("preset: evdo\nn_users: 2\nsnr_db: [10, 0]\n")
    r = S.simulate(str(f), duration="1s")
    assert r.capacity.n_users == 2 and r.capacity.tti_ms == pytest.approx(1000 / 600)


def test_identical_seed_gives_identical_files(tmp_path):
    a = S.simulate("quick", seed=5, duration="300ms").write(tmp_path / "a", mahimahi=True)
    b = S.simulate("quick", seed=5, duration="300ms").write(tmp_path / "b", mahimahi=True)
    names = sorted(p.name for p in a.iterdir())
    assert names == ["capacity.parquet", "config.yaml", "mac.parquet", "summary.json",
                     "user1.down", "user2.down", "user3.down", "user4.down"]
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
    c = S.simulate("quick", seed=6, duration="300ms").write(tmp_path / "c")
    assert (a / "capacity.parquet").read_bytes() != (c / "capacity.parquet").read_bytes()
    back = read_trace(a / "capacity.parquet")
    assert back.meta["seed"] == 5 and back.meta["scheduler"] == "pf"
    mac = S.read_mac(a / "mac.parquet")
    assert mac.attrs["airlink"]["meta"]["preset"] == "quick"
    validate(mac, "mac")
    summary = json.loads((a / "summary.json").read_text())
    assert summary["n_tti"] == 300
    # the Mahimahi export carries the same bytes (within one 1500-byte opportunity)
    user1 = read_trace(a / "user1.down")
    assert abs(user1.values.sum() - back.column("1").sum()) <= 1500


def test_chunk_size_does_not_change_the_result():
    kw = dict(duration="400ms", seed=2, traffic="poisson", traffic_rate_bps=4e6, buffer_packets=40,
              csi_delay_tti=3)
    a = S.simulate("quick", **kw)
    b = S.simulate("quick", chunk_elements=24 * 4 * 7, **kw)     # 7 TTIs per chunk
    # BLAS may round the float32 channel differently for other chunk shapes (~1e-6)
    assert np.allclose(a.capacity.values, b.capacity.values, rtol=1e-6)
    pd.testing.assert_frame_equal(a.mac, b.mac, check_exact=False, rtol=1e-4)


class _Reference:
    """Wraps a built-in scheduler so that the simulator calls its numpy ``assign``."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def reset(self, **kw):
        self.inner.reset(**kw)

    def assign(self, ctx):
        return self.inner.assign(ctx)

    def update(self, sent_bits):
        self.inner.update(sent_bits)


@pytest.mark.parametrize("name", ["rr", "maxcir", "pf", "lambda"])
def test_compiled_schedulers_match_their_numpy_reference(name):
    kw = dict(duration="300ms", seed=4, harq_priority=False, lam=2.0, pf_window=50)
    fast = S.simulate("quick", scheduler=name, **kw)
    sched = S.engine.make_scheduler(name, S.resolve_config("quick", {"lam": 2.0, "pf_window": 50}))
    slow = S.simulate("quick", scheduler=_Reference(sched), **kw)
    assert np.array_equal(fast.capacity.values, slow.capacity.values)
    assert np.array_equal(fast.mac["subchannels"].to_numpy(), slow.mac["subchannels"].to_numpy())


def test_user_scheduler_class_by_object_class_and_dotted_path(run_airlink, tmp_path, monkeypatch):
    class Favourite(S.Scheduler):
        """Gives every subchannel to user 2 when it has data."""
        name = "favourite"

        def assign(self, ctx):
            return np.where(ctx.eligible[1], 1, -1) * np.ones(ctx.rate_bytes.shape[1], dtype=int)

    r = S.simulate("quick", duration="100ms", scheduler=Favourite)
    assert r.summary["users"][1]["selection_ratio"] == 1.0
    assert r.capacity.meta["scheduler"] == "favourite"
    mod = tmp_path / "my_sched.py"
    mod.write_text("import numpy as np\n"
                   "class First:\n"
                   "    name = 'first'\n"
                   "    def reset(self, **kw): pass\n"
                   "    def assign(self, ctx): return np.zeros(ctx.rate_bytes.shape[1], dtype=int)\n"
                   "    def update(self, sent_bits): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    status, out, err = run_airlink("simulate", "--preset", "quick", "--duration", "50ms",
                                   "--scheduler", "my_sched:First", "-o", tmp_path / "o", "--json")
    assert status == 0, err
    assert json.loads(out)["users"][0]["selection_ratio"] == 1.0

    class Broken:
        def reset(self, **kw): pass
        def assign(self, ctx): return np.array([7])
        def update(self, b): pass
    with pytest.raises(AirlinkError, match="invalid assignment"):
        S.simulate("quick", duration="10ms", scheduler=Broken())


@pytest.mark.parametrize("preset,kw", [
    ("quick", dict(duration="40ms", traffic="onoff", on_s=0.01, off_s=0.01, buffer_packets=5,
                   traffic_rate_bps=20e6, csi_delay_tti=2)),
    ("quick", dict(duration="40ms", scheduler="rr", harq_priority=True)),
    ("1xrtt", dict(duration="20s")),
    ("egprs", dict(duration="20s", link_adaptation="hybrid", snr_db=12)),
    ("egprs", dict(duration="10s", link_adaptation="ideal")),
])
def test_python_kernel_gives_the_same_result(monkeypatch, preset, kw):
    kw = dict(seed=3, **kw)
    a = S.simulate(preset, **kw)
    monkeypatch.setattr(K, "run_chunk", K._run_chunk)
    b = S.simulate(preset, **kw)
    assert np.array_equal(a.capacity.values, b.capacity.values)
    pd.testing.assert_frame_equal(a.mac, b.mac)


def test_finite_buffer_drop_tail_and_backlog_accounting():
    r = S.simulate("quick", duration="1s", traffic="cbr", traffic_rate_bps=[40e6, 1e6, 1e6, 1e6],
                   buffer_packets=40)
    m = r.mac
    u1 = m[m.user == "1"]
    assert u1["backlog_packets"].max() <= 40
    assert r.summary["users"][0]["drops_packets"] > 0
    # conservation per user: arrivals - drops = served + final backlog
    for u in "1234":
        f = m[m.user == u]
        accepted = f["arrivals_bytes"].sum() - f["drops_packets"].sum() * 1500
        assert accepted == pytest.approx(f["served_bytes"].sum() + f["backlog_bytes"].iloc[-1])
    # light users are served every burst: backlog stays small
    assert r.summary["users"][1]["active_time_ratio"] < 0.5


def test_cli_simulate_writes_the_folder(run_airlink, tmp_path):
    status, out, err = run_airlink("simulate", "--preset", "quick", "--scheduler", "maxcir",
                                   "--duration", "100ms", "--seed", "3", "-o", tmp_path / "out",
                                   "--set", "n_users=2", "--mahimahi")
    assert status == 0, err
    assert "aggregate" in out and (tmp_path / "out" / "user2.down").exists()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("preset: evdo\nscheduler: lambda\nlam: 3\n")
    status, out, err = run_airlink("simulate", "--config", cfg, "--duration", "1s", "-o",
                                   tmp_path / "o2", "--json")
    assert status == 0, err
    s = json.loads(out)
    assert s["preset"] == "evdo" and s["scheduler"] == "lambda" and len(s["users"]) == 16
    status, out, err = run_airlink("simulate", "--preset", "mars", "-o", tmp_path / "x")
    assert status == 2 and err.startswith("airlink: error: unknown preset 'mars'")
    status, out, err = run_airlink("simulate", "--set", "speed_kmh", "-o", tmp_path / "x")
    assert status == 2 and "NAME=VALUE" in err
    status, out, err = run_airlink("simulate", "--set", "snr_db=[1,x]", "-o", tmp_path / "x")
    assert status == 2 and err.strip() == \
        "airlink: error: --set 'snr_db=[1,x]': snr_db: expected a number or a list of numbers, got [1, 'x']"
    status, out, err = run_airlink("simulate", "--help")
    assert status == 0 and "example" in out


def test_measured_channel_drives_the_sinr():
    t = pd.to_datetime(np.arange(4) * 1_000_000_000, utc=True)
    frame = pd.DataFrame({"time": t, "snr_db": [20.0, 0.0, 10.0, -5.0]})
    r = S.simulate("quick", duration="4s", channel_trace=frame, profile="none", n_users=2,
                   snr_offset_db=0.0)
    m = r.mac[r.mac.user == "1"]
    per_s = m["sinr_db"].to_numpy().reshape(4, 1000).mean(axis=1)
    assert np.allclose(per_s, [20, 0, 10, -5], atol=1e-4)
    thr = r.capacity.column("1").reshape(4, 1000).sum(axis=1) + r.capacity.column("2").reshape(4, 1000).sum(axis=1)
    assert thr[0] > thr[2] > thr[1] > thr[3]


def test_measured_channel_from_csv_file(tmp_path):
    p = tmp_path / "rf.csv"
    p.write_text("time_s,cqi\n0,15\n1,1\n")
    r = S.simulate("quick", duration="2s", channel_trace=str(p), profile="none", n_users=1)
    per_s = r.mac["sinr_db"].to_numpy().reshape(2, 1000).mean(axis=1)
    lte = S.rate_table("lte-cqi").threshold_db
    assert np.allclose(per_s, [lte[14], lte[0]], atol=1e-4)
    with pytest.raises(AirlinkError, match="no such channel trace"):
        S.simulate("quick", duration="10ms", channel_trace=str(tmp_path / "none.csv"))


@pytest.mark.parametrize("preset", ["hsdpa", "egprs", "1xrtt", "imt-advanced", "evdo"])
def test_every_preset_runs_briefly(preset):
    r = S.simulate(preset, duration="200ms")
    validate(r.mac, "mac")
    assert r.summary["n_tti"] >= 1 and r.summary["aggregate_throughput_mbps"] >= 0
    assert r.capacity.meta["preset"] == preset


def test_reported_sinr_is_the_real_one_delayed_by_the_csi_delay():
    r = S.simulate("quick", duration="200ms", csi_delay_tti=3, n_users=2)
    for u in ("1", "2"):
        f = r.mac[r.mac.user == u]
        real, rep = f["sinr_db"].to_numpy(), f["sinr_reported_db"].to_numpy()
        assert np.array_equal(rep[3:], real[:-3])
        assert np.all(rep[:3] == real[0])


def test_harq_chase_combining_recovers_blocks():
    # aggressive link adaptation (50 % BLER at the chosen MCS): HARQ must earn its keep
    kw = dict(duration="500ms", bler_target=0.5, csi_delay_tti=0, n_users=2)
    none = S.simulate("quick", harq_max_tx=1, **kw).summary
    harq = S.simulate("quick", harq_max_tx=4, **kw).summary
    assert none["retransmission_ratio"] == 0 and none["harq_given_up_blocks"] > 0
    normal = S.simulate("quick", harq_max_tx=4, **{**kw, "bler_target": 0.1}).summary
    assert harq["retransmission_ratio"] > 2 * normal["retransmission_ratio"] > 0
    assert harq["harq_given_up_blocks"] < 0.1 * none["harq_given_up_blocks"]
    assert harq["aggregate_throughput_mbps"] > none["aggregate_throughput_mbps"]


def test_ties_are_broken_at_random_not_by_user_number():
    # identical users, no fading, one MCS reachable by all: MaxCIR sees only ties
    r = S.simulate("quick", duration="2s", scheduler="maxcir", profile="none", snr_db=30.0,
                   n_users=4, n_subchannels=1)
    sel = [u["selection_ratio"] for u in r.summary["users"]]
    assert all(abs(s - 0.25) < 0.03 for s in sel)


def test_per_user_traffic_models_and_packet_sizes():
    r = S.simulate("quick", duration="3s", traffic=["full", "cbr", "onoff", "poisson"],
                   traffic_rate_bps=[0, 64e3, 128e3, 256e3], packet_bytes=[1500, 60, 200, 500],
                   on_s=0.5, off_s=0.5)
    users = r.summary["users"]
    assert users[0]["active_time_ratio"] == 1.0 and users[0]["throughput_mbps"] > 1.0
    # light sources get what they offer (the cell has plenty of capacity for them)
    assert users[1]["throughput_mbps"] == pytest.approx(0.064, rel=0.05)
    assert users[2]["throughput_mbps"] == pytest.approx(0.064, rel=0.25)
    assert users[3]["throughput_mbps"] == pytest.approx(0.256, rel=0.1)
    m = r.mac
    assert (m[m.user == "2"]["arrivals_bytes"] % 60 == 0).all()
    assert (m[m.user == "1"]["backlog_packets"] == 500).all()     # full buffer: always full
    with pytest.raises(AirlinkError, match="2 models for 4 users|unknown traffic model"):
        S.simulate("quick", duration="10ms", traffic=["full", "bursty"])


def test_nominal_snr_path_loss_and_per_user_offsets():
    r = S.simulate("quick", duration="100ms", profile="none", snr_db=10, snr_offset_db=[0, -5, -10, 3])
    got = r.mac.groupby("user")["sinr_db"].mean()
    assert np.allclose(got[["1", "2", "3", "4"]].to_numpy(), [10, 5, 0, 13], atol=1e-4)
    r = S.simulate("quick", duration="100ms", profile="none", distance_m=[100, 1000], n_users=2,
                   tx_power_dbm=20, antenna_gain_db=0, noise_figure_db=0, noise_bandwidth_hz=1e6,
                   snr_offset_db=0)
    got = r.mac.groupby("user")["sinr_db"].mean()
    assert got["2"] == pytest.approx(20 - 128.1 + 174 - 60, abs=1e-3)
    assert got["1"] - got["2"] == pytest.approx(37.6, abs=1e-3)
    r = S.simulate("hsdpa", duration="20ms", n_users=3)       # 10 distances, 3 users
    assert r.capacity.n_users == 3


def test_without_mac_log_the_summary_and_capacity_are_the_same(tmp_path):
    kw = dict(duration="600ms", seed=9, traffic="poisson", traffic_rate_bps=3e6, buffer_packets=20,
              chunk_elements=24 * 4 * 50)
    full = S.simulate("quick", **kw)
    lean = S.simulate("quick", mac_log=False, **kw)
    assert np.array_equal(full.capacity.values, lean.capacity.values)
    assert lean.summary == full.summary
    assert len(lean.mac) == 0
    validate(lean.mac, "mac")
    lean.write(tmp_path / "lean")
    assert S.read_mac(tmp_path / "lean" / "mac.parquet").empty


@pytest.mark.skipif(not K.COMPILED, reason="tracemalloc over the Python kernel takes minutes; "
                                           "needs numba")
def test_memory_of_long_runs_without_mac_log_grows_only_by_the_capacity_trace():
    import tracemalloc

    def peak(duration):
        tracemalloc.start()
        S.simulate("quick", duration=duration, mac_log=False, chunk_elements=24 * 4 * 500)
        p = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return p
    short, long = peak("2s"), peak("8s")
    capacity_growth = 6000 * 4 * 8 * 2          # 6,000 more TTIs x 4 users x float64 (+ a copy)
    assert long - short < capacity_growth + 2_000_000
