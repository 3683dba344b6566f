"""Link types the vectorised decoder does not know go through dpkt, up to the IP header.

The same TCP packets (a short IPv4 connection with SYN options, timestamps, SACK, a
retransmission and FIN, an IPv6 exchange and a UDP datagram) are written as raw IP, as
Ethernet and wrapped in each other link type with scapy; the packets frame and the TCP
analysis must come out the same (only ``captured_bytes`` differs: it is the record's).
"""
from __future__ import annotations

import shutil
import subprocess
import struct

import pandas as pd
import pytest
from scapy.contrib.chdlc import CHDLC
from scapy.layers.dot11 import Dot11, Dot11QoS, Dot11WEP, PrismHeader, RadioTap
from scapy.layers.l2 import LLC, SNAP
from scapy.layers.ppi import PPI
from scapy.layers.ppp import DIR_PPP, HDLC, PPP, PPPoE
from scapy.packet import Raw

from airlink import collectors as C
from airlink.collectors._capture import CaptureError

from tests.collectors.pcapcraft import link_wrap, pcap_bytes, pcapng_bytes, tcp_packet, udp_packet

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
A, B = "10.0.0.1", "10.0.0.2"


def ts(v, e):
    return [("NOP", None), ("NOP", None), ("Timestamp", (v, e))]


def connection():
    """(time_ns, IP bytes) of a short connection, an IPv6 exchange and a UDP datagram."""
    syn_opts = [("MSS", 1400), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]
    pk = [
        (0, tcp_packet(A, B, 40000, 80, seq=100, flags="S", options=syn_opts)),
        (20, tcp_packet(B, A, 80, 40000, seq=900, ack=101, flags="SA", options=syn_opts)),
        (21, tcp_packet(A, B, 40000, 80, seq=101, ack=901, flags="A", options=ts(2, 1))),
        (22, tcp_packet(A, B, 40000, 80, seq=101, ack=901, flags="PA", payload=b"a" * 500, options=ts(3, 1))),
        (23, tcp_packet(A, B, 40000, 80, seq=601, ack=901, flags="PA", payload=b"b" * 500, options=ts(4, 1))),
        (24, udp_packet(A, "10.0.0.53", 5000, 53)),
        (43, tcp_packet(B, A, 80, 40000, seq=901, ack=601, flags="A", options=ts(5, 3))),
        (44, tcp_packet(B, A, 80, 40000, seq=901, ack=601, flags="A",
                        options=ts(6, 3) + [("NOP", None), ("NOP", None), ("SAck", (1101, 1601))])),
        (45, tcp_packet(A, B, 40000, 80, seq=1101, ack=901, flags="PA", payload=b"c" * 500, options=ts(7, 5))),
        (46, tcp_packet("fd00::1", "fd00::2", 5555, 443, seq=7, ack=9, flags="PA", payload=b"x" * 300, v6=True)),
        (66, tcp_packet("fd00::2", "fd00::1", 443, 5555, seq=9, ack=307, flags="A", v6=True)),
        (70, tcp_packet(A, B, 40000, 80, seq=601, ack=901, flags="PA", payload=b"b" * 500, options=ts(8, 6))),
        (80, tcp_packet(B, A, 80, 40000, seq=901, ack=1601, flags="A", options=ts(9, 8))),
        (90, tcp_packet(A, B, 40000, 80, seq=1601, ack=901, flags="FA", options=ts(10, 9))),
        (110, tcp_packet(B, A, 80, 40000, seq=901, ack=1602, flags="FA", options=ts(11, 10))),
        (111, tcp_packet(A, B, 40000, 80, seq=1602, ack=902, flags="A", options=ts(12, 11))),
    ]
    return [(T0 + t * MS, p) for t, p in pk]


def _ppp_proto(ip):
    return 0x0057 if ip[0] >> 4 == 6 else 0x0021


def _ethertype(ip):
    return 0x86DD if ip[0] >> 4 == 6 else 0x0800


def _dot11_data(ip):
    """An unprotected 802.11 QoS data frame (to the AP) with LLC/SNAP."""
    return (Dot11(type=2, subtype=8, FCfield="to_DS", addr1="02:00:00:00:00:01",
                  addr2="02:00:00:00:00:02", addr3="02:00:00:00:00:03") / Dot11QoS()
            / LLC() / SNAP(code=_ethertype(ip)) / Raw(ip))


def _nflog(ip):
    """NFLOG header, a prefix TLV (type 10, 5 bytes + padding), the packet TLV (type 9)."""
    def tlv(kind, value):
        return struct.pack("<HH", 4 + len(value), kind) + value + b"\x00" * (-len(value) % 4)
    return bytes([10 if ip[0] >> 4 == 6 else 2, 0]) + struct.pack(">H", 5) + tlv(10, b"pre\x00\x00") + tlv(9, ip)


# name -> (link type, IP bytes -> frame, non-IP frames of that link type)
WRAPPERS = {
    "ppp": (9, lambda ip: bytes(PPP(proto=_ppp_proto(ip)) / Raw(ip)),
            [bytes(PPP(proto=0xC021) / Raw(b"\x01\x01\x00\x04"))]),                  # LCP
    "ppp-ff03": (9, lambda ip: bytes(HDLC() / PPP(proto=_ppp_proto(ip)) / Raw(ip)), []),
    "ppp-serial": (50, lambda ip: bytes(HDLC() / PPP(proto=_ppp_proto(ip)) / Raw(ip)),
                   [bytes(HDLC() / PPP(proto=0x8021) / Raw(b"\x01\x01\x00\x04"))]),  # IPCP
    "cisco-hdlc-in-50": (50, lambda ip: bytes(CHDLC(proto=_ethertype(ip)) / Raw(ip)), []),
    "cisco-hdlc": (104, lambda ip: bytes(CHDLC(proto=_ethertype(ip)) / Raw(ip)),
                   [bytes(CHDLC(control=0, proto=0x8035) / Raw(b"\x00" * 20))]),     # SLARP
    "cisco-hdlc-dir": (205, lambda ip: b"\x01" + bytes(CHDLC(proto=_ethertype(ip)) / Raw(ip)), []),
    "ppp-dir": (204, lambda ip: bytes(DIR_PPP(direction=1) / PPP(proto=_ppp_proto(ip)) / Raw(ip)), []),
    "ppp-pppd": (166, lambda ip: b"\x01\x03" + struct.pack(">H", _ppp_proto(ip)) + ip,
                 [b"\x00\x03\xc0\x21\x01\x01\x00\x04"]),
    "pppoe": (51, lambda ip: bytes(PPPoE(sessionid=7) / PPP(proto=_ppp_proto(ip)) / Raw(ip)), []),
    "802.11": (105, lambda ip: bytes(_dot11_data(ip)),
               [bytes(Dot11(type=0, subtype=8) / Raw(b"\x00" * 12)),                 # beacon
                bytes(Dot11(type=2, FCfield="protected") / Dot11WEP(b"\x00" * 60))]),  # encrypted
    "radiotap-fcs": (127, lambda ip: bytes(RadioTap(present="Flags+Rate", Flags="FCS", Rate=12)
                                           / _dot11_data(ip)) + b"\xde\xad\xbe\xef",
                     [bytes(RadioTap() / Dot11(type=1, subtype=13))]),               # ACK frame
    "ppi": (192, lambda ip: bytes(PPI() / _dot11_data(ip)), []),
    "nflog": (239, _nflog, [bytes([2, 0, 0, 5]) + struct.pack("<HH", 8, 10) + b"pre\x00"]),
    "prism": (119, lambda ip: bytes(PrismHeader() / _dot11_data(ip)), []),
    "avs": (163, lambda ip: struct.pack(">II", 0x80211001, 64) + b"\x00" * 56 + bytes(_dot11_data(ip)), []),
}


def _frame_columns(df):
    return df.drop(columns=["captured_bytes"])


def _capture(tmp_path, name, linktype, records, **kw):
    f = tmp_path / name
    f.write_bytes(pcap_bytes(records, linktype=linktype, **kw))
    return f


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Frames of the connection written as raw IP and as Ethernet."""
    d = tmp_path_factory.mktemp("ref")
    recs = connection()
    raw = C.read_pcap(_capture(d, "raw.pcap", 101, recs))
    eth = C.read_pcap(_capture(d, "eth.pcap", 1, [(t, link_wrap(p, 1)) for t, p in recs]))
    pd.testing.assert_frame_equal(_frame_columns(raw), _frame_columns(eth), check_exact=True)
    return raw, C.analyze_tcp(d / "raw.pcap", resolution="10ms")


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_frame_equals_raw_ip_and_ethernet(tmp_path, reference, name):
    linktype, wrap, non_ip = WRAPPERS[name]
    recs = [(t, wrap(p)) for t, p in connection()]
    # non-IP records of the same link type in between: skipped, counted
    mixed = recs[:2] + [(recs[1][0] + k + 1, x) for k, x in enumerate(non_ip)] + recs[2:]
    f = _capture(tmp_path, f"{name}.pcap", linktype, mixed)
    pk = C.read_pcap(f)
    raw, _ = reference
    pd.testing.assert_frame_equal(_frame_columns(pk), _frame_columns(raw), check_exact=True)
    assert list(pk["captured_bytes"]) == [len(x) for _, x in recs]          # the record's length
    assert pk.attrs["records"] == len(mixed) and pk.attrs["ip_packets"] == len(recs)
    assert pk.attrs["linktypes"] == [linktype] and pk.attrs["unknown_linktypes"] == []
    # spot checks against the connection as written
    syn = pk.iloc[0]
    assert (syn["src"], syn["dst"], syn["sport"], syn["dport"], syn["seq"]) == (A, B, 40000, 80, 100)
    assert (syn["mss_bytes"], syn["wscale"], syn["syn_options"]) == (1400, 7, 7)
    assert pk["time"].iloc[3] == pd.Timestamp(T0 + 22 * MS, unit="ns", tz="UTC")
    assert list(pk["payload_bytes"].iloc[3:6]) == [500, 500, 10]
    assert pk["sack_blocks"].iloc[7] == 1 and pk["src"].iloc[9] == "fd00::1"


@pytest.mark.parametrize("name", ["ppp", "radiotap-fcs", "cisco-hdlc"])
def test_analysis_path_and_frame_agree(tmp_path, reference, name):
    """analyze_tcp(path) (narrow columns, no frame) and analyze_tcp(read_pcap(path)) find
    the same flows and RTT samples as on the raw-IP capture."""
    linktype, wrap, non_ip = WRAPPERS[name]
    recs = [(t, wrap(p)) for t, p in connection()] + [(T0 + 200 * MS, x) for x in non_ip]
    f = _capture(tmp_path, f"{name}.pcap", linktype, recs)
    by_path = C.analyze_tcp(f, resolution="10ms")
    by_frame = C.analyze_tcp(C.read_pcap(f), resolution="10ms")
    _, ref = reference
    for k in ("flows", "series", "events"):
        pd.testing.assert_frame_equal(getattr(by_path, k), getattr(by_frame, k), check_exact=True)
        pd.testing.assert_frame_equal(getattr(by_path, k), getattr(ref, k), check_exact=True)
    assert by_path.summary() == by_frame.summary() == ref.summary()
    flows = by_path.flows
    assert len(flows) == 3 and sorted(flows["proto"]) == [6, 6, 17]
    ev = by_path.events
    rtt = ev[ev["event"] == "rtt"]
    assert len(rtt) >= 2
    assert (ev["event"] == "retransmission").sum() == 1


def test_pcapng_ethernet_and_ppp_interfaces(tmp_path, reference):
    """One capture, two interfaces: Ethernet (vector path) and PPP (dpkt path), records
    interleaved; the frame equals the raw-IP one, interface numbers kept."""
    recs = connection()
    ppp = WRAPPERS["ppp"][1]
    records = [(k % 2, t, link_wrap(p, 1) if k % 2 == 0 else ppp(p)) for k, (t, p) in enumerate(recs)]
    records.insert(3, (1, recs[2][0] + 1, WRAPPERS["ppp"][2][0]))            # LCP on the PPP side
    f = tmp_path / "two.pcapng"
    f.write_bytes(pcapng_bytes([(1, 9), (9, 6)], records))
    pk = C.read_pcap(f)
    raw, ref = reference
    pd.testing.assert_frame_equal(_frame_columns(pk).drop(columns="interface"),
                                  _frame_columns(raw).drop(columns="interface"), check_exact=True)
    assert list(pk["interface"]) == [k % 2 for k in range(len(recs))]
    assert pk.attrs["linktypes"] == [1, 9] and pk.attrs["unknown_linktypes"] == []
    assert pk.attrs["records"] == len(recs) + 1
    a = C.analyze_tcp(f, resolution="10ms")
    pd.testing.assert_frame_equal(a.events, ref.events, check_exact=True)
    pd.testing.assert_frame_equal(a.flows, C.analyze_tcp(pk, resolution="10ms").flows, check_exact=True)


def test_short_snaplen_keeps_true_sizes(tmp_path, reference):
    """Header-only radiotap capture: IP lengths and payloads from the IP header."""
    _, wrap, _ = WRAPPERS["radiotap-fcs"]
    recs = [(t, wrap(p)) for t, p in connection()]
    pk = C.read_pcap(_capture(tmp_path, "short.pcap", 127, recs, snaplen=110))
    raw, _ = reference
    assert (pk["captured_bytes"] <= 110).all()
    for c in ("ip_len_bytes", "payload_bytes", "seq", "ack", "flags", "sport", "dport"):
        assert list(pk[c]) == list(raw[c]), c


def test_damaged_link_headers_are_skipped(tmp_path):
    """Cut or garbled records of a dpkt link type are skipped, never an error."""
    ip = tcp_packet(A, B, 1, 2, flags="A")
    good = WRAPPERS["radiotap-fcs"][1](ip)
    recs = [(T0, good), (T0 + 1, good[:5]), (T0 + 2, b"\xff" * 40), (T0 + 3, good[:30]), (T0 + 4, good)]
    pk = C.read_pcap(_capture(tmp_path, "cut.pcap", 127, recs))
    assert len(pk) == 2 and pk.attrs["records"] == 5 and pk.attrs["unknown_linktypes"] == []
    only_lcp = _capture(tmp_path, "lcp.pcap", 9, [(T0, WRAPPERS["ppp"][2][0])] * 3)
    pk = C.read_pcap(only_lcp)                # a known link type without IP: empty, no error
    assert len(pk) == 0 and pk.attrs["records"] == 3
    assert len(C.analyze_tcp(only_lcp).flows) == 0


def test_unknown_link_type_still_a_clear_error(tmp_path):
    recs = [(t, p) for t, p in connection()]
    f = _capture(tmp_path, "user0.pcap", 147, recs)
    with pytest.raises(CaptureError) as e_frame:
        C.read_pcap(f)
    with pytest.raises(CaptureError) as e_path:
        C.analyze_tcp(f)
    msg = str(e_frame.value)
    assert msg == str(e_path.value)
    assert "unknown link type 147" in msg and "9 PPP" in msg and "1 Ethernet" in msg
    # beside a known interface: skipped and counted
    g = tmp_path / "mixed.pcapng"
    g.write_bytes(pcapng_bytes([(1, 9), (147, 9)], [(k % 2, t, link_wrap(p, 1) if k % 2 == 0 else p)
                                                     for k, (t, p) in enumerate(recs)]))
    pk = C.read_pcap(g)
    assert len(pk) == (len(recs) + 1) // 2 and pk.attrs["unknown_linktypes"] == [147]


def test_common_link_types_never_use_dpkt(tmp_path, monkeypatch):
    """Ethernet, SLL, raw IP, loopback stay on the vector path (no per-packet Python)."""
    from airlink.collectors import _dpktlink

    def boom(*a, **k):
        raise AssertionError("dpkt path used for a common link type")
    monkeypatch.setattr(_dpktlink, "network_offsets", boom)
    for lt in (1, 113, 276, 101, 0, 108):
        f = _capture(tmp_path, f"{lt}.pcap", lt, [(t, link_wrap(p, lt)) for t, p in connection()])
        assert len(C.read_pcap(f)) == len(connection())
        assert len(C.analyze_tcp(f).flows) == 3


@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark is not installed")
@pytest.mark.parametrize("name", ["radiotap-fcs", "ppp-serial", "cisco-hdlc", "ppi", "prism", "avs", "nflog"])
def test_fields_agree_with_tshark(tmp_path, name):
    """An independent decoder (Wireshark's) sees the same packets in the crafted files."""
    linktype, wrap, non_ip = WRAPPERS[name]
    recs = [(t, wrap(p)) for t, p in connection()] + [(T0 + 200 * MS, x) for x in non_ip]
    f = _capture(tmp_path, f"{name}.pcap", linktype, recs)
    out = subprocess.run(["tshark", "-r", str(f), "-Y", "tcp", "-T", "fields", "-e", "tcp.srcport",
                          "-e", "tcp.dstport", "-e", "tcp.seq_raw", "-e", "tcp.ack_raw", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout
    theirs = [tuple(int(x) for x in line.split("\t")) for line in out.splitlines()]
    pk = C.read_pcap(f)
    tcp = pk[pk["proto"] == 6]
    ours = list(zip(tcp["sport"], tcp["dport"], tcp["seq"], tcp["ack"], tcp["payload_bytes"]))
    assert [tuple(int(v) for v in r) for r in ours] == theirs and len(theirs) == 15


@pytest.mark.parametrize("name", ["radiotap-fcs", "ppp-serial", "ppi", "pppoe", "nflog"])
def test_fuzzed_link_headers_never_crash(tmp_path, name):
    """Seeded byte flips in the link-layer part of every record: reading never raises, and
    the path analysis still equals the frame analysis."""
    import random
    linktype, wrap, non_ip = WRAPPERS[name]
    rng = random.Random(linktype)
    recs = [(t, wrap(p)) for t, p in connection()] + [(T0 + 200 * MS, x) for x in non_ip]
    for trial in range(12):
        bad = []
        for t, x in recs:
            x = bytearray(x)
            for _ in range(rng.randint(0, 3)):
                x[rng.randrange(min(len(x), 48))] = rng.randrange(256)
            bad.append((t, bytes(x[:rng.choice([len(x), len(x), rng.randrange(1, len(x) + 1)])])))
        f = _capture(tmp_path, f"fuzz{trial}.pcap", linktype, bad)
        pk = C.read_pcap(f)
        assert pk.attrs["records"] == len(bad) and len(pk) <= len(bad)
        by_path, by_frame = C.analyze_tcp(f), C.analyze_tcp(pk)
        for k in ("flows", "series", "events"):
            pd.testing.assert_frame_equal(getattr(by_path, k), getattr(by_frame, k), check_exact=True)
