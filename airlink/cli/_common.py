"""Helpers shared by the subcommands: JSON output, argument types and bounded options."""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys

from airlink.core.bounds import Bound
from airlink.core.errors import AirlinkError


class OptionError(AirlinkError):
    """A command-line value refused while the arguments are parsed; :func:`airlink.cli.main`
    prints it as one line ``airlink: error: --option: ...`` (status 2). Not a ValueError, so
    argparse passes it on instead of printing its usage."""


def json_clean(o):
    """``o`` with NaN as None and numpy scalars as Python numbers, through dicts, lists and
    tuples (lists out): what strict JSON readers take."""
    if isinstance(o, float) and o != o:
        return None
    if isinstance(o, dict):
        return {k: json_clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_clean(v) for v in o]
    if hasattr(o, "item"):
        return json_clean(o.item())
    return o


def print_json(obj) -> None:
    """One JSON document on stdout (NaN written as null)."""
    json.dump(json_clean(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


def fmt_or_missing(v, spec: str = ".3f") -> str:
    """``v`` formatted by ``spec``; a missing value (None or NaN) is ``-``, as wide as ``spec``
    says (an infinite one prints as ``inf``: a fairness gap with a user that got nothing)."""
    if v is None or (isinstance(v, float) and v != v):
        width = spec.split(".")[0]
        return "-".rjust(int(width)) if width.isdigit() else "-"
    return format(v, spec)


def typed(parse):
    """An argparse type from an airlink parser, with its message on bad input."""
    def convert(text):
        try:
            return parse(text)
        except AirlinkError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__.replace("parse_", "")
    return convert


def add_parser(sub, name: str, help: str, description: str, example: str) -> argparse.ArgumentParser:
    """A subcommand parser whose --help ends with an example."""
    from airlink.cli import Formatter
    return sub.add_parser(name, help=help, description=description, formatter_class=Formatter,
                          epilog="example:\n  " + example.strip().replace("\n", "\n  "))


_BARE_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _number(text: str, integer: bool):
    """A number typed on the command line: a whole number for ``integer`` options (``1e3``
    is 1000), else any float (NaN and infinities are left to the range check)."""
    text = str(text).strip()
    if integer:
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            raise AirlinkError(f"expected a whole number (got {text[:40]!r})") from None
        if value.is_integer():
            return int(value)
        return value                 # the range check says it is not whole
    try:
        return float(text)
    except ValueError:
        raise AirlinkError(f"expected a number (got {text[:40]!r})") from None


def probability(text):
    """A probability typed on the command line: a fraction (``0.05``) or a percentage
    (``5%`` is 0.05). The range check is the caller's (``bounded(..., bound=PROBABILITY)``)."""
    text = str(text).strip()
    if text.endswith("%"):
        return _number(text[:-1], False) / 100
    return _number(text, False)


def with_unit(parse, example: str, what: str = "duration"):
    """``parse`` (e.g. :func:`airlink.traces.parse_duration`) refusing a bare number: a
    duration or rate on the command line carries its unit (``10s``, ``48Mbps``)."""
    def convert(text):
        if _BARE_NUMBER.fullmatch(str(text)):
            raise AirlinkError(f"give a {what} with a unit (e.g. {example}), not a bare number "
                               f"(got {str(text).strip()!r})")
        return parse(text)
    convert.__name__ = getattr(parse, "__name__", "value")
    convert.needs_unit = True
    return convert


def bounded(parser, *flags, bound: Bound, parse=None, keep_text: bool = False, **kwargs):
    """Declare a numeric option (or positional) with its range, in one place.

    ``bound`` is the parameter's declared range (:mod:`airlink.core.bounds`, shared with
    the library and the experiment spec); ``parse`` turns the text into the value in
    ``bound``'s unit (default: a whole number for integer bounds, else a float). A value that
    does not parse, lies outside the range, is NaN or infinite is refused while parsing with
    ``airlink: error: --opportunity-bytes: must be between 1 and 65535 (got 0)``, exit 2.
    The range is appended to the help text. String defaults are parsed (and checked) too.
    ``keep_text``: the option's value is the text as typed (``"200ms"``), checked, for a
    library call that takes the text.
    """
    label = next((f for f in flags if f.startswith("--")), None) or kwargs.get("metavar") or flags[0].upper()

    def convert(text):
        try:
            value = parse(text) if parse is not None else _number(text, bound.integer)
        except AirlinkError as exc:
            raise OptionError(f"{label}: {exc}") from None
        why = bound.problem(value)
        if why is not None:
            raise OptionError(f"{label}: {why}")
        if keep_text:
            return str(text).strip()
        return int(value) if bound.integer else value

    convert.__name__ = bound.name
    if kwargs.get("help") and kwargs["help"] != argparse.SUPPRESS:
        kwargs["help"] = f"{kwargs['help']}; {bound.describe()}"
    action = parser.add_argument(*flags, type=convert, **kwargs)
    action.bound = bound                  # the declaration, for --help tools and the option fuzzer
    action.needs_unit = parse is not None and getattr(parse, "needs_unit", False)
    action.parses_text = parse is not None       # its own parser (sizes round to whole bytes)
    return action


def parse_sets(items) -> dict:
    """``--set NAME=VALUE`` options (``airlink run``, ``simulate``, ``cell``) -> ``{NAME: value}``,
    the value read as YAML by airlink's one YAML reader; a malformed item, broken YAML, a
    refused tag or an alias bomb is one error line naming the item."""
    from airlink.core.yamlfile import load_yaml_text
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise AirlinkError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = load_yaml_text(value, f"--set {item[:60]!r}")
    return out


def parameter_sets(items, *, also=()) -> dict:
    """``--set NAME=VALUE`` of simulator parameters (``airlink simulate``, ``cell``): as
    :func:`parse_sets`, each name and value checked against
    :class:`airlink.sim.config.CellConfig` on its own, so a bad one is one line naming the
    item (``--set 'pf_a=abc': pf_a: expected a number, got 'abc'``). ``also``: names the
    command takes beside the parameters (``seed``)."""
    from airlink.sim.config import DEFAULTS, parameter_name, validate_config
    out = {}
    for item in items:
        (name, value), = parse_sets([item]).items()
        where = f"--set {item[:60]!r}"
        if name not in also:
            validate_config({**DEFAULTS, parameter_name(name, where): value}, where)
        out[name] = value
    return out


@contextlib.contextmanager
def output_folder_option(option: str = "-o", *, overwrite: bool = True):
    """Around a command's use of its output folder: a refused folder
    (:class:`airlink.rundir.FolderNotEmptyError`, :class:`~airlink.rundir.FolderBusyError`)
    becomes one line naming ``option`` (and, with ``overwrite`` - the command has
    ``--overwrite`` and it was not given - what that option does). The one wording ``run``,
    ``simulate``, ``collect`` and ``sweep`` share."""
    from airlink.outfolder import FolderBusyError, FolderNotEmptyError
    try:
        yield
    except FolderNotEmptyError as exc:
        hint = ("; --overwrite replaces only the files an earlier airlink run lists in its "
                "manifest.json" if overwrite else "")
        raise AirlinkError(f"{option} {exc}{hint}") from None
    except FolderBusyError as exc:
        raise AirlinkError(f"{option} {exc}") from None


def add_opportunity_bytes(p) -> None:
    """``--opportunity-bytes``: the bytes one line (one delivery opportunity) of a Mahimahi
    trace stands for, when a command reads or writes one."""
    from airlink.core.bounds import OPPORTUNITY_BYTES
    from airlink.core.units import DEFAULT_OPPORTUNITY_BYTES
    bounded(p, "--opportunity-bytes", bound=OPPORTUNITY_BYTES, default=DEFAULT_OPPORTUNITY_BYTES,
            help=f"bytes per line (delivery opportunity) of a Mahimahi trace ({DEFAULT_OPPORTUNITY_BYTES}; "
                 "1504 matches mm-link's accounting)")


def add_overwrite(p, what: str = "OUTDIR") -> None:
    """The ``--overwrite`` option of a command that writes a run folder."""
    p.add_argument("--overwrite", action="store_true",
                   help=f"reuse a non-empty {what} that holds an earlier airlink run: remove the "
                        "artifacts its manifest.json lists (files airlink did not write stay); "
                        "without it, or without a manifest, such a folder is refused")


def keyword_flags(text: str, args) -> list:
    """The command-line flags for the library keywords a refusal names (library messages name
    keywords, never flags): ``by='flow'`` / ``by=['flow', 'direction']`` -> ``--by flow --by
    direction``; ``name it with rate=`` -> ``--rate COLUMN``; ``choose one (user=)`` ->
    ``--user ...``; ``pass unit='bit/s'`` -> ``--reader-option unit=bit/s``. Only flags the
    command has (attributes of ``args``) are named."""
    import ast
    flags = []
    m = re.search(r"\bby=(\[[^\]]*\]|'[^']*')", text)
    if m and hasattr(args, "by"):
        names = ast.literal_eval(m.group(1))
        flags.append(" ".join(f"--by {n}" for n in ([names] if isinstance(names, str) else names)))
    for kw in re.findall(r"name it with (\w+)=", text):
        if hasattr(args, kw):
            flags.append(f"--{kw.replace('_', '-')} COLUMN")
    if re.search(r"choose one \(user=\)", text) and hasattr(args, "user"):
        flags.append("--user ID")
    m = re.search(r"\bpass (\w+)='([^']*)'", text)
    if m and hasattr(args, "reader_option"):
        flags.append(f"--reader-option {m.group(1)}={m.group(2)}")
    return flags


def with_flag_hints(func):
    """``func(args)`` whose refusals (:class:`AirlinkError`) end with the flags that give the
    keywords they name (:func:`keyword_flags`): "... (on the command line: --by flow)"."""
    import functools

    @functools.wraps(func)
    def run(args):
        try:
            return func(args)
        except AirlinkError as exc:
            flags = keyword_flags(str(exc), args)
            if not flags:
                raise
            raise AirlinkError(f"{exc} (on the command line: {'; '.join(flags)})") from None
    return run
