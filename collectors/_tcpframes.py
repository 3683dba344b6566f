"""The TCP analysis' result (:class:`TcpAnalysis`) and the builders of its frames: flows,
per-direction time series (kind ``tcp``) and events (kind ``tcp-events``), as column frames
(:class:`._columns.Columns`) that become pandas DataFrames on first use.

Built by the TCP engine (:mod:`._tcpstream`) and joined by :mod:`.tcp` for flow groups. The definitions of the numbers are
in :mod:`.tcp`'s notes.
"""
from __future__ import annotations

import numpy as np

from airlink.core.errors import AirlinkError

from ._columns import Coded, Columns, iso_utc_times, utc_times
from ._tcparrays import grouped_median_min
from .pcap import direction_column

# what pandas made of a column set to [] in an empty frame (float64): kept for empty frames
_EMPTY = np.zeros(0)
KIND_FAST, KIND_TIMEOUT, KIND_RTT = 1, 2, 3            # KIND_RTT + method (0 seq/ACK, 1 timestamp)


class TcpAnalysis:
    """Result of :func:`analyze_tcp`: ``flows`` (kind ``flows``), ``series`` (kind ``tcp``),
    ``events`` (one row per RTT sample, retransmission, duplicate ACK and zero window) -
    pandas DataFrames, made on first use from the analysis's column frames
    (:class:`._columns.Columns`), which :meth:`output` hands to writers without pandas."""

    FRAMES = ("flows", "series", "events")

    def __init__(self, flows, series, events, resolution_s: float, source: str = "",
                 attrs: dict | None = None):
        self._frames = {"flows": flows, "series": series, "events": events}
        self.resolution_s = resolution_s
        self.source = source
        self.attrs = dict(attrs or {})
        #: analysed from a capture path: the largest step back in time (ns) from the latest
        #: record before it to a record, in file order (0: the capture is in time order);
        #: None when analysed from a packets frame (sorted already)
        self.max_lateness_ns: int | None = None

    def _pandas(self, name: str):
        frame = self._frames[name]
        if hasattr(frame, "whole"):         # a ._sortedruns.SortedRuns (analyze_tcp(stream_frames=True))
            frame = self._frames[name] = frame.whole()
        if isinstance(frame, Columns):
            frame = self._frames[name] = frame.to_pandas()
        return frame

    flows = property(lambda self: self._pandas("flows"), lambda self, v: self._frames.__setitem__("flows", v))
    series = property(lambda self: self._pandas("series"), lambda self, v: self._frames.__setitem__("series", v))
    events = property(lambda self: self._pandas("events"), lambda self, v: self._frames.__setitem__("events", v))

    def output(self, name: str):
        """Frame ``name`` (flows, series, events) as it is to be written: the column frame
        (:meth:`._columns.Columns.to_arrow`), or the frame in sorted runs on disk
        (:class:`._sortedruns.SortedRuns`, ``chunks()``: analysed with ``stream_frames``),
        unless its pandas form was made (and may have been changed), then that DataFrame."""
        return self._frames[name]

    def __repr__(self) -> str:
        return (f"TcpAnalysis({len(self._frames['flows'])} flows, {len(self._frames['series'])} series rows, "
                f"{len(self._frames['events'])} events, resolution_s={self.resolution_s})")

    def capture_missed(self) -> tuple:
        """``(bytes, flows)``: the bytes the capture point never saw although their receiver
        cumulatively acknowledged them (the flows' ``capture_missed_bytes``: a capture that
        dropped packets, or a path that bypassed it), summed over the flows, and how many
        flows have any - their bytes, throughput and losses are undercounted."""
        flows = self._frames["flows"]
        name = "capture_missed_bytes"
        parts = flows.column_parts(name) if hasattr(flows, "column_parts") else (flows[name],)
        total = with_any = 0
        for part in parts:
            part = np.asarray(part, np.int64)
            total += int(part.sum())
            with_any += int(np.count_nonzero(part))
        return total, with_any

    def summary(self, limit: int | None = None) -> list:
        """Per-flow dicts (the ``airlink collect --json`` records), in flow order. ``limit``
        (None: every flow): those of the ``limit`` flows with the most bytes (both
        directions; ties: the lower flow number) - a capture of many short connections has
        as many flows as packets over four, and a record is ~40 Python objects."""
        flows = self._frames["flows"]
        n = len(flows)
        if hasattr(flows, "chunks"):       # a ._sortedruns.SortedRuns (stream_frames)
            flows = _largest(flows, limit) if limit is not None and n > limit else flows.whole()
            n = len(flows)
        rows = _largest_rows(flows, limit) if limit is not None and n > limit else None
        if isinstance(flows, Columns):
            def column(c):
                v = flows[c] if rows is None else flows[c][rows]
                return iso_utc_times(v) if v.dtype.kind == "M" else v.tolist()
        else:
            def column(c):
                v = flows[c] if rows is None else flows[c].iloc[rows]
                return [t.isoformat() for t in v] if c in ("start", "end") else v.tolist()
        cols = {c: column(c) for c in flows.columns}
        out = []
        for i in range(n if rows is None else len(rows)):
            d = {c: v[i] for c, v in cols.items()}
            rec = {"flow": int(d["flow"]), "src": str(d["src"]), "dst": str(d["dst"]),
                   "sport": int(d["sport"]), "dport": int(d["dport"]),
                   "proto": {6: "tcp", 17: "udp"}.get(int(d["proto"]), int(d["proto"])),
                   "start": d["start"], "duration_s": float(d["duration_s"]),
                   "packets": int(d["packets_fwd"] + d["packets_rev"]),
                   "bytes": int(d["bytes_fwd"] + d["bytes_rev"]),
                   "packets_fwd": int(d["packets_fwd"]), "packets_rev": int(d["packets_rev"]),
                   "bytes_fwd": int(d["bytes_fwd"]), "bytes_rev": int(d["bytes_rev"]),
                   "retransmissions": int(d["retransmissions"]),
                   "fast_retransmissions": int(d["fast_retransmissions"]),
                   "timeout_retransmissions": int(d["timeout_retransmissions"]),
                   "retransmitted_segments": int(d["retransmitted_segments"]),
                   "capture_missed_bytes": int(d["capture_missed_bytes"]),
                   "spurious_retransmissions": int(d["spurious_retransmissions"]),
                   "dupacks": int(d["dupacks"]), "zero_windows": int(d["zero_windows"]),
                   "out_of_order": int(d["out_of_order"]),
                   "rtt_ms_median": _f(d["rtt_ms_median"]), "rtt_ms_min": _f(d["rtt_ms_min"]),
                   "rtt_samples": int(d["rtt_samples"]),
                   "data_direction": str(d["data_direction"]) or None,
                   "rtt_ms_median_fwd": _f(d["rtt_ms_median_fwd"]),
                   "rtt_ms_median_rev": _f(d["rtt_ms_median_rev"]),
                   "rtt_samples_fwd": int(d["rtt_samples_fwd"]),
                   "rtt_samples_rev": int(d["rtt_samples_rev"]),
                   "goodput_bps": _f(d["goodput_bps"]), "loss_rate": _f(d["loss_rate"]),
                   "mss_bytes": _f(d["mss_bytes"]), "wscale_fwd": int(d["wscale_fwd"]),
                   "wscale_rev": int(d["wscale_rev"]), "sack_permitted": bool(d["sack_permitted"]),
                   "timestamps": bool(d["timestamps"])}
            out.append(rec)
        return out



def _largest_rows(flows, limit: int) -> np.ndarray:
    """Rows of the ``limit`` flows of flows frame ``flows`` with the most bytes (both
    directions; ties: the lower flow number), in row order."""
    total = np.asarray(flows["bytes_fwd"], np.int64) + np.asarray(flows["bytes_rev"], np.int64)
    return np.sort(np.lexsort((np.asarray(flows["flow"]), -total))[:max(0, int(limit))])


def _largest(runs, limit: int) -> Columns:
    """:func:`_largest_rows` of a flows frame in runs (:class:`._sortedruns.SortedRuns`,
    ``JoinedRuns``), in flow order: chosen from the number columns of the runs as they were
    added, then read, so the frame is never whole in memory (nor merged)."""
    numbers = {c: np.concatenate([np.asarray(p, np.int64) for p in runs.column_parts(c)])
               for c in ("flow", "bytes_fwd", "bytes_rev")}
    return runs.rows(_largest_rows(numbers, limit))


def _f(x):
    x = float(x)
    return None if x != x else x



def time_ns(frame) -> np.ndarray:
    """The ``time`` column (or index) of a frame as int64 ns since the epoch."""
    import pandas as pd
    t = frame["time"] if "time" in frame.columns else frame.index
    return np.asarray(pd.DatetimeIndex(t).asi8, dtype=np.int64)



# the events frame's text columns by code: event (categorical: categories are the events
# present, in this - alphabetical - order), kind and spurious_reason (text)
EVENTS = ("dupack", "out_of_order", "retransmission", "rtt", "zero_window")



EVENT_KINDS = ("", "fast", "timeout", "seq_ack", "timestamp")



SPURIOUS_REASONS = ("", "already_acked", "eifel", "dsack")



def spurious_reasons(acked, eifel, dsack) -> np.ndarray:
    """Codes (into :data:`SPURIOUS_REASONS`) of why each retransmission is spurious: the
    first that holds of already ACKed, Eifel, DSACK; 0 when none does."""
    return np.select([acked, eifel, dsack], [1, 2, 3], 0)



def event_rows(event: str, *, time, packet, flow, direction, kind=0, seq=-1, payload_bytes=0,
               spurious=False, spurious_reason=0, rtt_ms=np.nan) -> Columns:
    """Rows of the events frame for one ``event`` (of :data:`EVENTS`): time (int64 ns; a
    time column once :func:`_events_frame` joined the parts), the packet's row, flow,
    direction code (0 fwd, 1 rev), ``kind`` and ``spurious_reason`` codes (into
    :data:`EVENT_KINDS`, :data:`SPURIOUS_REASONS`), seq, payload_bytes, spurious, rtt_ms;
    scalars hold for every row."""
    n = len(time)

    def col(v, dtype):
        return np.full(n, v, dtype) if np.isscalar(v) else np.asarray(v).astype(dtype, copy=False)
    return Columns({"time": col(time, np.int64), "packet": col(packet, np.int64), "flow": col(flow, np.int64),
                    "direction": col(direction, np.int8), "event": Coded.full(n, event, EVENTS, True),
                    "kind": Coded(col(kind, np.int8), EVENT_KINDS, False), "seq": col(seq, np.int64),
                    "payload_bytes": col(payload_bytes, np.int64), "spurious": col(spurious, bool),
                    "spurious_reason": Coded(col(spurious_reason, np.int8), SPURIOUS_REASONS, False),
                    "rtt_ms": col(rtt_ms, np.float64)})



def _events_frame(ev_parts: list, source: str) -> Columns:
    """The events frame from its parts (:func:`event_rows`: out-of-order, retransmission,
    RTT, duplicate-ACK and zero-window rows, in that order), sorted by time then flow
    (stably). The parts are emptied as they are joined, the joined frame as it is sorted:
    one column at a time is held twice, not the events (a long flow has one RTT sample per
    ACK)."""
    if ev_parts:
        events = Columns.concat(ev_parts, consume=True).sort_by(["time", "flow"], consume=True)
    else:          # the text columns as pandas typed them, empty: float64 (event: categorical of none)
        events = event_rows("rtt", time=np.zeros(0, np.int64), packet=0, flow=0, direction=0)
        events["kind"] = events["spurious_reason"] = _EMPTY
    events["time"] = utc_times(events["time"])
    events["direction"] = direction_column(events["direction"])
    events["event"] = events["event"].present()
    events.attrs["source"] = source
    return events



def _rtt_columns(flows, rtt_ms, rtt_gd, rtt_method, payload_gd) -> Columns:
    """Per-direction and headline RTT columns of the flows table.

    ``rtt_ms_{median,min}_{fwd,rev}`` and ``rtt_samples_{fwd,rev}``: the samples timing
    direction d's segments against the other side's ACKs (or TSecr echoes), i.e. the round
    trip from the capture point to d's receiver and back (sequence/ACK samples; timestamp
    samples only for a direction without any). ``data_direction``: the direction carrying
    more payload bytes ("" when neither carries any). The headline ``rtt_ms_median`` /
    ``rtt_ms_min`` is the round trip the data sender sees: the two halves either side of
    the capture point added, median(data half) + median(other half) (resp. minima); when
    one half has no sample, the other alone. ``rtt_samples`` counts both halves' samples.
    """
    nflow = len(flows)
    med = np.full((nflow, 2), np.nan)
    mn = np.full((nflow, 2), np.nan)
    cnt = np.zeros((nflow, 2), np.int64)
    if len(rtt_ms):
        pref = np.ones(2 * nflow, np.int8)
        np.minimum.at(pref, rtt_gd, rtt_method)
        keep = rtt_method == pref[rtt_gd]
        at, m, low, c = grouped_median_min(rtt_ms[keep], rtt_gd[keep], consume=True)
        med.ravel()[at], mn.ravel()[at], cnt.ravel()[at] = m, low, c
    pg = np.asarray(payload_gd, np.float64)[: 2 * nflow].reshape(-1, 2) if nflow else np.zeros((0, 2))
    data_dir = np.where(pg[:, 1] > pg[:, 0], 1, 0)
    rows = np.arange(nflow)
    other = 1 - data_dir

    def headline(v):
        a, b = v[rows, data_dir], v[rows, other]
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))
    flows["data_direction"] = np.where(pg.max(axis=1) > 0, np.where(data_dir == 1, "rev", "fwd"), "") \
        if nflow else np.zeros(0, str)
    flows["rtt_ms_median"] = headline(med)
    flows["rtt_ms_min"] = headline(mn)
    flows["rtt_samples"] = cnt.sum(axis=1)
    for d, name in ((0, "fwd"), (1, "rev")):
        flows[f"rtt_ms_median_{name}"] = med[:, d]
        flows[f"rtt_ms_min_{name}"] = mn[:, d]
        flows[f"rtt_samples_{name}"] = cnt[:, d]
    return flows



def _flows_frame(nflow, *, src, dst, sport, dport, proto, start, endt, pk, by, ecn=None) -> Columns:
    """The flows frame from per-flow arrays (times int64 ns; pk/by: per-direction counts;
    ecn: packets per ECN codepoint, :func:`._decode.ecn_counts`, or None when unknown:
    no ECN columns)."""
    frame = Columns({
        "flow": np.arange(nflow, dtype=np.int64), "src": src, "dst": dst,
        "sport": np.asarray(sport, np.int64), "dport": np.asarray(dport, np.int64),
        "proto": _EMPTY if isinstance(proto, list) else np.asarray(proto, np.int64),
        "start": utc_times(start), "end": utc_times(endt),
        "duration_s": (endt - start) / 1e9,
        "packets_fwd": pk[0].astype(np.int64), "packets_rev": pk[1].astype(np.int64),
        "bytes_fwd": by[0].astype(np.int64), "bytes_rev": by[1].astype(np.int64)})
    if ecn is not None:                  # RFC 3168 codepoints: ECT(0) 2, ECT(1) 1, CE 3
        ecn = np.asarray(ecn, np.int64).reshape(nflow, 4)
        frame["ect0_packets"], frame["ect1_packets"], frame["ce_packets"] = ecn[:, 2], ecn[:, 1], ecn[:, 3]
    return frame



def check_series_rows(source, flow: int, flow_bins: int, res_ns: int, total: int, n_rows: int) -> None:
    """Refuse a time series of ``total`` rows (flow, direction, bin of ``res_ns``) that is
    both above 5 million and 20x the ``n_rows`` packets: a flow spanning ``flow_bins`` bins
    for so few packets is almost always a damaged timestamp."""
    if total > 5_000_000 and total > 20 * n_rows:
        raise AirlinkError(
            f"{source or 'capture'}: flow {flow} spans {flow_bins * res_ns / 1e9:.0f} s; "
            f"time series at {res_ns / 1e9:g} s would need {total} rows for {n_rows} packets "
            f"(a damaged timestamp? else choose a coarser resolution)")



_SAMPLE_SLICE = 1 << 20     # RTT samples turned into series rows at a time


def _series_frame(out: dict, eff_mss, rtt_t, rtt_ms, rtt_gd, rtt_method, *, nflow, nb, offset,
                  start_bin, end_bin, res_ns):
    """The series frame from the per-row sums in ``out`` (row of flow f, direction d, bin b:
    ``offset[f] + d * nb[f] + b - start_bin[f]``; bins of ``res_ns`` aligned to the epoch), adding the in-flight packets (bytes / effective MSS) and the per-bin
    RTT median (sequence/ACK samples; timestamp ones where a direction has none)."""
    total = int((2 * nb).sum())

    def row_of(f, d, bb):
        return offset[f] + d * nb[f] + (bb - start_bin[f])
    rows_fdir = np.repeat(np.arange(2 * nflow), np.repeat(nb, 2))
    f_of_row = rows_fdir // 2
    d_of_row = rows_fdir % 2
    mss_row = eff_mss[2 * f_of_row + d_of_row]
    out["inflight_packets"] = out["inflight_bytes"] / mss_row
    # RTT: median of samples in the bin (sequence/ACK samples; timestamp ones where a flow has none)
    rtt = np.full(total, np.nan)
    if len(rtt_ms):
        pref = np.ones(2 * nflow, np.int8)
        np.minimum.at(pref, rtt_gd, rtt_method)
        keep = rtt_method == pref[rtt_gd]
        # the kept samples' values and rows, a slice of samples at a time (a long flow has
        # one sample per ACK: the temporaries follow the slice)
        n_kept = int(keep.sum())
        vals, rows = np.empty(n_kept), np.empty(n_kept, np.min_scalar_type(-total))
        filled = 0
        for s in range(0, len(rtt_ms), _SAMPLE_SLICE):
            sl = slice(s, s + _SAMPLE_SLICE)
            k = keep[sl]
            gd = rtt_gd[sl][k]
            rf, rd = gd // 2, gd % 2
            n = len(gd)
            rows[filled:filled + n] = row_of(rf, rd, np.clip(rtt_t[sl][k] // res_ns, start_bin[rf], end_bin[rf]))
            vals[filled:filled + n] = rtt_ms[sl][k]
            filled += n
            del gd, k, rf, rd
        del keep
        at, med = grouped_median_min(vals, rows, consume=True)[:2]
        del vals, rows
        rtt[at] = med
    out["rtt_ms"] = rtt
    within = np.arange(total) - offset[f_of_row] - d_of_row * nb[f_of_row]
    time_ns = (start_bin[f_of_row] + within) * res_ns
    frame = Columns({"time": utc_times(time_ns), "flow": f_of_row, "direction": direction_column(d_of_row)})
    cols = ["throughput_bps", "goodput_bps", "rtt_ms", "inflight_bytes", "inflight_packets",
            "retransmissions", "fast_retransmissions", "timeout_retransmissions",
            "spurious_retransmissions", "dupacks", "rwnd_bytes", "zero_windows", "loss_rate",
            "packets", "bytes"]
    for c in cols:
        frame[c] = out[c]
    return frame.sort_by(["time", "flow", "direction"])
