"""The small processes that hold a shell's namespace while CMD runs (child C and init B of
:mod:`airlink.replay.plumbing`), as a lean program of their own.

Child C is forked from the shell, which has numpy, pandas and numba mapped: hundreds of MB
of copy-on-write memory. Kept as such a fork until CMD ends, C and its init B would each
tear all of it down when they exit - kernel work that no other task preempts on a kernel
without full preemption, so the live shells' next TTIs would be late whenever an application
ends. C therefore builds the namespace, hands the inner TUN to the
shell and then replaces itself (exec) with this file run by a bare interpreter
(``python -I -S``: standard library only, a few MB): it waits for the shell's go, makes the
pid namespace, forks B (pid 1 there), which starts CMD, relays signals and reaps.

    python -I -S _nsinit.py SOCK_FD KEEP_ROOT CMD [ARGS...]

The environment is CMD's. ``SOCK_FD``: the shell's socket (``go`` starts CMD);
``KEEP_ROOT`` 1: CMD keeps root (another airlink shell), 0: CMD runs as the user who ran
sudo (``SUDO_UID``/``SUDO_GID``), as Mahimahi does.

Only the standard library may be imported here.
"""
import ctypes
import os
import pwd
import signal
import sys
import warnings  # noqa: F401 - os.execvpe imports it; after dropping root the interpreter's
                 # own library may be unreadable (an interpreter under /root)

CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_libc = ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal(sig=signal.SIGKILL) -> None:
    """Get ``sig`` when the parent dies (``prctl(PR_SET_PDEATHSIG)``); OSError if refused."""
    if _libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(int(sig)), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


#: relayed signals that came before there was a process to relay them to (each once)
_pending = []


def _hold_signals():
    """Until :func:`_relay_signals_to` runs, remember the relayed signals that arrive (the
    shell forwards a Ctrl-C that comes while CMD is still starting: it must reach CMD)."""
    def hold(sig, _frame):
        if sig not in _pending:
            _pending.append(sig)
    for s in RELAYED:
        signal.signal(s, hold)


def _fork_holding():
    """``os.fork()`` with the relayed signals blocked (the caller unblocks them): the child
    keeps the signals held so far and relays them itself; the parent forgets them, and
    relays to the child only what comes after the fork."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(RELAYED))
    pid = os.fork()
    if pid != 0:
        del _pending[:]
    return pid


def _relay_signals_to(pid):
    """Relay the signals of :data:`RELAYED` to ``pid`` from now on, and those held so far."""
    def relay(sig, _frame):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    for s in RELAYED:
        signal.signal(s, relay)
    while _pending:
        relay(_pending.pop(0), None)


def _exit_code(status):
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _wait_for(pid):
    while True:
        try:
            got, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 1
        if got == pid:
            return _exit_code(status)


def _drop_privileges(env):
    """Become the user who ran sudo (``SUDO_UID``/``SUDO_GID``); CMD's ``HOME``, ``USER``
    and ``LOGNAME`` become that user's."""
    uid, gid = env.get("SUDO_UID"), env.get("SUDO_GID")
    if not uid or os.geteuid() != 0:
        return
    uid = int(uid)
    gid = int(gid) if gid else uid
    try:
        user = pwd.getpwuid(uid)
        os.initgroups(user.pw_name, gid)
        env["HOME"] = user.pw_dir
        env["USER"] = env["LOGNAME"] = user.pw_name
    except KeyError:
        os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _init(cmd, keep_root):
    """Pid 1 of the new pid namespace: start CMD, relay signals, exit with its status."""
    set_parent_death_signal()
    # held signals (inherited from C at the fork, and relayed by C since) arrive here
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(RELAYED))
    env = dict(os.environ)
    signal.pthread_sigmask(signal.SIG_BLOCK, set(RELAYED))      # held until relayed to CMD below
    pid = os.fork()
    if pid == 0:
        for s in RELAYED:
            signal.signal(s, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(RELAYED))
        if keep_root:
            # CMD is another airlink shell, a Python program: SIGINT or SIGTERM while its
            # interpreter starts would end it with a traceback. They stay blocked (pending,
            # not lost) across exec until airlink's entry point unblocks them, ready to end
            # cleanly (airlink.cli.entry)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            if not keep_root:
                _drop_privileges(env)
            os.execvpe(cmd[0], cmd, env)
        except FileNotFoundError:
            os.write(2, f"airlink: error: {cmd[0]}: command not found\n".encode())
            os._exit(127)
        except OSError as exc:
            os.write(2, f"airlink: error: {cmd[0]}: {exc.strerror}\n".encode())
            os._exit(126)
    _relay_signals_to(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(RELAYED))
    # Reap everything (orphans come to pid 1) until CMD itself ends; the kernel then
    # kills what is left in the namespace when this process exits.
    while True:
        try:
            got, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if got == pid:
            os._exit(_exit_code(status))


def main(argv):
    sock_fd, keep_root, cmd = int(argv[1]), argv[2] == "1", argv[3:]
    try:
        # the relayed signals arrive blocked (pending, not lost) from the shell's fork
        # (plumbing._child_main): held from here, relayed once CMD's process exists
        _hold_signals()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(RELAYED))
        set_parent_death_signal()
        if os.read(sock_fd, 16) != b"go":
            os._exit(1)
        os.close(sock_fd)
        if _libc.unshare(ctypes.c_int(CLONE_NEWPID)) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
        pid = _fork_holding()
        if pid == 0:
            _init(cmd, keep_root)
        _relay_signals_to(pid)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(RELAYED))
        os._exit(_wait_for(pid))
    except BaseException as exc:  # noqa: BLE001 - report, never raise out of the namespace
        os.write(2, f"airlink: error: the namespace could not start the command: {exc}\n".encode())
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv)
