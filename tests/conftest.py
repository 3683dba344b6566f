"""Fixtures shared by all tests.

- ``shared_data``: ``../shared/data`` beside the repository (real measurements by other
  people, never copied into the repository); tests that need it skip when it is absent.
- ``datapath``: the bundled example folder (data airlink generated itself).
- ``root_netns``: skip unless running as root with ``ip netns`` and ``/dev/net/tun``.
- ``fresh_netns``: a new network namespace (lo up) removed afterwards, or None where
  namespaces cannot be made here.
- ``test_ns``: a fresh ``TestNS`` (``tests/replay/_replay_netns``), deleted with what runs
  in it afterwards; skips like ``root_netns``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real measurement data not found at {SHARED_DATA} (../shared/data)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def datapath() -> Path:
    from airlink.traces import example_path
    return example_path()


def netns_unavailable_reason() -> str | None:
    """Why real-namespace tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root for ip netns and TUN"
    if not shutil.which("ip"):
        return "iproute2 (ip) is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing"
    probe = f"airlink-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.decode().strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@pytest.fixture(scope="session")
def root_netns():
    reason = netns_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return True


@pytest.fixture
def fresh_netns(request):
    """The name of a new network namespace with ``lo`` up, deleted when the test ends, even
    when it fails; None where namespaces cannot be made here."""
    if netns_unavailable_reason():
        yield None
        return
    name = f"airlink-test-{os.getpid()}-{request.node.name[:24]}".replace("[", "-").replace("]", "")
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name])


@pytest.fixture
def run_airlink():
    """Run the CLI in-process: ``run_airlink("trace", "info", path)`` -> (status, out, err)."""
    import contextlib
    import io

    from airlink.cli import main

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main([str(a) for a in args])
            except SystemExit as exc:  # argparse usage errors
                status = exc.code
        return status, out.getvalue(), err.getvalue()

    return run


@pytest.fixture
def test_ns(root_netns):
    """A fresh namespace ``airlink-test-<pid>-<n>``, deleted (with what runs in it) afterwards."""
    from tests.replay._replay_netns import TestNS
    ns = TestNS()
    try:
        yield ns
    finally:
        ns.close()
