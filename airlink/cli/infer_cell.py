"""``airlink infer cell LOG``: fairness, utilisation, gaps and a scheduler verdict from an
all-user scheduling log (NR-Scope per-slot DCIs, or airlink's own MAC log)."""
from __future__ import annotations


from airlink.cli._alloclog import add_log_arguments, read_log
from airlink.cli._common import add_parser, bounded, fmt_or_missing, print_json, with_unit
from airlink.core import bounds as B


def register(isub):
    from airlink.traces import parse_duration
    c = add_parser(isub, "cell", "how a real scheduler shared a cell, from a log of every user's allocations",
                   "From a log with every user's allocations (NR-Scope's per-slot DCI CSV, a mac frame "
                   "with time, user, prbs and optionally slot, mcs, tbs_bytes, retransmission, or the "
                   "mac.parquet of airlink simulate or airlink cell, whose subchannels are the PRBs and "
                   "whose slot and cell size come from the file): per-user "
                   "resource fraction rho_m = PRB_m / sum PRB, new bytes, mean MCS, HARQ retransmission "
                   "ratio and inter-service gaps; per --window over the users active in it: Jain's index "
                   "(sum y)^2/(n sum y^2) and the fairness gap (max-min)/min of their PRBs, and the cell's "
                   "PRB utilisation; then a verdict with its evidence: does the allocation follow the "
                   "channel (PRB share vs MCS), demand (allocations leaving PRBs unused while alone) or "
                   "turns (equal shares) - or 'cannot tell' with the reason, e.g. a cell that was rarely "
                   "full enough for users to compete. Cell PRBs default to the highest PRB any "
                   "allocation reaches; a decoder misses some DCIs, so shares and utilisation are lower "
                   "bounds.",
                   "airlink infer cell ../shared/data/nr-scope/t_mobile1_ueactivity_afternoon_1.csv\n"
                   "airlink simulate --preset nr-fr1 --duration 2s -o sim && airlink infer cell sim/mac.parquet\n"
                   "airlink infer cell night.csv --window 500ms --cell-prbs 79 --json")
    add_log_arguments(c)
    bounded(c, "--window", bound=B.WINDOW, parse=with_unit(parse_duration, "1s or 500ms"), default=B.CELL_WINDOW,
            help=f"window for active users, Jain's index and utilisation ({B.CELL_WINDOW})")
    bounded(c, "--cell-prbs", bound=B.CELL_PRBS, help="PRBs of the carrier (default: the highest PRB allocated)")
    bounded(c, "--top", bound=B.TOP, default=10, help="users listed, busiest first (10)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=cmd_cell)


def cmd_cell(args) -> int:
    from airlink.inference.cell_logs import analyze_cell
    view = read_log(args)
    frame = view.frame
    args.direction = view.direction or args.direction
    res = analyze_cell(frame, window=args.window, cell_prbs=args.cell_prbs, source=str(args.log))
    if args.json:
        print_json(res.to_dict())
        return 0
    s, v = res.summary, res.verdict
    print(f"cell        {args.log}: {s['users']} users, {s['allocations']} {args.direction} allocations "
          f"over {s['duration_s']:.1f} s ({s['slots']} slots of {s['tti_s'] * 1000:g} ms)")
    print(f"PRBs        {s['cell_prbs']} per slot; utilisation {s['prb_utilization'] * 100:.2f} %, slots with "
          f"an allocation {s['slots_with_allocation'] * 100:.2f} %, full slots {s['full_slots'] * 100:.2f} %")
    print(f"fairness    over the users active in each {s['window_s']:g} s window ({s['windows_with_2_users']} "
          f"windows with 2+ users): median Jain {fmt_or_missing(s['jain_index_median'])}, median fairness gap "
          f"{fmt_or_missing(s['fairness_gap_median'], '.2f')}")
    print(f"HARQ        {s['harq_retransmission_ratio'] * 100:.1f} % of allocations are retransmissions")
    print(f"{'user':>8} {'alloc':>6} {'share':>7} {'MB new':>8} {'MCS':>5} {'retx':>6} {'gap mean':>9} "
          f"{'gap CoV':>8} {'gap max':>8}")
    for r in res.users.head(args.top).itertuples():
        print(f"{r.user:>8} {r.allocations:6d} {r.resource_fraction * 100:6.1f}% {r.new_bytes / 1e6:8.3f} "
              f"{fmt_or_missing(r.mcs_mean, '5.1f')} {fmt_or_missing(r.retransmission_ratio * 100, '5.1f')}% "
              f"{fmt_or_missing(r.gap_mean_s, '8.3f')}s {fmt_or_missing(r.gap_cov, '8.2f')} {fmt_or_missing(r.gap_max_s, '7.2f')}s")
    print(f"verdict     {v['label']}{' (confident)' if v['confident'] else ''}")
    for reason in v["reasons"]:
        print(f"  - {reason}")
    e = v["evidence"]
    print(f"evidence    PRB share vs MCS (Spearman, windows with 2+ users) "
          f"{fmt_or_missing(e['share_vs_mcs_spearman_all_windows'], '.2f')}; contended windows {e['contended_windows']}; "
          f"median gap CoV {fmt_or_missing(e['gap_cov_median'], '.2f')}")
    return 0
