"""``airlink report OUTDIR``: write the self-contained report page of a run folder."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, print_json


def register(sub):
    p = add_parser(sub, "report", "write report.html for a run folder",
                   "Build one self-contained static page (figures embedded, no scripts, no external "
                   "URLs) from the artifacts in OUTDIR: TCP time-sequence graph, goodput against "
                   "trace capacity, RTT and packets in flight, queue backlog, NMI against lag per "
                   "factor with the surrogate threshold, the factor table, fairness and jitter, and "
                   "the run's parameters. Sections whose inputs are missing say so.",
                   "airlink report results/pf-cell")
    p.add_argument("outdir", type=Path, help="run folder (from airlink run, simulate, collect, ...)")
    p.add_argument("-o", "--output", type=Path, help="page to write (default OUTDIR/report.html)")
    p.add_argument("--title", help="page title (default: the run's name)")
    p.add_argument("--json", action="store_true", help="print {\"report\": PATH} as JSON")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    import sys

    from airlink.report import write_report
    from airlink.rundir import interrupted_note
    note = interrupted_note(args.outdir)
    if note:
        print(f"airlink: warning: {note}", file=sys.stderr)
    path = write_report(args.outdir, output=args.output, title=args.title)
    if args.json:
        print_json({"report": str(path)})
    else:
        print(f"wrote {path}")
    return 0
