"""Helpers shared by the subcommands: JSON output and argument types."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from airlink.traces.errors import AirlinkError


def print_json(obj) -> None:
    """One JSON document on stdout (NaN written as null)."""
    def clean(o):
        if isinstance(o, float) and o != o:
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if hasattr(o, "item"):
            return clean(o.item())
        return o
    json.dump(clean(obj), sys.stdout, indent=2)
    sys.stdout.write("\n")


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


def add_overwrite(p, what: str = "OUTDIR") -> None:
    """The ``--overwrite`` option of a command that writes a run folder."""
    p.add_argument("--overwrite", action="store_true",
                   help=f"reuse a non-empty {what} that holds an earlier airlink run: remove the "
                        "artifacts its manifest.json lists (files airlink did not write stay); "
                        "without it, or without a manifest, such a folder is refused")
