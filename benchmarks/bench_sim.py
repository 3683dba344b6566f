"""Benchmark of airlink.sim: the imt-advanced preset end to end, and its scheduling step
against a per-TTI pure-Python MC-PFS loop (and a per-TTI numpy loop) on the same input.

    .venv/bin/python benchmarks/bench_sim.py [--duration 60s] [--ref-ttis 300]

Prints TTIs per second (CPU time of this process, so that other work on a shared machine
does not skew the ratios; wall time is printed too), the ratios, peak memory, and checks that the compiled step and the
pure-Python reference make the same scheduling decisions on the same input.
"""
from __future__ import annotations

import os

# one core: keep BLAS (the channel's matrix products) single-threaded
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import resource
import time

import numpy as np

import airlink.sim as S
from airlink.sim import kernel as K
from airlink.sim.channel import ChannelModel
from airlink.sim.rates import rate_table


def end_to_end(duration: str):
    t0, w0 = time.process_time(), time.perf_counter()
    res = S.simulate("imt-advanced", duration=duration, seed=1)
    dt = time.process_time() - t0
    return res, dt, time.perf_counter() - w0


def inputs(n_tti: int, seed: int = 7):
    cfg = S.load_preset("imt-advanced")
    ch = ChannelModel(n_users=cfg["n_users"], n_subchannels=cfg["n_subchannels"], tti_s=1e-3,
                      snr_db=cfg["snr_db"], profile=cfg["profile"], speed_kmh=cfg["speed_kmh"],
                      carrier_hz=float(cfg["carrier_hz"]), subchannel_hz=float(cfg["subchannel_hz"]),
                      seed=seed)
    sinr = ch.sinr_chunk(0, n_tti)
    table = rate_table("imt-advanced")
    bytes_per_mcs = table.rate_bps / sinr.shape[2] * 1e-3 / 8
    perm = np.random.default_rng(seed).permuted(np.tile(np.arange(sinr.shape[1]), (n_tti, 1)), axis=1)
    return sinr, table, bytes_per_mcs, perm


def kernel_pf(sinr, table, bytes_per_mcs, perm, window=1000):
    """airlink's compiled step: MCS from SINR, MC-PFS, no block errors (z_err = 0)."""
    n, u, c = sinr.shape
    ip = np.array([2, 1, 0, 1, 0, 0, 10, 1, 0, 0, window, 32, 0], dtype=np.int64)
    fp = np.array([0.001, 1.0, 1500.0, table.slope, 0, 1, 0, 0.3, 0.1, 15, 1e9])
    z = lambda *s, d=np.float64: np.zeros(s, d)  # noqa: E731
    outs = [z(n, u), z(n, u), z(n, u, d=np.int64), z(n, u), z(n, u, d=np.int64), z(n, u),
            z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64)]
    st = [z(u), z(u), z(u), z(u, 8), z(u, 8, d=np.int64), z(u, 8), z(u, 8, d=np.int64), z(u, d=np.int64),
          z(u, d=np.int64), z(4, d=np.int64), z(u, d=np.int64), z(u), z(u, d=np.int64), z(u, d=np.int64),
          z(u, d=np.int64), z(u, d=np.int64),
          np.ones(u, np.int64), np.full(u, 1500.0)]
    t0 = time.process_time()
    K.run_chunk(sinr, sinr, z(n, u), np.zeros((n, c)), perm, np.zeros((1, 1), np.int64),
                (10 ** (table.threshold_db / 10)).astype(np.float32), bytes_per_mcs, 10 ** (table.s50_db / 10),
                np.zeros(1, np.int64), -40.0, 0.1, ip, fp, *st, np.zeros(1), np.ones(1, np.int64), *outs)
    return time.process_time() - t0, outs[2]


def python_pf(sinr, table, bytes_per_mcs, perm, window=1000):
    """Reference: a plain per-TTI Python MC-PFS loop (rates looked up per TTI, as airlink does)."""
    n, u, c = sinr.shape
    thr = (10 ** (table.threshold_db / 10)).astype(np.float32).tolist()
    rate_of = [0.0] + list(bytes_per_mcs)
    avg = [0.0] * u
    counts = [0] * u
    t0 = time.process_time()
    for k in range(n):
        s_k = sinr[k].tolist()
        order = perm[k].tolist()
        sent = [0.0] * u
        for ch in range(c):
            best, best_m = -1, -1.0
            for i in order:
                s = s_k[i][ch]
                m = 0
                while m < len(thr) and thr[m] <= s:
                    m += 1
                r = rate_of[m]
                if r <= 0:
                    continue
                metric = r / avg[i] if avg[i] > 0 else r * 1e150
                if metric > best_m:
                    best, best_m = i, metric
            if best >= 0:
                sent[best] += rate_of_best(best, s_k, ch, thr, rate_of)
                counts[best] += 1
        a = 1.0 / min(k + 1, window)
        for i in range(u):
            avg[i] = (1 - a) * avg[i] + a * sent[i] * 8
    return time.process_time() - t0, counts


def python_pf_given_rates(sinr, table, bytes_per_mcs, perm, window=1000):
    """Reference: the plainest per-TTI Python PF loop, rates looked up beforehand (not timed)."""
    n, u, c = sinr.shape
    thr_lin = (10 ** (table.threshold_db / 10)).astype(np.float32)
    rate_of = np.concatenate([[0.0], bytes_per_mcs])
    rates = [rate_of[np.searchsorted(thr_lin, sinr[k], side="right")].tolist() for k in range(n)]
    orders = perm.tolist()
    avg = [0.0] * u
    counts = [0] * u
    t0 = time.process_time()
    for k in range(n):
        r_k = rates[k]
        sent = [0.0] * u
        w = [1.0 / a if a > 0 else 1e150 for a in avg]
        for ch in range(c):
            best, best_m = -1, -1.0
            for i in orders[k]:
                r = r_k[i][ch]
                if r > 0 and r * w[i] > best_m:
                    best, best_m = i, r * w[i]
            if best >= 0:
                sent[best] += r_k[best][ch]
                counts[best] += 1
        a = 1.0 / min(k + 1, window)
        avg = [(1 - a) * avg[i] + a * sent[i] * 8 for i in range(u)]
    return time.process_time() - t0, counts


def rate_of_best(i, s_k, ch, thr, rate_of):
    s = s_k[i][ch]
    m = 0
    while m < len(thr) and thr[m] <= s:
        m += 1
    return rate_of[m]


def numpy_pf(sinr, table, bytes_per_mcs, perm, window=1000):
    """Reference: a per-TTI numpy loop (vectorised over users and subchannels)."""
    n, u, c = sinr.shape
    thr_lin = (10 ** (table.threshold_db / 10)).astype(np.float32)
    rate_of = np.concatenate([[0.0], bytes_per_mcs])
    avg = np.zeros(u)
    counts = np.zeros(u, np.int64)
    cols = np.arange(c)
    t0 = time.process_time()
    for k in range(n):
        r = rate_of[np.searchsorted(thr_lin, sinr[k], side="right")]
        metric = np.where(avg[:, None] > 0, r / np.where(avg > 0, avg, 1)[:, None], r * 1e150)
        metric = np.where(r > 0, metric, -1.0)[perm[k]]
        i = np.argmax(metric, axis=0)
        best = perm[k][i]
        ok = metric[i, cols] >= 0
        sent = np.bincount(best[ok], weights=r[best[ok], cols[ok]], minlength=u)
        counts += np.bincount(best[ok], minlength=u)
        a = 1.0 / min(k + 1, window)
        avg = (1 - a) * avg + a * sent * 8
    return time.process_time() - t0, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="60s")
    ap.add_argument("--ref-ttis", type=int, default=300)
    ap.add_argument("--step-ttis", type=int, default=5000)
    args = ap.parse_args()
    print(f"numba kernel compiled: {K.COMPILED}")
    S.simulate("imt-advanced", duration="5ms")   # compile / load the cached kernel once
    res, dt, wall = end_to_end(args.duration)
    n = res.capacity.n_tti
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"end to end: imt-advanced {args.duration} ({n} TTIs, 10 users x 400 subchannels, TU6, "
          f"MC-PFS, HARQ, CSI delay 3), channel included: {dt:.2f} s CPU ({wall:.2f} s wall) "
          f"= {n / dt:,.0f} TTI/s; "
          f"peak RSS {rss_mb:.0f} MB; aggregate {res.summary['aggregate_throughput_mbps']:.1f} Mbit/s")

    sinr, table, bpm, perm = inputs(max(args.step_ttis, args.ref_ttis))
    tk, counts_k = kernel_pf(sinr[:args.step_ttis], table, bpm, perm[:args.step_ttis])
    step_rate = args.step_ttis / tk
    ref = sinr[:args.ref_ttis]
    tp, counts_p = python_pf(ref, table, bpm, perm[:args.ref_ttis])
    tn, counts_n = numpy_pf(ref, table, bpm, perm[:args.ref_ttis])
    tg, counts_g = python_pf_given_rates(ref, table, bpm, perm[:args.ref_ttis])
    _, counts_k_ref = kernel_pf(ref, table, bpm, perm[:args.ref_ttis])
    k_counts = counts_k_ref.sum(axis=0)
    same = bool((np.array(counts_p) == k_counts).all() and (counts_n == k_counts).all()
                and (np.array(counts_g) == k_counts).all())
    print(f"scheduling step (MCS lookup + MC-PFS, 10 x 400): airlink {step_rate:,.0f} TTI/s "
          f"({args.step_ttis} TTIs)")
    print(f"  pure-Python per-TTI loop: {args.ref_ttis / tp:,.0f} TTI/s -> ratio {step_rate / (args.ref_ttis / tp):.0f}x")
    print(f"  pure-Python loop, rates given (lookup not timed): {args.ref_ttis / tg:,.0f} TTI/s -> ratio "
          f"{step_rate / (args.ref_ttis / tg):.0f}x")
    print(f"  numpy per-TTI loop:       {args.ref_ttis / tn:,.0f} TTI/s -> ratio {step_rate / (args.ref_ttis / tn):.1f}x")
    print(f"  same decisions as all three references on {args.ref_ttis} TTIs: {bool(same)}")


if __name__ == "__main__":
    main()
