"""Reading a Parquet file into a pandas frame without a Python file object.

``pandas.read_parquet(path)`` opens a local path with Python's ``open()`` and hands the file
object to pyarrow, whose read-ahead then holds Python-backed buffers (``PyBuffer``) on its
own worker threads. A worker that drops the last of them after the main thread has begun
interpreter shutdown cannot take the GIL: Python ends that thread with ``pthread_exit``,
the unwind crosses a C++ ``noexcept`` frame, and the process aborts with "terminate called
without an active exception" (exit 134) - seen on a command that read a frame and then
stopped at once on an input error. Reading the path with pyarrow's own file system keeps
every buffer native, so no worker thread ever needs the interpreter.

:func:`read_parquet_frame` is otherwise what ``pandas.read_parquet`` returns: the same
``to_pandas`` conversion and ``attrs`` restored from the ``PANDAS_ATTRS`` schema metadata
that ``DataFrame.to_parquet`` writes.
"""
from __future__ import annotations

import json
from pathlib import Path


def read_parquet_frame(path, *, columns=None, filters=None):
    """The Parquet file at ``path`` as a pandas DataFrame (``columns``, ``filters`` as for
    :func:`pyarrow.parquet.read_table`); ``attrs`` restored as pandas does."""
    import pyarrow.parquet as pq
    table = pq.read_table(str(Path(path)), columns=columns, filters=filters)
    frame = table.to_pandas()
    meta = table.schema.metadata or {}
    if b"PANDAS_ATTRS" in meta:
        frame.attrs = json.loads(meta[b"PANDAS_ATTRS"])
    return frame
