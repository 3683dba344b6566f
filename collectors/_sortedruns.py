"""A frame built in pieces larger in all than memory: sorted runs on disk, read back merged.

The TCP analysis of a capture in flow groups (:func:`.tcp.analyze_tcp` with ``max_packets``)
makes each group's series and events as a frame of its own, sorted by time; the frame a
user gets is all of them joined and sorted stably by the same keys (``time, flow,
direction`` for the series, ``time, flow`` for the events). :class:`SortedRuns` gives that
frame without holding it: each group's frame (a *run*) is sorted and its columns are
written to a temporary file as it is made, and :meth:`SortedRuns.chunks` reads the runs
back merged in key order, a bounded number of rows of each run at a time - memory follows
the number of runs times a window, not the frame (a k-way merge, as an external sort does).

Equal to :meth:`._columns.Columns.concat` of the runs in the order they were added
followed by a stable :meth:`._columns.Columns.sort_by` of the keys, value for value and
type for type, provided that no key value occurs in two runs (the keys hold the flow
number, and a flow is in one group only): numbers take the type numpy's concatenation
gives them (:func:`numpy.result_type` of the runs'), text held by code
(:class:`._columns.Coded`) the values of all runs united in order of first appearance,
as ``Coded.concat`` unites them.

:class:`JoinedRuns` is its twin in memory, with the same interface: the runs are held as
they are added and joined and sorted once, which is that definition itself - for a caller
whose frame fits (the analysis' flows table, frames asked for whole).
"""
from __future__ import annotations

import tempfile

import numpy as np

from ._columns import Coded, Columns, _code_dtype

#: Rows of a merged chunk (what :meth:`SortedRuns.chunks` yields, a Parquet row group when
#: written), and of the windows of all runs together, at most ...
CHUNK_ROWS = 1 << 18
#: ... and about this many bytes of columns: a merge holds a chunk several times over (the
#: windows, the merged parts, the chunk, its Arrow table), and a flows table's row is ~400
#: bytes (its address columns fixed-width text) against ~50 for an events row.
CHUNK_BYTES = 16 << 20
#: A run's window holds at least this many rows, however many runs there are.
MIN_WINDOW = 4096
#: Runs kept apart at most: when there are this many, they are merged into one run on disk
#: (so the windows of a merge, MAX_RUNS x MIN_WINDOW rows at most, do not grow with the
#: number of runs).
MAX_RUNS = 64


class _Runs:
    """What both kinds share: the sort ``keys``, the frame's ``attrs``, the first frame added
    (its columns), the runs, their rows in all and the :attr:`finish` functions."""

    def __init__(self, keys, attrs: dict | None = None):
        self.keys = list(keys)
        self.attrs = dict(attrs or {})
        self._first: Columns | None = None
        self._runs: list = []
        self._rows = 0
        #: functions applied to each merged frame before it is yielded (each takes and
        #: returns a :class:`._columns.Columns`)
        self.finish: list = []

    def __len__(self) -> int:
        return self._rows

    @property
    def columns(self) -> list:
        return [] if self._first is None else self._first.columns


class SortedRuns(_Runs):
    """Frames (runs) with the same columns, added one at a time with :meth:`add` and kept
    on disk, that together make one frame sorted stably by ``keys``; :meth:`chunks` yields
    it in order, :meth:`whole` in one piece. ``attrs``: the frame's provenance (as
    :attr:`._columns.Columns.attrs`). Coded key columns must have the same values in every
    run (their codes are compared). ``folder``: where the runs' file is made (the system's
    temporary folder when None; a caller writing big outputs passes their folder, since the
    temporary folder may be a tmpfs, i.e. memory); it has no name there and is gone when
    closed or when the process ends, however it ends."""

    def __init__(self, keys, attrs: dict | None = None, folder=None):
        super().__init__(keys, attrs)
        # runs: per run (rows, {name: (byte offset, dtype)}, {name: values}); _first: the
        # first frame's columns, no rows
        self._file = tempfile.TemporaryFile(dir=folder)
        self._dtypes: dict = {}        # name -> dtype of the joined column
        self._values: dict = {}        # name of a Coded column -> [values united, index, categorical]

    def add(self, frame: Columns) -> None:
        """A run: ``frame`` sorted by the keys (handed over: it is emptied) and written."""
        if self._first is None:
            self._first = frame.take(np.zeros(0, np.int64))
        if not len(frame):             # (an empty frame may lack the columns' dtypes)
            return
        frame = frame.sort_by(self.keys, consume=True)
        n = len(frame)
        where, values = {}, {}
        for name in list(frame.data):
            col = frame.data.pop(name)
            if isinstance(col, Coded):
                united = self._values.setdefault(name, [[], {}, col.categorical])
                if name in self.keys and self._runs and col.values != self._runs[0][2][name]:
                    raise ValueError(f"SortedRuns: key column {name!r} has values {col.values} in one "
                                     f"run and {self._runs[0][2][name]} in another")
                for v in col.values:
                    if v not in united[1]:
                        united[1][v] = len(united[0])
                        united[0].append(v)
                values[name] = col.values
                col = col.codes
            elif col.dtype.kind == "O":
                raise TypeError(f"SortedRuns: column {name!r} holds Python objects")
            else:
                self._dtypes[name] = col.dtype if name not in self._dtypes \
                    else np.result_type(self._dtypes[name], col.dtype)
            col = np.ascontiguousarray(col)
            where[name] = (self._file.seek(0, 2), col.dtype)
            col.tofile(self._file)
            del col
        self._runs.append((n, where, values))
        self._rows += n
        if len(self._runs) >= MAX_RUNS:
            self._merge_runs()

    def _merge_runs(self) -> None:
        """The runs, merged into one run (written after them in the file)."""
        total = sum(n for n, _, _ in self._runs)
        where, values, at = {}, {}, self._file.seek(0, 2)
        for name, (_, dtype) in self._runs[0][1].items():
            if name in self._values:
                values[name] = list(self._values[name][0])
                dtype = np.dtype(_code_dtype(len(values[name])))
            else:
                dtype = self._dtypes[name]
            where[name] = (at, dtype)
            at += total * dtype.itemsize
        done = 0
        for chunk in self._merged(CHUNK_ROWS, self._runs):
            for name, (offset, dtype) in where.items():
                col = chunk[name]
                self._file.seek(offset + done * dtype.itemsize)
                np.ascontiguousarray(col.codes if isinstance(col, Coded) else col, dtype).tofile(self._file)
            done += len(chunk)
        self._runs = [(total, where, values)]

    def _read(self, run: tuple, start: int, stop: int) -> Columns:
        """Rows ``start:stop`` of run ``run``, in the joined frame's types and codes."""
        rows, where, values = run
        data = {}
        for name, (offset, dtype) in where.items():
            self._file.seek(offset + start * dtype.itemsize)
            col = np.fromfile(self._file, dtype, stop - start)
            if name in values:
                united = self._values[name]
                codes = np.asarray([united[1][v] for v in values[name]], np.int64)
                data[name] = Coded(codes[col] if values[name] != united[0][:len(values[name])] else col,
                                   list(united[0]), united[2])     # (united[0] grows with the runs)
            else:
                data[name] = col.astype(self._dtypes[name], copy=False)
        return Columns(data, self.attrs)

    def values(self, name: str) -> list:
        """The values of Coded column ``name`` over all runs (in order of first appearance)."""
        return list(self._values[name][0]) if name in self._values else []

    def column_parts(self, name: str, rows: int | None = None):
        """Column ``name`` (a number column) of every run, in parts of at most ``rows`` rows,
        in the order the runs were added (not merged)."""
        rows = CHUNK_ROWS if rows is None else rows
        for n, where, _ in self._runs:
            offset, dtype = where[name]
            for start in range(0, n, rows):
                self._file.seek(offset + start * dtype.itemsize)
                yield np.fromfile(self._file, dtype, min(rows, n - start))

    def rows(self, index) -> Columns:
        """Rows by their position among the runs' rows in the order the runs were added (as
        :meth:`column_parts` lists them; ``index``: int positions), in the joined frame's
        types, sorted by the keys and through :attr:`finish` - a few rows of a big frame
        without merging it."""
        index = np.sort(np.asarray(index, np.int64))
        window = self._chunk_rows()
        parts, start = [], 0
        for run in self._runs:
            n = run[0]
            picks = index[(index >= start) & (index < start + n)] - start
            # a window of rows read at a time: from its first pick to its last
            for w in np.unique(picks // window).tolist():
                p = picks[(picks >= w * window) & (picks < (w + 1) * window)]
                parts.append(self._read(run, int(p[0]), int(p[-1]) + 1).take(p - p[0]))
            start += n
        return _finished(self, Columns.concat(parts) if parts else Columns(dict(self._first.data), self.attrs))

    def _chunk_rows(self) -> int:
        """Rows of a chunk: :data:`CHUNK_ROWS`, fewer where that is more than
        :data:`CHUNK_BYTES` of columns."""
        width = sum(dtype.itemsize for _, dtype in self._runs[0][1].values()) if self._runs else 1
        return min(CHUNK_ROWS, max(MIN_WINDOW, CHUNK_BYTES // max(1, width)))

    def _key_le(self, frame: Columns, key: tuple) -> int:
        """How many rows of ``frame`` (sorted by the keys) have keys <= ``key``: a binary
        search per key, within the rows equal on the keys before it."""
        lo, hi = 0, len(frame)
        for i, (name, v) in enumerate(zip(self.keys, key)):
            col = frame[name]
            col = (col.codes if isinstance(col, Coded) else col)[lo:hi]
            last = i == len(self.keys) - 1
            a = int(np.searchsorted(col, v, "left"))
            b = int(np.searchsorted(col, v, "right"))
            if last or a == b:
                return lo + b
            lo, hi = lo + a, lo + b
        return hi

    def _key_at(self, frame: Columns, row: int) -> tuple:
        return tuple((frame[k].codes if isinstance(frame[k], Coded) else frame[k])[row] for k in self.keys)

    def chunks(self, rows: int | None = None):
        """The joined frame, sorted, as frames of about ``rows`` rows (default
        :data:`CHUNK_ROWS`, fewer where that is more than :data:`CHUNK_BYTES`; the last
        fewer), each through the functions of :attr:`finish` (a frame without rows when no
        run has any)."""
        for chunk in self._merged(self._chunk_rows() if rows is None else rows, self._runs):
            for f in self.finish:
                chunk = f(chunk)
            yield chunk

    def _merged(self, rows: int, runs: list):
        """The rows of ``runs`` (entries of ``self._runs``) merged, in frames of about ``rows``."""
        if not self._rows:
            if self._first is not None:
                yield Columns(self._first.data, self.attrs)
            return
        k = len(runs)
        window = max(MIN_WINDOW, rows // k)
        pos = [0] * k                  # next row of each run not yet in its window
        held: list = [None] * k        # each run's window (rows not yet merged)
        pending, npending = [], 0
        while True:
            for r in range(k):
                if (held[r] is None or not len(held[r])) and pos[r] < runs[r][0]:
                    stop = min(pos[r] + window, runs[r][0])
                    held[r] = self._read(runs[r], pos[r], stop)
                    pos[r] = stop
            live = [r for r in range(k) if held[r] is not None and len(held[r])]
            if not live:
                break
            # rows up to the smallest last key of a window that its run continues past can go:
            # no row read later precedes them
            open_ = [self._key_at(held[r], len(held[r]) - 1) for r in live if pos[r] < runs[r][0]]
            frontier = min(open_) if open_ else None
            parts = []
            for r in live:
                n = len(held[r]) if frontier is None else self._key_le(held[r], frontier)
                if n:
                    parts.append(held[r].take(slice(0, n)))
                    held[r] = held[r].take(slice(n, None))
            merged = Columns.concat(parts).sort_by(self.keys, consume=True) if len(parts) > 1 else parts[0]
            pending.append(merged)
            npending += len(merged)
            if npending >= rows:
                yield Columns.concat(pending, consume=True) if len(pending) > 1 else pending[0]
                pending, npending = [], 0
        if pending:
            yield Columns.concat(pending, consume=True) if len(pending) > 1 else pending[0]

    def whole(self) -> Columns:
        """The joined frame in one piece."""
        parts = list(self.chunks())
        return Columns.concat(parts, consume=True) if len(parts) > 1 else parts[0]

    def close(self) -> None:
        self._file.close()


class JoinedRuns(_Runs):
    """:class:`SortedRuns` in memory: the same interface (:meth:`add`, :meth:`chunks`,
    :meth:`whole`, :meth:`values`, :attr:`finish`, ``attrs``) and the same frame,
    :meth:`._columns.Columns.concat` of the runs with rows in the order they were added,
    sorted stably by ``keys`` (the first frame added, sorted, when none has rows), through
    the functions of :attr:`finish` once. ``folder`` is accepted and unused."""

    def __init__(self, keys, attrs: dict | None = None, folder=None):
        super().__init__(keys, attrs)            # runs: the frames as added; _first: the first
        self._whole: Columns | None = None

    def add(self, frame: Columns) -> None:
        """A run (held, not copied)."""
        if self._whole is not None:
            raise RuntimeError("JoinedRuns: a run added after the frame was joined")
        if self._first is None:
            self._first = frame
        if len(frame):
            self._runs.append(frame)
            self._rows += len(frame)

    def values(self, name: str) -> list:
        """The values of Coded column ``name`` over all runs with rows (in order of first
        appearance)."""
        united: list = []
        for run in self._runs:
            united += [v for v in run[name].values if v not in united]
        return united

    def column_parts(self, name: str, rows: int | None = None):
        """Column ``name`` of every run, in the order the runs were added (not merged); the
        runs are whole (``rows`` is accepted and unused)."""
        for run in self._runs:
            yield run[name]

    def chunks(self, rows: int | None = None):
        """The joined frame in one chunk (``rows`` is accepted and unused)."""
        yield self.whole()

    def rows(self, index) -> Columns:
        """:meth:`SortedRuns.rows`: rows by position in the runs as added."""
        if self._whole is not None:
            raise RuntimeError("JoinedRuns: rows of runs already joined")
        index = np.sort(np.asarray(index, np.int64))
        parts, start = [], 0
        for run in self._runs:
            n = len(run)
            parts.append(run.take(index[(index >= start) & (index < start + n)] - start))
            start += n
        return _finished(self, Columns.concat(parts) if parts else self._first.take(np.zeros(0, np.int64)))

    def whole(self) -> Columns:
        """The joined frame, sorted, through :attr:`finish` (made once: the runs are handed
        over to it column by column)."""
        if self._whole is None:
            out = Columns.concat(self._runs, consume=True) if self._runs else self._first
            self._runs, self._first = [], out
            out = out.sort_by(self.keys, consume=True)
            for f in self.finish:
                out = f(out)
            out.attrs = self.attrs
            self._whole = out
        return self._whole

    def close(self) -> None:
        self._runs, self._first, self._whole = [], None, None


def _finished(runs: _Runs, frame: Columns) -> Columns:
    """``frame`` (rows of ``runs``) sorted by its keys and through its :attr:`finish`."""
    frame = frame.sort_by(runs.keys, consume=True)
    for f in runs.finish:
        frame = f(frame)
    frame.attrs = runs.attrs
    return frame


class SpooledPieces:
    """Pieces - tuples of 1-d arrays, the same number of arrays in each - appended one at a
    time and given back once, in the order appended (:meth:`drain`). With ``file`` (an
    open binary file, e.g. a nameless temporary one, which several of them may share; its
    owner closes it) they are written to its end as they come, so that what an analysis
    gathers over a whole long flow (an RTT sample per ACK) waits on disk, not in memory;
    without, they are held. The arrays come back with the dtypes they had; a piece's arrays
    may differ in length."""

    def __init__(self, file=None):
        self._file = file
        self._pieces: list = []        # the pieces, or per piece [(byte offset, dtype, length)]

    def append(self, piece: tuple) -> None:
        if self._file is None:
            self._pieces.append(tuple(piece))
            return
        where = []
        for a in piece:
            a = np.ascontiguousarray(a)
            where.append((self._file.seek(0, 2), a.dtype, len(a)))
            a.tofile(self._file)
        self._pieces.append(where)

    def drain(self):
        """The pieces in the order appended, each forgotten as it is given."""
        pieces, self._pieces = self._pieces, []
        pieces.reverse()
        while pieces:
            piece = pieces.pop()
            if self._file is None:
                yield piece
                continue
            out = []
            for offset, dtype, n in piece:
                self._file.seek(offset)
                out.append(np.fromfile(self._file, dtype, n))
            yield tuple(out)


__all__ = ["SortedRuns", "JoinedRuns", "SpooledPieces", "CHUNK_ROWS"]
