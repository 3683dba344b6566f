"""`airlink collect` on a capture writes the packets frame in row groups, batch by batch,
without holding it in memory: every output must equal the in-memory path
(`read_pcap` + `analyze_tcp(frame)`), with capture batches small enough that their
boundaries fall inside flows, on captures in time order and out of it."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from airlink import collectors as C
from airlink.collectors._capture import CaptureReader
from airlink.collectors.pcap import iter_packets

from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet, udp_packet

T0 = 1_700_000_000 * 10**9
US = 1_000


def _same_frame(got: pd.DataFrame, ref: pd.DataFrame):
    """Equal values and dtypes; categoricals compared by value (their category order is
    the file's own)."""
    assert list(got.columns) == list(ref.columns)
    assert len(got) == len(ref)
    if not len(ref):        # an empty categorical comes back from Parquet as float64 (no values)
        return
    for c in ref.columns:
        x, y = ref[c], got[c]
        if isinstance(x.dtype, pd.CategoricalDtype):
            assert isinstance(y.dtype, pd.CategoricalDtype), c
            x, y = x.astype(str), y.astype(str)
        else:
            assert x.dtype == y.dtype, c
        pd.testing.assert_series_equal(y.reset_index(drop=True), x.reset_index(drop=True), check_exact=True,
                                       check_dtype=False, obj=c)


def reordered_capture(n=3000, seed=7):
    """Three interleaved connections and UDP, with records out of time order the way
    multi-queue capture leaves them: every 50th record is written up to 40 records late,
    and several records share a timestamp (the stable order of equal times matters)."""
    rng = random.Random(seed)
    recs = []
    for i in range(n):
        t = T0 + (i // 3) * 10 * US                      # three records per timestamp
        k = i % 4
        if k == 3:
            frame = udp_packet(sport=5000 + i % 2)
        else:
            a, b = f"10.0.{k}.1", f"10.0.{k}.2"
            frame = tcp_packet(a, b, 40000 + k, 80, seq=1 + 100 * i, ack=1, flags="PA", payload=b"z" * 100) \
                if i % 2 else tcp_packet(b, a, 80, 40000 + k, seq=1, ack=1 + 100 * i, flags="A")
        recs.append((t, link_wrap(frame, 1)))
    for i in range(0, n - 50, 50):
        j = i + rng.randint(1, 40)
        recs.insert(j, recs.pop(i))
    return recs


@pytest.fixture
def small_runs(monkeypatch):
    """The flow groups' series and events merged from disk a few rows at a time, the runs
    merged on disk every three (collectors._sortedruns): the merge's windows end inside
    runs and chunks cut anywhere."""
    from airlink.collectors import _sortedruns
    monkeypatch.setattr(_sortedruns, "MAX_RUNS", 3)
    monkeypatch.setattr(_sortedruns, "MIN_WINDOW", 2)
    monkeypatch.setattr(_sortedruns, "CHUNK_ROWS", 5)


@pytest.fixture
def small_batches(monkeypatch):
    """Capture batches of 4 KiB: dozens of batches per file, boundaries inside flows (the
    packets pass of `airlink collect` too)."""
    from airlink.collectors import collect
    monkeypatch.setattr(collect, "PACKETS_BATCH_BYTES", 4096)
    kw = CaptureReader.__init__.__kwdefaults__
    old = kw["chunk"]
    kw["chunk"] = 4096
    yield
    kw["chunk"] = old


def mixed_families():
    """IPv6 and IPv4 TCP, UDP, ICMP and an ARP record (not IP: not in the packets frame),
    interleaved over many batches, two records late."""
    from scapy.layers.inet import ICMP, IP
    recs = []
    for i in range(600):
        t = T0 + i * 7 * US
        k = i % 5
        if k == 0:
            frame = tcp_packet("fd00::1", "fd00::2", 443, 5555, seq=1 + 10 * i, flags="PA", payload=b"v" * 10, v6=True)
        elif k == 1:
            frame = tcp_packet("fd00::2", "fd00::1", 5555, 443, seq=9, ack=1 + 10 * i, flags="A", v6=True)
        elif k == 2:
            frame = bytes(IP(src="10.1.0.1", dst="10.1.0.9") / ICMP(seq=i))
        elif k == 3:
            frame = udp_packet(src="10.1.0.2", dst="10.1.0.3", sport=53, dport=4000 + i % 3)
        else:
            recs.append((t, b"\x02" * 12 + b"\x08\x06" + b"\x00" * 28))     # ARP
            continue
        recs.append((t, link_wrap(frame, 1)))
    recs.insert(300, recs.pop(250))
    recs.insert(500, recs.pop(420))
    return recs


def displaced(raw: bytes) -> bytes:
    """A little-endian classic pcap with every 40th record written 5 records late (times
    unchanged; at most a second late): records out of time order, with all the real
    capture's TCP events."""
    import struct
    head, recs, off = raw[:24], [], 24
    while off + 16 <= len(raw):
        cap = struct.unpack("<I", raw[off + 8:off + 12])[0]
        recs.append(raw[off:off + 16 + cap])
        off += 16 + cap
    def sec(r):
        return struct.unpack("<I", r[:4])[0]
    for i in range(0, len(recs) - 6, 40):
        if sec(recs[i + 5]) - sec(recs[i]) <= 1:          # within a session (ssh.pcap spans years)
            recs.insert(i + 5, recs.pop(i))
    return head + b"".join(recs)


def _captures(shared_data, tmp_path):
    f = tmp_path / "reordered.pcap"
    f.write_bytes(pcap_bytes(reordered_capture()))
    g = tmp_path / "families.pcap"
    g.write_bytes(pcap_bytes(mixed_families()))
    files = [f, g]
    if shared_data is not None:
        h = tmp_path / "ssh-displaced.pcap"
        h.write_bytes(displaced((shared_data / "tcp-pcaps/zeek-head/ssh.pcap").read_bytes()))
        files += [h]
        files += [shared_data / "tcp-pcaps/zeek-head/ssh.pcap",
                  shared_data / "tcp-pcaps/zeek-head/206_example_a.pcap",
                  shared_data / "tcp-pcaps/tcprs/rto/rto001.trace"]
    return files


@pytest.fixture
def maybe_shared():
    """../shared/data when present (the synthetic capture is tested either way)."""
    from pathlib import Path
    p = Path(__file__).resolve().parents[3] / "shared" / "data"
    return p if p.is_dir() else None


def test_reordered_capture_is_out_of_order():
    ts = np.array([t for t, _ in reordered_capture()])
    assert (np.diff(ts) < 0).sum() > 20


def test_iter_packets_equals_read_pcap(tmp_path, maybe_shared, small_batches):
    for f in _captures(maybe_shared, tmp_path):
        ref = C.read_pcap(f)
        a = C.analyze_tcp(f)
        assert (a.max_lateness_ns > 0) == (f.name in ("reordered.pcap", "families.pcap", "ssh-displaced.pcap"))
        for lateness in (a.max_lateness_ns, None):          # from the analysis, or found by a pass
            info = {}
            parts = list(iter_packets(f, flows=a.flows, max_lateness_ns=lateness, info=info))
            assert len(parts) > 5, f
            _same_frame(pd.concat(parts, ignore_index=True), ref)
            assert info == ref.attrs


def test_collect_outputs_equal_the_in_memory_path(tmp_path, maybe_shared, small_batches, run_airlink):
    for f in _captures(maybe_shared, tmp_path):
        out = tmp_path / f"out-{f.stem}"
        status, stdout, err = run_airlink("collect", f, "-o", out, "--resolution", "100ms", "--json")
        assert status == 0, err
        pk = C.read_pcap(f)
        a = C.analyze_tcp(pk, resolution="100ms")
        stem = f.name.rsplit(".", 1)[0]
        assert pq.read_metadata(out / f"{stem}.packets.parquet").num_row_groups > 5
        got = pd.read_parquet(out / f"{stem}.packets.parquet")
        _same_frame(got, pk)
        for name, frame in (("flows", a.flows), ("tcp", a.series), ("events", a.events)):
            _same_frame(pd.read_parquet(out / f"{stem}.{name}.parquet"), frame)
        meta = pq.read_schema(out / f"{stem}.packets.parquet").metadata
        assert meta[b"airlink.kind"] == b"packets"
        assert json.loads(meta[b"airlink.provenance"])["source"] == str(f)
        summary = json.loads(stdout)["files"][0]
        assert summary["packets"] == pk.attrs["records"] and summary["flows"] == a.summary()


def test_collect_salvage_streams_the_same_packets(tmp_path, small_batches, run_airlink):
    f = tmp_path / "cut.pcap"
    raw = pcap_bytes(reordered_capture())
    f.write_bytes(raw[: len(raw) * 2 // 3])
    out = tmp_path / "o"
    status, stdout, err = run_airlink("collect", f, "-o", out, "--salvage", "--json")
    assert status == 0, err
    pk = C.read_pcap(f, salvage=True)
    _same_frame(pd.read_parquet(out / "cut.packets.parquet"), pk)
    rec = json.loads(stdout)["files"][0]
    assert rec["problem"] == pk.attrs["problem"] and "warning" in err
    status, _, err = run_airlink("collect", f, "-o", tmp_path / "o2")
    assert status == 2 and "truncated record" in err
    assert not (tmp_path / "o2" / "cut.packets.parquet").exists()


def _same_analysis(a, b):
    for k in ("flows", "series", "events"):
        pd.testing.assert_frame_equal(getattr(a, k), getattr(b, k), check_exact=True)
    assert a.attrs == b.attrs and a.summary() == b.summary()
    assert a.max_lateness_ns == b.max_lateness_ns


@pytest.mark.parametrize("max_packets", [1, 40, 300])
def test_analysis_in_flow_groups_equals_one_piece(tmp_path, maybe_shared, small_batches, small_runs,
                                                   max_packets, monkeypatch):
    """max_packets below the capture's size: flows analysed in groups (one pass each, a
    flow bigger than the limit alone, its RTT samples on disk and its events made in
    time-range pieces), events' packet rows mapped back to the time-sorted frame, flows
    renumbered - the same frames as one piece, on captures in and out of time order, and
    on a cut one with salvage; the same again with the groups' series and events kept on
    disk and merged (``stream_frames``, what collect writes)."""
    import airlink.collectors._tcparrays as arrays_module
    import airlink.collectors._tcpframes as frames_module
    import airlink.collectors._tcpstream as stream_module
    import airlink.collectors.tcp as tcp_module
    monkeypatch.setattr(tcp_module, "_RANK_CHUNK", 97)     # packet times read back in many parts
    # a long flow's events in time-range pieces, its RTT samples in slices, medians in ranges
    monkeypatch.setattr(stream_module, "EVENT_PIECE_ROWS", 23)
    monkeypatch.setattr(frames_module, "_SAMPLE_SLICE", 17)
    monkeypatch.setattr(arrays_module, "_MEDIAN_PIECE", 29)
    cut = tmp_path / "cut.pcap"
    raw = pcap_bytes(reordered_capture())
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    for f in _captures(maybe_shared, tmp_path) + [cut]:
        salvage = f == cut
        whole = C.analyze_tcp(f, resolution="100ms", salvage=salvage)
        assert whole.attrs["packets"] > max_packets
        _same_analysis(C.analyze_tcp(f, resolution="100ms", salvage=salvage, max_packets=max_packets), whole)
        _same_analysis(C.analyze_tcp(f, resolution="100ms", salvage=salvage, max_packets=max_packets,
                                     stream_frames=True), whole)


def test_groups_capped_by_flows_equal_one_piece(tmp_path, monkeypatch):
    """Flow groups are also cut at ``GROUP_FLOWS`` flows (a capture of many short
    connections): 60 connections in groups of at most 7 flows give the one-piece frames,
    held in memory or streamed to disk."""
    import airlink.collectors.tcp as tcp_module
    from airlink.collectors import _sortedruns
    from tests.collectors.test_collect_cli import short_connections
    cap = tmp_path / "short.pcap"
    short_connections(cap, 60)
    whole = C.analyze_tcp(cap, resolution="100ms")
    groups = []
    real = tcp_module._flow_groups

    def counted(*a):
        out = real(*a)
        groups.append([len(g) for g in out[0]])
        return out
    monkeypatch.setattr(tcp_module, "GROUP_FLOWS", 7)
    monkeypatch.setattr(tcp_module, "_flow_groups", counted)
    for stream in (False, True):
        _same_analysis(C.analyze_tcp(cap, resolution="100ms", max_packets=100, stream_frames=stream), whole)
        # the summary's largest flows, picked from the flows on disk a chunk at a time
        monkeypatch.setattr(_sortedruns, "CHUNK_ROWS", 8)
        grouped = C.analyze_tcp(cap, resolution="100ms", max_packets=100, stream_frames=stream)
        assert grouped.summary(11) == whole.summary(11) and len(whole.summary(11)) == 11
    assert groups and all(max(g) <= 7 and sum(g) == 60 and len(g) >= 9 for g in groups)


def _with_short_flows(recs):
    """``recs`` with six short connections (20 packets each) merged in by time, the first
    before every other flow, the others later among the long ones."""
    import bisect
    times = [t for t, _ in recs]
    for j, start in enumerate([T0 - 500 * US] + [T0 + k * 1500 * US for k in range(1, 6)]):
        a, b = f"10.1.{j}.1", f"10.1.{j}.2"
        for i in range(20):
            frame = tcp_packet(a, b, 41000 + j, 443, seq=1 + 50 * i, ack=1, flags="PA", payload=b"s" * 50) \
                if i % 2 else tcp_packet(b, a, 443, 41000 + j, seq=1, ack=1 + 50 * i, flags="A")
            t = start + i * 7 * US
            at = bisect.bisect_right(times, t)
            times.insert(at, t)
            recs.insert(at, (t, link_wrap(frame, 1)))
    return recs


def test_long_flows_share_one_pass(tmp_path, small_batches, monkeypatch):
    """Flows longer than the limit are analysed in ONE pass over the capture, not one each,
    and the short flows fill groups around them (a short flow before the long ones does not
    make a group of its own): the reordered capture's three interleaved connections (750
    packets each) and six short ones at a limit of 400 - the census, the streamed pass
    (which gathers the short flows' group) and one pass for the long UDP flow (analysed
    whole): three reads of the file, and the one-piece frames."""
    f = tmp_path / "several.pcap"
    f.write_bytes(pcap_bytes(_with_short_flows(reordered_capture())))
    whole = C.analyze_tcp(f, resolution="100ms")
    fl = whole.flows
    assert sorted((fl["packets_fwd"] + fl["packets_rev"]).tolist()) == [20] * 6 + [750] * 4
    assert 41000 in (fl["sport"].iloc[0], fl["dport"].iloc[0]) and whole.max_lateness_ns > 0
    reads = []
    walk = CaptureReader.__iter__
    monkeypatch.setattr(CaptureReader, "__iter__", lambda self: reads.append(1) or walk(self))
    _same_analysis(C.analyze_tcp(f, resolution="100ms", max_packets=400), whole)
    assert len(reads) == 3


def _short_connections(n=30, each=20, interleaved=False):
    """``n`` connections of ``each`` packets: one after another, or all at once (round robin)."""
    recs = []
    for j in range(n):
        a, b = f"10.2.{j}.1", f"10.2.{j}.2"
        for i in range(each):
            frame = tcp_packet(a, b, 42000 + j, 443, seq=1 + 60 * i, ack=1, flags="PA", payload=b"q" * 60) \
                if i % 2 else tcp_packet(b, a, 443, 42000 + j, seq=1, ack=1 + 60 * i, flags="A")
            slot = i * n + j if interleaved else j * each + i
            recs.append((T0 + slot * 10 * US, link_wrap(frame, 1)))
    return sorted(recs, key=lambda r: r[0])


@pytest.mark.parametrize("interleaved", [False, True])
def test_groups_of_short_flows_in_one_pass(tmp_path, small_batches, monkeypatch, interleaved):
    """Groups of short flows are gathered in the one pass over the capture, each analysed
    once its flows are over: 30 connections of 20 packets one after another, at a limit of
    100 packets (six groups), are read twice in all (census, one pass). When they all run
    at once no group is over before the end, the groups beyond the limit are read again
    alone - more reads, the same frames."""
    f = tmp_path / "short.pcap"
    f.write_bytes(pcap_bytes(_short_connections(interleaved=interleaved)))
    whole = C.analyze_tcp(f, resolution="100ms")
    assert len(whole.flows) == 30
    reads = []
    walk = CaptureReader.__iter__
    monkeypatch.setattr(CaptureReader, "__iter__", lambda self: reads.append(1) or walk(self))
    _same_analysis(C.analyze_tcp(f, resolution="100ms", max_packets=100), whole)
    assert len(reads) == 2 if not interleaved else len(reads) > 2


def test_collect_max_packets(tmp_path, run_airlink, small_runs):
    """Flow groups (--max-packets 100: series and events merged from disk) write the tables
    of the capture in one piece, metadata included."""
    f = tmp_path / "r.pcap"
    f.write_bytes(pcap_bytes(reordered_capture()))
    outs = []
    for mp in ("100", "5000000"):
        out = tmp_path / f"o{mp}"
        status, _, err = run_airlink("collect", f, "-o", out, "--max-packets", mp)
        assert status == 0, err
        outs.append(out)
    for name in ("packets", "flows", "tcp", "events"):
        pd.testing.assert_frame_equal(pd.read_parquet(outs[0] / f"r.{name}.parquet"),
                                      pd.read_parquet(outs[1] / f"r.{name}.parquet"))
        if name != "packets":
            assert pq.read_table(outs[0] / f"r.{name}.parquet").equals(
                pq.read_table(outs[1] / f"r.{name}.parquet"), check_metadata=True)
    assert pq.ParquetFile(outs[0] / "r.tcp.parquet").metadata.num_row_groups > 1     # merged chunks
    status, _, err = run_airlink("collect", f, "-o", tmp_path / "bad", "--max-packets", "0")
    assert status == 2 and "--max-packets" in err and len(err.strip().splitlines()) == 1


def test_collect_spills_into_its_output_folder(tmp_path, monkeypatch, small_runs):
    """The analysis' temporary files (the census' packet times, the flow groups' sorted
    runs) are made in the output folder, not the system's temporary folder (a tmpfs on many
    systems: memory); nothing of them is left there once collect is done."""
    import tempfile

    from airlink.collectors.collect import collect_capture
    f = tmp_path / "r.pcap"
    f.write_bytes(pcap_bytes(reordered_capture()))
    out = tmp_path / "out"
    out.mkdir()
    made = []
    real = tempfile.TemporaryFile

    def recorded(*args, **kw):
        made.append(kw.get("dir"))
        return real(*args, **kw)
    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    collect_capture(f, out, prefix="r.", max_packets=100)
    assert len(made) >= 3 and all(d is not None and Path(d) == out for d in made)   # times, 2 frames
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"r.{n}.parquet" for n in ("packets", "flows", "tcp", "events"))


def test_packet_tables_equal_the_frames(tmp_path, maybe_shared, small_batches):
    """iter_packet_tables builds Arrow tables from the decoded arrays (no pandas frame after
    the first batch): the same schema, pandas metadata included, and the same values as
    pyarrow's conversion of iter_packets' frames."""
    import pyarrow as pa

    from airlink.collectors.pcap import iter_packet_tables
    for f in _captures(maybe_shared, tmp_path):
        a = C.analyze_tcp(f)
        frames = list(iter_packets(f, flows=a.flows, max_lateness_ns=a.max_lateness_ns))
        info = {}
        tables = list(iter_packet_tables(f, flows=a.flows, max_lateness_ns=a.max_lateness_ns, info=info,
                                         batch_bytes=8192))
        assert len(tables) > 5, f
        ref = pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)
        for t in tables:
            assert t.schema.equals(tables[0].schema, check_metadata=True)
        got = pa.concat_tables(tables)
        assert got.schema.remove_metadata().equals(ref.schema.remove_metadata()), f
        assert got.schema.metadata[b"pandas"] == pa.Table.from_pandas(frames[0], preserve_index=False) \
            .schema.metadata[b"pandas"]
        _same_frame(got.to_pandas(), pd.concat(frames, ignore_index=True))
        assert info == C.read_pcap(f).attrs


def test_collect_failure_during_the_analysis_stops_the_packets_pass(tmp_path, small_batches, run_airlink,
                                                                   monkeypatch):
    """The packets pass runs in a thread beside the analysis: when the analysis fails after
    it started, the command fails with one line, the thread is stopped and no packets file
    (nor a partial one) is left."""
    import threading

    import airlink.collectors.tcp as tcp_module
    from airlink.collectors import collect
    from airlink.core.errors import AirlinkError
    f = tmp_path / "r.pcap"
    f.write_bytes(pcap_bytes(reordered_capture()))
    started = []

    def failing(*args, **kw):
        started.append(True)
        raise AirlinkError("analysis failed on purpose")
    monkeypatch.setattr(tcp_module, "_analyze", failing)
    def start_and_finish(self, flows, late, feed=None):
        """The pass started and already complete (its file written) when the analysis fails."""
        self._run(flows, late)
        assert self.dest.exists()
        self.thread = threading.Thread(target=lambda: None)
        self.thread.start()
    for done in (False, True):            # the pass still running, or done, when the analysis fails
        if done:
            monkeypatch.setattr(collect.PacketsPass, "start", start_and_finish)
        out = tmp_path / f"o{done}"
        status, _, err = run_airlink("collect", f, "-o", out)
        assert status == 2 and "analysis failed on purpose" in err and len(err.strip().splitlines()) == 1
        assert started.pop() is True
        assert not any(t.name == "airlink-collect-packets" for t in threading.enumerate())
        assert not out.exists()          # nothing in it, so the folder the command made is gone too


def test_flows_ready_is_for_capture_paths(tmp_path):
    f = tmp_path / "r.pcap"
    f.write_bytes(pcap_bytes(reordered_capture(300)))
    seen = []
    a = C.analyze_tcp(f, flows_ready=lambda flows, late: seen.append((flows, late)))
    assert len(seen) == 1 and seen[0][1] == a.max_lateness_ns
    pd.testing.assert_frame_equal(seen[0][0].keys().to_pandas(), a.flows[["flow", "src", "dst", "sport", "dport", "proto"]])
    from airlink.core.errors import AirlinkError
    with pytest.raises(AirlinkError, match="capture path"):
        C.analyze_tcp(C.read_pcap(f), flows_ready=lambda *a: None)


def late_syns(n=120):
    """Connections whose direction is not their first packet's: in each, the side that
    speaks second (in time order; the file holds a later record first) sends the first
    pure SYN, after a SYN-ACK of the other side (not a pure SYN); plus UDP and IPv6."""
    recs = []
    for i in range(n):
        t = T0 + i * 10 * US
        k = i % 5
        a, b = f"10.9.{k}.1", f"10.9.{k}.2"
        if k == 4:
            frame = udp_packet(a, b, sport=6000, dport=53)
        elif i < 15:
            frame = tcp_packet(b, a, 80, 41000 + k, seq=7, ack=1, flags="SA" if k == 0 else "A",
                               v6=k == 3) if k != 3 else \
                tcp_packet("fd00::2", "fd00::1", 80, 41003, seq=7, ack=1, flags="A", v6=True)
        elif k == 3:
            frame = tcp_packet("fd00::1", "fd00::2", 41003, 80, seq=1, flags="S" if i < 40 else "A", v6=True)
        else:
            frame = tcp_packet(a, b, 41000 + k, 80, seq=1, flags="S" if i < 40 else "PA",
                               payload=b"" if i < 40 else b"q" * 20)
        recs.append((t, link_wrap(frame, 1)))
    recs[3], recs[8] = recs[8], recs[3]           # one record out of time order
    return recs


@pytest.mark.parametrize("max_packets", [1, 40])
def test_flows_ready_before_the_groups(tmp_path, maybe_shared, monkeypatch, max_packets):
    """A capture analysed in flow groups hands its flows to flows_ready after the census
    pass, before any group is analysed (so the packets pass of `airlink collect` runs beside
    the groups): the same identifying columns as the finished flows table - numbers, and
    src/dst from the first pure SYN or else the first packet."""
    import airlink.collectors._tcpstream as stream_module
    import airlink.collectors.tcp as tcp_module
    analysed = []
    for mod, name in ((tcp_module, "_analyze"), (stream_module, "analyze_streamed_flows")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _real=real, **k: analysed.append(1) or _real(*a, **k))
    g = tmp_path / "late-syns.pcap"
    g.write_bytes(pcap_bytes(late_syns()))
    for f in _captures(maybe_shared, tmp_path) + [g]:
        seen = []
        analysed.clear()
        a = C.analyze_tcp(f, max_packets=max_packets,
                          flows_ready=lambda flows, late: seen.append((flows, late, len(analysed))))
        assert len(seen) == 1 and seen[0][1] == a.max_lateness_ns and seen[0][2] == 0, f
        assert analysed, f
        pd.testing.assert_frame_equal(seen[0][0].keys().to_pandas(), a.flows[["flow", "src", "dst", "sport", "dport", "proto"]])
    whole = C.analyze_tcp(g).flows.set_index("flow")
    # hand-checked directions: the pure SYN's side is src even where the other side spoke first
    assert whole.loc[whole["sport"] == 41001, "src"].tolist() == ["10.9.1.1"]
    assert whole.loc[whole["sport"] == 41003, "src"].tolist() == ["fd00::1"]
    assert whole.loc[whole["dport"] == 53, "src"].tolist() == ["10.9.4.1"]


def test_group_gatherer_refuses_a_packet_after_its_group(tmp_path):
    """A group is analysed once the pass is past its flows (their last packet time + the
    capture's lateness); a packet of it after that - which the census's lateness rules out
    unless the file changed - stops the analysis with a user's error instead of analysing
    the group twice, as do flows the census never saw (a capture still being written)."""
    from airlink.collectors._connections import Connections, numbered_batches
    from airlink.collectors._tcpinput import GroupGatherer
    from airlink.core.errors import AirlinkError
    f = tmp_path / "short.pcap"
    f.write_bytes(pcap_bytes(_short_connections(n=2, each=40, interleaved=True)))
    done = []
    # ends as if both flows were over at the first packet: the first batch closes the group
    gatherer = GroupGatherer({0: [0, 1]}, {0: T0}, {0: 80}, 2, 0, 1000, lambda i, raw: done.append(i))
    conns = Connections()
    gatherer.start(conns)
    batches = numbered_batches(CaptureReader(f, chunk=2048), conns, set())
    first = next(batches)
    gatherer.add(first[0], first[1], first[2], 0)
    assert done == [0]
    second = next(batches)
    with pytest.raises(AirlinkError, match="already analysed"):
        gatherer.add(second[0], second[1], second[2], len(first[1]))
    small = GroupGatherer({0: [0]}, {0: T0 + 10**9}, {0: 40}, 1, 0, 1000, lambda i, raw: None)
    small.start(conns)
    with pytest.raises(AirlinkError, match="did not see"):       # the file grew since its census
        small.add(second[0], second[1], second[2], len(first[1]))


def test_overlapping_flow_groups_share_one_pass(tmp_path, small_batches, monkeypatch):
    """Short flows that overlap in time (each starts while the one before runs) and a
    two-packet flow that spans the capture (as in the benchmark's lossy shape): at a limit
    of half the packets, the groups gathered side by side fit the limit together, so the
    census and ONE more pass read the file (no group read again alone) - and the frames
    are the one-piece frames."""
    recs = []
    for j in range(10):                    # flow j: 60 packets from 30 ms * j, for 59 ms
        a, b = f"10.2.{j}.1", f"10.2.{j}.2"
        for i in range(60):
            frame = tcp_packet(a, b, 42000 + j, 443, seq=1 + 50 * i, ack=1, flags="PA", payload=b"s" * 50) \
                if i % 2 else tcp_packet(b, a, 443, 42000 + j, seq=1, ack=1 + 50 * i, flags="A")
            recs.append((T0 + j * 30_000 * US + i * 1_000 * US, link_wrap(frame, 1)))
    for t in (T0 - 1_000 * US, T0 + 400_000 * US):
        recs.append((t, link_wrap(udp_packet("10.9.0.1", "10.9.0.2", 5353, 5353, b"q" * 20), 1)))
    recs.sort(key=lambda r: r[0])
    f = tmp_path / "overlap.pcap"
    f.write_bytes(pcap_bytes(recs))
    whole = C.analyze_tcp(f, resolution="100ms")
    assert len(whole.flows) == 11 and whole.attrs["packets"] == 602
    reads = []
    walk = CaptureReader.__iter__
    monkeypatch.setattr(CaptureReader, "__iter__", lambda self: reads.append(1) or walk(self))
    _same_analysis(C.analyze_tcp(f, resolution="100ms", max_packets=301), whole)
    assert len(reads) == 2


def _repeated_segments(path, flows: int, each: int) -> None:
    """A capture of ``flows`` connections one after another, each sending one data segment
    ``each`` times 10 ms apart: every copy after the first is a retransmission, so the
    events frame has ``flows * (each - 1)`` rows (records made by patching the time and the
    source port of one record)."""
    one = pcap_bytes([(T0, link_wrap(tcp_packet(seq=1, ack=1, flags="PA", payload=b"z" * 10), 1))])
    head, rec = one[:24], np.frombuffer(one[24:], np.uint8)
    n = flows * each
    recs = np.tile(rec, (n, 1))
    t = T0 + np.arange(n) * 10_000 * US
    recs[:, 0:4] = (t // 10**9).astype("<u4").view(np.uint8).reshape(n, 4)
    recs[:, 4:8] = ((t % 10**9) // US).astype("<u4").view(np.uint8).reshape(n, 4)
    sport = 16 + 14 + 20                       # record header, Ethernet, IPv4: the TCP source port
    recs[:, sport:sport + 2] = (1024 + np.arange(n) // each).astype(">u2").view(np.uint8).reshape(n, 2)
    with open(path, "wb") as out:
        out.write(head)
        recs.tofile(out)


def _acked_flows(path, flows: int, each: int) -> None:
    """A capture of ``flows`` connections one after another, each ``each`` packets: data
    segments of 12 bytes and the peer's ACK of each (12 bytes of NOP options: the records
    are of one size), 1 ms apart - a sender-side capture's shape, an RTT sample of 1 ms per
    ACK, ``flows * each // 2`` in all. Records made by patching two: time, ports, sequence
    and ACK numbers."""
    data = tcp_packet(seq=1, ack=1, flags="PA", payload=b"z" * 12)
    ack = tcp_packet("10.0.0.2", "10.0.0.1", 80, 40000, seq=1, ack=13, flags="A", options=[("NOP", None)] * 12)
    both = [np.frombuffer(pcap_bytes([(T0, link_wrap(p, 1))]), np.uint8) for p in (data, ack)]
    assert len(both[0]) == len(both[1])
    head = both[0][:24].tobytes()
    n = flows * each
    i = np.arange(n)
    recs = np.where((i % 2 == 0)[:, None], both[0][24:], both[1][24:])
    t = T0 + i * 1000 * US
    recs[:, 0:4] = (t // 10**9).astype("<u4").view(np.uint8).reshape(n, 4)
    recs[:, 4:8] = ((t % 10**9) // US).astype("<u4").view(np.uint8).reshape(n, 4)
    tcp = 16 + 14 + 20                           # record header, Ethernet, IPv4
    port = (1024 + i // each).astype(">u2").view(np.uint8).reshape(n, 2)
    seg = (i % each) // 2
    sent = i % 2 == 0
    recs[sent, tcp:tcp + 2] = port[sent]         # the client's port: the data's source, the ACK's destination
    recs[~sent, tcp + 2:tcp + 4] = port[~sent]
    recs[sent, tcp + 4:tcp + 8] = (1 + 12 * seg[sent]).astype(">u4").view(np.uint8).reshape(-1, 4)
    recs[~sent, tcp + 8:tcp + 12] = (13 + 12 * seg[~sent]).astype(">u4").view(np.uint8).reshape(-1, 4)
    with open(path, "wb") as out:
        out.write(head)
        recs.tofile(out)


COLLECT_MEMORY_SCRIPT = """
import resource, sys
from airlink.collectors import _sortedruns
_sortedruns.MAX_RUNS, _sortedruns.CHUNK_ROWS, _sortedruns.MIN_WINDOW = 8, 1 << 15, 1024
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from airlink.collectors.collect import collect_capture
collect_capture(sys.argv[1], sys.argv[2], max_packets=20_000, packets=False)
print(open('/proc/self/status').read().split('VmPeak:')[1].split()[0])
"""


def test_collect_memory_does_not_grow_with_the_events(tmp_path):
    """The frames of flow groups go to the files as the groups are done, not held to the
    end: a capture of 1,000 connections with 999 retransmissions each (999,000 events, 53
    MB as columns; joined and sorted whole they took ~120 MiB more address space) is
    collected under an address-space limit 40 MiB above the peak of the same collect of a
    capture a fifth its size (a resource limit, not timing; the collect that held them
    whole fails under it). The events are checked
    against the capture's construction."""
    import os
    import subprocess
    import sys
    # address space reserved ahead and given up when a limit refuses it (a thread's malloc
    # arena, 64 MiB; Arrow's own allocator's regions) would blur what the limit measures:
    # one arena, and Arrow allocating through malloc
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"}
    for name, flows in (("small", 200), ("big", 1000)):
        _repeated_segments(tmp_path / f"{name}.pcap", flows, 1000)
        (tmp_path / name).mkdir()
    probe = subprocess.run([sys.executable, "-c", COLLECT_MEMORY_SCRIPT, str(tmp_path / "small.pcap"),
                            str(tmp_path / "small"), str(1 << 30)], capture_output=True, text=True, env=env)
    assert probe.returncode == 0, probe.stderr[-2000:]
    limit = int(probe.stdout) * 1024 + (40 << 20)
    res = subprocess.run([sys.executable, "-c", COLLECT_MEMORY_SCRIPT, str(tmp_path / "big.pcap"),
                          str(tmp_path / "big"), str(limit)], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    events = pq.read_table(tmp_path / "big" / "events.parquet").to_pandas()
    assert len(events) == 1000 * 999
    assert set(events["event"].astype(str)) == {"retransmission"}
    assert (events["flow"].value_counts() == 999).all() and events["flow"].nunique() == 1000
    t = events["time"].astype("int64").to_numpy()
    expect = T0 + np.arange(1000 * 1000).reshape(1000, 1000)[:, 1:].ravel() * 10_000 * US
    np.testing.assert_array_equal(t, expect)
    np.testing.assert_array_equal(events["packet"].to_numpy(), np.arange(1000 * 1000).reshape(1000, 1000)[:, 1:].ravel())


LONG_FLOWS_SCRIPT = """
import sys
from airlink.collectors import _sortedruns
_sortedruns.MAX_RUNS, _sortedruns.CHUNK_ROWS, _sortedruns.MIN_WINDOW = 8, 1 << 15, 1024
from airlink.collectors.collect import collect_capture
collect_capture(sys.argv[1], sys.argv[2], max_packets=30_000, packets=False)
print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])
"""


def test_collect_memory_does_not_grow_with_long_flows(tmp_path):
    """Long flows (each above --max-packets, analysed in time chunks) hold their RTT samples
    - one per ACK, most of a sender-side capture's events - on disk until each is finished,
    and are finished and written one at a time: the peak resident memory (the kernel's
    VmHWM) collecting twenty connections of 100,000 packets (50,000 RTT samples each) is
    within 12 MiB of that collecting ten (held in memory to the end, as they were, the ten
    more took ~30 MiB more). The RTT samples are checked against the capture's
    construction: 1 ms each, one per ACK."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"}
    peak = {}
    for name, flows in (("small", 10), ("big", 20)):
        _acked_flows(tmp_path / f"{name}.pcap", flows, 100_000)
        (tmp_path / name).mkdir()
        res = subprocess.run([sys.executable, "-c", LONG_FLOWS_SCRIPT, str(tmp_path / f"{name}.pcap"),
                              str(tmp_path / name)], capture_output=True, text=True, env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        peak[name] = int(res.stdout) * 1024
        (tmp_path / f"{name}.pcap").unlink()
    assert peak["big"] <= peak["small"] + (12 << 20), peak
    flows = pq.read_table(tmp_path / "big" / "flows.parquet").to_pandas()
    assert len(flows) == 20 and (flows["rtt_samples"] == 50_000).all()
    assert (flows["rtt_ms_median_fwd"] == 1.0).all() and (flows["retransmissions"] == 0).all()
    events = pq.read_table(tmp_path / "big" / "events.parquet", columns=["event", "rtt_ms", "flow"]).to_pandas()
    assert len(events) == 20 * 50_000 and set(events["event"].astype(str)) == {"rtt"}
    assert (events["rtt_ms"] == 1.0).all() and (events["flow"].value_counts() == 50_000).all()
