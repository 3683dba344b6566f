"""The Mahimahi-format logs' event lines, made and written beside the packet thread.

The C packet paths (the link shell's stages, the cell's UEs) record every logged event as
an :data:`~.server.EVENT` record; the shell hands those records over in batches
(``take_events``). Lines made in the thread that moves the packets would hold the packets
meanwhile (a batch of thousands of events takes milliseconds, whole TTIs), so they are
made and written by a thread of their own:

* :func:`event_lines` - the reference: a batch as lines, one
  :meth:`~airlink.traces.LinkLogWriter.event_line` per event, in the batch's order;
* ``_fastpath.format_events`` - the same lines from C (``lc_format_events`` in
  ``replay/_linkcore.c``), made without Python's lock; :func:`formatter` picks it;
* :func:`in_log_order` - a link shell's batch in the order its log lists events (by time;
  at one time opportunities, arrivals, departures, drops, marks; else as recorded), the
  order of :func:`.stages.write_events`;
* :class:`EventLogThread` - a thread that formats the batches handed to it and appends
  them to their logs, in the order they were handed over.
"""
from __future__ import annotations

import os

import numpy as np

from .server import EV_ARRIVAL, EV_DROP, EV_MARK, EV_OPPORTUNITY, EVENT

# the place of each event kind (EV_*) at one time in a link log: opportunity, arrival,
# departure, drop, mark
_LOG_RANK = np.array([1, 3, 0, 2, 4], np.int8)


def event_lines(raw, base_ns: int) -> str:
    """Logged events (:data:`EVENT` records, as ``take_events`` returns them) as lines of a
    Mahimahi-format log, times in ms since ``base_ns``: the reference of the C
    ``format_events``."""
    from airlink.traces import LinkLogWriter
    line = LinkLogWriter.event_line
    lines = []
    for t, x, kind, n in np.frombuffer(raw, EVENT).tolist():
        ms = (t - base_ns) / 1e6
        if kind == EV_ARRIVAL:
            lines.append(line(ms, "+", n))
        elif kind == EV_DROP:
            lines.append(line(ms, "d", n, x))
        elif kind == EV_OPPORTUNITY:
            lines.append(line(ms, "#", x))
        elif kind == EV_MARK:
            lines.append(line(ms, "m", n, x))
        else:
            lines.append(line(ms, "-", n, round((t - x) / 1e6)))
    return "".join(lines)


def formatter():
    """The C ``format_events`` where the shells' C path is built (and not turned off with
    ``AIRLINK_PURE_PYTHON``), else :func:`event_lines`."""
    from .stages import _fastpath
    fp = _fastpath()
    return fp.format_events if fp is not None else event_lines


def in_log_order(raw) -> bytes:
    """A link stage's batch of :data:`EVENT` records sorted as its log lists them (see the
    module notes); a stable sort, so events of one kind at one time keep their order."""
    ev = np.frombuffer(raw, EVENT)
    return ev[np.lexsort((_LOG_RANK[ev["kind"]], ev["t"]))].tobytes()


class EventLogThread:
    """Writes batches of logged events as lines, beside the packet thread: :meth:`put`
    hands a batch over (``then``, if given, is called with nothing after the batch is
    written - e.g. a per-TTI log's write of the same hand-over); the thread formats each
    with ``format(raw, base_ns)`` and appends it to ``writer`` (a
    :class:`~airlink.traces.LinkLogWriter`), in the order they were put. It runs under the
    normal policy at niceness 0, whatever the thread that made it runs at. The first failure
    (a full disk) stops the writing and :meth:`close` raises it."""

    def __init__(self, format=None, name: str = "airlink-log"):
        import queue
        import threading
        self._format = format or formatter()
        self._q, self._error = queue.SimpleQueue(), None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, writer, raw, base_ns: int, then=None) -> None:
        self._q.put((writer, raw, base_ns, then))

    def _run(self):
        try:    # not a shell loop's real-time policy, time slice or niceness, which threads inherit
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.setpriority(os.PRIO_PROCESS, 0, 0)       # on Linux: the calling thread
        except OSError:
            pass
        while (item := self._q.get()) is not None:
            if self._error is None:
                writer, raw, base_ns, then = item
                try:
                    if writer is not None and raw:
                        writer.write_lines(self._format(raw, base_ns))
                    if then is not None:
                        then()
                except BaseException as exc:       # noqa: BLE001 - raised again by close()
                    self._error = exc

    def close(self) -> None:
        """Write what was put, end the thread; raise the first failure."""
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
