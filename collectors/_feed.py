"""Decoded batches of one pass over a capture, handed from the thread that reads them to a
thread that consumes them (:class:`BatchFeed`): ``airlink collect``'s packets pass takes the
batches of the analysis' streamed pass instead of reading and decoding the capture again.

The hand-over is bounded (:data:`BatchFeed.DEPTH` batches), so memory does not grow with the
capture; neither side can leave the other waiting for ever: a consumer that stops
(:meth:`BatchFeed.abandon`) makes the producer drop what it would put, and a producer that
fails or stops early closes the feed with its error, which the consumer raises.
"""
from __future__ import annotations

import queue
import threading

_POLL_S = 0.05


class BatchFeed:
    """One pass's batches, in file order: ``(columns, pflow, swap, keys, v6)`` - the decoded
    columns (the producer may still be reading them: the consumer must not change them in
    place), each
    packet's provisional connection number and endpoint-order bit (see
    :class:`._connections.Connections`), and the keys ``(lo, hi, proto)`` and IPv6 addresses of
    the connections first met in that batch (None when there are none). After the last
    batch, :attr:`end` holds the pass's ``reader`` and ``unknown`` link types."""

    DEPTH = 4

    def __init__(self):
        self._queue = queue.Queue(maxsize=self.DEPTH)
        self._gone = threading.Event()
        self.end: dict | None = None

    # ---- the producer's side
    def put(self, columns: dict, pflow, swap, keys=None, v6=None) -> None:
        """Hand over one batch (waits while :data:`DEPTH` batches wait; dropped when the
        consumer is gone)."""
        self._put((columns, pflow, swap, keys, v6))

    def close(self, *, reader=None, unknown=None, error=None) -> None:
        """The pass is over: complete (``reader``, ``unknown``), or ended by ``error``."""
        self.end = {"reader": reader, "unknown": unknown, "error": error}
        self._put(None)

    def _put(self, item) -> None:
        while not self._gone.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    # ---- the consumer's side
    def batches(self, stop=None):
        """The batches as they come; raises :class:`InterruptedError` when ``stop`` (a
        ``threading.Event`` or None) is set, or when the pass ended with an error."""
        while True:
            try:
                item = self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if stop is not None and stop.is_set():
                    raise InterruptedError("the packets pass was stopped") from None
                continue
            if item is None:
                if self.end["error"] is not None:
                    raise InterruptedError(f"the pass over the capture that fed the packets pass "
                                           f"ended: {self.end['error']!r}")
                return
            yield item

    def abandon(self) -> None:
        """The consumer is done (or failed): the producer no longer waits to put."""
        self._gone.set()
