"""``airlink infer pf LOG``: the PF averaging time constant and fairness exponent, with
95 % intervals, from an all-user scheduling log (airlink.inference.pf_params)."""
from __future__ import annotations

from airlink.cli._alloclog import add_log_arguments, read_log
from airlink.cli._common import add_parser, bounded, print_json
from airlink.core import bounds as B


def register(isub):
    c = add_parser(isub, "pf", "PF averaging time constant and fairness exponent from an all-user log",
                   "Fit the generalized PF rule argmax R/T^lambda, T the EWMA of bits sent with time "
                   "constant tau = 1/a slots, to a log of every user's PRBs per slot (the simulator's "
                   "mac.parquet, NR-Scope's DCI CSV): a conditional logit of which user gets each PRB, "
                   "given log R (log2(1+SINR) of sinr_reported_db, else the bytes per PRB of the "
                   "user's last transmission) and log T. Prints tau (slots and seconds) and lambda "
                   "with 95 % block-bootstrap intervals, or 'cannot tell' when users rarely competed "
                   "(full slots with two or more users contending: fewer than 500 or under 5 % of the "
                   "slots). lambda is off by up to about 20 % depending on the channel (0.8x on "
                   "simulated NR cells) and its interval holds the sampling error only: use it to "
                   "compare cells and settings; see docs/inference.md.",
                   "airlink infer pf sim/mac.parquet\n"
                   "airlink infer pf ../shared/data/nr-scope/t_mobile1_ueactivity_afternoon_1.csv --json")
    add_log_arguments(c)
    c.add_argument("--channel", help="channel column logged for every user and slot, dB "
                                     "(default sinr_reported_db, sinr_db or snr_db when present)")
    bounded(c, "--cell-prbs", bound=B.CELL_PRBS, help="PRBs of the carrier (default: the highest PRB "
                                                      "allocated, or the most PRBs given in one slot)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=cmd_pf)


def _interval(ci, spec):
    return "n/a" if ci is None else f"[{format(ci[0], spec)}, {format(ci[1], spec)}]"


def cmd_pf(args) -> int:
    from airlink.inference.pf_params import estimate_pf
    frame = read_log(args).frame
    res = estimate_pf(frame, cell_prbs=args.cell_prbs, channel=args.channel, source=str(args.log))
    if args.json:
        print_json(res.to_dict())
        return 0
    e = res.evidence
    print(f"log         {args.log}: {e['users']} users, {e['slots']} slots of {res.tti_s * 1000:g} ms, "
          f"{e['cell_prbs']} PRBs; new transmissions use {e['prb_utilization'] * 100:.1f} % of them, "
          f"{e['contended_slots']} contended slots")
    for note in res.notes:
        print(f"  - {note}")
    if res.cannot_tell:
        print(f"PF          cannot tell: {res.cannot_tell}")
        return 0
    ci_s = None if res.tau_ci is None else tuple(v * res.tti_s for v in res.tau_ci)
    print(f"tau         {res.tau_slots:g} slots = {res.tau_s:.4g} s (a = {1 / res.tau_slots:.3g}); 95 % "
          f"{_interval(res.tau_ci, '.4g')} slots = {_interval(ci_s, '.4g')} s"
          f"{'' if res.tau_resolved else ' (not resolved: the whole grid)'}")
    print(f"lambda      {res.lam:.3f}; 95 % {_interval(res.lam_ci, '.3f')} (sampling error only; "
          f"off by up to ~20 % with the channel, docs/inference.md)")
    print(f"fit         {e['slots_used']} slots, channel coefficient beta {res.beta:.3g}, bootstrap over "
          f"{e['bootstrap']['blocks']} blocks of {e['bootstrap']['block_s']:.3g} s")
    return 0
