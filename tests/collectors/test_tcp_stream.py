"""The TCP engine (collectors/_tcpstream.py) fed in time chunks: a flow bigger than
``max_packets`` is analysed a chunk at a time. Every frame must equal the analysis of the
whole capture as one chunk value for value, with chunks small enough that many boundaries fall inside the
flow (mid-handshake, mid-recovery, between a retransmission and the ACK that settles it),
on the real captures and on one-flow copies of one (the bulk connection continued, its
sequence, ACK, SACK and timestamp values moved on per copy, as the benchmark makes them)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import _tcpstream, tcp
from tests.cext import c_tcploops

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pcap.py"


def _flow_chunks(path, pflow, lateness_ns, chunk_rows):
    """One flow's rows in stable time order, ``chunk_rows`` at a time (the streamed pass)."""
    for _, c in _tcpstream._flows_time_chunks(path, [pflow], salvage=False, lateness_ns=lateness_ns,
                                              chunk_rows=chunk_rows, infos=[{}]):
        yield c


def _same(a, b):
    for k in ("flows", "series", "events"):
        pd.testing.assert_frame_equal(getattr(a, k), getattr(b, k), check_exact=True)
    assert a.attrs == b.attrs and a.summary() == b.summary()


@pytest.fixture
def chunks_seen(monkeypatch):
    """Sizes of the chunks the engine received (a capture or group that fits: one chunk)."""
    seen = []
    chunk = _tcpstream.FlowStream.chunk

    def counting(self, c, last=False):
        seen.append(len(c["t"]))
        return chunk(self, c, last)
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
        # at most the limit at a time; each long flow in two chunks or more
        assert max(chunks_seen[n:], default=0) <= limit, f
        assert len([x for x in chunks_seen[n:] if x]) >= 2 * int(big.sum()), f
    # the captures exercise every forward-looking verdict settled at the flow's end
    assert {"dsack", "eifel", "already_acked", "fast", "timeout", "seq_ack", "timestamp"} <= kinds


def test_real_captures_in_time_slices_equal_one_chunk(shared_data, monkeypatch, chunks_seen):
    """A capture of more TCP rows than ``tcp.ENGINE_CHUNK_ROWS`` goes to the engine in time
    slices of all its flows at once: the frames equal those of the capture as one chunk."""
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))
    sliced = 0
    for f in files:
        whole = C.analyze_tcp(f, resolution="100ms")
        rows = whole.attrs["tcp_packets"]
        monkeypatch.setattr(tcp, "ENGINE_CHUNK_ROWS", 23)
        chunks_seen.clear()
        _same(C.analyze_tcp(f, resolution="100ms"), whole)
        monkeypatch.setattr(tcp, "ENGINE_CHUNK_ROWS", 1 << 18)
        assert sum(chunks_seen) == rows, f
        if rows > 4 * 23:
            # times of equal value stay in one slice, so a slice may pass the size a little
            assert len(chunks_seen) >= rows // (2 * 23), f
            sliced += 1
    assert sliced > 10


@pytest.mark.parametrize("limit", [64, 1000])
def test_one_flow_copies_streamed_equal_in_memory(shared_data, tmp_path, limit, chunks_seen):
    src = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    f = tmp_path / "oneflow.pcap"
    _make_one_flow(src, f, 4)
    whole = C.analyze_tcp(f, resolution="100ms")
    big = whole.flows.loc[whole.flows["packets_fwd"].idxmax()]
    assert big["packets_fwd"] + big["packets_rev"] > 4000 and big["retransmissions"] == 4 * 108
    chunks_seen.clear()
    _same(C.analyze_tcp(f, resolution="100ms", max_packets=limit), whole)
    assert max(chunks_seen) <= limit and len(chunks_seen) > 4000 // limit


def test_switch_off_analyses_the_long_flow_whole(shared_data, monkeypatch, chunks_seen):
    f = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    monkeypatch.setattr(tcp, "STREAM_LONG_FLOWS", False)
    whole = C.analyze_tcp(f)
    longest = int((whole.flows["packets_fwd"] + whole.flows["packets_rev"]).max())
    chunks_seen.clear()
    _same(C.analyze_tcp(f, max_packets=40), whole)
    assert longest > 40 and max(chunks_seen) == longest         # the long flow in one chunk


def _late_syn_capture():
    """One IPv6 connection whose capture starts mid-flow (the server's data first, sequence
    numbers about to wrap past 2^32), with duplicate ACKs, two retransmissions after them
    (of data already ACKed), a DSACK, and timestamps; then the client
    opens the same 4-tuple again with a SYN (window scale, MSS, timestamps, SACK) and the
    transfer goes on: the forward side, the ISNs, the window scales and the handshake RTT
    are fixed by packets far into the flow."""
    from tests.collectors.pcapcraft import link_wrap, tcp_packet
    c, s = "2001:db8::1", "2001:db8::2"
    recs, t = [], 1_700_000_000 * 10**9
    seq, ack = (1 << 32) - 30_000, 7

    def add(src, frame, dt=200_000):
        nonlocal t
        t += dt
        recs.append((t, link_wrap(frame, 1)))

    def data(n, ts, **kw):
        return tcp_packet(s, c, 80, 50000, seq=n % (1 << 32), ack=ack, flags="PA", payload=b"d" * 1000,
                          v6=True, options=[("Timestamp", (ts, 0))], **kw)

    def acknowledge(n, ts, echo, sack=None):
        opts = [("Timestamp", (ts, echo))] + ([("SAck", sack)] if sack else [])
        return tcp_packet(c, s, 50000, 80, seq=ack, ack=n % (1 << 32), flags="A", v6=True, options=opts)
    for i in range(60):
        add(s, data(seq + 1000 * i, 100 + i))
        if i % 2:
            add(c, acknowledge(seq + 1000 * (i + 1), 500 + i, 100 + i))
    top = seq + 60_000
    for k in range(3):                                   # duplicate ACKs: segment 50 was lost
        add(c, acknowledge(seq + 50_000, 600 + k, 159))
    add(s, data(seq + 50_000, 170))                     # after three duplicate ACKs
    add(c, acknowledge(top, 610, 170))
    add(s, data(seq + 40_000, 171))
    dl = (seq + 40_000) % (1 << 32)
    add(c, acknowledge(top, 611, 171, sack=(dl, (dl + 1000) % (1 << 32))))   # DSACK
    isn_c, isn_s = 5_000, 9_000_000
    add(c, tcp_packet(c, s, 50000, 80, seq=isn_c, flags="S", v6=True,
                      options=[("MSS", 1440), ("SAckOK", b""), ("Timestamp", (700, 0)), ("WScale", 7)]),
        dt=2_000_000)
    add(s, tcp_packet(s, c, 80, 50000, seq=isn_s, ack=isn_c + 1, flags="SA", v6=True,
                      options=[("MSS", 1400), ("SAckOK", b""), ("Timestamp", (200, 700)), ("WScale", 5)]))
    add(c, tcp_packet(c, s, 50000, 80, seq=isn_c + 1, ack=isn_s + 1, flags="A", v6=True,
                      options=[("Timestamp", (701, 200))]))
    ack = isn_c + 1
    for i in range(40):
        add(s, data(isn_s + 1 + 1000 * i, 201 + i))
        if i % 3 == 2:
            add(c, acknowledge(isn_s + 1 + 1000 * (i + 1), 702 + i, 201 + i))
    return recs


@pytest.mark.parametrize("limit", [1, 5, 33])
def test_flow_decided_late_streamed_equal_in_memory(tmp_path, limit, chunks_seen):
    from tests.collectors.pcapcraft import pcap_bytes
    f = tmp_path / "late-syn.pcap"
    f.write_bytes(pcap_bytes(_late_syn_capture()))
    whole = C.analyze_tcp(f, resolution="100ms")
    fl = whole.flows.iloc[0]
    assert len(whole.flows) == 1 and fl["src"] == "2001:db8::1" and fl["wscale_fwd"] == 7
    ev = whole.events
    assert set(ev.loc[ev["event"] == "retransmission", "spurious_reason"].astype(str)) >= {"already_acked"}
    assert (ev["event"] == "dupack").sum() >= 2 and (ev["kind"] == "timestamp").any()
    _same(C.analyze_tcp(f, resolution="100ms", max_packets=limit), whole)
    assert len(chunks_seen) >= (fl["packets_fwd"] + fl["packets_rev"]) // limit


@pytest.mark.parametrize("limit", [None, 1, 300])
def test_census_gives_what_the_first_pass_reads(shared_data, tmp_path, limit):
    """The census (one read of the capture, also the start of it read as columns before
    the limit was passed) keeps per flow and side what first_pass reads from the flow's
    own rows in time order - the streamed analysis takes it from there: the same dict,
    for every TCP flow of every shared capture, one out of time order included."""
    import numpy as np

    from airlink.collectors._tcpinput import read_columns
    from tests.collectors.test_collect_streaming import displaced
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))
    late = tmp_path / "displaced.pcap"
    late.write_bytes(displaced((shared_data / "tcp-pcaps/zeek-head/ssh.pcap").read_bytes()))
    flows_seen = 0
    for f in files + [late]:
        census = read_columns(f, census=True) if limit is None else read_columns(f, limit=limit)
        if not census.get("census"):
            continue                                    # fewer packets than the limit
        for pf in np.flatnonzero(census["flow_proto"] == 6).tolist():
            ref = _tcpstream.first_pass(_flow_chunks(f, pf, census["lateness_ns"], 97))
            got = _tcpstream.first_from_census(census, pf)
            assert got.keys() == ref.keys(), f
            for k in ref:
                assert np.array_equal(np.asarray(got[k]), np.asarray(ref[k])), (f, pf, k)
            flows_seen += 1
    assert flows_seen > 50


@pytest.fixture(params=["c", "numpy"])
def row_chain(request, monkeypatch):
    """The per-row chain of a chunk (unwrapped numbers, running maxima, masks) and its
    per-bin series sums in C (``_tcploops.stream_rows``, ``stream_bins``) or by their numpy
    twins."""
    if request.param == "c":
        c_tcploops("stream_rows", "stream_bins")
    else:
        monkeypatch.setattr(_tcpstream, "_stream_rows", None)
        monkeypatch.setattr(_tcpstream, "_stream_bins", None)
    return request.param


def test_recovery_episodes_in_c_equal_the_reference_loop(shared_data, monkeypatch):
    """The retransmissions' recovery episodes in C (``_tcploops.episodes``) give what the
    Python loop of ``_tcparrays.recovery_episodes`` gives: every shared capture whole and in
    chunks of 7 packets (episodes and pending Eifel undos carried across chunks)."""
    from airlink.collectors import _tcparrays
    c_tcploops("episodes")
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))
    kinds = set()
    for f in files:
        for limit in (None, 7):
            ref = C.analyze_tcp(f, resolution="100ms", max_packets=limit)
            with monkeypatch.context() as m:
                m.setattr(_tcparrays, "_episodes", None)
                _same(C.analyze_tcp(f, resolution="100ms", max_packets=limit), ref)
            kinds |= set(ref.events["kind"].astype(str))
    assert {"fast", "timeout"} <= kinds


def test_row_chain_both_ways_equal_in_memory(shared_data, tmp_path, row_chain):
    """Both ways of the per-row chain give the in-memory analysis: on the real captures in
    chunks of 7 packets, and on a flow whose sequence numbers wrap past 2^32 mid-chunk."""
    from tests.collectors.pcapcraft import pcap_bytes
    late = tmp_path / "late-syn.pcap"
    late.write_bytes(pcap_bytes(_late_syn_capture()))
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + [late]
    for f in files:
        _same(C.analyze_tcp(f, resolution="100ms", max_packets=7), C.analyze_tcp(f, resolution="100ms"))


def test_row_chain_c_equals_numpy_over_many_flows(shared_data, monkeypatch):
    """The C chain takes a chunk of many flows as runs of one flow each, every run with its
    flow's carried state: the analysis of each real capture in one piece (one chunk of all
    its flows) and in chunks of 5 packets (flow groups and time chunks) gives the frames
    its numpy twin gives."""
    c_tcploops("stream_rows")
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace"))[:6]
    runs = 0
    for f in files:
        for limit in (None, 5):
            with_c = C.analyze_tcp(f, resolution="100ms", max_packets=limit)
            with monkeypatch.context() as m:
                m.setattr(_tcpstream, "_stream_rows", None)
                with_numpy = C.analyze_tcp(f, resolution="100ms", max_packets=limit)
            _same(with_c, with_numpy)
            runs += len(with_c.flows) > 1
    assert runs >= 4                       # captures of several flows among them


def test_row_chain_c_equals_numpy_chunk_by_chunk(shared_data):
    """The C chain and its numpy twin, fed the same chunks of one long flow (13 rows each,
    so boundaries fall everywhere), return the same arrays (numbers, maxima, the rows
    below snd_max and the duplicate ACKs), carry the same state and add the same per-bin
    series sums (bins of 10 ms: chunks span several)."""
    import numpy as np
    c_tcploops("stream_rows", "stream_bins")
    from airlink.collectors._tcpinput import read_columns
    f = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    census = read_columns(f, census=True)
    pf = int(np.argmax(census["flow_packets"]))
    first = _tcpstream.first_from_census(census, pf)
    a, b = (_tcpstream.FlowStream(_tcpstream.first_arrays(first), 10**7) for _ in range(2))
    rows = below = dupacks = 0
    carried = ("last_seq", "last_rel", "last_ack", "last_rela", "has_prev", "prev_rela", "prev_win", "ka")
    for c in _flow_chunks(f, pf, census["lateness_ns"], 13):
        c = _tcpstream.stream_chunk(c, first["fwd_swap"])
        flags, pay, dr, fl = c["flags"], c["payload"].astype(np.int64), c["dr"], c["fl"]
        isd = (dr == 0, dr == 1)
        args = (fl, np.zeros(1, np.int64), dr, isd, (np.flatnonzero(isd[0]), np.flatnonzero(isd[1])), flags,
                pay, (flags & 0x10) != 0)
        got, ref = a._rows_c(dict(c), *args), b._rows_numpy(dict(c), *args)     # (each takes seq, ack out)
        for x, y in zip(got, ref):
            for k in ((0, 1) if isinstance(x, dict) else (None,)):
                xa, ya = (x, y) if k is None else (x[k], y[k])
                assert xa.dtype == ya.dtype and np.array_equal(xa, ya)
        for s in (a, b):
            for d in (0, 1):
                s.side[d].am[0], s.side[d].sm[0] = got[3][d][-1], got[4][d][-1]
        assert [[getattr(x, k).tolist() for k in carried] for x in a.side] == \
            [[getattr(x, k).tolist() for k in carried] for x in b.side]
        is_syn = (flags & 2) != 0
        a._bin_sums_c(c, fl, dr, is_syn, pay, got[1], got[3], got[4])
        b._bin_sums_numpy(c, fl, dr, is_syn, pay, ref[1], ref[3], ref[4])
        assert a.acc.keys() == b.acc.keys()
        for k in a.acc:
            assert np.array_equal(a.acc[k], b.acc[k]), k
        rows += len(dr)
        below += int(got[6].sum())
        dupacks += int(got[7].sum())
    assert a.acc["packets"].sum() == rows and (a.acc["infl_s"] > 0).any() and (a.acc["rw_sum"] > 0).any()
    if shutil.which("tshark"):
        # the flow's rows, its duplicate ACKs and (at least) its retransmitted plus
        # out-of-order segments, as tshark counts them on the busiest TCP stream
        out = subprocess.run(["tshark", "-r", str(f), "-Y", "tcp", "-T", "fields", "-e", "tcp.stream",
                              "-e", "tcp.analysis.duplicate_ack", "-e", "tcp.analysis.retransmission",
                              "-e", "tcp.analysis.fast_retransmission", "-e", "tcp.analysis.out_of_order"],
                             capture_output=True, text=True, check=True).stdout
        fields = [line.split("\t") for line in out.splitlines()]
        busiest = Counter(x[0] for x in fields).most_common(1)[0][0]
        mine = [x for x in fields if x[0] == busiest]
        assert rows == len(mine)
        assert dupacks == sum(bool(x[1]) for x in mine)
        assert below >= sum(any(x[2:]) for x in mine)


@pytest.mark.parametrize("chunk_rows", [5, 97])
def test_many_interleaved_flows_chunked_equal_one_chunk(shared_data, tmp_path, chunk_rows):
    """The engine over many flows at once, fed in time chunks (rows of every flow in each,
    flow-major inside a chunk), gives what it gives fed all rows as one chunk: the 30 real
    captures' TCP flows laid over one another in time (each capture starting within the
    same 0.1 s), so every chunk cuts through dozens of flows, each in its own state - the
    capture of thousands of concurrent short flows in small. Plus one hand-built flow
    seen at a receiver, with segments reordered and lost before the capture point (none
    of the real captures has a gap in what it saw: their resent segments had all passed)."""
    import numpy as np

    from airlink.collectors._tcpframes import _flows_frame
    from airlink.collectors._tcpinput import read_columns
    from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet
    t0, recs = 1_700_000_000 * 10**9, []
    for i, seq in enumerate([1, 2001, 1001, 4001, 3001, 6001, 7001, 5001, 5001, 8001, 9001, 1001]):
        recs.append((t0 + i * 10**6, link_wrap(tcp_packet(seq=seq, ack=1, flags="PA", payload=b"d" * 1000), 1)))
        if i % 3 == 2:
            ack = tcp_packet(src="10.0.0.2", dst="10.0.0.1", sport=80, dport=40000, seq=1, ack=seq)
            recs.append((t0 + i * 10**6 + 1000, link_wrap(ack, 1)))
    reordered = tmp_path / "reordered.pcap"
    reordered.write_bytes(pcap_bytes(recs))
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap")) + \
        sorted((shared_data / "tcp-pcaps").rglob("*.trace")) + [reordered]
    parts, nflow = [], 0
    for k, f in enumerate(files):
        c, flows, _ = tcp._from_columns(read_columns(f))
        first, rows = tcp._engine_rows(c, len(flows))
        rows["t"] = rows["t"] - rows["t"].min() + k * 3_000_000 if len(rows["t"]) else rows["t"]
        rows["fl"] = rows["fl"] + nflow
        nflow += len(flows)
        parts.append(rows)
    syn = [(p["flags"] & 2) != 0 for p in parts]
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != "synopt"}
    is_syn = np.concatenate(syn)
    syn_opt = np.zeros(len(is_syn), np.int64)
    syn_opt[is_syn] = np.concatenate([p["synopt"] for p in parts])
    rows["packet"] = np.arange(len(is_syn))
    assert nflow > 50 and len(is_syn) > 8000

    def engine():
        from airlink.collectors._tcpstream import FlowStream, first_of_rows
        o = np.argsort(rows["fl"], kind="stable")       # flow-major, time order inside
        fo = first_of_rows(rows["fl"][o], rows["dr"][o], rows["t"][o], rows["seq"][o], rows["flags"][o],
                           np.flatnonzero(is_syn[o]), np.full(int(is_syn.sum()), -1), np.zeros(int(is_syn.sum())),
                           nflow)
        return FlowStream(fo, 10**8)

    def chunk_of(idx):
        idx = idx[np.argsort(rows["fl"][idx], kind="stable")]
        out = {k: v[idx] for k, v in rows.items()}
        out["synopt"] = syn_opt[idx][is_syn[idx]]
        return out

    def result(stream):
        t0, t1 = stream.f["t_first"], stream.f["t_last"]
        flows = _flows_frame(nflow, src=np.full(nflow, "a"), dst=np.full(nflow, "b"), sport=np.zeros(nflow),
                             dport=np.zeros(nflow), proto=np.full(nflow, 6), start=t0, endt=t1,
                             pk=np.zeros((2, nflow)), by=np.zeros((2, nflow)))
        return stream.finish(flows, "merged", 0.1)
    whole = engine()
    whole.chunk(chunk_of(np.arange(len(is_syn))))
    chunked = engine()
    by_time = np.argsort(rows["t"], kind="stable")
    for a in range(0, len(by_time), chunk_rows):
        chunked.chunk(chunk_of(by_time[a:a + chunk_rows]))
    ref, got = result(whole), result(chunked)
    _same(got, ref)
    ev = ref.events
    assert ev["flow"].nunique() > 50 and {"retransmission", "rtt", "dupack", "out_of_order"} <= set(ev["event"])


@pytest.mark.parametrize("limit", [None, 1])
def test_damaged_timestamp_refused_before_the_series_is_allocated(tmp_path, limit):
    """A flow whose two packets lie 30 years apart would need 2 x 9.5e11 series rows at
    1 ms: refused with a message naming the capture (whole or streamed) instead of
    allocating them."""
    from airlink.core.errors import AirlinkError
    from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet
    t = 1_000_000_000 * 10**9
    recs = [(t, link_wrap(tcp_packet(flags="S", seq=1), 1)),
            (t + 30 * 365 * 86400 * 10**9, link_wrap(tcp_packet(flags="A", seq=2, ack=5), 1))]
    f = tmp_path / "far.pcap"
    f.write_bytes(pcap_bytes(recs))
    with pytest.raises(AirlinkError, match="far.pcap: flow 0 spans .* damaged timestamp"):
        C.analyze_tcp(f, resolution="1ms", max_packets=limit)


def test_bin_sums_c_equals_numpy_across_many_flows(shared_data, monkeypatch):
    """The per-bin series sums in C (``_tcploops.stream_bins``) and by their numpy twin on
    engines of many flows at once: every real capture in one piece, and in flow groups of
    at most 40 packets (the series of flows that share chunks, bins of 100 ms, and of
    10 ms that flows cross); the frames of both ways are equal and the packet counts of
    the series are the flows' own."""
    c_tcploops("stream_bins")
    files = sorted((shared_data / "tcp-pcaps").rglob("*.pcap"))
    many = 0
    for f in files:
        for res, limit in (("100ms", None), ("10ms", 40)):
            got = C.analyze_tcp(f, resolution=res, max_packets=limit)
            with monkeypatch.context() as m:
                m.setattr(_tcpstream, "_stream_bins", None)
                ref = C.analyze_tcp(f, resolution=res, max_packets=limit)
            _same(got, ref)
            fl = got.flows
            per_flow = got.series.groupby("flow")["packets"].sum()
            tcp_flows = fl[fl["proto"] == 6].set_index("flow")
            assert per_flow.reindex(tcp_flows.index).tolist() == \
                (tcp_flows["packets_fwd"] + tcp_flows["packets_rev"]).tolist(), f
        many += len(fl) > 1
    assert many >= 3
