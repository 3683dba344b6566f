"""Preloaded into the worker processes of the LocalCluster that ``airlink sweep`` starts:
asks the kernel to kill the worker when the process that started it dies (Linux
``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so a sweep killed with SIGKILL leaves no worker
behind still writing into the campaign folder; and ignores SIGINT, which Ctrl-C sends to
the whole foreground process group: the sweep itself handles it (cancels the points, marks
them pending, closes the cluster, which stops the workers), where each worker would
otherwise print a KeyboardInterrupt traceback."""
from __future__ import annotations

import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def ignore_sigint() -> bool:
    import threading
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return True


def dask_setup(worker=None):  # the hook distributed calls on a preloaded module
    die_with_parent()
    ignore_sigint()


ignore_sigint()     # at import, in the worker process's main thread
