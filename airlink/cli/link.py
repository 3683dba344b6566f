"""``airlink link DOWN_TRACE [--uplink UP_TRACE] ... -- CMD``: a trace-driven link shell."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_opportunity_bytes, add_parser, bounded
from airlink.core import bounds as B

#: the disciplines of airlink.replay.queues.QUEUES, named here so that building the parser
#: imports no numpy (tests/replay/test_shell_split.py checks they agree)
QUEUES = ["infinite", "droptail", "drophead", "codel", "pie", "l4s"]


def register(sub):
    p = add_parser(
        sub, "link", "run a command behind a link whose capacity follows a trace",
        "Run CMD (default: your shell) in a new network namespace behind a link that serves "
        "each direction by a capacity trace: a Mahimahi trace (1500-byte opportunities per ms) "
        "or an airlink Parquet trace (bytes per TTI; TTIs of 0.125 to 10 ms are served as they are, "
        "longer ones split into equal sub-TTIs of at most 10 ms that share the TTI's bytes). Service is "
        "byte-granular: packets may be split across TTIs and several share one; capacity left "
        "unused in a TTI is lost. The trace loops unless --once. Without --uplink the uplink is "
        "unconstrained (mm-link takes UP DOWN; here the downlink trace comes first and the uplink's "
        "is --uplink). TCP crosses the shell as the kernel's GSO super-packets of up to 64 KB, "
        "still served and counted segment by segment (AIRLINK_OFFLOAD=0: one 1500-byte packet at "
        "a time). Inside, $AIRLINK_BASE is the address of this side. Needs root; under "
        "sudo CMD runs as you. The exit status is CMD's.",
        "sudo airlink link TMobile-LTE-short.down --uplink TMobile-LTE-short.up \\\n"
        "     --downlink-queue droptail --downlink-queue-args packets=200 \\\n"
        "     --downlink-log down.log -- sh -c 'iperf3 -c $AIRLINK_BASE -R -t 30'\n"
        "# CoDel that CE-marks ECN-capable packets instead of dropping them:\n"
        "sudo airlink link down.trace --downlink-queue codel --downlink-ecn -- ./client\n"
        "# L4S (DualPI2): ECT(1) packets marked above a 1 ms sojourn, classic traffic by PI2:\n"
        "sudo airlink link down.trace --downlink-queue l4s --downlink-queue-args step=1ms -- ./client\n"
        "# workload-aware replay of a recording (airlink record -o rec/, or a CellReplay trace set):\n"
        "# a short train after idle gets the light trains' delivery, a backlogged flow the heavy trace's\n"
        "sudo airlink link --mode workload rec/ -- sh -c 'curl -o /dev/null http://$AIRLINK_BASE/page'")
    p.add_argument("downlink", type=Path, metavar="DOWN_TRACE",
                   help="downlink capacity trace (with --mode workload: a CellReplay trace set folder)")
    p.add_argument("--mode", choices=["saturator", "workload"], default="saturator",
                   help="saturator (default): each direction drains its queue by its capacity trace; "
                        "workload: both directions from the trace set DOWN_TRACE, each packet served by "
                        "the state of the application's queue (idle: light trains, backlogged: heavy trace; "
                        "docs/replay.md); runs on the C engine, logs arrivals and departures "
                        "(--downlink-log, --uplink-log) and takes none of the queue, ECN, per-TTI log, "
                        "--uplink, --user or --once options")
    bounded(p, "--idle-ms", bound=B.DELAY_MS, default=0.0,
            help="workload mode: idle time in ms after which a packet starts a new burst on a light "
                 "train (CellReplay's long-to-short timer; 0)")
    p.add_argument("--uplink", type=Path, metavar="UP_TRACE", help="uplink capacity trace")
    p.add_argument("--user", help="user column of a multi-user Parquet trace (default the first)")
    p.add_argument("--once", action="store_true", help="do not loop the trace; stop CMD at its end")
    for d in ("downlink", "uplink"):
        p.add_argument(f"--{d}-queue", choices=QUEUES, default="infinite", help=f"{d} queue (infinite)")
        p.add_argument(f"--{d}-queue-args", metavar="ARGS",
                       help="e.g. packets=100,bytes=150000 (droptail/drophead), "
                            "target=5ms,interval=100ms (codel), qdelay_ref=15ms,max_burst=150ms (pie), "
                            "step=1ms,target=15ms (l4s)")
        p.add_argument(f"--{d}-ecn", action="store_true",
                       help=f"the {d} queue CE-marks ECN-capable packets instead of dropping them "
                            "(codel, pie; a full buffer still drops; l4s always marks); marks are "
                            "counted in --stats and logged as 'm' lines")
        p.add_argument(f"--{d}-log", type=Path, metavar="FILE", help=f"mm-link format log of the {d}")
        p.add_argument(f"--{d}-tti-log", type=Path, metavar="FILE",
                       help=f"per-TTI Parquet log of the {d} (capacity, served, backlog, drops)")
    add_opportunity_bytes(p)
    p.add_argument("--stats", type=Path, metavar="FILE",
                   help="write a JSON summary (per-direction counters, kernel drops) at exit")
    p.set_defaults(func=run, cmd=[])


def run(args) -> int:
    _refuse_a_trace_as_the_command(args)
    from airlink.replay import LinkShell
    shell = LinkShell(args.downlink, uplink=args.uplink, user=args.user, once=args.once,
                      downlink_queue=args.downlink_queue, downlink_queue_args=args.downlink_queue_args,
                      uplink_queue=args.uplink_queue, uplink_queue_args=args.uplink_queue_args,
                      downlink_ecn=args.downlink_ecn, uplink_ecn=args.uplink_ecn,
                      downlink_log=args.downlink_log, uplink_log=args.uplink_log,
                      downlink_tti_log=args.downlink_tti_log, uplink_tti_log=args.uplink_tti_log,
                      opportunity_bytes=args.opportunity_bytes, mode=args.mode, idle_ms=args.idle_ms)
    return shell.run(args.cmd or None, stats_path=args.stats)


def _refuse_a_trace_as_the_command(args) -> None:
    """mm-link takes ``UP DOWN``; this shell takes ``DOWN_TRACE`` and ``--uplink UP_TRACE``.
    A command that is a capacity trace (a file that is not executable and reads as a Mahimahi
    trace or an airlink Parquet trace) is a second trace in mm-link's place, refused before
    anything starts rather than run (``Permission denied``)."""
    import os
    if not args.cmd:
        return
    word = args.cmd[0]
    if not os.path.isfile(word) or os.access(word, os.X_OK):
        return
    from airlink.traces.mahimahi import is_trace_file
    if is_trace_file(word) or word.endswith(".parquet"):
        from airlink.core.errors import AirlinkError
        raise AirlinkError(f"{word}: a capacity trace where the command should start; airlink link takes "
                           f"the downlink trace and --uplink UP_TRACE (airlink link {args.downlink} --uplink "
                           f"{word} -- CMD), where mm-link takes UP DOWN")
