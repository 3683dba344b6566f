"""The connection table of one read of a capture: provisional connection numbers.

Each decoded batch's packets get the number of their connection - (low endpoint, high
endpoint, protocol), numbered 0.. in order of first appearance in the file - and the bit
saying whether their sender is the high endpoint (:class:`Connections`, one C hash table
when the extension is built). Every read of a file numbers its connections alike, so
passes over one capture (the analysis' census, its flow groups, the packets frame) name
connections the same way; :func:`address_names` turns address identities into strings.
"""
from __future__ import annotations

import itertools

import numpy as np

from ._decode import decode, group_connections


V6_BASE = 1 << 32
#: What names a flow in the flows table (:meth:`FlowLabels.keys`).
FLOW_KEYS = ("flow", "src", "dst", "sport", "dport", "proto")


def address_texts(hi, lo, six) -> list:
    """Text of each address given as 64-bit words ``hi``, ``lo`` and a flag ``six``: IPv4
    (``six`` false; the address is ``lo``'s low 32 bits) in dotted decimal, IPv6 in the
    compressed form of RFC 5952 (as :mod:`ipaddress` writes it). IPv4 addresses are
    formatted by ``inet_ntoa``, not by :mod:`ipaddress` objects: a busy server's capture
    has as many client addresses as connections."""
    import ipaddress
    from socket import inet_ntoa
    six = np.asarray(six, bool)
    out = [None] * len(six)
    v4 = np.flatnonzero(~six)
    if len(v4):
        packed = (np.asarray(lo)[v4] & 0xFFFFFFFF).astype(">u4").tobytes()
        for i, k in enumerate(v4.tolist()):
            out[k] = inet_ntoa(packed[4 * i:4 * i + 4])
    for k in np.flatnonzero(six).tolist():
        out[k] = str(ipaddress.IPv6Address((int(hi[k]) << 64) | int(lo[k])))
    return out


def _distinct_names(idents, v6_addresses: list):
    """``(texts, inv)``: the text of each distinct address identity of :class:`Connections`
    (formatted once each, in identity order) and the index into it of each of ``idents``."""
    uniq, inv = np.unique(np.asarray(idents, np.int64), return_inverse=True)
    six = uniq >= V6_BASE
    hi = np.zeros(len(uniq), np.uint64)
    lo = uniq.astype(np.uint64)
    for k in np.flatnonzero(six).tolist():
        hi[k], lo[k] = v6_addresses[int(uniq[k]) - V6_BASE]
    return address_texts(hi, lo, six), inv.reshape(-1)


def address_names(idents, v6_addresses: list) -> np.ndarray:
    """Address strings for the address identities of :class:`Connections` (each distinct
    identity formatted once)."""
    texts, inv = _distinct_names(idents, v6_addresses)
    return np.array(texts, dtype=str)[inv] if texts else np.zeros(0, dtype=str)


class FlowLabels:
    """The flows' identities by provisional connection number (:class:`Connections`): what
    labels a pass over the capture's packets with flow numbers, directions and address
    codes, in numbers - no per-flow strings (a busy server's capture has a flow per client
    address). Per provisional number ``p``: ``flow[p]`` its flow number (int32),
    ``fwd_hi[p]`` whether the flow's ``fwd`` sender is the connection key's high endpoint,
    ``lo[p]``/``hi[p]`` the codes of the key's low/high endpoint address in ``names`` (the
    capture's distinct addresses, sorted as text), ``lo_port``/``hi_port``/``proto``.

    Made by :func:`flow_labels` from the analysis' numbering; :meth:`keys` gives the flows
    table's identifying columns (:data:`FLOW_KEYS`) in flow order."""

    __slots__ = ("flow", "fwd_hi", "lo", "hi", "names", "lo_port", "hi_port", "proto")

    def __init__(self, flow, fwd_hi, lo, hi, names, lo_port, hi_port, proto):
        self.flow, self.fwd_hi, self.lo, self.hi, self.names = flow, fwd_hi, lo, hi, names
        self.lo_port, self.hi_port, self.proto = lo_port, hi_port, proto

    def __len__(self) -> int:
        return len(self.flow)

    def keys(self):
        """The flows table's ``flow``, ``src``, ``dst``, ``sport``, ``dport``, ``proto`` in
        flow order (a :class:`._columns.Columns`; ``src -> dst`` is ``fwd``)."""
        from ._columns import Columns
        order = np.argsort(self.flow, kind="stable")
        hi_first = self.fwd_hi[order]
        names = np.array(self.names, dtype=str) if self.names else np.zeros(0, dtype=str)
        lo, hi = self.lo[order], self.hi[order]
        lp, hp = self.lo_port[order], self.hi_port[order]
        return Columns(dict(zip(FLOW_KEYS, (
            self.flow[order].astype(np.int64), names[np.where(hi_first, hi, lo)], names[np.where(hi_first, lo, hi)],
            np.where(hi_first, hp, lp), np.where(hi_first, lp, hp), self.proto[order]))))


def flow_labels(flow, fwd_lo, lo_ep, hi_ep, proto, v6_addresses: list) -> FlowLabels:
    """:class:`FlowLabels` from, per provisional connection number: its flow number
    ``flow``, ``fwd_lo`` (the flow's ``fwd`` sender is the key's low endpoint), the key's
    endpoints ``lo_ep``/``hi_ep`` (``(address identity << 16) | port``) and ``proto``;
    ``v6_addresses`` names the IPv6 identities (:meth:`Connections.v6_addresses`)."""
    lo_ep, hi_ep = np.asarray(lo_ep, np.int64), np.asarray(hi_ep, np.int64)
    n = len(lo_ep)
    texts, inv = _distinct_names(np.concatenate([lo_ep >> 16, hi_ep >> 16]), v6_addresses)
    order = np.argsort(np.array(texts, dtype=str), kind="stable") if texts else np.zeros(0, np.int64)
    rank = np.empty(len(texts), np.int32)
    rank[order] = np.arange(len(texts), dtype=np.int32)
    codes = rank[inv]
    return FlowLabels(np.asarray(flow).astype(np.int32), ~np.asarray(fwd_lo, bool), codes[:n], codes[n:],
                      [texts[k] for k in order.tolist()], lo_ep & 0xFFFF, hi_ep & 0xFFFF,
                      np.asarray(proto, np.int64))


def _batch_flow_keys(src, sport, dst, dport, proto):
    """``(swap, lo, hi, proto, first, inv)``: the per-packet swap bit and, per distinct
    connection key of the batch, its endpoints ``(address id << 16) | port`` ordered
    low/high, its protocol, its first packet's index and the inverse (key of each packet)."""
    ep_a = (src << 16) | sport
    ep_b = (dst << 16) | dport
    swap = ep_a > ep_b
    lo = np.minimum(ep_a, ep_b)
    hi = np.maximum(ep_a, ep_b)
    del ep_a, ep_b
    first, inv = group_connections(lo, hi, proto)
    return swap, lo[first], hi[first], proto[first], first, inv


class Connections:
    """Provisional connection numbers across the batches of one read of a capture.

    An address's identity is its IPv4 value, or :data:`V6_BASE` + its IPv6 number (order of
    first appearance in the file); an endpoint is ``(identity << 16) | port``; a connection
    is (low endpoint, high endpoint, protocol), numbered 0.. in order of first appearance in
    the file, so every read of a file numbers its connections alike. :meth:`number` gives
    each packet its connection number and ``swap`` (its sender is the high endpoint).

    Kept in one C hash table (``collectors/_records.c``, ``conn_*``: exact keys, consecutive
    packets of one connection skip the lookup) when the extension is built; otherwise in
    dictionaries filled from the batch's distinct keys - the same numbers either way (a
    test compares them)."""

    def __init__(self):
        from ._capture import _records
        self._table = _records.conn_new() if _records is not None else None
        self._n = 0
        self._flow_ids: dict = {}        # pure Python: (lo, hi, proto) -> number
        self._v6_ids: dict = {}          # pure Python: (hi, lo) -> IPv6 address number

    def __len__(self) -> int:
        return self._n

    def number(self, d: dict):
        """``(pflow, swap)`` (int32, bool per packet) of a batch decoded with
        ``decode(raw_addresses=True)``; its address words are taken out of ``d``."""
        version = np.ascontiguousarray(d.pop("version"), np.uint8)
        d.pop("v6", None)
        words = [np.ascontiguousarray(d.pop(k), np.uint64) for k in ("src_hi", "src_lo", "dst_hi", "dst_lo")]
        sport = np.ascontiguousarray(d["sport"], np.uint16)
        dport = np.ascontiguousarray(d["dport"], np.uint16)
        proto = np.ascontiguousarray(d["proto"], np.uint8)
        if self._table is not None:
            from ._capture import _records
            pflow = np.empty(len(version), np.int32)
            swap = np.empty(len(version), bool)
            self._n = _records.conn_number(self._table, version, *words, sport, dport, proto, pflow, swap)
            return pflow, swap
        src, dst = self._identities(version == 6, *words)
        swap, flo, fhi, fproto, first, inv = _batch_flow_keys(
            src, sport.astype(np.int64), dst, dport.astype(np.int64), proto.astype(np.int64))
        ids = self._flow_ids
        # first appearance in the file: the batch's new keys in order of their first packet
        for k in np.argsort(first, kind="stable").tolist():
            ids.setdefault((int(flo[k]), int(fhi[k]), int(fproto[k])), len(ids))
        fid = np.array([ids[k] for k in zip(flo.tolist(), fhi.tolist(), fproto.tolist())], np.int32)
        self._n = len(ids)
        return fid[inv], swap

    def _identities(self, v6, src_hi, src_lo, dst_hi, dst_lo):
        """Per-packet address identities (int64) of source and destination (pure Python)."""
        src, dst = src_lo.view(np.int64), dst_lo.view(np.int64)
        i6 = np.flatnonzero(v6)
        if len(i6):
            src, dst = src.copy(), dst.copy()
            # per packet: source then destination, as the C table meets them
            hi = np.stack([src_hi[i6], dst_hi[i6]], axis=1).ravel()
            lo = np.stack([src_lo[i6], dst_lo[i6]], axis=1).ravel()
            uniq, first, inv = np.unique(np.stack([hi, lo], axis=1), axis=0, return_index=True,
                                         return_inverse=True)
            for k in np.argsort(first, kind="stable").tolist():
                self._v6_ids.setdefault((int(uniq[k, 0]), int(uniq[k, 1])), len(self._v6_ids))
            ids = np.array([self._v6_ids[(h, l)] for h, l in uniq.tolist()], np.int64) + V6_BASE
            both = ids[inv.ravel()].reshape(-1, 2)
            src[i6], dst[i6] = both[:, 0], both[:, 1]
        return src, dst

    def keys(self, start: int = 0):
        """``(lo, hi, proto)``: int64 arrays of the keys of connections ``start``.., in
        number order."""
        k = self._n - start
        if self._table is not None:
            from ._capture import _records
            lo, hi, pr = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.uint8)
            _records.conn_keys(self._table, start, lo, hi, pr)
            return lo, hi, pr.astype(np.int64)
        keys = np.array(list(itertools.islice(self._flow_ids, start, None)), np.int64).reshape(-1, 3)
        return keys[:, 0].copy(), keys[:, 1].copy(), keys[:, 2].copy()

    def v6_addresses(self, start: int = 0) -> list:
        """``(high, low)`` 64-bit words of IPv6 addresses ``start``.., in number order (for
        :func:`address_names`)."""
        if self._table is not None:
            from ._capture import _records
            return [tuple(w) for w in np.frombuffer(_records.conn_v6(self._table, start), np.uint64)
                    .reshape(-1, 2).tolist()]
        return list(itertools.islice(self._v6_ids, start, None))


def decode_connections(batch, conns: Connections, unknown: set, *, tunnel_ids: bool = True):
    """One capture batch decoded (``decode(raw_addresses=True, tunnel_ids=tunnel_ids)``) and
    its packets given their connections: ``(columns, pflow, swap)`` - provisional
    connection numbers and endpoint-order bits from ``conns`` (see :class:`Connections`);
    the batch's unknown link types are added to ``unknown``."""
    d = decode(batch, raw_addresses=True, tunnel_ids=tunnel_ids)
    unknown |= d.pop("unknown_linktypes")
    if not len(d["ts_ns"]):
        return d, np.zeros(0, np.int32), np.zeros(0, bool)
    pflow, swap = conns.number(d)
    return d, pflow, swap


def numbered_batches(reader, conns: Connections, unknown: set, *, tunnel_ids: bool = True):
    """The batches of ``reader`` (a :class:`._capture.CaptureReader`) that hold IP packets,
    decoded and numbered by :func:`decode_connections`: ``(columns, pflow, swap, keys, v6)``,
    ``keys``/``v6`` the keys ``(lo, hi, proto)`` and the IPv6 addresses of the connections
    first met in that batch (None when there are none) - what a reader of the batches
    needs to name their connections without asking ``conns``, which the next batch
    changes (the tuple a :class:`._feed.BatchFeed` hands on)."""
    known_keys = known_v6 = 0
    for batch in reader:
        d, pflow, swap = decode_connections(batch, conns, unknown, tunnel_ids=tunnel_ids)
        del batch
        if not len(d["ts_ns"]):
            continue
        keys = v6 = None
        if len(conns) > known_keys:
            keys, v6 = conns.keys(known_keys), conns.v6_addresses(known_v6)
            known_keys, known_v6 = len(conns), known_v6 + len(v6)
        yield d, pflow, swap, keys, v6
