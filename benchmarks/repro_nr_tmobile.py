"""A single saturating user of ``nr-tmobile-10mhz`` / ``nr-tmobile-15mhz`` beside the busiest
RNTIs of the shared NR-Scope logs: MCS index and PRBs per downlink new transmission.

    .venv/bin/python benchmarks/repro_nr_tmobile.py [--duration 20s] [--snr 5 15 25]

The logs are read with airlink's NR-Scope collector (downlink DCIs with a transport block,
i.e. new transmissions); the simulated user's MCS per slot is the MCS index of the rate-table
row nearest the mean of its blocks. Prints one markdown table (used in docs/sim.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import airlink.sim as S
from airlink.collectors import nrscope

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nr-scope"
LOGS = {"t_mobile1_ueactivity_afternoon_1.csv": "nr-tmobile-10mhz",
        "t_mobile2_ueactivity_night_1.csv": "nr-tmobile-15mhz"}


def row(name, mcs, prbs, n_rb, slots=None):
    q = lambda a, p: np.percentile(a, p)  # noqa: E731
    busy = f"{slots:.1%}" if slots is not None else "-"
    return (f"| {name} | {len(mcs)} | {q(mcs, 10):.0f} / {q(mcs, 50):.0f} / {q(mcs, 90):.0f} | "
            f"{q(prbs, 10):.0f} / {q(prbs, 50):.0f} / {q(prbs, 90):.0f} | {np.mean(prbs == n_rb):.0%} | {busy} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--snr", type=float, nargs="+", default=[5.0, 15.0, 25.0])
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    print("| source | DL new transmissions | MCS p10 / p50 / p90 | PRBs p10 / p50 / p90 | all PRBs "
          "| slots with a DCI |")
    print("|---|---|---|---|---|---|")
    for log, preset in LOGS.items():
        f = nrscope.select_direction(nrscope.read(DATA / log, subcarrier_spacing_khz=15), "downlink")
        new = f[(f["tbs_bytes"] > 0)]
        n_rb = int(S.resolve_config(preset)["n_subchannels"])
        span = int(f["slot"].max() - f["slot"].min() + 1)
        for user, g in new.groupby("user").size().sort_values(ascending=False).head(args.top).items():
            d = new[new["user"] == user]
            print(row(f"{log.split('_ue')[0]} RNTI {user}", d["mcs"].to_numpy(), d["prbs"].to_numpy(), n_rb,
                      d["slot"].nunique() / span))
        for snr in args.snr:
            r = S.simulate(preset, n_users=1, snr_db=snr, duration=args.duration, seed=1)
            mac = r.mac[r.mac["subchannels"] > 0]
            rows = [int(n.split()[0][3:]) for n in _row_names(preset)]
            # the simulator's PRBs carry their own MCS; a slot's MCS is the MCS index of the
            # rate-table row nearest the mean of its blocks (1-based ``mcs`` in the MAC log)
            mcs = np.array([rows[int(round(m)) - 1] for m in mac["mcs"]])
            print(row(f"{preset} 1 user, {snr:g} dB", mcs, mac["subchannels"].to_numpy(), n_rb, 1.0))


def _row_names(preset):
    from airlink.sim.nr_rates import nr_rate_table_of
    from airlink.sim.step import parse_cfg_tti
    cfg = S.resolve_config(preset)
    return nr_rate_table_of(cfg, parse_cfg_tti(cfg["tti"])).mcs


if __name__ == "__main__":
    main()
