"""The split of a shell's own words from its command follows the shell's real parser.

For every option of every shell, an argv ``SHELL OPTION [VALUE...] POSITIONALS true -v`` must
split at ``true``, and the shell's part must be exactly what argparse accepts (the parser
is run on it with its value types switched off, so the words count, not the values).
"""
from __future__ import annotations

import argparse

import pytest

from airlink.cli import SHELLS, command_parser
from airlink.cli._shellargs import shell_words, split_command

COMMAND = ["true", "-v"]


def _cases():
    """``(shell, action, spelling)``: every option of every shell, a value given as the next
    word(s) and, for an option that takes one, joined as ``--option=VALUE``."""
    for name in SHELLS:
        for a in command_parser(name)._actions:
            if a.option_strings and a.dest != "help":
                yield name, a, "separate"
                if a.nargs != 0:
                    yield name, a, "joined"


def _untyped(parser):
    """The parser with every value taken as text: argparse's word counting, no conversion."""
    for action in parser._actions:
        action.type = None
    return parser


def _sample(action) -> str:
    return str(list(action.choices)[0]) if action.choices else "1"


@pytest.mark.parametrize("shell,action,spelling", list(_cases()),
                         ids=lambda v: v if isinstance(v, str) else v.option_strings[-1])
def test_every_option_of_every_shell_is_split_as_its_parser_reads_it(shell, action, spelling):
    parser = command_parser(shell)
    option = action.option_strings[-1]
    n = 1 if action.nargs is None else action.nargs
    if spelling == "joined":
        own = [f"{option}={_sample(action)}"]
    else:
        own = [option] + [_sample(action)] * n
    positionals = [a for a in parser._actions if not a.option_strings]
    own += [_sample(a) for a in positionals if option not in getattr(a, "replaced_by", ())]
    argv = [shell, *own, *COMMAND]
    assert split_command(argv, parser) == ([shell, *own], COMMAND)
    _untyped(parser).parse_args(own)          # argparse takes exactly these words


def test_the_shells_declare_what_their_commands_take():
    """Hand-read from the shells' declarations (cli/delay.py, cli/link.py, cli/loss.py)."""
    delay = shell_words(command_parser("delay"))
    assert {o for o, n in delay.values.items() if n} == {"--trace", "--stats"}
    assert delay.positionals == (frozenset({"--trace"}),)
    link = shell_words(command_parser("link"))
    assert "--tti-log" not in link.values and link.values["--downlink-tti-log"] == 1
    assert link.values["--once"] == 0 and len(link.positionals) == 1
    loss = shell_words(command_parser("loss"))
    assert loss.positionals == (frozenset(), frozenset({"--gilbert"}))


@pytest.mark.parametrize("argv,own,cmd", [
    # argparse's unique-prefix rule: --downlink-queue-a is --downlink-queue-args, a value
    # follows; --downlink-q is ambiguous (argparse refuses it), one word
    (["link", "d.trace", "--downlink-queue-a", "packets=9", "ping"],
     ["link", "d.trace", "--downlink-queue-a", "packets=9"], ["ping"]),
    (["link", "d.trace", "--downlink-q", "droptail", "ping"], ["link", "d.trace", "--downlink-q"],
     ["droptail", "ping"]),
    # options no shell declares are one word, left for argparse to refuse
    (["delay", "20", "--uplink", "u.trace", "true"], ["delay", "20", "--uplink"], ["u.trace", "true"]),
    (["delay", "--trace", "d.csv", "sh", "-c", "x"], ["delay", "--trace", "d.csv"], ["sh", "-c", "x"]),
    (["cell", "--users", "2", "--realtime", "./dl.sh"], ["cell", "--users", "2", "--realtime"], ["./dl.sh"]),
    (["delay", "20", "--help", "x"], ["delay", "20", "--help", "x"], []),
])
def test_split_by_hand(argv, own, cmd):
    assert split_command(argv) == (own, cmd)


@pytest.mark.parametrize("argv,msg", [
    (["delay", "20", "--uplink", "u.trace", "--", "true"], "unrecognized arguments: --uplink"),
    (["link", "d.trace", "--tti-log", "t.parquet", "--", "true"], "unrecognized arguments: --tti-log"),
])
def test_options_a_shell_does_not_declare_are_refused(run_airlink, argv, msg):
    status, out, err = run_airlink(*argv)
    assert status == 2 and msg in err


def test_a_variable_number_of_values_is_refused_in_a_shell():
    p = argparse.ArgumentParser()
    p.add_argument("--many", nargs="+")
    with pytest.raises(ValueError, match="--many"):
        shell_words(p)


def test_the_link_shells_queue_choices_are_the_queues_there_are():
    """``airlink link --downlink-queue`` lists its choices without importing the queues
    (numpy); they must be exactly the disciplines replay.queues builds."""
    from airlink.cli.link import QUEUES
    from airlink.replay.queues import QUEUES as BUILT
    assert sorted(QUEUES) == sorted(BUILT)


def test_the_cells_rps_choices_are_the_modes_it_steers():
    """``airlink cell --rps`` (and an experiment's ``cell.rps``) list the modes without
    importing the cell (numpy); they must be exactly those the cell shell takes."""
    from airlink.cli.cell import RPS_MODES
    from airlink.replay.cell import RPS_MODES as STEERED
    assert RPS_MODES == STEERED


@pytest.mark.parametrize("order", ["up down", "down up"])
def test_a_second_trace_in_mm_links_place_is_refused_before_anything_starts(run_airlink, shared_data, order):
    """mm-link takes UP DOWN; `airlink link A B -- CMD` takes B as the command. A command that
    is a capacity trace is refused in one line that shows the right order, before any root
    check or namespace (not run, to fail with 'Permission denied')."""
    traces = shared_data / "mahimahi-traces"
    up, down = traces / "Verizon-LTE-short.up", traces / "Verizon-LTE-short.down"
    first, second = (up, down) if order == "up down" else (down, up)
    status, _, err = run_airlink("link", first, second, "--", "true")
    assert status == 2 and err.count("\n") == 1, err
    assert f"{second}: a capacity trace where the command should start" in err
    assert f"(airlink link {first} --uplink {second} -- CMD), where mm-link takes UP DOWN" in err
