"""Offload mode of the C fast path: GSO super-packets are served, queued and lost segment
by segment exactly as the same segments are in plain mode, and the pieces the shell cuts
are the segments the kernel would have made (checked with scapy, built independently).

No root: the stages are driven through their push/pull API with a fake clock (the same C
code the relay runs between the TUN devices)."""
from __future__ import annotations

import functools
import random
import struct
from fractions import Fraction

import pytest
from tests.cext import c_extension

from airlink.replay import LinkStage, LossStage, make_queue

fastpath = c_extension("airlink.replay._fastpath", module_level=True)
scapy_all = pytest.importorskip("scapy.all", reason="scapy not installed")
IP, IPv6, TCP, UDP, Raw = scapy_all.IP, scapy_all.IPv6, scapy_all.TCP, scapy_all.UDP, scapy_all.Raw

HDR = "<BBHHHH"           # struct virtio_net_hdr: flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
NEEDS_CSUM, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4 = 1, 0, 1, 4, 5
TTI_NS = 1_000_000


def ones_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def pseudo_partial(ip_pkt) -> int:
    """What the kernel leaves in the L4 checksum field of a CHECKSUM_PARTIAL packet: the
    folded one's-complement sum of the pseudo-header (RFC 793 / RFC 8200)."""
    raw = bytes(ip_pkt)
    if raw[0] >> 4 == 4:
        ihl = (raw[0] & 15) * 4
        l4len = len(raw) - ihl
        return ones_sum(raw[12:20] + struct.pack("!BBH", 0, raw[9], l4len))
    l4len = len(raw) - 40
    return ones_sum(raw[8:40] + struct.pack("!IxxxB", l4len, raw[6]))


def super_packet(payload_len, *, mss=1448, v6=False, udp=False, flags="PA", ip_id=777, seq=1000,
                 src="100.64.0.1", dst="100.64.0.2"):
    """A GSO super-packet as the kernel hands it to a TUN with offloads: vnet header,
    IP total length of the whole, L4 checksum field = partial pseudo-header sum."""
    payload = random.Random(payload_len).randbytes(payload_len)
    l3 = IPv6(src="fd00::1", dst="fd00::2") if v6 else IP(src=src, dst=dst, id=ip_id, flags="DF")
    l4 = UDP(sport=5000, dport=6000) if udp else TCP(sport=5201, dport=40000, seq=seq, ack=5, flags=flags,
                                                     options=[("NOP", None), ("NOP", None),
                                                              ("Timestamp", (1, 2))])
    pkt = l3 / l4 / Raw(payload)
    pkt = pkt.__class__(bytes(pkt))
    l4p = pkt[UDP] if udp else pkt[TCP]
    l4p.chksum = pseudo_partial(pkt)
    raw = bytes(pkt)
    ipl = 40 if v6 else 20
    hl = len(raw) - payload_len
    gso_type = GSO_UDP_L4 if udp else GSO_TCPV6 if v6 else GSO_TCPV4
    return struct.pack(HDR, NEEDS_CSUM, gso_type, hl, mss, ipl, 6 if udp else 16) + raw


def kernel_complete(piece: bytes) -> bytes:
    """Strip the vnet header and do what the kernel does for NEEDS_CSUM: store the
    complement of the one's-complement sum from csum_start into csum_start+csum_offset."""
    flags, _t, _hl, _g, start, off = struct.unpack(HDR, piece[:10])
    raw = bytearray(piece[10:])
    if flags & NEEDS_CSUM:
        c = (~ones_sum(bytes(raw[start:]))) & 0xFFFF
        udp = raw[9 if raw[0] >> 4 == 4 else 6] == 17
        struct.pack_into("!H", raw, start + off, c or 0xFFFF if udp else c)   # UDP sends 0 as 0xFFFF
    return bytes(raw)


@functools.lru_cache(maxsize=4096)
def reference_segments(vnet_packet: bytes) -> list:
    """The kernel's GSO, written from its definition with scapy: one IP packet per
    gso_size slice of payload, IPv4 ID + i, TCP seq + i*gso_size, FIN/PSH on the last
    segment only, CWR on the first only, every checksum computed by scapy."""
    _f, gso_type, _hl, gso, _s, _o = struct.unpack(HDR, vnet_packet[:10])
    raw = kernel_complete(vnet_packet)
    pkt = IPv6(raw) if raw[0] >> 4 == 6 else IP(raw)
    if gso_type == GSO_NONE:
        return [bytes(pkt)]
    udp = UDP in pkt
    l4 = pkt[UDP] if udp else pkt[TCP]
    payload = bytes(l4.payload)
    n = -(-len(payload) // gso)
    out = []
    for i in range(n):
        p = pkt.copy()
        q = p[UDP] if udp else p[TCP]
        q.remove_payload()
        q.add_payload(Raw(payload[i * gso:(i + 1) * gso]))
        q.chksum = None
        if udp:
            q.len = None
        else:
            q.seq = (l4.seq + i * gso) % 2**32
            fl = int(l4.flags)
            if i < n - 1:
                fl &= ~0x09
            if i > 0:
                fl &= ~0x80
            q.flags = fl
        if IP in p:
            p[IP].len = None
            p[IP].chksum = None
            p[IP].id = (pkt[IP].id + i) & 0xFFFF
        else:
            p[IPv6].plen = None
        out.append(bytes(p.__class__(bytes(p))))
    return out


def plain(vnet_packets) -> list:
    """The same traffic without offload: every super-packet as its segments."""
    return [s for p in vnet_packets for s in reference_segments(p)]


def run_stage(make, packets, arrivals_ns, until_ns, vnet):
    """Push packets at their times and pull at every TTI end; returns (per-TTI departures
    as lists of packets, final stats). ``vnet=None``: a Python stage (no header)."""
    st = make()
    if vnet is not None:
        st.vnet_hdr(10 if vnet else 0)
    deps = []
    events = sorted(zip(arrivals_ns, range(len(packets))))
    i = 0
    for t in range(TTI_NS, until_ns + 1, TTI_NS):
        while i < len(events) and events[i][0] < t:      # the relay pulls, then pushes what it read
            st.push(packets[events[i][1]], events[i][0])
            i += 1
        deps.append(st.pull(t))
    return deps, st.stats()


def link_maker(capacity, queue="infinite", args=None, python=False):
    def make():
        stage = LinkStage(capacity, Fraction(1, 1000), queue=make_queue(queue, args), start_ns=0)
        return stage if python else stage.fast()
    return make


def traffic(n=12, seed=1):
    rnd = random.Random(seed)
    pkts, times, seq = [], [], 1000
    for i in range(n):
        size = rnd.choice([1448, 2896, 20000, 63712, 64000, 500])
        pkts.append(super_packet(size, seq=seq, ip_id=100 + 50 * i, flags="PA" if i < n - 1 else "FPA"))
        seq += size
        times.append(rnd.randrange(0, 20) * 250_000)
    return pkts, times


def compare_modes(make, pkts, times, until_ns=80 * TTI_NS):
    """Offload and plain mode give the same departures per TTI (segment by segment,
    byte for byte once the kernel has segmented the pieces) and the same counters."""
    d_off, s_off = run_stage(make, pkts, times, until_ns, vnet=True)
    segs = [reference_segments(p) for p in pkts]
    plain_pkts = [s for ss in segs for s in ss]
    plain_times = [t for t, ss in zip(times, segs) for _ in ss]
    d_plain, s_plain = run_stage(make, plain_pkts, plain_times, until_ns, vnet=False)
    per_tti_off = [[s for p in tti for s in reference_segments(p)] for tti in d_off]
    assert per_tti_off == d_plain
    assert s_off["superpackets"] == sum(len(ss) > 1 for ss in segs)
    assert {k: v for k, v in s_off.items() if k not in ("superpackets", "pieces_cut")} == s_plain
    return d_off, s_off


@pytest.mark.parametrize("queue,args", [("infinite", None), ("droptail", "packets=30"),
                                        ("droptail", "bytes=40000"), ("drophead", "packets=25"),
                                        ("drophead", "bytes=30000")])
@pytest.mark.parametrize("capacity", [[4000.0], [1499.5, 0.0, 7000.0, 61000.0], [120000.0]])
def test_link_serves_super_packets_as_their_segments(queue, args, capacity):
    pkts, times = traffic()
    compare_modes(link_maker(capacity, queue, args), pkts, times, until_ns=30 * TTI_NS)  # mid-service
    deps, st = compare_modes(link_maker(capacity, queue, args), pkts, times, until_ns=120 * TTI_NS)
    # ... and both are the reference semantics: the Python stage on the plain segments
    segs = [reference_segments(p) for p in pkts]
    d_py, s_py = run_stage(link_maker(capacity, queue, args, python=True), [x for ss in segs for x in ss],
                           [t for t, ss in zip(times, segs) for _ in ss], 120 * TTI_NS, vnet=None)
    assert [[x for p in tti for x in reference_segments(p)] for tti in deps] == d_py
    assert all(s_py[k] == st[k] for k in ("arrivals_packets", "arrivals_bytes", "departures_packets",
                                          "departures_bytes", "drops_packets", "drops_bytes",
                                          "queued_packets", "queued_bytes", "capacity_bytes"))
    assert st["queued_packets"] == 0     # drained: every byte left or was dropped
    assert st["arrivals_packets"] == st["departures_packets"] + st["drops_packets"] + st["queued_packets"]
    assert st["arrivals_bytes"] == st["departures_bytes"] + st["drops_bytes"] + st["queued_bytes"]


def test_budget_cut_pieces_are_valid_segments_of_the_original():
    pkt = super_packet(10 * 1448 + 500, flags="FPA", ip_id=65530, seq=2**32 - 3000)
    # 4000 bytes per TTI: pieces of 2, 3, 3, 3 segments leave (1500-byte segments, last 552)
    deps, st = run_stage(link_maker([4000.0]), [pkt], [0], 6 * TTI_NS, vnet=True)
    pieces = [p for tti in deps for p in tti]
    assert [struct.unpack(HDR, p[:10])[1] for p in pieces] == [GSO_TCPV4] * len(pieces)
    got = [s for p in pieces for s in reference_segments(p)]
    want = reference_segments(pkt)
    assert got == want
    parsed = [IP(s) for s in got]
    assert [p.len for p in parsed] == [1500] * 10 + [552]
    assert [p.id for p in parsed] == [(65530 + i) & 0xFFFF for i in range(11)]   # wraps
    assert [p[TCP].seq for p in parsed] == [(2**32 - 3000 + 1448 * i) % 2**32 for i in range(11)]
    assert [str(p[TCP].flags) for p in parsed] == ["A"] * 10 + ["FPA"]
    # by hand: 1500-byte segments, 4000 bytes per TTI -> segments 0-1, 2-4, 5-7, 8-10 leave
    assert [sum(len(s) for p in tti for s in reference_segments(p)) for tti in deps] == \
        [3000, 4500, 4500, 3552, 0, 0]
    assert [len(tti) for tti in deps] == [1, 1, 1, 1, 0, 0]
    assert st["departures_packets"] == 11 and st["departures_bytes"] == 15552


@pytest.mark.parametrize("kind", ["v6", "udp"])
def test_pieces_of_ipv6_and_udp_super_packets(kind):
    pkt = super_packet(7 * 1200 + 17, mss=1200, v6=kind == "v6", udp=kind == "udp")
    deps, _ = run_stage(link_maker([2600.0]), [pkt], [0], 8 * TTI_NS, vnet=True)
    pieces = [p for tti in deps for p in tti]
    assert len(pieces) > 1
    got = [s for p in pieces for s in reference_segments(p)]
    assert got == reference_segments(pkt)
    for raw in got:               # every checksum scapy computes matches the one carried
        p = IPv6(raw) if kind == "v6" else IP(raw)
        l4 = p[UDP] if kind == "udp" else p[TCP]
        carried = l4.chksum
        l4.chksum = None
        assert (p.__class__(bytes(p))[UDP] if kind == "udp" else p.__class__(bytes(p))[TCP]).chksum == carried


def test_whole_super_packets_pass_untouched():
    pkt = super_packet(40000)
    deps, st = run_stage(link_maker([1e6]), [pkt], [0], 2 * TTI_NS, vnet=True)
    assert [p for tti in deps for p in tti] == [pkt]
    assert st["departures_packets"] == -(-40000 // 1448)


def test_backlog_while_a_short_last_segment_is_in_service():
    """Segments of 1500, 1500 and 552 bytes (2 x 1448 + 500 of payload and 52 of headers);
    a 3100-byte TTI sends the first two and 100 bytes of the last: 452 bytes in one
    segment are left, no segment after it (none counts, not a negative number of bytes)."""
    deps, st = run_stage(link_maker([3100.0, 0.0]), [super_packet(2 * 1448 + 500)], [0], 2 * TTI_NS, vnet=True)
    assert [[len(p) - 10 for p in tti] for tti in deps] == [[3000 - 52], []]     # one piece of two segments
    assert (st["queued_bytes"], st["queued_packets"]) == (452, 1)


@pytest.mark.parametrize("gilbert", [None, (0.05, 0.3)])
def test_loss_draws_once_per_segment(gilbert):
    pkts, times = traffic(20, seed=4)

    def make():
        return LossStage(0.2, gilbert=gilbert, seed=11).fast()
    deps, st = compare_modes(make, pkts, times, until_ns=10 * TTI_NS)
    assert st["drops_packets"] > 0


def test_packets_without_gso_are_one_segment():
    ack = bytes(IP(src="100.64.0.2", dst="100.64.0.1") / TCP(flags="A"))
    pkt = struct.pack(HDR, 0, GSO_NONE, 0, 0, 0, 0) + ack
    deps, st = run_stage(link_maker([30.0]), [pkt], [0], 3 * TTI_NS, vnet=True)
    assert [p for tti in deps for p in tti] == [pkt]
    assert st["departures_packets"] == 1 and st["departures_bytes"] == len(ack)


def test_gso_headers_the_shell_cannot_cut_leave_the_packet_whole():
    """A header claiming TCP GSO on a packet without room for the TCP header, or on a
    non-TCP packet, is one segment of its full length (no read past the packet)."""
    short = bytes(IP(src="100.64.0.1", dst="100.64.0.2", proto=6) / Raw(b"\0" * 8))
    icmp = bytes(IP(src="100.64.0.1", dst="100.64.0.2") / scapy_all.ICMP() / Raw(b"x" * 3000))
    pkts = [struct.pack(HDR, NEEDS_CSUM, GSO_TCPV4, 28, 1448, 20, 16) + p for p in (short, icmp)]
    deps, st = run_stage(link_maker([1e6]), pkts, [0, 0], 2 * TTI_NS, vnet=True)
    assert [p for tti in deps for p in tti] == pkts
    assert st["departures_packets"] == 2 and st["departures_bytes"] == len(short) + len(icmp)
    assert st["superpackets"] == 0


def _timed(stage, arrivals, next_event):
    """Push each arrival's packets ``(t, [packets])`` at its time and pull whenever the stage
    has something due or packets arrive; [(time, [packets])] of the pulls that gave any."""
    out, i = [], 0
    while True:
        due = [x for x in (next_event(), arrivals[i][0] if i < len(arrivals) else None) if x is not None]
        if not due:
            return out
        t = min(due)
        got = stage.pull(t)
        if got:
            out.append((t, got))
        while i < len(arrivals) and arrivals[i][0] == t:
            for p in arrivals[i][1]:
                stage.push(p, t)
            i += 1


def test_workload_rule_serves_super_packets_as_their_segments():
    """The workload mode's C stage fed super-packets releases every segment at the time the
    Python WorkloadStage fed the same segments (scapy's) releases it: segments released
    together leave as one piece (the super-packet itself when all are), and the rule's
    counters are the same."""
    import numpy as np

    from airlink.replay.workload import WorkloadStage
    from airlink.traces.cellreplay import Direction, LightTrace
    # trains at 0, 100, 200 ms (the middle one's 8 PDOs all in its first ms); three heavy
    # opportunities every ms, so several segments share an opportunity's time
    light = LightTrace(np.array([0, 100, 200]), np.array([10, 10, 20]),
                       (np.arange(5), np.zeros(8, np.int64), np.arange(5)))
    direction = Direction(np.repeat(np.arange(1, 301), 3), light)
    pkts, _ = traffic(n=16, seed=3)
    rnd = random.Random(3)
    times, t = [], 1
    for _ in pkts:                  # some back to back, some after idle periods
        t += rnd.choice([0, 200_000, 3_000_000, 120_000_000])
        times.append(t)
    c = WorkloadStage(direction).fast()
    c.vnet_hdr(10)
    ref = WorkloadStage(direction)
    got = _timed(c, [(t, [p]) for t, p in zip(times, pkts)], c.next_event)
    want = _timed(ref, [(t, reference_segments(p)) for t, p in zip(times, pkts)], ref.next_event_ns)
    # (the pieces segmented without the cache: hundreds of pieces of up to 64 KB)
    segments = reference_segments.__wrapped__
    assert [(t, [s for p in ps for s in segments(p)]) for t, ps in got] == want
    st, py = c.stats(), ref.stats()
    for key in ("arrivals_packets", "arrivals_bytes", "departures_packets", "departures_bytes",
                "light_packets", "heavy_packets", "bursts", "heavy_bytes", "heavy_opportunities"):
        assert st[key] == py[key], key
    # both kinds of departure: whole super-packets and pieces of them
    assert st["pieces_cut"] > 0 and any(p in pkts for _, ps in got for p in ps)
    assert py["light_packets"] > 0 and py["heavy_packets"] > 0 and py["bursts"] > 1
