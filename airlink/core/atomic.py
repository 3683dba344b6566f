"""Atomic output files: written under a temporary name beside the final one, renamed when
complete, so a file under its final name is always whole.

Every writer of airlink artifacts goes through here (``traces`` imports nothing else from
airlink, so everything may use it). A writer that fails or is interrupted leaves at most
``NAME.partial`` - a name that does not claim to be complete - never a truncated ``NAME``.
Errors of the file system (disk full, permission, a vanished folder) become
:class:`OutputError`, one line naming the file.

What an output may replace (airlink runs as root under ``sudo``): only a regular file, or a
symbolic link to one (the link is replaced, never its target). A device, FIFO, socket or
folder at the output path - directly or behind a link: ``-o /dev/null`` - is refused before
anything is written (:func:`check_output`). ``NAME.partial`` is created exclusively
(``O_CREAT | O_EXCL | O_NOFOLLOW``, :func:`create_partial`): a leftover one of an earlier
writer - a file or a symbolic link - is removed (the link itself, never what it points to)
and the file made anew, so no writer ever opens a file it did not create.
"""
from __future__ import annotations

import errno
import os
import stat
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


def check_output(path) -> None:
    """Refuse ``path`` as an output when something other than a regular file is there (a
    device, FIFO, socket or folder, also behind a symbolic link): :class:`OutputError`
    naming it. A missing path, a regular file or a link to one may be (re)placed."""
    path = Path(path)
    try:
        st = os.stat(path)              # follows a link: what a reader of the path would get
    except FileNotFoundError:
        return                          # nothing there, or a dangling link (replaced, never followed)
    except OSError as exc:
        raise output_error(path, exc, doing="checking the output") from None
    if not stat.S_ISREG(st.st_mode):
        what = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise OutputError(f"{path}: exists and is {what}, not a regular file; airlink replaces only "
                          "regular files (choose another output)")


def create_partial(path) -> Path:
    """Create ``NAME.partial`` for writing ``path`` (after :func:`check_output`), exclusively:
    ``O_CREAT | O_EXCL | O_NOFOLLOW``, mode 0666 less the umask. A leftover ``NAME.partial``
    (a file of an interrupted writer, or a symbolic link) is unlinked first - never
    followed. Returns the temporary path, an empty regular file this call created."""
    path = Path(path)
    check_output(path)
    tmp = partial_path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for attempt in (1, 2):
        try:
            os.close(os.open(tmp, flags, 0o666))
            return tmp
        except FileExistsError:
            if attempt == 2:
                raise OutputError(f"{tmp}: appeared again while being replaced (another writer?)") from None
            try:
                if stat.S_ISDIR(os.lstat(tmp).st_mode):
                    raise OutputError(f"{tmp}: is a folder; airlink writes {path.name} through this name")
                os.unlink(tmp)          # a link is removed itself, never what it points to
            except FileNotFoundError:
                pass
            except OSError as exc:
                if isinstance(exc, AirlinkError):
                    raise
                raise output_error(path, exc, doing="removing a leftover temporary file") from None
        except OSError as exc:
            raise output_error(path, exc, doing="creating the temporary file") from None
    raise AssertionError("unreachable")


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
    check_output(path)                  # a FIFO or device put there meanwhile stays
    try:
        os.replace(partial_path(path), path)
    except OSError as exc:
        raise output_error(path, exc, doing="renaming the finished file") from None
    return path


@contextmanager
def atomic_path(path):
    """``with atomic_path(p) as tmp: write(tmp)`` - ``p`` appears only if the block succeeds.

    The folder of ``p`` is created when missing; ``tmp`` exists, an empty regular file made
    by :func:`create_partial` (so ``p`` is refused first when it is not a regular file). On
    an exception the temporary file is removed; file-system errors become OutputError.
    """
    path = Path(path)
    tmp = partial_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)     # an output's folder is made for it
        create_partial(path)
        yield tmp
    except OSError as exc:
        _discard(tmp)
        if isinstance(exc, AirlinkError):
            raise
        raise output_error(path, exc) from None
    except BaseException:
        _discard(tmp)
        raise
    commit(path)


def _discard(tmp: Path) -> None:
    """Remove a temporary file after a failure (a link itself; a folder there stays)."""
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return write_bytes(path, text.encode())
