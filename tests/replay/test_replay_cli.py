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
])
def test_bad_input_is_one_line_before_any_namespace(run_airlink, tmp_path, args, msg):
    trace = tmp_path / "c.down"
    trace.write_text("1\n")
    status, out, err = run_airlink(*[a.format(t=trace) for a in args])
    assert status == 2, err
    assert err.startswith("airlink: error:") and msg in err and err.count("\n") == 1


@pytest.mark.parametrize("shell", ["link", "delay", "loss"])
def test_help_has_an_example(run_airlink, shell):
    status, out, _ = run_airlink(shell, "--help")
    assert status == 0 and "example:" in out
