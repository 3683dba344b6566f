"""Every numeric option of every subcommand, fuzzed with values outside its declared range.

Each option is declared once with its range (``airlink.cli._common.bounded`` and
:mod:`airlink.core.bounds`); the values drawn here are out of range *by that declaration*
(below the minimum, above the maximum, NaN, infinities, numbers too big for any type, text,
and a bare number where a unit is required), so each must be refused while the arguments
are parsed - before any file is read or anything allocated - with exit status 2 and one line
``airlink: error: --option: ...`` and no traceback.

Runs in-process (the ``run_airlink`` fixture); refused values never reach a command, so
the shells (link, delay, loss, cell) are fuzzed too: none starts.
"""
from __future__ import annotations

import argparse
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def _walk(parser, path, found):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in parser._actions:
        if getattr(action, "bound", None) is not None:
            found.append((path, parser, action))
    for sub in subs:
        for name, child in sub.choices.items():
            _walk(child, path + (name,), found)


def _bounded_options():
    from airlink.cli import build_parser
    found = []
    _walk(build_parser(), (), found)
    return found


OPTIONS = _bounded_options()


def _name(action) -> str:
    return next((f for f in action.option_strings if f.startswith("--")), None) or action.metavar


def _argv(path, parser, action, value) -> list[str]:
    """``path ... --option=value`` (so that ``-nan`` is a value, not an option); a positional
    gets the positionals before it filled with their first choice (``loss downlink RATE``)."""
    if action.option_strings:
        return [*path, f"{_name(action)}={value}"]
    before = []
    for a in parser._actions:
        if a is action:
            break
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction) and a.dest != "help":
            before.append(str(list(a.choices)[0]) if a.choices else "x")
    return [*path, *before, value]


def _text(value, bound) -> str:
    """An out-of-range number as the option's text: durations in seconds with the unit,
    rates in bit/s, sizes in bytes."""
    unit = {"s": "s", "bit/s": "bps", "bytes": "B"}.get(bound.unit, "")
    if isinstance(value, Fraction):
        value = float(value)
    text = str(value) if isinstance(value, int) else repr(float(value))
    return text + unit


@st.composite
def out_of_range(draw, bound, needs_unit: bool, parses_text: bool = False):
    """``(text, True when the refusal must state the range)``: text the declaration refuses -
    below/above the range, NaN, inf, unparsable, or (for an option that needs a unit) a bare
    number."""
    kinds = ["nan", "inf", "text", "huge"]
    if bound.lo is not None:
        kinds.append("below")
    if bound.hi is not None:
        kinds.append("above")
    if needs_unit:
        kinds.append("bare")
    if bound.integer and not parses_text:
        kinds.append("fraction")
    kind = draw(st.sampled_from(kinds))
    unit = {"s": "s", "bit/s": "bps", "bytes": "B"}.get(bound.unit, "")
    if kind == "nan":
        return draw(st.sampled_from(["nan", "NaN", "-nan"])), False
    if kind == "inf":
        return draw(st.sampled_from(["inf", "-inf", "1e309", "-1e309"])) + unit, False
    if kind == "text":
        return draw(st.sampled_from(["abc", "", "1,5", "--", "1/0", "\u00e9", "x" * 200, "0x10", "5 apples"])), False
    if kind == "huge":
        return draw(st.sampled_from(["99999999999999999999", "1e300", "-99999999999999999999"])) + unit, False
    if kind == "bare":
        return draw(st.sampled_from(["0", "1", "10", "0.5"])), False
    if kind == "fraction":
        lo = int(bound.lo) if bound.lo is not None else 0
        return f"{lo + 0.5}", False
    if kind == "below":
        lo = bound.lo
        if bound.lo_open:
            value = lo                                  # the open limit itself
        elif lo > 0 and not bound.integer:
            value = Fraction(lo) / draw(st.sampled_from([2, 10, 1000]))
        else:
            value = lo - draw(st.sampled_from([1, 10, 10**6]))
        # a negative duration or rate does not parse: refused, but not with the range
        return _text(value, bound), not (bound.unit and value < 0)
    hi = bound.hi
    if bound.hi_open:
        value = hi
    elif bound.integer:
        value = hi + draw(st.sampled_from([1, 2, 10**6]))
    else:
        value = Fraction(hi) * draw(st.sampled_from([2, 10, 10**6]))
    return _text(value, bound), True


def _accepted(args):
    return 99            # a value the parser let through: the test fails on the status


def _no_command_runs(monkeypatch):
    """Every subcommand's function replaced by :func:`_accepted`: a value that slipped past
    its range never starts a shell or a simulation here."""
    import airlink.cli as cli
    original = cli.build_parser

    def guarded(only=None):
        root = original(only)

        def walk(parser):
            for a in parser._actions:
                if isinstance(a, argparse._SubParsersAction):
                    for child in a.choices.values():
                        walk(child)
            if parser.get_default("func") is not None:
                parser.set_defaults(func=_accepted)
        walk(root)
        return root
    monkeypatch.setattr(cli, "build_parser", guarded)


def test_every_numeric_option_is_declared_with_a_range():
    """No subcommand declares a bare int/float option: each goes through bounded()."""
    from airlink.cli import build_parser
    loose = []

    def walk(parser, path):
        for a in parser._actions:
            if a.type in (int, float):
                loose.append(" ".join(path) + " " + (a.option_strings or [a.dest])[0])
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(child, path + (name,))
    walk(build_parser(), ())
    assert not loose, f"numeric options without a declared range: {loose}"
    assert len(OPTIONS) >= 40


@pytest.mark.parametrize("path,parser,action", OPTIONS,
                         ids=[" ".join(p) + " " + _name(a) for p, _, a in OPTIONS])
def test_out_of_range_values_are_one_line(path, parser, action, run_airlink, monkeypatch):
    bound = action.bound
    _no_command_runs(monkeypatch)

    values = out_of_range(bound, action.needs_unit, action.parses_text)
    if not action.option_strings:           # a positional cannot start with a dash
        values = values.filter(lambda v: not v[0].startswith("-") and v[0] != "")

    @SETTINGS
    @given(drawn=values)
    def check(drawn):
        value, in_range_message = drawn
        status, out, err = run_airlink(*_argv(path, parser, action, value))
        assert "Traceback" not in err, err
        assert status == 2, (value, status, out, err)
        assert err.count("\n") == 1 and err.startswith(f"airlink: error: {_name(action)}: "), (value, err)
        if in_range_message:          # a number on the wrong side of a limit: the message gives the range
            assert f"must be {bound.describe()} (got " in err, (value, err)
    check()


@pytest.mark.parametrize("path,parser,action", OPTIONS,
                         ids=[" ".join(p) + " " + _name(a) for p, _, a in OPTIONS])
def test_the_range_limits_themselves_are_accepted(path, parser, action):
    """The declared limits (inclusive ones) pass the option's own conversion: the range in
    the message is the range the option takes."""
    bound = action.bound
    for limit, open_ in ((bound.lo, bound.lo_open), (bound.hi, bound.hi_open)):
        if limit is None or open_:
            continue
        text = _text(limit, bound) if bound.unit else str(limit)
        if action.dest == "tti":
            text = f"{float(limit) * 1000!r}ms"
        value = action.type(text)
        assert value is not None
