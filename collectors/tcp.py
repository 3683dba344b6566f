"""Per-flow TCP analysis of a capture or a ``packets`` frame: flows, events and time series.

The rows go through the TCP engine (:mod:`._tcpstream`: the rules below, once; whole-array
numpy operations over a chunk's rows of many flows, no per-packet Python loop): a capture
or flow group that fits as one chunk, a flow longer than ``max_packets`` in time chunks.
Sequence and ACK numbers are made relative to each direction's initial sequence number
(its SYN, else its first packet) and unwrapped past 2**32, so transfers of any size work.

Definitions (per data direction ``d``; ``r`` is the reverse direction that ACKs it)

* ``snd_max``: highest sequence number + length sent by ``d`` so far **as seen at the
  capture point**. A data, SYN or FIN segment starting below the ``snd_max`` before it is a
  *retransmission* (keep-alives, 0/1-byte segments at ``snd_max - 1``, excluded) - unless
  it carries bytes the capture point had not seen (a range ``d`` skipped, not filled
  since), arrives within the handshake RTT (3 ms when the handshake was not captured) of
  the last segment before it that advanced ``snd_max``, does not end exactly at
  ``snd_max`` and is not asked for by >= 2 duplicate ACKs: then it is *out of order*
  (reordered on the way to the capture point; tshark's timing rule, for bytes not seen).
* ``ack_max``: highest cumulative ACK sent by ``r``. *In flight* = ``snd_max - ack_max``
  (bytes; packets = bytes / MSS).
* *Duplicate ACK* (as tshark's ``tcp.analysis.duplicate_ack``): a segment of ``r`` without
  payload nor SYN/FIN/RST, at ``r``'s next sequence number (not a keep-alive), whose ACK and
  non-zero window equal those of the previous segment of ``r``, and that does not answer a
  keep-alive of ``d``.
* *Fast retransmit*: a retransmission at ``ack_max`` sent after at least 2 duplicate ACKs
  since the last advance of ``ack_max`` (RFC 5681 section 3.2) or after one ACK since
  (and including) that advance with a SACK block above it (not a DSACK: SACK loss
  detection, Linux's RACK), or inside the recovery episode such a retransmission opened
  (until ``ack_max`` reaches the ``snd_max`` of its start, RFC 6582's full ACK). The
  timer's retransmissions open a timeout episode the same way, inside which nothing is
  fast (RFC 6582 section 4; Linux's Loss state) unless an ACK shows it spurious, as Linux
  undoes: the first ACK advancing after it echoes an older TSval (Eifel), or it or F-RTO's
  second advancing ACK covers data sent once that was not SACKed before (RFC 5682 section
  3.1): the first one at ``ack_max`` that nothing asked for, and
  one resending the first byte of an earlier one with no segment of ``r`` in between
  (which also ends a fast episode). Every other retransmission is a *timeout*
  retransmission (:func:`._tcparrays.recovery_episodes`).
* *Spurious* retransmission: (a) its data had already been cumulatively ACKed when it was
  sent (tshark's notion), (b) Eifel (RFC 3522): the first ACK covering it echoes a TSval
  older than the retransmission's, or (c) DSACK (RFC 2883): ``r`` later reports its first
  byte as duplicate.
* RTT samples of direction ``d`` (the round trip from the capture point to ``d``'s receiver
  and back): (1) sequence/ACK matching with Karn's rule: an ACK that advances ``ack_max``
  exactly to the end of a data or SYN segment sent once gives ``t_ack - t_segment``, unless ``d``
  retransmitted anything in between; (2) timestamps (RFC 7323): the first segment of ``r``
  echoing ``TSecr = v`` gives its time minus the time of the first segment of ``d`` (data,
  pure ACK or SYN) with ``TSval = v``. Per flow: each direction's median/min/count, the
  direction carrying more payload (``data_direction``) and the headline RTT the data
  sender sees, median(data direction) + median(other direction) (:func:`_rtt_columns`).
* Goodput: bytes newly cumulatively ACKed per second (``ack_max`` advance x 8 / bin);
  throughput: all payload bytes sent by ``d`` (retransmissions included) x 8 / bin.
* Receiver window: ``r``'s window field shifted by ``r``'s window scale (when both SYNs
  offered scaling; never on SYNs). Loss-rate estimate: non-spurious retransmitted bytes /
  payload bytes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from airlink.core.bounds import RESOLUTION
from airlink.core.errors import AirlinkError, frame_source
from airlink.core.units import parse_duration

from ._columns import Coded, Columns
from ._decode import ecn_counts
from ._tcparrays import SYN
from ._tcpframes import EVENTS, TcpAnalysis, _flows_frame, time_ns


#: The order of the series and events frames' rows (stable: rows of equal keys keep the
#: engine's order).
SERIES_ORDER, EVENTS_ORDER = ["time", "flow", "direction"], ["time", "flow"]
_RANK_CHUNK = 1 << 20        # packet times read back at a time to rank events' packets (flow groups)
# A flow of more packets than max_packets is analysed in time chunks of at most this many
# packets (collectors/_tcpstream.py), with the state that crosses chunks carried.
STREAM_LONG_FLOWS = True
STREAM_CHUNK_ROWS = 1 << 20
# A capture or flow group of more TCP rows is fed to the engine in time slices of about
# this many rows (memory: the slice's per-row intermediates, ~70 bytes a row).
ENGINE_CHUNK_ROWS = 1 << 18
# Flow groups are filled to max_packets / GROUP_SHARE packets: a group whose flows start
# before the previous group's last flow ends is then gathered beside it within the limit,
# instead of being dropped and read again in a pass of its own (GroupGatherer's budget).
GROUP_SHARE = 2
# ... and to at most this many flows: a group's per-flow state (the engine's, its flows
# and series rows) then stays bounded on a capture of very many short flows too.
GROUP_FLOWS = 1 << 15


def _capture_attrs(records: int, problem, dropped) -> dict:
    """The capture's own attrs of an analysis: ``records`` read, ``problem`` (what
    ``salvage`` stopped at) when there is one, ``capture_dropped`` when the capture tool
    counted packets it dropped (:attr:`._capture.CaptureReader.dropped`; pcapng interface
    statistics)."""
    return {"records": int(records), **({"problem": problem} if problem else {}),
            **({} if dropped is None else {"capture_dropped": int(dropped)})}


def _return_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``; nothing
    elsewhere). Between flow groups: numpy arrays under glibc's mmap threshold (which
    rises to 32 MiB as big arrays are freed) come from the heap, and the pages of a group's
    freed arrays would otherwise stay resident beside the next group's."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes
            _MALLOC_TRIM = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


def _resolution_s(resolution) -> float:
    try:
        exact = parse_duration(resolution)
    except AirlinkError:
        raise AirlinkError(f"resolution {resolution!r}: expected a duration such as 100ms or 1s") from None
    if exact <= 0:
        raise AirlinkError(f"resolution must be positive, got {resolution!r}")
    return float(RESOLUTION.check(exact))


def analyze_tcp(packets_or_path, *, resolution="1s", salvage: bool = False,
                max_packets: int | None = None, flows_ready=None, feed_packets: bool = False,
                stream_frames: bool = False, spill_folder=None) -> TcpAnalysis:
    """Flows, TCP events and per-direction time series at ``resolution`` (e.g. ``"100ms"``).

    ``packets_or_path`` is a ``packets`` frame (from :func:`read_pcap`) or a capture path.
    See the module notes for every definition; numbers that depend on where the capture
    was taken (in flight, RTT, which losses are visible) are described in docs/collectors.md.

    ``max_packets`` (capture path only; None: no limit): analyse at most about this many
    packets at a time - after a census of the flows (the rest of the reading pass that
    found the capture too big), the flows are analysed in one more pass over the file:
    each TCP flow larger than the limit through time in chunks of at most
    min(max_packets, :data:`STREAM_CHUNK_ROWS`) packets with its state carried
    (``collectors/_tcpstream.py``), the others in groups of at most about half the limit, each
    group as soon as its flows are over (:class:`._tcpinput.GroupGatherer`; a group that
    cannot wait beside the others is read again alone), so memory follows the limit, not
    the capture. The result is the same as in one piece.

    ``flows_ready`` (capture path only; None: not used): called once as
    ``flows_ready(labels, max_lateness_ns)`` with the flows' identities by provisional
    connection number (:class:`._connections.FlowLabels`, which :func:`.pcap.iter_packets`
    takes as ``flows``; ``labels.keys()``: the flows table's flow, src, dst, sport, dport,
    proto) and ``TcpAnalysis.max_lateness_ns`` as soon as they are known - before the
    per-packet analysis: in one piece once the flows are numbered, in flow groups after
    the census pass, before the first group -, so a caller can run a second pass over the
    capture (:func:`.pcap.iter_packets`) in another thread while the analysis runs.
    ``feed_packets=True``: ``flows_ready`` gets a third argument, a :class:`._feed.BatchFeed`
    that the analysis' own next pass over the whole capture (that of the long flows and
    the groups) will fill with its decoded batches - for :func:`.pcap.iter_packet_tables`
    (``feed=``), which then reads nothing itself -, or None when the analysis makes no such
    pass.

    ``stream_frames=True`` (capture path; flow groups only): each group's flows, series and
    events go to a temporary file as the group is done, and ``output("flows")`` /
    ``output("series")`` / ``output("events")`` give them as a
    :class:`._sortedruns.SortedRuns` (``chunks()``: the frame in order, a bounded number of
    rows at a time) - for writers that take a frame in row groups, so memory does not grow
    with the capture. ``.flows``, ``.series`` and ``.events`` are the same frames either way.

    ``spill_folder`` (capture path): where the analysis' nameless temporary files (the
    census' packet times, the streamed frames' runs) are made; the system's temporary folder
    when None. A caller writing big outputs passes their folder: the temporary folder may be
    a tmpfs, i.e. memory. The files have no name and are gone when the analysis ends,
    however it ends.
    """
    res_s = _resolution_s(resolution)
    if isinstance(packets_or_path, (str, Path)):
        # no packets frame: the capture is decoded straight into the narrow columns used here
        from ._tcpinput import read_columns
        limit = None if max_packets is None else max(1, int(max_packets))
        raw = read_columns(packets_or_path, salvage=salvage, limit=limit, spill_folder=spill_folder)
        if raw.get("census"):                # more packets than max_packets: flows in groups
            census = raw
            del raw
            gnum = _census_numbers(census)
            if len(gnum) > GROUP_FLOWS:
                # the census' per-flow arrays, doubled as they grew, left their old copies'
                # pages in the heap: handed back before the groups (with few flows, the
                # pages are the batches', which the next pass would fault in again)
                _return_freed_memory()
            groups, streamed = _flow_groups(census, gnum, limit)
            feed = None
            if flows_ready is not None:      # before the groups: a second pass can run beside them
                labels = _census_labels(census, gnum)
                if feed_packets:
                    from ._feed import BatchFeed
                    # the analysis' one pass over the whole capture
                    feed = BatchFeed() if _one_pass_reads(census, groups, streamed, limit) else None
                    flows_ready(labels, int(census["lateness_ns"]), feed)
                else:
                    flows_ready(labels, int(census["lateness_ns"]))
                del labels
            try:
                return _analyze_grouped(packets_or_path, census, gnum, groups, streamed, res_s, salvage,
                                        limit, feed, stream_frames=stream_frames, spill_folder=spill_folder)
            finally:
                if feed is not None and feed.end is None:      # never fed: its reader must not wait
                    feed.close(error=RuntimeError("the analysis ended before its pass over the capture"))
        source = raw["source"]
        extra = _capture_attrs(raw["records"], raw["problem"], raw.get("dropped"))
        from ._timeorder import lateness
        late = lateness(raw["ts_ns"])[0]
        # flows_ready gets the flows' labels as soon as the flows table exists, before the
        # TCP rows are gathered
        c, flows, n_packets = _from_columns(raw, flows_ready=None if flows_ready is None else
                                            lambda labels: flows_ready(labels, late,
                                                                       *((None,) if feed_packets else ())))
        del raw
    else:
        if flows_ready is not None:
            raise AirlinkError("analyze_tcp: flows_ready is called for a capture path only, not a packets frame")
        from airlink.core.schema import validate      # (imports pandas: not before a capture is read)
        packets = packets_or_path
        validate(packets, "packets", name="packets")
        source = frame_source(packets, "")
        extra = _capture_attrs(packets.attrs.get("records", len(packets)), packets.attrs.get("problem"),
                               packets.attrs.get("capture_dropped"))
        c, flows, n_packets = _from_frame(packets)
        late = None
    a = _analyze(c, flows, n_packets, res_s, source)
    a.attrs.update(extra)     # records read (IP or not) and the salvage message, if any
    a.max_lateness_ns = late
    return a


def _col(df, name, dtype=None, default=0):
    if name in df.columns:
        a = df[name].to_numpy()
        return a.astype(dtype, copy=False) if dtype is not None else a
    return np.full(len(df), default, dtype or np.int64)


def _direction_codes(packets) -> np.ndarray:
    """0 for fwd, 1 for rev, from a categorical, string or integer ``direction`` column."""
    import pandas as pd
    if "direction" not in packets.columns:
        return np.zeros(len(packets), np.int64)
    col = packets["direction"]
    if isinstance(col.dtype, pd.CategoricalDtype) or col.dtype == object:
        return (col.astype(str).to_numpy() == "rev").astype(np.int64) \
            if not (isinstance(col.dtype, pd.CategoricalDtype) and list(col.cat.categories) == ["fwd", "rev"]) \
            else col.cat.codes.to_numpy().astype(np.int64)
    return col.to_numpy().astype(np.int64)


def _narrow_index(idx):
    """Row numbers as int32 when they fit (they are kept until the events are built)."""
    return idx.astype(np.int32) if len(idx) and idx.max() < 2**31 else idx


def _from_frame(packets):
    """Inputs of :func:`_analyze` from a ``packets`` frame: TCP rows in flow order."""
    t_all = time_ns(packets)
    flow_all = _col(packets, "flow", np.int64, 0)
    dir_all = _direction_codes(packets)
    ip_len = _col(packets, "ip_len_bytes", np.int64)
    proto = _col(packets, "proto", np.int64)
    flows = _flows_table(packets, t_all, flow_all, dir_all, ip_len)

    tcp = np.flatnonzero(proto == 6)
    ft = flow_all[tcp]
    # flow-major, time order inside (a capture of one flow, or flows one after the other,
    # is already in that order)
    order = tcp if (len(ft) < 2 or (ft[1:] >= ft[:-1]).all()) else tcp[np.argsort(ft, kind="stable")]
    del ft
    c = {"order": _narrow_index(order), "fl": flow_all[order].astype(np.int32),
         "dr": dir_all[order].astype(np.int8),
         "iplen": ip_len[order].astype(np.uint32)}
    del flow_all, dir_all, proto, ip_len, tcp
    c["t"] = t_all[order]

    def take(name, dtype, default=0):
        """Column ``name`` in flow order as ``dtype`` (``default`` when absent)."""
        if name not in packets.columns:
            return np.full(len(order), default, dtype)
        return packets[name].to_numpy()[order].astype(dtype, copy=False)

    for name, key, dt in (("seq", "seq", np.uint32), ("ack", "ackraw", np.uint32),
                          ("flags", "flags", np.uint8), ("payload_bytes", "pay", np.uint32),
                          ("window", "win", np.uint16), ("tsval", "tsval", np.uint32),
                          ("tsecr", "tsecr", np.uint32), ("dsack", "dsack", bool),
                          ("dsack_left", "dsack_left", np.uint32), ("sack_blocks", "sack", np.uint8)):
        c[key] = take(name, dt, False if dt is bool else 0)
    c["has_ts"] = take("has_ts", bool, False) if "has_ts" in packets.columns else (c["tsval"] != 0)
    syn_rows = np.flatnonzero((c["flags"] & SYN) != 0)
    c["syn_rows"] = syn_rows
    c["wscale_syn"] = take("wscale", np.int64, -1)[syn_rows] if "wscale" in packets.columns \
        else np.full(len(syn_rows), -1, np.int64)
    c["mss_syn"] = packets["mss_bytes"].to_numpy()[order[syn_rows]].astype(np.int64) \
        if "mss_bytes" in packets.columns else np.zeros(len(syn_rows), np.int64)
    c["so_syn"] = _col(packets, "syn_options", np.int64)[order[syn_rows]]
    return c, flows, len(packets)


def _in_order(a, perm):
    """``a`` in time order: ``a[perm]``, or ``a`` itself when ``perm`` is None (in order already)."""
    return a if perm is None else a[perm]


def _from_columns(raw: dict, flows_ready=None):
    """Inputs of :func:`_analyze` from :func:`._tcpinput.read_columns` (capture path):
    flow numbers and directions fixed as :func:`.pcap.assign_flows` does, the flows table,
    and the TCP rows in flow order, each column gathered once and freed. ``flows_ready``
    (or None) is called with the flows' :class:`._connections.FlowLabels` as soon as the
    flows table is built."""
    ts = raw["ts_ns"]
    n = len(ts)
    # time order (stable), as read_pcap sorts an out-of-order capture
    perm = None if n < 2 or (ts[1:] >= ts[:-1]).all() else np.argsort(ts, kind="stable")
    pf = _in_order(raw.pop("pflow"), perm)
    npf = len(raw["flow_lo"])
    first_p = _first_index(pf, npf)                 # first time-ordered row of each flow
    rank = np.empty(npf, np.int64)
    raw["flow_order"] = np.argsort(first_p, kind="stable")    # flow number -> provisional id
    rank[raw["flow_order"]] = np.arange(npf)
    fl_s = rank[pf].astype(np.int32)
    del pf
    nflow = npf
    first = np.empty(nflow, np.int64)
    first[rank] = first_p
    lo_ep = np.empty(nflow, np.int64)
    hi_ep = np.empty(nflow, np.int64)
    fproto = np.empty(nflow, np.int64)
    lo_ep[rank], hi_ep[rank], fproto[rank] = raw.pop("flow_lo"), raw.pop("flow_hi"), raw.pop("flow_proto")
    # direction: the first pure SYN of the flow defines fwd, else the first packet
    swap_s = _in_order(raw.pop("swap"), perm)
    flags_s = _in_order(raw["flags"], perm)
    fwd_swap = np.full(nflow, -1, np.int8)
    syn = np.flatnonzero(((flags_s & 0x12) == 0x02) & (fproto[fl_s] == 6))
    del flags_s
    if len(syn):
        f_syn, idx = np.unique(fl_s[syn], return_index=True)
        fwd_swap[f_syn] = swap_s[syn[idx]]
    nos = fwd_swap < 0
    fwd_swap[nos] = swap_s[first][nos]
    dir_s = (swap_s.astype(np.int8) != fwd_swap[fl_s]).astype(np.int8)
    del swap_s, syn
    # flows table over every packet (TCP or not)
    last = n - 1 - _first_index(fl_s[::-1], nflow)
    ts_first = ts[first if perm is None else perm[first]] if n else np.zeros(0, np.int64)
    ts_last = ts[last if perm is None else perm[last]] if n else np.zeros(0, np.int64)
    fd = fl_s.astype(np.int64)                        # (flow, direction) cell of each packet
    fd *= 2
    fd += dir_s
    pk = np.bincount(fd, minlength=2 * nflow).reshape(-1, 2).T
    by = np.bincount(fd, weights=_in_order(raw["ip_len"], perm), minlength=2 * nflow).reshape(-1, 2).T
    del fd
    ecn = ecn_counts(fl_s, _in_order(raw.pop("ecn"), perm), nflow)
    fwd_lo = fwd_swap == 0                            # fwd sender is the key's low endpoint
    from ._connections import flow_labels
    labels = flow_labels(rank, fwd_lo[rank], lo_ep[rank], hi_ep[rank], fproto[rank], raw.pop("v6_addresses"))
    keys = labels.keys()                              # src -> dst is fwd, in flow order
    flows = _flows_frame(nflow, src=keys["src"], dst=keys["dst"],
                         sport=keys["sport"], dport=keys["dport"], proto=fproto if nflow else [],
                         start=ts_first, endt=ts_last, pk=pk, by=by, ecn=ecn)
    del keys
    if flows_ready is not None:
        flows_ready(labels)
    del labels
    # TCP rows, flow-major and time order inside
    tcp = np.flatnonzero(fproto[fl_s] == 6)
    ft = fl_s[tcp]
    in_order = len(ft) < 2 or bool((ft[1:] >= ft[:-1]).all())
    order = tcp if in_order else tcp[np.argsort(ft, kind="stable")]
    # every row TCP, flows one after another, in time order: the columns as they are
    same = in_order and perm is None and len(tcp) == n
    del ft, tcp
    src_rows = order if perm is None else perm[order]
    c = {"fl": fl_s if same else fl_s[order], "dr": dir_s if same else dir_s[order]}
    del fl_s, dir_s
    # events name packets by their row in the time-sorted packets frame; reading a group of
    # flows, that is computed later from each packet's index among the file's IP packets
    if "ipidx" in raw:
        c["order"] = raw.pop("ipidx") if same else raw.pop("ipidx")[src_rows]
    else:
        c["order"] = _narrow_index(order)
    del perm, order
    for key, name in (("t", "ts_ns"), ("iplen", "ip_len"), ("seq", "seq"), ("ackraw", "ack"),
                      ("flags", "flags"), ("pay", "payload"), ("win", "window"), ("tsval", "tsval"),
                      ("tsecr", "tsecr"), ("has_ts", "has_ts"), ("dsack", "dsack"), ("sack", "sack_blocks")):
        c[key] = raw.pop(name) if same else raw.pop(name)[src_rows]
    # DSACK left edges are kept for DSACK rows only (zero pages elsewhere are never touched)
    c["dsack_left"] = np.zeros(len(src_rows), np.uint32)
    dk = np.flatnonzero(c["dsack"])
    c["dsack_left"][dk] = raw.pop("dsack_left")[np.searchsorted(raw["dsack_index"], src_rows[dk])]
    syn_rows = np.flatnonzero((c["flags"] & SYN) != 0)
    at = np.searchsorted(raw["syn_index"], src_rows[syn_rows])
    del src_rows
    c["syn_rows"] = syn_rows
    c["wscale_syn"] = raw.pop("wscale")[at].astype(np.int64)
    c["mss_syn"] = raw.pop("mss")[at].astype(np.int64)
    c["so_syn"] = raw.pop("synopt")[at].astype(np.int64)
    return c, flows, n


def _engine_rows(c: dict, nflow: int):
    """(firsts, rows): what :class:`._tcpstream.FlowStream` takes - the flows' firsts
    (:func:`._tcpstream.first_of_rows`) and the chunk's columns - from the TCP rows ``c``
    of :func:`_from_columns` or :func:`_from_frame` (emptied) of ``nflow`` flows."""
    from ._tcpstream import first_of_rows
    dr = c.pop("dr").astype(np.int8)
    first = first_of_rows(c["fl"], dr, c["t"], c["seq"], c["flags"], c["syn_rows"], c.pop("wscale_syn"),
                          c.pop("mss_syn"), nflow)
    rows = {"dr": dr, "synopt": c.pop("so_syn")}
    del c["syn_rows"]
    for key, name in (("t", "t"), ("fl", "fl"), ("flags", "flags"), ("payload", "pay"), ("seq", "seq"),
                      ("ack", "ackraw"), ("window", "win"), ("tsval", "tsval"), ("tsecr", "tsecr"),
                      ("has_ts", "has_ts"), ("dsack", "dsack"), ("dsack_left", "dsack_left"), ("sack_blocks", "sack"),
                      ("ip_len", "iplen"),
                      ("packet", "order")):
        rows[key] = c.pop(name)
    return first, rows


def _time_slices(rows: dict, size: int) -> list:
    """The engine's rows ``rows`` (:func:`_engine_rows`; emptied) as chunks of about
    ``size`` rows each: consecutive time slices (bounds at quantiles of a sample of the
    times; rows of equal time in one slice), each flow-major with time order inside as
    :meth:`._tcpstream.FlowStream.chunk` takes them. A column is split, then freed, one
    at a time: the chunks together hold what ``rows`` held."""
    t = rows["t"]
    k = -(-len(t) // size)
    sample = np.sort(t[::max(1, len(t) // (64 * k))])
    bounds = np.unique(sample[(np.arange(1, k) * len(sample)) // k])
    part = np.searchsorted(bounds, t, "right").astype(np.int16)
    idx = [np.flatnonzero(part == j) for j in range(len(bounds) + 1)]
    syn_part = part[np.flatnonzero((rows["flags"] & SYN) != 0)]
    del part
    chunks = [{} for _ in idx]
    synopt = rows.pop("synopt")
    for j, ch in enumerate(chunks):
        ch["synopt"] = synopt[syn_part == j]
    del synopt
    # a slice whose rows are consecutive (flows one after another) is a view, not a copy
    idx = [slice(int(ii[0]), int(ii[-1]) + 1) if len(ii) and ii[-1] - ii[0] + 1 == len(ii) else ii
           for ii in idx]
    for key in list(rows):
        col = rows.pop(key)
        for ch, ii in zip(chunks, idx):
            ch[key] = col[ii]
        del col
    return [ch for ch in chunks if len(ch["t"])]


def _analyze(c: dict, flows, n_packets: int, res_s: float, source: str) -> TcpAnalysis:
    """The analysis of the TCP rows ``c`` (:func:`_from_columns`, :func:`_from_frame`: flow
    order, time order inside) of the flows ``flows`` by the TCP engine
    (:class:`._tcpstream.FlowStream`) over all of them: one chunk, or time slices of
    :data:`ENGINE_CHUNK_ROWS` rows when more (the engine's per-row work then follows the
    slice, not the capture; the result is the same)."""
    from ._tcpstream import FlowStream
    first, rows = _engine_rows(c, len(flows))
    del c
    n = len(rows["t"])
    stream = FlowStream(first, int(round(res_s * 1e9)), source)
    chunks = _time_slices(rows, ENGINE_CHUNK_ROWS) if n > ENGINE_CHUNK_ROWS else [rows]
    del rows
    while chunks:
        stream.chunk(chunks.pop(0), last=not chunks)
    a = stream.finish(flows, source, res_s)
    # flow numbers absent from a filtered packets frame: no row
    flows = a.output("flows")
    seen = (flows["packets_fwd"] + flows["packets_rev"]) > 0
    if not seen.all():
        a._frames["flows"] = flows.take(seen)
    a.attrs = {"packets": int(n_packets), "tcp_packets": int(n)}
    return a


def _census_numbers(census: dict) -> np.ndarray:
    """The global flow number of each provisional flow of a census
    (:func:`._tcpinput.read_columns`), by the rule of :func:`_from_columns`: flows numbered
    in order of their first packet in stable time order."""
    gorder = np.lexsort((census["flow_first_index"], census["flow_first_ts"]))
    gnum = np.empty(len(gorder), np.int64)
    gnum[gorder] = np.arange(len(gorder))
    return gnum


def _census_labels(census: dict, gnum):
    """The flows' :class:`._connections.FlowLabels` from a census and its global flow
    numbers ``gnum``: ``src`` is the side of the flow's first pure SYN (TCP), else of its
    first packet, as :func:`_from_columns` decides."""
    from ._connections import flow_labels
    proto, syn_sw = census["flow_proto"], census["flow_syn_swap"]
    fwd_lo = np.where((proto == 6) & (syn_sw >= 0), syn_sw, census["flow_first_swap"]) == 0
    return flow_labels(gnum, fwd_lo, census["flow_lo"], census["flow_hi"], proto, census["v6_addresses"])


def _flow_groups(census: dict, gnum, max_packets: int):
    """(groups: int64 arrays of provisional flows, each of at most ``max_packets`` /
    :data:`GROUP_SHARE` packets and :data:`GROUP_FLOWS` flows, or a single flow; streamed: whether each group is one flow bigger than the limit, analysed
    through time in chunks) for :func:`_analyze_grouped`. A flow bigger than the limit is a
    group of its own; the others fill groups in the order they end (last packet time, then
    global number), so that one pass over the capture can analyse each group as soon as
    its flows are over (:class:`._tcpinput.GroupGatherer`)."""
    counts = census["flow_packets"]
    fill = max(1, max_packets // GROUP_SHARE)
    groups, cur, size = [], [], 0
    # each group an int64 array (a busy server's capture has a flow per 4 packets: lists of
    # Python ints would hold ~36 bytes a flow through the whole analysis)
    order = np.lexsort((gnum, census["flow_last_ts"]))
    for f, c in zip(order.tolist(), counts[order].tolist()):
        if c > max_packets:
            groups.append(np.array([f], np.int64))
            continue
        if cur and (size + c > fill or len(cur) >= GROUP_FLOWS):
            groups.append(np.array(cur, np.int64))
            cur, size = [], 0
        cur.append(f)
        size += c
    if cur:
        groups.append(np.array(cur, np.int64))
    streamed = [STREAM_LONG_FLOWS and len(g) == 1 and counts[g[0]] > max_packets for g in groups]
    return groups, streamed


def _one_pass_reads(census: dict, groups, streamed, max_packets: int) -> bool:
    """Whether :func:`_analyze_grouped` makes its pass over the whole capture (for long TCP
    flows, or groups that fit the limit) - the pass ``feed_packets`` hands on."""
    counts = census["flow_packets"]
    return any((st and census["flow_proto"][g[0]] == 6) or int(counts[g].sum()) <= max_packets
               for g, st in zip(groups, streamed))


def _analyze_grouped(path, census: dict, gnum, groups, streamed, res_s: float, salvage: bool,
                     max_packets: int, feed=None, *, stream_frames: bool = False,
                     spill_folder=None) -> TcpAnalysis:
    """:func:`analyze_tcp` of a capture path, a group of flows at a time (see there);
    ``gnum``: the global flow number of each provisional flow (:func:`_census_numbers`),
    ``groups``/``streamed``: :func:`_flow_groups`; ``feed``: handed the batches of the pass
    over the capture (:func:`_one_pass_reads`); ``stream_frames``: the series and events
    as :class:`._sortedruns.SortedRuns` (each group's frames on disk as it is done)."""
    from ._tcpinput import GroupGatherer, read_columns
    counts = census["flow_packets"]
    # ONE pass over the file: every TCP flow bigger than the limit through time in chunks
    # (memory follows the chunk), and the groups of smaller flows gathered as their flows
    # go by, each analysed once they are over; a group that does not fit beside the others
    # gets a pass of its own afterwards. The frames are sorted at the end, so the order in
    # which the groups are done does not matter.
    from ._sortedruns import JoinedRuns, SortedRuns
    from ._tcpstream import EventPieces
    runs = SortedRuns if stream_frames else JoinedRuns
    flows = runs(["flow"], folder=spill_folder)
    series = runs(SERIES_ORDER, folder=spill_folder)
    events = runs(EVENTS_ORDER, folder=spill_folder)
    tcp_packets = 0

    def keep_result(a, global_numbers):
        nonlocal tcp_packets
        for name, frames in zip(TcpAnalysis.FRAMES, (flows, series, events)):
            frame = a.output(name)
            # a long flow's events come in time-ordered pieces, each kept as it is made
            for part in (frame if isinstance(frame, EventPieces) else (frame,)):
                if len(part):
                    part["flow"] = global_numbers(part["flow"])
                frames.add(part)
        tcp_packets += a.attrs["tcp_packets"]

    def analyse_group(i, raw):
        local = gnum[raw["kept_ids"]]              # provisional id (compact) -> global number
        c, fl, n = _from_columns(raw)
        to_global = local[raw.pop("flow_order")]  # the group's flow numbers -> global ones
        del raw
        keep_result(_analyze(c, fl, n, res_s, str(path)), lambda f: to_global[f])
        _return_freed_memory()

    long_tcp = [i for i in range(len(groups)) if streamed[i] and census["flow_proto"][groups[i][0]] == 6]
    in_stream = set(long_tcp)
    others = {i: groups[i] for i in range(len(groups)) if i not in in_stream}
    gatherer = GroupGatherer(others, {i: int(census["flow_last_ts"][g].max()) for i, g in others.items()},
                             {i: int(counts[g].sum()) for i, g in others.items()}, len(counts),
                             int(census["lateness_ns"]), max_packets, analyse_group)
    if _one_pass_reads(census, groups, streamed, max_packets):
        from ._tcpstream import analyze_streamed_flows
        results = analyze_streamed_flows(path, [groups[i][0] for i in long_tcp], res_s=res_s, salvage=salvage,
                                         lateness_ns=int(census["lateness_ns"]),
                                         chunk_rows=min(max_packets, STREAM_CHUNK_ROWS), census=census,
                                         others=gatherer, feed=feed if feed is not None and feed.end is None else None,
                                         spill_folder=spill_folder)
        for i, a in zip(long_tcp, results):         # one flow's frames at a time, each kept as it comes
            keep_result(a, lambda f, n=gnum[groups[i][0]]: n)
            del a
        del results
    for i in sorted(gatherer.deferred):
        analyse_group(i, read_columns(path, salvage=salvage, keep=gatherer.keep_of(i), size=gatherer.sizes[i]))
    # events' packets: index among the file's IP packets -> row of the time-sorted frame
    # (the same unless records are out of time order)
    with census.pop("ts_file") as f:
        if census["lateness_ns"] > 0 and len(events):
            moved, by = _moved_packets(f, census["lateness_ns"])

            def packet_rows(frame):
                q = frame["packet"]
                at = np.minimum(np.searchsorted(moved, q), max(len(moved) - 1, 0))
                frame["packet"] = q + np.where(moved[at] == q, by[at], 0) if len(moved) else q
                return frame
            events.finish.append(packet_rows)
    if len(events):
        # the groups' event categories (each group's are those it has), united: those
        # present, in the order of EVENTS
        present = [v for v in EVENTS if v in events.values("event")]

        def event_codes(frame):
            ev = frame["event"]
            frame["event"] = Coded(np.asarray([present.index(v) for v in ev.values], np.int64)[ev.codes],
                                   present, categorical=True)
            return frame
        events.finish.append(event_codes)
    for frame in (flows, series, events):
        frame.attrs = {"source": str(path)}
    series.attrs["resolution_s"] = res_s
    if not stream_frames:
        flows, series, events = flows.whole(), series.whole(), events.whole()
    a = TcpAnalysis(flows=flows, series=series, events=events, resolution_s=res_s, source=str(path),
                    attrs={"packets": int(census["ip_packets"]), "tcp_packets": int(tcp_packets),
                           **_capture_attrs(census["records"], census["problem"], census.get("dropped"))})
    a.max_lateness_ns = int(census["lateness_ns"])
    _return_freed_memory()                  # the groups' pieces, joined and sorted above
    return a


def _moved_packets(ts_file, lateness_ns: int):
    """(moved, by): the packets whose row in the time-sorted frame differs from their index
    among the file's IP packets (ascending indices, int64) and by how much (row - index),
    from ``ts_file`` (every IP packet's time, int64 ns, in file order) read in parts through
    the bounded hold-back of the packets stream (:func:`._timeorder.in_time_order`).
    Memory follows the packets out of place (a late record and those it is moved before),
    not the capture."""
    from ._timeorder import in_time_order

    def parts():
        ts_file.seek(0)
        start = 0
        while True:
            ts = np.fromfile(ts_file, dtype=np.int64, count=_RANK_CHUNK)
            if not len(ts):
                return
            yield {"ts_ns": ts, "idx": np.arange(start, start + len(ts))}
            start += len(ts)
    moved, by, done = [], [], 0
    for part in in_time_order(parts(), lateness_ns):
        shift = np.arange(done, done + len(part["idx"])) - part["idx"]
        at = np.flatnonzero(shift)
        moved.append(part["idx"][at])
        by.append(shift[at])
        done += len(part["idx"])
    moved, by = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (moved, by))
    o = np.argsort(moved)
    return moved[o], by[o]


def _first_index(groups, ngroups) -> np.ndarray:
    """Index of each group's first element (len(groups) where absent), via runs."""
    from ._decode import unique_runs
    out = np.full(ngroups, len(groups), np.int64)
    if len(groups):
        u, first, _ = unique_runs(groups)
        out[u] = first
    return out


def _flows_table(packets, t_all, flow_all, dir_all, ip_len) -> Columns:
    n = len(flow_all)
    nflow = int(flow_all.max()) + 1 if n else 0
    first = _first_index(flow_all, nflow)
    last = n - 1 - _first_index(flow_all[::-1], nflow)
    start = t_all[np.minimum(first, max(n - 1, 0))] if n else np.zeros(0, np.int64)
    endt = t_all[np.clip(last, 0, None)] if n else np.zeros(0, np.int64)   # packets are in time order
    pk = [np.bincount(flow_all[dir_all == d], minlength=nflow) for d in (0, 1)]
    by = [np.bincount(flow_all[dir_all == d], weights=ip_len[dir_all == d], minlength=nflow)
          for d in (0, 1)]
    # endpoints: from a packet in the fwd direction if any, else swap the first packet's
    fi = np.flatnonzero(dir_all == 0)
    fwd_first = np.full(nflow, n, np.int64)
    ff = _first_index(flow_all[fi], nflow)
    fwd_first[ff < len(fi)] = fi[ff[ff < len(fi)]]
    has_fwd = fwd_first < n
    idx = np.minimum(np.where(has_fwd, fwd_first, first), max(n - 1, 0))
    src = packets["src"].to_numpy()[idx].astype(str) if nflow else np.zeros(0, str)
    dst = packets["dst"].to_numpy()[idx].astype(str) if nflow else np.zeros(0, str)
    sport = _col(packets, "sport", np.int64)[idx]
    dport = _col(packets, "dport", np.int64)[idx]
    src, dst = np.where(has_fwd, src, dst), np.where(has_fwd, dst, src)
    sport, dport = np.where(has_fwd, sport, dport), np.where(has_fwd, dport, sport)
    proto = _col(packets, "proto", np.int64)[np.minimum(first, max(n - 1, 0))] if nflow else []
    ecn = ecn_counts(flow_all, packets["ecn"].to_numpy(), nflow) if "ecn" in packets.columns else None
    return _flows_frame(nflow, src=src, dst=dst, sport=sport, dport=dport, proto=proto,
                        start=start, endt=endt, pk=pk, by=by, ecn=ecn)


