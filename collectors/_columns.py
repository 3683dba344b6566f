"""Frames as named numpy columns, written as Parquet through pyarrow without pandas.

``airlink collect`` on a capture builds its flows, series and events frames here and
writes them with pyarrow: importing pandas (~0.25 s of Python holding the GIL) would cost
more than the analysis of a 2M-packet capture's census, beside which it used to run.
:meth:`Columns.to_pandas` gives the frame the Python API has always returned, and
:meth:`Columns.to_arrow` the table ``pyarrow.Table.from_pandas`` makes of that frame -
the same types, values and pandas metadata (so ``pandas.read_parquet`` restores ``attrs``,
categoricals and time zones as before).

A column is one of
* a numpy array of numbers or bools;
* a numpy ``datetime64[ns]`` array: times in UTC (pandas ``datetime64[ns, UTC]``, arrow
  ``timestamp[ns, tz=UTC]``);
* a numpy array of ``str`` (kind ``U`` or ``object``): text (pandas ``object``, arrow ``string``);
* :class:`Coded`: integer codes into a list of strings - a pandas categorical (arrow
  dictionary) when ``categorical``, else text stored by code (a million RTT events carry
  one of two kinds: no string object per row).
"""
from __future__ import annotations

import json

import numpy as np

UTC_NS = "datetime64[ns]"


def utc_times(ns) -> np.ndarray:
    """int64 ns since the Unix epoch (UTC) as a time column."""
    return np.asarray(ns, np.int64).view(UTC_NS)


def iso_utc_times(times) -> list:
    """A time column as ISO 8601 texts, as pandas's ``Timestamp.isoformat()`` writes them in
    UTC: microseconds only when not zero, nanoseconds appended only when not zero."""
    import datetime as dt
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    out = []
    for ns in np.asarray(times).view(np.int64).tolist():
        us, rest = divmod(ns, 1000)
        t = epoch + dt.timedelta(microseconds=us)
        text = t.isoformat()
        if rest:
            text = text[:-6] + (f"{rest:03d}" if t.microsecond else f".{rest:09d}") + text[-6:]
        out.append(text)
    return out


def _code_dtype(n_values: int):
    """pandas's codes dtype for ``n_values`` categories (its smallest signed integer type)."""
    for dt in (np.int8, np.int16, np.int32):
        if n_values < np.iinfo(dt).max:
            return dt
    return np.int64


class Coded:
    """Strings by code: row ``i`` is ``values[codes[i]]``. ``categorical``: a pandas
    categorical with categories ``values`` (in that order), else plain text. ``values`` is
    a list that no one changes: a list given is shared, not copied (a packets batch of a
    capture with 500,000 addresses would copy them all twice)."""

    __slots__ = ("codes", "values", "categorical")

    def __init__(self, codes, values, categorical: bool):
        self.values = values if type(values) is list else list(values)
        self.codes = np.asarray(codes).astype(_code_dtype(len(self.values)), copy=False)
        self.categorical = categorical

    @classmethod
    def full(cls, n: int, value: str, values, categorical: bool) -> Coded:
        """``n`` rows of ``value`` (one of ``values``)."""
        values = list(values)
        return cls(np.full(n, values.index(value), _code_dtype(len(values))), values, categorical)

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows) -> Coded:
        return Coded(self.codes[rows], self.values, self.categorical)

    def strings(self) -> np.ndarray:
        """The rows as an object array of ``str`` (one object per distinct value)."""
        return np.array(self.values, dtype=object)[self.codes] if self.values else np.zeros(len(self.codes), object)

    def present(self) -> Coded:
        """The same rows with only the values that occur, in their order (pandas's
        ``astype("category")`` of text whose categories were sorted: its categories are
        the values present)."""
        used = np.flatnonzero(np.bincount(self.codes.astype(np.int64), minlength=len(self.values)))
        remap = np.zeros(len(self.values), np.int64)
        remap[used] = np.arange(len(used))
        return Coded(remap[self.codes], [self.values[i] for i in used.tolist()], self.categorical)

    @staticmethod
    def concat(parts: list) -> Coded:
        """Parts of the same kind; values are united in order of first appearance."""
        values, index = [], {}
        for p in parts:
            for v in p.values:
                if v not in index:
                    index[v] = len(values)
                    values.append(v)
        codes = [np.asarray([index[v] for v in p.values], np.int64)[p.codes] if p.values != values[:len(p.values)]
                 else p.codes for p in parts]
        return Coded(np.concatenate(codes) if codes else np.zeros(0, np.int8), values, parts[0].categorical)


class Columns:
    """An ordered set of equal-length named columns (see the module notes) and ``attrs``
    (JSON-able provenance: source, resolution, ...)."""

    def __init__(self, data: dict | None = None, attrs: dict | None = None):
        self.data: dict = {}
        self.attrs = dict(attrs or {})
        data = data or {}
        sized = [len(c) for c in data.values() if isinstance(c, Coded) or np.ndim(c) != 0]
        for name, col in data.items():        # scalars hold for every row
            self[name] = col if isinstance(col, Coded) or np.ndim(col) != 0 else np.full(sized[0] if sized else 0, col)

    def __len__(self) -> int:
        return len(next(iter(self.data.values()))) if self.data else 0

    @property
    def columns(self) -> list:
        return list(self.data)

    def __contains__(self, name) -> bool:
        return name in self.data

    def __getitem__(self, name):
        return self.data[name]

    def __setitem__(self, name, col) -> None:
        """Set a column; a scalar holds for every row (of a frame that has columns)."""
        if not isinstance(col, Coded):
            col = np.asarray(col)
            if col.ndim == 0:
                col = np.full(len(self), col)
        if self.data and name not in self.data and len(col) != len(self):
            raise ValueError(f"column {name!r}: {len(col)} rows for a frame of {len(self)}")
        self.data[name] = col

    def select(self, names) -> Columns:
        """The columns ``names`` (copies: the caller may keep them while this frame changes)."""
        return Columns({n: self.data[n].take(np.arange(len(self))) if isinstance(self.data[n], Coded)
                        else self.data[n].copy() for n in names}, self.attrs)

    def take(self, rows) -> Columns:
        """The rows ``rows`` (indices or a boolean mask), in that order."""
        return Columns({n: c.take(rows) if isinstance(c, Coded) else c[rows] for n, c in self.data.items()},
                       self.attrs)

    def sort_by(self, keys, *, consume: bool = False) -> Columns:
        """Rows sorted stably by ``keys`` (first key first; a categorical by its codes, as
        pandas sorts categories in their order); itself when they are in order already.
        ``consume``: this frame hands each column over as it is sorted (it is empty
        afterwards, unless already in order), so one column at a time is held twice."""
        arrays = [(self.data[k].codes if isinstance(self.data[k], Coded) else self.data[k]) for k in keys]
        order = np.lexsort(arrays[::-1]) if len(self) > 1 else None
        del arrays
        if order is None or (order[1:] > order[:-1]).all():
            return self
        if not consume:
            return self.take(order)
        out = Columns(attrs=self.attrs)
        for name in list(self.data):
            col = self.data.pop(name)
            out.data[name] = col.take(order) if isinstance(col, Coded) else col[order]
            del col
        return out

    @staticmethod
    def concat(frames: list, *, consume: bool = False) -> Columns:
        """Frames with the same columns, one after the other (``attrs`` of the first).
        ``consume``: the frames hand each column over as it is joined (they are empty
        afterwards), so one column at a time is held twice."""
        first = frames[0]
        attrs = dict(first.attrs)
        data = {}
        for name, col in list(first.data.items()):
            parts = [f.data.pop(name) if consume else f.data[name] for f in frames]
            del col
            data[name] = Coded.concat(parts) if isinstance(parts[0], Coded) else np.concatenate(parts)
            del parts
        return Columns(data, attrs)

    # -- the frames users get -----------------------------------------------------
    def to_pandas(self, *, consume: bool = False):
        """The pandas DataFrame (``attrs`` copied). Columns are added one by one, so pandas
        makes no consolidated copy of the whole frame (a 2M-packet packets frame);
        ``consume``: this frame hands each column over as it goes (it is empty afterwards),
        so a column pandas converts (times, codes) is not held twice."""
        import pandas as pd
        frame = pd.DataFrame(index=pd.RangeIndex(len(self)))
        for name in list(self.data):
            col = self.data.pop(name) if consume else self.data[name]
            if isinstance(col, Coded):
                # (pandas types the categories of an empty column float64)
                categories = pd.Index(col.values, dtype=object if col.values else np.float64)
                frame[name] = pd.Categorical.from_codes(col.codes, categories=categories) \
                    if col.categorical else col.strings()
            elif col.dtype.kind == "M":
                frame[name] = pd.DatetimeIndex(col).tz_localize("UTC")
            elif col.dtype.kind == "U":
                frame[name] = col.astype(object)
            else:
                frame[name] = col
        frame.attrs = dict(self.attrs)
        return frame

    def to_arrow(self):
        """The pyarrow Table of :meth:`to_pandas` as ``pyarrow.Table.from_pandas(...,
        preserve_index=False)`` makes it, pandas metadata included - built from the arrays
        (:func:`arrow_array`; pandas only for what has no arrow twin here: an empty frame,
        whose text columns pandas types by their values)."""
        import pyarrow as pa
        if not len(self) or any(c.dtype == object and not _all_str(c) for c in self.data.values()
                                if not isinstance(c, Coded)):
            return pa.Table.from_pandas(self.to_pandas(), preserve_index=False)
        described = []
        for name, col in self.data.items():
            if isinstance(col, Coded) and col.categorical:
                described.append(_described(name, "categorical", str(col.codes.dtype),
                                            {"num_categories": len(col.values), "ordered": False}))
            elif isinstance(col, Coded) or col.dtype.kind in "UO":
                described.append(_described(name, "unicode", "object"))
            elif col.dtype.kind == "M":
                described.append(_described(name, "datetimetz", UTC_NS, {"timezone": "UTC"}))
            else:
                described.append(_described(name, str(col.dtype), str(col.dtype)))
        return pa.Table.from_arrays([arrow_array(c) for c in self.data.values()], names=list(self.data)) \
            .replace_schema_metadata(pandas_metadata(described, self.attrs))

    def validate(self, kind: str, *, name: str) -> Columns:
        """:func:`airlink.core.schema.validate` of the frame, on the arrays."""
        from airlink.core.schema import check_columns
        types = {n: (False, "category" if c.categorical else "object") if isinstance(c, Coded)
                 else (c.dtype.kind in "biufc", str(c.dtype)) for n, c in self.data.items()}
        t = self.data.get("time")
        utc = t is not None and not isinstance(t, Coded) and t.dtype.kind == "M"
        check_columns(kind, name, types, time_dtype="UTC" if utc else None if t is None else types["time"][1],
                      time_sorted=utc and not (len(t) > 1 and (t[1:] < t[:-1]).any()))
        return self


def arrow_array(col):
    """A column as a pyarrow Array built from its buffers (no copy of numbers and times;
    :mod:`airlink.core.arrowarrays`): ``pyarrow.array()`` would import pandas (~0.25 s) to
    ask whether it was given a pandas object. Floats' NaN are null, as ``from_pandas``
    makes them; a categorical :class:`Coded` is a dictionary array."""
    import pyarrow as pa
    from airlink.core.arrowarrays import numpy_array, strings
    if isinstance(col, Coded):
        if col.categorical:
            return pa.DictionaryArray.from_arrays(numpy_array(col.codes), strings(col.values))
        return strings(col.values, col.codes)
    return numpy_array(col)


def _all_str(col) -> bool:
    return all(isinstance(v, str) for v in col.tolist())


def _described(name: str, pandas_type: str, numpy_type: str, metadata=None) -> dict:
    return {"name": name, "field_name": name, "pandas_type": pandas_type, "numpy_type": numpy_type,
            "metadata": metadata}


_PANDAS_VERSION = None


def pandas_version() -> str:
    """The installed pandas's version, read from its distribution's folder name (PEP 427)
    beside the package, without importing pandas (importlib.metadata costs ~30 ms)."""
    global _PANDAS_VERSION
    if _PANDAS_VERSION is None:
        import importlib.util
        from pathlib import Path
        spec = importlib.util.find_spec("pandas")
        found = sorted(Path(spec.origin).parent.parent.glob("pandas-*.dist-info")) \
            if spec is not None and spec.origin else []
        if len(found) == 1:
            _PANDAS_VERSION = found[0].name[len("pandas-"):-len(".dist-info")]
        else:                                       # not a plain install: ask pandas itself
            import pandas
            _PANDAS_VERSION = pandas.__version__
    return _PANDAS_VERSION


def pandas_metadata(described: list, attrs: dict) -> dict:
    """The schema metadata ``pyarrow.Table.from_pandas(frame, preserve_index=False)``
    writes (``described``: per column its name, pandas and numpy types and metadata)."""
    import pyarrow as pa
    return {b"pandas": json.dumps({
        "index_columns": [], "column_indexes": [], "columns": described, "attributes": attrs,
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": pandas_version()}).encode("utf8")}
