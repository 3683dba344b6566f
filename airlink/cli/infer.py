"""``airlink infer nmi|fairness|backlog|jitter|scheduler``: what drives a scheduler, from frames."""
from __future__ import annotations

import sys
from pathlib import Path

from airlink.cli._common import add_parser, bounded, fmt_or_missing, print_json, with_flag_hints, with_unit
from airlink.core import bounds as B


def _duration(text):
    from airlink.traces import parse_duration
    return parse_duration(text)


#: a duration option's text: with its unit (a bare number could mean seconds or samples)
DURATION = with_unit(_duration, "10s or 200ms")


def register(sub):
    from airlink.cli import Formatter
    p = sub.add_parser("infer", help="NMI factor ranking, fairness, backlog dependence, jitter, scheduler id, PF parameters",
                       description="Inference on measured or simulated frames (Parquet/CSV with a time "
                                   "column or index; per-user frames have a user column).",
                       formatter_class=Formatter,
                       epilog="examples:\n"
                              "  airlink infer nmi mac.parquet --target assigned_rate_bps --factor backlog_bytes "
                              "--factor sinr_db --max-lag 2s\n"
                              "  airlink infer scheduler mac.parquet --json")
    isub = p.add_subparsers(dest="infer_command", metavar="ACTION", required=True)

    n = _action(isub, "nmi", "rank factors of a target by peak time-shifted NMI",
                "Peak normalized mutual information I_N(target; factor; d) = (H(X)+H(Y)-H(X,Y_d))/H(X) "
                "over lags |d| <= --max-lag (Mattar et al.), per factor, with a circular-shift surrogate "
                "p-value and threshold, a bias-corrected value and a block-bootstrap interval. A "
                "positive lag means the factor leads the target; lags are given in seconds and in "
                "grid steps, and a peak at +-max-lag is flagged (the true peak may lie beyond). The "
                "FRAME is first put on a regular grid made from its timestamps (--resolution), so "
                "gaps and irregular rows do not shift lags; several FRAMEs share the first one's grid.",
                "airlink infer nmi mac.parquet --target assigned_rate_bps --factor backlog_bytes "
                "--factor sinr_db --max-lag 2s --surrogates 200\n"
                "airlink infer nmi B_2019.12.16_13.40.04.csv --time-column Timestamp --resolution 1s "
                "--target DL_bitrate --factor SNR --factor RSRQ --max-lag 10s")
    n.add_argument("--target", required=True, help="column being explained (X)")
    n.add_argument("--factor", action="append", required=True, help="candidate factor column (Y); repeat")
    bounded(n, "--max-lag", bound=B.MAX_LAG, parse=DURATION, keep_text=True, default=B.NMI_MAX_LAG,
            help=f"largest |lag|, a duration (default {B.NMI_MAX_LAG})")
    _bins(n)
    n.add_argument("--binning", choices=["uniform", "quantile", "levels"], default="uniform",
                   help="uniform: equal-width over the observed range (default); integer series with "
                        "at most --bins levels keep their levels")
    n.add_argument("--normalization", default="x",
                   help="x (the paper's, by H(target)), y, arithmetic, geometric, min, max, joint, none")
    _surrogates(n)
    bounded(n, "--bootstrap", bound=B.BOOTSTRAP, default=B.NMI_BOOTSTRAP,
            help=f"bootstrap resamples for the interval (default {B.NMI_BOOTSTRAP})")
    n.add_argument("--user", help="analyse one user of a per-user frame (default: all users pooled)")
    bounded(n, "--seed", bound=B.SEED, default=0, help="seed of the surrogates and resamples (default 0)")
    _json_grid_and_run(n, cmd_nmi, "print a JSON list, one object per factor")

    f = _action(isub, "fairness", "fairness gap, Jain's index, resource fractions, ratios per user",
                "Fairness over the whole run (and per --window): fairness gap (max-min)/min, Jain's "
                "index, min/max resource-fraction ratio; per user mean rate, share, selection, "
                "active-time and retransmission ratios.",
                "airlink infer fairness sim/mac.parquet --window 1s --json")
    f.add_argument("--rate", help="throughput column (default: assigned_rate_bps, served_bytes, tbs_bps, ...)")
    f.add_argument("--resource", help="resource column (default: subchannels or prbs)")
    bounded(f, "--window", bound=B.WINDOW, parse=DURATION, keep_text=True, help="also per window of this length, e.g. 1s")
    _json_grid_and_run(f, cmd_fairness)

    b = _action(isub, "backlog", "does the assigned rate follow the backlog or the channel?",
                "Backlog dependence (Mattar et al. Sec. 4): peak NMI(rate; backlog) vs NMI(rate; channel) "
                "with p-values, the assigned-rate vs sending-rate curve, the sending rate at which "
                "throttling begins and the response lag of the rate to bursts.",
                "airlink infer backlog sim/mac.parquet --max-lag 2s")
    b.add_argument("--rate", help="assigned rate column (default assigned_rate_bps, served_bytes, ...)")
    b.add_argument("--backlog", default="backlog_bytes")
    b.add_argument("--channel", help="channel quality column (default sinr_reported_db, sinr_db, snr_db, cqi, ...)")
    b.add_argument("--sending", help="sending-rate column (sending_rate_bps, or arrivals_bytes per sample)")
    bounded(b, "--window", bound=B.WINDOW, parse=DURATION, keep_text=True, default=B.BACKLOG_WINDOW,
            help=f"window for the rate curve (default {B.BACKLOG_WINDOW})")
    bounded(b, "--max-lag", bound=B.MAX_LAG, parse=DURATION, keep_text=True, default=B.BACKLOG_MAX_LAG,
            help=f"largest |lag| (default {B.BACKLOG_MAX_LAG})")
    _bins(b)
    _surrogates(b)
    _json_grid_and_run(b, cmd_backlog)

    j = _action(isub, "jitter", "inter-service gaps per user",
                "Scheduling jitter (the EV-DO study): gaps between consecutive services of each user: "
                "count, mean, std, coefficient of variation and max, in seconds.",
                "airlink infer jitter sim/mac.parquet --json")
    j.add_argument("--served", help="column > 0 when served (default served_bytes, subchannels, prbs, ...)")
    _json_grid_and_run(j, cmd_jitter)

    s = _action(isub, "scheduler", "which scheduler explains the trace?",
                "Classify the scheduler (rr, maxcir, pf, backlog) from what a measurement sees: "
                "per-user allocation (rate or PRBs), channel quality and backlog where known. The "
                "model is trained on simulated cells on first use and cached under "
                "$AIRLINK_CACHE or ~/.cache/airlink; its held-out accuracy is printed with it. "
                "For PF it also estimates the averaging time constant. It names the series it took "
                "as users (one phone's carrier-aggregation cells are not competing users) and says "
                "'cannot tell', with the reasons, on data unlike the per-TTI cells it learned from "
                "(per-second samples, too few users, no channel column).",
                "airlink infer scheduler sim/mac.parquet --json\n"
                "airlink infer scheduler data_310410.csv --alloc pcell_sum_nRB --channel pcell_snr")
    s.add_argument("--alloc", help="allocation column (default prbs, subchannels, served_bytes, assigned_rate_bps)")
    s.add_argument("--channel", help="channel column (default sinr_reported_db, sinr_db, snr_db, cqi)")
    s.add_argument("--backlog", help="backlog column, if known (default backlog_bytes when present)")
    s.add_argument("--retrain", action="store_true", help="train the model again instead of using the cache")
    _json_grid_and_run(s, cmd_scheduler)
    __import__("airlink.cli.infer_cell", fromlist=["register"]).register(isub)   # airlink infer cell
    __import__("airlink.cli.infer_pf", fromlist=["register"]).register(isub)     # airlink infer pf


def _action(isub, name, summary, description, example):
    """An action's parser with the FRAME arguments every action of this module reads (all put
    on one grid); :func:`_json_grid_and_run` closes it."""
    p = add_parser(isub, name, summary, description, example)
    p.add_argument("frames", nargs="+", type=Path, metavar="FRAME")
    return p


def _bins(p):
    bounded(p, "--bins", bound=B.BINS, default=B.NMI_BINS, help=f"bins per series (default {B.NMI_BINS})")


def _surrogates(p):
    bounded(p, "--surrogates", bound=B.SURROGATES, default=B.NMI_SURROGATES,
            help=f"circular-shift surrogates for the p-values (0: off; default {B.NMI_SURROGATES})")


def _json_grid_and_run(p, func, json_help="print one JSON document instead of the text"):
    """What closes every action's options: ``--json``, the time grid's group, the handler."""
    p.add_argument("--json", action="store_true", help=json_help)
    _grid_options(p)
    p.set_defaults(func=with_flag_hints(func))


def _grid_options(p):
    g = p.add_argument_group("time grid (every FRAME is put on one regular grid before any analysis)")
    bounded(g, "--resolution", bound=B.RESOLUTION, parse=DURATION, keep_text=True, help="grid step, e.g. 1s or 20ms (default: the median spacing of the "
                                        "FRAME's timestamps); rows in one step are summed (bytes, counts), "
                                        "averaged (dB, rates) or the last kept (states, ids); steps with "
                                        "no row stay missing")
    g.add_argument("--time-column", metavar="NAME",
                   help="the time column (default: time, timestamp, seconds_since_epoch or time_s); epoch "
                        "s/ms/us/ns, ISO 8601 or YYYY.MM.DD_hh.mm.ss (UCC); naive times in --tz")
    g.add_argument("--tz", metavar="ZONE", help="zone of naive (local) times, e.g. Europe/Dublin for UCC "
                                                "logs (default UTC)")
    g.add_argument("--direction", choices=["dl", "ul", "both"], default="dl",
                   help="grants of an allocation log (NR-Scope DCIs) to analyse: dl (default), ul, or "
                        "both as separate series; such a log is also put on its slot (1 ms at 15 kHz) "
                        "and its rate is the transport block size, unless --resolution/--rate say else")
    g.add_argument("--by", action="append", metavar="COLUMN",
                   help="one series per value of COLUMN (e.g. carrier, flow, direction), pooled like "
                        "users; repeat for several. Without it such a column holding several values is "
                        "an error")


def _read(args, *columns, sparse=False, only_columns=False, may_read=(), tables=None):
    """The FRAMEs on one grid; ``only_columns``: ``columns`` (and those of ``may_read`` a
    FRAME has) are all the command reads; ``tables``: the FRAMEs as already read (see
    :func:`airlink.inference.read_frames`)."""
    from airlink import inference as inf
    # nmi's --user: grid that series only (a 137-RNTI log would be 137 series of every slot)
    return inf.read_frames(args.frames, resolution=args.resolution, time_column=args.time_column, tz=args.tz,
                           by=args.by, columns=[c for c in columns if c], direction=args.direction, sparse=sparse,
                           user=getattr(args, "user", None), only_columns=only_columns, may_read=may_read,
                           tables=tables)


def _grid_line(frame) -> str:
    a = frame.attrs
    from airlink.inference.frames import user_order
    users = sorted(set(map(str, frame["user"])), key=user_order) if "user" in frame.columns else []
    series = f"; series: {', '.join(users)}" if users else ""
    alloc = a.get("allocation") or {}
    chosen = f"\nallocation log: {'; '.join(alloc['notes'])}" if alloc.get("notes") else ""
    # a sparse grid holds only its occupied steps and implies the empty ones
    points = len(frame) + a.get("empty_bins", 0) if a.get("sparse") else len(frame)
    # every series spans the grid's steps: per series they are points / series
    size = f"{points // len(users)} steps x {len(users)} series, {a.get('empty_bins', 0)} of the {points} " \
        if len(users) > 1 else f"{points} steps, {a.get('empty_bins', 0)} "
    return (f"grid {fmt_or_missing(a.get('resolution_s'), 'g')} s: {size}without a row (missing), "
            f"{a.get('merged_rows', 0)} row(s) merged into a shared step{series}{chosen}")


def cmd_nmi(args) -> int:
    from airlink import inference as inf
    frame = _read(args, args.target, *args.factor, only_columns=True)
    table = inf.rank_factors(frame, target=args.target, factors=args.factor, max_lag=args.max_lag,
                             bins=args.bins, binning=args.binning, normalization=args.normalization,
                             surrogates=args.surrogates, bootstrap=args.bootstrap, user=args.user,
                             seed=args.seed, progress=sys.stderr.isatty())
    if args.json:
        print_json(table.to_dict(orient="records"))
        return 0
    a = table.attrs
    print(_grid_line(frame))
    print(f"target {args.target}: peak I_N over |lag| <= {a['max_lag']} samples "
          f"({fmt_or_missing(a['max_lag'] * a['sample_period_s'], 'g')} s), {args.bins} {args.binning} bins, "
          f"{args.surrogates} circular-shift surrogates")
    print(f"{'factor':<24} {'peak_nmi':>8} {'lag_s':>9} {'pairs':>7} {'p_value':>8} {'thresh':>7} "
          f"{'corrected':>9}  interval (95%)")
    for g in a.get("dropped_groups") or []:
        print(f"left out of the pooled estimate and its surrogate test: group {g['group']} "
              f"({g['samples']} values; a group needs {g['needed']})")
    for r in table.itertuples():
        print(f"{r.factor:<24} {r.peak_nmi:8.3f} {fmt_or_missing(r.lag_s, '9.3g')} {r.n_pairs:7d} {fmt_or_missing(r.p_value, '8.3f')} "
              f"{fmt_or_missing(r.threshold, '7.3f')} {fmt_or_missing(r.bias_corrected, '9.3f')}  "
              f"[{fmt_or_missing(r.ci_low)}, {fmt_or_missing(r.ci_high)}]" + ("  <- at the edge of the lag range" if r.at_edge else ""))
        if r.cannot_tell:
            print(f"{'':<24} cannot tell: {r.cannot_tell}")
    print("positive lag: the factor leads the target")
    from airlink.inference.surrogates import TOO_FEW_PAIRS
    if any(TOO_FEW_PAIRS in (r or "") for r in table["cannot_tell"]):
        print(f"cannot tell from too few pairs: fewer --bins (--bins 8 has at most 64 cells, {args.bins} "
              f"has {args.bins * args.bins}), a finer --resolution where the data has it, or a longer "
              f"recording give more pairs per cell")
    if table["at_edge"].any():
        print("a peak at the edge of the lag range may lie beyond it: widen --max-lag")
    return 0


def cmd_fairness(args) -> int:
    from airlink import inference as inf
    frame = _read(args, args.rate, args.resource, sparse=True)     # fairness reads per-user tables only
    rep = inf.fairness_report(frame, rate=args.rate, resource=args.resource, window=args.window)
    if args.json:
        out = rep.to_dict()
        if not args.window:
            out.pop("windows", None)
        print_json(out)
        return 0
    o = rep["overall"]
    print(_grid_line(frame))
    if o.get("note"):
        print(o["note"])
    print(f"{o['users']} users, rate column {o['rate']}, resource {o['resource']}, {o['samples']} samples")
    if o.get("overlap"):
        print(f"compared over the {o['overlap']['seconds']:g} s in which all were active "
              f"({o['overlap']['start']} to {o['overlap']['end']})")
    if o.get("cannot_tell"):
        print(f"fairness: cannot tell: {o['cannot_tell']}")
        return 0
    print(f"fairness gap (max-min)/min   {fmt_or_missing(o['fairness_gap'])}")
    print(f"Jain's index                 {fmt_or_missing(o['jain_index'])}")
    print(f"min/max resource fraction    {fmt_or_missing(o['min_max_resource_ratio'])}")
    if o.get("caution"):
        print(f"caution: {o['caution']}")
    print(rep["users"].to_string(float_format=lambda v: f"{v:.4g}"))
    if args.window and not rep["windows"].empty:
        w = rep["windows"]
        print(f"per {args.window}: Jain's index mean {fmt_or_missing(w['jain_index'].mean())}, "
              f"min {fmt_or_missing(w['jain_index'].min())}; fairness gap median {fmt_or_missing(w['fairness_gap'].median())}")
    return 0


def cmd_backlog(args) -> int:
    from airlink import inference as inf
    from airlink.inference.analysis import BACKLOG_READ
    frame = _read(args, args.rate, args.backlog, args.channel, args.sending, only_columns=True, may_read=BACKLOG_READ)
    rep = inf.backlog_dependence(frame, rate=args.rate, backlog=args.backlog, channel=args.channel,
                                 sending=args.sending, bins=args.bins, window=args.window,
                                 max_lag=args.max_lag, surrogates=args.surrogates)
    if args.json:
        print_json(rep.to_dict())
        return 0
    nb, nc = rep["nmi_backlog"], rep["nmi_channel"]
    print(_grid_line(frame))
    print(f"NMI({rep['rate']}; {rep['backlog']}) = {nb['peak_nmi']:.3f} at lag {fmt_or_missing(nb['lag_s'], 'g')} s, "
          f"p = {fmt_or_missing(nb['p_value'])}")
    if nc:
        print(f"NMI({rep['rate']}; {rep['channel']}) = {nc['peak_nmi']:.3f} at lag {fmt_or_missing(nc['lag_s'], 'g')} s, "
              f"p = {fmt_or_missing(nc['p_value'])}")
        print("the rate follows the " + ("backlog" if rep["backlog_dominates"] else "channel")
              if rep["backlog_dominates"] is not None else f"the rate follows: cannot tell: {rep['cannot_tell']}")
    if rep["curve"]:
        print(f"assigned vs sending rate ({rep['sending']}, {args.window} windows):")
        for c in rep["curve"]:
            print(f"  {c['sending_rate_bps'] / 1e3:10.1f} kbit/s -> {c['assigned_rate_bps'] / 1e3:10.1f} kbit/s"
                  f"  ({c['windows']} windows)")
    print(f"throttling begins at     {fmt_or_missing(rep['throttle_onset_bps'] / 1e3, '.1f')} kbit/s")
    print(f"response lag to bursts   {fmt_or_missing(rep['response_lag_s'], '.4g')} s")
    return 0


def cmd_jitter(args) -> int:
    from airlink import inference as inf
    frame = _read(args, args.served, sparse=True)
    rep = inf.jitter_report(frame, served=args.served)
    table = rep.to_frame()
    if args.json:       # one row per user; with samples too coarse each row says why its gaps are null
        print_json([dict(r, cannot_tell=rep["cannot_tell"]) if rep.get("cannot_tell") else r
                    for r in rep.to_dict()["users"]])
        return 0
    print(_grid_line(frame))
    if rep.get("cannot_tell"):
        print(f"jitter: cannot tell: {rep['cannot_tell']}")
        return 0
    print(f"inter-service gaps (served = {rep['served']} > 0), seconds")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


def cmd_scheduler(args) -> int:
    from airlink import inference as inf
    frame = _read_scheduler_frames(args)
    model = inf.load_scheduler_model(retrain=args.retrain, progress=sys.stderr.isatty())
    res = inf.identify_scheduler(frame, model=model, alloc=args.alloc, channel=args.channel,
                                 backlog=args.backlog)
    if args.json:
        print_json(res)
        return 0
    if res.get("cannot_tell"):
        print(f"scheduler: cannot tell: {res['cannot_tell']}")
        _print_view(res, frame, columns=False)
        return 0
    if res["scheduler"] == "unknown":
        guess = (f"; the model's best guess would be {res['best_guess']} ({res['probability']:.2f})"
                 if res["best_guess"] else "")
        print(f"scheduler: cannot tell{guess}")
    else:
        note = "" if res["confident"] else "; not confident, treat as unknown"
        print(f"scheduler: {res['scheduler']} (probability {res['probability']:.2f}{note})")
    for r in res["reasons"]:
        print(f"  - {r}")
    _print_view(res, frame, columns=True)
    for name, p in sorted(res["probabilities"].items(), key=lambda kv: -kv[1]):
        print(f"  {name:<8} {p:.2f}")
    if res.get("pf_time_constant_s") is not None:
        print(f"PF averaging time constant ~ {fmt_or_missing(res['pf_time_constant_s'], '.3g')} s "
              f"({fmt_or_missing(res.get('pf_time_constant_tti'), '.0f')} TTI)"
              + ("" if res.get("pf_time_constant_resolved") else "; not resolved: candidates agree about equally"))
    kinds = ", ".join(f"{k} {v:.2f}" for k, v in res["model"]["heldout_by_kind"].items())
    print(f"model: {res['model']['description']}; held-out accuracy {res['model']['heldout_accuracy']:.3f} "
          f"(by view: {kinds})")
    return 0


def _print_view(res, frame, *, columns: bool) -> None:
    """What identify_scheduler looked at: view, samples, users (and the columns it took), how an
    allocation log was read and the series it did not count as users."""
    took = (" (columns: " + ", ".join(f"{k} {v}" for k, v in res["columns"].items() if v) + ")"
            if columns else "")
    print(f"{res['view']} view, {res['samples']} samples of {fmt_or_missing(res['sample_period_s'], 'g')} s; "
          f"users: {', '.join(map(str, res['users_used']))}{took}")
    alloc = frame.attrs.get("allocation") or {}
    if alloc.get("notes"):
        print(f"allocation log read as: {'; '.join(alloc['notes'])}")
    for g in res["ignored"]:
        print(f"  not a user: {g['series']}: {g['reason']}")


def _read_scheduler_frames(args):
    """The FRAMEs for ``infer scheduler``, each file read once. A per-carrier MAC log (the
    first FRAME has a ``carrier`` column of several values) is split by carrier, unless --by
    says otherwise, so that identify_scheduler can tell one device's carrier aggregation from
    competing users (and say so)."""
    from airlink.inference import scheduler as inf
    from airlink.inference.frames import read_tables
    columns = [c for c in (args.alloc, args.channel, args.backlog) if c]
    tables = read_tables(args.frames, columns, args.time_column)
    if not args.by and "carrier" in tables[0].columns and tables[0]["carrier"].nunique() > 1:
        args.by = ["carrier"]
    return _read(args, *columns, tables=tables, only_columns=True, may_read=inf.COLUMNS_READ)
