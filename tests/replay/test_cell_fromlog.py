"""A measured cell replayed (airlink cell --from-log), radio side: no root, deterministic.

The references are computed here from the raw CSV with pandas: the slot of a DCI from
``system_frame_index * 10 + slot_index`` (15 kHz, 1 ms slots) with the SFN wrap undone by
the decoding timestamp (the absolute slot nearest to where the timestamp says), the
cross-traffic of a slot = the sum of ``frequency_length`` of the other RNTIs' downlink
DCIs (formats 1_0/1_1) in it.
"""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from airlink.replay.cell import CellShell
from airlink.sim.nr_rates import cqi_to_mcs
from airlink.core.errors import AirlinkError

AFTERNOON = "nr-scope/t_mobile1_ueactivity_afternoon_1.csv"
FOLLOW = "23938"        # an RNTI of the afternoon log; the busiest (25864) is the cross-traffic
START_S = 68.5          # 25864 holds about half the cell's PRBs in second 69 of the log
N_TTI = 2500


def raw_downlink(path) -> pd.DataFrame:
    """The downlink DCIs with PRBs of an NR-Scope CSV: rnti, slot (from the log's first
    slot), prb_start, prbs, mcs; repeated header lines skipped."""
    raw = pd.read_csv(path, dtype=str)
    raw = raw[raw["timestamp"] != "timestamp"]
    ts = raw["timestamp"].astype(float).to_numpy()
    residue = raw["system_frame_index"].astype(int).to_numpy() * 10 + raw["slot_index"].astype(int).to_numpy()
    where = residue[0] + (ts - ts[0]) * 1000.0            # slots by the decoding clock
    absolute = residue + 10240 * np.round((where - residue) / 10240).astype(np.int64)
    df = pd.DataFrame({"rnti": raw["rnti"].astype(int).to_numpy(), "slot": absolute - absolute.min(),
                       "fmt": raw["dci_format"].to_numpy(), "prb_start": raw["frequency_start"].astype(int).to_numpy(),
                       "prbs": raw["frequency_length"].astype(int).to_numpy(),
                       "mcs": raw["mcs_index"].astype(int).to_numpy(),
                       "tbs": raw["transport_block_size"].astype(int).to_numpy()})
    return df[df["fmt"].isin(["1_0", "1_1"]) & (df["prbs"] > 0)]


def run_radio(shell, n):
    """Step the shell's radio ``n`` TTIs with full queues, as the live loop does (one TTI at
    a time); the MAC columns with the cross-traffic rows."""
    radio = shell._radio()
    cols, k0 = [], 0
    while k0 < n:
        m = min(radio.chunk, n - k0)
        inp = radio.inputs(k0, m)
        out = radio.new_outputs(m)
        for i in range(m):
            radio.step(inp, i, i + 1, {k: v[i:i + 1] for k, v in out.items()},
                       backlog=np.full(radio.n_users, 1e9))
        c = radio.mac_columns(out, inp.sinr_db, inp.sinr_rep_db, inp.arrivals, k0=k0)
        cols.append(pd.DataFrame(radio.measured_columns(c, out, k0, 0)))
        k0 += m
    return radio, pd.concat(cols, ignore_index=True)


@pytest.fixture(scope="module")
def afternoon(shared_data):
    path = shared_data / AFTERNOON
    shell = CellShell(preset="nr-tmobile-10mhz", users=2, duration=f"{N_TTI / 1000}s", from_log=path,
                      follow_rnti=FOLLOW, log_start=f"{START_S}s", scheduler="pf")
    radio, mac = run_radio(shell, N_TTI)
    return path, raw_downlink(path), radio, mac


def test_cross_traffic_prbs_per_slot_equal_the_log(afternoon):
    _path, raw, _radio, mac = afternoon
    first = int(START_S * 1000)
    others = raw[(raw["rnti"] != int(FOLLOW)) & raw["slot"].between(first, first + N_TTI - 1)]
    want = others.groupby(others["slot"] - first)["prbs"].sum().reindex(range(N_TTI), fill_value=0)
    cross = mac[mac["cross_traffic"]]
    got = cross.groupby("slot")["prbs"].sum().reindex(range(N_TTI), fill_value=0)
    assert want.sum() > 10_000          # the window does hold cross-traffic
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    # one row per DCI, named by its RNTI, with the logged transport block (bits / 8)
    assert len(cross) == len(others)
    assert sorted(cross["user"].astype(int)) == sorted(others["rnti"])
    assert cross["tbs_bytes"].sum() == others["tbs"].sum() / 8


def test_live_ues_get_exactly_the_prbs_left(afternoon):
    """Full queues and PF: every PRB the cross-traffic leaves goes to a live UE, none it holds."""
    _path, raw, _radio, mac = afternoon
    first = int(START_S * 1000)
    others = raw[(raw["rnti"] != int(FOLLOW)) & raw["slot"].between(first, first + N_TTI - 1)]
    held = np.zeros(N_TTI, int)
    for slot, g in others.groupby("slot"):
        prbs = set()
        for s, n in zip(g["prb_start"], g["prbs"]):
            prbs.update(range(s, s + n))
        held[slot - first] = len(prbs)
    live = mac[~mac["cross_traffic"]]
    per_tti = live.groupby("slot")["subchannels"].sum().reindex(range(N_TTI), fill_value=0).to_numpy()
    assert held.max() > 0
    np.testing.assert_array_equal(per_tti, 52 - held)


def test_followed_channel_gives_the_recorded_mcs(afternoon):
    """A new block of a UE following an RNTI has the rate-table row of that RNTI's latest
    recorded MCS (the highest row whose 38.214 index is not above it)."""
    _path, raw, _radio, mac = afternoon
    first = int(START_S * 1000)
    rec = raw[(raw["rnti"] == int(FOLLOW)) & (raw["mcs"] < 28)].sort_values("slot")
    latest = rec.set_index("slot")["mcs"].groupby(level=0).last().reindex(range(first + N_TTI)).ffill()
    latest = latest.fillna(rec["mcs"].iloc[0]).to_numpy()[first:]
    row_mcs = np.unique(cqi_to_mcs(2, "qam256"))        # the NR table's rows (256QAM, CQI table 2)
    want_row = np.searchsorted(row_mcs, latest, "right")   # 1-based row, as the MAC log's mcs
    live = mac[~mac["cross_traffic"] & (mac["subchannels"] > 0) & (mac["harq_retransmissions"] == 0)]
    assert len(live) > 1000
    np.testing.assert_array_equal(live["mcs"].to_numpy(), want_row[live["slot"].to_numpy()])


def test_a_slot_gap_stays_a_gap_and_repeated_headers_are_skipped(shared_data, tmp_path):
    """A hand-made log: RNTI 900 holds PRBs 0-9 in slots 0-4, nothing in slots 5-49 (a gap),
    PRBs 20-29 in slots 50-54; RNTI 700 (followed) in every listed slot; a header line repeated
    in the middle. The cell sees 10 PRBs held in 0-4 and 50-54, none in the gap."""
    header = (shared_data / AFTERNOON).read_text().splitlines()[0]
    names = header.split(",")
    lines = [header]

    def row(slot, rnti, start, n):
        v = dict.fromkeys(names, "0")
        v.update(timestamp=f"{1727288900 + slot / 1000:.6f}", system_frame_index=str(100 + slot // 10),
                 slot_index=str(slot % 10), rnti=str(rnti), rnti_type="C-RNTI", dci_format="1_1",
                 frequency_start=str(start), frequency_length=str(n), mcs_index="10",
                 transport_block_size="8000", new_data_indicator="1", nof_layers="2", modulation="16QAM",
                 mcs_table="256qam")
        return ",".join(v[c] for c in names)

    for slot in [*range(5), *range(50, 55)]:
        lines.append(row(slot, 900, 0 if slot < 5 else 20, 10))
        lines.append(row(slot, 700, 30, 5))
        if slot == 2:
            lines.append(header)
    path = tmp_path / "gap.csv"
    path.write_text("\n".join(lines) + "\n")
    shell = CellShell(preset="nr-tmobile-10mhz", users=1, duration="60ms", from_log=path, follow_rnti="700")
    radio, mac = run_radio(shell, 55)
    busy = radio.busy_prbs(0, 55)
    want = np.zeros((55, 52), bool)
    want[:5, 0:10] = True
    want[50:55, 20:30] = True
    np.testing.assert_array_equal(busy, want)
    cross = mac[mac["cross_traffic"]]
    assert cross["slot"].tolist() == [*range(5), *range(50, 55)]
    assert set(cross["user"]) == {"900"}
    # the log (55 slots) repeats: TTI 55 is slot 0 again
    np.testing.assert_array_equal(radio.busy_prbs(55, 5), want[:5])


def _cli(*args):
    from airlink.cli import main
    return main(["cell", *map(str, args)])


def test_bad_logs_name_file_column_and_line(shared_data, tmp_path, capsys):
    lines = (shared_data / AFTERNOON).read_text().splitlines()[:40]
    # a missing column
    cols = lines[0].split(",")
    drop = cols.index("frequency_length")
    missing = tmp_path / "missing.csv"
    missing.write_text("\n".join(",".join(x for i, x in enumerate(l.split(",")) if i != drop) for l in lines) + "\n")
    assert _cli("--from-log", missing, "--preset", "nr-tmobile-10mhz", "--", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith("airlink: error: ") and str(missing) in err and "frequency_length" in err
    # a value that is not a number, on line 7 of the file
    bad = list(lines)
    f = bad[6].split(",")
    f[cols.index("mcs_index")] = "x"
    bad[6] = ",".join(f)
    badfile = tmp_path / "bad.csv"
    badfile.write_text("\n".join(bad) + "\n")
    assert _cli("--from-log", badfile, "--preset", "nr-tmobile-10mhz", "--", "true") == 2
    err = capsys.readouterr().err
    assert str(badfile) in err and "line 7" in err and "mcs_index" in err


@pytest.mark.parametrize("args, message", [
    (["--follow-rnti", "5"], "--follow-rnti needs --from-log"),
    (["--from-log", "{log}", "--preset", "quick"], "needs an NR preset"),
    (["--from-log", "{log}", "--preset", "nr-tmobile-10mhz", "--follow-rnti", "12345"],
     "RNTI 12345 has no downlink DCIs"),
    (["--from-log", "{log}", "--preset", "nr-tmobile-10mhz", "--scheduler", "backlog"], "rr, maxcir, pf"),
    (["--from-log", "{log}", "--preset", "nr-fr1"], "slots last 1 ms"),
    (["--from-log", "{morning}", "--preset", "nr-tmobile-10mhz", "--follow-rnti", "model"],
     "beyond the cell's 52 PRBs"),
    (["--from-log", "/no/such.csv", "--preset", "nr-tmobile-10mhz"], "/no/such.csv: no such cell log"),
])
def test_bad_options(shared_data, capsys, args, message):
    args = [a.format(log=shared_data / AFTERNOON, morning=shared_data / "nr-scope/t_mobile2_ueactivity_morning_1.csv")
            for a in args]
    assert _cli(*args, "--", "true") == 2
    err = capsys.readouterr().err
    assert err.startswith("airlink: error: ") and message in err, err


def test_library_errors_do_not_name_flags(shared_data):
    with pytest.raises(AirlinkError) as e:
        CellShell(preset="quick", from_log=shared_data / AFTERNOON)
    assert "--" not in str(e.value)


def test_help_teaches_from_log(capsys):
    with pytest.raises(SystemExit):
        _cli("--help")
    out = capsys.readouterr().out
    assert "--from-log" in out and "--follow-rnti" in out and "airlink infer cell mac.parquet" in out


def test_experiment_cell_section_from_log(shared_data, tmp_path):
    """The experiment file's `cell:` keys reach `airlink cell` (the log found from the
    experiment's folder) and the library's CellShell."""
    from airlink.cli import build_parser
    from airlink.experiment.live import cell_shell_argv
    from airlink.experiment.spec import load_experiment
    (tmp_path / "cell.csv").symlink_to(shared_data / AFTERNOON)
    spec = {"name": "measured", "cell": {"preset": "nr-tmobile-10mhz", "users": 2, "duration": "3s",
                                         "from_log": "cell.csv", "follow_rnti": [23938, "model"],
                                         "log_start": "68.5s", "applications": [{"bulk": 2}]}}
    path = tmp_path / "exp.yaml"
    import yaml
    path.write_text(yaml.safe_dump(spec))
    exp = load_experiment(path)
    argv = cell_shell_argv(exp.model.cell, exp, tmp_path, None)
    text = " ".join(argv)
    assert f"--from-log {tmp_path / 'cell.csv'} --follow-rnti 23938,model --log-start 68.5s" in text, text
    args = build_parser().parse_args(argv[argv.index("cell"):])
    assert (args.follow_rnti, args.log_start, args.log_direction) == ("23938,model", "68.5s", "downlink")
    shell = CellShell(**{**exp.model.cell.options(), "from_log": tmp_path / "cell.csv"})
    assert shell.measured.follow == ["23938", None] and shell.measured.start == 68500
    # a sweep's fingerprint covers the replayed log's content
    import hashlib

    from airlink.sweep import input_files
    digest = hashlib.sha256((shared_data / AFTERNOON).read_bytes()).hexdigest()
    assert input_files(exp)[str(tmp_path / "cell.csv")] == digest


@pytest.mark.parametrize("scheduler", ["rr", "maxcir", "lambda", "mcpfs"])
def test_every_prb_scheduler_keeps_off_the_recorded_prbs(afternoon, scheduler):
    """The other schedulers too: with full queues the UEs hold exactly the PRBs left (HARQ
    retransmissions included: every block counts as a subchannel)."""
    path, raw, _radio, _mac = afternoon
    n = 400
    first = int(START_S * 1000) + 400       # 25864 holds PRBs in most of these slots
    shell = CellShell(preset="nr-tmobile-10mhz", users=3, duration=f"{n / 1000}s", from_log=path,
                      follow_rnti=f"{FOLLOW},model,model", log_start=f"{first / 1000}s", scheduler=scheduler)
    _r, mac = run_radio(shell, n)
    others = raw[(raw["rnti"] != int(FOLLOW)) & raw["slot"].between(first, first + n - 1)]
    held = others.groupby(others["slot"] - first)["prbs"].sum().reindex(range(n), fill_value=0).to_numpy()
    assert (held > 0).sum() > 50
    live = mac[~mac["cross_traffic"]]
    per_tti = live.groupby("slot")["subchannels"].sum().reindex(range(n), fill_value=0).to_numpy()
    np.testing.assert_array_equal(per_tti, 52 - held)


def test_the_docs_example_parses():
    """docs/cell.md's --from-log command is one the CLI takes as written."""
    import re
    import shlex
    from pathlib import Path

    from airlink.cli import build_parser
    from airlink.cli._shellargs import split_command
    text = (Path(__file__).parents[2] / "docs" / "cell.md").read_text()
    cmd = next(b for b in re.findall(r"sudo (airlink cell --from-log .*?)\n(?!\s)", text, re.S))
    argv = shlex.split(cmd.replace("\\\n", " "))[1:]
    own, command = split_command(argv)
    args = build_parser().parse_args(own)
    assert args.from_log.name == "t_mobile1_ueactivity_afternoon_1.csv" and args.follow_rnti == "model"
    assert command[:2] == ["sh", "-c"]


def test_the_loop_docs_from_log_block_loads():
    import re
    from pathlib import Path

    import yaml

    from airlink.experiment.spec import load_experiment
    text = (Path(__file__).parents[2] / "docs" / "loop.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "from_log" in b)
    cell = load_experiment(yaml.safe_load(block)).model.cell
    assert (cell.from_log, cell.follow_rnti, cell.log_start) == ("t_mobile1_ueactivity_afternoon_1.csv",
                                                                 [23938, "model"], "68.5s")
