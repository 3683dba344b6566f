"""Property-based fuzzing of the command line (run by test_fuzz_readers.py under the same
memory cap): every subcommand that does not start a shell, with options drawn from its own
parser and values drawn from what users mistype (empty, negative, huge, NaN, wrong unit,
a directory, a binary file, a missing file, damaged real files).

The property: ``airlink.cli.main(argv)`` returns an exit status or argparse exits with 2,
and what it prints on an error is one ``airlink: error:`` line (or argparse's usage) - never
a traceback or any other exception. The shells (link, delay, loss, cell) are left out: with
valid options they start a namespace and an interactive shell; their option errors are
tested in tests/replay. So is ``record`` (its option errors: tests/replay/test_record_netns.py).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
EXAMPLES = int(os.environ.get("AIRLINK_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=60_000, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
# the shells, and `record` (with valid options it serves forever or measures a network path)
SHELLS = {"link", "delay", "loss", "cell", "record"}
ODD = ["", "-1", "0", "1e309", "nan", "inf", "-inf", "99999999999999999999", "1,5", "10", "1s", "5ms",
       "10 Mbit/s", "0.5", "abc", "x" * 300, "--", "-", "packets=-3", "users=0", "a=b=c", "\u00e9\u00e8", "1/0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-inputs")
    out = {"missing": str(d / "missing.pcap"), "dir": str(d)}
    (d / "bin.dat").write_bytes(bytes(range(256)) * 20)
    out["binary"] = str(d / "bin.dat")
    (d / "empty.csv").write_text("")
    out["empty"] = str(d / "empty.csv")
    (d / "bad.yaml").write_text("radio: {preset: quick, duration: x}\ncollect: {resolutoin: 1s}\n")
    out["yaml"] = str(d / "bad.yaml")
    (d / "list.yaml").write_text("- 1\n- 2\n")
    out["yaml-list"] = str(d / "list.yaml")
    for key, rel, limit in [("trace", "mahimahi-traces/TMobile-LTE-short.down", 3000),
                            ("pcap", "tcp-pcaps/zeek-head/206_example_b.pcap", 20000),
                            ("ucc", "ucc-5g/Download/Static/B_2019.12.16_13.40.04.csv", 6000),
                            ("nrscope", "nr-scope/t_mobile1_ueactivity_afternoon_1.csv", 8000)]:
        src = SHARED / rel
        if src.exists():
            p = d / src.name
            p.write_bytes(src.read_bytes()[:limit])
            out[key] = str(p)
    return out


def _parsers():
    """{('trace', 'info'): parser, ('collect',): parser, ...} for every non-shell command."""
    from airlink.cli import build_parser
    root = build_parser()
    found = {}

    def walk(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found[path] = parser
        for action in subs:
            for name, child in action.choices.items():
                if not path and name in SHELLS:
                    continue
                walk(child, path + (name,))
    walk(root, ())
    found.pop((), None)
    return found


PARSERS = _parsers()


@st.composite
def argv_for(draw, path, files):
    parser = PARSERS[path]
    values = st.sampled_from(ODD + list(files.values()))
    argv = list(path)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.dest in ("duration",) and path == ("simulate",):
            continue
        if not action.option_strings:           # positional
            if action.nargs in ("?", "*") and draw(st.booleans()):
                continue
            argv.append(draw(values))
            continue
        if not draw(st.integers(0, 3)) == 0:
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(flag)
        elif action.choices and draw(st.booleans()):
            argv += [flag, str(draw(st.sampled_from(list(action.choices))))]
        else:
            argv += [flag, draw(values)]
    if path == ("simulate",):
        argv += ["--duration", "20ms"]
    if path and path[0] in ("run", "sweep") and path != ("sweep", "report"):
        argv = [a for a in argv if a not in (files.get("trace"), files.get("pcap"))]
    return argv


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: "-".join(p))
def test_cli_fuzz(path, files, tmp_path_factory, monkeypatch):
    from airlink.cli import main
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))

    @SETTINGS
    @given(argv=argv_for(path, files))
    def run(argv):
        if path and path[0] in ("run", "sweep") and "--offline" not in argv and path != ("sweep", "report"):
            argv = argv + ["--offline"] if path == ("run",) else argv
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                status = main(argv)
            except SystemExit as e:           # argparse's own usage errors
                status = e.code
        text = err.getvalue()
        assert "Traceback" not in text, (argv, text[-3000:])
        assert isinstance(status, int), (argv, status)
        if status == 2 and "airlink: error:" in text:
            errors = [l for l in text.splitlines() if l.startswith("airlink: error:")]
            assert len(errors) == 1, (argv, text)
    run()
