"""Every ``airlink`` command line in README.md and docs/ parses as written.

Each command in a fenced block (``$``/``sudo``/a path before ``airlink`` allowed, ``\\``
continuations joined, a trailing ``# comment`` and what follows a shell operator cut) is
parsed the way ``airlink`` parses it (:func:`airlink.cli.parse`: a shell's command split off
its own options, a nested ``airlink`` shell parsed in turn); nothing runs. A synopsis'
optional parts (``[--json]``, ``[--column C ...]``) are parsed as if given. Lines that are
airlink's own output (``airlink run: [1/5] ...``) are not commands.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from airlink.cli import parse
from airlink.cli._common import OptionError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"^(?:\$ )?(?:sudo )?(?:\S*/)?airlink (?!\S+: )(.*)$")
SHELL_OPERATORS = ("|", "||", "&&", ";", ">", ">>", "2>", "&")


def doc_commands(path: Path):
    """``(line number, command line)`` of every airlink command in the fenced blocks of
    ``path``."""
    in_block, held, start = False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            in_block, held = not in_block, ""
            continue
        if not in_block:
            continue
        text = line.strip()
        if held:
            text = f"{held} {text}"
        else:
            start = number
        if text.endswith("\\"):
            held = text[:-1].rstrip()
            continue
        held = ""
        m = COMMAND.match(text)
        if m:
            yield start, m.group(1)


def words(command: str) -> list:
    """The command's words, without a comment, shell redirections and a synopsis' brackets
    (``[--tti 0.5ms]`` -> ``--tti 0.5ms``; ``...`` dropped; of alternatives ``a|b`` the
    first)."""
    command = re.sub(r"\s#\s.*$", "", command)
    argv = shlex.split(command.replace("[", " ").replace("]", " "))
    argv = [w.split("|")[0] if "|" in w.strip("|") else w for w in argv if w != "..."]
    for i, w in enumerate(argv):
        if w in SHELL_OPERATORS:
            return argv[:i]
    return argv


def parse_nested(argv: list) -> None:
    """Parse ``argv`` as airlink does; a shell whose command is airlink again is parsed in
    turn. Raises what the parser raises."""
    while True:
        _, args = parse(argv)
        inner = getattr(args, "cmd", None) or []
        if not inner or Path(inner[0]).name != "airlink":
            return
        argv = inner[1:]


CASES = [(path, number, command) for path in DOCS for number, command in doc_commands(path)]


def test_the_docs_have_commands_to_check():
    assert len(CASES) >= 60
    assert {p.name for p, _, _ in CASES} >= {"README.md", "replay.md", "cell.md", "collectors.md"}


@pytest.mark.parametrize("path,number,command", CASES,
                         ids=[f"{p.name}:{n}" for p, n, _ in CASES])
def test_doc_command_parses(path, number, command):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse_nested(words(command))
    except SystemExit as exc:
        assert exc.code in (0, None), f"{path.name}:{number}: airlink {command}\n{err.getvalue()}"
    except OptionError as exc:
        pytest.fail(f"{path.name}:{number}: airlink {command}\nairlink: error: {exc}")


# Benchmark commands: each script parses the command lines README.md, docs/ and
# benchmarks/RESULTS.md give it, in a child process that stops at the end of parse_args
# (the script's own parser, as written; nothing measured).
BENCH = re.compile(r"\.venv/bin/python (benchmarks/\w+\.py)([^`\n]*)")
PARSE_ONLY = """
import argparse, json, runpy, sys
class Parsed(Exception):
    pass
def parse_args(self, args=None, namespace=None):
    ns = ORIGINAL(self, args, namespace)
    raise Parsed()
ORIGINAL = argparse.ArgumentParser.parse_args
argparse.ArgumentParser.parse_args = parse_args
failed = []
script, cases = sys.argv[1], json.loads(sys.argv[2])
for argv in cases:
    sys.argv = [script, *argv]
    try:
        runpy.run_path(script, run_name="__main__")
        failed.append([argv, "ran past its argument parsing"])
    except Parsed:
        pass
    except SystemExit as exc:
        if exc.code not in (0, None):
            failed.append([argv, f"exit status {exc.code}"])
print(json.dumps(failed))
"""


def bench_commands() -> dict:
    """script -> [(where, argv)] of every benchmark command in the docs."""
    found = {}
    for path in [*DOCS, ROOT / "benchmarks" / "RESULTS.md"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for script, rest in BENCH.findall(line):
                found.setdefault(script, []).append((f"{path.name}:{number}", words(rest)))
    return found


BENCHES = bench_commands()


def test_results_name_benchmark_commands():
    assert len(BENCHES) >= 10 and sum(map(len, BENCHES.values())) >= 20


@pytest.mark.parametrize("script", sorted(BENCHES))
def test_benchmark_commands_in_the_docs_parse(script):
    import json
    import subprocess
    import sys
    cases = BENCHES[script]
    r = subprocess.run([sys.executable, "-c", PARSE_ONLY, str(ROOT / script), json.dumps([a for _, a in cases])],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    failed = json.loads(r.stdout.strip().splitlines()[-1])
    where = {json.dumps(a): w for w, a in cases}
    assert not failed, "\n".join(f"{where[json.dumps(a)]}: {script} {' '.join(a)}: {why}" for a, why in failed) \
        + "\n" + r.stderr[-2000:]
