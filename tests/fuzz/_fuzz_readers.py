"""Property-based fuzzing of every reader and parser (run by test_fuzz_readers.py in a
subprocess whose address space is capped, so "never allocate beyond a bound" is checked too).

Inputs are built from the real files in ../shared/data: a prefix of the file, then a few
mutations drawn by Hypothesis - truncation, byte flips, a mangled/dropped/repeated header,
another text encoding, a huge field, duplicated or deleted lines. The property: reading
either gives a result, or raises :class:`AirlinkError` whose message names the file. Any
other exception (IndexError, UnicodeDecodeError, MemoryError, pyarrow's errors, ...) is a
bug. Hypothesis' deadline catches inputs that make a reader crawl; pytest-timeout, a hang.
"""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from airlink.core.errors import AirlinkError
from tests.traces.test_linklog import MM_LOG

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
EXAMPLES = int(os.environ.get("AIRLINK_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=20_000, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

MM_LINK_LOG = MM_LOG.encode()     # hand-written Mahimahi mm-link lines (tests/traces)


def _seed(rel: str, limit: int) -> bytes:
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"real measurement file not found: {path}")
    return path.read_bytes()[:limit]


@st.composite
def mutated(draw, seed: bytes):
    """A real file's bytes after 1-4 random damages of the kinds real files show."""
    data = seed
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "header", "encoding", "huge", "lines"]))
        lines = data.split(b"\n")
        if kind == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
        elif kind == "flip" and data:
            buf = bytearray(data)
            for _ in range(draw(st.integers(1, 16))):
                buf[draw(st.integers(0, len(buf) - 1))] = draw(st.integers(0, 255))
            data = bytes(buf)
        elif kind == "header":
            how = draw(st.sampled_from(["drop", "repeat", "garble", "rename"]))
            if how == "drop":
                lines = lines[1:]
            elif how == "repeat":
                lines.insert(draw(st.integers(0, len(lines))), lines[0])
            elif how == "garble":
                lines[0] = draw(st.binary(max_size=80))
            else:
                lines[0] = lines[0].replace(b",", b";", draw(st.integers(1, 5)))
            data = b"\n".join(lines)
        elif kind == "encoding":
            codec = draw(st.sampled_from(["utf-16", "utf-32", "cp1252-bom", "nul"]))
            text = data.decode("latin-1")
            if codec == "cp1252-bom":
                data = b"\xef\xbb\xbf" + data
            elif codec == "nul":
                data = data.replace(b",", b"\x00,", 3)
            else:
                data = text.encode(codec)
        elif kind == "huge":
            i = draw(st.integers(0, max(len(lines) - 1, 0)))
            field = draw(st.sampled_from([b"9" * 25, b"9" * 5000, b"1e308", b"-1", b"nan", b"x" * 200_000,
                                          b"18446744073709551616", b"inf"]))
            lines[i] = lines[i] + field if draw(st.booleans()) else field
            data = b"\n".join(lines)
        elif kind == "lines" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            if draw(st.booleans()):
                lines.insert(i, lines[i])                     # duplicate a row
            else:
                del lines[i:i + draw(st.integers(1, 20))]     # a gap
            data = b"\n".join(lines)
    return data


def _check(read, path: Path, data: bytes):
    path.write_bytes(data)
    try:
        read(path)
    except AirlinkError as e:
        assert path.name in str(e), f"error does not name the file: {e}"


def _fuzz(name: str, seed_rel: str | None, limit: int, suffix: str, read, *, seed: bytes | None = None,
          compress: bool = False):
    base = seed if seed is not None else _seed(seed_rel, limit)

    @SETTINGS
    @given(data=mutated(base))
    def run(tmp_path_factory, data):
        path = tmp_path_factory.mktemp(name) / f"fuzzed{suffix}"
        _check(read, path, gzip.compress(data) if compress else data)
    return run


def _read_pcap(p):
    from airlink import collectors
    frame = collectors.read_pcap(p, progress=False)
    collectors.analyze_tcp(frame, resolution="100ms")


def _read_pcap_salvage(p):
    from airlink import collectors
    collectors.analyze_tcp(collectors.read_pcap(p, salvage=True, progress=False), resolution="100ms")


def _reader(fmt):
    def read(p):
        from airlink import collectors
        collectors.read(p, format=fmt)
    return read


def _read_trace(p):
    from airlink.traces import mahimahi
    mahimahi.read_trace(p)


def _read_log(p):
    from airlink.traces import mmlinklog
    mmlinklog.read_log(p)


def _nrscope_trace(p):
    """What `airlink trace from-log` does with an NR-Scope log: the first RNTI's new bytes."""
    from airlink import collectors, traces
    frame = collectors.read(p, format="nrscope")
    if len(frame):
        traces.from_log(frame, column="tbs_bytes", user=str(frame["user"].iloc[0]), source=str(p))


def _read_any(p):
    from airlink import collectors
    collectors.read(p)


CASES = {
    "mahimahi-trace": ("mahimahi-traces/TMobile-LTE-short.down", 6000, ".down", _read_trace),
    "pcap": ("tcp-pcaps/zeek-head/206_example_b.pcap", 30000, ".pcap", _read_pcap),
    "pcap-salvage": ("tcp-pcaps/tcprs/rto/rto002.trace", 30000, ".pcap", _read_pcap_salvage),
    "ucc": ("ucc-5g/Download/Static/B_2019.12.16_13.40.04.csv", 8000, ".csv", _reader("ucc")),
    "icellspeed": ("icellspeed/D1_static/Austin/ATT/loc_31/default/data_310410_loc-lakeway-001d.csv",
                   8000, ".csv", _reader("icellspeed")),
    "nrscope": ("nr-scope/t_mobile1_ueactivity_afternoon_1.csv", 12000, ".csv", _reader("nrscope")),
    "nrscope-trace": ("nr-scope/t_mobile2_ueactivity_morning_1.csv", 12000, ".csv", _nrscope_trace),
    "sniffed": ("icellspeed/D1_driving/LosAngeles/data_310410.csv", 8000, ".csv", _read_any),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reader_fuzz(name, tmp_path_factory):
    rel, limit, suffix, read = CASES[name]
    if not (SHARED / rel).exists():
        # the named file moved: take the first file of the same kind in its folder
        folder = (SHARED / rel).parent
        found = sorted(folder.glob(f"*{Path(rel).suffix}")) if folder.is_dir() else []
        if not found:
            pytest.skip(f"real measurement file not found: {SHARED / rel}")
        rel = str(found[0].relative_to(SHARED))
    _fuzz(name, rel, limit, suffix, read)(tmp_path_factory)


def test_gzipped_pcap_fuzz(tmp_path_factory):
    """Damaged captures inside an intact gzip stream, and damaged gzip streams."""
    _fuzz("pcapgz", "tcp-pcaps/zeek-head/206_example_b.pcap", 30000, ".pcap.gz", _read_pcap_salvage,
          compress=True)(tmp_path_factory)
    raw = gzip.compress(_seed("tcp-pcaps/zeek-head/206_example_b.pcap", 30000))
    _fuzz("gzstream", None, 0, ".pcap.gz", _read_pcap_salvage, seed=raw)(tmp_path_factory)


def test_mm_link_log_fuzz(tmp_path_factory):
    _fuzz("mmlog", None, 0, ".log", _read_log, seed=MM_LINK_LOG)(tmp_path_factory)


EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


def test_sweep_file_fuzz(tmp_path_factory):
    """Damaged sweep files (beside their base experiment) load and check their points, or
    fail with one AirlinkError line naming the file."""
    def read(p):
        import shutil

        from airlink.sweep.spec import check_points, load_sweep
        shutil.copy(EXAMPLES_DIR / "sweeps" / "quick-cell.yaml", p.parent / "quick-cell.yaml")
        check_points(load_sweep(p))
    seed = (EXAMPLES_DIR / "sweeps" / "quick.yaml").read_bytes()
    _fuzz("sweep", None, 0, ".yaml", read, seed=seed)(tmp_path_factory)


def test_experiment_file_fuzz(tmp_path_factory):
    """Damaged experiment files load and validate, or fail with one AirlinkError line."""
    def read(p):
        from airlink.experiment import load_experiment
        load_experiment(p)
    seed = (EXAMPLES_DIR / "pf-cell.yaml").read_bytes()
    _fuzz("experiment", None, 0, ".yaml", read, seed=seed)(tmp_path_factory)


# Readers of formats with no file in ../shared/data: seeded with small files of their layout
# (an iperf3 report's shape as iperf 3.12 writes it; the others as in tests/collectors).
IPERF3_SEED = b"""{
\t"start":\t{
\t\t"connected":\t[{"socket": 5, "local_host": "127.0.0.1", "local_port": 42128,
\t\t\t"remote_host": "127.0.0.1", "remote_port": 5201}],
\t\t"version":\t"iperf 3.12",
\t\t"timestamp":\t{"time": "Fri, 27 Nov 2026 03:53:48 GMT", "timesecs": 1795751628},
\t\t"connecting_to":\t{"host": "127.0.0.1", "port": 5201},
\t\t"test_start":\t{"protocol": "TCP", "num_streams": 1, "blksize": 131072, "omit": 0, "duration": 2,
\t\t\t"bytes": 0, "blocks": 0, "reverse": 0, "tos": 0, "target_bitrate": 0}
\t},
\t"intervals":\t[{
\t\t\t"streams":\t[{"socket": 5, "start": 0, "end": 1.001372, "seconds": 1.00137197971344,
\t\t\t\t"bytes": 290979840, "bits_per_second": 2324649348.253335, "retransmits": 1,
\t\t\t\t"snd_cwnd": 1178694, "snd_wnd": 11310080, "rtt": 576, "rttvar": 835, "pmtu": 65535,
\t\t\t\t"omitted": false, "sender": true}],
\t\t\t"sum":\t{"start": 0, "end": 1.001372, "seconds": 1.00137197971344, "bytes": 290979840,
\t\t\t\t"bits_per_second": 2324649348.253335, "retransmits": 1, "omitted": false, "sender": true}
\t\t}, {
\t\t\t"streams":\t[{"socket": 5, "start": 1.001372, "end": 2.000046, "seconds": 0.998674,
\t\t\t\t"bytes": 288128000, "bits_per_second": 2308086236.1, "retransmits": 0,
\t\t\t\t"snd_cwnd": 1178694, "snd_wnd": 11310080, "rtt": 612, "rttvar": 701, "pmtu": 65535,
\t\t\t\t"omitted": false, "sender": true}],
\t\t\t"sum":\t{"start": 1.001372, "end": 2.000046, "seconds": 0.998674, "bytes": 288128000,
\t\t\t\t"bits_per_second": 2308086236.1, "retransmits": 0, "omitted": false, "sender": true}
\t\t}],
\t"end":\t{"sum_sent": {"start": 0, "end": 2.000046, "seconds": 2.000046, "bytes": 579107840,
\t\t\t"bits_per_second": 2316378380.0, "retransmits": 1, "sender": true},
\t\t"sum_received": {"start": 0, "end": 2.0011, "seconds": 2.0011, "bytes": 579107840,
\t\t\t"bits_per_second": 2315157000.0, "sender": true}}
}
"""
SEEDED = {
    "iperf3": (IPERF3_SEED, ".json", _reader("iperf3")),
    "throughput-trace": (b"".join(b"%d\t%.2f\n" % (i, 10 + (i * 7) % 13) for i in range(200)), ".txt",
                         _reader("throughput-trace")),
    "transfers": (b"rsrp,rsrq,sinr,cqi,payload,throughput\n" + b"".join(
        b"-%d,-%d,%d,%d,%d,%.2f\n" % (80 + i % 30, 8 + i % 9, i % 25, 1 + i % 15, 1 + i % 10, 0.5 + i % 40)
        for i in range(150)), ".csv", _reader("transfers")),
    "gnettrack": (b"Timestamp\tNetworkMode\tRSRP\tRSRQ\tDL_bitrate\tUL_bitrate\n" + b"".join(
        b"2019.12.03_10.%02d.%02d\tLTE\t-%d\t-%d\t%d\t%d\n" % (i // 60, i % 60, 90 + i % 20, 9 + i % 6, 100 * i, 7 * i)
        for i in range(150)), ".txt", _reader("gnettrack")),
    "xcal": (None, ".csv", _reader("xcal")),
}


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_seeded_reader_fuzz(name, tmp_path_factory):
    seed, suffix, read = SEEDED[name]
    if seed is None:
        seed = (Path(__file__).resolve().parents[1] / "traces" / "data" / "xcal_style_mac_20ms_SYNTHETIC.csv").read_bytes()
    _fuzz(name, None, 0, suffix, read, seed=seed)(tmp_path_factory)
