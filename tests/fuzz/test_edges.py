"""The "Edges" of issue 31, one test each: every input here - each of which could end in a
traceback, a MemoryError or a hang - gives exit status 2 and one line naming the option, or the file
and the field (and, for a derived size, what would have been needed).

Nothing here allocates big: the budgets (:mod:`airlink.core.bounds`) are checked before
any array of the derived size exists. Commands whose refusal comes from a library check run
in-process; the files are tiny (a few kB) except the 10^6-column CSV (~4 MB).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.errorline import one_error_line

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "examples" / "pf-cell.yaml")
HUGE = "99999999999999999999"


def one_line(status, err, *needles):
    assert status == 2, err
    one_error_line(err, *needles)


@pytest.fixture(scope="module")
def mac(tmp_path_factory) -> Path:
    """A per-user MAC frame: 2 users, 1 s of 1 ms steps, integer-valued columns with many
    levels (for --binning levels)."""
    d = tmp_path_factory.mktemp("mac")
    n = 1000
    t = pd.date_range("2024-01-01", periods=n, freq="1ms", tz="UTC")
    rng = np.random.default_rng(1)
    frame = pd.concat([pd.DataFrame({
        "time": t, "user": str(u), "assigned_rate_bps": rng.integers(0, 10**6, n).astype(float),
        "backlog_bytes": rng.integers(0, 10**6, n).astype(float), "sinr_db": rng.normal(10, 3, n),
        "served_bytes": rng.integers(0, 1500, n).astype(float), "subchannels": rng.integers(0, 4, n)})
        for u in (1, 2)], ignore_index=True)
    path = d / "mac.parquet"
    frame.to_parquet(path)
    return path


@pytest.fixture(scope="module")
def long_frame(tmp_path_factory) -> Path:
    """Two rows 1000 s apart: a 1 us grid over it would need 10^9 points."""
    path = tmp_path_factory.mktemp("long") / "long.csv"
    path.write_text("time,rate,backlog\n1700000000,1,2\n1700001000,3,4\n")
    return path


# ------------------------------------------------------------------ numbers out of range
@pytest.mark.parametrize("argv,needle", [
    (["trace", "constant", "10Mbps", "--opportunity-bytes=0"], "--opportunity-bytes: must be between 1 and 65535 (got 0)"),
    (["trace", "constant", "10Mbps", "--opportunity-bytes=-1"], "--opportunity-bytes: must be between 1 and 65535 (got -1)"),
    (["trace", "constant", "10Mbps", f"--opportunity-bytes={HUGE}"], "--opportunity-bytes"),
    (["trace", "constant", "1e15Mbps"], "RATE: must be between"),
    (["simulate", f"--pf-window={HUGE}"], "--pf-window"),
    (["simulate", f"--buffer={HUGE}"], "--buffer"),
    (["simulate", f"--csi-delay={HUGE}"], "--csi-delay"),
    (["simulate", f"--subchannels={HUGE}"], "--subchannels"),
    (["simulate", f"--users={HUGE}"], "--users"),
    (["simulate", "--users=100000000"], "--users: must be between 1 and 10000"),
    (["simulate", "--users=2000000"], "--users"),
    (["simulate", "--seed=-1"], "--seed: must be between 0"),
    (["simulate", f"--duration={HUGE}s"], "--duration"),
    (["infer", "nmi", "F", "--target", "a", "--factor", "b", f"--bins={HUGE}"], "--bins"),
    (["infer", "nmi", "F", "--target", "a", "--factor", "b", f"--surrogates={HUGE}"], "--surrogates"),
    (["infer", "nmi", "F", "--target", "a", "--factor", "b", f"--bootstrap={HUGE}"], "--bootstrap"),
    (["infer", "nmi", "F", "--target", "a", "--factor", "b", "--seed=-1"], "--seed"),
    (["infer", "nmi", "F", "--target", "a", "--factor", "b", "--resolution=1e-12s"], "--resolution"),
    (["infer", "fairness", "F", "--resolution=1e-12s"], "--resolution"),
    (["infer", "jitter", "F", "--resolution=1e-12s"], "--resolution"),
    (["infer", "fairness", "F", "--window=0s"], "--window"),
    (["infer", "backlog", "F", "--window=0s"], "--window"),
    (["infer", "fairness", "F", "--window=1e-12s"], "--window"),
    (["infer", "backlog", "F", "--window=1e-12s"], "--window"),
    (["collect", "F", "-o", "out", f"--resolution={HUGE}s"], "--resolution"),
    (["trace", "plot", "F", "-o", "x.png", f"--bin={HUGE}s"], "--bin"),
    (["trace", "from-log", "F", "-o", "x.parquet", f"--tti={HUGE}ms"], "--tti"),
    (["cell", "--users=1000"], "--users: must be between 1 and 64"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_numbers_out_of_range(argv, needle, run_airlink, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_airlink(*argv, *(["-o", "x.down"] if argv[:2] == ["trace", "constant"] else []),
                                   *(["-o", "sim"] if argv[0] == "simulate" else []))
    one_line(status, err, needle)
    assert not list(tmp_path.iterdir()), "nothing is written for a refused option"


def _choice_options():
    """(command words, option, choices) of every option of every command that takes one of
    a list of words, walked from the real parser."""
    import argparse

    from airlink.cli import build_parser

    def walk(parser, words):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, words + [name])
            elif action.option_strings and action.choices is not None and action.type is None:
                yield words, action.option_strings[-1], [str(c) for c in action.choices]
    return list(walk(build_parser(), []))


def test_every_choice_option_refuses_a_word_in_one_line(run_airlink, tmp_path, monkeypatch):
    # a word outside an option's choices is refused as a number out of bounds is: one
    # "airlink: error: --option: ..." line, not argparse's usage and "airlink cell: error:"
    monkeypatch.chdir(tmp_path)
    options = _choice_options()
    assert (["cell"], "--log-others", ["share", "demand", "flows", "mixed"]) in options
    assert len(options) >= 10
    for words, option, choices in options:
        status, out, err = run_airlink(*words, option, "no-such-word")
        one_line(status, err, f"airlink: error: {option}: invalid choice 'no-such-word' (one of {', '.join(choices)})")
    assert not list(tmp_path.iterdir())


def test_grid_budget_says_what_was_needed(run_airlink, long_frame):
    status, out, err = run_airlink("infer", "fairness", long_frame, "--rate", "rate", "--resolution", "1us")
    # 1000 s / 1 us + 1 = 1.0e9 steps, computed by hand
    one_line(status, err, str(long_frame), "needs 1e+09 grid points; at most 1e+08")


def test_levels_binning_budget(run_airlink, mac):
    """Two columns of 5000 distinct values each, kept as levels: 5000 x 5000 = 2.5e7 cells."""
    n = 5000
    t = pd.date_range("2024-01-01", periods=n, freq="1ms", tz="UTC")
    path = mac.parent / "levels.parquet"
    pd.DataFrame({"time": t, "a": np.arange(n, dtype=float), "b": np.arange(n, dtype=float)[::-1].copy()}).to_parquet(path)
    status, out, err = run_airlink("infer", "nmi", path, "--target", "a", "--factor", "b", "--binning", "levels",
                                   "--surrogates", "0", "--bootstrap", "0", "--max-lag", "1ms")
    one_line(status, err, "binning 'levels'", "5000 levels", "2.5e+07 joint-histogram cells; at most 1e+07")


def test_nmi_work_budget(run_airlink, mac):
    status, out, err = run_airlink("infer", "nmi", mac, "--target", "assigned_rate_bps", "--factor", "backlog_bytes",
                                   "--surrogates", "100000", "--bootstrap", "100000", "--max-lag", "999ms")
    one_line(status, err, "surrogates 100000 + bootstrap 100000", "histogram updates; at most 1e+10")


def test_constant_trace_budget(run_airlink, tmp_path):
    status, out, err = run_airlink("trace", "constant", "10Mbps", "--tti", "1us", "--duration", "1000s",
                                   "-o", tmp_path / "x.parquet")
    one_line(status, err, "needs 1e+09 TTIs; at most 1e+08")
    status, out, err = run_airlink("trace", "constant", "1Gbps", "--duration", "7h", "-o", tmp_path / "x.down")
    # 1e9 bit/s * 25200 s / 8 = 3.15e12 bytes = 2.1e9 opportunities of 1500 bytes
    one_line(status, err, "3.15e+12 bytes", "2.1e+09 lines of Mahimahi trace; at most 1e+08")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------- experiment, sweep, --set
@pytest.mark.parametrize("item,needle", [
    ("radio.seed=-1", "radio.seed: must be between 0"),
    ("radio.duration=1e300s", "radio.duration: must be greater than 0 s"),
    ("infer.surrogates=1000000000", "infer.surrogates: must be between 0 and 100000"),
    ("radio.seed=[1", "--set 'radio.seed=[1': not valid YAML"),
    ("radio.seed=" + "[" * 3000, "not valid YAML"),
    ("radio.seed=!!python/object/apply:os.system ['true']", "could not determine a constructor"),
])
def test_set_values(item, needle, run_airlink, tmp_path):
    status, out, err = run_airlink("run", EXAMPLE, "--offline", "-o", tmp_path / "r", "--set", item)
    one_line(status, err, needle)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("item,needle", [
    ("radio.n_users=1000000000", "n_users: must be between 1 and 10000"),
    ("radio.scheduler=..:x", "unknown scheduler '..:x'"),
])
def test_set_values_refused_by_the_simulator(item, needle, run_airlink, tmp_path):
    status, out, err = run_airlink("run", EXAMPLE, "--offline", "--quiet", "--no-report", "-o", tmp_path / "r",
                                   "--set", item)
    one_line(status, err, needle)


@pytest.mark.parametrize("item,needle", [
    ("seed=abc", "seed: must be a whole number between 0 and 9223372036854775807 (got 'abc')"),
    ("seed=-3", "seed: must be between 0"),
    ("harq_max_tx=99999999999999999999", "harq_max_tx: must be between 1 and 64"),
    ("tti=1h", "tti: must be between 1e-06 s and 60 s (got 3600 s)"),
    ("n_users=1000000000", "n_users: must be between 1 and 10000"),
])
def test_simulator_parameters_from_set(item, needle, run_airlink, tmp_path):
    status, out, err = run_airlink("simulate", "--duration", "100ms", "-o", tmp_path / "s", "--set", item)
    one_line(status, err, needle)
    assert not (tmp_path / "s").exists()


def test_simulator_budgets(run_airlink, tmp_path):
    # 1000 users x 5000 subchannels = 5e6 SINR values per TTI
    status, out, err = run_airlink("simulate", "--users", "1000", "--subchannels", "5000", "-o", tmp_path / "s")
    one_line(status, err, "1000 users x 5000 subchannels make 5e+06 SINR values per TTI; at most 1e+06")
    # 7 days of 1 ms TTIs x 100 users = 6.048e10 user-TTIs
    status, out, err = run_airlink("simulate", "--users", "100", "--duration", "168h", "-o", tmp_path / "s")
    one_line(status, err, "604800000 TTIs x 100 users", "6.05e+10 user-TTIs")
    assert not (tmp_path / "s").exists()


def test_simulate_set_is_the_same_parser(run_airlink, tmp_path):
    status, out, err = run_airlink("simulate", "-o", tmp_path / "s", "--set", "seed=[1")
    one_line(status, err, "--set 'seed=[1': not valid YAML")


@pytest.mark.parametrize("extra,needle", [
    ({"grid": {f"radio.k{i}": list(range(100)) for i in range(5)}}, "100 x 100 x 100 x 100 x 100 x 1 values make 1e+10 points"),
    ({"grid": {"radio.scheduler": ["rr"]}, "seeds": [1, 2**64]}, "seeds.1: must be between 0 and 9223372036854775807"),
])
def test_sweep_budget_and_seeds(extra, needle, run_airlink, tmp_path):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"experiment": EXAMPLE, **extra}))
    status, out, err = run_airlink("sweep", path, "-o", tmp_path / "c")
    one_line(status, err, str(path), needle)
    assert not (tmp_path / "c").exists()


# ------------------------------------------------------------------- YAML alias bombs
BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, a in zip([None, *"abcdefgh"], "abcdefghi"))


@pytest.mark.parametrize("where", ["simulate --preset", "simulate --config", "cell --preset", "radio.preset"])
def test_alias_bomb_is_refused(where, run_airlink, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    if where == "radio.preset":
        argv = ["run", EXAMPLE, "--offline", "--quiet", "--no-report", "-o", tmp_path / "r",
                "--set", f"radio.preset={bomb}"]
    elif where.startswith("cell"):
        argv = ["cell", "--preset", bomb, "--", "true"]
    else:
        argv = [*where.split(), bomb, "-o", tmp_path / "s"]
    status, out, err = run_airlink(*argv)
    one_line(status, err, str(bomb), "aliases expand to more than")


# --------------------------------------------------------------- airlink's own files
def _trace_file(tmp_path, header_change=None, raw=None, values=None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airlink import traces as T
    good = tmp_path / "good.parquet"
    T.write_trace(T.constant(10e6, 1, "1ms"), good)
    table = pq.read_table(good)
    header = json.loads(table.schema.metadata[b"airlink"])
    if values is not None:
        table = pa.table({"user_1": np.asarray(values, dtype=float)})
    meta = raw if raw is not None else json.dumps({**header, **(header_change or {})}).encode()
    path = tmp_path / "damaged.parquet"
    pq.write_table(table.replace_schema_metadata({b"airlink": meta}), path)
    return path


@pytest.mark.parametrize("damage,field", [
    (dict(raw=b"{not json"), "metadata is not valid JSON"),
    (dict(raw=b"[1, 2]"), "metadata: expected a JSON object, got list"),
    (dict(header_change={"tti_s": "0/1"}), "tti_s: must be between"),
    (dict(header_change={"tti_s": "3600/1"}), "tti_s: must be between 1e-06 s and 60 s (got 3600 s)"),
    (dict(header_change={"tti_s": 1}), "tti_s: expected exact seconds as 'num/den' (got 1)"),
    (dict(header_change={"tti_s": "1"}), "tti_s: expected exact seconds"),
    (dict(header_change={"tti_s": "1/0"}), "tti_s: zero denominator"),
    (dict(header_change={"users": None}), "users: expected a list of user names (got None)"),
    (dict(values=[np.inf] * 5), "user_1 row 1: capacity inf bytes per TTI"),
    (dict(values=[1e300] * 5), "user_1 row 1: capacity 1e+300 bytes per TTI"),
])
@pytest.mark.parametrize("command", ["info", "convert"])
def test_damaged_trace_metadata(damage, field, command, run_airlink, tmp_path):
    path = _trace_file(tmp_path, **damage)
    argv = ["trace", command, path] + ([tmp_path / "out.down"] if command == "convert" else [])
    status, out, err = run_airlink(*argv)
    one_line(status, err, str(path), field)
    assert not (tmp_path / "out.down").exists()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(["kind", "tti_s", "users", "unit", "meta", None]), value=JSON,
       raw=st.binary(max_size=40))
def test_damaged_metadata_property(field, value, raw, run_airlink, tmp_path_factory):
    """Any value in any header field (or raw bytes for the whole header): the trace reads,
    or one line names the file; never a traceback."""
    d = tmp_path_factory.mktemp("meta")
    path = _trace_file(d, header_change={field: value}) if field else _trace_file(d, raw=raw)
    for argv in (["trace", "info", path], ["trace", "convert", path, d / "out.parquet"]):
        status, out, err = run_airlink(*argv)
        assert "Traceback" not in err, err
        assert status in (0, 2), (status, err)
        if status == 2:
            one_line(status, err, str(path))


@pytest.mark.parametrize("kind", ["binary", "parquet"])
def test_callrecords_on_binary(kind, run_airlink, tmp_path, mac):
    path = mac if kind == "parquet" else tmp_path / "x.pcap"
    if kind == "binary":
        path.write_bytes(bytes(range(256)) * 20)
    status, out, err = run_airlink("collect", "--format", "callrecords", path, "-o", tmp_path / "o")
    one_line(status, err, str(path), "not a text file")


@pytest.mark.parametrize("argv", [["collect", "{fifo}", "-o", "{out}"], ["trace", "info", "{fifo}"],
                                  ["trace", "convert", "{fifo}", "{out}.parquet"], ["infer", "cell", "{fifo}"],
                                  ["trace", "from-log", "{fifo}", "-o", "{out}.parquet"]],
                         ids=lambda a: " ".join(a[:2]))
def test_fifo_refused_at_once(argv, run_airlink, tmp_path):
    """A FIFO (no writer: reading it would block forever) is refused before it is opened."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    status, out, err = run_airlink(*[a.format(fifo=fifo, out=tmp_path / "o") for a in argv])
    one_line(status, err, str(fifo), "not a regular file")


def test_csv_with_a_million_columns(run_airlink, tmp_path):
    path = tmp_path / "wide.csv"
    with open(path, "w") as f:
        f.write(",".join(f"c{i}" for i in range(10**6)) + "\n")
        for _ in range(3):
            f.write(",".join(["1"] * 10**6) + "\n")
    status, out, err = run_airlink("infer", "fairness", path)
    one_line(status, err, str(path), "line 1: more than 10000 columns")


def test_csv_with_a_long_line(run_airlink, tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("time,rate\n1700000000,1\n1700000001," + "9" * (2 << 20) + "\n")
    status, out, err = run_airlink("infer", "fairness", path)
    one_line(status, err, str(path), "line 3: longer than 1048576 bytes")


@pytest.mark.parametrize("value,why", [("-5", "is before 1990"), ("9999999999", "is more than a day in the future")])
def test_nrscope_damaged_timestamp(value, why, run_airlink, shared_data, tmp_path):
    src = shared_data / "nr-scope" / "t_mobile1_ueactivity_afternoon_1.csv"
    lines = src.read_bytes()[:20000].decode().splitlines()[:-1]
    parts = lines[5].split(",")
    parts[0] = value
    lines[5] = ",".join(parts)
    path = tmp_path / "nr.csv"
    path.write_text("\n".join(lines) + "\n")
    status, out, err = run_airlink("infer", "cell", path)
    one_line(status, err, str(path), f"line 6: timestamp {value} {why}")
    # the other infer actions read an NR-Scope CSV through the same reader: the same line
    status, out, err = run_airlink("infer", "scheduler", path)
    one_line(status, err, str(path), f"line 6: timestamp {value} {why}")


def test_icellspeed_damaged_time(run_airlink, shared_data, tmp_path):
    src = next((shared_data / "icellspeed").rglob("*.csv"))
    lines = src.read_text().splitlines()[:20]
    i = lines[0].split(",").index("seconds_since_epoch")
    parts = lines[3].split(",")
    parts[i] = "12"
    lines[3] = ",".join(parts)
    path = tmp_path / "ics.csv"
    path.write_text("\n".join(lines) + "\n")
    status, out, err = run_airlink("collect", path, "-o", tmp_path / "o")
    one_line(status, err, str(path), "row 3: seconds_since_epoch 12 is before 1990")
