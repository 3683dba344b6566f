"""Arrow arrays from numpy arrays without loading pandas.

``pyarrow.array(ndarray)`` and ``pyarrow.table(dict)`` ask pandas whether their input is a
pandas object, which imports pandas (about half a second of CPU) in a process that has no
other use for it, such as ``airlink simulate`` writing its Parquet files. These build the
same arrays from the numpy buffers themselves:

- :func:`numeric_array`: an int64 / float64 / ... column (or timestamps given as integer
  nanoseconds), equal to ``pyarrow.array(values, type)``;
- :func:`string_array`: strings given as codes into a few names, equal to
  ``pyarrow.array(names[codes], pyarrow.string())``.
"""
from __future__ import annotations

import numpy as np


def numeric_array(values: np.ndarray, arrow_type=None):
    """The 1-d numpy array ``values`` (bool excluded) as an Arrow array of ``arrow_type``
    (default: the numpy dtype's own), without nulls; ``arrow_type`` must have the same
    width (e.g. ``timestamp("ns", tz="UTC")`` for int64 nanoseconds)."""
    import pyarrow as pa
    a = np.ascontiguousarray(values)
    if a.ndim != 1 or a.dtype.kind not in "iuf":
        raise ValueError(f"numeric_array: need a 1-d integer or float array, got {a.dtype} {a.shape}")
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    typ = pa.from_numpy_dtype(a.dtype) if arrow_type is None else arrow_type
    if typ.bit_width != a.dtype.itemsize * 8:
        raise ValueError(f"numeric_array: {typ} does not hold {a.dtype} values")
    return pa.Array.from_buffers(typ, len(a), [None, pa.py_buffer(a)])


def string_array(codes: np.ndarray, names) -> object:
    """Arrow ``string`` array whose row ``i`` is ``names[codes[i]]`` (codes in
    ``0 .. len(names) - 1``): a dictionary of the names, decoded by Arrow."""
    import pyarrow as pa
    names = [str(n) for n in names]
    raw = [n.encode() for n in names]
    offsets = np.zeros(len(raw) + 1, np.int32)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    dictionary = pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets),
                                                               pa.py_buffer(b"".join(raw))])
    codes = np.asarray(codes)
    if len(codes) and (codes.min() < 0 or codes.max() >= len(names)):
        raise ValueError("string_array: a code outside the names")
    indices = numeric_array(codes.astype(np.int32, copy=False))
    return pa.DictionaryArray.from_arrays(indices, dictionary).dictionary_decode()
