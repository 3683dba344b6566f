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
    """Raised in the main thread by SIGTERM (:func:`interrupts_as_exceptions`, :func:`install`)."""

    signum = signal.SIGTERM


def exit_status(exc: BaseException) -> int:
    """The exit status of a command ended by ``exc`` (a KeyboardInterrupt): 128 + signal."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


#: a second SIGINT/SIGTERM this soon after the first is the same interrupt arriving twice (the
#: terminal's Ctrl-C reaches the whole process group, and a shell relays it once more): ignored,
#: so the clean-up the first started runs to its end; a later one interrupts again
REPEAT_S = 2.0


_last_raised: list = []      # monotonic time of the last interrupt raised, shared by every handler


def _handler(signum, frame):
    """SIGINT/SIGTERM: raise KeyboardInterrupt / :class:`Terminated`, unless one was raised
    less than :data:`REPEAT_S` ago (then the signal is ignored)."""
    import time
    now = time.monotonic()
    if _last_raised and now - _last_raised[0] < REPEAT_S:
        return
    _last_raised[:] = [now]
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def install() -> bool:
    """For the ``airlink`` process itself (:func:`airlink.cli.entry`): SIGINT and SIGTERM raise
    as :func:`interrupts_as_exceptions` does, for the rest of the process. False outside the main
    thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _handler)
    return True


@contextlib.contextmanager
def interrupts_as_exceptions():
    """Within the block, SIGTERM raises :class:`Terminated` and SIGINT KeyboardInterrupt in the
    main thread - a repeat within :data:`REPEAT_S` is ignored, so the clean-up finishes.
    Outside the main thread (where Python cannot set handlers) the block runs unchanged. The
    earlier handlers are restored at the end (the shells install their own forwarding
    handlers inside and restore these)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


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


__all__ = ["Held", "REPEAT_S", "Terminated", "exit_status", "install", "interrupts_held", "interrupts_as_exceptions"]
