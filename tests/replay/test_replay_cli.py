"""Command-line checks that need no root: parsing, errors, help."""
from __future__ import annotations

import os

import pytest

from airlink.cli._shellargs import split_command


@pytest.mark.parametrize("argv,shell,cmd", [
    (["delay", "20", "airlink", "link", "d.trace", "--", "sh"], ["delay", "20"],
     ["airlink", "link", "d.trace", "--", "sh"]),
    (["link", "d.trace", "--uplink", "u.trace", "--", "curl", "-v"],
     ["link", "d.trace", "--uplink", "u.trace"], ["curl", "-v"]),
    (["loss", "downlink", "0.1", "ping", "x"], ["loss", "downlink", "0.1"], ["ping", "x"]),
    (["loss", "uplink", "--gilbert", "0.1,0.2", "ping"], ["loss", "uplink", "--gilbert", "0.1,0.2"], ["ping"]),
    (["delay", "--trace", "d.csv", "--stats", "s.json", "true"],
     ["delay", "--trace", "d.csv", "--stats", "s.json"], ["true"]),
    (["link", "d.trace"], ["link", "d.trace"], []),
    (["link", "d.trace", "--downlink-ecn", "--downlink-queue", "l4s", "ping"],
     ["link", "d.trace", "--downlink-ecn", "--downlink-queue", "l4s"], ["ping"]),
    (["link", "--mode", "workload", "rec", "--idle-ms", "5", "curl", "-v"],
     ["link", "--mode", "workload", "rec", "--idle-ms", "5"], ["curl", "-v"]),
])
def test_command_is_split_mahimahi_style(argv, shell, cmd):
    assert split_command(argv) == (shell, cmd)


def test_not_root_is_said_clearly(run_airlink, tmp_path, monkeypatch):
    trace = tmp_path / "c.down"
    trace.write_text("1\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    status, out, err = run_airlink("link", trace, "--", "true")
    assert status == 2
    assert err.startswith("airlink: error: airlink link needs root") and err.count("\n") == 1


@pytest.mark.parametrize("args,msg", [
    (["link", "{t}", "--downlink-queue", "droptail", "--", "true"], "needs a limit"),
    (["link", "{t}", "--downlink-queue", "droptail", "--downlink-queue-args", "packets=x", "true"],
     "whole number"),
    (["link", "missing.trace", "true"], "missing.trace: no such file"),
    (["link", "{t}", "--uplink-log", "u.log", "true"], "needs an uplink trace"),
    (["link", "{t}", "--uplink-ecn", "true"], "needs an uplink trace"),
    (["link", "{t}", "--downlink-queue", "l4s", "--downlink-queue-args", "step=0ms", "true"], "step="),
    (["link", "{t}", "--downlink-queue", "codel", "--downlink-queue-args", "ecn=perhaps", "true"],
     "ecn=1/0"),
    (["delay", "--", "true"], "give a delay in ms"),
    (["loss", "downlink", "1.5", "true"], "between 0 and 1"),
    (["loss", "downlink", "--gilbert", "0.1", "true"], "2 or 4 numbers"),
    (["loss", "downlink", "150%", "true"], "between 0 and 1 (got 1.5)"),
    (["loss", "downlink", "--gilbert", "1%,30%,0,2", "true"], "between 0 and 1 (got 2)"),
    (["loss", "downlink", "--gilbert", "0.1,x", "true"], "expected numbers"),
])
def test_bad_input_is_one_line_before_any_namespace(run_airlink, tmp_path, args, msg):
    trace = tmp_path / "c.down"
    trace.write_text("1\n")
    status, out, err = run_airlink(*[a.format(t=trace) for a in args])
    assert status == 2, err
    assert err.startswith("airlink: error:") and msg in err and err.count("\n") == 1


@pytest.mark.parametrize("typed,rate", [("0.05", 0.05), ("5%", 0.05), ("0.5 %", 0.005), ("100%", 1.0)])
def test_loss_rate_is_a_fraction_or_a_percentage(typed, rate):
    """mm-loss takes a fraction; people also write 5 %. Both mean the same coin."""
    from airlink.cli import build_parser
    args = build_parser().parse_args(["loss", "downlink", typed])
    assert args.rate == pytest.approx(rate)


@pytest.mark.parametrize("shell", ["link", "delay", "loss"])
def test_help_has_an_example(run_airlink, shell):
    status, out, _ = run_airlink(shell, "--help")
    assert status == 0 and "example:" in out


def test_a_link_shell_reads_its_trace_without_pandas(tmp_path):
    """200 shells start together: `airlink link` reads a Mahimahi trace and checks its
    options without importing pandas (~0.45 CPU-s and ~80 MB a shell); the trace it plays
    holds the file's opportunities (3 lines in ms 1, 1 in ms 2: 4500 and 1500 bytes)."""
    import subprocess
    import sys
    trace = tmp_path / "t.down"
    trace.write_text("1\n1\n1\n2\n")
    code = (
        "import sys\n"
        "from airlink.cli import build_parser\n"
        "build_parser()\n"
        "from airlink.replay import LinkShell, _fastpath, plumbing\n"
        f"s = LinkShell({str(trace)!r}, downlink_queue='droptail', downlink_queue_args='packets=10')\n"
        "assert 'pandas' not in sys.modules, 'pandas imported by a link shell without logs'\n"
        "print(s.down_trace.values[:, 0].tolist())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == "[4500.0, 1500.0]"
