"""Mahimahi trace format: round trips, the running-reserve bound, malformed input."""
from fractions import Fraction

import numpy as np
import pytest

from airlink.traces import FormatError, Trace, mahimahi, read_trace, write_trace

TRACE_NAMES = ["ATT-LTE-driving-2016.down", "ATT-LTE-driving-2016.up", "TMobile-LTE-short.down",
               "TMobile-LTE-short.up", "Verizon-EVDO-driving.down", "Verizon-EVDO-driving.up",
               "Verizon-LTE-short.down", "Verizon-LTE-short.up"]


@pytest.mark.parametrize("name", TRACE_NAMES)
@pytest.mark.parametrize("opp", [1500, 1504])
def test_round_trip_is_byte_identical(shared_data, tmp_path, name, opp):
    src = shared_data / "mahimahi-traces" / name
    tr = read_trace(src, opportunity_bytes=opp)
    values = np.array(src.read_text().split(), dtype=np.int64)
    assert tr.tti == Fraction(1, 1000)
    assert tr.n_tti == values[-1]
    assert tr.values.sum() == values.size * opp
    out = write_trace(tr, tmp_path / "copy.trace", opportunity_bytes=opp)
    assert out.read_bytes() == src.read_bytes()
    # through Parquet too: the metadata that makes the text exact survives
    tr.write_parquet(tmp_path / "t.parquet")
    back = Trace.read_parquet(tmp_path / "t.parquet")
    assert back == tr and back.meta["mahimahi_zero_count"] == tr.meta["mahimahi_zero_count"]
    write_trace(back, tmp_path / "copy2.trace", opportunity_bytes=opp)
    assert (tmp_path / "copy2.trace").read_bytes() == src.read_bytes()


def test_tmobile_mean_rate(shared_data):
    tr = read_trace(shared_data / "mahimahi-traces" / "TMobile-LTE-short.down")
    assert tr.mean_rate_bps()[0] / 1e6 == pytest.approx(16.7, abs=0.05)


def test_constant_one_per_ms_is_12mbps(tmp_path):
    p = tmp_path / "one"
    p.write_text("1\n")
    tr = read_trace(p)
    assert tr.n_tti == 1 and tr.mean_rate_bps()[0] == pytest.approx(12e6)


@pytest.mark.parametrize("tti", ["0.125ms", "0.5ms", "1ms", "1.667ms", "2ms", "10ms", "0.3ms"])
@pytest.mark.parametrize("opp", [1500, 1504])
def test_running_reserve_bound(tti, opp):
    rng = np.random.default_rng(7)
    from airlink.traces import parse_tti
    t = parse_tti(tti)
    n = int(Fraction(3, 1) / t)  # 3 s
    # bursty byte-granular capacity: zeros, small and large TTIs
    vals = rng.gamma(0.6, 2000 * float(t) * 1000, size=n) * (rng.random(n) > 0.3)
    tr = Trace(vals, t)
    text = mahimahi.format_trace(tr, opportunity_bytes=opp)
    stamps = np.array(text.split(), dtype=np.int64)
    assert (np.diff(stamps) >= 0).all() and stamps[-1] == int(np.ceil(float(tr.duration) * 1000 - 1e-9))
    n_ms = stamps[-1]
    exported = np.cumsum(np.bincount(stamps - 1, minlength=n_ms)) * opp
    cum = tr.cumulative_bytes(np.arange(1, n_ms + 1) / 1000.0)[:, 0]
    diff = exported - cum
    assert np.abs(diff[:-1]).max() < opp
    assert abs(diff[-1]) < opp


def test_exact_tti_has_no_drift():
    tr = Trace(np.ones(6_000_000), "1.667ms")
    assert tr.tti == Fraction(1, 600)
    assert tr.tti_start_ns([6_000_000 - 1])[0] == (6_000_000 - 1) * 10**9 // 600
    assert tr.duration == 10_000
    for text, want in [("0.125ms", Fraction(1, 8000)), ("2ms", Fraction(1, 500)),
                       ("0.5ms", Fraction(1, 2000)), ("1/600s", Fraction(1, 600))]:
        assert Trace(np.ones(3), text).tti == want


@pytest.mark.parametrize("content, message", [
    ("", "empty trace file"),
    ("\n\n", "empty trace file"),
    ("1\n2\nthree\n", "line 3: not a non-negative integer"),
    ("1\n5\n4\n", "line 3: timestamps must not decrease"),
    ("1\n-2\n3\n", "line 2: negative timestamp"),
    ("0\n0\n", "the last timestamp is 0"),
    ("1\n\n2\n", "line 2: empty line"),
    ("1.5\n2\n", "line 1: not a non-negative integer"),
    # huge fields: a period beyond 24 h would make the reader allocate 16 bytes per ms of it
    ("1\n100000000000\n", "line 2: timestamp 100000000000 ms is beyond airlink's limit"),
    ("1\n" + "9" * 30 + "\n", "line 2: timestamp 9999.* ms is beyond airlink's limit"),
    ("1\n" + "9" * 5000 + "\n", "line 2: timestamp 9999.* ms is beyond airlink's limit"),
    ("1\n86400001\n", "line 2: timestamp 86400001 ms is beyond"),
])
def test_malformed_traces(tmp_path, content, message):
    p = tmp_path / "bad.trace"
    p.write_text(content)
    with pytest.raises(FormatError, match=message) as err:
        read_trace(p)
    assert str(p) in str(err.value) and "\n" not in str(err.value)


def test_binary_file_is_rejected(tmp_path):
    p = tmp_path / "bin.trace"
    p.write_bytes(b"\x00\xff\xfe\x12" * 10)
    with pytest.raises(FormatError):
        read_trace(p)


def test_collect_names_a_mahimahi_trace_as_a_replay_input(shared_data, tmp_path, run_airlink):
    """A measured Mahimahi trace given to the log readers: one line that says what it is
    and which commands take it, nothing written: the folders the command made are gone."""
    src = shared_data / "mahimahi-traces" / "Verizon-LTE-short.down"
    status, _, err = run_airlink("collect", src, "-o", tmp_path / "new" / "frames")
    assert status == 2 and err.count("\n") == 1, err
    assert "Verizon-LTE-short.down looks like a Mahimahi packet-delivery trace" in err
    assert "`airlink trace info` summarises it" in err
    assert not (tmp_path / "new").exists()
