"""One computation, one place: what `airlink run` reports equals what the standalone
commands compute on the run's own files, and both equal a reference computation written
here from the definitions (Mattar et al.'s I_N = I(X;Y) / H(X) on 16 equal-width bins; Jain's
index)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.reference_nmi import nmi_curve, uniform_codes

REPO = Path(__file__).resolve().parents[2]
AIRLINK = [sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    exp = out.parent / "exp.yaml"
    exp.write_text("name: one\nradio: {preset: quick, seed: 4, duration: 8s, user: 2}\n"
                   "collect: {resolution: 500ms}\ninfer: {surrogates: 20, bootstrap: 20}\nreport: false\n"
                   f"offline: {{captures: [{REPO / 'examples' / 'data' / 'pf-cell-host.pcap.gz'}]}}\n")
    r = subprocess.run([*AIRLINK, "run", str(exp), "-o", str(out), "--offline", "--quiet"],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def test_run_nmi_table_equals_airlink_infer_nmi_on_the_run_files(offline_run):
    analyses = json.loads((offline_run / "nmi.json").read_text())["analyses"]
    assert {a["source"] for a in analyses} == {"mac", "tcp"}
    for a in analyses:
        argv = shlex.split(a["command"])
        assert argv[:3] == ["airlink", "infer", "nmi"]
        r = subprocess.run([*AIRLINK, *argv[1:], "--json"], capture_output=True, text=True,
                           cwd=offline_run, timeout=600)
        assert r.returncode == 0, r.stderr
        cli = {row["factor"]: row for row in json.loads(r.stdout)}
        assert [f["factor"] for f in a["factors"]] == list(cli)
        for f in a["factors"]:
            row = cli[f["factor"]]
            assert f["peak_nmi"] == row["peak_nmi"] and f["lag"] == row["lag"]
            for key in ("lag_s", "p_value", "threshold", "bias_corrected"):
                assert f[key] == (None if row[key] is None else pytest.approx(row[key], abs=0, rel=0)), key
            assert f["ci"] == [row["ci_low"], row["ci_high"]]
            assert f["n_pairs"] == row["n_pairs"]
            assert f["significant"] == (row["p_value"] is not None and row["p_value"] < a["alpha"])
            # the curve drawn in the report peaks at the table's value
            assert max(f["curve"]["nmi"]) == pytest.approx(f["peak_nmi"], abs=1e-12)


def test_run_nmi_peaks_equal_a_reference_lag_scan(offline_run):
    """The TCP analyses run on series-tcp.parquet as it is: every factor's peak NMI and
    peak lag are the maximum of the reference I_N over lags -D..D."""
    import pandas as pd
    series = pd.read_parquet(offline_run / "series-tcp.parquet")
    analyses = [a for a in json.loads((offline_run / "nmi.json").read_text())["analyses"] if a["source"] == "tcp"]
    assert analyses
    for a in analyses:
        x, D = uniform_codes(series[a["target"]], a["bins"]), a["max_lag_samples"]
        for f in a["factors"]:
            ref = nmi_curve(x, uniform_codes(series[f["factor"]], a["bins"]), D)
            assert f["peak_nmi"] == pytest.approx(max(ref), abs=1e-9), (a["target"], f["factor"])
            assert f["lag"] == int(np.argmax(ref)) - D


def test_run_summary_names_the_strongest_significant_factor(offline_run):
    """The infer stage's one-line note, per analysis: ``target<-factor`` for the factor of
    highest peak NMI among those whose surrogate p-value is below alpha, else
    ``target: cannot tell`` when every factor is "cannot tell" (too few pairs for an
    answer), else ``target: no significant factor``."""
    info = json.loads((offline_run / "run.json").read_text())
    note = next(s["note"] for s in info["stages"] if s["name"] == "infer")
    expected = []
    for a in json.loads((offline_run / "nmi.json").read_text())["analyses"]:
        sig = [f for f in a["factors"] if f["p_value"] is not None and f["p_value"] < a["alpha"]
               and not f["cannot_tell"]]
        best = max(sig, key=lambda f: f["peak_nmi"], default=None)
        unknown = all(f["cannot_tell"] for f in a["factors"])
        expected.append(f"{a['target']}<-{best['factor']}" if best else
                        f"{a['target']}: cannot tell" if unknown else f"{a['target']}: no significant factor")
    assert note == ", ".join(expected)


def test_the_tcp_series_is_the_busiest_direction_on_the_collect_grid(offline_run):
    import pandas as pd
    from airlink import rundir
    series = pd.read_parquet(offline_run / "series-tcp.parquet")
    tcp = pd.read_parquet(offline_run / "tcp.parquet")
    assert rundir.kind_of(offline_run / "series-tcp.parquet") == "series"
    tot = tcp.groupby(["flow", "direction"], observed=True)["goodput_bps"].sum()
    flow, direction = tot.idxmax()
    rows = tcp[(tcp["flow"] == flow) & (tcp["direction"] == direction)].set_index("time")
    # tcp.parquet is already on the 500 ms grid: the series carries its values unchanged
    got = series.set_index("time")["goodput_bps"].reindex(rows.index)
    assert np.allclose(got.to_numpy(), rows["goodput_bps"].to_numpy(), equal_nan=True)


def test_time_sequence_marks_what_the_flow_table_counts(offline_run):
    """The page must not contradict itself: red marks = the flow table's retransmissions =
    tshark's tcp.analysis.*retransmission frames of the bundled capture (2) and its
    out-of-order frames whose bytes the capture had seen before (51: the capture is the
    sender's host, where a segment below snd_max was sent again)."""
    import shutil
    from airlink.report import Artifacts, fig_time_sequence
    art = Artifacts(offline_run)
    _, stats = fig_time_sequence(art.packets, events=art.events)
    expected = 2 + 51
    if shutil.which("tshark"):
        from tests.collectors.tshark_reference import sent_before, tshark_flags
        cap = REPO / "examples" / "data" / "pf-cell-host.pcap.gz"
        ts = tshark_flags(cap)
        resent = ts["retransmission"] | ts["fast_retransmission"] | ts["spurious_retransmission"]
        expected = len(resent | sent_before(cap, ts["out_of_order"]))
    assert stats["retransmissions"] == int(art.flows["retransmissions"].sum()) == expected


def test_simulator_summary_uses_the_one_fairness_definition():
    """sim's summary.json numbers are inference.fairness's, degenerate cases included."""
    from airlink import inference as inf
    from airlink.sim import metrics as M
    served = np.array([[1500.0, 0, 300], [0, 0, 300], [1500.0, 0, 0], [0, 0, 300]])
    nsub = (served > 0).astype(float)
    s = M.summarize(users=["1", "2", "3"], tti_s=0.001, n_subchannels=1, served=served, nsub=nsub,
                    blocks=nsub, retx=np.zeros_like(served), active=np.ones_like(served))
    thr = np.array([u["throughput_mbps"] for u in s["users"]])
    # by hand: 3000, 0 and 900 bytes in 4 ms -> 6, 0 and 1.8 Mbit/s;
    # Jain = (sum x)^2 / (n sum x^2) = 7.8^2 / (3 (36 + 3.24))
    assert thr.tolist() == pytest.approx([6.0, 0.0, 1.8])
    assert s["jain_index"] == pytest.approx(7.8 ** 2 / (3 * 39.24)) and s["jain_index"] == inf.jain_index(thr)
    assert s["fairness_gap"] is None and inf.fairness_gap(thr) == float("inf")   # JSON has no inf
    # by hand: user 1 served at TTIs 0 and 2 -> one gap of 2 ms
    assert s["users"][0]["gap_mean_ms"] == pytest.approx(2.0)
    zero = M.summarize(users=["1", "2"], tti_s=0.001, n_subchannels=1, served=np.zeros((3, 2)),
                       nsub=np.zeros((3, 2)), blocks=np.zeros((3, 2)), retx=np.zeros((3, 2)),
                       active=np.zeros((3, 2)))
    assert zero["jain_index"] == inf.jain_index([0, 0]) == 1.0
    assert zero["fairness_gap"] == inf.fairness_gap([0, 0]) == 0.0
    assert zero["resource_fraction_min_max_ratio"] == inf.min_max_ratio([0, 0]) == 1.0


def test_service_gaps_on_irregular_times():
    from airlink.inference import service_gaps
    served = np.array([5.0, 0, 7, 1, 0, 0, 2])
    times = np.array([0.0, 1, 3, 4, 10, 11, 20])
    (g,) = service_gaps(served, times=times)
    assert g.tolist() == [3.0, 1.0, 16.0]          # 0->3, 3->4, 4->20
    (g,) = service_gaps(served, tti_s=2.0)
    assert g.tolist() == [4.0, 2.0, 6.0]           # rows 0, 2, 3, 6 apart x 2
