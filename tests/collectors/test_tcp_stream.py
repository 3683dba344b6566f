"""One long TCP flow analysed in time chunks (collectors/_tcpstream.py): a flow bigger than
``max_packets`` no longer has to fit in memory. Every frame must equal the in-memory
analysis value for value, with chunks small enough that many boundaries fall inside the
flow (mid-handshake, mid-recovery, between a retransmission and the ACK that settles it),
on the real captures and on one-flow copies of one (the bulk connection continued, its
sequence, ACK, SACK and timestamp values moved on per copy, as the benchmark makes them)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import _tcpstream, tcp

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pcap.py"


def _same(a, b):
    for k in ("flows", "series", "events"):
        pd.testing.assert_frame_equal(getattr(a, k), getattr(b, k), check_exact=True)
    assert a.attrs == b.attrs and a.summary() == b.summary()


@pytest.fixture
def chunks_seen(monkeypatch):
    """Sizes of the chunks the streamed analysis received."""
    seen = []
    chunk = _tcpstream.FlowStream.chunk

    def counting(self, c):
        seen.append(len(c["t"]))
        return chunk(self, c)
    monkeypatch.setattr(_tcpstream.FlowStream, "chunk", counting)
    return seen


def _make_one_flow(src: Path, dst: Path, copies: int) -> None:
    spec = importlib.util.spec_from_file_location("bench_pcap", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.make_concatenated(src, dst, copies, one_flow=True)


@pytest.mark.parametrize("limit", [1, 7, 50])
def test_real_captures_streamed_equal_in_memory(shared_data, limit, chunks_seen):
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))
    assert files
    kinds = set()
    for f in files:
        whole = C.analyze_tcp(f, resolution="100ms")
        kinds |= set(whole.events["spurious_reason"].astype(str)) | set(whole.events["kind"].astype(str))
        n = len(chunks_seen)
        _same(C.analyze_tcp(f, resolution="100ms", max_packets=limit), whole)
        big = (whole.flows["packets_fwd"] + whole.flows["packets_rev"] > limit) & (whole.flows["proto"] == 6)
        assert (len(chunks_seen) > n) == bool(big.any()), f       # the long flows went through chunks
    # the captures exercise every forward-looking verdict settled at the flow's end
    assert {"dsack", "eifel", "already_acked", "fast", "timeout", "seq_ack", "timestamp"} <= kinds


@pytest.mark.parametrize("limit", [64, 1000])
def test_one_flow_copies_streamed_equal_in_memory(shared_data, tmp_path, limit, chunks_seen):
    src = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    f = tmp_path / "oneflow.pcap"
    _make_one_flow(src, f, 4)
    whole = C.analyze_tcp(f, resolution="100ms")
    big = whole.flows.loc[whole.flows["packets_fwd"].idxmax()]
    assert big["packets_fwd"] + big["packets_rev"] > 4000 and big["retransmissions"] == 4 * 57
    _same(C.analyze_tcp(f, resolution="100ms", max_packets=limit), whole)
    assert max(chunks_seen) <= limit and len(chunks_seen) > 4000 // limit


def test_switch_off_analyses_the_long_flow_whole(shared_data, monkeypatch, chunks_seen):
    f = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    monkeypatch.setattr(tcp, "STREAM_LONG_FLOWS", False)
    _same(C.analyze_tcp(f, max_packets=40), C.analyze_tcp(f))
    assert not chunks_seen
