"""One capture -> its Parquet frames, in bounded memory: the collect pipeline.

:func:`collect_capture` is what ``airlink collect`` and ``airlink run``'s collect stage do
for a packet capture (pcap, pcapng, gzipped or not):

* the TCP analysis (:func:`.tcp.analyze_tcp`) reads the capture itself, at most about
  ``max_packets`` packets at a time (census pass, then flow groups and time chunks);
* the packets frame, when asked for, is written by a thread (:class:`PacketsPass`) started
  as soon as the flows are numbered, one Parquet row group per capture batch of
  :data:`PACKETS_BATCH_BYTES`, from the analysis' own decoded batches when it makes a pass
  over the whole capture (:class:`._feed.BatchFeed`) - both run beside each other, mostly
  in C and numpy without the GIL;
* the analysis' frames (flows, series, events) are written from their column frames
  (:meth:`._columns.Columns.to_arrow`) without importing pandas; in flow groups the flows,
  series and events of each group go to a temporary file as it is done and are written
  merged in order, a row group at a time (:mod:`._sortedruns`), so they are never whole in
  memory.

Files are ``<prefix><part>.parquet`` with part ``packets``, ``flows``, ``tcp``, ``events``
(:data:`airlink.rundir.COLLECT_KINDS`), each written atomically: a failure leaves none of them half written, and
the packets file is removed when the analysis fails after the packets pass finished.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

#: Dictionary encoding only where it pays (addresses, direction, flow, protocol, ports): on
#: sequence numbers and timestamps the dictionaries overflow and only cost write time.
PACKETS_DICTIONARY = ["src", "dst", "direction", "flow", "proto", "sport", "dport"]
#: Row-group min/max statistics (what readers filter row groups by) for time and the flow's
#: numeric identity (flow number, protocol, ports) only: those of the per-packet header
#: fields (seq, ack, ...) select nothing useful, and those of the address and direction
#: strings (the costliest: a dictionary column's min/max is found over its strings) select
#: little, a row group of a busy capture spanning most addresses.
PACKETS_STATISTICS = ["time", "flow", "proto", "sport", "dport"]
#: The same for the analysis' frames (flows, tcp, events): dictionaries on the flow's identity
#: and the categories (direction, event, kind, spurious reason), not on times, sequence
#: numbers, counts or RTTs, which are mostly distinct; statistics for time and flow
#: identity (the events frame has a row per RTT sample, and the min/max of its strings cost
#: more than the rest of its encoding).
ANALYSIS_DICTIONARY = ["flow", "src", "dst", "sport", "dport", "proto", "direction", "data_direction",
                       "event", "kind", "spurious_reason"]
ANALYSIS_STATISTICS = ["time", "start", "end", "flow", "sport", "dport", "proto"]
#: Capture bytes per batch (and row group) of the packets pass. The pass runs beside the
#: analysis, so its batches add to the analysis' peak memory (~10 times the batch size).
PACKETS_BATCH_BYTES = 4 << 20
#: Packets analysed at a time by default: a bigger capture is analysed in flow groups and its
#: long flows in time chunks (:func:`.tcp.analyze_tcp`'s ``max_packets``), so memory follows
#: this number, plus per-flow state (~0.8 KB a flow at the peak; docs/collectors.md).
MAX_PACKETS = 1_000_000
#: Flows listed in the summary by default (those with the most bytes): every flow is in the
#: flows frame; the summary's records are Python objects and JSON text, ~3 KB a flow.
SUMMARY_FLOWS = 1000


def collect_capture(path, out, *, prefix: str = "", resolution="1s", salvage: bool = False,
                    max_packets: int | None = MAX_PACKETS, packets: bool = True,
                    provenance: dict | None = None, summary_flows: int | None = SUMMARY_FLOWS) -> dict:
    """Analyse capture ``path`` and write its frames into folder ``out``; returns the summary.

    ``out``: a folder path, or an object with a ``file(name) -> Path`` method (an
    :class:`airlink.rundir.RunFolder`, which refuses names that were not its run's); the
    files are ``<prefix>packets.parquet`` (unless ``packets=False``), ``<prefix>flows.parquet``,
    ``<prefix>tcp.parquet`` and ``<prefix>events.parquet``. ``provenance``: entries added to
    each file's ``airlink.provenance`` (which holds the frame's own attrs).
    ``resolution``, ``salvage``, ``max_packets``: as for :func:`.tcp.analyze_tcp`.

    The summary: ``file``, ``reader`` ("pcap"), ``packets`` (records read), ``flows``
    (:meth:`.tcp.TcpAnalysis.summary` of at most ``summary_flows`` flows, those with the
    most bytes; None: every flow), ``flows_total`` (the capture's flows), ``flows_listed``
    (what ``flows`` holds, when it is not every flow), ``outputs`` (frame kind -> path
    written, packets first), ``problem`` when ``salvage`` kept the packets before a
    damaged place, ``capture_missed`` (``bytes``, ``flows``) when the capture point
    missed bytes that their receiver acknowledged (:meth:`.tcp.TcpAnalysis.capture_missed`),
    and ``capture_dropped`` when the capture tool counted packets it dropped (a pcapng's
    interface statistics).
    """
    from airlink.rundir import COLLECT_KINDS

    from .tcp import analyze_tcp
    path = Path(path)
    file = out.file if hasattr(out, "file") else (lambda name: Path(out) / name)
    extra = dict(provenance or {})
    dest = {kind: file(f"{prefix}{part}.parquet") for kind, part in COLLECT_KINDS.items()
            if packets or kind != "packets"}
    pass_ = PacketsPass(path, dest["packets"], salvage, extra) if packets else None
    try:
        analysis = analyze_tcp(path, resolution=resolution, salvage=salvage, max_packets=max_packets,
                               flows_ready=None if pass_ is None else pass_.start, feed_packets=True,
                               stream_frames=True, spill_folder=dest["flows"].parent)
        info = dict(analysis.attrs)
        written = {kind: _write(analysis.output(name), dest[kind], kind, extra)
                   for kind, name in (("flows", "flows"), ("tcp", "series"), ("tcp-events", "events"))}
        if pass_ is not None:
            written = {"packets": pass_.result(info), **written}
    except BaseException:
        if pass_ is not None:
            pass_.cancel()
        raise
    n_flows = len(analysis.output("flows"))
    rec = {"file": str(path), "reader": "pcap", "packets": int(info["records"]),
           "flows": analysis.summary(summary_flows), "flows_total": n_flows, "outputs": written}
    if len(rec["flows"]) < n_flows:
        rec["flows_listed"] = (f"the {len(rec['flows'])} flows with the most bytes, of {n_flows}; every "
                               f"flow is in {written['flows'].name}")
    if info.get("problem"):
        rec["problem"] = info["problem"]
    missed, missed_flows = analysis.capture_missed()
    if missed:
        rec["capture_missed"] = {"bytes": missed, "flows": missed_flows}
    if info.get("capture_dropped"):
        rec["capture_dropped"] = info["capture_dropped"]
    return rec


def capture_warnings(rec: dict) -> list:
    """What a user must hear of a capture's summary ``rec`` (:func:`collect_capture`): the
    packets its capture tool counted as dropped, and the bytes the capture missed although
    their receiver acknowledged them - each a sentence; empty when neither."""
    out = []
    if rec.get("capture_dropped"):
        out.append(f"the capture tool counted {rec['capture_dropped']} packets it dropped (the pcapng's "
                   f"interface statistics): flows may lack packets")
    if rec.get("capture_missed"):
        m = rec["capture_missed"]
        out.append(f"the capture missed {m['bytes']} bytes that their receiver acknowledged, in {m['flows']} "
                   f"flow(s) (capture_missed_bytes in the flows frame): their bytes, throughput and losses "
                   f"are undercounted - the capturing host dropped packets, or some took a path around the "
                   f"capture point")
    return out


def _write(frame, dest: Path, kind: str, extra: dict) -> Path:
    """Parquet, atomically, with the frame's kind and its attrs plus ``extra`` as provenance.
    A frame in sorted runs (:class:`._sortedruns.SortedRuns`) is written a row group per
    merged chunk: the file holds the table the whole frame's ``to_arrow()`` would give
    (the chunks share its columns, types, categories and pandas metadata)."""
    from airlink.rundir import provenance_of, write_frame
    provenance = {**provenance_of(frame), **extra}
    if not hasattr(frame, "chunks") or not len(frame):
        if hasattr(frame, "chunks"):
            frame = next(frame.chunks())
        return write_frame(dest, frame, kind=kind, provenance=provenance,
                           use_dictionary=ANALYSIS_DICTIONARY, write_statistics=ANALYSIS_STATISTICS)

    def tables():
        for chunk in frame.chunks():
            table = chunk.to_arrow()
            del chunk
            yield table
    write_row_groups(dest, tables(), kind=kind, provenance=provenance,
                     use_dictionary=ANALYSIS_DICTIONARY, write_statistics=ANALYSIS_STATISTICS)
    return dest


def write_row_groups(dest: Path, tables, *, kind: str, provenance: dict, use_dictionary,
                     write_statistics) -> bool:
    """``tables`` (an iterable of pyarrow tables of one schema) as the row groups of Parquet
    file ``dest``, atomically: the writer is made for the first table's schema, and the file
    appears only if every table was written. ``use_dictionary``, ``write_statistics``: the
    columns to dictionary-encode / to keep min/max statistics of (names the tables lack are
    left out). Row groups are encoded by the writer's thread while the next table is made
    (:class:`airlink.rundir.FrameStreamWriter` with ``background``). Returns whether there
    was a table (no file is written when there was none)."""
    from airlink.rundir import FrameStreamWriter
    writer = None
    with contextlib.ExitStack() as stack:
        for table in tables:
            if writer is None:
                names = set(table.column_names)
                writer = stack.enter_context(FrameStreamWriter(
                    dest, table.schema, kind=kind, provenance=provenance,
                    use_dictionary=[c for c in use_dictionary if c in names],
                    write_statistics=[c for c in write_statistics if c in names], background=True))
            writer.write(table)
    return writer is not None


class PacketsPass:
    """The packets frame written in Parquet row groups, one per capture batch (memory does
    not grow with the capture), by a thread: :meth:`start` (the ``flows_ready`` of
    :func:`.tcp.analyze_tcp`) begins it, :meth:`result` waits for it and raises what it
    raised, :meth:`cancel` stops it between batches (its file, partial or complete, is
    removed)."""

    def __init__(self, path: Path, dest: Path, salvage: bool, provenance: dict | None = None):
        import threading
        self.path, self.dest, self.salvage = path, dest, salvage
        self.provenance = dict(provenance or {})
        self.stop = threading.Event()
        self.thread = None
        self.error = None
        self.meta: dict = {}

    def start(self, flows, max_lateness_ns, feed=None) -> None:
        """``feed``: the analysis' batches to take instead of reading the capture again."""
        import threading
        self.thread = threading.Thread(target=self._run, args=(flows, max_lateness_ns, feed),
                                       name="airlink-collect-packets", daemon=True)
        self.thread.start()

    def _run(self, flows, max_lateness_ns, feed=None) -> None:
        try:
            self._write(flows, max_lateness_ns, feed)
        except BaseException as exc:              # re-raised by result() in the caller's thread
            self.error = exc
            if feed is not None:
                feed.abandon()

    def _write(self, flows, max_lateness_ns, feed=None) -> None:
        from airlink.rundir import provenance_of

        from .pcap import iter_packet_tables, read
        prov = provenance_of(None)             # the airlink version
        prov.update({"source": str(self.path), "reader": "pcap", "row_groups": "one per capture batch",
                     **self.provenance})
        tables = iter_packet_tables(self.path, flows=flows, max_lateness_ns=max_lateness_ns,
                                    salvage=self.salvage, info=self.meta, stop=self.stop,
                                    batch_bytes=PACKETS_BATCH_BYTES, feed=feed)
        if not write_row_groups(self.dest, tables, kind="packets", provenance=prov,
                                use_dictionary=PACKETS_DICTIONARY, write_statistics=PACKETS_STATISTICS):
            # no IP packet: the empty frame
            _write(read(self.path, salvage=self.salvage, progress=False), self.dest, "packets",
                   self.provenance)

    def result(self, info: dict) -> Path:
        """Wait for the pass; ``info`` receives the reader's attrs (records, problem, ...)."""
        if self.thread is None:
            raise RuntimeError("the packets pass was never started")
        self.thread.join()
        if self.error is not None:
            raise self.error
        info.update(self.meta)
        return self.dest

    def cancel(self) -> None:
        """Stop the pass (between batches) and remove its file if it was already complete:
        a pipeline that fails leaves no packets frame behind."""
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
            if self.error is None:
                self.dest.unlink(missing_ok=True)


__all__ = ["collect_capture", "PacketsPass", "MAX_PACKETS", "PACKETS_BATCH_BYTES", "SUMMARY_FLOWS"]
