"""Numba's on-disk cache, fresh only while every file a compiled function is built from is.

Numba keys a cached function on its *own* source file alone (the file's modification time
and size, in the cache's index: ``numba.core.caching.IndexDataCacheFile``). A function that
calls a compiled function of another file carries that function's machine code inside its
own, so an edit of the other file (a ``git pull``, a local change) leaves the cached code
stale: ``sim/kernel_live.py``'s live step compiles ``sim/kernel.py``'s ``run_chunk`` into
itself, and with a stale cache the live cell would decide by an older kernel than
``airlink simulate`` - the two must decide alike.

:func:`depend_on` widens a cache's freshness stamp to the SHA-256 of every file the function
is built from: when any of them changes, the cached code is not used, the function is
compiled again and the cache rewritten under the new stamp. Numba offers no public hook for
this; where the private one (``owner._cache._cache_file._source_stamp``, numba 0.59-0.68)
is missing, the function's caching is switched off instead - compiled in every process,
never stale.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["cached_cfunc", "depend_on", "files_digest"]


def files_digest(files) -> str:
    """SHA-256 (hex) over the contents of ``files``, in the order given (each file's path
    name and length go in too, so a byte moved between files changes it)."""
    h = hashlib.sha256()
    for f in files:
        data = Path(f).read_bytes()
        h.update(f"{Path(f).name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def depend_on(owner, files) -> bool:
    """Make the on-disk cache of ``owner`` fresh only while each of ``files`` is unchanged
    (besides ``owner``'s own source file, which numba checks itself).

    ``owner``: a numba dispatcher made with ``cache=True`` before its first call, or a
    ``numba.core.ccallback.CFunc`` after ``enable_caching()`` and before ``compile()``.
    Returns True when the stamp was widened, False when this numba has no such hook and
    ``owner``'s caching was switched off."""
    try:
        cache_file = owner._cache._cache_file
        own = cache_file._source_stamp
    except AttributeError:
        try:
            from numba.core.caching import NullCache
            owner._cache = NullCache()
        except ImportError:
            pass
        return False
    cache_file._source_stamp = (own, files_digest(files))
    return True


def cached_cfunc(sig, depends, **options):
    """``numba.cfunc(sig, cache=True, **options)`` whose cache is fresh only while the
    files ``depends`` are unchanged (:func:`depend_on`): a decorator."""
    def wrap(func):
        from numba.core import sigutils
        from numba.core.ccallback import CFunc
        f = CFunc(func, sigutils.normalize_signature(sig), locals={}, options=options)
        f.enable_caching()
        depend_on(f, depends)
        f.compile()
        return f
    return wrap
