"""Link layers the vectorised decoder does not know: dpkt finds the IP packet, per packet.

:func:`airlink.collectors._decode.decode` reads the common link types with numpy gathers
(its :data:`~airlink.collectors._decode.LINK_TYPES` table). Records of any other link
type come here: dpkt parses each record's link layer (per packet, in Python) only to find
where the IPv4/IPv6 header starts; the decoder then reads the record from that byte on
exactly as it reads raw IP, so every column is computed by one decoder. The record itself
is not touched: timestamp, captured and original length stay the record's.

Where the IP header starts: dpkt copies bytes as it descends and keeps no offsets, so
the first 20 (IPv4) or 40 (IPv6) header bytes dpkt decoded are looked up in the record
(``bytes.find``, the first match; a link header cannot hold a copy of the IP header that
follows it). Records where dpkt finds no IP (LCP, 802.11 management or protected frames,
damaged headers) are skipped like non-IP records of the common link types.

Link types (libpcap numbers, https://www.tcpdump.org/linktypes.html):

* 9 PPP (RFC 1661; with or without the RFC 1662 ``ff 03`` address/control prefix),
  50 PPP in HDLC-like framing (or Cisco HDLC when it starts with ``0f``/``8f``),
  166 PPP of pppd (first byte is the direction), 204 PPP with a direction byte,
  51 PPPoE session frames without Ethernet;
* 104 Cisco HDLC (RFC 1547 4.3.1: address, control, EtherType), 205 the same with a
  direction byte;
* 105 IEEE 802.11, 127 802.11 with radiotap, 119 with a Prism and 163 with an AVS
  header, 192 PPI (its inner link type read from the PPI header): data frames (QoS or
  not, unprotected) with LLC/SNAP. The radio headers are skipped by their length fields.
* 239 Linux NFLOG (``tcpdump -i nflog:N``): the packet TLV.

dpkt is imported on first use only, so captures of the common link types never load it.
"""
from __future__ import annotations

import struct

import numpy as np

OTHER_LINK_NAMES = {9: "PPP", 50: "PPP/Cisco HDLC", 51: "PPPoE", 104: "Cisco HDLC",
                    105: "IEEE 802.11", 119: "802.11 Prism", 127: "802.11 radiotap",
                    163: "802.11 AVS", 166: "PPP (pppd)", 239: "Linux NFLOG",
                    192: "PPI", 204: "PPP with direction", 205: "Cisco HDLC with direction"}


def _ppp(data):
    """PPP as libpcap's DLT_PPP: ``ff 03`` then the protocol, or the protocol alone."""
    import dpkt
    return dpkt.ppp.PPP(data) if data[:2] == b"\xff\x03" else dpkt.pppoe.PPP(data)


def _cisco_hdlc(data):
    """Address, control, 16-bit EtherType, then the packet (RFC 1547 section 4.3.1)."""
    import dpkt
    return dpkt.ethernet.Ethernet.get_type(struct.unpack_from(">H", data, 2)[0])(data[4:])


def _ppp_serial(data):
    return _cisco_hdlc(data) if data[:1] in (b"\x0f", b"\x8f") else _ppp(data)


def _ppp_pppd(data):
    """Direction byte in place of the address, control ``03``, then the PPP protocol."""
    import dpkt
    return dpkt.pppoe.PPP(data[2:])


def _pppoe(data):
    import dpkt
    return dpkt.pppoe.PPPoE(data)


def _ethernet(data):
    import dpkt
    return dpkt.ethernet.Ethernet(data)


def _ieee80211(data):
    import dpkt
    return dpkt.ieee80211.IEEE80211(data)


def _radiotap(data):
    """Radiotap is skipped by its length field (LE 16 at byte 2): its fields (rates,
    signal, ...) do not say where IP starts, and dpkt's parse of them costs more than the
    rest of the record. A trailing FCS stays after the IP packet, like an Ethernet trailer."""
    return _ieee80211(data[struct.unpack_from("<H", data, 2)[0]:])


def _prism(data):
    """Prism monitor header (msgcode, msglen in host order: little endian in practice),
    or an AVS header in its place (libpcap accepts both under 119), then 802.11."""
    if struct.unpack_from(">I", data)[0] & 0xFFFFFFF0 == 0x80211000:
        return _avs(data)
    length = struct.unpack_from("<I", data, 4)[0]
    if length > len(data):
        length = struct.unpack_from(">I", data, 4)[0]
    return _ieee80211(data[length:])


def _avs(data):
    """AVS radio header: version ``80 21 10 0x``, header length (BE 32), fields; then 802.11."""
    return _ieee80211(data[struct.unpack_from(">I", data, 4)[0]:])


def _nflog(data):
    """Linux NFLOG: family, version, resource id, then TLVs (length incl. its 4-byte head,
    type; host order, little endian in practice; padded to 4 bytes); type 9 is the packet.
    There is no dpkt class for it: the TLVs are walked here and dpkt reads the packet."""
    import dpkt
    p = 4
    while p + 4 <= len(data):
        length, kind = struct.unpack_from("<HH", data, p)
        if length < 4:
            return None
        if kind == 9:
            payload = data[p + 4:p + length]
            return (dpkt.ip6.IP6 if payload[:1] and payload[0] >> 4 == 6 else dpkt.ip.IP)(payload)
        p += (length + 3) & ~3
    return None


def _ppi(data):
    """PPI: version, flags, header length (LE 16), inner link type (LE 32), fields."""
    _, _, length, inner = struct.unpack_from("<BBHI", data)
    dissect = _INNER.get(inner)
    return None if dissect is None else dissect(data[length:])


# link type -> function(record bytes) -> outermost dpkt layer (or None)
DISSECTORS = {
    9: _ppp, 50: _ppp_serial, 51: _pppoe, 166: _ppp_pppd, 204: lambda d: _ppp(d[1:]),
    104: _cisco_hdlc, 205: lambda d: _cisco_hdlc(d[1:]),
    105: _ieee80211, 119: _prism, 127: _radiotap, 163: _avs, 192: _ppi, 239: _nflog,
}
# inside PPI: also Ethernet (never reaches here on its own: the vector decoder reads it)
_INNER = {1: _ethernet, **{k: v for k, v in DISSECTORS.items() if k != 192}}


def _first_ip(layer):
    """The outermost dpkt IP/IP6 layer below ``layer``, or None."""
    import dpkt
    ip_types = (dpkt.ip.IP, dpkt.ip6.IP6)
    for _ in range(8):
        if isinstance(layer, ip_types):
            return layer
        if isinstance(layer, dpkt.ieee80211.IEEE80211):
            # dpkt leaves an 802.11 data frame's body as bytes: LLC/SNAP comes next
            if layer.type != dpkt.ieee80211.DATA_TYPE or layer.wep or not isinstance(layer.data, bytes):
                return None
            layer = dpkt.llc.LLC(layer.data)
            continue
        layer = getattr(layer, "data", None)
        if not isinstance(layer, dpkt.Packet):
            return None
    return None


def network_offsets(buf: np.ndarray, offsets: np.ndarray, caplens: np.ndarray, linktype: int):
    """``(l3, family)`` per record of one link type the vectorised decoder does not know.

    ``l3`` (int64) is the byte offset in ``buf`` of the IP header dpkt found in the record
    at ``offsets[i]`` (``caplens[i]`` bytes), ``family`` (uint8) 4 or 6, or 0 (and ``l3``
    -1) where there is no IP packet. Returns None when no dissector knows ``linktype``.
    """
    dissect = DISSECTORS.get(int(linktype))
    if dissect is None:
        return None
    import dpkt
    n = len(offsets)
    l3 = np.full(n, -1, np.int64)
    fam = np.zeros(n, np.uint8)
    for i, (o, c) in enumerate(zip(np.asarray(offsets).tolist(), np.asarray(caplens).tolist())):
        record = buf[o:o + c].tobytes()
        try:
            ip = _first_ip(dissect(record))
            if ip is None:
                continue
            v4 = isinstance(ip, dpkt.ip.IP)
            head = dpkt.Packet.pack_hdr(ip)[:20 if v4 else 40]
        except Exception:        # dpkt raises many kinds on damaged or cut headers: no IP
            continue
        k = record.find(head)
        if k < 0:
            continue
        l3[i] = o + k
        fam[i] = 4 if v4 else 6
    return l3, fam
