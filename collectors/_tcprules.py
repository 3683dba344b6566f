"""The per-row TCP rules, written once: what a segment occupies, which rows are keep-alives,
which are below snd_max (retransmission or out-of-order candidates), which may be duplicate
ACKs and which advertise a zero window.

Both analyses apply them - the whole-capture one (:mod:`.tcp`) over every flow at once and
the time-chunked one (:mod:`._tcpstream`) chunk by chunk -, on arrays of rows where
``rel`` is the row's sequence number relative to its direction's ISN (unwrapped),
``smb_own`` the row's own direction's snd_max just before it (-1: nothing sent yet),
``pay`` the payload bytes and ``flags`` the TCP flags byte. The C row chain
(``_records.c`` ``stream_rows``) is their compiled twin, tested against them. Definitions
are in :mod:`.tcp`'s notes (tshark's rules where tshark has one).
"""
from __future__ import annotations

from ._tcparrays import FIN, RST, SYN


def segment_ends(rel, pay, flags):
    """Sequence number just past each segment: ``rel + pay``, plus one for a SYN and one
    for a FIN (both occupy sequence space)."""
    end = rel + pay
    end += (flags & SYN) != 0
    end += (flags & FIN) != 0
    return end


def keepalives_and_below(rel, smb_own, pay, flags):
    """``(keepalive, below)`` per row. A keep-alive: 0 or 1 payload byte, no SYN/FIN, at
    snd_max - 1. Below: data, SYN or FIN (sent again, SYNs and FINs are retransmissions too)
    starting below the direction's snd_max, not a keep-alive."""
    synfin = (flags & (SYN | FIN)) != 0
    keepalive = (pay <= 1) & ~synfin & (rel == smb_own - 1)
    below = ((pay > 0) | synfin) & (rel < smb_own) & ~keepalive & (smb_own >= 0)
    return keepalive, below


def dupack_candidates(rel, smb_own, pay, flags, has_ack, win):
    """Rows that are duplicate ACKs if they repeat the ACK and window of their direction's
    previous row and do not answer a keep-alive (the callers' part): a pure ACK (no payload,
    no SYN/FIN/RST) with a non-zero window at the sender's next sequence number (tshark: a
    keep-alive at snd_nxt - 1 repeating the ACK is a keep-alive, not a duplicate ACK)."""
    return (pay == 0) & ((flags & (SYN | FIN | RST)) == 0) & has_ack & (win > 0) & (rel == smb_own)


def zero_windows(win, flags):
    """Rows advertising a zero receive window (SYN, FIN and RST rows excepted)."""
    return (win == 0) & ((flags & (SYN | FIN | RST)) == 0)
