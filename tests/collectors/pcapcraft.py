"""Build small captures byte by byte for tests (every container, byte order and link type).

Packets are made with scapy (IP/TCP layers) and wrapped in link-layer headers and
pcap/pcapng records here, so each test knows exactly what is in the file.
"""
from __future__ import annotations

import gzip
import struct

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6


def tcp_packet(src="10.0.0.1", dst="10.0.0.2", sport=40000, dport=80, seq=1000, ack=0, flags="A",
               payload=b"", window=65535, options=(), v6=False) -> bytes:
    ip = IPv6(src=src, dst=dst) if v6 else IP(src=src, dst=dst)
    return bytes(ip / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window,
                          options=list(options)) / payload)


def udp_packet(src="10.0.0.1", dst="10.0.0.2", sport=5000, dport=53, payload=b"x" * 10) -> bytes:
    return bytes(IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / payload)


def gtpu_packet(inner: bytes, *, teid=1, seq=None, pdu_session=None, message=0xFF, outer_v6=False,
                sport=2152, dport=2152) -> bytes:
    """``inner`` (an IP packet) in a GTP-U tunnel, the header written byte by byte from 3GPP
    TS 29.281: flags (version 1, PT 1; S with ``seq``, E with ``pdu_session``), message type
    (255 G-PDU), length (the bytes after the first 8), TEID; the optional 4 bytes (sequence
    number, N-PDU number, next extension type) when S or E is set; with ``pdu_session`` (a
    QFI) 5G's PDU session container (type 0x85: length 1, PDU type 0 downlink, QFI, next type
    0). Carried in UDP over IPv4 or IPv6 between two tunnel endpoints."""
    flags = 0x30 | (0x02 if seq is not None else 0) | (0x04 if pdu_session is not None else 0)
    opt = b""
    if flags & 0x06:
        opt = struct.pack(">HBB", seq or 0, 0, 0x85 if pdu_session is not None else 0)
        if pdu_session is not None:
            opt += bytes([1, 0x00, pdu_session & 0x3F, 0])
    body = opt + inner
    gtp = struct.pack(">BBHI", flags, message, len(body), teid) + body
    ip = IPv6(src="2001:db8:ffff::1", dst="2001:db8:ffff::2") if outer_v6 else IP(src="192.0.2.1", dst="192.0.2.2")
    return bytes(ip / UDP(sport=sport, dport=dport) / gtp)


def link_wrap(ip: bytes, linktype: int, *, vlan=0) -> bytes:
    v6 = ip[0] >> 4 == 6
    et = 0x86DD if v6 else 0x0800
    if linktype == 1:
        head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
        for _ in range(vlan):
            head += struct.pack(">HH", 0x8100, 7)
        return head + struct.pack(">H", et) + ip
    if linktype == 113:
        return struct.pack(">HHH8sH", 0, 1, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00", et) + ip
    if linktype == 276:
        return struct.pack(">HHIHBB8s", et, 0, 2, 1, 0, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00") + ip
    if linktype in (101, 12, 228, 229):
        return ip
    if linktype == 0:
        return struct.pack("<I", 30 if v6 else 2) + ip
    if linktype == 108:
        return struct.pack(">I", 24 if v6 else 2) + ip
    return b"\x00" * 8 + ip


def pcap_bytes(records, *, linktype=1, endian="<", nanos=False, snaplen=65535) -> bytes:
    """records: list of (time_ns, frame_bytes[, orig_len])."""
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for rec in records:
        t, data = rec[0], rec[1]
        orig = rec[2] if len(rec) > 2 else len(data)
        data = data[:snaplen]
        frac = t % 10**9 if nanos else (t % 10**9) // 1000
        out.append(struct.pack(endian + "IIII", t // 10**9, frac, len(data), orig) + data)
    return b"".join(out)


def _block(btype, body, endian="<"):
    body += b"\x00" * ((-len(body)) % 4)
    n = len(body) + 12
    return struct.pack(endian + "II", btype, n) + body + struct.pack(endian + "I", n)


def pcapng_bytes(interfaces, records, *, endian="<", simple_first=False) -> bytes:
    """interfaces: list of (linktype, tsresol_exponent or None); records: (iface, time_ns, frame)."""
    out = [_block(0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1), endian)]
    for lt, res in interfaces:
        opts = b""
        if res is not None:
            opts = struct.pack(endian + "HH", 9, 1) + bytes([res]) + b"\x00" * 3
            opts += struct.pack(endian + "HH", 0, 0)
        out.append(_block(1, struct.pack(endian + "HHI", lt, 0, 65535) + opts, endian))
    for k, (iface, t, data) in enumerate(records):
        if simple_first and k == 0:
            out.append(_block(3, struct.pack(endian + "I", len(data)) + data, endian))
            continue
        res = interfaces[iface][1]
        ticks = t // 1000 if res is None else t // (10 ** (9 - res))
        out.append(_block(6, struct.pack(endian + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF,
                                         len(data), len(data)) + data, endian))
    return b"".join(out)


def gz(data: bytes) -> bytes:
    return gzip.compress(data)
