"""CPU of a measured cell's radio inputs (airlink cell --from-log) beside the plain cell's.

The cell's radio process makes the chunks of inputs (channel, reported SINR, draws) ahead of
the TTI loop; with ``--from-log`` it also applies the log's cross-traffic PRBs and the
followed RNTIs' MCS to each chunk (:class:`airlink.replay.cell_fromlog.FromLogRadio`). This
times :meth:`inputs` for SECONDS of 1 ms slots, both ways, RUNS times (process CPU time).

    python benchmarks/bench_cell_fromlog.py LOG.csv [--users 10] [--seconds 60] [--runs 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

from airlink.replay.cell import CellShell


def cpu_of(shell, n):
    radio = shell._radio()
    t0 = time.process_time()
    k = 0
    while k < n:
        m = min(radio.chunk, n - k)
        radio.inputs(k, m, mac_log=True)
        k += m
    return time.process_time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    n = int(a.seconds * 1000)
    common = dict(preset="nr-tmobile-10mhz", users=a.users, duration=f"{a.seconds}s", scheduler="pf")
    plain = CellShell(**common)
    measured = CellShell(**common, from_log=a.log, follow_rnti="busiest")
    for name, shell in (("plain", plain), ("from-log", measured)):
        cpu = [cpu_of(shell, n) for _ in range(a.runs)]
        print(f"{name:9s} {a.users} UEs x 52 PRBs, {a.seconds:g} s: CPU per simulated s median "
              f"{statistics.median(cpu) / a.seconds:.4f} s (min {min(cpu) / a.seconds:.4f}, "
              f"max {max(cpu) / a.seconds:.4f}, {a.runs} runs)")


if __name__ == "__main__":
    main()
