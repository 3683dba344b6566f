"""Replay shells: run real applications behind emulated cellular links (Mahimahi style).

Shells run a command in a new network namespace whose only way out is a pair of TUN
devices; the shell moves packets between them through one *stage* per direction::

    from airlink.replay import LinkShell, DelayShell, LossShell
    status = LinkShell("TMobile-LTE-short.down", downlink_queue="droptail",
                       downlink_queue_args="packets=200").run(["curl", "-o", "/dev/null", url])
    DelayShell(20).run(["airlink", "link", "down.trace", "--", "iperf3", "-c", base, "-R"])

``CellShell`` / ``run_cell`` (``airlink cell``, :mod:`airlink.replay.cell`): several UEs in
their own namespaces share one live downlink scheduled by the simulator's step.

Pure parts (no root needed): queues (:mod:`airlink.replay.queues`), the byte-granular
trace server (:class:`TraceServer`) and the stages (:mod:`airlink.replay.stages`); only
:mod:`airlink.replay.plumbing` touches the kernel.
"""
from __future__ import annotations

from . import queues
from .queues import (CoDelQueue, DropHeadQueue, DropTailQueue, DualPI2Queue, InfiniteQueue, PIEQueue,
                     make_queue, parse_queue_args)
from .server import RECORD_COLUMNS, TraceServer
from .shells import DelayShell, LinkShell, LossShell, delay, link, loss
from .stages import DelaySeries, DelayStage, LinkStage, LossStage, Stage, TTILogWriter

__all__ = [
    "LinkShell", "DelayShell", "LossShell", "CellShell", "run_cell", "link", "delay", "loss", "queues",
    "make_queue",
    "parse_queue_args", "InfiniteQueue", "DropTailQueue", "DropHeadQueue", "CoDelQueue",
    "PIEQueue", "DualPI2Queue", "TraceServer", "RECORD_COLUMNS", "Stage", "LinkStage", "DelayStage",
    "LossStage", "DelaySeries", "TTILogWriter",
]


def __getattr__(name):
    """``CellShell``/``run_cell`` on first use: the cell imports the simulator (pandas,
    numba), which a link, delay or loss shell does not need - loaded eagerly it tripled
    every shell's start-up time and memory."""
    if name in ("CellShell", "run_cell"):
        from . import cell
        return getattr(cell, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
