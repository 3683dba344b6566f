"""``airlink run EXPERIMENT.yaml -o OUTDIR``: the whole loop from one experiment file."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_overwrite, add_parser, output_folder_option, parse_sets, print_json


def register(sub):
    p = add_parser(sub, "run", "run an experiment file: simulate, replay, capture, collect, infer, report",
                   "Run the stages of an experiment file in order: radio (simulate a preset with "
                   "overrides, or read a measured trace) -> live (the shells with the applications "
                   "inside, tcpdump inside the namespace and on the host) -> collect -> infer -> "
                   "report. Everything lands in OUTDIR with the experiment file as run, versions.json, "
                   "run.json and manifest.json (every artifact, and whether the run finished). "
                   "OUTDIR is resolved once (links, ..) and locked while the run works; a non-empty "
                   "OUTDIR is refused unless --overwrite and it holds an earlier run's manifest.json; "
                   "files that were there before are never replaced, and under sudo only what the run "
                   "created is given to the invoking user. SIGTERM ends a run like Ctrl-C (manifest "
                   "failed). The live stage needs root and network namespaces; without them it "
                   "says why and the offline stages run on what exists. A cell: section runs several UEs "
                   "that share one live scheduled downlink (airlink cell), each with its own applications, "
                   "instead of replaying one user's capacity.",
                   "sudo airlink run examples/pf-cell.yaml -o results/pf-cell\n"
                   "sudo airlink run examples/cell.yaml -o results/cell --set cell.set.pf_a=0.01\n"
                   "airlink run examples/lte-cubic-bbr.yaml -o results/lte --trace TMobile-LTE-short.down\n"
                   "airlink run examples/backlog-onoff.yaml -o results/backlog --set radio.seed=4")
    p.add_argument("experiment", type=Path, help="experiment file (YAML); see examples/")
    p.add_argument("-o", "--output", type=Path, help="output folder (default results/<name>)")
    p.add_argument("--trace", help="replay this measured trace instead of the file's radio section")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a value of the file by dotted key, e.g. radio.seed=3 (repeatable)")
    live = p.add_mutually_exclusive_group()
    live.add_argument("--offline", action="store_true", help="skip the live stage")
    live.add_argument("--live", action="store_true", help="fail unless the live stage can run")
    add_overwrite(p)
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--quiet", action="store_true", help="no stage lines on stderr")
    p.add_argument("--json", action="store_true", help="print run.json (stages, results, notes)")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from airlink.experiment import load_experiment, run_experiment
    overrides = parse_sets(args.set)
    exp = load_experiment(args.experiment, overrides=overrides)
    if args.trace:
        if not exp.resolve(args.trace).exists():
            from airlink.traces import AirlinkError
            raise AirlinkError(f"--trace {args.trace}: no such trace file")
        radio = {k: v for k, v in (exp.spec.get("radio") or {}).items() if k in ("user",)}
        radio["trace"] = args.trace
        exp.spec["radio"] = radio
        exp.check()
    out = args.output or Path("results") / exp.name
    live = True if args.live else (False if args.offline else None)
    with output_folder_option("-o" if args.output else "the default output folder",
                              overwrite=not args.overwrite):
        result = run_experiment(exp, out, live=live, progress=not args.quiet, report=not args.no_report,
                                overwrite=args.overwrite)
    out = result.outdir
    info = result.info
    if args.json:
        print_json(info)
        return 0 if all(s["status"] != "failed" for s in info["stages"]) else 1
    for s in info["stages"]:
        note = f" - {s['note']}" if s.get("note") else ""
        print(f"{s['name']:8s} {s['status']:8s} {s['seconds']:6.1f} s{note}")
    if (out / "report.html").exists():
        print(f"report: {out / 'report.html'}")
    return 0 if all(s["status"] != "failed" for s in info["stages"]) else 1
