"""``airlink trace info|convert|constant|plot``: inspect, convert, make and plot capacity traces."""
from __future__ import annotations

from pathlib import Path

from airlink import traces as T
from airlink.cli._common import add_parser, print_json, typed

FORMATS = ["mahimahi", "parquet"]


def register(sub):
    p = sub.add_parser("trace", help="inspect, convert, create and plot capacity traces",
                       description="Capacity traces: Mahimahi text (one ms timestamp per delivery "
                                   "opportunity) or airlink Parquet (bytes per TTI, any TTI length).")
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    q = add_parser(tsub, "info", "summarise a trace or link log",
                   "Format, TTI, users, duration, mean/median/p5/p95 rate (Mbit/s, percentiles over "
                   "1 s windows) per user and the fraction of TTIs with zero capacity. For an mm-link "
                   "or airlink link log: average capacity, throughput, utilisation and delays.",
                   "airlink trace info ../shared/data/mahimahi-traces/TMobile-LTE-short.down --json")
    q.add_argument("file", type=Path)
    q.add_argument("--format", choices=FORMATS + ["linklog"], help="default: from extension and content")
    q.add_argument("--opportunity-bytes", type=int, default=T.DEFAULT_OPPORTUNITY_BYTES,
                   help="bytes per Mahimahi opportunity (1500; 1504 matches mm-link's accounting)")
    q.add_argument("--window", type=typed(T.parse_duration), default="1s",
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
    c.add_argument("--opportunity-bytes", type=int, default=T.DEFAULT_OPPORTUNITY_BYTES,
                   help="bytes per Mahimahi opportunity (1500; 1504 matches mm-link's accounting)")
    c.set_defaults(func=cmd_convert)

    k = add_parser(tsub, "constant", "write a constant-rate trace",
                   "A constant-rate link: RATE (e.g. 48Mbps, 500kbps) for --duration at --tti. "
                   "The output format comes from the extension.",
                   "airlink trace constant 48Mbps --duration 10s -o 48mbps.down")
    k.add_argument("rate", type=typed(T.parse_rate))
    k.add_argument("--duration", type=typed(T.parse_duration), default="1s",
                   help="length of the trace before it loops (default 1s)")
    k.add_argument("--tti", type=typed(T.parse_tti), default="1ms", help="TTI length (default 1ms)")
    k.add_argument("-o", "--output", type=Path, required=True)
    k.add_argument("--opportunity-bytes", type=int, default=T.DEFAULT_OPPORTUNITY_BYTES)
    k.set_defaults(func=cmd_constant)

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
    g.add_argument("--bin", type=typed(T.parse_duration), default=None,
                   help="bin width (default 100ms for traces, 500ms for logs)")
    g.add_argument("--opportunity-bytes", type=int, default=T.DEFAULT_OPPORTUNITY_BYTES)
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
    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)
    print("format      linklog")
    print(f"duration    {s['duration_s']:.3f} s")
    print(f"capacity    {s['capacity_mbps']:.3f} Mbit/s average")
    print(f"throughput  {s['throughput_mbps']:.3f} Mbit/s average "
          f"({fmt(s['utilization'] and s['utilization'] * 100, '.1f')} % utilisation)")
    print(f"delay       mean {fmt(s['delay_ms_mean'], '.1f')} ms, 95th percentile "
          f"{fmt(s['delay_ms_p95'], '.0f')} ms")
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
