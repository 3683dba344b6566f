"""What the TCP analysis reads from a capture: narrow per-packet columns (no packets frame),
the census of its flows when it is too big to analyse at once, and the gatherer of flow groups.

``analyze_tcp(path)`` does not need addresses, ports, protocol, captured lengths or
interface numbers per packet: they are properties of the flow (or unused). This reader
decodes the capture batch by batch (the same decoder as :func:`read_pcap`) and keeps, per
packet, only ``ts_ns`` (int64), a provisional flow id (int32), the endpoint order bit,
``ip_len``/``seq``/``ack``/``payload``/``tsval``/``tsecr`` (uint32), ``flags``/``ecn``/
``sack_blocks`` (uint8), ``window`` (uint16) and ``has_ts``/``dsack`` (bool): 44 bytes per
packet instead of the frame's ~60, with no pandas objects. Values only some rows carry are kept for
those rows: MSS, window scale and SYN option bits for SYNs, the left edge for DSACKs.

Connections are numbered as they are met (:class:`._connections.Connections`: one hash
table of exact keys kept across the batches, in C when the extension is built). Flow numbers and
directions are then fixed exactly as :func:`airlink.collectors.pcap.assign_flows` fixes
them (order of first appearance in time order; ``fwd`` = side of the first pure SYN, else
of the first packet), so the analysis gives the same numbers as ``analyze_tcp(read_pcap(path))``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._capture import CaptureReader, file_size, progress_bar
from ._connections import Connections, decode_connections
from ._decode import SYN, check_linktypes, ecn_counts
from ._timeorder import lateness

KEPT = {"ts_ns": None, "ip_len": np.uint32, "seq": np.uint32, "ack": np.uint32,
        "flags": np.uint8, "window": np.uint16, "payload": np.uint32, "tsval": np.uint32,
        "tsecr": np.uint32, "has_ts": bool, "dsack": bool, "sack_blocks": np.uint8, "ecn": np.uint8}
SYN_KEPT = {"mss": np.uint16, "wscale": np.int8, "synopt": np.uint8}
SPARSE_DTYPES = {"syn_index": np.int64, "dsack_index": np.int64, "dsack_left": np.uint32, **SYN_KEPT}


class _ColumnStore:
    """Columns filled batch after batch into arrays reserved once (no per-batch pieces to
    concatenate: the peak is the columns themselves, not twice them); grows by doubling
    when the reservation was short (compressed files) or missing."""

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

    def append(self, values: dict, rows=None, picked=None) -> None:
        """``values`` (``values[k][rows]`` when ``rows`` is given: gathered straight into
        the reserve, no copy in between) and ``picked`` (arrays already of the new rows'
        length) after the columns' rows."""
        m = len(values["swap"] if rows is None else rows)
        if self.size + m > self.capacity:
            self.reserve(max(2 * self.capacity, self.size + m))
        for k, v in values.items():
            if rows is None:
                self.arrays[k][self.size:self.size + m] = v
            else:
                np.take(v, rows, out=self.arrays[k][self.size:self.size + m], mode="clip")
        for k, v in (picked or {}).items():
            self.arrays[k][self.size:self.size + m] = v
        self.size += m

    def columns(self) -> dict:
        return {k: a[:self.size] for k, a in self.arrays.items()}


_NONE = np.iinfo(np.int64).max


class _Census:
    """What analysing a capture a group of flows at a time needs (see :func:`read_columns`,
    ``census=True``), added batch after batch: per provisional flow its packet count, last
    time, first packet and first pure SYN; per flow and side (endpoint-order bit) what
    :func:`._tcpstream.first_pass` reads from a flow's first packets of each kind; every
    packet's time in a temporary file; the lateness of the records. "First" and "last"
    are in stable time order: least / greatest (time, IP-packet index in the file)."""

    # name: (per side, last rather than first)
    TRACKED = {"first": (False, False), "last": (False, True), "syn": (False, False),
               "side_first": (True, False),
               "side_syn": (True, False), "side_ack": (True, False), "side_ws": (True, True),
               "side_mss": (True, True)}

    def __init__(self, spill_folder=None):
        import tempfile
        self.nflows = 0
        self.cap = 0                      # flows the arrays hold (grown by doubling)
        self.counts = np.zeros(0, np.int64)
        self.pk = np.zeros(0, np.int64)
        self.by = np.zeros(0, np.float64)
        self.ecn = np.zeros(0, np.int64)  # packets per flow * 4 + ECN codepoint
        # name -> [time, index, value] of the row kept per flow (or flow * 2 + side)
        self.kept = {k: [np.zeros(0, np.int64) for _ in range(3)] for k in self.TRACKED}
        # every packet's time, on disk until needed
        self.ts_file = tempfile.TemporaryFile(dir=spill_folder)
        self.late, self.top = 0, None

    def _grow(self, nflows: int) -> None:
        """Room for ``nflows`` flows; capacity doubles, so a capture of millions of flows
        does not copy every array at every batch."""
        self.nflows = nflows
        if nflows <= self.cap:
            return
        cap = max(nflows, 2 * self.cap, 64)

        def grown(a, per_side, fill):
            out = np.full(cap * (2 if per_side else 1), fill, a.dtype)
            out[:len(a)] = a
            return out
        self.counts = grown(self.counts, False, 0)
        self.pk = grown(self.pk, True, 0)
        self.by = grown(self.by, True, 0)
        ecn = np.zeros(4 * cap, np.int64)
        ecn[:len(self.ecn)] = self.ecn
        self.ecn = ecn
        for name, (per_side, last) in self.TRACKED.items():
            none = -1 if last else _NONE
            kt, ki, kv = self.kept[name]
            self.kept[name] = [grown(kt, per_side, none), grown(ki, per_side, none), grown(kv, per_side, -1)]
        self.cap = cap

    def add(self, pfl, ts, swap, d: dict, ipidx0: int, nflows: int) -> None:
        """Packets ``ipidx0``.. of the file (in file order; ``d``: their ``flags``, ``seq``,
        ``ip_len``, ``wscale``, ``mss``), of ``nflows`` flows so far."""
        from ._capture import _records
        self._grow(nflows)
        if _records is not None:               # one pass in C (collectors/_census.c)
            _records.census_add(*(np.ascontiguousarray(a, dt) for a, dt in (
                (pfl, np.int32), (swap, bool), (ts, np.int64), (d["flags"], np.uint8), (d["seq"], np.uint32),
                (d["ip_len"], np.uint32), (d["wscale"], np.int8), (d["mss"], np.uint16))),
                int(ipidx0), self.counts, self.pk, self.by,
                tuple(a for name in self.TRACKED for a in self.kept[name]))
        else:
            self._add_numpy(pfl, ts, swap, d, ipidx0)
        self.ecn[:4 * nflows] += ecn_counts(pfl, d["ecn"], nflows).ravel()
        lt, self.top = lateness(ts, self.top)
        self.late = max(self.late, lt)
        ts.astype(np.int64, copy=False).tofile(self.ts_file)

    def _add_numpy(self, pfl, ts, swap, d: dict, ipidx0: int) -> None:
        """The counts and trackers of :meth:`add` with numpy (the C census_add's twin)."""
        np.add.at(self.counts, pfl, 1)
        side = pfl.astype(np.int64) * 2 + swap
        np.add.at(self.pk, side, 1)
        np.add.at(self.by, side, d["ip_len"].astype(np.float64))
        flags = d["flags"]
        n = len(ts)
        # stable time order inside the batch (most batches are in time order already)
        o = np.arange(n) if n < 2 or (ts[1:] >= ts[:-1]).all() else np.argsort(ts, kind="stable")
        syn_o = o[(flags[o] & 0x02) != 0]
        for name, keys, rows, values in (
                ("first", pfl, o, swap), ("last", pfl, o, swap), ("syn", pfl, o[(flags[o] & 0x12) == 0x02], swap),
                ("side_first", side, o, d["seq"]), ("side_syn", side, syn_o, d["seq"]),
                ("side_ack", side, o[(flags[o] & 0x12) == 0x10], ts),
                ("side_ws", side, syn_o[d["wscale"][syn_o] >= 0], d["wscale"]),
                ("side_mss", side, syn_o[d["mss"][syn_o] > 0], d["mss"])):
            self._keep(name, keys, rows, ts, ipidx0, values)

    def _keep(self, name: str, keys, rows, ts, ipidx0: int, values) -> None:
        """Keep each key's first (or last) of ``rows`` (batch rows in stable time order)
        when it precedes (follows) the one kept."""
        if not len(rows):
            return
        last = self.TRACKED[name][1]
        if last:
            rows = rows[::-1]
        u, fi = np.unique(keys[rows], return_index=True)
        r = rows[fi]
        ct, ci = ts[r], r + ipidx0
        kt, ki, kv = self.kept[name]
        better = ((ct > kt[u]) | ((ct == kt[u]) & (ci > ki[u]))) if last else \
            ((ct < kt[u]) | ((ct == kt[u]) & (ci < ki[u])))
        ub = u[better]
        kt[ub], ki[ub], kv[ub] = ct[better], ci[better], values[r[better]]

    def result(self) -> dict:
        """The census (see :func:`read_columns`): per flow and per side arrays of exactly
        ``nflows`` / ``2 * nflows`` rows, the endpoint-order bits as int8 and the window
        scale and MSS as int8 / int32 (-1: none); each growing array is dropped as its part
        is copied out, so the census is held once, without its growth room."""
        nf, ns = self.nflows, 2 * self.nflows
        kept, self.kept = self.kept, None
        for name in ("last", "syn", "side_first", "side_syn", "side_ack", "side_ws", "side_mss"):
            kept[name][1] = None               # indices only ordered the rows kept
        for name in ("side_first", "side_syn", "side_ack", "side_ws", "side_mss"):
            kept[name][0] = None
        kept["last"][2] = None

        def out(arrays, i, n, dtype=np.int64):
            a = arrays[i][:n].astype(dtype)
            arrays[i] = None
            return a
        grown = [self.counts, self.pk, self.by, self.ecn]
        self.counts = self.pk = self.by = self.ecn = None
        res = {"flow_packets": out(grown, 0, nf), "side_packets": out(grown, 1, ns),
               "side_bytes": out(grown, 2, ns, np.float64), "flow_ecn": out(grown, 3, 4 * nf).reshape(nf, 4),
               "flow_first_ts": out(kept["first"], 0, nf), "flow_first_index": out(kept["first"], 1, nf),
               "flow_first_swap": out(kept["first"], 2, nf, np.int8), "flow_syn_swap": out(kept["syn"], 2, nf, np.int8),
               "flow_syn_ts": out(kept["syn"], 0, nf), "flow_last_ts": out(kept["last"], 0, nf),
               "ts_file": self.ts_file, "lateness_ns": self.late}
        for name, dtype in (("side_first", np.int64), ("side_syn", np.int64), ("side_ack", np.int64),
                            ("side_ws", np.int8), ("side_mss", np.int32)):
            res[name] = out(kept[name], 2, ns, dtype)          # -1: no such row
        return res


def records_in_file(batch, file_bytes: int) -> float:
    """Records a capture of ``file_bytes`` bytes holds, estimated from the bytes per record
    (16-byte header + captured bytes) of one of its batches: file bytes / bytes per record.
    An underestimate for a compressed file (``file_bytes`` is its compressed size)."""
    if not len(batch.data_off):
        return 0.0
    span = int(batch.data_off[-1] + batch.caplen[-1] - batch.data_off[0]) + 16
    return file_bytes / max(span / len(batch.data_off), 16.0)


# With a limit, a capture estimated (from its first batch) to hold more than this many times
# the limit's records is read as a census from its first packet: gathering columns up to the
# limit only to turn them into the start of a census costs a third of the census pass.
CENSUS_AT_ONCE = 1.5


class PacketColumns:
    """The narrow columns of :func:`read_columns` (``keep``: bool per provisional flow id,
    or None for every packet), filled batch after batch from :func:`decode_connections`;
    ``size``: the packets to come when known (a flow group's, from the census), reserved
    exactly."""

    def __init__(self, keep=None, size: int = 0):
        dense = {**{k: (np.int64 if dt is None else dt) for k, dt in KEPT.items()},
                 "pflow": np.int32, "swap": bool}
        self.keep = None if keep is None else np.asarray(keep, bool)
        if self.keep is not None:
            self.compact = np.cumsum(self.keep) - 1
            dense["ipidx"] = np.int64
        self.store = _ColumnStore(dense)
        self.store.reserve(size)
        self.sparse = {k: [] for k in SPARSE_DTYPES}

    @property
    def size(self) -> int:
        return self.store.size

    def reserve_for(self, batch, file_bytes: int) -> None:
        """Reserve, at the first batch, the records the file holds (:func:`records_in_file`,
        +15 %; pages of the unused tail are never touched, so cost no memory)."""
        if self.store.capacity == 0 and len(batch.data_off):
            self.store.reserve(int(records_in_file(batch, file_bytes) * 1.15) + len(batch.data_off) + 1024)

    def add(self, d: dict, pflow, swap, ipidx0: int) -> None:
        """A decoded batch of IP packets ``ipidx0``.. of the file, with their provisional
        connection numbers and endpoint-order bits (``d`` is emptied when every packet is
        kept, unchanged with ``keep``)."""
        keep, rows, picked = self.keep, None, {}
        if keep is not None:
            m = len(d["ts_ns"])
            sel = np.flatnonzero(keep[pflow]) if len(keep) else np.zeros(0, np.int64)
            if len(sel) < m:                  # the kept packets, gathered into the store
                rows = sel
                pflow = pflow[sel]
            picked = {"pflow": self.compact[pflow].astype(np.int32), "ipidx": sel + ipidx0}
            values = {"swap": swap, **{k: d[k] for k in KEPT}}
            sparse_of = {k: d[k] for k in (*SYN_KEPT, "dsack_left")}
        else:
            values = {"pflow": pflow, "swap": swap, **{k: d.pop(k) for k in KEPT}}
            sparse_of = {k: d.pop(k) for k in (*SYN_KEPT, "dsack_left")}
        base, sparse = self.store.size, self.sparse
        self.store.append(values, rows, picked)
        del values, picked
        n = self.store.size - base
        new = {k: self.store.arrays[k][base:base + n] for k in ("flags", "dsack")}
        si = np.flatnonzero((new["flags"] & SYN) != 0)
        di = np.flatnonzero(new["dsack"])
        sparse["syn_index"].append(si + base)
        sparse["dsack_index"].append(di + base)
        if rows is not None:                  # batch rows of the new rows
            si, di = rows[si], rows[di]
        for k in SYN_KEPT:
            sparse[k].append(sparse_of[k][si].astype(SYN_KEPT[k], copy=False))
        sparse["dsack_left"].append(sparse_of["dsack_left"][di])

    def dense(self) -> dict:
        """The columns so far with ``wscale`` and ``mss`` at every row (-1 / 0 off SYNs)."""
        out = self.store.columns()
        idx = self.sparse["syn_index"]
        for k, fill in (("wscale", -1), ("mss", 0)):
            out[k] = np.full(self.store.size, fill, SYN_KEPT[k])
            if idx:
                out[k][np.concatenate(idx)] = np.concatenate(self.sparse[k])
        return out

    def result(self, conns: Connections) -> dict:
        """The columns (see :func:`read_columns`) and the flows' keys (``conns``: what
        :func:`decode_connections` numbered them with)."""
        cols = self.store.columns()
        for k, lst in self.sparse.items():
            dt = SPARSE_DTYPES[k]
            cols[k] = np.concatenate(lst) if len(lst) > 1 else (lst[0] if lst else np.zeros(0, dt))
        lo, hi, proto = conns.keys()
        if self.keep is not None:
            cols["kept_ids"] = kept = np.flatnonzero(self.keep[:len(lo)])
            lo, hi, proto = lo[kept], hi[kept], proto[kept]
        cols["flow_lo"], cols["flow_hi"], cols["flow_proto"] = lo, hi, proto
        cols["v6_addresses"] = conns.v6_addresses()
        return cols


class GroupGatherer:
    """The packets of groups of short flows (``groups``: group -> provisional flow ids),
    gathered in ONE pass over the capture (the ``others`` of
    :func:`._tcpstream.iter_flows_rows`), each group handed to ``done(group, columns)`` (the
    columns as :func:`read_columns` with ``keep`` gives them) as soon as the pass is past
    its flows: once the latest time read exceeds the group's last packet time (``ends``,
    ns) + the capture's ``lateness_ns``, no packet of them can come any more. Groups of
    flows that end in turn thus hold memory in turn. When the groups being gathered hold
    more than ``budget`` packets, the one that ends last is dropped and left for a pass of
    its own (:attr:`deferred`, as is a group bigger than the budget from the start)."""

    def __init__(self, groups: dict, ends: dict, sizes: dict, nflows: int, lateness_ns: int,
                 budget: int, done):
        self.groups, self.ends, self.sizes, self.done = groups, ends, sizes, done
        self.late, self.budget = int(lateness_ns), int(budget)
        self.group_of = np.full(nflows, -1, np.int64)
        for i, g in groups.items():
            self.group_of[np.asarray(g, np.int64)] = i
        self.nflows = nflows
        self.deferred = {i for i in groups if sizes[i] > budget}
        self.open: dict = {}                      # group -> its PacketColumns
        self.finished: set = set()
        self.top = None
        self.conns = None

    def start(self, conns: Connections) -> None:
        """The pass begins; ``conns`` numbers its connections."""
        self.conns = conns

    def add(self, d: dict, pflow, swap, ipidx0: int) -> None:
        """A decoded batch of IP packets ``ipidx0``.. of the file (``d`` is not changed)."""
        if not len(pflow):
            return
        if int(pflow.max()) >= self.nflows:
            from airlink.core.errors import AirlinkError
            raise AirlinkError(f"flows the census did not see came at IP packet {ipidx0}.. (the capture "
                               f"changed since its census - still being written?)")
        gid = self.group_of[pflow]
        # the batch's groups (group numbers are small: counted, not sorted)
        for i in np.flatnonzero(np.bincount(gid[gid >= 0], minlength=1)).tolist():
            if i in self.deferred:
                continue
            if i in self.finished:            # the lateness bound says this cannot be
                from airlink.core.errors import AirlinkError
                raise AirlinkError(f"a packet of a flow group already analysed came at IP packet "
                                   f"{ipidx0}.. (the capture changed since its census?)")
            cols = self.open.get(i)
            if cols is None:
                cols = self.open[i] = PacketColumns(self.keep_of(i), self.sizes[i])
            cols.add(d, pflow, swap, ipidx0)
        latest = int(d["ts_ns"].max())
        self.top = latest if self.top is None else max(self.top, latest)
        for i in [i for i in self.open if self.ends[i] + self.late < self.top]:
            self._close(i)
        while self.open and sum(c.size for c in self.open.values()) > self.budget:
            last = max(self.open, key=lambda i: (self.ends[i], i))
            del self.open[last]                   # read again, alone, after this pass
            self.deferred.add(last)

    def keep_of(self, i) -> np.ndarray:
        """Group ``i``'s flows as the ``keep`` mask of :func:`read_columns` (bool per flow)."""
        keep = np.zeros(self.nflows, bool)
        keep[np.asarray(self.groups[i], np.int64)] = True
        return keep

    def finish(self) -> None:
        """The pass is over: every group still open is complete."""
        for i in sorted(self.open):
            self._close(i)
        self.conns = None

    def _close(self, i) -> None:
        cols = self.open.pop(i)
        raw = cols.result(self.conns)
        del cols
        self.finished.add(i)
        self.done(i, raw)


def read_columns(path, *, salvage: bool = False, progress: bool = True, keep=None,
                 census: bool = False, limit: int | None = None, size: int = 0,
                 spill_folder=None) -> dict:
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
    ``flow_first_swap`` (that packet's endpoint-order bit) and ``flow_syn_swap`` (the bit
    of the flow's first pure SYN in that order, -1 without one), the flows' ``flow_lo``/
    ``flow_hi``/``flow_proto`` and ``v6_addresses``, plus ``ts_file`` (a temporary file of every IP packet's time, int64, file order) and
    ``lateness_ns``; ``keep`` (bool
    per provisional flow id) keeps only the packets of those flows, numbers the kept flows
    0.. in id order (``flow_lo``/... hold only them; ``kept_ids``: their provisional ids)
    and adds ``ipidx`` (int64: each kept packet's index among the file's IP packets);
    ``size``: how many packets ``keep`` selects, when known (from a census): reserved at once.
    ``limit``: as soon as the capture turns out to hold more IP packets, the packets read
    are turned into the start of a census and the rest of the file is read as with
    ``census=True`` (the result then has ``census``: True): no second pass for it; a capture
    whose first batch says it holds more than :data:`CENSUS_AT_ONCE` times the limit
    (:func:`records_in_file`) is read as a census from its first packet. ``spill_folder``:
    where ``ts_file`` is made (the system's temporary folder when None).
    """
    path = Path(path)
    bar, update = progress_bar(path, progress)
    reader = CaptureReader(path, salvage=salvage, progress=update, reuse_buffer=True)
    conns = Connections()
    unknown: set = set()
    file_bytes = file_size(path)
    columns = None if census else PacketColumns(keep, size)
    n_ip = 0
    tally = _Census(spill_folder) if census else None
    try:
        for batch in reader:
            if columns is not None and keep is None and columns.size == 0:
                if limit is not None and records_in_file(batch, file_bytes) > CENSUS_AT_ONCE * limit:
                    tally, columns = _Census(spill_folder), None
                else:
                    columns.reserve_for(batch, file_bytes)
            d, pflow, swap = decode_connections(batch, conns, unknown, tunnel_ids=False)
            del batch
            m = len(d["ts_ns"])
            if m == 0:
                continue
            ipidx0, n_ip = n_ip, n_ip + m
            if limit is not None and n_ip > limit and tally is None:
                # more packets than the limit: what was read becomes the start of a census
                tally = _Census(spill_folder)
                if columns.size:
                    done = columns.dense()
                    step = 1 << 16                  # in batch-sized parts (sorted alone, if at all)
                    for a in range(0, columns.size, step):
                        part = {k: v[a:a + step] for k, v in done.items()}
                        tally.add(part.pop("pflow"), part.pop("ts_ns"), part.pop("swap"), part, a,
                                  len(conns))
                    del done, part
                columns = None
            if tally is not None:
                tally.add(pflow, d["ts_ns"], swap, d, ipidx0, len(conns))
            else:
                columns.add(d, pflow, swap, ipidx0)
            del pflow, swap, d
    finally:
        if bar is not None:
            bar.close()
    check_linktypes(path, reader, unknown, n_ip if (tally is not None or keep is not None) else columns.size,
                    salvage)
    if tally is not None:
        lo, hi, proto = conns.keys()
        return {**tally.result(), "census": True, "flow_lo": lo, "flow_hi": hi, "flow_proto": proto,
                "v6_addresses": conns.v6_addresses(), "ip_packets": n_ip, "flows": len(lo),
                "source": str(path), "problem": reader.problem, "records": int(reader.packets),
                "dropped": reader.dropped}
    cols = columns.result(conns)
    cols["source"] = str(path)
    cols["problem"] = reader.problem
    cols["records"] = int(reader.packets)
    cols["dropped"] = reader.dropped
    return cols
