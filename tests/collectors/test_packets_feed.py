"""The packets pass fed by the analysis' own pass over the capture (collectors/_feed.py,
``analyze_tcp(..., feed_packets=True)``): the same tables as the packets pass that reads the
capture itself, and neither side left waiting when the other fails."""
from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest
from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet, udp_packet

from airlink import collectors as C
from airlink.collectors._feed import BatchFeed
from airlink.collectors.pcap import iter_packet_tables

T0 = 1_700_000_000 * 10**9


def capture(tmp_path):
    """Two TCP connections (one long), UDP, records out of time order and equal times."""
    recs = []
    for i in range(1500):
        t = T0 + (i // 2) * 10_000
        if i % 7 == 0:
            frame = udp_packet()
        elif i % 3:
            frame = tcp_packet("10.0.0.1", "10.0.0.2", 40000, 80, seq=1 + 100 * i, ack=1, flags="PA",
                               payload=b"z" * 100)
        else:
            frame = tcp_packet("10.0.0.2", "10.0.0.1", 80, 40000, seq=1, ack=1 + 100 * i, flags="A")
        recs.append((t, link_wrap(frame, 1)))
    recs += [(T0 + k * 1_000, link_wrap(tcp_packet("10.0.1.1", "10.0.1.2", 5, 6, flags="S"), 1))
             for k in range(3)]
    for i in range(0, 1400, 97):                  # a record now and then written late
        recs[i], recs[i + 5] = recs[i + 5], recs[i]
    f = tmp_path / "fed.pcap"
    f.write_bytes(pcap_bytes(recs))
    return f


def fed_tables(f, max_packets):
    """(tables of the fed packets pass, the feed, the pass's info)."""
    got, info, errors, seen = [], {}, [], []

    def consume(flows, late, feed):
        try:
            got.extend(iter_packet_tables(f, flows=flows, max_lateness_ns=late, info=info, feed=feed))
        except BaseException as exc:           # noqa: BLE001 - raised below, in the test's thread
            errors.append(exc)

    def flows_ready(flows, late, feed):
        seen.append(feed)
        t = threading.Thread(target=consume, args=(flows, late, feed))
        t.start()
        seen.append(t)
    a = C.analyze_tcp(f, max_packets=max_packets, flows_ready=flows_ready, feed_packets=True)
    seen[1].join()
    if errors:
        raise errors[0]
    return got, seen[0], info, a


def shared_captures(shared_data):
    return [shared_data / "tcp-pcaps/zeek-head/ssh.pcap", shared_data / "tcp-pcaps/zeek-head/206_example_a.pcap"]


def test_fed_tables_equal_the_reading_pass(tmp_path, shared_data):
    files = [capture(tmp_path)]
    if (shared_data / "tcp-pcaps").is_dir():
        files += shared_captures(shared_data)
    for f in files:
        got, feed, info, a = fed_tables(f, max_packets=200)
        assert feed is not None, f                    # a TCP flow longer than 200 packets: streamed
        ref_info = {}
        ref = list(iter_packet_tables(f, flows=a.flows, max_lateness_ns=a.max_lateness_ns, info=ref_info))
        assert pa.concat_tables(got).equals(pa.concat_tables(ref), check_metadata=True), f
        assert info == ref_info == C.read_pcap(f).attrs, f


def test_no_feed_without_a_streamed_pass(tmp_path):
    f = capture(tmp_path)
    got, feed, info, a = fed_tables(f, max_packets=10**6)       # analysed in one piece
    assert feed is None and sum(t.num_rows for t in got) == info["ip_packets"] == 1503


def test_a_failed_pass_reaches_the_reader():
    feed = BatchFeed()
    cols = {"ts_ns": np.arange(3, dtype=np.int64)}
    errors = []

    def read():
        try:
            for _ in feed.batches():
                pass
        except InterruptedError as exc:
            errors.append(exc)
    t = threading.Thread(target=read)
    t.start()
    feed.put(cols, np.zeros(3, np.int32), np.zeros(3, bool))
    feed.close(error=ValueError("disk gone"))
    t.join()
    assert len(errors) == 1 and "disk gone" in str(errors[0])


def test_a_gone_reader_does_not_hold_the_pass():
    """More batches than the hand-over holds, after the reader stopped: none waits."""
    feed = BatchFeed()
    feed.abandon()
    for _ in range(3 * BatchFeed.DEPTH):
        feed.put({"ts_ns": np.zeros(1, np.int64)}, np.zeros(1, np.int32), np.zeros(1, bool))
    feed.close()


def test_a_stopped_reader_stops_waiting():
    stop = threading.Event()
    stop.set()
    with pytest.raises(InterruptedError):
        next(BatchFeed().batches(stop))


def test_collect_failure_in_the_fed_pass_leaves_nothing(tmp_path, run_airlink, monkeypatch):
    """The streamed flow's analysis fails midway while the packets pass takes its batches:
    one error line, no thread left, no file (nor a partial one)."""
    from airlink.collectors import _tcpstream
    from airlink.core.errors import AirlinkError
    f = capture(tmp_path)
    calls = []
    chunk = _tcpstream.FlowStream.chunk

    def failing(self, c, last=False):
        calls.append(1)
        if len(calls) == 3:
            raise AirlinkError("chunk failed on purpose")
        return chunk(self, c, last)
    monkeypatch.setattr(_tcpstream.FlowStream, "chunk", failing)
    out = tmp_path / "out"
    status, _, err = run_airlink("collect", f, "-o", out, "--max-packets", "100")
    assert status == 2 and "chunk failed on purpose" in err and len(err.strip().splitlines()) == 1
    assert len(calls) == 3
    assert not any(t.name == "airlink-collect-packets" for t in threading.enumerate())
    assert not out.exists()              # nothing in it, so the folder the command made is gone too


def test_fed_pass_of_a_gzipped_and_a_cut_capture(tmp_path, run_airlink):
    """The fed packets pass reads what the streamed pass read: a gzipped capture gives the
    tables of its plain copy; a cut one, with --salvage, the packets before the cut and the
    reader's problem in the summary; without --salvage, an error and no packets file."""
    import gzip
    import json

    import pandas as pd
    f = capture(tmp_path)
    g = tmp_path / "fed.pcap.gz"
    g.write_bytes(gzip.compress(f.read_bytes()))
    plain, _, _, _ = fed_tables(f, max_packets=200)
    zipped, feed, info, _ = fed_tables(g, max_packets=200)
    assert feed is not None and info["format"] == "pcap.gz"
    assert pa.concat_tables(zipped).equals(pa.concat_tables(plain))
    cut = tmp_path / "cut.pcap"
    raw = f.read_bytes()
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    out = tmp_path / "o"
    status, stdout, err = run_airlink("collect", cut, "-o", out, "--salvage", "--json", "--max-packets", "200")
    assert status == 0, err
    ref = C.read_pcap(cut, salvage=True)
    got = pd.read_parquet(out / "cut.packets.parquet")
    assert len(got) == len(ref) and (got["seq"].to_numpy() == ref["seq"].to_numpy()).all()
    assert (got["time"].to_numpy() == ref["time"].to_numpy()).all()
    assert json.loads(stdout)["files"][0]["problem"] == ref.attrs["problem"]
    status, _, err = run_airlink("collect", cut, "-o", tmp_path / "o2", "--max-packets", "200")
    assert status == 2 and "truncated record" in err
    assert not (tmp_path / "o2").exists() or list((tmp_path / "o2").iterdir()) == []


def test_flow_labels_of_another_capture_are_refused(tmp_path):
    """The labels flows_ready hands over name connections by number: a packets pass over a
    capture whose connections are not those (a file rewritten since) stops with a user's
    error instead of labelling packets with another capture's flows."""
    from airlink.core.errors import AirlinkError
    f = capture(tmp_path)
    seen = []
    C.analyze_tcp(f, max_packets=200, flows_ready=lambda labels, late: seen.append((labels, late)))
    labels, late = seen[0]
    assert len(list(iter_packet_tables(f, flows=labels, max_lateness_ns=late))) >= 1
    g = tmp_path / "other.pcap"
    g.write_bytes(pcap_bytes([(T0, link_wrap(tcp_packet("10.0.0.1", "10.0.0.2", 40001, 81, flags="S"), 1))]))
    with pytest.raises(AirlinkError, match="not those of the flows given"):
        list(iter_packet_tables(g, flows=labels, max_lateness_ns=late))
