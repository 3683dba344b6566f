"""``airlink simulate``: run the radio simulator and write capacity traces and a MAC log."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import (add_overwrite, add_parser, bounded, output_folder_option, parameter_sets, print_json,
                                with_unit)
from airlink.core import bounds as B
from airlink.traces import parse_duration

EXAMPLE = """\
airlink simulate --preset imt-advanced --scheduler maxcir --duration 10s --seed 3 -o out/
airlink simulate --preset evdo --scheduler lambda --lambda 2 -o evdo-l2/ --mahimahi
airlink simulate --preset 1xrtt --set traffic=cbr --set traffic_rate_bps=64000 -o cbr/ --json
airlink simulate --config my-cell.yaml --scheduler mypkg.sched:MyScheduler -o mine/
airlink simulate --preset nr-fr1 --scheduler rr --duration 5s -o nr/        # 5G NR, 273 PRBs, 0.5 ms slots
airlink simulate --preset nr-tmobile-10mhz --users 1 --set snr_db=15 -o tmo/"""


#: options that set one simulator parameter (their ``dest`` is the parameter's name in
#: :class:`airlink.sim.config.CellConfig`, which declares type, default and unit; None =
#: the preset's value)
PARAMETER_OPTIONS = ("scheduler", "lam", "pf_a", "pf_window", "n_users", "n_subchannels", "traffic",
                     "buffer_packets", "speed_kmh", "csi_delay_tti")


def register(sub):
    p = add_parser(
        sub, "simulate", "simulate a cell: fading, rate tables, HARQ, a scheduler -> traces + MAC log",
        "Simulate a cellular downlink TTI by TTI (fading channels, rate tables, HARQ with chase "
        "combining, CSI delay, link adaptation, a scheduler, traffic into per-user buffers) and "
        "write OUTDIR/capacity.parquet (bytes served per TTI per user), mac.parquet (per TTI and "
        "user), summary.json, config.yaml and, with --mahimahi, user<N>.down traces. Presets "
        "reproduce the papers' set-ups; any preset parameter can be changed with --set NAME=VALUE "
        "or a YAML file (--config). The same seed gives identical files. OUTDIR gets a "
        "manifest.json of these files; a non-empty OUTDIR is refused unless --overwrite (as for "
        "airlink run).",
        EXAMPLE)
    p.add_argument("--preset", default=None,
                   help="evdo, imt-advanced, hsdpa, egprs, 1xrtt, quick (default), 5G NR nr-fr1, nr-fr2, "
                        "nr-tmobile-10mhz, nr-tmobile-15mhz, or a YAML file")
    p.add_argument("--config", type=Path, action="append", default=[],
                   help="YAML file of parameter overrides (repeatable; later wins)")
    p.add_argument("--scheduler", help="rr, maxcir, pf, lambda, backlog, mcpfs, or a dotted path "
                                       "to your class (package.module:Class)")
    bounded(p, "--lambda", dest="lam", bound=B.LAMBDA, help="fairness exponent of --scheduler lambda")
    bounded(p, "--pf-a", bound=B.PF_A, help="PF averaging constant a (EWMA)")
    bounded(p, "--pf-window", bound=B.PF_WINDOW, help="PF averaging window t_a in TTIs (L = min(n, t_a))")
    bounded(p, "--users", dest="n_users", bound=B.USERS, help="number of users")
    bounded(p, "--subchannels", dest="n_subchannels", bound=B.SUBCHANNELS, help="number of subchannels")
    p.add_argument("--traffic", choices=["full", "cbr", "onoff", "poisson", "trace"])
    bounded(p, "--buffer", dest="buffer_packets", bound=B.BUFFER_PACKETS, help="per-user buffer in packets")
    bounded(p, "--speed", dest="speed_kmh", bound=B.SPEED_KMH, help="speed of every user in km/h")
    bounded(p, "--csi-delay", dest="csi_delay_tti", bound=B.CSI_DELAY_TTI, help="CQI feedback delay in TTIs")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                   help="any preset parameter, value in YAML syntax (e.g. --set snr_db=[10,0]); "
                        "the parameters, their defaults, units and ranges: airlink.sim.config.CellConfig")
    bounded(p, "--duration", bound=B.SIM_DURATION, parse=with_unit(parse_duration, "10s or 500ms"),
            default=None, help="simulated time (default: the preset's)")
    bounded(p, "--seed", bound=B.SEED, default=0, help="random seed (default 0)")
    p.add_argument("-o", "--output", type=Path, required=True, help="output folder")
    add_overwrite(p)
    p.add_argument("--mahimahi", action="store_true", help="also write user<N>.down Mahimahi traces")
    p.add_argument("--no-mac-log", action="store_true",
                   help="keep no per-TTI MAC log (mac.parquet is empty): memory for long runs "
                        "grows only by the capacity trace")
    p.add_argument("--json", action="store_true", help="print summary.json on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args) -> int:
    from airlink import sim
    from airlink.sim.engine import read_config_files
    args.preset, overrides = read_config_files(args.config, args.preset)
    for name in PARAMETER_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            overrides[name] = value
    overrides.update(parameter_sets(args.sets, also=("seed",)))
    if args.no_mac_log:
        overrides["mac_log"] = False
    if args.duration is not None:          # else a --config/--set duration, else the preset's
        overrides["duration"] = args.duration
    seed = overrides.pop("seed", args.seed)
    from airlink.rundir import RunFolder
    sim.check_parameters(args.preset, seed=seed, **overrides)   # bad values: nothing is created
    with output_folder_option(overwrite=not args.overwrite):
        folder = RunFolder.create(args.output, overwrite=args.overwrite, manifest=False)
    with folder.writing():
        res = sim.simulate(args.preset, seed=seed, progress=not args.no_progress, **overrides)
        with folder.staging(stage="radio") as tmp:
            res.write(tmp, mahimahi=args.mahimahi)
    out = folder.path
    if args.json:
        print_json(res.summary)
        return 0
    s = res.summary
    print(f"preset {s['preset']}, scheduler {s['scheduler']}, seed {s['seed']}: {s['n_tti']} TTIs of "
          f"{s['tti_ms']:g} ms, {s['n_users']} users x {s['n_subchannels']} subchannels")
    print(f"aggregate {s['aggregate_throughput_mbps']:.3f} Mbit/s, Jain {s['jain_index']:.3f}, "
          f"retransmission ratio {s['retransmission_ratio']:.3f}")
    print(f"{'user':>5} {'Mbit/s':>9} {'select':>7} {'active':>7} {'retx':>6} {'gap ms':>8}")
    for u in s["users"]:
        gap = u["gap_mean_ms"]
        print(f"{u['user']:>5} {u['throughput_mbps']:9.3f} {u['selection_ratio']:7.3f} "
              f"{u['active_time_ratio']:7.3f} {u['retransmission_ratio']:6.3f} "
              f"{'-' if gap is None else format(gap, '8.1f'):>8}")
    if getattr(res, "skipped_mahimahi", None):
        print(f"no Mahimahi trace for user(s) {', '.join(res.skipped_mahimahi)}: never served")
    print(f"wrote {out}/ (capacity.parquet, mac.parquet, summary.json, config.yaml"
          f"{', user<N>.down' if args.mahimahi else ''})")
    return 0
