"""``airlink sweep SWEEP.yaml -o CAMPAIGN/`` and ``airlink sweep report CAMPAIGN/``."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, bounded, output_folder_option, print_json
from airlink.core import bounds as B


def register(sub):
    p = add_parser(
        sub, "sweep", "run a grid of an experiment's keys over seeds on Dask; report across the grid",
        "Run every point of a sweep file (a base experiment and a grid of its dotted keys, times "
        "the seeds) as one `airlink run` each, on Dask: a local cluster of worker processes by "
        "default, or the running scheduler given by --scheduler (start one with `dask scheduler` "
        "and `dask worker tcp://HOST:8786` on each machine). Each run lands in "
        "CAMPAIGN/runs/<point id>/ and its row in CAMPAIGN/campaign.parquet (parameters, status, "
        "key results, errors, provenance). Running the same command again runs only what is "
        "missing, failed, damaged or made from a changed experiment; an interrupted sweep resumes. "
        "A failed run is recorded with its error and the others go on (exit status 1).\n\n"
        "`airlink sweep report CAMPAIGN/` writes CAMPAIGN/report.html: per grid cell the mean "
        "and 95 % confidence interval over seeds of a result column, as a table and a figure.\n\n"
        "Sweep file:\n"
        "  experiment: ../pf-cell.yaml     # base experiment, relative to the sweep file\n"
        "  offline: true                   # only the offline stages (default: live where root)\n"
        "  grid: {radio.scheduler: [rr, maxcir, pf], radio.duration: [1s, 2s]}\n"
        "  seeds: [1, 2, 3]                # or repeat: 3; go to seed_key (default radio.seed)\n"
        "  report: {metric: summary.aggregate_throughput_mbps, x: radio.scheduler}",
        "airlink sweep examples/sweeps/quick.yaml -o campaigns/quick --workers 2\n"
        "airlink sweep examples/sweeps/quick.yaml -o campaigns/quick --scheduler tcp://10.0.0.5:8786\n"
        "airlink sweep report campaigns/quick --metric summary.jain_index")
    p.usage = ("airlink sweep SWEEP.yaml [-o CAMPAIGN] [--scheduler ADDRESS | --workers N] "
               "[--live-slots N] [--quiet] [--json]\n"
               "       airlink sweep report CAMPAIGN [-o PAGE] [--metric COLUMN] [--x KEY] [--by KEY]")
    p.add_argument("target", nargs="+", metavar="SWEEP.yaml | report CAMPAIGN",
                   help="a sweep file to run, or `report` and a campaign folder")
    p.add_argument("-o", "--output", type=Path,
                   help="campaign folder (sweep; default campaigns/<sweep name>), or the page to "
                        "write (report; default CAMPAIGN/report.html)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                        "(default: start a local cluster)")
    bounded(p, "--workers", bound=B.WORKERS, metavar="N",
                   help="worker processes of the local cluster (default: one per core, at most one per point)")
    bounded(p, "--live-slots", bound=B.WORKERS, metavar="N",
                   help="live runs one machine carries at once (default: cores // 2, at least 1)")
    p.add_argument("--metric", help="report: the result column to aggregate (default: the sweep file's, "
                                    "else app1.goodput_bps or summary.aggregate_throughput_mbps)")
    p.add_argument("--x", help="report: the swept key on the x axis")
    p.add_argument("--by", action="append", help="report: a swept key drawn as one line per value (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    from airlink.traces import AirlinkError
    target = args.target
    if target[0] == "report" and len(target) == 2:
        for flag, value in (("--scheduler", args.scheduler), ("--workers", args.workers),
                            ("--live-slots", args.live_slots)):
            if value is not None:
                raise AirlinkError(f"{flag}: only for running a sweep, not for its report")
        return _report(Path(target[1]), args)
    if len(target) != 1:
        raise AirlinkError(f"expected one sweep file or `report CAMPAIGN`, got {' '.join(target)}")
    for flag, value in (("--metric", args.metric), ("--x", args.x), ("--by", args.by)):
        if value is not None:
            raise AirlinkError(f"{flag}: only for `airlink sweep report CAMPAIGN`")
    if args.workers is not None and args.scheduler:
        raise AirlinkError("--workers: the workers are those of the scheduler given by --scheduler")
    from airlink.sweep import load_sweep, run_sweep
    sweep = load_sweep(Path(target[0]))
    out = args.output or Path("campaigns") / sweep.name
    try:
        with output_folder_option("-o" if args.output else "the default campaign folder", overwrite=False):
            result = run_sweep(sweep, out, scheduler=args.scheduler, workers=args.workers,
                               live_slots=args.live_slots, progress=not args.quiet)
    except KeyboardInterrupt as exc:        # Ctrl-C or SIGTERM (airlink.interrupts)
        import sys

        from airlink.interrupts import exit_status
        print(f"airlink sweep: interrupted; {out / 'campaign.parquet'} marks the points not run as "
              "pending - the same command resumes", file=sys.stderr)
        return exit_status(exc)
    counts = result.counts
    if args.json:
        print_json(result.to_dict())
    else:
        print(f"{out}: {len(result.frame)} point(s): "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
              + f" ({len(result.ran)} run now, {len(result.reused)} kept)")
        for r in result.frame[result.frame["status"] != "done"].itertuples():
            print(f"  {r.point_id}: {r.status}: {r.error}")
        print(f"table: {out / 'campaign.parquet'}")
    return 0 if counts.get("done", 0) == len(result.frame) else 1


def _report(campaign: Path, args) -> int:
    from airlink.sweep.report import write_sweep_report
    if not campaign.is_dir():
        from airlink.traces import AirlinkError
        raise AirlinkError(f"{campaign}: no such campaign folder")
    by = args.by
    out = write_sweep_report(campaign, output=args.output, metric=args.metric, x=args.x, by=by)
    if args.json:
        print_json({"report": str(out)})
    else:
        print(f"report: {out}")
    return 0
