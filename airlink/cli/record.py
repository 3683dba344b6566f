"""``airlink record HOST -o DIR`` / ``airlink record --serve``: record a path's traces."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, bounded, print_json, typed
from airlink.core import bounds as B
from airlink.core.errors import AirlinkError


def _train_list(text: str):
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise AirlinkError(f"train lengths must be packet counts separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise AirlinkError(f"train lengths must be positive packet counts, got {text!r}")
    return values


def register(sub):
    p = add_parser(
        sub, "record", "record a path's light, heavy, base-delay and size-offset traces",
        "Measure the path to a record server the way CellReplay's recorder does and write the "
        "traces a replay needs into DIR: CellReplay's set (up/down-heavy-pdo: a saturator's delivery "
        "opportunities; up/down-delay-light-pdo: packet trains at idle gaps with the base-delay "
        "series; latency-offset-up/down: the packet-size latency offset), Mahimahi saturator traces "
        "(mahimahi.down, mahimahi.up) and record.json (summary). Phases: light trains for SECONDS, "
        "size probes, heavy downlink for SECONDS, heavy uplink for SECONDS. Run `airlink record "
        "--serve` on the far side first (TCP and UDP on --port). Ctrl-C or a lost server ends the "
        "recording with what it has, marked incomplete in record.json (exit status 130 or 1).",
        "airlink record --serve &                        # where your server is\n"
        "sudo airlink delay 20 airlink link 12mbps.down --uplink 12mbps.down -- \\\n"
        "     sh -c 'airlink record $AIRLINK_BASE --seconds 20 -o rec/'\n"
        "mm-cellular 8 rec/up-delay-light-pdo rec/down-delay-light-pdo rec/up-heavy-pdo rec/down-heavy-pdo ...")
    p.add_argument("host", nargs="?", metavar="HOST", help="address of the record server")
    p.add_argument("-o", "--output", type=Path, metavar="DIR", help="folder for the traces")
    p.add_argument("--serve", action="store_true", help="be the record server (runs until stopped)")
    p.add_argument("--bind", default="0.0.0.0", metavar="ADDR", help="address the server listens on (all)")
    bounded(p, "--port", bound=B.PORT, default=9050, help="TCP and UDP port of the server (9050)")
    bounded(p, "--seconds", bound=B.RECORD_SECONDS, default=10.0,
            help="length of the light phase and of each heavy phase (10)")
    p.add_argument("--train-packets", type=typed(_train_list), default=(10, 40), metavar="N[,N...]",
                   help="train lengths in packets, cycled train by train (10,40)")
    bounded(p, "--train-gap", bound=B.TRAIN_GAP_MS, default=200.0, metavar="MS",
            help="time between trains in ms; the idle time before a train is half (200)")
    bounded(p, "--offset-probes", bound=B.OFFSET_PROBES, default=5, help="echo probes per packet size (5)")
    bounded(p, "--peer-timeout", bound=B.PEER_TIMEOUT_S, default=5.0, metavar="S",
            help="seconds without an answer after which the server counts as lost (5)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _say(text: str) -> None:
    """The recorder's and the server's progress lines, on stderr."""
    import sys
    print(f"airlink record: {text}", file=sys.stderr, flush=True)


def run(args) -> int:
    from airlink.replay import record as rec
    if args.serve:
        if args.host or args.output:
            raise AirlinkError("--serve takes no HOST or --output (it answers a recorder)")
        rec.RecordServer(args.bind, args.port, log=_say).serve_forever()
        return 0
    if not args.host or not args.output:
        raise AirlinkError("give the record server's HOST and -o DIR (or --serve to be the server)")
    summary = rec.record(args.host, args.output, port=args.port, seconds=args.seconds,
                         train_packets=args.train_packets, train_gap_ms=args.train_gap,
                         offset_probes=args.offset_probes, peer_timeout_s=args.peer_timeout,
                         progress=_say)
    if args.json:
        print_json(summary)
    else:
        print(format_summary(summary))
    if summary["complete"]:
        return 0
    return 130 if summary["incomplete"] == "interrupted" else 1


def format_summary(s: dict) -> str:
    lines = [f"recording {'complete' if s['complete'] else 'INCOMPLETE (' + str(s['incomplete']) + ')'}; "
             f"phases done: {', '.join(s['phases_done']) or 'none'}"]
    if "trains" in s:
        b = s["base_delay_ms"]
        lines.append(f"  light: {s['trains']} trains; one-way base delay median {b['median']:g} ms "
                     f"[{b['min']} .. {b['max']}]")
    if "size_offset_ms" in s:
        o = s["size_offset_ms"]
        lines.append(f"  size offset: {o['100']:g} ms at 100 B .. {o['1400']:g} ms at 1400 B")
    for d in ("down", "up"):
        if f"{d}_rate_bps" in s:
            lines.append(f"  heavy {d}link: {s[f'{d}_rate_bps'] / 1e6:.2f} Mbit/s")
    lines.append(f"  CellReplay set: {'yes' if s['cellreplay_set'] else 'no'}"
                 + (f" ({s['cellreplay_set_problem']})" if s.get("cellreplay_set_problem") else ""))
    lines += [f"  wrote {v}" for v in s["files"].values()]
    return "\n".join(lines)
