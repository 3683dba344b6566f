"""``airlink delay MS -- CMD`` / ``airlink delay --trace DELAYS.csv -- CMD``: a delay shell."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, bounded
from airlink.cli._shellargs import replaced_by
from airlink.core import bounds as B
from airlink.core.errors import AirlinkError


def register(sub):
    p = add_parser(
        sub, "delay", "run a command behind a fixed or time-varying one-way delay",
        "Run CMD (default: your shell) in a new network namespace whose packets are delayed by "
        "MS milliseconds in each direction (fractions allowed), or by a delay that follows a "
        "time series (--trace: CSV with time_ms,delay_ms; linear between rows, repeating). "
        "Packets are never reordered. Nests with the other shells. Needs root.",
        "sudo airlink delay 20 -- ping -c 5 $AIRLINK_BASE\n"
        "sudo airlink delay 10 airlink link down.trace -- sh -c 'iperf3 -c $AIRLINK_BASE -R'\n"
        "sudo airlink delay --trace delays.csv -- curl http://$AIRLINK_BASE:8000/")
    replaced_by(bounded(p, "ms", nargs="?", metavar="MS", bound=B.DELAY_MS, help="one-way delay in milliseconds"),
                "--trace")
    p.add_argument("--trace", type=Path, metavar="DELAYS.csv", help="delay series (time_ms,delay_ms)")
    p.add_argument("--stats", type=Path, metavar="FILE", help="write a JSON summary at exit")
    p.set_defaults(func=run, cmd=[])


def run(args) -> int:
    from airlink.replay import DelayShell
    if (args.ms is None) == (args.trace is None):
        raise AirlinkError("give a delay in ms or --trace DELAYS.csv (one of them)")
    return DelayShell(args.ms, series=args.trace).run(args.cmd or None, stats_path=args.stats)
