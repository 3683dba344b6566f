"""The only module that touches the kernel: TUN devices, namespaces, addresses, processes.

How a shell is built (all plain Linux, no setuid helper, no daemon)::

    shell process (current netns)          child C (new netns)            init B / CMD D (new pid ns)
    -----------------------------          -------------------            -----------------------------
    open TUN "al<pid>" (outer side)
    address block, route block -> TUN
    fork ------------------------------->  PDEATHSIG=KILL, unshare(NET)
                                           lo up, TUN "airlink0" (inner),
                                           address, default route, forward
    <---- inner TUN fd over SCM_RIGHTS ---
                                           exec the lean _nsinit.py
    event loop between the two fds -- go -> unshare(PID), fork ----------> B = pid 1: PDEATHSIG=KILL,
                                           relay signals, wait B           fork D, relay signals, wait D
                                                                           D: drop to SUDO_UID, exec CMD

C and B run :mod:`._nsinit` in a bare interpreter (``python -I -S``), not as forks of the
shell: a fork keeps the shell's hundreds of MB mapped, and tearing that down when CMD ends
took long enough to make a live shell's TTIs late.

Clean-up is by construction: both TUNs are non-persistent (they vanish when the shell's
fds close, even on SIGKILL); C dies with the shell (PDEATHSIG), B with C, and when B
(the pid namespace's init) dies the kernel kills every process CMD left behind, which
frees the anonymous network namespace.

Addresses: the outermost shell takes a free ``/20`` of ``100.64.0.0/10`` (shared address
space, RFC 6598; 1024 blocks of 4096 addresses), routes all of it into its TUN and uses
its first ``/30`` for the link (``.1`` outside, ``.2`` inside). A shell nested inside
takes one of the three upper quarters of its parent's block (``AIRLINK_BLOCK``), so every
level's addresses are routed by the level above without NAT; a ``/20`` holds six levels
(``/20`` ... ``/30``). A block is free when no route of any table in the shell's namespace
overlaps it (so a VPN or CGNAT uplink using ``100.64.0.0/10`` there keeps its part), and
the route added for it is the lock (two shells racing for one block: the second
``ip route add`` fails and it takes the next).
"""
from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import os
import pwd
import signal
import socket
import struct
import subprocess
import sys

from airlink.core.errors import AirlinkError

from ._nsinit import RELAYED, _wait_for, set_parent_death_signal  # noqa: F401 - also this module's API

CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29
TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
TUNSETVNETHDRSZ = 0x400454D8
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
VNET_HDR_SIZE = 10        # struct virtio_net_hdr
TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN = 0x01, 0x02, 0x04, 0x08
TUN_F_USO4, TUN_F_USO6 = 0x20, 0x40   # Linux 6.2 and later
TXQUEUELEN = 20000        # packets; far above any burst so the kernel never drops
INNER_DEVICE = "airlink0"
ROOT_RANGE = ipaddress.ip_network("100.64.0.0/10")
TOP_PREFIX = 20           # an outermost shell's block: 1024 of them in ROOT_RANGE
ROUTE_TYPES = {"unicast", "local", "broadcast", "multicast", "throw", "unreachable", "prohibit",
               "blackhole", "nat", "anycast"}
SHELL_COMMANDS = ("link", "delay", "loss", "cell")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def set_timer_slack(ns: int = 1000) -> None:
    """Wake timers within ``ns`` of their deadline (the default slack is 50 us)."""
    _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


def require_root(tool: str = "airlink link") -> None:
    """Raise a one-line error unless we can create namespaces and TUN devices."""
    if os.geteuid() != 0:
        raise AirlinkError(f"{tool} needs root to create a network namespace and TUN devices "
                           f"(run it with sudo; the command inside runs as you)")
    if not os.path.exists("/dev/net/tun"):
        raise AirlinkError("/dev/net/tun is missing (load the tun module: modprobe tun)")


def open_tun(name: str, *, vnet_hdr: bool = False) -> int:
    """A non-blocking, non-persistent TUN fd (no packet-info header) named ``name``.

    ``vnet_hdr``: every packet read or written starts with a 10-byte ``virtio_net_hdr``
    (``IFF_VNET_HDR``, ``TUNSETVNETHDRSZ``), the precondition of :func:`set_offload`.
    Until offloads are set, the kernel hands over plain, checksummed packets behind an
    all-zero header."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    flags = IFF_TUN | IFF_NO_PI | (IFF_VNET_HDR if vnet_hdr else 0)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), flags))
        if vnet_hdr:
            fcntl.ioctl(fd, TUNSETVNETHDRSZ, struct.pack("i", VNET_HDR_SIZE))
    except OSError:
        os.close(fd)
        raise
    os.set_blocking(fd, False)
    return fd


def set_offload(fd: int) -> int:
    """Let the kernel hand GSO super-packets to a ``vnet_hdr`` TUN fd: partial checksums
    and TCP segmentation (IPv4, IPv6, with ECN), plus UDP segmentation where the kernel
    has it. Packets of up to 64 KB then cross user space once, with their segment size
    in the header (the fast path serves them segment by segment). Returns the flags set."""
    full = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN
    for flags in (full | TUN_F_USO4 | TUN_F_USO6, full):
        try:
            fcntl.ioctl(fd, TUNSETOFFLOAD, flags)
            return flags
        except OSError as exc:
            error = exc
    raise error


def ip(*args: str) -> None:
    """Run ``ip ARGS`` and raise with its message on failure."""
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AirlinkError(f"ip {' '.join(args)}: {r.stderr.strip() or 'failed'}")


def _try_ip(*args: str) -> bool:
    return subprocess.run(["ip", *args], capture_output=True).returncode == 0


def candidate_blocks(parent_block: str | None):
    """Address blocks a new shell may take, in order of preference."""
    if not parent_block:
        return list(ROOT_RANGE.subnets(new_prefix=TOP_PREFIX))
    parent = ipaddress.ip_network(parent_block)
    if parent.prefixlen > 28:
        raise AirlinkError(f"shells nested too deep (address block {parent} is exhausted)")
    return list(parent.subnets(prefixlen_diff=2))[1:]


def routed_networks(text: str) -> list:
    """IPv4 networks of ``ip -o -4 route show table all`` output (default routes left out)."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in ROUTE_TYPES:
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            out.append(ipaddress.ip_network(words[0], strict=False))
        except ValueError:
            continue
    return out


def free_blocks(candidates, routed) -> list:
    """The candidates that overlap none of the ``routed`` networks, in order."""
    routed = [n for n in routed if n.version == 4]
    return [c for c in candidates if not any(c.overlaps(n) for n in routed)]


def link_addresses(block) -> tuple:
    """``(outer, inner)`` addresses of a block's link ``/30``."""
    net = ipaddress.ip_network(block)
    return str(net.network_address + 1), str(net.network_address + 2)


def divide_block(block, n: int) -> list:
    """Blocks of ``n`` UEs inside a cell shell's ``block``: the block cut into ``2**m > n``
    equal parts; part 0 keeps the shell's own link ``/30``, parts 1..n go to the UEs (each
    UE's address is its part's ``.2``, its gateway ``.1``; shells nested in a UE divide its part)."""
    net = ipaddress.ip_network(block)
    m = max(1, int(n).bit_length())
    if net.prefixlen + m > 28:
        raise AirlinkError(f"address block {net} cannot hold {n} UEs (nested too deep or too many UEs)")
    return [str(p) for p in list(net.subnets(prefixlen_diff=m))[1:n + 1]]


class OuterSide:
    """The TUN on the shell's side, its addresses and the route of its whole block."""

    def __init__(self, parent_block: str | None, *, vnet_hdr: bool = False):
        self.name = f"al{os.getpid()}"[:15]
        self.vnet_hdr = bool(vnet_hdr)
        self.fd = open_tun(self.name, vnet_hdr=vnet_hdr)
        try:
            ip("link", "set", "dev", self.name, "txqueuelen", str(TXQUEUELEN), "up")
            routes = subprocess.run(["ip", "-o", "-4", "route", "show", "table", "all"],
                                    capture_output=True, text=True).stdout
            for block in free_blocks(candidate_blocks(parent_block), routed_networks(routes)):
                # The route is the lock: a block routed here is taken (a shell that
                # started since the listing makes this add fail; try the next).
                if _try_ip("route", "add", str(block), "dev", self.name):
                    self.block = str(block)
                    break
            else:
                where = f"the parent shell's block {parent_block}" if parent_block else str(ROOT_RANGE)
                raise AirlinkError(f"no free address block in {where} for a new shell")
            self.outer, self.inner = link_addresses(self.block)
            ip("addr", "add", f"{self.outer}/30", "dev", self.name)
        except BaseException:
            os.close(self.fd)
            raise

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _configure_inner(inner: str, outer: str, vnet_hdr: bool = False) -> int:
    """In the new namespace: loopback, the inner TUN, its address and default route."""
    fd = open_tun(INNER_DEVICE, vnet_hdr=vnet_hdr)
    ip("link", "set", "dev", "lo", "up")
    ip("link", "set", "dev", INNER_DEVICE, "txqueuelen", str(TXQUEUELEN), "up")
    ip("addr", "add", f"{inner}/30", "dev", INNER_DEVICE)
    ip("route", "add", "default", "via", outer, "dev", INNER_DEVICE)
    for key in ("net/ipv4/ip_forward",):
        with open(f"/proc/sys/{key}", "w") as f:
            f.write("1")
    return fd


def is_shell_command(cmd) -> bool:
    """True when ``cmd`` starts another airlink shell (which must keep root)."""
    if not cmd:
        return False
    words = list(cmd)
    if os.path.basename(words[0]).startswith("python") and words[1:3] == ["-m", "airlink"]:
        words = ["airlink"] + words[3:]
    return os.path.basename(words[0]) == "airlink" and len(words) > 1 and words[1] in SHELL_COMMANDS


def default_command() -> list:
    uid = os.environ.get("SUDO_UID")
    if uid and os.geteuid() == 0:
        try:
            return [pwd.getpwuid(int(uid)).pw_shell or "/bin/sh"]
        except (KeyError, ValueError):
            pass
    return [os.environ.get("SHELL") or "/bin/sh"]


NSINIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_nsinit.py")


def _child_main(parent_pid, sock, outer: "OuterSide", addresses, cmd, env, vnet_hdr=False):
    """Child C: make the namespace, hand the inner TUN to the shell, then become the lean
    program :mod:`._nsinit` (which waits for the shell's go and runs CMD in a new pid
    namespace), so that no copy of the shell's memory stays mapped while CMD runs.

    ``addresses`` = ``(inner, gateway)``: this namespace's address and its default route."""
    try:
        set_parent_death_signal()
        if os.getppid() != parent_pid:
            os._exit(1)
        outer.close()
        # the relayed signals stay blocked (pending, not lost: an ignored one would be) across
        # the exec into _nsinit, which holds them until CMD runs and then relays them to it
        signal.pthread_sigmask(signal.SIG_BLOCK, set(RELAYED))
        for s in RELAYED:
            signal.signal(s, signal.SIG_DFL)
        unshare(CLONE_NEWNET)
        fd = _configure_inner(*addresses, vnet_hdr)
        ns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        socket.send_fds(sock, [b"ok"], [fd, ns])
        os.close(fd)
        os.close(ns)
        sock_fd = sock.detach()
        os.set_inheritable(sock_fd, True)
        os.execve(sys.executable, [sys.executable, "-I", "-S", NSINIT, str(sock_fd),
                                   "1" if is_shell_command(cmd) else "0", *cmd], env)
    except BaseException as exc:  # report to the shell, never return into its code
        try:
            sock.send(f"error: {exc}".encode()[:4000])
        except OSError:         # the fds were sent already: the shell reads no more
            os.write(2, f"airlink: error: the namespace could not start its command: {exc}\n".encode())
        os._exit(1)


class Namespace:
    """A shell's plumbing: outer TUN, child namespace with the inner TUN, and CMD.

    ``Namespace(cmd, env)`` builds everything up to a running child waiting for
    :meth:`start`; ``outer_fd``/``inner_fd`` carry the downlink/uplink packets.

    ``vnet_hdr``: both TUN devices carry a ``virtio_net_hdr`` in front of every packet
    (see :func:`open_tun`; the shell's loop then calls :func:`set_offload` on both fds
    when its fast path runs). A namespace on a shared outer side has the header when that
    side has it (the cell shell's packets cross both devices as they were read).

    Several namespaces may share one outer side (the cell shell: one TUN and address
    block outside, one namespace per UE): pass ``outer_side``, the namespace's own
    ``block`` (a part of the outer side's, which nested shells inside it divide) and its
    ``addresses`` ``(inner, gateway)``; the shared outer side is not closed with it.
    """

    def __init__(self, cmd, *, env=None, outer_side: "OuterSide | None" = None, block=None,
                 addresses=None, vnet_hdr: bool = False):
        require_root()
        if outer_side is not None and bool(vnet_hdr) != outer_side.vnet_hdr:
            raise AirlinkError("a namespace's inner TUN and its shared outer side must both have the "
                               "virtio_net_hdr or both lack it")
        self.vnet_hdr = bool(vnet_hdr)
        self.env = dict(os.environ if env is None else env)
        parent_block = self.env.get("AIRLINK_BLOCK")
        self._own_outer = outer_side is None
        self.outer_side = OuterSide(parent_block, vnet_hdr=self.vnet_hdr) if outer_side is None else outer_side
        self.outer_fd = self.outer_side.fd
        self.block = self.outer_side.block if block is None else str(block)
        self.addresses = (self.outer_side.inner, self.outer_side.outer) if addresses is None else tuple(addresses)
        self.env["AIRLINK_BLOCK"] = self.block
        if not parent_block:
            self.env["AIRLINK_BASE"] = self.outer_side.outer
        self.env.setdefault("AIRLINK_BASE", self.outer_side.outer)
        self.env["AIRLINK_DEPTH"] = str(int(self.env.get("AIRLINK_DEPTH", "0")) + 1)
        self.cmd = list(cmd) if cmd else default_command()
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            parent_sock.close()
            _child_main(os.getppid(), child_sock, self.outer_side, self.addresses, self.cmd, self.env,
                        self.vnet_hdr)
        child_sock.close()
        self.pid = pid
        self._sock = parent_sock
        self.status = None
        try:
            msg, fds, _flags, _addr = socket.recv_fds(parent_sock, 4096, 2)
        except OSError as exc:
            self._fail(f"could not set up the namespace: {exc}")
        if not fds:
            self._fail(msg.decode(errors="replace").removeprefix("error: ") or
                       "the namespace child exited during set-up")
        self.inner_fd, self.ns_fd = fds
        os.set_blocking(self.inner_fd, False)
        self.pidfd = os.pidfd_open(pid)

    def _fail(self, message):
        os.waitpid(self.pid, 0)
        if self._own_outer:
            self.outer_side.close()
        raise AirlinkError(message)

    def start(self):
        """Let CMD run."""
        self._sock.send(b"go")
        self._sock.close()

    def signal(self, sig):
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        if self.status is None:
            self.status = _wait_for(self.pid)
        return self.status

    def device_drops(self) -> dict:
        """Packets the kernel dropped at each TUN (``tx_dropped`` means our read was late)."""
        out = {"outer": _dev_stats(self.outer_side.name)}
        try:
            own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                setns(self.ns_fd, CLONE_NEWNET)
                out["inner"] = _dev_stats(INNER_DEVICE)
            finally:
                setns(own, CLONE_NEWNET)
                os.close(own)
        except OSError:
            out["inner"] = None
        return out

    def close(self):
        for fd in ("inner_fd", "ns_fd", "pidfd"):
            v = getattr(self, fd, -1)
            if v is not None and v >= 0:
                os.close(v)
                setattr(self, fd, -1)
        if self._own_outer:
            self.outer_side.close()


CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE, MNT_DETACH = 0x4000, 0x40000, 2


def rps_mask_text(cpus) -> str:
    """A CPU set as the kernel's ``rps_cpus`` bitmap: hex, in 32-bit groups joined by commas,
    most significant first (``{1}`` -> ``"2"``, ``{0, 33}`` -> ``"2,00000001"``)."""
    mask = sum(1 << c for c in cpus)
    groups = []
    while True:
        groups.append(mask & 0xFFFFFFFF)
        mask >>= 32
        if not mask:
            break
    return ",".join([f"{groups[-1]:x}"] + [f"{g:08x}" for g in reversed(groups[:-1])])


def set_rps(devices, cpus) -> list:
    """Receive Packet Steering for each device of ``devices``, pairs ``(network namespace
    fd, device name)`` (queue rx-0): the packets written into one are processed (IP, TCP, the socket's wake-up) on
    the CPUs of ``cpus``, from the backlog of one of them, not in the writer's own context.

    ``/sys/class/net`` shows the devices of the namespace that mounted sysfs, so a child
    process makes a private mount namespace and, per device, mounts its namespace's sysfs over
    ``/sys``, writes ``queues/rx-0/rps_cpus`` and unmounts it; the child and its mount
    namespace end with it, and the setting lives on the device (it goes with the namespace).
    Returns one bool per device: whether the setting was written."""
    text = rps_mask_text(cpus).encode()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = bytearray(len(devices))
        try:
            os.close(r)
            unshare(CLONE_NEWNS)
            _check(_libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "mount")
            for i, (fd, device) in enumerate(devices):
                setns(fd, CLONE_NEWNET)
                if _libc.mount(b"sysfs", b"/sys", b"sysfs", ctypes.c_ulong(0), None) != 0:
                    continue
                try:
                    f = os.open(f"/sys/class/net/{device}/queues/rx-0/rps_cpus", os.O_WRONLY)
                    try:
                        ok[i] = os.write(f, text) == len(text)
                    finally:
                        os.close(f)
                except OSError:
                    pass
                finally:
                    _libc.umount2(b"/sys", MNT_DETACH)
        except BaseException:  # noqa: BLE001 - a forked child reports through the pipe only
            pass
        finally:
            os.write(w, bytes(ok))
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    os.waitpid(pid, 0)
    return [bool(b) for b in got.ljust(len(devices), b"\0")]


def _dev_stats(name: str):
    """rx/tx drop counters of device ``name`` in the calling thread's namespace."""
    try:
        with open("/proc/thread-self/net/dev") as f:
            for line in f:
                head, _, rest = line.partition(":")
                if head.strip() == name:
                    v = [int(x) for x in rest.split()]
                    return {"rx_packets": v[1], "rx_dropped": v[3], "tx_packets": v[9], "tx_dropped": v[11]}
    except OSError:
        pass
    return None
