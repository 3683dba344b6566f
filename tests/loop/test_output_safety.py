"""Output folders and files that cannot escape or destroy (issue 31, "Safety first").

airlink runs as root under sudo (the shells need it), so every reproduction of the issue is
run here as root with ``SUDO_UID``/``SUDO_GID`` of nobody where ownership matters, and each
asserts that nothing outside the run folder changed - content and owner - and that a refusal
is exit status 2 with one line naming the option or the file and key.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airlink import rundir
from airlink.outfolder import FolderLock
from airlink.core.atomic import OutputError, write_text

from tests.errorline import one_error_line

REPO = Path(__file__).resolve().parents[2]
AIRLINK = [sys.executable, "-c", "import sys; from airlink.cli import entry; entry()"]
NOBODY = 65534
QUICK = "radio: {preset: quick, duration: 1s}\nreport: false\ninfer: false\n"
BUNDLED = REPO / "examples" / "data" / "pf-cell-host.pcap.gz"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing file owners needs root")


@pytest.fixture
def as_sudo(monkeypatch):
    """The environment sudo gives: the invoking user is nobody."""
    monkeypatch.setenv("SUDO_UID", str(NOBODY))
    monkeypatch.setenv("SUDO_GID", str(NOBODY))


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` (itself included) with owner, group, mode and content."""
    out = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(p)
        body = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
        out[p.relative_to(root).as_posix()] = (st.st_uid, st.st_gid, st.st_mode, body)
    return out


def _airlink(*args, env=None, cwd=REPO, timeout=600):
    return subprocess.run([*AIRLINK, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=timeout)


# ---------------------------------------------------------------------------- 1. paths
@needs_root
@pytest.mark.parametrize("name", ["zz/../../../victim", "ABSOLUTE", "..", "a/b"])
def test_an_experiment_name_is_a_plain_name(tmp_path, monkeypatch, as_sudo, run_airlink, name):
    """The issue's reproduction: ``name: zz/../../../victim`` (or an absolute path) made
    `airlink run` write into victim/ and give x, x/work and x/victim to the sudo user."""
    x = tmp_path / "x"
    (x / "work").mkdir(parents=True)
    (x / "victim").mkdir()
    (x / "victim" / "config.yaml").write_text("mine\n")
    name = str(x / "victim") if name == "ABSOLUTE" else name
    (x / "work" / "e.yaml").write_text(f"name: {json.dumps(name)}\n{QUICK}")
    before = _snapshot(tmp_path)
    monkeypatch.chdir(x / "work")
    status, _, err = run_airlink("run", "e.yaml", "--offline", "--quiet")
    assert status == 2
    line = one_error_line(err)
    assert "e.yaml: name: must be a plain name" in line
    assert _snapshot(tmp_path) == before


@needs_root
def test_output_option_is_resolved_before_the_non_empty_check(tmp_path, monkeypatch, as_sudo, run_airlink):
    """``-o nothere/../victim`` is victim: refused as a non-empty folder, ``nothere`` never made."""
    x = tmp_path / "x"
    (x / "work").mkdir(parents=True)
    (x / "victim").mkdir()
    (x / "victim" / "config.yaml").write_text("mine\n")
    (x / "work" / "e.yaml").write_text(f"name: ok\n{QUICK}")
    before = _snapshot(tmp_path)
    monkeypatch.chdir(x / "work")
    for args in (["-o", "nothere/../../victim"], ["-o", "../victim", "--overwrite"]):
        status, _, err = run_airlink("run", "e.yaml", "--offline", "--quiet", *args)
        assert status == 2, err
        line = one_error_line(err)
        assert line.startswith(f"airlink: error: -o {x / 'victim'}: output folder ")
        assert _snapshot(tmp_path) == before


@needs_root
def test_only_folders_really_made_are_recorded_and_given_away(tmp_path, as_sudo):
    """``mkdir`` of ``new/../made/run``: made/ and made/run are the run's; new/ is never made
    (no ``..`` recorded) and the existing parent keeps its owner."""
    folder = rundir.RunFolder.create(tmp_path / "new" / ".." / "made" / "run")
    assert folder.path == tmp_path / "made" / "run"
    assert not (tmp_path / "new").exists()
    folder.write_json("run.json", {"x": 1})
    folder.finish()
    changed = folder.give_to_sudo_user()
    folder.release()
    assert set(changed) == {tmp_path / "made", tmp_path / "made" / "run", tmp_path / "made" / "run" / "run.json",
                            tmp_path / "made" / "run" / rundir.MANIFEST}
    assert os.stat(tmp_path).st_uid == 0
    assert all(p.stat().st_uid == NOBODY for p in changed)


# ---------------------------------------------------------------------------- 2. --overwrite
def _earlier_run(folder: Path, extra_entries=()) -> None:
    """A finished run folder made through the API, its manifest then given ``extra_entries``
    (what a user who owns the folder may write into it)."""
    rf = rundir.RunFolder.create(folder)
    rf.write_json("run.json", {"earlier": True})
    rf.write_text("capture/host.pcap", "earlier capture")
    rf.finish()
    rf.release()
    doc = rundir.read_manifest(folder)
    doc["artifacts"] += [{"path": p, "kind": "other", "stage": "run"} for p in extra_entries]
    (folder / rundir.MANIFEST).write_text(json.dumps(doc))


@needs_root
def test_overwrite_never_deletes_through_a_symlink(tmp_path, as_sudo):
    """A manifest entry ``lnk/config.yaml`` with ``lnk`` a link to another folder (and an
    absolute and a ``..`` entry) deletes nothing there; the run's own artifacts go."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.yaml").write_text("precious\n")
    run = tmp_path / "run"
    _earlier_run(run, ["lnk/config.yaml", "sub/lnk/config.yaml", str(elsewhere / "config.yaml"),
                       "../elsewhere/config.yaml"])
    (run / "lnk").symlink_to(elsewhere)
    (run / "sub").mkdir()
    (run / "sub" / "lnk").symlink_to(elsewhere)
    before = _snapshot(elsewhere)
    exp = tmp_path / "e.yaml"
    exp.write_text(f"name: e\n{QUICK}")
    r = _airlink("run", exp, "-o", run, "--offline", "--quiet", "--overwrite",
                 env={"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)})
    assert r.returncode == 0, r.stderr
    assert _snapshot(elsewhere) == before
    assert not (run / "capture").exists()              # the earlier run's own: removed
    assert json.loads((run / "run.json").read_text())["name"] == "e"
    assert (run / "lnk").is_symlink() and (run / "sub" / "lnk").is_symlink()   # not the run's: kept
    assert os.lstat(run / "lnk").st_uid == 0 and (run / "sub").stat().st_uid == 0
    assert rundir.read_manifest(run)["status"] == "finished"


@needs_root
def test_files_the_user_put_in_a_run_folder_are_never_adopted(tmp_path, as_sudo):
    """A user's file in ``capture/`` is not recorded by the live stage, not given away, and
    survives the next ``--overwrite``; one under an artifact's name is refused, not replaced."""
    from airlink.experiment.live import LIVE_OUTPUTS, promote_live_outputs
    run = tmp_path / "run"
    _earlier_run(run)
    (run / "capture" / "mine.pcap").write_text("the user's")
    rf = rundir.RunFolder.create(run, overwrite=True)
    assert "capture/mine.pcap" in rf.foreign and not (run / "capture" / "host.pcap").exists()

    # the live stage's bookkeeping, after its processes wrote
    (run / "capture" / "host.pcap.partial").write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(20))
    promote_live_outputs(rf, list(LIVE_OUTPUTS))
    assert set(rf.artifacts) == {"capture/host.pcap"}
    rf.finish()
    rf.give_to_sudo_user()
    rf.release()
    assert (run / "capture" / "mine.pcap").stat().st_uid == 0
    assert (run / "capture" / "host.pcap").stat().st_uid == NOBODY
    rf = rundir.RunFolder.create(run, overwrite=True)
    assert (run / "capture" / "mine.pcap").read_text() == "the user's"
    assert not (run / "capture" / "host.pcap").exists()
    (run / "capture" / "host.pcap").write_text("the user's too")
    rf.foreign.add("capture/host.pcap")
    with pytest.raises(rundir.AirlinkError, match="was in the run folder before this run"):
        rf.claim("capture/host.pcap")
    with pytest.raises(rundir.AirlinkError, match="was in the run folder before this run"):
        rf.write_text("capture/host.pcap", "x")
    rf.release()
    assert (run / "capture" / "host.pcap").read_text() == "the user's too"


@needs_root
def test_a_link_out_of_the_run_folder_is_not_written_through(tmp_path, as_sudo):
    """A subfolder of the run folder that is a link elsewhere (``capture -> /elsewhere``)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    rf = rundir.RunFolder.create(run)
    rf.finish()
    rf.release()
    os.symlink(elsewhere, run / "capture")
    rf = rundir.RunFolder.create(run, overwrite=True)
    with pytest.raises(rundir.AirlinkError, match="not inside the run folder"):
        rf.write_text("capture/host.pcap", "x")
    rf.release()
    assert list(elsewhere.iterdir()) == []


# ---------------------------------------------------------------------------- 3. every command
@needs_root
@pytest.mark.parametrize("command", ["simulate", "collect", "run", "sweep"])
def test_every_command_refuses_a_non_empty_folder_the_same_way(tmp_path, as_sudo, run_airlink, command):
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.yaml").write_text("mine\n")
    exp = tmp_path / "e.yaml"
    exp.write_text(f"name: e\n{QUICK}")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"experiment: {exp}\noffline: true\ngrid: {{radio.seed: [1]}}\n")
    args = {"simulate": ["simulate", "--duration", "100ms"], "collect": ["collect", BUNDLED],
            "run": ["run", exp, "--offline"], "sweep": ["sweep", sweep]}[command]
    before = _snapshot(tmp_path)
    status, _, err = run_airlink(*args, "-o", out)
    assert status == 2
    line = one_error_line(err)
    assert line.startswith(f"airlink: error: -o {out}: output folder ")
    assert "not empty" in line
    if command != "sweep":
        assert "--overwrite" in line
    assert _snapshot(tmp_path) == before


def test_simulate_overwrites_only_its_own_earlier_files(tmp_path, run_airlink):
    out = tmp_path / "out"
    assert run_airlink("simulate", "--duration", "100ms", "-o", out, "--mahimahi")[0] == 0
    listed = {e["path"] for e in rundir.read_manifest(out)["artifacts"]}
    assert {"capacity.parquet", "mac.parquet", "summary.json", "config.yaml"} <= listed
    (out / "notes.txt").write_text("mine")
    assert run_airlink("simulate", "--duration", "100ms", "-o", out)[0] == 2
    status, _, err = run_airlink("simulate", "--duration", "100ms", "-o", out, "--overwrite")
    assert status == 0, err
    assert (out / "notes.txt").read_text() == "mine"
    assert not list(out.glob("user*.down"))             # the earlier run's, not made this time
    assert rundir.read_manifest(out)["status"] == "finished"


# ---------------------------------------------------------------------------- 4. atomic writers
@needs_root
@pytest.mark.parametrize("target", ["/dev/null", "FIFO", "FOLDER", "LINK-TO-DEVICE"])
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, run_airlink, target):
    if target == "FIFO":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    elif target == "FOLDER":
        target = tmp_path / "folder.down"
        target.mkdir()
    elif target == "LINK-TO-DEVICE":
        target = tmp_path / "stdout.down"
        target.symlink_to("/dev/null")
    before = os.lstat(target)
    status, _, err = run_airlink("trace", "constant", "10Mbps", "-o", target)
    assert status == 2
    line = one_error_line(err)
    assert f"{target}: exists and is a" in line and "not a regular file" in line
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_uid) == (before.st_mode, before.st_ino, before.st_uid)
    with pytest.raises(OutputError, match="not a regular file"):
        write_text(target, "x")
    assert not os.path.lexists(str(target) + ".partial")


def test_a_leftover_partial_link_is_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out.txt"
    os.symlink(victim, str(out) + ".partial")
    write_text(out, "new\n")
    assert victim.read_text() == "precious\n"
    assert out.read_text() == "new\n" and not out.is_symlink()
    assert not os.path.lexists(str(out) + ".partial")
    # a stale regular .partial is replaced, not appended to or reused
    Path(str(out) + ".partial").write_text("stale stale stale\n")
    write_text(out, "newer\n")
    assert out.read_text() == "newer\n"


# ---------------------------------------------------------------------------- 5. the lock
def test_a_second_run_into_a_folder_in_use_is_refused(tmp_path):
    """Two `run --overwrite` into one folder at once: the second is refused with one line while
    the first holds the folder; the first finishes alone."""
    out = tmp_path / "run"
    exp = tmp_path / "e.yaml"
    exp.write_text("name: e\nradio: {preset: quick, duration: 20s}\nreport: false\ninfer: false\n")
    first = subprocess.Popen([*AIRLINK, "run", str(exp), "-o", str(out), "--offline", "--quiet", "--overwrite"],
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while rundir.read_manifest(out) is None:
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.05)
        # the first run is held (stopped, its lock still taken) while the second tries, so
        # the second meets a folder in use however fast the first would have finished
        first.send_signal(signal.SIGSTOP)
        try:
            second = _airlink("run", exp, "-o", out, "--offline", "--quiet", "--overwrite")
        finally:
            first.send_signal(signal.SIGCONT)
        assert second.returncode == 2
        line = one_error_line(second.stderr)
        assert line.startswith(f"airlink: error: -o {out}: another airlink run is writing into this folder")
    finally:
        if first.poll() is None:
            first.wait(timeout=600)
    # the refusal touched nothing of the first run: it finishes as if alone
    assert first.returncode == 0, first.stderr.read()
    assert rundir.read_manifest(out)["status"] == "finished"


def test_the_sweep_and_the_run_share_one_lock(tmp_path, run_airlink):
    out = tmp_path / "campaign"
    out.mkdir()
    sweep = tmp_path / "s.yaml"
    exp = tmp_path / "e.yaml"
    exp.write_text(f"name: e\n{QUICK}")
    sweep.write_text(f"experiment: {exp}\noffline: true\ngrid: {{radio.seed: [1]}}\n")
    with FolderLock(out):
        status, _, err = run_airlink("sweep", sweep, "-o", out)
    assert status == 2
    assert one_error_line(err) == f"airlink: error: -o {out}: another sweep is running into this campaign folder"
    assert list(out.iterdir()) == []


# ---------------------------------------------------------------------------- 6. interrupted runs
SMALL = """\
name: small
radio: {preset: quick, seed: 2, duration: 1s, user: 1}
collect: {resolution: 500ms}
infer: false
offline:
  captures: [%s]
"""


def _run_blocked_in_collect(tmp_path):
    """`airlink run` whose collect stage blocks reading a FIFO; returns (process, folder)."""
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    exp = tmp_path / "small.yaml"
    exp.write_text(SMALL % fifo)
    out = tmp_path / "run"
    proc = subprocess.Popen([*AIRLINK, "run", str(exp), "-o", str(out), "--offline", "--quiet"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def in_collect():
        try:
            return any(s["name"] == "live" for s in json.loads((out / "run.json").read_text())["stages"])
        except (OSError, ValueError):
            return False
    while not in_collect():
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(0.3)
    return proc, out


def _no_stray_partial(out: Path) -> None:
    doc = rundir.read_manifest(out)
    listed = {e["path"] for e in doc["artifacts"]}
    for p in out.rglob("*"):
        if p.name.endswith(rundir.PARTIAL_SUFFIX):
            rel = p.relative_to(out).as_posix()
            assert rel in listed, f"{rel}: a .partial the manifest does not list"
            assert next(e for e in doc["artifacts"] if e["path"] == rel).get("complete") is False


def test_sigterm_ends_a_run_like_ctrl_c(tmp_path):
    proc, out = _run_blocked_in_collect(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    doc = rundir.read_manifest(out)
    assert doc["status"] == "failed"
    assert not rundir.is_complete(out)
    stages = {s["name"]: s["status"] for s in json.loads((out / "run.json").read_text())["stages"]}
    assert stages["collect"] == "interrupted"
    _no_stray_partial(out)
    assert rundir.run_state(out) == "failed"


def test_a_killed_run_is_reported_as_interrupted(tmp_path, run_airlink):
    proc, out = _run_blocked_in_collect(tmp_path)
    assert rundir.run_state(out) == "running"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert rundir.read_manifest(out)["status"] == "running"
    assert rundir.run_state(out) == "interrupted"
    status, _, err = run_airlink("report", out)
    assert status == 0 and "airlink: warning: " in err and "the run was interrupted" in err
    assert "the run was interrupted" in (out / "report.html").read_text()
    exp = tmp_path / "again.yaml"
    exp.write_text(f"name: again\n{QUICK}")
    r = _airlink("run", exp, "-o", out, "--offline", "--overwrite")
    assert r.returncode == 0, r.stderr
    assert "replacing an interrupted run" in r.stderr
    assert rundir.read_manifest(out)["status"] == "finished"
    assert not list(out.rglob("*" + rundir.PARTIAL_SUFFIX))


@needs_root
def test_a_failed_run_lists_its_partial_outputs_and_the_next_overwrite_removes_them(tmp_path, as_sudo):
    """A shell's log that stayed ``downlink.log.partial`` (its shell was stopped): listed as
    incomplete, given to the sudo user, removed by the next ``overwrite``; a user's
    ``.partial`` file that was there before is none of these."""
    run = tmp_path / "run"
    _earlier_run(run)
    (run / "notes.partial").write_text("the user's")
    rf = rundir.RunFolder.create(run, overwrite=True)
    (run / "downlink.log.partial").write_text("# mahimahi log, cut short\n")
    rf.finish("failed")
    rf.give_to_sudo_user()
    rf.release()
    entries = {e["path"]: e for e in rundir.read_manifest(run)["artifacts"]}
    assert entries["downlink.log.partial"]["complete"] is False
    assert entries["downlink.log.partial"]["kind"] == "link-log"
    assert "notes.partial" not in entries
    assert (run / "downlink.log.partial").stat().st_uid == NOBODY
    assert (run / "notes.partial").stat().st_uid == 0
    rf = rundir.RunFolder.create(run, overwrite=True)
    rf.release()
    assert not (run / "downlink.log.partial").exists()
    assert (run / "notes.partial").read_text() == "the user's"


def _inner_shell(outer_pid: int):
    """The pid of the inner `airlink link` a nested shell started (in the outer one's
    session: never another test's), or None yet."""
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != outer_pid:
            try:
                if os.getsid(int(d)) != outer_pid:
                    continue
                argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if len(argv) > 2 and argv[1].endswith(b"/airlink") and argv[2] == b"link":
                return int(d)
    return None


@pytest.mark.netns
@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.3])
def test_ctrl_c_of_nested_shells_prints_no_traceback(tmp_path, root_netns, after_s):
    """Ctrl-C (SIGINT to the whole foreground process group) of `airlink delay 10 airlink link
    ... -- sleep 30`, also while the inner airlink's interpreter is still starting: status 130
    and no traceback from either."""
    from airlink.traces import constant, write_trace
    trace = write_trace(constant(10e6, 1), tmp_path / "c.down", "mahimahi")
    exe = str(Path(sys.executable).parent / "airlink")
    p = subprocess.Popen([exe, "delay", "10", exe, "link", str(trace), "--", "sleep", "30"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        give_up = time.monotonic() + 60
        while _inner_shell(p.pid) is None:
            assert p.poll() is None and time.monotonic() < give_up, p.stderr.read()
            time.sleep(0.001)
        time.sleep(after_s)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "Fatal Python error" not in err, err


def test_ctrl_c_of_a_sweep_prints_no_traceback_and_it_resumes(tmp_path):
    """Ctrl-C (SIGINT to the whole process group: the sweep and its Dask workers) once the
    first point is done: status 130, one line saying how to resume, no traceback from the
    sweep or a worker; the same command then finishes the campaign."""
    exp = tmp_path / "e.yaml"
    exp.write_text(f"name: e\n{QUICK}")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"experiment: {exp}\noffline: true\ngrid: {{radio.seed: [1, 2, 3, 4, 5, 6]}}\n")
    out = tmp_path / "campaign"
    p = subprocess.Popen([*AIRLINK, "sweep", str(sweep), "-o", str(out), "--workers", "1"], cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        give_up = time.monotonic() + 300
        while not (out / "runs").is_dir() or not list((out / "runs").glob("seed=*")):
            assert p.poll() is None and time.monotonic() < give_up, p.stderr.read()
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if p.returncode == 0:
        pytest.skip("the sweep finished before the interrupt reached it")
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted" in err and "the same command resumes" in err
    r = _airlink("sweep", sweep, "-o", out, "--workers", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    from airlink.sweep import read_campaign
    frame, _ = read_campaign(out)
    assert sorted(frame["status"]) == ["done"] * 6
