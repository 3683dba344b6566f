"""Arrow arrays built from numpy buffers, without loading pandas.

``pyarrow.array(ndarray)`` and ``pyarrow.table(dict)`` ask pandas whether their input is a
pandas object, which imports pandas (0.25-0.5 s of CPU) in a process that has no other use
for it (``airlink collect`` and ``airlink simulate`` writing their Parquet files). These
build the same arrays from the numpy buffers (numbers and times without a copy):

- :func:`numpy_array`: a 1-d numpy column - numbers, bools, ``datetime64[ns]`` times (UTC),
  ``str`` - as ``pyarrow.Table.from_pandas`` would store it (a float NaN is null), or with
  ``nan_is_null=False`` as ``pyarrow.array`` would (NaN stays a value);
- :func:`strings`: a string array of a list of ``str``, or of ``values[codes]`` for
  strings given as codes into a few values.
"""
from __future__ import annotations

import numpy as np

__all__ = ["numpy_array", "strings"]


def numpy_array(col, arrow_type=None, *, nan_is_null: bool = True):
    """The 1-d numpy array ``col`` as an Arrow array.

    ``datetime64`` -> ``timestamp[ns, tz=UTC]``; bool -> ``bool``; ``str`` (kind ``U`` or
    ``object``) -> ``string``; numbers -> the numpy dtype's Arrow type, or ``arrow_type`` of
    the same width (e.g. ``timestamp("ns", tz="UTC")`` for int64 nanoseconds). Float NaN is
    null unless ``nan_is_null=False``."""
    import pyarrow as pa
    if np.ndim(col) != 1:
        raise ValueError(f"numpy_array: need a 1-d array, got shape {np.shape(col)}")
    n = len(col)
    if col.dtype.kind in "UO":
        return strings(col.tolist())
    if col.dtype.kind == "b":
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(np.packbits(col, bitorder="little"))],
                                     null_count=0)
    col = np.ascontiguousarray(col)
    if not col.dtype.isnative:
        col = col.astype(col.dtype.newbyteorder("="))
    if col.dtype.kind == "M":
        return pa.Array.from_buffers(pa.timestamp("ns", tz="UTC"), n,
                                     [None, pa.py_buffer(col.astype("datetime64[ns]", copy=False).view(np.int64))],
                                     null_count=0)
    if col.dtype.kind not in "iuf":
        raise ValueError(f"numpy_array: no Arrow column for numpy {col.dtype}")
    typ = pa.from_numpy_dtype(col.dtype) if arrow_type is None else arrow_type
    if typ.bit_width != col.dtype.itemsize * 8:
        raise ValueError(f"numpy_array: {typ} does not hold {col.dtype} values")
    validity, nulls = None, 0
    if nan_is_null and col.dtype.kind == "f":
        nan = np.isnan(col)
        nulls = int(nan.sum())
        if nulls:
            validity = pa.py_buffer(np.packbits(~nan, bitorder="little"))
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(col)], null_count=nulls)


def strings(values: list, codes=None):
    """A pyarrow ``string`` array of ``values`` (a list of ``str``), or of
    ``values[codes]`` (codes in ``0 .. len(values) - 1``; the bytes laid out per value, a
    byte position at a time: few distinct values of a few bytes;
    ``DictionaryArray.cast`` would import pyarrow.compute, ~25 ms)."""
    import pyarrow as pa
    encoded = [str(v).encode() for v in values]
    if codes is None:
        offsets = np.zeros(len(encoded) + 1, np.int32)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets),
                                                                  pa.py_buffer(b"".join(encoded))], null_count=0)
    codes = np.asarray(codes)
    if len(codes) and (codes.min() < 0 or codes.max() >= len(encoded)):
        raise ValueError("strings: a code outside the values")
    sizes = np.array([len(e) for e in encoded] or [0], np.int64)[codes]
    offsets = np.zeros(len(codes) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    for v, e in enumerate(encoded):
        rows = offsets[:-1][codes == v]
        for j, byte in enumerate(e):
            data[rows + j] = byte
    return pa.Array.from_buffers(pa.string(), len(codes), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(data)], null_count=0)
