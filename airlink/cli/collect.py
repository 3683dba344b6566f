"""``airlink collect``: captures and radio/MAC logs -> Parquet frames and a summary."""
from __future__ import annotations

import sys
from pathlib import Path

from airlink.cli._common import add_overwrite, add_parser, bounded, json_clean, output_folder_option, with_flag_hints, \
    with_unit
from airlink.core import bounds as B
from airlink.core.units import parse_duration

from airlink.collectors.collect import MAX_PACKETS, SUMMARY_FLOWS, capture_warnings


def register(sub):
    p = add_parser(sub, "collect", "turn captures and radio/MAC logs into frames",
                   "Read packet captures (pcap, pcapng, .gz; packets in GTP-U tunnels - a cellular core's "
                   "S1-U/N3 - as the users' own) and radio/MAC logs (UCC, iCellSpeed, "
                   "link logs, mac.parquet, call records, any CSV with --mapping) and write "
                   "Parquet frames to OUTDIR: for a capture <name>.packets/.flows/.tcp/.events."
                   "parquet, for a log <name>.<kind>.parquet, plus summary.json. --json prints, "
                   "per flow: src, dst, sport, dport, packets, bytes, retransmissions, "
                   "spurious_retransmissions, data_direction, rtt_ms_median (the data sender's "
                   "RTT: the capture point's two halves of the path added), rtt_ms_median_fwd/_rev, ...",
                   "airlink collect capture.pcap -o frames/ --resolution 100ms --json\n"
                   "airlink collect ../shared/data/ucc-5g/Download/Static/*.csv -o frames/\n"
                   "airlink collect log.tsv --format csv --mapping mapping.yaml -o frames/\n"
                   "airlink collect down.txt --reader-option unit=bit/s -o frames/   # a trace in bit/s")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR")
    p.add_argument("--format", help="reader to use instead of sniffing (pcap, iperf3, ucc, gnettrack, 5gtracker, "
                                    "icellspeed, nrscope, xcal, transfers, throughput-trace, linklog, "
                                    "mac-parquet, callrecords, csv)")
    bounded(p, "--resolution", bound=B.RESOLUTION, parse=with_unit(parse_duration, "100ms or 1s"), keep_text=True,
            default=B.TCP_RESOLUTION, help=f"time-series step for TCP analysis (default {B.TCP_RESOLUTION})")
    p.add_argument("--mapping", type=Path, help="YAML column mapping for the generic CSV reader")
    p.add_argument("--reader-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of the reader that reads a log, e.g. unit=bit/s for a headerless "
                        "throughput trace in bit/s, throughput_unit=bit/s for iCellSpeed or a transfers "
                        "table; repeat for several (an option the reader does not take is an error)")
    p.add_argument("--salvage", action="store_true",
                   help="keep the packets before a damaged place in a capture instead of failing")
    p.add_argument("--no-packets", action="store_true", help="do not write the per-packet frame")
    bounded(p, "--max-packets", bound=B.MAX_PACKETS, default=MAX_PACKETS, metavar="N",
                   help="analyse at most about N packets at a time: a bigger capture is counted "
                        "flow by flow in a first pass, then analysed in a second one - each flow "
                        "bigger than N through time in chunks, the others in groups of about N/2 "
                        "packets, each group as soon as its flows are over (a group that cannot wait "
                        "beside the others is read again alone) - so memory follows N (plus ~0.8 KB "
                        "per flow), not the capture's packets; results are the same (default 1000000)")
    bounded(p, "--summary-flows", bound=B.TOP, default=SUMMARY_FLOWS, metavar="N",
            help="list at most N flows of a capture in summary.json and --json: those with the "
                 "most bytes (every flow is in <name>.flows.parquet); 0 lists every flow "
                 f"(default {SUMMARY_FLOWS})")
    add_overwrite(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    # every output is written and closed when cmd_collect returns: the process may end at
    # once; no linear algebra: numpy's BLAS gets one thread (no spinning server threads);
    # no reference cycles worth a collector (see airlink.cli.main)
    p.set_defaults(func=with_flag_hints(cmd_collect), exit_at_once=True, one_blas_thread=True, cyclic_gc=False)


def _stem(path: Path) -> str:
    name = path.name
    for ext in (".gz", ".pcapng", ".pcap", ".cap", ".csv", ".tsv", ".txt", ".log", ".parquet", ".trace"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name or "capture"


#: reader options that are not --reader-option's: the capture reader's own flags, --mapping
_NOT_READER_OPTIONS = {"mapping", "salvage", "progress"}


def _reader_options(items, fmt, C) -> dict:
    """``--reader-option NAME=VALUE`` items as reader keyword options: a VALUE of digits is an
    int, another number a float, anything else text. A malformed item, a repeated name or a
    name no reader (or not the ``--format`` reader) takes is an error."""
    from airlink.core.errors import AirlinkError
    readers = [fmt] if fmt in C.READERS else [n for n in C.READERS if n != "pcap"]
    known = set().union(*(C.reader_options(n) for n in readers)) - _NOT_READER_OPTIONS
    opts = {}
    for item in items:
        name, eq, value = (x.strip() for x in item.partition("="))
        if not eq or not name.isidentifier() or not value:
            raise AirlinkError(f"--reader-option {item!r}: need NAME=VALUE, e.g. unit=bit/s")
        if name in opts:
            raise AirlinkError(f"--reader-option {name}: given twice")
        if name not in known:
            whose = f"the {fmt} reader" if fmt in C.READERS else "any log reader"
            raise AirlinkError(f"--reader-option {name}: not an option of {whose} (options: "
                               f"{', '.join(sorted(known)) or 'none'})")
        try:
            opts[name] = int(value)
        except ValueError:
            try:
                opts[name] = float(value)
            except ValueError:
                opts[name] = value
    return opts


def cmd_collect(args) -> int:
    from airlink import collectors as C
    from airlink.core.errors import AirlinkError
    if args.format and args.format not in C.READERS:
        raise AirlinkError(f"unknown format {args.format!r} (one of {', '.join(C.READERS)})")
    from airlink.rundir import RunFolder
    for path in args.files:
        if not path.exists():
            raise AirlinkError(f"{path}: no such file")
    with output_folder_option(overwrite=not args.overwrite):
        folder = RunFolder.create(args.output, overwrite=args.overwrite, manifest=False)
    with folder.writing():
        summary = _collect(C, args, folder)
    out = folder.path
    return _report(args, summary, out)


def _collect(C, args, folder) -> dict:
    """Read every file and write its frames into the run folder (recorded in its manifest);
    returns the summary (also written as summary.json)."""
    from airlink.core.errors import AirlinkError
    from airlink.rundir import collected_name
    summary = {"files": []}
    used = set()
    for path in args.files:
        if not path.exists():
            raise AirlinkError(f"{path}: no such file")
        if not path.is_file():          # a FIFO or a device would block the sniffing, or never end
            raise AirlinkError(f"{path}: {'is a directory' if path.is_dir() else 'not a regular file'}")
        stem = _stem(path)
        while stem in used:
            stem += "_"
        used.add(stem)
        kw = {}
        fmt = args.format
        if fmt is None and (C.pcap.is_format(path) or path.name.lower().endswith(C.CAPTURE_SUFFIXES)):
            fmt = "pcap"
        if fmt == "pcap":
            if args.reader_option:
                raise AirlinkError(f"{path}: a capture takes no --reader-option (its options are --salvage, "
                                   "--no-packets, --max-packets, --resolution)")
            rec = C.collect_capture(path, folder, prefix=f"{stem}.", resolution=args.resolution,
                                    salvage=args.salvage, max_packets=args.max_packets,
                                    packets=not args.no_packets, summary_flows=args.summary_flows or None)
            rec["outputs"] = [str(p) for p in rec["outputs"].values()]
            if rec.get("problem"):
                print(f"airlink: warning: {rec['problem']} (--salvage kept them)", file=sys.stderr)
            for warning in capture_warnings(rec):
                print(f"airlink: warning: {path}: {warning}", file=sys.stderr)
        else:
            kw = _reader_options(args.reader_option, fmt, C)
            if args.mapping is not None:
                kw["mapping"] = args.mapping
                fmt = fmt or "csv"
            try:
                frame = C.read(path, format=fmt, **kw)
            except AirlinkError as exc:
                if args.mapping is None and fmt in (None, "csv") and "mapping" in str(exc):
                    # the library names no flag: say here how to read any CSV/TSV
                    raise AirlinkError(f"{exc}; a CSV/TSV of another layout needs --mapping FILE "
                                       f"(see docs/collectors.md)") from None
                raise
            reader = frame.attrs.get("reader", fmt)
            unused = sorted(set(kw) - {"mapping"} - (C.reader_options(reader) if reader in C.READERS else set()))
            if unused:          # sniffed: an option of another reader than the one that read the file
                raise AirlinkError(f"{path}: read as {reader}, which takes no option "
                                   f"{', '.join(map(repr, unused))} (--reader-option)")
            kind = frame.attrs.get("kind") or ("mac" if "user" in frame.columns else "rf")
            written = [_write(frame, folder.file(collected_name(stem, kind)), kind)]
            rec = {"file": str(path), "reader": reader, "kind": kind,
                   "rows": int(len(frame)), "columns": [str(c) for c in frame.columns],
                   "start": str(frame["time"].iloc[0]) if len(frame) and "time" in frame else None,
                   "end": str(frame["time"].iloc[-1]) if len(frame) and "time" in frame else None,
                   "outputs": written}
            for k in ("duplicate_times", "gaps", "layout", "throughput_unit"):
                if k in frame.attrs:
                    rec[k] = frame.attrs[k]
        summary["files"].append(rec)
    folder.record(folder.write_text("summary.json", _summary_json(summary)), stage="collect", kind="collect-summary")
    for rec in summary["files"]:
        for written in rec["outputs"]:
            folder.record(written, stage="collect")
    return summary


def _summary_json(summary: dict) -> str:
    """summary.json's text (and ``--json``'s): indented by two spaces, each flow record on
    a line of its own, NaN as null. (json's indenting encoder is Python code: the records
    of a capture of thousands of flows, indented field by field, cost a fifth of the whole
    command; each record - plain Python values, :meth:`TcpAnalysis.summary` - is encoded
    whole by json's C encoder instead.)"""
    import json

    from airlink.rundir import json_default
    records = {}
    files = []
    for rec in summary["files"]:
        if "flows" in rec:
            token = f"airlink-flows-{len(records)}"
            records[token] = rec["flows"]
            rec = {**rec, "flows": token}
        files.append(rec)
    text = json.dumps(json_clean({**summary, "files": files}), indent=2, default=json_default)
    encode = json.JSONEncoder(default=json_default).encode     # one encoder for every record
    for token, flows in records.items():
        line = text.rindex("\n", 0, text.index(f'"{token}"')) + 1
        pad = " " * (len(text) - len(text[line:].lstrip(" ")) - line + 2)     # the key's indent + 2
        body = ",\n".join(pad + encode(f) for f in flows)
        text = text.replace(f'"{token}"', f"[\n{body}\n{pad[:-2]}]" if flows else "[]", 1)
    return text + "\n"


def _report(args, summary, out) -> int:
    if args.json:
        sys.stdout.write(_summary_json(summary))
    else:
        for rec in summary["files"]:
            if "flows" in rec:
                print(f"{rec['file']}: {rec['packets']} packets, {rec['flows_total']} flows")
                for f in sorted(rec["flows"], key=lambda r: -r["bytes"])[:10]:
                    rtt = f"{f['rtt_ms_median']:.1f} ms" if f["rtt_ms_median"] is not None else "-"
                    if f["data_direction"]:
                        halves = "/".join("-" if f[f"rtt_ms_median_{d}"] is None else f"{f[f'rtt_ms_median_{d}']:.1f}"
                                          for d in ("fwd", "rev"))
                        rtt += f" (data {f['data_direction']}; halves fwd/rev {halves} ms)"
                    print(f"  {f['src']}:{f['sport']} -> {f['dst']}:{f['dport']} {f['proto']} "
                          f"{f['packets']} pkts {f['bytes']} B retx {f['retransmissions']} "
                          f"(spurious {f['spurious_retransmissions']}) rtt {rtt}")
            else:
                print(f"{rec['file']}: {rec['reader']} -> {rec['kind']} frame, {rec['rows']} rows")
        print(f"wrote {out}/")
    return 0


def _write(frame, path: Path, kind: str) -> str:
    """Parquet, atomically, with the frame's kind and provenance (attrs) in the metadata."""
    from airlink.rundir import write_frame
    write_frame(path, frame, kind=kind)
    return str(path)
