"""Packet captures (pcap, pcapng, gzip-compressed) -> a ``packets`` frame.

``read(path)`` returns one row per captured IPv4/IPv6 packet with the columns of the
``packets`` kind (see :mod:`airlink.core.schema`): ``time`` (UTC), ``src``/``dst``
(categorical address strings), ``proto`` (6 TCP, 17 UDP, ...), ``ip_len_bytes`` (IP
length as on the wire, from the IP header, so header-only captures keep true sizes),
``sport``/``dport``, ``flow`` (bidirectional connection number, in order of first
appearance), ``direction`` (``fwd``: same direction as the connection's first SYN, else
its first packet), absolute 32-bit ``seq``/``ack``, ``flags`` (the TCP flags byte: FIN 0x01 ..
ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80), ``ecn`` (the IP ECN field of RFC 3168: 0 Not-ECT,
1 ECT(1), 2 ECT(0), 3 CE; IPv4 TOS / IPv6 traffic class low 2 bits), ``window`` (raw field),
``payload_bytes``, ``tsval``/``tsecr`` (0 where absent; ``has_ts``), ``sack_blocks``,
``dsack`` (RFC 2883 duplicate SACK) with ``dsack_left``, SYN options ``mss_bytes``,
``wscale`` (-1 absent), ``syn_options`` (bit 1 SACK permitted, 2 timestamps, 4 window
scale), ``interface``, ``captured_bytes``, and for a cellular core's user plane (the
users' packets inside GTP-U tunnels) ``teid`` (the tunnel endpoint identifier of the
G-PDU that carried the packet: each direction of a bearer has its own; -1 outside a
tunnel) and ``qfi`` (5G's QoS flow identifier from the PDU session container; -1 where
there is none).

Link types: Ethernet (802.1Q/QinQ), Linux cooked SLL and SLL2, raw IP, BSD loopback are
decoded in vector form; PPP, PPPoE, Cisco HDLC, 802.11 (plain, radiotap, Prism, AVS, PPI)
and NFLOG through dpkt, per packet, up to the IP header (see :mod:`._dpktlink`). Records
of other link types are skipped and counted in ``frame.attrs["unknown_linktypes"]``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ._capture import CaptureReader, progress_bar, sniff_kind
from ._connections import Connections, FlowLabels, address_names, address_texts, numbered_batches
from ._decode import check_linktypes, decode, group_connections
from ._timeorder import in_time_order, lateness

if TYPE_CHECKING:                # annotations only: pandas is imported where a frame is built
    import pandas as pd

NAME = "pcap"
DIRECTIONS = ["fwd", "rev"]


def is_format(path) -> bool:
    """True for pcap, pcapng and gzip files that hold one (reads a few bytes, never raises)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        kind = sniff_kind(head)
        if kind == "gzip":
            import gzip
            with gzip.open(path, "rb") as g:
                return sniff_kind(g.read(4)) in ("pcap", "pcapng")
        return kind in ("pcap", "pcapng")
    except Exception:
        return False


def why_not(path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        return str(exc)
    return f"magic {head.hex() or '(empty)'} is neither pcap nor pcapng"


def read(path, *, salvage: bool = False, progress: bool = True) -> pd.DataFrame:
    """Read a capture into a ``packets`` frame (see the module notes for the columns).

    ``salvage=True`` keeps the packets before a damaged place instead of raising; the
    problem is in ``frame.attrs["problem"]``. A progress bar shows on files over 64 MB
    when stderr is a terminal.
    """
    path = Path(path)
    bar, update = progress_bar(path, progress)
    reader = CaptureReader(path, salvage=salvage, progress=update, reuse_buffer=True)
    parts = []
    try:
        for batch in reader:
            parts.append(decode(batch))
            del batch
    finally:
        if bar is not None:
            bar.close()
    unknown = set().union(*(p.pop("unknown_linktypes") for p in parts)) if parts else set()
    records = reader.packets
    cols = _merge(parts) if parts else None
    del parts
    check_linktypes(path, reader, unknown, 0 if cols is None else len(cols["ts_ns"]), salvage)
    frame = _frame(cols)
    frame.attrs.update({"source": str(path), "reader": NAME, "format": reader.format,
                        "records": int(records), "ip_packets": int(len(frame)),
                        "linktypes": sorted(int(t) for t in reader.linktypes),
                        "unknown_linktypes": sorted(unknown)})
    if reader.problem:
        frame.attrs["problem"] = reader.problem
    if reader.dropped is not None:
        frame.attrs["capture_dropped"] = int(reader.dropped)
    return frame


def _merge(parts) -> dict:
    """Concatenate per-batch columns one at a time (peak: one column twice) and merge the
    per-batch address dictionaries into one."""
    tables = [p.pop("addr_table") for p in parts]
    for p in parts:
        p.pop("keep", None)
    uh = np.unique(np.concatenate([t[0] for t in tables]))
    hi = np.zeros(len(uh), np.uint64)
    lo = np.zeros(len(uh), np.uint64)
    six = np.zeros(len(uh), bool)
    for t, p in zip(tables, parts):
        pos = np.searchsorted(uh, t[0])
        hi[pos], lo[pos], six[pos] = t[1], t[2], t[3]
        p["src"] = pos[p["src"]].astype(np.int32)
        p["dst"] = pos[p["dst"]].astype(np.int32)
    cols = {}
    for k in list(parts[0]):
        cols[k] = np.concatenate([p.pop(k) for p in parts]) if len(parts) > 1 else parts[0].pop(k)
    cols["addr_table"] = (hi, lo, six)
    return cols






def assign_flows(cols):
    """Flow numbers (first appearance order) and direction codes (0 fwd, 1 rev)."""
    n = len(cols["ts_ns"])
    if n == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int8)
    ep_a = (cols["src"].astype(np.int64) << 16) | cols["sport"]
    ep_b = (cols["dst"].astype(np.int64) << 16) | cols["dport"]
    swap = ep_a > ep_b
    lo = np.minimum(ep_a, ep_b)
    hi = np.maximum(ep_a, ep_b)
    del ep_a, ep_b
    first, inv = group_connections(lo, hi, cols["proto"].astype(np.uint64))
    del lo, hi
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    flow = rank[inv].astype(np.int32)
    del inv
    # direction: the first pure SYN of the flow defines fwd, else the first packet
    nflows = len(order)
    fwd_swap = np.full(nflows, -1, np.int8)
    syn = np.flatnonzero((cols["proto"] == 6) & ((cols["flags"] & 0x12) == 0x02))
    if len(syn):
        f_syn, idx = np.unique(flow[syn], return_index=True)
        fwd_swap[f_syn] = swap[syn[idx]]
    nos = fwd_swap < 0
    fwd_swap[nos] = swap[first[order]][nos]
    direction = (swap.astype(np.int8) != fwd_swap[flow]).astype(np.int8)
    return flow, direction


def _frame(cols) -> pd.DataFrame:
    import pandas as pd
    if cols is None or len(cols["ts_ns"]) == 0:
        df = pd.DataFrame({
            "time": pd.Series([], dtype="datetime64[ns, UTC]"),
            "src": pd.Categorical([]), "dst": pd.Categorical([]),
            "proto": np.zeros(0, np.uint8), "ip_len_bytes": np.zeros(0, np.uint32),
            "sport": np.zeros(0, np.uint16), "dport": np.zeros(0, np.uint16),
            "flow": np.zeros(0, np.int32), "direction": pd.Categorical([], categories=DIRECTIONS),
            "seq": np.zeros(0, np.uint32), "ack": np.zeros(0, np.uint32), "flags": np.zeros(0, np.uint8),
            "ecn": np.zeros(0, np.uint8), "window": np.zeros(0, np.uint16), "payload_bytes": np.zeros(0, np.uint32),
            "tsval": np.zeros(0, np.uint32), "tsecr": np.zeros(0, np.uint32),
            "has_ts": np.zeros(0, bool), "sack_blocks": np.zeros(0, np.uint8),
            "dsack": np.zeros(0, bool), "dsack_left": np.zeros(0, np.uint32),
            "mss_bytes": np.zeros(0, np.uint16), "wscale": np.zeros(0, np.int8),
            "syn_options": np.zeros(0, np.uint8), "interface": np.zeros(0, np.uint8),
            "captured_bytes": np.zeros(0, np.uint32), "teid": np.zeros(0, np.int64),
            "qfi": np.zeros(0, np.int8)})
        return df
    ts = cols["ts_ns"]
    if len(ts) > 1 and (np.diff(ts) < 0).any():     # capture out of time order: sort (stable)
        order = np.argsort(ts, kind="stable")
        cols = {k: (v if k == "addr_table" else v[order]) for k, v in cols.items()}
        ts = cols["ts_ns"]
    flow, direction = assign_flows(cols)
    hi, lo, six = cols.pop("addr_table")
    return _assemble(cols, flow, direction, address_texts(hi, lo, six))


def _assemble(cols, flow, direction, names) -> pd.DataFrame:
    """The packets frame from decoded columns (``src``/``dst``: codes into ``names``),
    flow numbers and direction codes; ``cols`` is emptied."""
    return _packets_columns(cols, flow, direction, names).to_pandas(consume=True)


# the packets frame's columns after time, src and dst (frame column, key of the decoded
# arrays), before flow and direction, then after them
_ENDPOINT_COLUMNS = (("proto", "proto"), ("ip_len_bytes", "ip_len"), ("sport", "sport"), ("dport", "dport"))
_HEADER_COLUMNS = (("seq", "seq"), ("ack", "ack"), ("flags", "flags"), ("ecn", "ecn"), ("window", "window"),
                   ("payload_bytes", "payload"), ("tsval", "tsval"), ("tsecr", "tsecr"),
                   ("has_ts", "has_ts"), ("sack_blocks", "sack_blocks"), ("dsack", "dsack"),
                   ("dsack_left", "dsack_left"), ("mss_bytes", "mss"), ("wscale", "wscale"),
                   ("syn_options", "synopt"), ("interface", "iface"), ("captured_bytes", "captured"),
                   ("teid", "teid"), ("qfi", "qfi"))


def direction_column(codes):
    """A direction column (:class:`._columns.Coded`, categorical fwd/rev) from codes 0 (fwd)
    and 1 (rev)."""
    from ._columns import Coded
    return Coded(np.asarray(codes, np.int8), DIRECTIONS, categorical=True)


def _packets_columns(cols, flow, direction, names):
    """:func:`_assemble` as a column frame (:class:`._columns.Columns`, no pandas)."""
    from ._columns import Coded, Columns, utc_times
    frame = Columns({"time": utc_times(cols.pop("ts_ns")),
                     "src": Coded(cols.pop("src"), names, categorical=True),
                     "dst": Coded(cols.pop("dst"), names, categorical=True)})
    for name, key in _ENDPOINT_COLUMNS:
        frame[name] = cols.pop(key)
    frame["flow"] = flow
    frame["direction"] = direction_column(direction)
    for name, key in _HEADER_COLUMNS:
        frame[name] = cols.pop(key)
    return frame


def iter_packets(path, *, flows, max_lateness_ns: int | None = None, salvage: bool = False,
                 info: dict | None = None):
    """The packets frame of a capture, one batch (~4 MiB of capture) at a time, with flow
    numbers and directions taken from ``flows`` (the flows table of :func:`analyze_tcp`
    of the same capture: ``fwd`` is its ``src -> dst``; or the
    :class:`._connections.FlowLabels` its ``flows_ready`` is given, which names the flows
    without a string per flow), so memory does not grow with the capture. Concatenated, the
    frames equal :func:`read` of the capture, time order included: a record is at most ``max_lateness_ns`` older than the latest record before
    it in the file (``TcpAnalysis.max_lateness_ns``; None: found by a first pass over the
    record headers), so rows are held back only while a later record could still come
    before them (records out of time order, as multi-queue capture gives, hold back only
    the rows they could overtake). ``info`` (a dict) receives the frame attrs :func:`read`
    would set, complete once the generator is exhausted."""
    for out, names in _packet_columns(path, flows=flows, max_lateness_ns=max_lateness_ns,
                                      salvage=salvage, info=info):
        yield _assemble(out, out.pop("flow"), out.pop("direction"), names)


def iter_packet_tables(path, *, flows, max_lateness_ns: int | None = None, salvage: bool = False,
                       info: dict | None = None, stop=None, batch_bytes: int | None = None, feed=None):
    """:func:`iter_packets` as pyarrow Tables (for writing Parquet row groups): the same
    columns, types and values as ``pyarrow.Table.from_pandas`` of its frames, built from
    the decoded arrays without a pandas frame (nor pandas: pandas metadata included). ``stop`` (a ``threading.Event`` or None):
    set, the generator raises :class:`InterruptedError` before the next batch.
    ``batch_bytes``: capture bytes read per batch (None: the reader's default, 4 MiB);
    smaller batches hold less memory (and make more, smaller tables). ``feed`` (a
    :class:`._feed.BatchFeed` from :func:`analyze_tcp`'s ``flows_ready``, or None): the
    batches of the analysis' own pass over the capture, instead of reading it again (one
    table per batch of that pass; ``max_lateness_ns`` is then required)."""
    import pyarrow as pa

    from airlink.core.arrowarrays import numpy_array, strings

    from ._columns import arrow_array

    def addresses(col):
        """A batch's address column as a dictionary of the addresses it holds, in the
        capture's (sorted) order: the capture's whole list in every row group would be
        encoded and written again with each (500,000 addresses of a busy server's capture:
        most of the command's time and of the file)."""
        used = col.present()
        return pa.DictionaryArray.from_arrays(numpy_array(used.codes.astype(col.codes.dtype)),
                                              strings(used.values))
    schema = None
    for out, names in _packet_columns(path, flows=flows, max_lateness_ns=max_lateness_ns,
                                      salvage=salvage, info=info, batch_bytes=batch_bytes, feed=feed,
                                      stop=stop):
        if stop is not None and stop.is_set():
            raise InterruptedError(f"{path}: packets pass stopped")
        frame = _packets_columns(out, out.pop("flow"), out.pop("direction"), names)
        if schema is None:
            table = frame.to_arrow()
            for name in ("src", "dst"):
                at = table.schema.get_field_index(name)
                table = table.set_column(at, table.schema.field(at), addresses(frame[name]))
            schema = table.schema
            yield table
            continue
        # the first batch's schema holds for all: the addresses (and so the codes' type)
        # come from the flows table, complete before the first batch
        yield pa.Table.from_arrays([addresses(c) if n in ("src", "dst") else arrow_array(c)
                                    for n, c in frame.data.items()], schema=schema)


class _PacketLabels:
    """Flow numbers, directions and address codes of packets from their provisional
    connection numbers (:class:`._connections.Connections`): by the analysis' numbers
    (``flows``: a :class:`._connections.FlowLabels`, complete from the start), or by the
    flows table of the same capture (``flows``: a frame, its ``src -> dst`` is ``fwd``),
    the connections' keys then matched to its rows as they are met (:meth:`extend`)."""

    def __init__(self, path, flows):
        self.path = path
        self.complete = isinstance(flows, FlowLabels)
        if self.complete:
            self.labels, self.names = flows, flows.names
            self.per = {"flow": flows.flow, "fwd_hi": flows.fwd_hi, "lo": flows.lo, "hi": flows.hi}
            self.n_known = 0           # connections met so far
            return
        self.names = sorted(set(flows["src"].astype(str)) | set(flows["dst"].astype(str)))
        self.code_of = {n: i for i, n in enumerate(self.names)}
        self.flow_of_key = {tuple(key): f for f, *key in zip(
            flows["flow"].tolist(), flows["src"].astype(str).tolist(), flows["sport"].tolist(),
            flows["dst"].astype(str).tolist(), flows["dport"].tolist(), flows["proto"].tolist())}
        # per connection number: flow, fwd sender is the key's high endpoint, address codes
        # of the key's low and high endpoints
        self.per = {"flow": np.zeros(0, np.int32), "fwd_hi": np.zeros(0, bool),
                    "lo": np.zeros(0, np.int32), "hi": np.zeros(0, np.int32)}
        self.v6: list = []             # IPv6 addresses by number

    def extend(self, keys, v6) -> None:
        """The connections numbered after the ones known (their keys ``(lo, hi, proto)``)
        and the IPv6 addresses numbered after the ones known (``v6``)."""
        from airlink.core.errors import AirlinkError

        if self.complete:                  # the same numbering: the keys must agree
            lo, hi, proto = keys
            at = slice(self.n_known, self.n_known + len(lo))
            self.n_known += len(lo)
            ref = self.labels
            if self.n_known > len(ref) or not (np.array_equal(lo & 0xFFFF, ref.lo_port[at])
                                               and np.array_equal(hi & 0xFFFF, ref.hi_port[at])
                                               and np.array_equal(proto, ref.proto[at])):
                raise AirlinkError(f"{self.path}: its connections are not those of the flows given "
                                   f"(was the capture written to since it was analysed?)")
            return
        self.v6 += v6
        lo, hi, proto = keys
        lo_name = address_names(lo >> 16, self.v6).tolist()
        hi_name = address_names(hi >> 16, self.v6).tolist()
        new = {k: np.empty(len(lo), a.dtype) for k, a in self.per.items()}
        for i, (ln, lp, hn, hp, pr) in enumerate(zip(lo_name, (lo & 0xFFFF).tolist(), hi_name,
                                                      (hi & 0xFFFF).tolist(), proto.tolist())):
            f = self.flow_of_key.get((ln, lp, hn, hp, pr))
            new["fwd_hi"][i] = f is None
            f = self.flow_of_key.get((hn, hp, ln, lp, pr)) if f is None else f
            if f is None:
                raise AirlinkError(f"{self.path}: connection {ln}:{lp} <-> {hn}:{hp} (protocol {pr}) "
                                   f"is not in the flows table given")
            new["flow"][i], new["lo"][i], new["hi"][i] = f, self.code_of[ln], self.code_of[hn]
        for k in self.per:
            self.per[k] = np.concatenate([self.per[k], new[k]])

    def label(self, d: dict, pflow, swap) -> dict:
        """The batch's packet columns with ``flow``, ``direction``, ``src`` and ``dst``
        (``swap``: the sender is the connection key's high endpoint), in a new dict: ``d``
        and its arrays are left as they are."""
        m = len(d["ts_ns"])
        out = {c: v for c, v in d.items() if isinstance(v, np.ndarray) and len(v) == m and c != "keep"}
        out["flow"] = self.per["flow"][pflow]
        out["direction"] = (swap != self.per["fwd_hi"][pflow]).astype(np.int8)
        lo, hi = self.per["lo"][pflow], self.per["hi"][pflow]
        out["src"], out["dst"] = np.where(swap, hi, lo), np.where(swap, lo, hi)
        return out


def _packet_columns(path, *, flows, max_lateness_ns, salvage, info, batch_bytes=None, feed=None,
                    stop=None):
    """(decoded columns with ``flow`` and ``direction``, address names that ``src``/``dst``
    index) of the capture's IP packets in stable time order, a batch at a time (the
    generator behind :func:`iter_packets` and :func:`iter_packet_tables`). ``feed`` (a
    :class:`._feed.BatchFeed` or None): the batches come from another pass over the capture
    instead of a read of its own (``stop``: a ``threading.Event`` that ends the wait)."""
    path = Path(path)
    labels = _PacketLabels(path, flows)
    if feed is None:
        if max_lateness_ns is None:
            max_lateness_ns, top = 0, None
            for b in CaptureReader(path, salvage=salvage, reuse_buffer=True):
                late, top = lateness(b.ts_ns, top)
                max_lateness_ns = max(max_lateness_ns, late)
        reader = CaptureReader(path, salvage=salvage, reuse_buffer=True,
                               **({} if batch_bytes is None else {"chunk": int(batch_bytes)}))
        end = {"reader": reader, "unknown": set()}
        items = numbered_batches(reader, Connections(), end["unknown"])
    else:
        if max_lateness_ns is None:
            raise ValueError("a fed packets pass needs max_lateness_ns")
        items = feed.batches(stop)

    n_ip = 0

    def labelled():
        """Each batch's IP packets with flow and direction, in file order."""
        nonlocal n_ip
        for d, pfl, swap, keys, v6 in items:
            if keys is not None:
                labels.extend(keys, v6)
            n_ip += len(pfl)
            yield labels.label(d, pfl, swap)
    try:
        for out in in_time_order(labelled(), max_lateness_ns, owned=feed is None):
            yield out, labels.names
    finally:
        if feed is not None:
            feed.abandon()
    if feed is not None:
        end = feed.end
    reader, unknown = end["reader"], end["unknown"]
    check_linktypes(path, reader, unknown, n_ip, salvage)
    if info is not None:
        info.update({"source": str(path), "reader": NAME, "format": reader.format,
                     "records": int(reader.packets), "ip_packets": int(n_ip),
                     "linktypes": sorted(int(t) for t in reader.linktypes),
                     "unknown_linktypes": sorted(unknown)})
        if reader.problem:
            info["problem"] = reader.problem
