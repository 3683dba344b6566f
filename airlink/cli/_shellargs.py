"""Splitting a shell's own options from the command it runs, Mahimahi style.

``airlink delay 20 airlink link down.trace -- sh -c '...'``: the outer shell's options end
at ``--`` or at the first word that is neither an option, an option's value nor one of the
shell's positional arguments; everything after is the command (which may itself be a shell).

What counts as an option's value and how many positionals a shell takes are read from the
shell's own argparse parser (:func:`shell_words`), so the split follows the options each
shell declares. An optional positional (``nargs="?"``) that an option replaces declares it
with :func:`replaced_by` (``airlink delay --trace DELAYS.csv`` takes no ``MS``).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class ShellWords:
    """How a shell's own words are laid out, read from its parser.

    ``values``: option string -> how many words follow it as its value (0 for a flag);
    ``positionals``: one entry per positional argument, in order, each the set of option
    strings that make it unnecessary (empty: it is always given)."""
    values: dict
    positionals: tuple

    def option(self, word: str):
        """The declared option string ``word`` names (argparse's unique-prefix rule:
        ``--downlink-q`` is ``--downlink-queue``), or None."""
        if word in self.values:
            return word
        matches = [o for o in self.values if o.startswith(word)] if word.startswith("--") else []
        return matches[0] if len(matches) == 1 else None


def replaced_by(action: argparse.Action, *options: str) -> argparse.Action:
    """Mark an optional positional as not given when one of ``options`` is (the shell's
    command then starts where the positional would have been)."""
    if action.nargs != "?":
        raise ValueError(f"{action.dest}: only an optional positional (nargs='?') can be replaced")
    action.replaced_by = frozenset(options)
    return action


def _value_words(action: argparse.Action) -> int:
    nargs = action.nargs
    if nargs is None:
        return 1
    if isinstance(nargs, int):
        return nargs
    raise ValueError(f"{'/'.join(action.option_strings)}: a shell option takes a fixed number of "
                     f"values (nargs={nargs!r} leaves the command's start ambiguous)")


def shell_words(parser: argparse.ArgumentParser) -> ShellWords:
    """The layout of a shell's words from its argparse parser (see :class:`ShellWords`).

    Raises ValueError for a declaration the split cannot follow: an option with a variable
    number of values, or a positional that takes more than one word."""
    values, positionals = {}, []
    for action in parser._actions:       # argparse has no public list of a parser's actions
        if action.option_strings:
            n = _value_words(action)
            for option in action.option_strings:
                values[option] = n
        elif action.nargs is None:
            positionals.append(frozenset())
        elif action.nargs == "?":
            positionals.append(getattr(action, "replaced_by", frozenset()))
        else:
            raise ValueError(f"{action.dest}: a shell's positional is one word (nargs={action.nargs!r})")
    return ShellWords(values, tuple(positionals))


def split_command(argv, parser: argparse.ArgumentParser | None = None):
    """``(shell_argv, command)`` with command ``[]`` when none was given.

    ``argv[0]`` is the shell's name; ``parser`` its argparse parser (default: built by
    :func:`airlink.cli.command_parser`)."""
    if parser is None:
        from airlink.cli import command_parser
        parser = command_parser(argv[0])
    words = shell_words(parser)
    given = set()
    i, seen = 1, 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], argv[i + 1:]
        if a.startswith("-") and len(a) > 1:
            name, has_value, _ = a.partition("=")
            option = words.option(name)
            if option in ("-h", "--help"):
                return argv, []
            given.add(option)
            # an unknown option is left for argparse to refuse; --opt=value is one word
            i += 1 if has_value or option is None else 1 + words.values[option]
            continue
        while seen < len(words.positionals) and words.positionals[seen] & given:
            seen += 1                    # replaced by an option given before it
        if seen < len(words.positionals):
            seen += 1
            i += 1
            continue
        return argv[:i], argv[i:]
    return argv, []
