"""Output folders airlink writes into - often as root under ``sudo`` - made, locked and
cleaned without ever acting outside them.

The rules every command that writes a folder follows (``run``, ``simulate``, ``collect``,
``sweep``; the run folder of :mod:`airlink.rundir` is built on them):

* **Resolved once** (:func:`resolve_output`): ``~``, symbolic links and ``..`` are resolved
  before any check, and every later step uses that one absolute path - ``nothere/../victim``
  is ``victim``, and is checked as such.
* **Made, not adopted** (:func:`make_folders`): the missing folders are made one by one and
  only those this call really made are returned (never a folder that existed, never a
  ``..``); only they may later be given to the ``sudo`` user.
* **Locked** (:class:`FolderLock`): an exclusive ``flock`` on the folder itself (its directory
  descriptor, so nothing is added to the folder) for as long as one writer works in it; a
  second writer is refused at once.
* **Beneath the folder only** (:func:`unlink_beneath`, :func:`chown_beneath`): a relative
  path is walked component by component from the folder's descriptor with ``O_NOFOLLOW``, so
  a symbolic link anywhere on the way (``lnk/file`` with ``lnk -> /etc``) stops the walk
  instead of leading out; the last component is never followed either.
* **Who wrote it** (:func:`process_identity`, :func:`process_gone`): a writer records its
  pid, the kernel's boot id and its start time (clock ticks since boot, ``/proc/PID/stat``
  field 22), so a later reader tells a live writer from one that was killed even when the
  pid was reused or the machine rebooted.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
from pathlib import Path

from airlink.core.errors import AirlinkError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class FolderNotEmptyError(AirlinkError):
    """The output folder of a new run exists and holds files that are not an earlier
    airlink run's to replace."""


class FolderBusyError(AirlinkError):
    """Another airlink process holds the output folder's lock."""


# ---------------------------------------------------------------------------- paths
def resolve_output(path) -> Path:
    """``path`` made absolute with ``~``, symbolic links and ``..`` resolved (as far as it
    exists; the missing rest is normalised), the one path every later check and write uses."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def is_plain_name(name: str) -> bool:
    """True for a name that is one path component: not empty, not ``.``/``..``, no ``/``
    (nor ``\\``), no NUL - what may be joined to a folder without leaving it."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\\" not in name and "\0" not in name)


def inside(folder: Path, path) -> bool:
    """True when ``path`` (resolved) is ``folder`` (resolved) or beneath it."""
    real = resolve_output(path)
    return real == folder or folder in real.parents


def relative_parts(rel) -> tuple | None:
    """The components of a relative POSIX path of a manifest, or None when it is absolute,
    empty or has a ``.``/``..``/empty component (such an entry names nothing of the folder)."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel:
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return tuple(parts)


def make_folders(folder) -> list:
    """Make the resolved ``folder`` and its missing parents, one ``mkdir`` each; returns the
    folders this call made, outermost first (one that appeared meanwhile is not ours). A
    path whose existing part is not a folder is an :class:`AirlinkError`."""
    folder = Path(folder)
    missing = []
    q = folder
    while not os.path.lexists(q):
        missing.append(q)
        q = q.parent
    if not q.is_dir():
        raise AirlinkError(f"{q}: exists and is not a folder")
    made = []
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            if os.path.islink(d) or not d.is_dir():
                raise AirlinkError(f"{d}: appeared meanwhile and is not a folder") from None
            continue
        made.append(d)
    return made


def remove_made(made: list) -> None:
    """Undo :func:`make_folders` for folders still empty (innermost first)."""
    for d in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(d)


def is_empty(folder: Path) -> bool:
    with os.scandir(folder) as it:
        return next(it, None) is None


# ---------------------------------------------------------------------------- the lock
class FolderLock:
    """An exclusive, non-blocking ``flock`` on ``folder`` itself (on its directory
    descriptor: no lock file is added). ``busy`` is the message's reason when another
    process holds it (:class:`FolderBusyError`). The descriptor is close-on-exec, so the
    shells and tcpdump a run starts never hold the lock after the run is gone.
    :attr:`fd` is the folder's descriptor, for the ``*_beneath`` walks."""

    def __init__(self, folder, *, busy: str = "another airlink process is writing into this folder"):
        self.folder = Path(folder)
        try:
            self.fd = os.open(self.folder, _DIR_FLAGS)
        except OSError as exc:
            raise AirlinkError(f"{self.folder}: cannot open the output folder "
                               f"({exc.strerror or exc})") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise FolderBusyError(f"{self.folder}: {busy}") from None

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)                    # closing the last descriptor drops the flock

    def __del__(self):
        self.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


def is_locked(folder) -> bool:
    """True when some process holds :class:`FolderLock` on ``folder`` now."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# ---------------------------------------------------------------------------- beneath a folder
@contextlib.contextmanager
def _parent_fd(root_fd: int, parts: tuple):
    """A descriptor of the folder ``parts[:-1]`` beneath ``root_fd``, every component opened
    with ``O_NOFOLLOW``; None when one is missing, a link or not a folder."""
    fds = []
    fd = root_fd
    try:
        for p in parts[:-1]:
            try:
                fd = os.open(p, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                fd = None
                break
            fds.append(fd)
        yield fd
    finally:
        for f in fds:
            os.close(f)


def _beneath(root_fd: int, rel, act) -> bool:
    """``act(name, parent_fd)`` on the entry at relative path ``rel`` beneath the folder of
    ``root_fd``, every folder on the way opened without following a link. False when the
    path leads out, a component is missing or a link, or ``act`` fails (OSError)."""
    parts = relative_parts(rel)
    if parts is None:
        return False
    with _parent_fd(root_fd, parts) as fd:
        if fd is None:
            return False
        try:
            return act(parts[-1], fd) is not False
        except OSError:
            return False


def unlink_beneath(root_fd: int, rel) -> bool:
    """Remove the file (or symbolic link itself) at relative path ``rel`` beneath the folder
    of ``root_fd`` without following a link on the way; a folder there stays. Returns True
    when something was removed."""
    def unlink(name, fd):
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            return False
        os.unlink(name, dir_fd=fd)
    return _beneath(root_fd, rel, unlink)


def rmdir_beneath(root_fd: int, rel) -> bool:
    """Remove the folder ``rel`` beneath ``root_fd`` when it is empty (never through a link)."""
    return _beneath(root_fd, rel, lambda name, fd: os.rmdir(name, dir_fd=fd))


def chown_beneath(root_fd: int, rel, uid: int, gid: int) -> bool:
    """``lchown`` of ``rel`` beneath ``root_fd``, never through a link on the way
    (``rel`` ``"."`` is the folder itself). True when changed."""
    if rel in (".", ""):
        try:
            os.fchown(root_fd, uid, gid)
        except OSError:
            return False
        return True
    return _beneath(root_fd, rel, lambda name, fd: os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False))


def walk_files(root_fd: int):
    """Relative POSIX paths of the files (and links) beneath ``root_fd``'s folder, never
    descending through a link."""
    def walk(fd, prefix):
        try:
            names = os.listdir(fd)
        except OSError:
            return
        for name in sorted(names):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            rel = f"{prefix}{name}"
            if stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    yield from walk(sub, rel + "/")
                finally:
                    os.close(sub)
            else:
                yield rel
    yield from walk(root_fd, "")


# ---------------------------------------------------------------------------- the writer
def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat``: when the process started, in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def process_identity(pid: int | None = None) -> dict:
    """``{"pid", "host", "boot_id", "start_ticks"}`` of this (or ``pid``'s) process."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "host": socket.gethostname(), "boot_id": _boot_id(), "start_ticks": _start_ticks(pid)}


def process_gone(ident) -> bool | None:
    """True when the process ``ident`` (:func:`process_identity`) no longer runs: another
    boot, no such pid, or a pid now of a process started at another time. None when it
    cannot be told here (no identity, or another host)."""
    if not isinstance(ident, dict) or not isinstance(ident.get("pid"), int):
        return None
    if ident.get("host") not in (None, socket.gethostname()):
        return None
    boot = _boot_id()
    if ident.get("boot_id") and boot and ident["boot_id"] != boot:
        return True
    try:
        os.kill(ident["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return True
    started = _start_ticks(ident["pid"])
    if ident.get("start_ticks") is not None and started is not None:
        return started != ident["start_ticks"]
    return False


__all__ = ["FolderBusyError", "FolderLock", "FolderNotEmptyError", "chown_beneath", "inside", "is_empty",
           "is_locked", "is_plain_name", "make_folders", "process_gone", "process_identity",
           "relative_parts", "remove_made", "resolve_output", "rmdir_beneath", "unlink_beneath", "walk_files"]
