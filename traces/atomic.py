"""Atomic output files: written under a temporary name beside the final one, renamed when
complete, so a file under its final name is always whole.

Every writer of airlink artifacts goes through here (``traces`` imports nothing else from
airlink, so everything may use it). A writer that fails or is interrupted leaves at most
``NAME.partial`` - a name that does not claim to be complete - never a truncated ``NAME``.
Errors of the file system (disk full, permission, a vanished folder) become
:class:`OutputError`, one line naming the file.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path

from .errors import AirlinkError

PARTIAL_SUFFIX = ".partial"


class OutputError(AirlinkError, OSError):
    """Writing an output file failed (disk full, permission, ...); the message names it."""


def partial_path(path) -> Path:
    """The temporary name a file is written under before it is complete: ``NAME.partial``."""
    path = Path(path)
    if not path.name or path.name in (".", ".."):
        raise OutputError(f"{str(path) or repr('')}: not a file name (a folder or empty)")
    return path.with_name(path.name + PARTIAL_SUFFIX)


def output_error(path, exc: OSError, *, doing: str = "writing") -> OutputError:
    """An :class:`OutputError` for ``exc`` raised while ``doing`` ``path``; says what is left."""
    path = Path(path)
    why = os.strerror(exc.errno) if getattr(exc, "errno", None) else str(exc)
    if getattr(exc, "errno", None) == errno.ENOSPC:
        why = "no space left on device"
    left = partial_path(path)
    kept = f"; incomplete output kept as {left.name}" if left.exists() else ""
    return OutputError(f"{path}: {why} while {doing}{kept}")


def commit(path) -> Path:
    """Give the finished ``NAME.partial`` its final name (atomic on one file system)."""
    path = Path(path)
    try:
        os.replace(partial_path(path), path)
    except OSError as exc:
        raise output_error(path, exc, doing="renaming the finished file") from None
    return path


@contextmanager
def atomic_path(path):
    """``with atomic_path(p) as tmp: write(tmp)`` - ``p`` appears only if the block succeeds.

    The folder of ``p`` is created when missing. On an exception the temporary file is
    removed; file-system errors become OutputError.
    """
    path = Path(path)
    tmp = partial_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)     # an output's folder is made for it
        yield tmp
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, AirlinkError):
            raise
        raise output_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    commit(path)


def write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes(path, text.encode())
