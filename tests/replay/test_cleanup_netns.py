"""Nothing is left behind: no device, route, namespace or process after any kind of exit."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.replay._replay_netns import AIRLINK

pytestmark = [pytest.mark.netns]


def processes_in_netns(inode: str) -> list:
    """Pids of processes whose network namespace is ``inode`` (``net:[...]``)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/ns/net") == inode:
                    out.append(int(pid))
            except OSError:
                pass
    return out


def assert_clean(test_ns, inode: str):
    deadline = time.monotonic() + 5
    while processes_in_netns(inode) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in_netns(inode) == [], "processes left in the shell's namespace"
    links = test_ns.links()
    assert [l.split(":")[1].strip() for l in links.splitlines()] == ["lo"], links
    assert "100.64" not in test_ns.routes()


def start_shell(test_ns, tmp_path, shell=("delay", "1")):
    """A shell whose CMD records its namespace, starts a background child, and waits."""
    marker = tmp_path / "ns"
    cmd = f"readlink /proc/self/ns/net > {marker}.tmp && mv {marker}.tmp {marker}; sleep 1000 & sleep 1000"
    p = test_ns.popen([AIRLINK, *shell, "--", "sh", "-c", cmd], start_new_session=True,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert p.poll() is None, p.stderr.read()
        assert time.monotonic() < deadline, "CMD did not start"
        time.sleep(0.05)
    return p, marker.read_text().strip()


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c", "sigkill", "sighup"])
def test_shell_killed_leaves_nothing(test_ns, tmp_path, how):
    p, inode = start_shell(test_ns, tmp_path)
    assert processes_in_netns(inode)
    if how == "sigterm":
        p.send_signal(signal.SIGTERM)
    elif how == "sighup":
        p.send_signal(signal.SIGHUP)
    elif how == "sigkill":
        p.send_signal(signal.SIGKILL)
    else:  # the terminal sends SIGINT to the whole foreground process group
        os.killpg(p.pid, signal.SIGINT)
    status = p.wait(timeout=15)
    if how != "sigkill":
        assert status != 0
    assert_clean(test_ns, inode)


def test_nested_shells_killed_leave_nothing(test_ns, tmp_path):
    p, inode = start_shell(test_ns, tmp_path, shell=("delay", "1", "airlink", "loss", "uplink", "0"))
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=15)
    assert_clean(test_ns, inode)


@pytest.mark.parametrize("cmd,status", [("exit 0", 0), ("exit 7", 7), ("kill -9 $$", 137)])
def test_exit_status_is_cmds_and_nothing_is_left(test_ns, tmp_path, cmd, status):
    marker = tmp_path / "ns"
    r = test_ns.airlink("link", _trace(tmp_path), "--", "sh", "-c",
                        f"readlink /proc/self/ns/net > {marker}; sleep 1000 & {cmd}")
    assert r.returncode == status, r.stderr
    assert_clean(test_ns, marker.read_text().strip())


def test_missing_command_is_127_with_one_line(test_ns):
    r = test_ns.airlink("delay", "0", "--", "no-such-command-airlink")
    assert r.returncode == 127
    assert "no-such-command-airlink: command not found" in r.stderr
    assert [l.split(":")[1].strip() for l in test_ns.links().splitlines()] == ["lo"]


def test_sudo_user_runs_cmd_and_nested_shells_keep_root(test_ns):
    env = {"SUDO_UID": "65534", "SUDO_GID": "65534"}
    r = test_ns.exec([AIRLINK, "delay", "0", "--", "id", "-u"], env=env)
    assert r.returncode == 0 and r.stdout.strip() == "65534", r.stderr
    # and the user's HOME, USER and LOGNAME (from the password database), not root's
    import pwd
    user = pwd.getpwuid(65534)
    r = test_ns.exec([AIRLINK, "delay", "0", "--", "sh", "-c", 'echo "$HOME $USER $LOGNAME"'], env=env)
    assert r.returncode == 0 and r.stdout.split() == [user.pw_dir, user.pw_name, user.pw_name], r.stderr
    r = test_ns.exec([AIRLINK, "delay", "0", "airlink", "delay", "0", "--", "id", "-u"], env=env)
    assert r.returncode == 0 and r.stdout.strip() == "65534", r.stderr


def _trace(tmp_path) -> Path:
    p = tmp_path / "c.down"
    p.write_text("1\n")
    return p


def test_once_stops_cmd_when_the_trace_ends(test_ns, tmp_path):
    trace = tmp_path / "300ms.down"
    trace.write_text("".join(f"{t}\n" for t in range(1, 301)))   # 300 ms, then --once ends
    stats = tmp_path / "s.json"
    r = test_ns.airlink("link", trace, "--once", "--stats", stats, "--", "sleep", "30", timeout=20)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    import json
    st = json.loads(stats.read_text())
    assert st["engine"] == "python" and st["downlink"]["ttis"] == 300


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _children(pid: int) -> list:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def test_the_processes_holding_the_namespace_are_lean_not_forks_of_the_shell(test_ns, tmp_path):
    """While CMD runs, the namespace's first process and its init are the small
    ``_nsinit.py`` program (their exit costs no teardown of the shell's memory), not copies
    of the shell: their command line names it and each maps under half the shell's RSS
    (a fork would map about all of it)."""
    p, _inode = start_shell(test_ns, tmp_path)
    try:
        (child,) = _children(p.pid)
        (init,) = _children(child)
        shell_rss = _rss_kib(p.pid)
        for pid in (child, init):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            assert any(a.endswith(b"_nsinit.py") for a in argv), argv
            assert _rss_kib(pid) * 2 < shell_rss, (pid, _rss_kib(pid), shell_rss)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)
