"""Records in file order -> the same records in stable time order, a part at a time.

Captures are in time order but for records a multi-queue capture wrote late: the largest
step back (:func:`lateness`, in ns) bounds how long a row must wait before no later record
can still precede it, so a capture is put in time order with the memory of that window only
(:class:`TimeOrder`), never the whole capture. The order is that of
``np.argsort(ts, kind="stable")`` over all rows: equal times keep file order.
"""
from __future__ import annotations

import numpy as np


def lateness(ts, top=None) -> tuple:
    """(largest step back in time, in ns, from the latest earlier record to a record of
    ``ts`` - 0 when in time order -, latest time) of timestamps in file order; ``top``: the
    latest time before ``ts`` (to chain batches)."""
    if not len(ts):
        return 0, top
    if top is None and (len(ts) < 2 or (ts[1:] >= ts[:-1]).all()):
        return 0, int(ts[-1])
    run = np.maximum.accumulate(ts if top is None else np.maximum(ts, top))
    return int((run - ts).max()), int(run[-1])



def in_time_order(parts, max_lateness_ns: int, *, owned: bool = True):
    """Rows of ``parts`` (dicts of equal-length arrays with ``ts_ns``, in file order) in
    stable time order - as ``np.argsort(ts, kind="stable")`` of all of them would put them -,
    part by part (:class:`TimeOrder`, which see)."""
    order = TimeOrder(max_lateness_ns, owned=owned)
    for d in parts:
        yield from order.push(d)
    yield from order.finish()



class TimeOrder:
    """Parts of rows in file order in, the same rows in stable time order out (as
    ``np.argsort(ts, kind="stable")`` of all of them would put them), a part at a time:
    :meth:`push` takes the next part (a dict of equal-length arrays with ``ts_ns``) and
    returns the parts now settled, :meth:`finish` the rest. Every later row is at or after
    (latest time so far - ``max_lateness_ns``), so a part is passed on as it came (no copy:
    the usual case) once the next one shows that no row can still precede any of its rows;
    where the next part's rows interleave with it, the two are joined and sorted, and only
    the rows after that time wait for the next part (to which they are joined). ``owned``:
    the parts' arrays are the caller's to change - a part out of time order is then
    reordered in place (only the rows that move are written); when False (arrays another
    thread reads too), such a part is copied first."""

    def __init__(self, max_lateness_ns: int, *, owned: bool = True):
        self.late = int(max_lateness_ns)
        self.owned = owned
        self.held = None          # rows a later row could still precede
        self.whole = False        # held is a part as it came (not cut)
        self.top = None           # latest time so far

    def push(self, d: dict) -> list:
        if not len(d["ts_ns"]):
            return []
        d = _time_sorted(d, self.owned)
        first, last = int(d["ts_ns"][0]), int(d["ts_ns"][-1])
        self.top = last if self.top is None else max(self.top, last)
        held, self.held = self.held, None
        if held is None:
            self.held, self.whole = d, True
            return []
        held_last = int(held["ts_ns"][-1])
        apart = first >= held_last and held_last <= self.top - self.late
        if apart and self.whole:
            self.held = d                 # no later row can come before any of held's rows
            return [held]
        d = _time_sorted({c: np.concatenate([held[c], d[c]]) for c in d}, True)
        del held
        if apart:                         # a cut part's rest and the next part: whole again
            self.held, self.whole = d, True
            return []
        cut = int(np.searchsorted(d["ts_ns"], self.top - self.late, side="right"))
        if cut < len(d["ts_ns"]):
            self.held, self.whole = {c: v[cut:] for c, v in d.items()}, False
        return [{c: v[:cut] for c, v in d.items()}] if cut else []

    def finish(self) -> list:
        held, self.held = self.held, None
        return [] if held is None else [held]



def _time_sorted(d: dict, owned: bool) -> dict:
    """The part ``d`` in stable time order: itself when in order, else reordered in place
    (``owned``) or in a copy."""
    ts = d["ts_ns"]
    if len(ts) < 2 or not (ts[1:] < ts[:-1]).any():
        return d
    order = np.argsort(ts, kind="stable")       # equal times keep file order
    moved = np.flatnonzero(order != np.arange(len(order)))
    src = order[moved]
    if not owned:
        d = {c: v.copy() for c, v in d.items()}
    for v in d.values():
        v[moved] = v[src]                       # the right side is gathered first
    return d
