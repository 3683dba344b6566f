"""Capture -> the narrow per-packet columns the TCP analysis needs, without a packets frame.

``analyze_tcp(path)`` does not need addresses, ports, protocol, SACK block counts, captured
lengths or interface numbers per packet: they are properties of the flow (or unused). This
reader decodes the capture batch by batch (the same decoder as :func:`read_pcap`) and
keeps, per packet, only ``ts_ns`` (int64), a provisional flow id (int32), the endpoint
order bit, ``ip_len``/``seq``/``ack``/``payload``/``tsval``/``tsecr`` (uint32), ``flags``
(uint8), ``window`` (uint16) and ``has_ts``/``dsack`` (bool): 39 bytes per packet instead
of the frame's ~60, with no pandas objects. Values only some rows carry are kept for
those rows: MSS, window scale and SYN option bits for SYNs, the left edge for DSACKs.

Flows are found per batch: distinct (address, port, address, port, protocol) keys of the
batch are mapped to connection ids with a dictionary (exact keys, no hashing across
batches), addresses likewise. Flow numbers and directions are then fixed exactly as
:func:`airlink.collectors.pcap.assign_flows` fixes them (order of first appearance in
time order; ``fwd`` = side of the first pure SYN, else of the first packet), so the
analysis gives the same numbers as ``analyze_tcp(read_pcap(path))``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._capture import CaptureReader, file_size
from ._decode import SYN, decode, group_connections

KEPT = {"ts_ns": None, "ip_len": np.uint32, "seq": np.uint32, "ack": np.uint32,
        "flags": np.uint8, "window": np.uint16, "payload": np.uint32, "tsval": np.uint32,
        "tsecr": np.uint32, "has_ts": bool, "dsack": bool}
SYN_KEPT = {"mss": np.uint16, "wscale": np.int8, "synopt": np.uint8}
SPARSE_DTYPES = {"syn_index": np.int64, "dsack_index": np.int64, "dsack_left": np.uint32, **SYN_KEPT}


V6_BASE = 1 << 32


def _address_idents(d: dict, v6_ids: dict):
    """Per-packet address identities (int64) from decoded raw address words: an IPv4
    address is its own 32-bit value, an IPv6 address ``V6_BASE +`` its number in
    ``v6_ids`` (a dictionary of exact (high, low) words, filled across batches)."""
    v6 = d.pop("v6")
    src, dst = d.pop("src_lo").view(np.int64), d.pop("dst_lo").view(np.int64)
    src_hi, dst_hi = d.pop("src_hi"), d.pop("dst_hi")
    i6 = np.flatnonzero(v6)
    if len(i6):
        src, dst = src.copy(), dst.copy()
        words = np.stack([np.concatenate([src_hi[i6], dst_hi[i6]]),
                          np.concatenate([src[i6], dst[i6]]).view(np.uint64)], axis=1)
        uniq, inv = np.unique(words, axis=0, return_inverse=True)
        ids = np.array([v6_ids.setdefault((h, l), len(v6_ids)) for h, l in uniq.tolist()],
                       np.int64) + V6_BASE
        inv = inv.ravel()
        src[i6] = ids[inv[:len(i6)]]
        dst[i6] = ids[inv[len(i6):]]
    return src, dst


def address_names(idents, v6_addresses: list) -> np.ndarray:
    """Address strings for identities made by :func:`_address_idents`."""
    import ipaddress
    out = []
    for a in np.asarray(idents).tolist():
        if a < V6_BASE:
            out.append(str(ipaddress.IPv4Address(a)))
        else:
            h, l = v6_addresses[a - V6_BASE]
            out.append(str(ipaddress.IPv6Address((h << 64) | l)))
    return np.array(out, dtype=str)


def _batch_flow_keys(src, sport, dst, dport, proto):
    """Per-packet swap bit and, per distinct connection key of the batch, (first index,
    inverse): endpoints ``(address id << 16) | port`` ordered low/high, plus protocol."""
    ep_a = (src << 16) | sport
    ep_b = (dst << 16) | dport
    swap = ep_a > ep_b
    lo = np.minimum(ep_a, ep_b)
    hi = np.maximum(ep_a, ep_b)
    del ep_a, ep_b
    first, inv = group_connections(lo, hi, proto)
    return swap, lo[first], hi[first], proto[first], inv


def decode_connections(batch, v6_ids: dict, flow_ids: dict, unknown: set):
    """One capture batch decoded (``decode(raw_addresses=True)``), its connections numbered:
    ``(columns, fid, inv, swap)`` - ``fid[inv]`` is each packet's provisional flow id (order
    of first appearance in the file; ``flow_ids`` maps (low endpoint, high endpoint,
    protocol) to it across batches, ``v6_ids`` the IPv6 addresses), ``swap`` the
    endpoint-order bit; the batch's unknown link types are added to ``unknown``."""
    d = decode(batch, raw_addresses=True)
    unknown |= d.pop("unknown_linktypes")
    if not len(d["ts_ns"]):
        return d, np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, bool)
    src, dst = _address_idents(d, v6_ids)
    swap, flo, fhi, fproto, inv = _batch_flow_keys(
        src, d.pop("sport"), dst, d.pop("dport"), d["proto"].astype(np.int64))
    del src, dst
    fid = np.array([flow_ids.setdefault(k, len(flow_ids))
                    for k in zip(flo.tolist(), fhi.tolist(), fproto.tolist())], np.int32)
    return d, fid, inv, swap


class _ColumnStore:
    """Columns filled batch after batch into arrays reserved once (no per-batch pieces to
    concatenate: the peak is the columns themselves, not twice them); grows by doubling
    when the reservation was short (compressed files)."""

    def __init__(self, dtypes: dict):
        self.dtypes = dtypes
        self.arrays = {k: np.empty(0, dt) for k, dt in dtypes.items()}
        self.capacity = 0
        self.size = 0

    def reserve(self, n: int) -> None:
        if n <= self.capacity:
            return
        for k, dt in self.dtypes.items():
            new = np.empty(n, dt)
            new[:self.size] = self.arrays[k][:self.size]
            self.arrays[k] = new
        self.capacity = n

    def append(self, values: dict) -> None:
        m = len(values["pflow"])
        if self.size + m > self.capacity:
            self.reserve(max(2 * self.capacity, self.size + m))
        for k, v in values.items():
            self.arrays[k][self.size:self.size + m] = v
        self.size += m

    def columns(self) -> dict:
        return {k: a[:self.size] for k, a in self.arrays.items()}


def read_columns(path, *, salvage: bool = False, progress: bool = True, keep=None,
                 census: bool = False, limit: int | None = None) -> dict | None:
    """Narrow columns of every IP packet of a capture, in file order (see the module notes).

    Returns a dict: the :data:`KEPT` arrays, ``pflow`` (int32 provisional flow id, in order
    of first appearance in the file), ``swap`` (bool: sender is the flow key's high
    endpoint), ``syn_index`` (int64 packet indices of SYN rows) with ``mss``/``wscale``/
    ``synopt`` at those rows, ``dsack_index`` with ``dsack_left``, ``flow_lo``/``flow_hi`` (int64 endpoints per provisional
    flow; ``endpoint >> 16`` is an address identity, see :func:`address_names`),
    ``flow_proto``, ``v6_addresses``, ``source``.
    Raises like :func:`read_pcap` on damaged captures (``salvage=True`` keeps the packets
    before the damage).

    Provisional flow ids are the same on every read of a file, which two modes use to
    analyse a capture a group of flows at a time: ``census=True`` keeps no packet columns,
    only per provisional flow ``flow_packets``, ``flow_first_ts`` and ``flow_first_index``
    (the first packet in stable time order: least (time, IP-packet index in the file)),
    plus ``ts_file`` (a temporary file of every IP packet's time, int64, file order) and
    ``lateness_ns``; ``keep`` (bool
    per provisional flow id) keeps only the packets of those flows, numbers the kept flows
    0.. in id order (``flow_lo``/... hold only them; ``kept_ids``: their provisional ids)
    and adds ``ipidx`` (int64: each kept packet's index among the file's IP packets).
    ``limit``: return None as soon as the capture turns out to hold more IP packets.
    """
    from .pcap import _progress_bar, check_linktypes
    path = Path(path)
    bar, update = _progress_bar(path, progress)
    reader = CaptureReader(path, salvage=salvage, progress=update, reuse_buffer=True)
    dense = {**{k: (np.int64 if dt is None else dt) for k, dt in KEPT.items()},
             "pflow": np.int32, "swap": bool}
    store = _ColumnStore(dense)
    syn_parts = {k: [] for k in SPARSE_DTYPES}
    v6_ids: dict = {}
    flow_ids: dict = {}
    unknown: set = set()
    size = file_size(path)
    if keep is not None:
        keep = np.asarray(keep, bool)
        compact = np.cumsum(keep) - 1
        store = _ColumnStore({**dense, "ipidx": np.int64})
    n_ip = 0
    if census:
        from .pcap import lateness
        counts = np.zeros(0, np.int64)
        first_ts = np.zeros(0, np.int64)
        first_ix = np.zeros(0, np.int64)
        import tempfile
        ts_file = tempfile.TemporaryFile()      # every packet's time, on disk until needed
        late, top = 0, None
    try:
        for batch in reader:
            if census or keep is not None:
                pass                        # no reservation from the file size (few or no rows kept)
            elif store.capacity == 0 and len(batch.data_off):
                # records in the file, from this batch's bytes per record (+15 %; pages of
                # the unused tail are never touched, so cost no memory)
                span = int(batch.data_off[-1] + batch.caplen[-1] - batch.data_off[0]) + 16
                per = max(span / len(batch.data_off), 16.0)
                store.reserve(int(size / per * 1.15) + len(batch.data_off) + 1024)
            d, fid, inv, swap = decode_connections(batch, v6_ids, flow_ids, unknown)
            del batch
            m = len(d["ts_ns"])
            if m == 0:
                continue
            ipidx0, n_ip = n_ip, n_ip + m
            if limit is not None and n_ip > limit:
                return None
            if census:
                pfl = fid[inv]
                ts = d["ts_ns"]
                nf = len(flow_ids)
                counts = np.r_[counts, np.zeros(nf - len(counts), np.int64)]
                first_ts = np.r_[first_ts, np.full(nf - len(first_ts), np.iinfo(np.int64).max)]
                first_ix = np.r_[first_ix, np.full(nf - len(first_ix), np.iinfo(np.int64).max)]
                counts += np.bincount(pfl, minlength=nf)
                o = np.lexsort((np.arange(m), ts))          # stable time order inside the batch
                u, fi = np.unique(pfl[o], return_index=True)
                ct, ci = ts[o][fi], o[fi] + ipidx0
                better = (ct < first_ts[u]) | ((ct == first_ts[u]) & (ci < first_ix[u]))
                first_ts[u[better]], first_ix[u[better]] = ct[better], ci[better]
                lt, top = lateness(ts, top)
                late = max(late, lt)
                ts.astype(np.int64, copy=False).tofile(ts_file)
                del inv, swap, d
                continue
            if keep is not None:
                pfl = fid[inv]
                sel = np.flatnonzero(keep[pfl]) if len(keep) else np.zeros(0, np.int64)
                d = {k: (v[sel] if isinstance(v, np.ndarray) and len(v) == m else v) for k, v in d.items()}
                fid, inv, swap = compact[pfl[sel]].astype(np.int32), np.arange(len(sel)), swap[sel]
                d["ipidx"] = sel + ipidx0
                m = len(sel)
            si = np.flatnonzero((d["flags"] & SYN) != 0)
            syn_parts["syn_index"].append(si + store.size)
            for k in SYN_KEPT:
                syn_parts[k].append(d.pop(k)[si].astype(SYN_KEPT[k], copy=False))
            di = np.flatnonzero(d["dsack"])
            syn_parts["dsack_index"].append(di + store.size)
            syn_parts["dsack_left"].append(d.pop("dsack_left")[di])
            extra = {"ipidx": d.pop("ipidx")} if keep is not None else {}
            store.append({"pflow": fid[inv], "swap": swap, **{k: d.pop(k) for k in KEPT}, **extra})
            del inv, swap, d
    finally:
        if bar is not None:
            bar.close()
    check_linktypes(path, reader, unknown, n_ip if (census or keep is not None) else store.size, salvage)
    if census:
        keys = list(flow_ids)
        return {"flow_packets": counts, "flow_first_ts": first_ts, "flow_first_index": first_ix,
                "ts_file": ts_file,
                "lateness_ns": late, "ip_packets": n_ip, "flows": len(keys),
                "source": str(path), "problem": reader.problem, "records": int(reader.packets)}
    cols = store.columns()
    for k, lst in syn_parts.items():
        dt = SPARSE_DTYPES[k]
        cols[k] = np.concatenate(lst) if len(lst) > 1 else (lst[0] if lst else np.zeros(0, dt))
    keys = list(flow_ids)
    if keep is not None:
        cols["kept_ids"] = np.flatnonzero(keep[:len(keys)])
        keys = [keys[i] for i in cols["kept_ids"].tolist()]
    cols["flow_lo"] = np.array([k[0] for k in keys], np.int64)
    cols["flow_hi"] = np.array([k[1] for k in keys], np.int64)
    cols["flow_proto"] = np.array([k[2] for k in keys], np.int64)
    cols["v6_addresses"] = list(v6_ids)
    cols["source"] = str(path)
    cols["problem"] = reader.problem
    cols["records"] = int(reader.packets)
    return cols
