"""`airlink infer ...` end to end on frames written to disk."""
import json

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def coupled_csv(tmp_path_factory):
    rng = np.random.default_rng(0)
    n = 900
    y = np.convolve(rng.normal(size=n), np.ones(3), mode="same")
    x = np.roll(y, 3) + 0.5 * rng.normal(size=n)
    t = 1_600_000_000 + np.arange(n)                      # epoch seconds, 1 s samples
    path = tmp_path_factory.mktemp("f") / "frame.csv"
    pd.DataFrame({"time": t, "rate": x, "backlog": y, "noise": rng.normal(size=n)}).to_csv(path, index=False)
    return path


def test_nmi_json(run_airlink, coupled_csv):
    status, out, err = run_airlink("infer", "nmi", coupled_csv, "--target", "rate", "--factor", "noise",
                                   "--factor", "backlog", "--max-lag", "10s", "--surrogates", "19",
                                   "--json")
    assert status == 0, err
    rows = json.loads(out)
    assert [r["factor"] for r in rows] == ["backlog", "noise"]
    assert {"factor", "peak_nmi", "lag_s", "p_value"} <= set(rows[0])
    assert rows[0]["lag_s"] == 3.0 and rows[0]["p_value"] == pytest.approx(0.05)
    assert rows[1]["p_value"] > 0.05 or rows[1]["peak_nmi"] < rows[0]["peak_nmi"] / 3


def test_nmi_imports_only_what_the_scan_needs(coupled_csv, tmp_path):
    """`airlink infer nmi` on a Parquet frame loads no scikit-learn, no scipy.stats or
    scipy.signal, no simulator and no other command's modules (its parser is built alone);
    the peak is at the lag the frame was made with."""
    import subprocess
    import sys
    frame = tmp_path / "frame.parquet"
    f = pd.read_csv(coupled_csv)
    f["time"] = pd.to_datetime(f["time"], unit="s", utc=True)
    f.to_parquet(frame)
    args = ["infer", "nmi", str(frame), "--target", "rate", "--factor", "backlog", "--max-lag", "10s",
            "--surrogates", "0", "--bootstrap", "0", "--json"]
    code = ("import contextlib, io, json, sys\nfrom airlink.cli import main\nout = io.StringIO()\n"
            f"with contextlib.redirect_stdout(out):\n    status = main({args!r})\n"
            "print(json.dumps({'status': status, 'rows': json.loads(out.getvalue()), 'modules': sorted(sys.modules)}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout.splitlines()[-1])
    assert done["status"] == 0 and done["rows"][0]["lag_s"] == 3.0
    unneeded = ("sklearn", "joblib", "scipy.stats", "scipy.signal", "airlink.sim", "airlink.inference.scheduler",
                "airlink.inference.pf_params", "airlink.inference.cell_logs")
    assert not [m for m in done["modules"] if m.startswith(unneeded)]
    assert [m for m in done["modules"] if m.startswith("airlink.cli.") and not m.startswith("airlink.cli._")] \
        == ["airlink.cli.infer", "airlink.cli.infer_cell", "airlink.cli.infer_pf"]     # infer's actions


def test_nmi_table_and_surrogates_off(run_airlink, coupled_csv):
    status, out, err = run_airlink("infer", "nmi", coupled_csv, "--target", "rate", "--factor", "backlog",
                                   "--max-lag", "5s", "--surrogates", "0", "--bins", "8")
    assert status == 0, err
    assert "backlog" in out and "positive lag: the factor leads" in out


def test_max_lag_is_a_duration_not_samples(run_airlink, coupled_csv):
    """A bare number could mean seconds or grid steps: it is refused with one line."""
    status, out, err = run_airlink("infer", "nmi", coupled_csv, "--target", "rate", "--factor", "backlog",
                                   "--max-lag", "5", "--surrogates", "0")
    assert status == 2 and "give a duration with a unit" in err and len(err.strip().splitlines()) == 1
    import pandas as pd

    from airlink import inference as inf
    from airlink.traces import AirlinkError
    with pytest.raises(AirlinkError, match="duration"):
        inf.rank_factors(pd.read_csv(coupled_csv), target="rate", factors=["backlog"], max_lag=5, surrogates=0)


def test_bad_column_is_one_line(run_airlink, coupled_csv):
    status, out, err = run_airlink("infer", "nmi", coupled_csv, "--target", "nope", "--factor", "backlog")
    assert status == 2
    assert err.startswith("airlink: error:") and "nope" in err and len(err.strip().splitlines()) == 1


def test_missing_file(run_airlink, tmp_path):
    status, _, err = run_airlink("infer", "jitter", tmp_path / "missing.parquet")
    assert status == 2 and "no such file" in err


def test_help_has_example(run_airlink):
    status, out, _ = run_airlink("infer", "--help")
    assert status == 0 and "airlink infer nmi" in out
    for action in ("nmi", "fairness", "backlog", "jitter", "scheduler"):
        status, out, _ = run_airlink("infer", action, "--help")
        assert status == 0 and "example:" in out and "airlink infer " + action in out


@pytest.fixture(scope="module")
def sim_parquet(tmp_path_factory):
    from airlink import sim
    mac = sim.simulate("1xrtt", seed=2, duration="30s", scheduler="backlog", traffic="onoff").mac
    path = tmp_path_factory.mktemp("s") / "mac.parquet"
    mac.to_parquet(path)
    return path


def test_fairness_jitter_backlog_on_simulated_frame(run_airlink, sim_parquet):
    status, out, err = run_airlink("infer", "fairness", sim_parquet, "--window", "5s", "--json")
    assert status == 0, err
    rep = json.loads(out)
    assert 0 < rep["overall"]["jain_index"] <= 1 and len(rep["users"]) == 4 and len(rep["windows"]) == 6
    status, out, err = run_airlink("infer", "jitter", sim_parquet, "--json")
    assert status == 0, err
    assert all(r["mean_s"] > 0 for r in json.loads(out))
    status, out, err = run_airlink("infer", "backlog", sim_parquet, "--surrogates", "9")
    assert status == 0, err
    assert "the rate follows the backlog" in out


def test_grid_line_lists_users_in_number_order(run_airlink, tmp_path):
    # users 1, 2 and 10: as numbers 2 comes before 10 (as text "10" sorts before "2")
    t = 1_600_000_000 + np.repeat(np.arange(50), 3) * 0.001
    path = tmp_path / "mac.csv"
    pd.DataFrame({"time": t, "user": np.tile([10, 2, 1], 50), "served_bytes": 100.0}).to_csv(path, index=False)
    status, out, err = run_airlink("infer", "jitter", path)
    assert status == 0, err
    assert "series: 1, 2, 10\n" in out


def test_nmi_on_icellspeed_csv(run_airlink, shared_data):
    files = sorted((shared_data / "icellspeed" / "D1_static").rglob("data_*.csv"))
    if not files:
        pytest.skip("no iCellSpeed D1_static files in ../shared/data/icellspeed")
    status, out, err = run_airlink("infer", "nmi", files[0], "--target", "pcell_sum_nRB",
                                   "--factor", "pcell_snr", "--factor", "throughput", "--max-lag", "10s",
                                   "--surrogates", "19", "--json")
    assert status == 0, err
    rows = json.loads(out)
    assert {r["factor"] for r in rows} == {"pcell_snr", "throughput"}
    for r in rows:
        assert 0 <= r["peak_nmi"] <= 1 and abs(r["lag_s"]) <= 10 and float(r["lag_s"]).is_integer()
        if r["n_pairs"] < 5 * r["min_pairs"] / 5:     # fewer than 5 pairs per occupied cell
            assert r["cannot_tell"] and r["p_value"] is None and not r["significant"]
        else:
            assert 0.05 <= r["p_value"] <= 1


def test_several_frames_are_aligned(run_airlink, tmp_path):
    rng = np.random.default_rng(4)
    n = 400
    t = 1_700_000_000 + np.arange(n) * 0.5
    y = np.convolve(rng.normal(size=n), np.ones(4), mode="same")
    pd.DataFrame({"time": t, "rate": np.roll(y, 2) + 0.3 * rng.normal(size=n)}).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame({"time": pd.to_datetime(t + 0.01, unit="s", utc=True), "backlog": y}).to_parquet(tmp_path / "b.parquet")
    status, out, err = run_airlink("infer", "nmi", tmp_path / "a.csv", tmp_path / "b.parquet", "--target", "rate",
                                   "--factor", "backlog", "--max-lag", "5s", "--surrogates", "0", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert row["lag_s"] == 1.0 and row["peak_nmi"] > 0.3


def test_tcp_frame_flows_are_separate_series(run_airlink, tmp_path):
    """A collectors-style tcp frame (time, flow, direction): split only when asked (--by flow),
    then each flow is its own series, pooled like users, never interleaved; without --by the
    two flows are an error, never a silent split or mix."""
    rng = np.random.default_rng(8)
    n = 500
    t = pd.date_range("2026-01-01", periods=n, freq="100ms", tz="UTC")
    parts = []
    for flow in (0, 1):
        rtt = np.convolve(rng.normal(size=n), np.ones(5), mode="same") + 10 * flow
        parts.append(pd.DataFrame({"time": t, "flow": flow, "direction": "fwd",
                                   "inflight_bytes": rtt, "rtt_ms": np.roll(rtt, 3) + 0.3 * rng.normal(size=n)}))
    frame = pd.concat(parts).sort_values("time", kind="stable")
    path = tmp_path / "tcp.parquet"
    frame.to_parquet(path)
    status, out, err = run_airlink("infer", "nmi", path, "--target", "rtt_ms", "--factor", "inflight_bytes",
                                   "--max-lag", "1s", "--surrogates", "0", "--json")
    assert status == 2 and "'flow'" in err and "by='flow'" in err and len(err.strip().splitlines()) == 1
    status, out, err = run_airlink("infer", "nmi", path, "--target", "rtt_ms", "--factor", "inflight_bytes",
                                   "--max-lag", "1s", "--surrogates", "0", "--by", "flow", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert row["lag_s"] == pytest.approx(0.3) and row["lag"] == 3 and row["n_pairs"] == 2 * (n - 3)
    status, out, err = run_airlink("infer", "nmi", path, "--target", "rtt_ms", "--factor", "inflight_bytes",
                                   "--max-lag", "1s", "--surrogates", "0", "--by", "flow", "--by", "direction",
                                   "--user", "1/fwd", "--json")
    assert status == 0, err
    assert json.loads(out)[0]["n_pairs"] == n - 3


def test_a_real_captures_tcp_frame_names_every_mixed_column_and_its_flag(run_airlink, shared_data, tmp_path):
    """The TCP frame `airlink collect` makes of a real capture (Zeek's test trace: two
    connections, data and ACKs each way): the refusal names both mixed columns and the
    command-line flags that split them in one line; the command as the hint writes it runs,
    and says why it cannot tell (the two connections never overlap)."""
    status, _, err = run_airlink("collect", shared_data / "tcp-pcaps" / "zeek-head" / "206_example_b.pcap",
                                 "-o", tmp_path / "frames")
    assert status == 0, err
    frame = tmp_path / "frames" / "206_example_b.tcp.parquet"
    status, _, err = run_airlink("infer", "fairness", frame)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "column 'flow' holds 2 different values (0, 1); column 'direction' holds 2 different values " \
           "(fwd, rev)" in err and "split them with by=['flow', 'direction'] or keep one flow and one " \
        "direction (on the command line: --by flow --by direction)" in err
    status, out, err = run_airlink("infer", "fairness", frame, "--by", "flow", "--by", "direction")
    assert status == 0, err
    assert "series: 0/fwd, 0/rev, 1/fwd, 1/rev" in out and "the series never overlapped in time" in out
    status, _, err = run_airlink("infer", "jitter", frame, "--by", "flow", "--by", "direction")
    assert status == 2 and "name it with served= (on the command line: --served COLUMN)" in err, err


def test_nmi_grids_only_the_columns_it_reads(run_airlink, coupled_csv, tmp_path, monkeypatch):
    """A wide frame (a TCP series has 17 data columns) is put on the grid with the target and
    factors only: with the dense-grid budget at 5,000 values, 900 steps x 17 columns are
    refused, and nmi answers exactly as on the same frame cut to its two columns."""
    from airlink import inference as inf
    from airlink.collectors import timegrid
    from airlink.core.bounds import BoundError
    narrow = pd.read_csv(coupled_csv)[["time", "rate", "backlog"]]
    rng = np.random.default_rng(1)
    wide = narrow.assign(**{f"extra{k}": rng.normal(size=len(narrow)) for k in range(15)})
    paths = {}
    for name, frame in (("narrow", narrow), ("wide", wide)):
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    monkeypatch.setattr(timegrid, "MAX_GRID_VALUES", 5000)
    with pytest.raises(BoundError, match="dense grid of 900 steps"):
        inf.read_frames(paths["wide"])
    answers = []
    for name in ("narrow", "wide"):
        status, out, err = run_airlink("infer", "nmi", paths[name], "--target", "rate", "--factor", "backlog",
                                       "--max-lag", "10s", "--surrogates", "19", "--json")
        assert status == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1] and answers[0][0]["lag_s"] == 3.0
