"""The ``airlink`` command: one subcommand per module in this package.

Each module ``airlink/cli/<name>.py`` defines ``register(subparsers)`` which adds its
parser and sets ``func`` (called with the parsed arguments, returns an exit status).
Subcommands only parse arguments and call the public API. Errors caused by input
(:class:`airlink.traces.AirlinkError`, missing files) print one line
``airlink: error: ...`` and exit with status 2; no tracebacks. Ctrl-C and SIGTERM end a
command the same way (:mod:`airlink.interrupts`: its clean-up runs), with status 130 or 143
and no traceback.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import sys

# In the order `airlink --help` lists them.
COMMANDS = ["run", "simulate", "trace", "collect", "infer", "link", "delay", "loss", "cell",
            "record", "report", "sweep"]
SHELLS = ("link", "delay", "loss", "cell")

EPILOG = """\
examples:
  airlink trace info down.trace --json           summarise a capacity trace
  airlink simulate --preset evdo -o out/         simulate a cell, write capacity + MAC log
  airlink collect capture.pcap -o frames/        pcap -> flow and TCP time-series frames
  airlink infer nmi frames/mac.parquet --target assigned_rate_bps --factor backlog_bytes
  airlink delay 20 airlink link down.trace -- sh -c 'iperf3 -c $AIRLINK_BASE -R'
  airlink run examples/pf-cell.yaml -o results/  the whole loop, with a report page
"""


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps examples in descriptions and epilogs as written."""


_INVALID_CHOICE = re.compile(r"argument (?P<option>-\S+): invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)")


class Parser(argparse.ArgumentParser):
    """airlink's parsers (every subcommand's, through ``add_subparsers``): a value outside an
    option's choices is one line ``airlink: error: --option: invalid choice 'x' (one of a,
    b)``, status 2 (:class:`~airlink.cli._common.OptionError`, as a bounded option's value);
    other usage errors stay argparse's, with the usage."""

    def error(self, message):
        m = _INVALID_CHOICE.fullmatch(message)
        if m:
            from airlink.cli._common import OptionError
            raise OptionError(f"{m['option']}: invalid choice {m['value']} "
                              f"(one of {m['choices'].replace(chr(39), '')})")
        super().error(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``airlink`` parser with every command, or with the command ``only`` alone (what
    :func:`main` builds for a command line naming one: the other commands' modules are not
    imported, and the command's parsing, help and errors are the same)."""
    from airlink import __version__
    parser = Parser(
        prog="airlink", formatter_class=Formatter, epilog=EPILOG,
        description="Measure, infer and replay how cellular base-station schedulers shape TCP.")
    parser.add_argument("--version", action="version", version=f"airlink {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in [only] if only in COMMANDS else COMMANDS:  # a missing module is an error, not a gap
        importlib.import_module(f"airlink.cli.{name}").register(sub)
    parser.commands = sub.choices          # name -> the subcommand's parser
    return parser


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand (``airlink NAME``), built alone."""
    if name not in COMMANDS:
        raise ValueError(f"no airlink command {name!r}")
    sub = Parser(prog="airlink").add_subparsers()
    importlib.import_module(f"airlink.cli.{name}").register(sub)
    return sub.choices[name]


def error(message: str, status: int = 2) -> int:
    print(f"airlink: error: {message}", file=sys.stderr)
    return status


# Set by main() for the command that ran: the console entry point may then end the process
# without the interpreter's teardown (see entry()).
EXIT_AT_ONCE = False


def entry() -> None:
    """The ``airlink`` console script: :func:`main`, then exit. A command whose parser sets
    ``exit_at_once`` (``airlink collect``: ~0.1 s of freeing arrays and modules after a
    2M-packet capture) has written and closed every output when it returns, so the process
    ends at once (``os._exit`` after flushing stdout and stderr) instead of tearing the
    interpreter down; main() called in-process never does this."""
    import signal

    from airlink import interrupts
    try:
        interrupts.install()
        # a shell starts an inner airlink shell with these blocked while its interpreter
        # starts (airlink.replay._nsinit): one that came meanwhile is raised now, and ends
        # the command like any interrupt
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        status = main()
    except KeyboardInterrupt as exc:     # before or after the command's own handling
        status = interrupts.exit_status(exc)
    if EXIT_AT_ONCE:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):        # a reader gone, a stream closed
                pass
        os._exit(status)
    sys.exit(status)


def parse(argv: list) -> tuple:
    """``(parser, args)``: the command line ``argv`` (without the program name) parsed as
    :func:`main` runs it, nothing run. A shell's command line (``args.cmd``) is split off
    its own options first, with or without ``--``, as Mahimahi's shells take it. Bad options
    raise as argparse does (``SystemExit``, status 2) or
    :class:`airlink.cli._common.OptionError` (a bounded option's value, a value outside an
    option's choices)."""
    parser = build_parser(argv[0] if argv else None)
    command = None
    if argv and argv[0] in SHELLS:
        from airlink.cli._shellargs import split_command
        argv, command = split_command(argv, parser.commands[argv[0]])
    args = parser.parse_args(argv)
    if command is not None:
        args.cmd = command
    return parser, args


def main(argv=None) -> int:
    global EXIT_AT_ONCE
    from airlink.core.errors import AirlinkError
    argv = list(sys.argv[1:] if argv is None else argv)
    from airlink.cli._common import OptionError
    try:
        parser, args = parse(argv)
    except OptionError as exc:       # a bounded option's value or a choice: one line, argparse's exit status
        return error(str(exc))
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not argv else 2
    EXIT_AT_ONCE = False
    if getattr(args, "one_blas_thread", False) and "numpy" not in sys.modules:
        # numpy's OpenBLAS starts a server thread per core at import, which spins waiting
        # for work; a command that does no linear algebra asks for none (an
        # OPENBLAS_NUM_THREADS the user set is kept)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc_was_on = gc.isenabled()
    if getattr(args, "cyclic_gc", True) is False:
        # a bounded job whose arrays are freed by reference counting: the cyclic collector
        # finds a fixed handful of import-time cycles whatever the input's size, so it only
        # costs time (main() turns it back on for an in-process caller)
        gc.disable()
    from airlink.interrupts import exit_status, interrupts_as_exceptions
    try:
        with interrupts_as_exceptions():
            status = args.func(args)
        EXIT_AT_ONCE = bool(getattr(args, "exit_at_once", False))
    except AirlinkError as exc:
        return error(str(exc))
    except FileNotFoundError as exc:
        return error(f"{exc.filename}: no such file or directory" if exc.filename
                     else f"no such file or directory ({exc})")
    except PermissionError as exc:
        return error(f"{exc.filename}: permission denied")
    except IsADirectoryError as exc:
        return error(f"{exc.filename}: is a directory")
    except KeyboardInterrupt as exc:
        return exit_status(exc)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:   # any other file-system refusal: name too long, no space, read-only, ...
        what = exc.strerror or str(exc)
        return error(f"{exc.filename}: {what[:1].lower() + what[1:]}" if exc.filename else what)
    finally:
        if gc_was_on:
            gc.enable()
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    entry()
