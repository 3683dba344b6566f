"""The run folder: refusal of a non-empty folder, --overwrite, ownership under sudo, atomic
artifacts and the manifest's status (issue 12, "Found now")."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from airlink import rundir

REPO = Path(__file__).resolve().parents[2]
AIRLINK = [sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())"]
NOBODY = 65534

SMALL = """\
name: small
radio: {preset: quick, seed: 2, duration: 3s, user: 1}
applications:
  - bulk: {cc: cubic, seconds: 2}
collect: {resolution: 500ms}
infer: {surrogates: 5}
offline:
  captures: [%s]
"""


def _experiment(tmp_path, capture) -> Path:
    p = tmp_path / "small.yaml"
    p.write_text(SMALL % capture)
    return p


def _airlink(*args, env=None, **kw):
    return subprocess.run([*AIRLINK, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=REPO, timeout=600, **kw)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing file owners needs root")
BUNDLED = REPO / "examples" / "data" / "pf-cell-host.pcap.gz"


def _manifest_paths(folder: Path) -> set:
    return {e["path"] for e in rundir.read_manifest(folder)["artifacts"]} | {rundir.MANIFEST}


@needs_root
def test_under_sudo_only_created_files_change_owner(tmp_path):
    out = tmp_path / "results" / "run"      # neither folder exists: both are the run's
    exp = _experiment(tmp_path, BUNDLED)
    r = _airlink("run", exp, "-o", out, "--offline", "--quiet",
                 env={"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)})
    assert r.returncode == 0, r.stderr
    files = [p for p in out.rglob("*")]
    assert files and all(p.stat().st_uid == NOBODY and p.stat().st_gid == NOBODY for p in files)
    assert (tmp_path / "results").stat().st_uid == NOBODY
    assert tmp_path.stat().st_uid == 0          # was there before: untouched
    assert exp.stat().st_uid == 0


@needs_root
def test_under_sudo_overwrite_keeps_foreign_files_and_their_owner(tmp_path):
    out = tmp_path / "run"
    exp = _experiment(tmp_path, BUNDLED)
    env = {"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)}
    # no report page: which files change owner is test_under_sudo_only_created_files_change_owner's
    # check (the page among them); here, which files an overwrite keeps, removes and gives away
    assert _airlink("run", exp, "-o", out, "--offline", "--quiet", "--no-report", env=env).returncode == 0
    earlier = _manifest_paths(out)
    assert "packets.parquet" in earlier
    notes = out / "my-notes.txt"                       # the user's own files, root's
    notes.write_text("mine")
    (out / "analysis").mkdir()
    (out / "analysis" / "plot.py").write_text("print(1)")
    # the second run has no capture: the first run's packets must go, not stay as stale input
    exp2 = tmp_path / "nocapture.yaml"
    exp2.write_text("name: nocap\nradio: {preset: quick, seed: 3, duration: 2s}\ninfer: {surrogates: 5}\n")
    r = _airlink("run", exp2, "-o", out, "--offline", "--quiet", "--overwrite", "--no-report", env=env)
    assert r.returncode == 0, r.stderr
    assert notes.read_text() == "mine" and (out / "analysis" / "plot.py").exists()
    assert notes.stat().st_uid == 0 and (out / "analysis").stat().st_uid == 0
    assert (out / "analysis" / "plot.py").stat().st_uid == 0
    assert not (out / "packets.parquet").exists() and not (out / "flows.parquet").exists()
    now = _manifest_paths(out)
    for rel in now:
        assert (out / rel).stat().st_uid == NOBODY, rel
    assert rundir.read_manifest(out)["status"] == "finished"


def test_non_empty_folder_is_refused_without_overwrite(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    r = _airlink("run", _experiment(tmp_path, BUNDLED), "-o", out, "--offline", "--quiet")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airlink: error: ") and "not empty" in lines[0]
    assert "--overwrite" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_overwrite_without_a_manifest_is_refused_and_removes_nothing(tmp_path):
    """No manifest: not an airlink run folder - --overwrite has nothing of airlink's to
    replace, and a same-named file of the user's must not be replaced either (issue 31)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "packets.parquet").write_text("not ours: no manifest lists it")
    exp = tmp_path / "nocapture.yaml"
    exp.write_text("name: nocap\nradio: {preset: quick, seed: 3, duration: 2s}\ninfer: false\n"
                   "report: false\n")
    r = _airlink("run", exp, "-o", out, "--offline", "--quiet", "--overwrite")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("airlink: error: -o ") and "no readable manifest.json" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == ["packets.parquet"]
    assert (out / "packets.parquet").read_text() == "not ours: no manifest lists it"


def test_killed_frame_writer_leaves_nothing_under_the_final_name(tmp_path):
    final = tmp_path / "packets.parquet"
    ready = tmp_path / "ready"
    code = f"""
import time, pathlib, pandas as pd, pyarrow as pa
from airlink.rundir import FrameStreamWriter
chunk = pd.DataFrame({{"time": pd.to_datetime([0, 1], unit="s", utc=True), "x": [1.0, 2.0]}})
with FrameStreamWriter({str(final)!r}, pa.Schema.from_pandas(chunk, preserve_index=False), kind="packets") as w:
    w.write(chunk)
    pathlib.Path({str(ready)!r}).write_text("1")
    time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        while not ready.exists():
            assert proc.poll() is None, "writer exited early"
            time.sleep(0.05)
        assert [p.name for p in tmp_path.iterdir() if p != ready] == ["packets.parquet.partial"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not final.exists()


def test_frame_writers_stamp_kind_and_provenance(tmp_path):
    frame = pd.DataFrame({"time": pd.to_datetime([0, 1], unit="s", utc=True), "x": [1.0, 2.0]})
    frame.attrs["source"] = "capture.pcap"
    p = rundir.write_frame(tmp_path / "a.parquet", frame, kind="tcp")
    meta = pq.read_schema(p).metadata
    assert meta[b"airlink.kind"] == b"tcp"
    assert json.loads(meta[b"airlink.provenance"])["source"] == "capture.pcap"
    assert rundir.kind_of(p) == "tcp"
    import pyarrow as pa
    with rundir.FrameStreamWriter(tmp_path / "b.parquet", pa.Schema.from_pandas(frame, preserve_index=False),
                                  kind="packets", provenance={"file": "x"}) as w:
        w.write(frame)
        w.write(frame)
    assert pq.ParquetFile(tmp_path / "b.parquet").metadata.num_row_groups == 2
    assert rundir.kind_of(tmp_path / "b.parquet") == "packets"
    assert len(pd.read_parquet(tmp_path / "b.parquet")) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet", "b.parquet"]


def test_frame_encoding_options_change_the_file_not_the_table(tmp_path):
    """write_frame's dictionary and statistics lists (names the frame lacks ignored): only
    the listed columns are dictionary-encoded / carry min/max; the table read back is the
    one written."""
    import pyarrow as pa
    table = pa.table({"time": pa.array(np.arange(1000) * 10**6, pa.timestamp("ns", tz="UTC")),
                      "kind": pa.array(["a", "b"] * 500), "seq": pa.array(np.arange(1000) * 7)})
    p = rundir.write_frame(tmp_path / "e.parquet", table, kind="tcp-events",
                           use_dictionary=["kind", "absent"], write_statistics=["time", "absent"])
    assert pq.read_table(p).equals(table)
    rg = pq.ParquetFile(p).metadata.row_group(0)
    cols = {rg.column(i).path_in_schema: rg.column(i) for i in range(rg.num_columns)}
    assert [n for n, c in cols.items() if "RLE_DICTIONARY" in c.encodings] == ["kind"]
    assert [n for n, c in cols.items() if c.is_stats_set] == ["time"]
    assert cols["time"].statistics.min == pd.Timestamp(0, tz="UTC")


def test_background_frame_writer_writes_the_same_file(tmp_path):
    """background=True: the same row groups and values as writing in the caller's thread."""
    import pyarrow as pa
    chunks = [pd.DataFrame({"time": pd.to_datetime(np.arange(k, k + 5), unit="s", utc=True),
                            "x": np.arange(k, k + 5) * 0.5}) for k in range(0, 50, 5)]
    schema = pa.Schema.from_pandas(chunks[0], preserve_index=False)
    for name, background in (("fg.parquet", False), ("bg.parquet", True)):
        with rundir.FrameStreamWriter(tmp_path / name, schema, kind="packets", background=background) as w:
            for c in chunks:
                w.write(c)
    assert pq.ParquetFile(tmp_path / "bg.parquet").metadata.num_row_groups == len(chunks)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "bg.parquet"),
                                  pd.concat(chunks, ignore_index=True))


def test_background_frame_writer_error_leaves_no_file(tmp_path, monkeypatch):
    """A row group the writer thread cannot write: the error reaches the caller (at a later
    write or when the block ends) and no file is left under the final name."""
    import pyarrow as pa
    import pyarrow.parquet as pqm
    chunk = pd.DataFrame({"time": pd.to_datetime([0, 1], unit="s", utc=True), "x": [1.0, 2.0]})

    def refuse(self, table, row_group_size=None):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(pqm.ParquetWriter, "write_table", refuse)
    final = tmp_path / "p.parquet"
    with pytest.raises(Exception, match="(?i)no space left"):
        with rundir.FrameStreamWriter(final, pa.Schema.from_pandas(chunk, preserve_index=False),
                                      kind="packets", background=True) as w:
            for _ in range(10):
                w.write(chunk)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_run_is_not_complete(tmp_path):
    """SIGKILL while the collect stage reads: the manifest still says running, and nothing
    in the folder sits under a final name that the manifest does not list."""
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)                   # the collect stage blocks reading it
    out = tmp_path / "run"
    proc = subprocess.Popen([*AIRLINK, "run", str(_experiment(tmp_path, fifo)), "-o", str(out),
                             "--offline", "--quiet"], cwd=REPO, stderr=subprocess.PIPE)
    try:
        def live_done():
            try:
                return any(s["name"] == "live" for s in json.loads((out / "run.json").read_text())["stages"])
            except (OSError, ValueError):
                return False
        while not live_done():      # the next stage, collect, waits on the FIFO forever
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read().decode()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert rundir.read_manifest(out)["status"] == "running"
    assert not rundir.is_complete(out)
    listed = _manifest_paths(out)
    for p in out.rglob("*"):
        if p.is_file():
            assert p.name.endswith(rundir.PARTIAL_SUFFIX) or p.relative_to(out).as_posix() in listed, p
    assert not (out / "report.html").exists()
