"""The contract battery (in the manner of scikit-learn's ``check_estimator``): the same checks
over every reader of the collectors' registry and over every compiled part and its reference
twin, so a new reader or a new fast path is held to the rules the moment it is registered.

Readers (``airlink.collectors.READERS``), each on a small valid file of its format:

- ``read(path, format=name)`` gives a frame that passes the schema of the kind the reader
  produces (required columns, numeric unit columns), with ``attrs["reader"] == name``, and,
  for a timed kind, a ``time`` of ``datetime64[ns, UTC]`` that never goes back;
- an empty file, the file cut in the middle, and a file of another format give either that
  (for the cut file, a shorter valid frame) or one line ``airlink: error: ...`` naming the
  file with exit status 2 from ``airlink collect --format name`` - never a traceback.

Compiled parts and their references, each pair on one shared small input:

- the collectors' C loops and their numpy twins: ``airlink collect`` of the bundled capture
  with and without ``AIRLINK_PURE_PYTHON`` writes the same four frames;
- the replay shells' C stages (``stage.fast()``) and the Python stages: the same packets
  pushed and pulled at the same times leave in the same order with the same counters;
- the simulator's numba kernel and its Python form (``AIRLINK_NUMBA=0``): the same MAC log.

The replay cell path (``replay._cellpath``) has its own reference model in
tests/replay/test_cell_path.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.traces import validate
from airlink.core.schema import KINDS

from tests.collectors.test_capture_bad_input import good_capture
from tests.collectors.test_csvmap import LOG as CSV_LOG
from tests.errorline import one_error_line
from tests.collectors.test_log_readers import GNT_HEADER, GNT_ROWS, TRACKER_HEADER, TRACKER_ROWS
from tests.fuzz._fuzz_readers import IPERF3_SEED
from tests.traces.test_linklog import MM_LOG

REPO = Path(__file__).resolve().parents[1]
CSV_MAPPING = {"time": "when", "columns": {"q": "rsrp_dbm"}}


def _shared_prefix(shared_data, folder, pattern, lines):
    files = sorted((shared_data / folder).rglob(pattern))
    if not files:
        pytest.skip(f"no {pattern} file in ../shared/data/{folder}")
    with open(files[0], "rb") as fh:
        return b"".join(fh.readline() for _ in range(lines))


def _mac_parquet() -> bytes:
    import io
    t = pd.date_range("2024-01-01", periods=20, freq="1ms", tz="UTC")
    frame = pd.DataFrame({"time": t.repeat(2), "user": ["1", "2"] * 20,
                          "served_bytes": np.arange(40, dtype=float), "prbs": np.arange(40) % 7})
    buf = io.BytesIO()
    frame.to_parquet(buf)
    return buf.getvalue()


# reader -> (suffix, the kind of frame it produces, its sample's bytes from shared_data or None)
SAMPLES = {
    "pcap": (".pcap", "packets", lambda _: good_capture(20)),
    "mac-parquet": (".parquet", "mac", lambda _: _mac_parquet()),
    "iperf3": (".json", "throughput", lambda _: IPERF3_SEED),
    "linklog": (".log", "mac", lambda _: MM_LOG.encode()),
    "ucc": (".csv", "rf", lambda d: _shared_prefix(d, "ucc-5g", "*.csv", 30)),
    "gnettrack": (".txt", "rf", lambda _: (GNT_HEADER + "\n" + "\n".join(GNT_ROWS) + "\n").encode()),
    "5gtracker": (".csv", "rf", lambda _: (TRACKER_HEADER + "\n" + "\n".join(TRACKER_ROWS) + "\n").encode()),
    "icellspeed": (".csv", "mac", lambda d: _shared_prefix(d, "icellspeed/D1_static", "data_*.csv", 20)),
    "nrscope": (".csv", "mac", lambda d: _shared_prefix(d, "nr-scope", "*.csv", 200)),
    "callrecords": (".csv", "rf", lambda _: b"start,end,sector\n1700000000,1700000003,7\n"
                                            b"1700000001,1700000002.5,7\n1700000002,1700000004,9\n"),
    "xcal": (".csv", "mac", lambda _: (REPO / "tests/traces/data/xcal_style_mac_20ms_SYNTHETIC.csv").read_bytes()),
    "transfers": (".csv", "transfers", lambda _: b"rsrp,rsrq,sinr,cqi,payload,throughput\n"
                                                b"-90,-10,12,11,1,10.5\n-95,-12,8,9,5,4.25\n"),
    "throughput-trace": (".txt", "throughput", lambda _: b"0\t10.5\n1\t20\n2.5\t0\n"),
    "csv": (".csv", "rf", lambda _: CSV_LOG.encode()),
}
OPTIONS = {"csv": {"mapping": CSV_MAPPING}}


def test_every_registered_reader_has_a_sample():
    assert list(SAMPLES) == list(C.READERS) == C.reader_names()


@pytest.fixture(params=list(C.READERS))
def reader(request, shared_data, tmp_path):
    """(name, path of a valid sample, kind, read options)."""
    name = request.param
    suffix, kind, build = SAMPLES[name]
    path = tmp_path / f"sample-{name}{suffix}"
    path.write_bytes(build(shared_data))
    return name, path, kind, OPTIONS.get(name, {})


def _check_frame(frame, name, kind):
    validate(frame, kind, name=name)
    assert frame.attrs["reader"] == name
    assert len(frame) > 0
    if KINDS[kind].timed:
        t = frame.index if "time" not in frame.columns else frame["time"]
        assert str(t.dtype) == "datetime64[ns, UTC]", (name, t.dtype)
        assert (np.diff(pd.DatetimeIndex(t).asi8) >= 0).all(), name


def test_reader_gives_its_declared_frame(reader):
    name, path, kind, options = reader
    _check_frame(C.read(path, format=name, **options), name, kind)
    if name != "csv":                                  # the generic CSV reader is never sniffed
        assert C.read(path).attrs["reader"] == name    # and nothing earlier in the order claims it


def _collect(run_airlink, name, path, options, tmp_path):
    argv = ["collect", "--format", name, path, "-o", tmp_path / "out"]
    if "mapping" in options:
        import yaml
        mp = tmp_path / "mapping.yaml"
        mp.write_text(yaml.safe_dump(options["mapping"]))
        argv += ["--mapping", mp]
    return run_airlink(*argv)


def _refused_in_one_line(status, err, path):
    assert status == 2, err
    one_error_line(err, path.name)


def test_empty_file_is_one_line_naming_it(reader, run_airlink, tmp_path):
    name, path, _, options = reader
    path.write_bytes(b"")
    _refused_in_one_line(*_collect(run_airlink, name, path, options, tmp_path)[::2], path)


def test_file_of_another_format_is_one_line_naming_it(reader, run_airlink, tmp_path):
    name, path, _, options = reader
    # a capture for the text readers, a text log for the binary ones
    path.write_bytes(MM_LOG.encode() if name in ("pcap", "mac-parquet") else good_capture(5))
    _refused_in_one_line(*_collect(run_airlink, name, path, options, tmp_path)[::2], path)


def test_cut_file_is_read_or_one_line_naming_it(reader, run_airlink, tmp_path):
    name, path, kind, options = reader
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2 + 7])
    status, _, err = _collect(run_airlink, name, path, options, tmp_path)
    if status == 0:
        _check_frame(C.read(path, format=name, **options), name, kind)
    else:
        _refused_in_one_line(status, err, path)


# -- compiled parts and their references -------------------------------------------------------
def _frames(folder):
    return {p.name: pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}


def test_collectors_c_loops_equal_their_numpy_twins(tmp_path, run_airlink):
    from tests.cext import c_records
    c_records()
    cap = REPO / "examples" / "data" / "pf-cell-host.pcap.gz"
    status, _, err = run_airlink("collect", cap, "-o", tmp_path / "c", "--resolution", "100ms")
    assert status == 0, err
    env = dict(os.environ, AIRLINK_PURE_PYTHON="1")
    r = subprocess.run([sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())", "collect", str(cap), "-o", str(tmp_path / "py"),
                        "--resolution", "100ms"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c, py = _frames(tmp_path / "c"), _frames(tmp_path / "py")
    assert set(c) == set(py) and len(c) == 4
    for k in c:
        pd.testing.assert_frame_equal(c[k], py[k], check_exact=True, obj=k)


def _link():
    from airlink.replay import LinkStage, make_queue
    return LinkStage([1500.0, 0.0, 3000.0, 700.0], Fraction(1, 1000), queue=make_queue("droptail", "packets=6"),
                     start_ns=0)


def _delay():
    from airlink.replay import DelayStage
    return DelayStage(3.0)


@pytest.mark.parametrize("make", [_link, _delay], ids=["link", "delay"])
def test_replay_c_stages_equal_the_python_stages(make):
    from tests.cext import c_extension
    c_extension("airlink.replay._fastpath")
    py, c = make(), make().fast()
    assert c is not None, py.fast_refusal()
    rng = np.random.default_rng(4)
    for t in range(0, 12_000_000, 250_000):
        for i in range(int(rng.integers(0, 4))):
            packet = bytes([i, t % 251]) + bytes(int(rng.integers(38, 1500)))
            py.push(packet, t)
            c.push(packet, t)
        assert c.pull(t) == py.pull(t), t
    ref, got = py.stats(), c.stats()
    assert {k: ref[k] for k in got} == got and got["departures_packets"] > 0


def test_simulator_numba_kernel_equals_its_python_form(tmp_path):
    from airlink import sim
    from airlink.sim import kernel
    if not kernel.COMPILED:
        pytest.skip("numba is not installed: the Python form is what runs")
    a = sim.simulate("quick", seed=5, duration="200ms", n_users=3).mac
    out = tmp_path / "mac.parquet"
    code = ("import sys; from airlink import sim; "
            "sim.simulate('quick', seed=5, duration='200ms', n_users=3).mac.to_parquet(sys.argv[1])")
    r = subprocess.run([sys.executable, "-c", code, str(out)], env=dict(os.environ, AIRLINK_NUMBA="0", OPENBLAS_NUM_THREADS="1"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(a, pd.read_parquet(out), check_exact=True)
