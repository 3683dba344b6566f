"""What the live benchmarks share: a throw-away namespace with iperf3 servers in it, the
shell processes' memory, and the commands users run (``.venv/bin/airlink``).

Everything a benchmark starts lives in the namespace ``airlink-<what>-<pid>`` and is killed
with it when the ``with`` block ends, also on an error or Ctrl-C.
"""
from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
AIRLINK = str(VENV_BIN / "airlink")
PAYLOAD = 1448 / 1500          # TCP payload of a 1500-byte IP packet with timestamps


def sh(*argv, **kw):
    return subprocess.run(list(map(str, argv)), capture_output=True, text=True, **kw)


def user_env() -> dict:
    """The environment a user's shell would give the commands (venv on PATH, no shell marks)."""
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    for k in ("AIRLINK_BASE", "AIRLINK_BLOCK", "AIRLINK_DEPTH", "MAHIMAHI_BASE"):
        env.pop(k, None)
    return env



def require_root(script: str, *tools) -> None:
    """Exit with status 2 and one line on stderr unless this runs as root (network namespaces,
    TUN) with every one of ``tools`` on PATH."""
    missing = [t for t in tools if not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        needs = " and ".join(["root (network namespaces and TUN)", *missing])
        print(f"{script}: needs {needs}", file=sys.stderr)
        raise SystemExit(2)

@contextmanager
def throwaway_namespace(what: str, *, iperf_ports=()):
    """A namespace (loopback up) with one ``iperf3 -s`` per port; yields its name."""
    name = f"airlink-{what}-{os.getpid()}"
    sh("ip", "netns", "add", name).check_returncode()
    servers = []
    try:
        sh("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        for port in iperf_ports:
            servers.append(subprocess.Popen(["ip", "netns", "exec", name, "iperf3", "-s", "-p", str(port)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 5
        while iperf_ports and time.monotonic() < deadline:
            listening = sh("ip", "netns", "exec", name, "ss", "-ltnH").stdout
            if all(f":{p} " in listening for p in iperf_ports):
                break
            time.sleep(0.05)
        yield name
    finally:
        for s in servers:
            s.kill()
            s.wait()
        for pid in sh("ip", "netns", "pids", name).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", name)


def kernel_tcp_counters(ns: str) -> dict:
    """``{"Tcp.RetransSegs": n, "TcpExt.TCPTimeouts": n, ...}``: every counter of the
    namespace's /proc/net/snmp and /proc/net/netstat (a header line of names, then a line of
    values, per group). They are per network namespace: the TCP stack of what runs in
    ``ns``, its own count of what it did (e.g. why it retransmitted)."""
    text = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/netstat"],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    out = {}
    for names, values in zip(text[::2], text[1::2]):
        group, *keys = names.split()
        _, *vals = values.split()
        out.update({f"{group.rstrip(':')}.{k}": int(v) for k, v in zip(keys, vals) if v.lstrip("-").isdigit()})
    return out


TRACEFS = Path("/sys/kernel/tracing")
# Linux's congestion states (tcp_set_ca_state): which counter a retransmission sent in each
# goes to - Loss: TCPTimeouts / TCPSlowStartRetrans (the timer's), Recovery: TCPFastRetrans;
# in Open, Disorder or CWR only a tail loss probe resends (TCPLossProbes)
CA_KIND = {0: "probe", 1: "probe", 2: "probe", 3: "fast", 4: "timeout"}


@contextmanager
def kernel_retransmissions(sport: int):
    """Why Linux resent each segment, retransmission by retransmission: a tracefs instance
    of this process' own (``instances/airlink-<pid>``, removed when the block ends) with the
    ``tcp:tcp_cong_state_set`` and ``tcp:tcp_retransmit_skb`` events on the monotonic
    clock. Yields a dict that, when the block ends, maps each connection sending from port
    ``sport`` (the server) to its peer's port and holds per retransmission sent, in order,
    its time (ns since the epoch, as a capture's) and the sender's congestion state then,
    as :data:`CA_KIND` names it: ``{peer port: [(t_ns, "timeout"), ...]}``. The events see
    every socket of the machine; the source port selects. Yields None where tracefs or
    the events are missing (not mounted, an older kernel)."""
    inst = TRACEFS / "instances" / f"airlink-{os.getpid()}"
    events = ("tcp/tcp_cong_state_set", "tcp/tcp_retransmit_skb")
    if not all((TRACEFS / "events" / e).is_dir() for e in events):
        yield None
        return
    inst.mkdir()
    out: dict = {}
    try:
        (inst / "buffer_size_kb").write_text("16384")
        (inst / "trace_clock").write_text("mono")
        for e in events:
            (inst / "events" / e / "enable").write_text("1")
        yield out
        for e in events:
            (inst / "events" / e / "enable").write_text("0")
        epoch = time.time_ns() - time.monotonic_ns()      # monotonic -> epoch
        state: dict = {}
        pat = re.compile(r"(\d+)\.(\d+): (tcp_cong_state_set|tcp_retransmit_skb): .*?sport=(\d+) dport=(\d+)"
                         r".*?(?:cong_state=(\d+)|err=(-?\d+))\s*$")
        for line in (inst / "trace").read_text().splitlines():
            m = pat.search(line)
            if not m or int(m.group(4)) != sport:
                continue
            peer = int(m.group(5))
            if m.group(3) == "tcp_cong_state_set":
                state[peer] = int(m.group(6))
            elif m.group(7) == "0":                     # sent (err 0)
                t = int(m.group(1)) * 10**9 + int(m.group(2).ljust(9, "0")[:9]) + epoch
                out.setdefault(peer, []).append((t, CA_KIND[state.get(peer, 0)]))
    finally:
        for e in events:
            try:
                (inst / "events" / e / "enable").write_text("0")
            except OSError:
                pass
        inst.rmdir()


def kinds_against_kernel(events, flows, kernel: dict, sport: int, within_ns: int = 2_000_000) -> dict:
    """``{(kernel's kind, airlink's kind): packets}``: the retransmissions the server
    (source port ``sport``) sent, as ``airlink collect`` classed them (``events`` and
    ``flows`` frames), against the kernel's own reason for each
    (:func:`kernel_retransmissions`): each packet paired with the connection's last
    retransmission the kernel traced at or before it, up to ``within_ns`` earlier (the
    capture stamps a packet after the stack sent it; a super-packet cut into several on
    the way pairs each piece with it). Packets with no such event count under
    ``("none", airlink's kind)`` - a loss probe the capture does not show as resent, or
    the other way round, is one."""
    from collections import Counter
    import numpy as np
    out = Counter()
    rx = events[events["event"].astype(str) == "retransmission"]
    for _, f in flows.iterrows():
        if int(f["dport"]) == sport:
            peer, server_dir = int(f["sport"]), "rev"
        elif int(f["sport"]) == sport:
            peer, server_dir = int(f["dport"]), "fwd"
        else:
            continue
        ours = rx[(rx["flow"] == f["flow"]) & (rx["direction"].astype(str) == server_dir)]
        theirs = kernel.get(peer, [])
        kt = np.array([t for t, _ in theirs], np.int64)
        t = ours["time"].astype("datetime64[ns, UTC]").astype("int64").to_numpy() if len(ours) else kt[:0]
        j = np.searchsorted(kt, t + 50_000, "right") - 1          # 50 us: the two clocks' reading
        for tp, k, kind in zip(t.tolist(), j.tolist(), ours["kind"].astype(str).tolist()):
            near = k >= 0 and tp - int(kt[k]) <= within_ns
            out[(theirs[k][1] if near else "none", kind)] += 1
    return dict(out)


def start_tcpdump(argv, timeout: float = 20.0) -> subprocess.Popen:
    """tcpdump (``argv``, e.g. under ``ip netns exec``) started and returned once it says it
    is listening - a fixed sleep only guesses when capturing began; RuntimeError with what it
    said when it exits or stays silent for ``timeout`` s. Its stderr stays open: close it
    after stopping it."""
    dump = subprocess.Popen(list(map(str, argv)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    said, t_end = b"", time.monotonic() + timeout
    while b"listening on" not in said:
        if dump.poll() is not None or time.monotonic() > t_end:
            dump.kill()
            raise RuntimeError(f"tcpdump did not start: {said.decode(errors='replace').strip()}")
        if select.select([dump.stderr], [], [], 0.1)[0]:
            said += os.read(dump.stderr.fileno(), 4096)
    return dump


def rss_kib(pid: int) -> int | None:
    """Resident set size of ``pid`` in KiB (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def airlink_processes(*subcommands) -> dict:
    """``{pid: subcommand}`` of running ``airlink SUBCOMMAND`` processes (the shells); a
    process forked by such a shell with its command line (the cell's radio process) is
    ``"SUBCOMMAND child"``, so that each is sampled on its own."""
    found, parent = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            parent[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if len(words) >= 3 and words[1].endswith("/airlink") and words[2] in subcommands:
            found[int(pid)] = words[2]
    return {pid: f"{sub} child" if found.get(parent.get(pid)) == sub else sub for pid, sub in found.items()}


def run_sampling_rss(cmd, *, shells, every_s: float):
    """Run ``cmd`` to its end, sampling the RSS of the new ``airlink`` shell processes named
    in ``shells``; returns ``(returncode, stderr, [(t_s, {shell: rss_kib})])``."""
    before = set(airlink_processes(*shells))
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=user_env(), stderr=subprocess.PIPE, text=True)
    samples, pids = [], {}
    while p.poll() is None:
        time.sleep(every_s)
        if len(set(pids.values()) & set(shells)) < len(shells):
            pids = {pid: s for pid, s in airlink_processes(*shells).items() if pid not in before}
        samples.append((time.monotonic() - t0, {s: rss_kib(pid) for pid, s in pids.items()}))
    return p.returncode, p.stderr.read(), samples


def rss_change(samples, seconds: int, shells) -> dict:
    """Per shell: median RSS in minute 1 vs the last minute, the relative change, and the
    median of every minute (MiB)."""
    import numpy as np
    out = {}
    for name in shells:
        first = [s[name] for t, s in samples if 55 <= t <= 65 and s.get(name)]
        last = [s[name] for t, s in samples if t >= seconds - 60 and s.get(name)]
        if first and last:
            minutes = [[s[name] for t, s in samples if m * 60 <= t < (m + 1) * 60 and s.get(name)]
                       for m in range(int(seconds // 60) + 1)]
            out[name] = {"minute1_mib": np.median(first) / 1024, "last_mib": np.median(last) / 1024,
                         "change": np.median(last) / np.median(first) - 1,
                         "per_minute_mib": [round(float(np.median(v)) / 1024, 1) for v in minutes if v]}
    return out


# -- Mahimahi and CellReplay beside airlink ---------------------------------------------------
# Their tools refuse to run as root, so they run as an ordinary user with their folder on PATH.

def tool_folder(tool: str) -> str | None:
    """The folder holding ``tool`` on PATH (the default of a ``--mahimahi-bin``-like option)."""
    found = shutil.which(tool)
    return found and str(Path(found).parent)


def add_mahimahi_options(ap, *, tools=("mm-link", "mm-delay")) -> None:
    """``--mahimahi-bin`` (default: the folder of ``mm-link`` on PATH) and ``--mm-user``."""
    ap.add_argument("--mahimahi-bin", default=tool_folder("mm-link"),
                    help=f"folder with Mahimahi's {' and '.join(tools)} (default: from PATH)")
    ap.add_argument("--mm-user", default="mmuser", help="user that runs Mahimahi's tools (not root)")


def why_not_runnable(folder, tools, user: str) -> str:
    """'' when every one of ``tools`` is in ``folder`` and ``user`` exists (the tools refuse
    root), else why not, in one phrase."""
    if not folder or not all((Path(folder) / t).exists() for t in tools):
        return (f"{'/'.join(tools)} not found (not installed: build it from source, see "
                "docs/replay.md, and give its folder)")
    if sh("id", user).returncode != 0:
        return f"user {user!r} does not exist (Mahimahi's tools refuse root: useradd one or give --mm-user)"
    return ""


def as_user(user: str, argv, *folders) -> list:
    """``argv`` run as ``user`` (``setpriv``, the user's groups) with ``folders`` first on PATH."""
    path = ":".join([*map(str, (f for f in folders if f)), "/usr/sbin", "/usr/bin", "/bin"])
    return ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "env", f"PATH={path}", *argv]


# -- the servers the benchmarks' clients talk to ----------------------------------------------

#: Python source of ``tcp_server(port, handle, mss=None)``: accepts forever, each connection
#: handled by ``handle(conn)`` in a thread of its own and closed after; a benchmark's server
#: script is this followed by its handler and the call.
TCP_SERVER = r'''
import socket, threading
def tcp_server(port, handle, mss=None):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mss:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    s.bind(("0.0.0.0", port)); s.listen(64)
    def serve(c):
        try:
            handle(c)
        except (OSError, ValueError):
            pass
        finally:
            c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
'''
