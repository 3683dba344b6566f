"""Bytes the capture point never saw although their receiver acknowledged them (a
capturing host that dropped packets): real captures with data packets taken out, against
the bytes taken out counted by hand from the packets (dpkt, interval arithmetic), and the
real captures as they are (nothing missed; tshark finds no segment lost before them)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dpkt
import numpy as np
import pytest

from airlink import collectors as C

FILES = ["zeek-head/206_example_a.pcap", "zeek-head/206_example_b.pcap", "zeek-head/206_example_c.pcap",
         "tcprs/fastretransmit/fast001.trace", "tcprs/rto/rto001.trace"]


def packets(path):
    """(ts, raw frame, (src, sport, dst, dport), seq, payload length, flags, ack) per TCP/IPv4 frame."""
    out = []
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                out.append((ts, buf, None, 0, 0, 0, 0))
                continue
            t = ip.data
            plen = ip.len - ip.hl * 4 - t.off * 4
            out.append((ts, buf, (ip.src, t.sport, ip.dst, t.dport), t.seq, plen, t.flags, t.ack))
    return out


def union(ranges):
    """Sorted disjoint union of half-open ranges."""
    out = []
    for lo, hi in sorted(r for r in ranges if r[1] > r[0]):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def length(ranges):
    return sum(hi - lo for lo, hi in ranges)


def minus(a, b):
    """Union ``a`` minus union ``b`` (both sorted, disjoint)."""
    out = []
    for lo, hi in a:
        for blo, bhi in b:
            if bhi <= lo or blo >= hi:
                continue
            if blo > lo:
                out.append([lo, blo])
            lo = max(lo, bhi)
        if lo < hi:
            out.append([lo, hi])
    return out


def missed_by_hand(kept, dropped):
    """Bytes of the dropped data segments that no kept segment of their direction carries,
    from the direction's first kept segment up to the other direction's highest ACK (a
    receiver acknowledged them): sequence numbers relative to each direction's first kept
    segment, mod 2^32."""
    total = 0
    for key in {p[2] for p in kept + dropped if p[2] is not None and p[4] > 0}:
        mine = [p for p in kept if p[2] == key and (p[4] > 0 or p[5] & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN))]
        if not mine:
            continue
        base = mine[0][3]

        def rel(s):
            return (s - base) % 2**32
        k = union([(rel(p[3]), rel(p[3]) + max(p[4], 1)) for p in mine])
        d = union([(rel(p[3]), rel(p[3]) + p[4]) for p in dropped if p[2] == key and p[4] > 0])
        back = (key[2], key[3], key[0], key[1])
        acks = [rel(p[6]) for p in kept if p[2] == back and p[5] & dpkt.tcp.TH_ACK]
        top = max(acks, default=0)
        total += length([[lo, min(hi, top)] for lo, hi in minus(d, k) if lo < top])
    return total


def write(path, frames):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for ts, buf, *_ in frames:
            w.writepkt(buf, ts)


@pytest.mark.parametrize("name", FILES)
def test_acknowledged_bytes_the_capture_missed(shared_data, tmp_path, name):
    every = packets(shared_data / "tcp-pcaps" / name)
    a = C.analyze_tcp(shared_data / "tcp-pcaps" / name)
    assert a.flows["capture_missed_bytes"].sum() == 0 and a.capture_missed() == (0, 0)
    data = [i for i, p in enumerate(every) if p[2] is not None and p[4] > 0]
    for step in (7, 23):
        gone = set(data[3::step])
        kept = [p for i, p in enumerate(every) if i not in gone]
        dropped = [every[i] for i in sorted(gone)]
        f = tmp_path / f"dropped{step}.pcap"
        write(f, kept)
        want = missed_by_hand(kept, dropped)
        assert want > 0
        got = C.analyze_tcp(f)
        assert int(got.flows["capture_missed_bytes"].sum()) == want, (name, step)
        assert got.capture_missed() == (want, int((got.flows["capture_missed_bytes"] > 0).sum()))


def dropped_capture(shared_data, tmp_path, step: int = 7):
    """(the real capture, it with every ``step``-th data packet from the 4th on taken out
    as ``dropped.pcap``, the bytes missed by hand)."""
    src = shared_data / "tcp-pcaps" / FILES[0]
    every = packets(src)
    data = [i for i, p in enumerate(every) if p[2] is not None and p[4] > 0]
    gone = set(data[3::step])
    kept = [p for i, p in enumerate(every) if i not in gone]
    f = tmp_path / "dropped.pcap"
    write(f, kept)
    return src, f, missed_by_hand(kept, [every[i] for i in sorted(gone)])


def test_collect_warns_and_records_what_the_capture_missed(shared_data, tmp_path):
    """``airlink collect`` as users run it: a warning on stderr naming the bytes and flows,
    ``capture_missed`` in summary.json and per flow in --json; none for the whole capture."""
    script = Path(sys.executable).with_name("airlink")
    src, f, want = dropped_capture(shared_data, tmp_path)
    for cap, missed in ((src, 0), (f, want)):
        out = tmp_path / f"out-{cap.stem}"
        r = subprocess.run([str(script), "collect", str(cap), "-o", str(out), "--json"], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        rec = json.loads(r.stdout)["files"][0]                 # summary.json's text
        assert sum(fl["capture_missed_bytes"] for fl in rec["flows"]) == missed
        if missed:
            assert f"the capture missed {missed} bytes" in r.stderr and "2 flow(s)" in r.stderr
            assert rec["capture_missed"] == {"bytes": missed, "flows": 2}
        else:
            assert "missed" not in r.stderr and "capture_missed" not in rec


def test_a_run_notes_what_its_capture_missed(shared_data, tmp_path):
    """``airlink run`` collecting an offline capture with bytes missed: its collect stage's
    note in run.json says so, as the collect command warns."""
    _, f, want = dropped_capture(shared_data, tmp_path)
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"name: m\nradio: {{preset: quick, duration: 1s}}\nreport: false\ninfer: false\n"
                   f"offline: {{captures: [{f}]}}\n")
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-c", "import sys; from airlink.cli import main; sys.exit(main())",
                        "run", str(exp), "-o", str(out), "--offline", "--quiet"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    stage = [s for s in json.loads((out / "run.json").read_text())["stages"] if s["name"] == "collect"][0]
    assert f"dropped.pcap: the capture missed {want} bytes that their receiver acknowledged" in stage["note"]


@pytest.mark.parametrize("name", FILES)
def test_missed_bytes_of_random_drops_and_cuts(shared_data, tmp_path, name):
    """Random data segments taken out of a capture cut at a random packet: the bytes
    missed anywhere - skipped over by a later row, past the last byte seen (the cut keeps
    the ACK of a segment taken out), or into a range still open - against the hand count."""
    every = packets(shared_data / "tcp-pcaps" / name)
    rng = np.random.default_rng(7)
    for trial in range(6):
        cut = int(rng.integers(len(every) // 2, len(every) + 1))
        head = every[:cut]
        data = [i for i, p in enumerate(head) if p[2] is not None and p[4] > 0
                and not p[5] & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN | dpkt.tcp.TH_RST)]
        gone = set(rng.choice(data, size=max(1, len(data) // 10), replace=False).tolist()) if data else set()
        kept = [p for i, p in enumerate(head) if i not in gone]
        f = tmp_path / f"t{trial}.pcap"
        write(f, kept)
        want = missed_by_hand(kept, [head[i] for i in sorted(gone)])
        assert int(C.analyze_tcp(f).flows["capture_missed_bytes"].sum()) == want, (name, trial, cut)


@pytest.mark.parametrize("old_ack_first", [True, False])
@pytest.mark.parametrize("max_packets", [None, 7])
@pytest.mark.parametrize("loops", ["compiled", "numpy"])
def test_a_capture_begun_mid_stream(tmp_path, monkeypatch, old_ack_first, max_packets, loops):
    """A capture started during a download: no handshake, and an ACK of bytes sent before
    the capture began (3,000 below the first segment seen) comes first, or right after the
    first segment. That ACK is behind everything seen, not 4 GiB ahead of it: nothing is
    counted as missed (tshark flags no ACKed-unseen segment either) and the goodput is the
    40 segments' 40,000 bytes over the 8 ms they took, not terabits per second."""
    import shutil
    from airlink.collectors import _tcparrays, _tcpstream
    from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet
    if loops == "numpy":                     # the engine's readable reference, no C loops
        monkeypatch.setattr(_tcparrays, "_tcploops", None)
        monkeypatch.setattr(_tcpstream, "_stream_rows", None)
        monkeypatch.setattr(_tcpstream, "_stream_bins", None)
    c = dict(src="10.0.0.2", dst="10.0.0.1", sport=40000, dport=80)
    s = dict(src="10.0.0.1", dst="10.0.0.2", sport=80, dport=40000)
    isn, cseq = 3_000_000_000, 7000
    old = tcp_packet(**c, seq=cseq, ack=isn - 3000, flags="A")
    pk = [old] if old_ack_first else []
    for k in range(40):
        pk.append(tcp_packet(**s, seq=isn + 1000 * k, ack=cseq, flags="PA", payload=bytes(1000)))
        if k == 0 and not old_ack_first:
            pk.append(old)
        pk.append(tcp_packet(**c, seq=cseq, ack=isn + 1000 * (k + 1), flags="A"))
    f = tmp_path / "mid.pcap"
    f.write_bytes(pcap_bytes([(1_700_000_000 * 10**9 + i * 100_000, link_wrap(p, 1)) for i, p in enumerate(pk)]))
    (flow,) = C.analyze_tcp(f, max_packets=max_packets).flows.to_dict("records")
    data = "rev" if old_ack_first else "fwd"          # fwd: the side of the first packet seen
    assert flow["data_direction"] == data and flow[f"bytes_{data}"] == 40 * 1040
    assert flow["capture_missed_bytes"] == 0
    assert 20e6 < flow["goodput_bps"] < 80e6, flow["goodput_bps"]     # 40,000 B in ~8 ms: ~40 Mbit/s
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-r", str(f), "-Y", "tcp.analysis.ack_lost_segment"],
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == ""
