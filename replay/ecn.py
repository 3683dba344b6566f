"""The ECN field of IP packets (RFC 3168, RFC 9331): read it, set CE.

The ECN field is the two low bits of the IPv4 TOS byte (header byte 1) and of the IPv6
traffic class (the low nibble of byte 0 holds its high four bits, so ECN is bits 4-5 of
byte 1)::

    NOT_ECT = 0b00   ECT1 = 0b01 (L4S, RFC 9331)   ECT0 = 0b10   CE = 0b11

:func:`mark_ce` sets CE on an ECN-capable packet and, for IPv4, updates the header
checksum incrementally by RFC 1624 eq. 3, ``HC' = ~(~HC + ~m + m')`` over the 16-bit word
``m`` holding the version/IHL and TOS bytes (IPv6 has no header checksum). Packets that
are not IP, too short, or not ECN-capable are never marked.
"""
from __future__ import annotations

NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3


def ecn_of(packet) -> int:
    """The ECN codepoint of an IPv4/IPv6 packet (``bytes``-like), or ``NOT_ECT`` when it is
    not IP or too short to hold the field."""
    if len(packet) < 20:
        return NOT_ECT
    version = packet[0] >> 4
    if version == 4:
        return packet[1] & 3
    if version == 6 and len(packet) >= 40:
        return (packet[1] >> 4) & 3
    return NOT_ECT


def checksum_update(hc: int, old_word: int, new_word: int) -> int:
    """RFC 1624 eq. 3: the new header checksum after one 16-bit word changed from
    ``old_word`` to ``new_word`` (one's complement arithmetic, all values 16-bit)."""
    s = (~hc & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mark_ce(packet):
    """``packet`` with its ECN field set to CE, or None when it is not ECN-capable
    (not-ECT or not IP: the caller drops it instead). A packet already CE is returned
    as it is (counted as marked again by the queue, as Linux's ``INET_ECN_set_ce``)."""
    ecn = ecn_of(packet)
    if ecn == NOT_ECT:
        return None
    if ecn == CE:
        return packet
    b = bytearray(packet)
    if b[0] >> 4 == 4:
        old = (b[0] << 8) | b[1]
        b[1] |= CE
        hc = checksum_update((b[10] << 8) | b[11], old, (b[0] << 8) | b[1])
        b[10], b[11] = hc >> 8, hc & 0xFF
    else:
        b[1] |= CE << 4
    return bytes(b)
