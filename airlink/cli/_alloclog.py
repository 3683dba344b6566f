"""The LOG argument of the actions that read an all-user allocation log (``airlink infer
cell``, ``airlink infer pf``): declared once, read once (any collector's reader, then the
one allocation view that fairness, scheduler and jitter share)."""
from __future__ import annotations

from pathlib import Path


def add_log_arguments(p) -> None:
    """``LOG``, ``--format`` and ``--direction`` (dl/ul grants of the log)."""
    p.add_argument("log", type=Path, metavar="LOG")
    p.add_argument("--format", help="reader (default: sniffed), e.g. nrscope, mac-parquet")
    p.add_argument("--direction", choices=["dl", "ul", "downlink", "uplink"], default="dl",
                   help="DCIs of an allocation log to analyse: dl (default) or ul")


def read_log(args):
    """The log of ``args.log`` as :func:`airlink.inference.allocations.allocation_view` gives
    it: an :class:`~airlink.inference.allocations.AllocationView` (``.frame``, ``.direction``)."""
    from airlink import collectors as C
    from airlink.inference.allocations import allocation_view
    return allocation_view(C.read(args.log, format=args.format), args.direction)
