"""``airlink trace info|convert|constant|plot``: inspect, convert, make and plot capacity traces."""
from __future__ import annotations

from pathlib import Path

from airlink import traces as T
from airlink.cli._common import add_opportunity_bytes, add_parser, bounded, fmt_or_missing, print_json, with_flag_hints, \
    with_unit
from airlink.core import bounds as B

FORMATS = ["mahimahi", "parquet"]
DURATION = with_unit(T.parse_duration, "10s or 500ms")


def register(sub):
    from airlink.cli import Formatter
    p = sub.add_parser("trace", help="inspect, convert, create and plot capacity traces",
                       description="Capacity traces: Mahimahi text (one ms timestamp per delivery "
                                   "opportunity) or airlink Parquet (bytes per TTI, any TTI length).",
                       formatter_class=Formatter,
                       epilog="examples:\n"
                              "  airlink trace info traces/examples/pf-quick-20s.parquet\n"
                              "  airlink trace convert traces/examples/pf-quick-20s.parquet user2.down --user 2\n"
                              "  airlink trace constant 48Mbps --duration 10s -o 48.down")
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    q = add_parser(tsub, "info", "summarise a trace or link log",
                   "Format, TTI, users, duration, mean/median/p5/p95 rate (Mbit/s, percentiles over "
                   "1 s windows) per user and the fraction of TTIs with zero capacity. For an mm-link "
                   "or airlink link log: average capacity, throughput, utilisation and delays.",
                   "airlink trace info ../shared/data/mahimahi-traces/TMobile-LTE-short.down --json")
    q.add_argument("file", type=Path)
    q.add_argument("--format", choices=FORMATS + ["linklog"], help="default: from extension and content")
    add_opportunity_bytes(q)
    bounded(q, "--window", bound=B.WINDOW, parse=DURATION, default="1s",
            help="window for the rate percentiles (default 1s)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=cmd_info)

    c = add_parser(tsub, "convert", "convert between Mahimahi text and airlink Parquet",
                   "Convert a trace; formats come from the extensions (.parquet/.pq = Parquet, "
                   "anything else = Mahimahi) unless --from/--to say otherwise. Writing Mahimahi "
                   "keeps the exported cumulative bytes within one opportunity of the trace after "
                   "every millisecond, at any TTI length.",
                   "airlink trace convert TMobile-LTE-short.down tmobile.parquet\n"
                   "airlink trace convert sim/capacity.parquet user2.down --user 2")
    c.add_argument("input", type=Path)
    c.add_argument("output", type=Path)
    c.add_argument("--from", dest="src_format", choices=FORMATS)
    c.add_argument("--to", dest="dst_format", choices=FORMATS)
    c.add_argument("--user", help="user column to convert (Mahimahi output takes one; default the first)")
    add_opportunity_bytes(c)
    c.set_defaults(func=cmd_convert)

    k = add_parser(tsub, "constant", "write a constant-rate trace",
                   "A constant-rate link: RATE (e.g. 48Mbps, 500kbps) for --duration at --tti. "
                   "The output format comes from the extension.",
                   "airlink trace constant 48Mbps --duration 10s -o 48mbps.down")
    bounded(k, "rate", metavar="RATE", bound=B.RATE_BPS, parse=with_unit(T.parse_rate, "48Mbps or 500kbps", "rate"),
            help="link rate with its unit")
    bounded(k, "--duration", bound=B.TRACE_DURATION, parse=DURATION, default="1s",
            help="length of the trace before it loops (default 1s)")
    bounded(k, "--tti", bound=B.TTI, parse=T.parse_tti, default="1ms", help="TTI length (default 1ms)")
    k.add_argument("-o", "--output", type=Path, required=True)
    add_opportunity_bytes(k)
    k.set_defaults(func=cmd_constant)

    f = add_parser(tsub, "from-log", "turn a measured radio/MAC log into a capacity trace",
                   "Build a byte-granular capacity trace from a transport-block or throughput column "
                   "of a measured log (NR-Scope DCI CSV, iCellSpeed, UCC, any CSV with --mapping or "
                   "--time-column). Units are explicit: the column's suffix (_bytes, _bps) or --unit "
                   "(bytes or bits per row; bit/s, kbit/s, Mbit/s for rates). Amounts go into the TTI "
                   "holding their row; rates are integrated over each TTI. The TTI is the log's slot "
                   "timing (NR-Scope: 1 ms at 15 kHz), else the median row spacing, else --tti. Per-user "
                   "logs: --user RNTI, 'busiest' or 'cell' (sum of all users); HARQ retransmissions carry "
                   "no new bytes and are left out (their share is printed). With --compare (default for "
                   "iCellSpeed: the application throughput) the mean ratio and time offset between the "
                   "two columns are measured over the TTIs the log measured in both (seconds filled "
                   "over gaps are left out and counted), so you can choose what to replay: what the scheduler "
                   "granted (tbs) or what the application got (throughput). The output keeps source, "
                   "column, unit and rule in its metadata; .parquet keeps any TTI, other names are "
                   "written as Mahimahi text. TTIs over 10 ms are split when replayed. A rate column's gaps (a "
                   "step longer than 1.5 row spacings, e.g. G-NetTrack's 2-3 s steps) are filled by --gaps "
                   f"(default hold, up to --fill-limit {B.DEFAULT_FILL_LIMIT}; zero beyond) and the TTIs each rule filled are "
                   "printed and kept in the metadata. --start/--duration take a part of the log; "
                   "--split-sessions writes one trace per session (NAME-s1, NAME-s2, ...), a silence "
                   "over 60 s (or the given gap) ending a session.",
                   "airlink trace from-log ../shared/data/nr-scope/t_mobile1_ueactivity_afternoon_1.csv "
                   "--user busiest -o ue.parquet\n"
                   "airlink trace from-log data_310410_loc-lakeway-003c.csv -o granted.parquet\n"
                   "airlink trace from-log data_310410_loc-lakeway-003c.csv --column throughput_bps "
                   "-o app.parquet\n"
                   "airlink trace from-log xcal.csv --time-column td --column 5G_TBS --column 4G_TBS "
                   "--unit bits -o endc.parquet\n"
                   "airlink trace from-log B_2019.12.16_11.49.59.csv --column dl_bitrate_bps --gaps hold "
                   "-o ucc.parquet\n"
                   "airlink trace from-log D1_driving/LosAngeles/data_310410.csv --split-sessions=120s "
                   "-o la.parquet")
    f.add_argument("log", type=Path, metavar="LOG")
    f.add_argument("-o", "--output", type=Path, required=True, help="trace file (.parquet, or Mahimahi text)")
    f.add_argument("--format", help="reader (default: sniffed), e.g. nrscope, icellspeed, ucc, csv")
    f.add_argument("--mapping", type=Path, help="YAML column mapping for --format csv")
    f.add_argument("--column", action="append", metavar="C",
                   help="column to turn into capacity; repeat to sum columns (default: the reader's "
                        "transport-block column, tbs_bytes or tbs_bps, or an iperf3 report's throughput_bps; "
                        "else the one column whose name carries a unit - when several would, the error "
                        "names them)")
    f.add_argument("--unit", help="unit of the column(s) when the name carries none: bytes, bits, "
                                  "bit/s, kbit/s, Mbit/s")
    f.add_argument("--user", help="user (RNTI) of a multi-user log, 'busiest' or 'cell'")
    f.add_argument("--time-column", metavar="NAME",
                   help="time column of a plain CSV read without a mapping (epoch seconds or ISO 8601)")
    bounded(f, "--tti", bound=B.TTI, parse=T.parse_tti, help="TTI of the trace (default: from the data)")
    f.add_argument("--direction", choices=["downlink", "uplink"], default="downlink",
                   help="DCIs to use in a per-slot log (downlink)")
    f.add_argument("--gaps", default="hold", metavar="hold|zero|interpolate|error",
                   help="fill of a rate column's gaps after the row's own spacing: hold the rate, zero, "
                        "interpolate to the next row, or error (default hold)")
    bounded(f, "--fill-limit", bound=B.FILL_LIMIT, parse=DURATION, default=B.DEFAULT_FILL_LIMIT, metavar="DURATION",
            help="longest step hold/interpolate fill; the silence of a longer one is zero capacity "
                 f"(default {B.DEFAULT_FILL_LIMIT})")
    f.add_argument("--start", metavar="WHEN",
                   help="start of the trace: a duration from the log's first row (90s) or a date "
                        "(2019-12-16T11:55:00, UTC unless it names a zone)")
    bounded(f, "--duration", bound=B.TRACE_DURATION, parse=DURATION, metavar="DURATION",
                   help="length of the trace (default: to the end of the log)")
    bounded(f, "--split-sessions", bound=B.SESSION_GAP, parse=DURATION, nargs="?", metavar="GAP",
            const=B.DEFAULT_SESSION_GAP,
            help="one trace per session, written as NAME-s1, NAME-s2, ...: a silence longer than GAP "
                 f"(default {B.DEFAULT_SESSION_GAP}) ends a session")
    f.add_argument("--compare", metavar="C", help="second column to compare with (mean ratio, offset; over measured TTIs only)")
    bounded(f, "--max-lag", bound=B.MAX_LAG, parse=DURATION, default=B.COMPARE_MAX_LAG,
            help=f"largest offset searched by --compare ({B.COMPARE_MAX_LAG})")
    add_opportunity_bytes(f)
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=with_flag_hints(cmd_from_log))

    g = add_parser(tsub, "plot", "plot a trace or a link log",
                   "Capacity over time for a trace; for an mm-link/airlink link log, capacity, "
                   "arrivals and departures per bin plus queueing delay, like Mahimahi's throughput "
                   "and delay graphs, with average capacity, throughput, utilisation and "
                   "95th-percentile delay printed.",
                   "airlink trace plot down.trace -o capacity.png\n"
                   "airlink trace plot downlink.log -o link.png --bin 250ms")
    g.add_argument("file", type=Path)
    g.add_argument("-o", "--output", type=Path, required=True, help="image file (.png, .svg, .pdf)")
    g.add_argument("--format", choices=FORMATS + ["linklog"])
    bounded(g, "--bin", bound=B.WINDOW, parse=DURATION, default=None,
            help="bin width (default 100ms for traces, 500ms for logs)")
    add_opportunity_bytes(g)
    g.set_defaults(func=cmd_plot)


def _print_trace_summary(s: dict) -> None:
    print(f"format      {s['format']}")
    print(f"tti         {s['tti_ms']:g} ms ({s['tti_s']} s)")
    print(f"duration    {s['duration_s']:g} s ({s['n_tti']} TTIs)")
    print(f"users       {len(s['users'])}")
    print(f"{'user':>6} {'mean':>9} {'median':>9} {'p5':>9} {'p95':>9}  zero-capacity TTIs")
    for u in s["users"]:
        print(f"{u['user']:>6} {u['mean_mbps']:9.3f} {u['median_mbps']:9.3f} {u['p5_mbps']:9.3f} "
              f"{u['p95_mbps']:9.3f}  {u['zero_capacity_fraction'] * 100:.1f} %")
    print(f"(rates in Mbit/s; percentiles over {s['window_s']:g} s windows)")


def _print_log_summary(s: dict) -> None:
    print("format      linklog")
    print(f"duration    {s['duration_s']:.3f} s")
    print(f"capacity    {s['capacity_mbps']:.3f} Mbit/s average")
    print(f"throughput  {s['throughput_mbps']:.3f} Mbit/s average "
          f"({fmt_or_missing(s['utilization'] and s['utilization'] * 100, '.1f')} % utilisation)")
    print(f"delay       mean {fmt_or_missing(s['delay_ms_mean'], '.1f')} ms, 95th percentile "
          f"{fmt_or_missing(s['delay_ms_p95'], '.0f')} ms")
    print(f"drops       {s['drops_packets']} packets, {s['drops_bytes']} bytes")


def cmd_info(args) -> int:
    from airlink.traces.stats import linklog_summary, trace_summary
    fmt = T.detect_format(args.file, args.format) if args.file.exists() else None
    if fmt == "linklog":
        s = linklog_summary(T.read_log(args.file))
        print_json(s) if args.json else _print_log_summary(s)
        return 0
    tr = T.read_trace(args.file, args.format, opportunity_bytes=args.opportunity_bytes)
    s = trace_summary(tr, float(args.window))
    print_json(s) if args.json else _print_trace_summary(s)
    return 0


def cmd_convert(args) -> int:
    tr = T.read_trace(args.input, args.src_format, opportunity_bytes=args.opportunity_bytes)
    dst = args.dst_format or ("parquet" if args.output.suffix.lower() in (".parquet", ".pq") else "mahimahi")
    T.write_trace(tr, args.output, dst, user=args.user, opportunity_bytes=args.opportunity_bytes)
    print(f"wrote {args.output} ({dst}, {tr.n_tti} TTIs of {tr.tti_ms:g} ms)")
    return 0


def cmd_constant(args) -> int:
    tr = T.constant(args.rate, args.duration, args.tti)
    T.write_trace(tr, args.output, opportunity_bytes=args.opportunity_bytes)
    print(f"wrote {args.output}: {T.format_rate(args.rate)} for {float(args.duration):g} s")
    return 0


def cmd_plot(args) -> int:
    from airlink.traces.plot import plot_linklog, plot_trace
    fmt = T.detect_format(args.file, args.format) if args.file.exists() else None
    if fmt == "linklog":
        s = plot_linklog(T.read_log(args.file), args.output,
                         bin_ms=float(args.bin) * 1000 if args.bin else 500.0)
        _print_log_summary(s)
    else:
        tr = T.read_trace(args.file, args.format, opportunity_bytes=args.opportunity_bytes)
        s = plot_trace(tr, args.output, bin_s=float(args.bin) if args.bin else 0.1)
        _print_trace_summary(s)
    print(f"wrote {args.output}")
    return 0


DEFAULT_COLUMNS = {"nrscope": ["tbs_bytes"], "icellspeed": ["tbs_bps"], "xcal": ["tbs_bytes"],
                   "iperf3": ["throughput_bps"], "throughput-trace": ["throughput_bps"]}
DEFAULT_COMPARE = {"icellspeed": "throughput_bps"}


def _read_log(args):
    """The log as a frame: through the collectors (sniffed, or --format/--mapping), or a plain
    CSV with only --time-column and the named columns."""
    from airlink import collectors as C
    if args.time_column and args.mapping is None and args.format in (None, "csv"):
        import pandas as pd
        if not args.log.exists():
            raise T.AirlinkError(f"{args.log}: no such file")
        try:
            head = pd.read_csv(args.log, nrows=5, sep=None, engine="python")
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            raise T.AirlinkError(f"{args.log}: cannot parse as a table ({str(exc).splitlines()[0]})") from None
        if args.time_column not in head.columns:
            raise T.AirlinkError(f"{args.log}: no column {args.time_column!r} "
                                 f"(it has {', '.join(map(str, head.columns[:12]))})")
        numeric = pd.to_numeric(head[args.time_column], errors="coerce").notna().all()
        tspec = {"column": args.time_column, **({"unit": "s"} if numeric else {"format": "ISO8601"})}
        cols = list(dict.fromkeys((args.column or []) + ([args.compare] if args.compare else [])))
        mapping = {"kind": "rf", "time": tspec, "columns": {c: {"name": c, "scale": 1.0} for c in cols},
                   "dedupe": "none"}
        return C.read(args.log, format="csv", mapping=mapping)
    kw = {"mapping": args.mapping} if args.mapping is not None else {}
    return C.read(args.log, format=args.format, **kw)


def _usable_columns(frame) -> list:
    """Columns a trace can be made of without saying their unit: a unit suffix (``_bps``,
    ``_bytes``, ...) and at least one value."""
    import pandas as pd
    from airlink.traces.fromlog import SUFFIX_UNITS
    out = []
    for c in frame.columns:
        if str(c).lower().endswith(tuple(SUFFIX_UNITS)) and pd.api.types.is_numeric_dtype(frame[c]) \
                and frame[c].notna().any():
            out.append(str(c))
    return out


def _default_columns(frame, reader, log) -> list:
    """The reader's transport-block column when it has values, else the one usable column;
    several usable columns are an error naming them."""
    preferred = [c for c in DEFAULT_COLUMNS.get(reader, ["tbs_bytes", "tbs_bps"])
                 if c in frame.columns and frame[c].notna().any()]
    if preferred:
        return preferred[:1]
    usable = _usable_columns(frame)
    if len(usable) == 1:
        return usable
    if usable:
        raise T.AirlinkError(f"{log}: read as {reader}; several columns would work, choose one with --column: "
                             f"{', '.join(usable)}")
    raise T.AirlinkError(f"{log}: read as {reader}; no column has a unit in its name: say which column holds "
                         f"transport blocks or throughput (--column, with --unit; it has "
                         f"{', '.join(map(str, frame.columns[:16]))})")


def _session_path(output: Path, k: int) -> Path:
    suffix = "".join(output.suffixes[-1:])
    return output.with_name(f"{output.name[:len(output.name) - len(suffix)]}-s{k}{suffix}")


def cmd_from_log(args) -> int:
    import pandas as pd
    from airlink.collectors.nrscope import select_direction
    frame = _read_log(args)
    reader = frame.attrs.get("reader", args.format or "?")
    if "time_axis" in frame.attrs and frame.attrs["time_axis"] is None:
        raise T.AirlinkError(f"{args.log}: read as {reader}; a trace needs times: {frame.attrs.get('note', '')}")
    columns = args.column or _default_columns(frame, reader, args.log)
    frame = select_direction(frame, args.direction)
    opts = dict(unit=args.unit, user=args.user, tti=args.tti, source=str(args.log), gaps=args.gaps,
                fill_limit=args.fill_limit)
    column = columns if len(columns) > 1 else columns[0]
    if args.split_sessions is None:
        traces = [(args.output, T.from_log(frame, column=column, **opts, start=args.start, duration=args.duration))]
    else:
        found = T.from_log_sessions(frame, column=column, gap=args.split_sessions, start=args.start,
                                    duration=args.duration, **opts)
        traces = [(_session_path(args.output, tr.meta["session"]["number"]), tr) for tr in found]
    other = args.compare or (DEFAULT_COMPARE.get(reader) if not args.column else None)
    results = []
    for path, tr in traces:
        if frame.attrs.get("direction"):
            tr.meta["direction"] = frame.attrs["direction"]
        comparison = None
        if other and other not in columns and other in frame.columns and frame[other].notna().any():
            span = {"start": pd.Timestamp(tr.meta["start_ns"], tz="UTC"), "duration": tr.duration}
            b = T.from_log(frame, column=other, **{**opts, "tti": tr.tti, **span})
            try:
                comparison = T.compare(tr, b, max_lag=args.max_lag).to_dict()
            except T.AirlinkError as exc:       # a session of a few rows: the trace is still written
                comparison = {"a": tr.meta["column"], "b": other, "cannot_tell": str(exc)}
            tr.meta["comparison"] = comparison
        results.append((path, tr, comparison))
    for path, tr, _ in results:
        T.write_trace(tr, path, opportunity_bytes=args.opportunity_bytes)
    outs = [_from_log_summary(args, reader, path, tr, comparison) for path, tr, comparison in results]
    if args.json:
        print_json(outs[0] if args.split_sessions is None else {"sessions": outs})
        return 0
    if args.split_sessions is not None:
        print(f"{len(outs)} session(s): a silence over {float(args.split_sessions):g} s ends one")
    for (path, tr, comparison), out in zip(results, outs):
        _print_from_log(args, reader, tr, out)
    if args.split_sessions is None and not args.json:
        _note_sessions(frame, results[0][1])
    return 0


def _note_sessions(frame, tr) -> None:
    """Say so when silences longer than a session make much of the trace zero capacity."""
    import numpy as np
    from airlink.traces.fromlog import DEFAULT_SESSION_GAP
    zero = tr.meta["gaps"].get("filled_s", {}).get("zero", 0.0)
    if zero > 0.5 * float(tr.duration):
        t = np.unique(frame["time"].array.asi8)
        long = int((np.diff(t) > DEFAULT_SESSION_GAP * 10**9).sum())
        print(f"note        {zero / float(tr.duration) * 100:.0f} % of the trace is zero capacity for want of "
              f"rows ({long} silence(s) over {float(DEFAULT_SESSION_GAP):g} s): --split-sessions writes one "
              f"trace per session")


def _from_log_summary(args, reader, path, tr, comparison) -> dict:
    import pandas as pd
    m = tr.meta
    out = {"output": str(path), "source": str(args.log), "reader": reader, "column": m["column"],
           "unit": m["unit"], "user": m["user"], "tti_ms": tr.tti_ms, "tti_from": m["tti_from"],
           "n_tti": tr.n_tti, "duration_s": float(tr.duration),
           "mean_mbps": float(tr.mean_rate_bps()[0] / 1e6), "rows": m["rows"], "gap_s": m["gap_s"],
           "gaps": m["gaps"], "start": str(pd.Timestamp(int(m["start_ns"]), tz="UTC")),
           "rule": m["rule"], "carriers": m["carriers"],
           "harq_retransmission_ratio": m.get("harq_retransmission_ratio"), "comparison": comparison}
    if "session" in m:
        out["session"] = m["session"]["number"]
    return out


def _print_from_log(args, reader, tr, out) -> None:
    m = tr.meta
    print(f"wrote {out['output']}: {tr.n_tti} TTIs of {tr.tti_ms:g} ms ({out['tti_from']}), "
          f"{out['duration_s']:.3f} s from {out['start']}, mean {out['mean_mbps']:.3f} Mbit/s")
    if "session" in out:
        return print(f"            {m['rows']} rows; gaps: {_gap_text(m['gaps'])}")
    print(f"from        {args.log} ({reader}), column {m['column']} in {m['unit']}, user {m['user']}, "
          f"{m['rows']} rows")
    print(f"rule        {m['rule']}; {m['carriers']}")
    print(f"gaps        {_gap_text(m['gaps'])}")
    if m["gap_s"]:
        print(f"            {m['gap_s']:.3f} s without rows (zero capacity)")
    if out["harq_retransmission_ratio"] is not None:
        print(f"HARQ        {out['harq_retransmission_ratio'] * 100:.1f} % of this user's DCIs are "
              f"retransmissions (left out: no new bytes)")
    c = out["comparison"]
    if c and c.get("cannot_tell"):
        print(f"compare     {c['a']} / {c['b']}: cannot tell: {c['cannot_tell']}")
    elif c:
        print(f"compare     {c['a']} / {c['b']}: mean ratio {c['mean_ratio']:.3f}; correlation "
              f"{c['corr_0']:.2f} unshifted, {c['corr_best']:.2f} with {c['b']} shifted by "
              f"{c['best_lag_s']:+g} s (positive: {c['b']} trails)")
        print(f"            over the {c['measured_ttis'] * c['tti_s']:g} s both columns measured; "
              f"{c['filled_left_out'] * c['tti_s']:g} s filled over gaps left out")


def _gap_text(g: dict) -> str:
    if "gaps" not in g:
        return g["rule"]
    if not g["gaps"]:
        return f"none (rule {g['rule']})"
    filled = ", ".join(f"{n} TTIs {rule}" for rule, n in g["filled_ttis"].items())
    return f"{g['gaps']} gap(s), rule {g['rule']} up to {g['fill_limit_s']:g} s: filled {filled}"
