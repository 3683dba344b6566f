"""``airlink loss uplink|downlink RATE -- CMD`` (or ``--gilbert``): a random-loss shell."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, bounded, probability
from airlink.cli._shellargs import replaced_by
from airlink.core import bounds as B
from airlink.core.errors import AirlinkError


def register(sub):
    p = add_parser(
        sub, "loss", "run a command behind random packet loss on one direction",
        "Run CMD (default: your shell) in a new network namespace that loses packets on one "
        "direction: independently with probability RATE, or in bursts by a Gilbert-Elliott "
        "chain (--gilbert P_GB,P_BG[,LOSS_G,LOSS_B], stepped per packet; defaults LOSS_G=0, "
        "LOSS_B=1). Needs root.",
        "sudo airlink loss downlink 0.01 -- curl -o /dev/null http://$AIRLINK_BASE:8000/big\n"
        "sudo airlink loss uplink --gilbert 0.01,0.3 -- iperf3 -c $AIRLINK_BASE")
    p.add_argument("direction", choices=["uplink", "downlink"])
    replaced_by(bounded(p, "rate", nargs="?", metavar="RATE", bound=B.PROBABILITY, parse=probability,
                        help="loss probability (0.05 or 5%%)"),
                "--gilbert")
    p.add_argument("--gilbert", metavar="P_GB,P_BG[,LOSS_G,LOSS_B]",
                   help="bursty loss instead of RATE: the chance per packet of moving from the good state "
                        "to the bad one and back, and the loss probability in each (each 0-1 or a "
                        "percentage)")
    bounded(p, "--seed", bound=B.SEED, help="seed of the loss coin (default: random)")
    p.add_argument("--stats", type=Path, metavar="FILE", help="write a JSON summary at exit")
    p.set_defaults(func=run, cmd=[])


def run(args) -> int:
    from airlink.replay import LossShell
    gilbert = None
    if args.gilbert:
        gilbert = [_gilbert_value(args.gilbert, x) for x in args.gilbert.split(",")]
        if len(gilbert) not in (2, 4):
            raise AirlinkError(f"--gilbert {args.gilbert}: expected 2 or 4 numbers")
    if (args.rate is None) == (gilbert is None):
        raise AirlinkError("give a loss RATE or --gilbert (one of them)")
    return LossShell(args.direction, args.rate or 0.0, gilbert=gilbert, seed=args.seed).run(
        args.cmd or None, stats_path=args.stats)


def _gilbert_value(given: str, text: str) -> float:
    """One of --gilbert's probabilities, checked against its range."""
    try:
        value = probability(text)
    except AirlinkError:
        raise AirlinkError(f"--gilbert {given}: expected numbers P_GB,P_BG[,LOSS_G,LOSS_B]") from None
    why = B.PROBABILITY.problem(value)
    if why is not None:
        raise AirlinkError(f"--gilbert {given}: each probability {why}")
    return value
