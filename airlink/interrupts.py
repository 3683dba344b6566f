"""SIGTERM handled as SIGINT: what a batch system, ``timeout`` or ``kill PID`` sends ends an
airlink command the way Ctrl-C does - the ``finally`` blocks run, temporary files are
removed or listed, a run's manifest says ``failed`` - instead of the process vanishing
mid-write.

:class:`Terminated` is a :class:`KeyboardInterrupt`, so every place that already cleans up
after Ctrl-C cleans up after SIGTERM too; its exit status is ``128 + 15`` (143), as a
process killed by SIGTERM reports, where Ctrl-C's is 130.
"""
from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM (inside :func:`sigterm_as_interrupt`)."""

    signum = signal.SIGTERM


def exit_status(exc: BaseException) -> int:
    """The exit status of a command ended by ``exc`` (a KeyboardInterrupt): 128 + signal."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread - once: a
    second SIGTERM while the clean-up runs is ignored, so the clean-up finishes. Outside the
    main thread (where Python cannot set handlers) the block runs unchanged. The earlier
    handler is restored at the end (the shells install their own forwarding handlers inside
    and restore this one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = []

    def handler(signum, frame):
        if raised:
            return
        raised.append(signum)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Held:
    """The signals :func:`interrupts_held` caught (``signals``); :meth:`raise_pending` raises
    the first as the interrupt it stands for."""

    def __init__(self):
        self.signals: list = []

    def raise_pending(self) -> None:
        if self.signals:
            first, self.signals = self.signals[0], []
            raise Terminated() if first == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def interrupts_held():
    """Within the block, SIGINT and SIGTERM are caught and kept (``Held.signals``) instead of
    interrupting: for steps that must not be cut in half - starting or closing a Dask
    cluster, whose half-made state otherwise ends in a traceback at exit. The caller raises
    them with :meth:`Held.raise_pending` where it is safe (or drops them when it is ending
    anyway). Outside the main thread the block runs unchanged."""
    held = Held()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def keep(signum, frame):
        held.signals.append(signum)

    previous = {s: signal.signal(s, keep) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


__all__ = ["Held", "Terminated", "exit_status", "interrupts_held", "sigterm_as_interrupt"]
