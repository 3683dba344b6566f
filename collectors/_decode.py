"""Vectorised packet decoding: link layer -> IPv4/IPv6 -> TCP/UDP header fields.

Works on a :class:`~airlink.collectors._capture.RecordBatch`: every field is one numpy
gather at per-record offsets. The link-layer table is declarative (:data:`LINK_TYPES`).
TCP options are decoded in vector form for the common layouts (timestamps first, with
or without NOPs, optionally followed by SACK); packets with any other option layout
(SYNs, unusual orders) are decoded one by one with a small parser, and IPv6 extension
headers are followed in a bounded vector loop. Fields a short snaplen cut off are marked
missing (timestamps 0 with ``has_ts`` false), never guessed.

Records of link types not in the table (PPP, Cisco HDLC, 802.11, ...) are handed to
:mod:`._dpktlink`, which finds their IP header with dpkt per packet; from there they are
read like raw IP by the same code. Only those records pay for per-packet Python.

When the optional C extension is built (``collectors/_records.c``, by ``pip install`` where
a compiler exists), batches of one link type of the table are decoded by its ``decode``
loop instead (~0.1 us per packet against ~0.2-0.3 us here): the same rules, the same dict,
the same values - ``tests/collectors/test_capture_native.py`` compares the two on real,
crafted and fuzzed captures. ``AIRLINK_PURE_PYTHON=1`` selects this numpy code.
"""
from __future__ import annotations

import numpy as np

from . import _capture             # _capture._records: the C loops (None: not built, or AIRLINK_PURE_PYTHON)

# link type -> (how to find the network layer)
#   ("ether",)               Ethernet II with up to two 802.1Q/802.1ad tags
#   ("fixed", offset, proto_at, proto_size) protocol field at proto_at, IP at offset
#   ("raw",)                 IP header at 0, version from the first nibble
#   ("null", byteorder)      BSD loopback: 4-byte address family
LINK_TYPES = {
    1: ("ether",),               # DLT_EN10MB
    113: ("fixed", 16, 14),      # Linux cooked SLL: protocol at 14
    276: ("fixed", 20, 0),       # Linux cooked SLL2: protocol at 0
    101: ("raw",), 12: ("raw",), 14: ("raw",), 228: ("raw",), 229: ("raw",),
    0: ("null", "host"),         # DLT_NULL (BSD loopback, host byte order)
    108: ("null", "net"),        # DLT_LOOP (OpenBSD loopback, network order)
}
LINK_NAMES = {1: "Ethernet", 113: "Linux cooked (SLL)", 276: "Linux cooked (SLL2)", 101: "raw IP",
              12: "raw IP", 14: "raw IP", 228: "raw IPv4", 229: "raw IPv6", 0: "BSD loopback",
              108: "OpenBSD loopback"}

ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
GTPU_PORT = 2152                                   # GTP-U (3GPP TS 29.281), both ends
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
OPT_SACK_OK, OPT_TS, OPT_WS = 1, 2, 4


def _u8(buf, idx):
    return buf[idx]


_AR2, _AR4 = np.arange(2), np.arange(4)


def _be16(buf, idx):
    """Big-endian 16-bit fields at arbitrary byte offsets (two byte gathers)."""
    return (buf[idx].astype(np.uint16) << 8) | buf[idx + 1]


def _be32(buf, idx):
    return ((buf[idx].astype(np.uint32) << 24) | (buf[idx + 1].astype(np.uint32) << 16)
            | (buf[idx + 2].astype(np.uint32) << 8) | buf[idx + 3])


def ip_family(link_fam, version):
    """The IP family of packets whose link layer says ``link_fam`` (4, 6; 0 = not IP) and
    whose first header nibble is ``version``, as Wireshark reads them: a packet the link
    calls IPv4 is taken by its version (an IPv6 packet behind an IPv4 ethertype is read as
    IPv6), one it calls IPv6 must say 6; any other is not IP (0). The compiled twin is in
    ``decode`` of ``_records.c``."""
    v = np.asarray(version)
    return np.where(link_fam == 4, np.where((v == 4) | (v == 6), v, 0),
                    np.where((link_fam == 6) & (v == 6), 6, 0)).astype(np.uint8)


def gtpu_inner(buf, l3, fam, end):
    """Step over GTP-U tunnels in place: where the IP packet at ``l3`` (family ``fam``, 4 or
    6; 0 = not IP) is a G-PDU of GTP-U (3GPP TS 29.281) - UDP port :data:`GTPU_PORT` on
    either side, GTPv1-U with PT 1 and message type 255 - ``l3``/``fam`` become those of the
    user's IP packet it carries (the S1-U / N3 interface of a cellular core: the user's
    flows, not the tunnel's). Stepped over: the optional fields (sequence number, N-PDU
    number, next extension type; present when E, S or PN is set) and the extension header
    chain (each ``4 * length`` bytes, its last byte naming the next; up to 8; 5G's PDU
    session container among them). The outer header: IPv4 (any IHL, not a later fragment)
    or IPv6 without extension headers. One level; a packet whose inner header is not wholly
    captured (``end``: the record's end) stays the UDP packet it is. The compiled twin is
    ``gtpu_inner`` in ``_records.c``.

    Returns ``(teid, qfi)`` per packet: the tunnel's TEID (int64; -1 where the packet is not
    a user's packet in a tunnel) and the QoS flow of 5G's PDU session container (TS 38.415:
    extension type 0x85, the low 6 bits of its second octet in either PDU type; int8, -1
    where there is none)."""
    n = len(l3)
    teid, qfi = np.full(n, -1, np.int64), np.full(n, -1, np.int8)
    i = np.flatnonzero(fam > 0)
    if not len(i):
        return teid, qfi
    a = l3[i]
    four = fam[i] == 4
    ihl = (buf[a] & 0x0F).astype(np.int64) * 4
    udp = np.where(four, (buf[a + 9] == 17) & ((_be16(buf, a + 6) & 0x1FFF) == 0) & (ihl >= 20), buf[a + 6] == 17)
    l4 = a + np.where(four, ihl, 40)
    e = end[i]
    ok = udp & (l4 + 16 <= e)
    i, l4, e = i[ok], l4[ok], e[ok]
    g = l4 + 8
    ok = (((_be16(buf, l4) == GTPU_PORT) | (_be16(buf, l4 + 2) == GTPU_PORT))
          & ((buf[g] & 0xF0) == 0x30) & (buf[g + 1] == 0xFF))
    i, g, e = i[ok], g[ok], e[ok]
    if not len(i):
        return teid, qfi
    opt = (buf[g] & 0x07) != 0
    p = g + 8
    ok = ~opt | (p + 4 <= e)
    nt = np.where(opt & ((buf[g] & 0x04) != 0), buf[p + 3], 0).astype(np.int64)
    p = np.where(opt, p + 4, p)
    q = np.full(len(i), -1, np.int8)
    for _ in range(8):
        x = ok & (nt != 0)
        if not x.any():
            break
        ln = buf[p].astype(np.int64) * 4
        bad = x & ((p + 1 > e) | (ln == 0) | (p + ln > e))
        ok &= ~bad
        xi = np.flatnonzero(x & ~bad)
        pdu = xi[nt[xi] == 0x85]                   # PDU session container: QFI in octet 2
        q[pdu] = buf[p[pdu] + 2] & 0x3F
        nt[xi] = buf[p[xi] + ln[xi] - 1]
        p[xi] += ln[xi]
    v = buf[p] >> 4
    ok &= (nt == 0) & (p + 1 <= e) & (((v == 4) & (e - p >= 20)) | ((v == 6) & (e - p >= 40)))
    l3[i[ok]] = p[ok]
    fam[i[ok]] = v[ok]
    teid[i[ok]] = _be32(buf, g[ok] + 4)
    qfi[i[ok]] = q[ok]
    return teid, qfi


def decode(batch, *, raw_addresses: bool = False, tunnel_ids: bool = True) -> dict:
    """Header fields of every IP packet in ``batch`` (non-IP records are dropped).

    Returns a dict of numpy arrays: ``keep`` (record indices kept), ``ts_ns``, ``version``,
    ``src``/``dst`` (int32 codes into ``addr_table``, see :func:`address_codes`),
    ``proto``, ``ip_len``, ``sport``, ``dport``, ``seq``, ``ack``, ``flags``, ``window``,
    ``payload``, ``tsval``, ``tsecr``, ``has_ts``, ``sack_blocks``, ``dsack``, ``dsack_left``,
    ``mss``, ``wscale``, ``synopt``, ``ecn`` (RFC 3168 IP ECN field, 0-3), ``captured``, ``iface``,
    ``teid``/``qfi`` (a GTP-U tunnel's, -1 outside one: :func:`gtpu_inner`; left out with
    ``tunnel_ids=False``, for a reader that does not keep them), ``unknown_linktypes`` (link
    types neither :data:`LINK_TYPES` nor :mod:`._dpktlink` knows; their records are dropped).
    ``raw_addresses=True`` returns ``src_hi``/``src_lo``/``dst_hi``/``dst_lo`` (uint64
    words; IPv4 in the low 32 bits of ``*_lo``) and ``v6`` instead of the address codes.
    """
    buf = batch.buf
    off = batch.data_off
    cap = batch.caplen
    lt = batch.linktype
    n = len(off)
    single = n > 0 and bool((lt == lt[0]).all())         # the usual case: one link type
    if single and _capture._records is not None and int(lt[0]) in LINK_TYPES:
        return _decode_c(batch, LINK_TYPES[int(lt[0])], raw_addresses, tunnel_ids)
    l3 = np.full(n, -1, np.int64)
    fam = np.zeros(n, np.uint8)                    # 4, 6 or 0 (not IP)
    unknown = set()
    for t in ([lt[0]] if single else np.unique(lt)):
        sel = slice(None) if single else lt == t
        spec = LINK_TYPES.get(int(t))
        o = off[sel]
        if spec is None:                           # other link types: dpkt, per packet
            from ._dpktlink import network_offsets
            found = network_offsets(buf, o, cap[sel], int(t))
            if found is None:
                unknown.add(int(t))
            else:
                l3[sel], fam[sel] = found
            continue
        kind = spec[0]
        if kind == "ether":
            et = _be16(buf, o + 12).astype(np.int64)
            base = o + 14
            for _ in range(2):                     # VLAN / QinQ tags
                tag = (et == 0x8100) | (et == 0x88A8) | (et == 0x9100)
                if not tag.any():
                    break
                et = np.where(tag, _be16(buf, base + 2), et)
                base = np.where(tag, base + 4, base)
            f = np.where(et == ETH_IPV4, 4, np.where(et == ETH_IPV6, 6, 0))
            l3[sel], fam[sel] = base, f
        elif kind == "fixed":
            et = _be16(buf, o + spec[2])
            l3[sel] = o + spec[1]
            fam[sel] = np.where(et == ETH_IPV4, 4, np.where(et == ETH_IPV6, 6, 0))
        elif kind == "raw":
            l3[sel] = o
            v = buf[o] >> 4
            fam[sel] = np.where(v == 4, 4, np.where(v == 6, 6, 0))
        else:                                      # null / loop
            le = (buf[o].astype(np.uint32) | (buf[o + 1].astype(np.uint32) << 8)
                  | (buf[o + 2].astype(np.uint32) << 16) | (buf[o + 3].astype(np.uint32) << 24))
            be = _be32(buf, o)
            af = be if spec[1] == "net" else np.where(be <= 0xFFFF, be, le)  # either host order
            l3[sel] = o + 4
            fam[sel] = np.where(af == 2, 4, np.where(np.isin(af, (10, 24, 28, 30)), 6, 0))
    fam = ip_family(fam, buf[np.maximum(l3, 0)] >> 4)
    avail = off + cap - l3                          # captured bytes from the IP header on
    fam[(fam == 4) & (avail < 20)] = 0
    fam[(fam == 6) & (avail < 40)] = 0
    teid, qfi = gtpu_inner(buf, l3, fam, off + cap)  # a tunnel's packets: the user's
    keep = np.flatnonzero(fam > 0)
    l3, fam, end = l3[keep], fam[keep], (off + cap)[keep]
    v4 = fam == 4
    out = {"keep": keep, "ts_ns": batch.ts_ns[keep], "version": fam,
           "captured": cap[keep].astype(np.uint32), "iface": batch.iface[keep],
           "unknown_linktypes": unknown}
    if tunnel_ids:
        out.update(teid=teid[keep], qfi=qfi[keep])
    m = len(keep)
    # ---- IP: the first 20 bytes of every IP header in one gather, read through views
    iph = block(buf, l3, 20)
    ihl = np.where(v4, (iph[:, 0] & 0x0F).astype(np.int64) * 4, 40)
    iph16 = iph.view(">u2")
    orig_ip = batch.origlen[keep] - (l3 - off[keep])
    ip_len = np.where(v4, iph16[:, 1], iph16[:, 2].astype(np.int64) + 40).astype(np.int64)
    ip_len = np.where(ip_len == 0, orig_ip, ip_len)            # TSO / jumbo: from the wire
    proto = np.where(v4, iph[:, 9], iph[:, 6]).astype(np.int64)
    # RFC 3168 ECN field: low 2 bits of the IPv4 TOS byte / of the IPv6 traffic class (whose
    # low nibble is the high nibble of byte 1); 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE
    ecn = np.where(v4, iph[:, 1] & 3, (iph[:, 1] >> 4) & 3).astype(np.uint8)
    later_frag = v4 & ((iph16[:, 3] & 0x1FFF) != 0)
    src_lo = np.zeros(m, np.uint64)
    dst_lo = np.zeros(m, np.uint64)
    src_hi = np.zeros(m, np.uint64)
    dst_hi = np.zeros(m, np.uint64)
    i4 = np.flatnonzero(v4)
    iph32 = iph.view(">u4")
    src_lo[i4] = iph32[i4, 3]
    dst_lo[i4] = iph32[i4, 4]
    del iph, iph16, iph32
    i6 = np.flatnonzero(~v4)
    if len(i6):
        def be64(idx):
            return (_be32(buf, idx).astype(np.uint64) << np.uint64(32)) | _be32(buf, idx + 4).astype(np.uint64)
        b6 = l3[i6]
        src_hi[i6], src_lo[i6] = be64(b6 + 8), be64(b6 + 16)
        dst_hi[i6], dst_lo[i6] = be64(b6 + 24), be64(b6 + 32)
        # IPv6 extension headers: hop-by-hop 0, routing 43, fragment 44, destination 60
        l4_6 = b6 + 40
        nh = proto[i6].copy()
        for _ in range(4):
            ext = np.isin(nh, (0, 43, 44, 60)) & (l4_6 + 8 <= end[i6])
            if not ext.any():
                break
            e = np.flatnonzero(ext)
            hl = np.where(nh[e] == 44, 8, (buf[l4_6[e] + 1].astype(np.int64) + 1) * 8)
            if (nh[e] == 44).any():
                fo = _be16(buf, l4_6[e] + 2) & 0xFFF8
                later = np.zeros(len(i6), bool)
                later[e] = (nh[e] == 44) & (fo != 0)
                later_frag[i6] |= later
            nh[e] = buf[l4_6[e]]
            l4_6[e] += hl
        proto[i6] = nh
        ihl[i6] = l4_6 - b6
    l4 = np.minimum(l3 + ihl, end)                 # clamped: gathers stay inside the padding
    l4_len = ip_len - ihl
    sane = ihl >= 20
    later_frag |= ~sane
    tcp = (proto == 6) & ~later_frag & (l4 + 20 <= end)
    udp = (proto == 17) & ~later_frag & (l4 + 8 <= end)
    ports = tcp | udp
    # TCP header (20 bytes) and the first 24 option bytes in one gather
    th = block(buf, l4, 44)
    th16, th32 = th.view(">u2"), th.view(">u4")
    sport = np.where(ports, th16[:, 0], 0).astype(np.uint16)
    dport = np.where(ports, th16[:, 1], 0).astype(np.uint16)
    seq = np.where(tcp, th32[:, 1], 0).astype(np.uint32)
    ackn = np.where(tcp, th32[:, 2], 0).astype(np.uint32)
    thl = np.where(tcp, (th[:, 12] >> 4).astype(np.int64) * 4, 0)
    flags = np.where(tcp, th[:, 13], 0).astype(np.uint8)
    window = np.where(tcp, th16[:, 7], 0).astype(np.uint16)
    payload = np.where(tcp, l4_len - thl, np.where(udp, th16[:, 2].astype(np.int64) - 8, 0))
    payload = np.clip(payload, 0, None)
    # ---- TCP options
    tsval = np.zeros(m, np.uint32)
    tsecr = np.zeros(m, np.uint32)
    has_ts = np.zeros(m, bool)
    sack_blocks = np.zeros(m, np.uint8)
    dsack = np.zeros(m, bool)
    dsack_left = np.zeros(m, np.uint32)
    mss = np.zeros(m, np.uint16)
    wscale = np.full(m, -1, np.int8)
    synopt = np.zeros(m, np.uint8)
    hasopt = tcp & (thl > 20)
    optcap = np.minimum(l4 + thl, end)              # options present in the capture up to here
    o = l4 + 20
    # layout A: NOP NOP TS(10) [NOP NOP SACK]
    a = hasopt & (th32[:, 5] == 0x0101080A) & (o + 12 <= optcap)
    # layout B: TS(10) first (no NOP padding), e.g. some stacks / SYN-ACKs
    cb = np.flatnonzero(hasopt & ~a)                # bytes gathered for candidates only
    ob = o[cb]
    ib = cb[(buf[ob] == 8) & (buf[ob + 1] == 10) & (ob + 10 <= optcap[cb])]
    del cb, ob
    ia = np.flatnonzero(a)
    np.copyto(tsval, th32[:, 6], where=a)
    np.copyto(tsecr, th32[:, 7], where=a)
    tsval[ib], tsecr[ib] = _be32(buf, o[ib] + 2), _be32(buf, o[ib] + 6)
    has_ts |= a
    has_ts[ib] = True
    done = np.zeros(m, bool)
    done[ia[(thl[ia] == 32) & ((flags[ia] & SYN) == 0)]] = True     # only TS: finished
    # layout A followed by NOP NOP SACK
    cs = np.flatnonzero(a & ~done & ((flags & SYN) == 0) & (thl > 32))
    os_ = o[cs]
    isa = cs[(buf[os_ + 12] == 1) & (buf[os_ + 13] == 1) & (buf[os_ + 14] == 5)]
    del cs, os_
    if len(isa):
        ln = buf[o[isa] + 15].astype(np.int64)
        nb = (ln - 2) // 8
        ok = (ln >= 10) & ((ln - 2) % 8 == 0) & (o[isa] + 14 + ln <= optcap[isa]) & (nb <= 4) \
            & (12 + 2 + ln <= thl[isa] - 20)
        isa = isa[ok]
        nb = nb[ok]
        sack_blocks[isa] = nb
        left1 = _be32(buf, o[isa] + 16)
        right1 = _be32(buf, o[isa] + 20)
        two = nb >= 2
        left2 = np.where(two, _be32(buf, o[isa] + 24), 0)
        right2 = np.where(two, _be32(buf, o[isa] + 28), 0)
        d = _is_dsack(left1, right1, ackn[isa], left2, right2, two)
        dsack[isa] = d
        dsack_left[isa] = left1
        done[isa] = True
    rest = np.flatnonzero(hasopt & ~done)
    if len(rest):
        tobytes = buf
        for i in rest:
            s, e = int(o[i]), int(optcap[i])
            r = _parse_options(tobytes[s:e].tobytes())
            if r["ts"] is not None:
                tsval[i], tsecr[i] = r["ts"]
                has_ts[i] = True
            if r["mss"] is not None:
                mss[i] = r["mss"]
            if r["ws"] is not None:
                wscale[i] = min(r["ws"], 14)
                synopt[i] |= OPT_WS
            if r["sackok"]:
                synopt[i] |= OPT_SACK_OK
            if r["ts"] is not None and flags[i] & SYN:
                synopt[i] |= OPT_TS
            if r["sack"]:
                blocks = r["sack"]
                sack_blocks[i] = len(blocks)
                l1, r1 = blocks[0]
                l2, r2 = blocks[1] if len(blocks) > 1 else (0, 0)
                dsack[i] = bool(_is_dsack(np.uint32(l1), np.uint32(r1), ackn[i], np.uint32(l2),
                                          np.uint32(r2), len(blocks) > 1))
                dsack_left[i] = l1
    if raw_addresses:
        out.update(src_hi=src_hi, src_lo=src_lo, dst_hi=dst_hi, dst_lo=dst_lo, v6=fam == 6)
    else:
        src_code, dst_code, table = address_codes(src_hi, src_lo, dst_hi, dst_lo, fam == 6)
        out.update(src=src_code, dst=dst_code, addr_table=table)
    del src_hi, src_lo, dst_hi, dst_lo
    out.update(proto=proto.astype(np.uint8),
               ip_len=np.clip(ip_len, 0, 0xFFFFFFFF).astype(np.uint32), sport=sport, dport=dport,
               seq=seq, ack=ackn, flags=flags, window=window,
               payload=payload.astype(np.uint32), tsval=tsval, tsecr=tsecr, has_ts=has_ts,
               sack_blocks=sack_blocks, dsack=dsack, dsack_left=dsack_left, mss=mss, wscale=wscale,
               synopt=synopt, ecn=ecn)
    return out


# what collectors/_records.c decode() writes, in its order (O_* there)
C_OUTPUTS = {"keep": np.int64, "version": np.uint8, "captured": np.uint32, "src_hi": np.uint64,
             "src_lo": np.uint64, "dst_hi": np.uint64, "dst_lo": np.uint64, "proto": np.uint8,
             "ip_len": np.uint32, "sport": np.uint16, "dport": np.uint16, "seq": np.uint32,
             "ack": np.uint32, "flags": np.uint8, "window": np.uint16, "payload": np.uint32,
             "tsval": np.uint32, "tsecr": np.uint32, "has_ts": bool, "sack_blocks": np.uint8,
             "dsack": bool, "dsack_left": np.uint32, "mss": np.uint16, "wscale": np.int8,
             "synopt": np.uint8, "ecn": np.uint8, "teid": np.int64, "qfi": np.int8}
C_LINK_KINDS = {"ether": 0, "fixed": 1, "raw": 2, ("null", "host"): 3, ("null", "net"): 4}


def _decode_c(batch, spec, raw_addresses: bool, tunnel_ids: bool) -> dict:
    """:func:`decode` for a batch of one link type of :data:`LINK_TYPES`, packet by packet
    in C (``collectors/_records.c``); the same dict, the same values."""
    n = len(batch.data_off)
    kind = C_LINK_KINDS[spec[0] if spec[0] != "null" else spec]
    l3_at, proto_at = (spec[1], spec[2]) if spec[0] == "fixed" else (0, 0)
    cols = {k: np.empty(n, dt) for k, dt in C_OUTPUTS.items() if tunnel_ids or k not in ("teid", "qfi")}
    m = _capture._records.decode(batch.buf, np.ascontiguousarray(batch.data_off, np.int64),
                        np.ascontiguousarray(batch.caplen, np.int64),
                        np.ascontiguousarray(batch.origlen, np.int64), kind, l3_at, proto_at,
                        tuple(cols.values()))
    out = {k: a[:m] for k, a in cols.items()}
    keep = out["keep"]
    out.update(ts_ns=batch.ts_ns[keep], iface=batch.iface[keep], unknown_linktypes=set())
    if not raw_addresses:
        hi_lo = [out.pop(k) for k in ("src_hi", "src_lo", "dst_hi", "dst_lo")]
        src_code, dst_code, table = address_codes(*hi_lo, out["version"] == 6)
        out.update(src=src_code, dst=dst_code, addr_table=table)
    else:
        out["v6"] = out["version"] == 6
    return out


def ecn_counts(flow, ecn, nflow: int) -> np.ndarray:
    """Packets of each flow per RFC 3168 ECN codepoint: int64 array (nflow, 4) whose column
    k counts codepoint k (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)."""
    cells = np.asarray(flow, np.int64) * 4 + np.asarray(ecn, np.int64)
    return np.bincount(cells, minlength=4 * nflow).reshape(nflow, 4)


def block(buf, starts, width):
    """``width`` bytes from each offset in ``starts`` as an (n, width) uint8 array: a row
    gather from a sliding-window view (one index per packet, rows copied whole); fields are
    then read through ``.view('>u2')`` / ``.view('>u4')`` columns."""
    return np.lib.stride_tricks.sliding_window_view(buf, width)[starts]


def mix64(x):
    """splitmix64 finaliser (uint64 wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def group_connections(lo, hi, proto):
    """(first index, inverse) of the distinct ``(lo, hi, proto)`` connection keys, with
    ``lo``/``hi`` the ordered endpoint words (int64). Grouped by a 64-bit hash of the key;
    the groups are checked against the keys and, on a hash collision (astronomically
    rare), grouped exactly instead."""
    h = mix64(lo.view(np.uint64) ^ np.uint64(0x9E3779B97F4A7C15))
    h ^= hi.view(np.uint64) ^ (proto.astype(np.uint64, copy=False) << np.uint64(56))
    h = mix64(h)
    _, first, inv = unique_runs(h)
    del h
    rep = first[inv]
    if not (np.array_equal(lo, lo[rep]) and np.array_equal(hi, hi[rep])
            and np.array_equal(proto, proto[rep])):
        key = np.rec.fromarrays([lo, hi, proto])
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv


def unique_runs(values):
    """``np.unique(values, return_index=True, return_inverse=True)``, computed on runs of
    equal consecutive values first (captures repeat the same flow and addresses packet
    after packet, so this sorts far fewer values)."""
    n = len(values)
    if n == 0:
        return np.unique(values, return_index=True, return_inverse=True)
    change = np.empty(n, bool)
    change[0] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    if len(starts) > n // 2:
        return np.unique(values, return_index=True, return_inverse=True)
    u, first_run, inv_run = np.unique(values[starts], return_index=True, return_inverse=True)
    lengths = np.diff(np.append(starts, n))
    return u, starts[first_run], np.repeat(inv_run, lengths)


def address_codes(src_hi, src_lo, dst_hi, dst_lo, v6):
    """Per-batch address dictionary: int32 codes for src and dst, and the table
    ``(hash, hi, lo, v6)`` of the distinct addresses (sorted by hash), so per-packet
    storage is 8 bytes instead of 32."""
    v = v6.astype(np.uint64)
    hs = mix64(src_hi ^ mix64(src_lo ^ (v << np.uint64(63))))
    hd = mix64(dst_hi ^ mix64(dst_lo ^ (v << np.uint64(63))))
    both = np.concatenate([hs, hd])
    uh, first, inv = unique_runs(both)
    n = len(hs)
    hi = np.concatenate([src_hi, dst_hi])[first]
    lo = np.concatenate([src_lo, dst_lo])[first]
    six = np.concatenate([v6, v6])[first]
    return inv[:n].astype(np.int32), inv[n:].astype(np.int32), (uh, hi, lo, six)


def _is_dsack(left1, right1, ack, left2, right2, two):
    """RFC 2883: the first SACK block reports a duplicate when it lies below the
    cumulative ACK, or inside the second block."""
    below = ((ack.astype(np.int64) - right1.astype(np.int64)) % (1 << 32)) < (1 << 31)
    inside = two & (((left1.astype(np.int64) - left2.astype(np.int64)) % (1 << 32)) < (1 << 31)) \
        & (((right2.astype(np.int64) - right1.astype(np.int64)) % (1 << 32)) < (1 << 31))
    return below | inside


def _parse_options(data: bytes) -> dict:
    """TCP options from raw bytes (stops quietly at truncation)."""
    r = {"ts": None, "mss": None, "ws": None, "sackok": False, "sack": None}
    i, n = 0, len(data)
    while i < n:
        kind = data[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= n:
            break
        ln = data[i + 1]
        if ln < 2 or i + ln > n:
            break
        body = data[i + 2:i + ln]
        if kind == 2 and ln == 4:
            r["mss"] = int.from_bytes(body, "big")
        elif kind == 3 and ln == 3:
            r["ws"] = body[0]
        elif kind == 4 and ln == 2:
            r["sackok"] = True
        elif kind == 5 and ln >= 10 and (ln - 2) % 8 == 0:
            r["sack"] = [(int.from_bytes(body[k:k + 4], "big"), int.from_bytes(body[k + 4:k + 8], "big"))
                         for k in range(0, ln - 2, 8)]
        elif kind == 8 and ln == 10:
            r["ts"] = (int.from_bytes(body[:4], "big"), int.from_bytes(body[4:], "big"))
        i += ln
    return r


def check_linktypes(path, reader, unknown: set, ip_packets: int, salvage: bool) -> None:
    """Raise when records were read but every one has a link type no decoder knows."""
    if ip_packets == 0 and reader.packets and reader.linktypes and \
            not (set(reader.linktypes) - unknown) and not salvage:
        from ._dpktlink import OTHER_LINK_NAMES
        supported = {**LINK_NAMES, **OTHER_LINK_NAMES}
        lt = ", ".join(str(t) for t in sorted(unknown))
        raise _capture.CaptureError(f"{path}: unknown link type {lt} at byte 20 (packet 1); 0 packets read "
                           f"(supported: {', '.join(f'{k} {v}' for k, v in sorted(supported.items()))})",
                           offset=20, packet=1)
