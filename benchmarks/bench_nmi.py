"""Peak-NMI lag scan: airlink's FFT pass against per-lag loops, on the same data, in one run.

Two series of 1,200,000 samples (20 minutes at 1 ms), 16 equal-width bins, lags
-6000..6000 (12,001 lags). Compared:

1. ``airlink.inference.lag_scan(method="fft")``: every lag at once from FFT
   cross-correlations of the bin indicators (timed over the whole scan);
2. a joint histogram per lag with ``np.bincount`` (airlink's ``method="direct"``), timed
   over a subset of lags and extrapolated;
3. ``sklearn.metrics.mutual_info_score`` per lag on the same bin codes (the reference
   loop), timed over a subset of lags and extrapolated.

Values: the FFT counts must equal the bincount counts exactly at every checked lag (so the
NMI values are identical), and the mutual information must match scikit-learn's.
Single core: BLAS/OpenMP threads are pinned to 1 before numpy loads.

    python benchmarks/bench_nmi.py [--n 1200000] [--max-lag 6000] [--bins 16]
    python benchmarks/bench_nmi.py --command [--n 1200000] [--max-lag 3000] [--repeat 3]

``--command`` times the whole ``airlink infer nmi`` process instead: a Parquet frame of
``--n`` rows (a UTC time column at 1 ms, the two series) is written to a temporary folder,
then ``airlink infer nmi FRAME --target y --factor x --max-lag N --resolution 1ms
--surrogates 0 --bootstrap 0`` and the FFT reference (a process that reads the same frame
and runs ``lag_scan(method="fft")`` on its columns) run in turn ``--repeat`` times; printed:
wall and CPU seconds (user+sys, wait4) of both, medians and min-max, and their ratio. The
time grid is what the command adds; the ratio shows when it costs more than the scan.
"""
from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

REFERENCE = r"""
import sys
import pandas as pd
import airlink.inference as inf
f = pd.read_parquet(sys.argv[1])
dx, dy = inf.discretize(f["y"].to_numpy(), bins=16), inf.discretize(f["x"].to_numpy(), bins=16)
scan = inf.lag_scan(dx, dy, max_lag=int(sys.argv[2]), method="fft")
print(scan.peak, scan.peak_lag)
"""


def measured(cmd):
    """(wall s, stdout) of one child process."""
    import subprocess
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{cmd[:3]} failed: {err.decode()[-500:]}")
    return wall, out.decode()


def command(args) -> None:
    """The whole ``airlink infer nmi`` process against the FFT reference process."""
    import resource
    import statistics
    import sys
    import tempfile
    from pathlib import Path

    import pandas as pd
    from scipy.signal import lfilter
    rng = np.random.default_rng(2026)
    n = args.n
    y = lfilter([1.0], [1.0, -0.995], rng.normal(size=n))
    x = np.roll(y, 1234) + 3.0 * rng.normal(size=n)
    airlink = str(Path(sys.executable).with_name("airlink"))
    with tempfile.TemporaryDirectory() as tmp:
        frame = Path(tmp) / "series.parquet"
        pd.DataFrame({"time": pd.date_range("2026-01-01", periods=n, freq="ms", tz="UTC"),
                      "x": x, "y": y}).to_parquet(frame)
        runs = {"airlink infer nmi": [airlink, "infer", "nmi", str(frame), "--target", "y", "--factor", "x",
                                      "--max-lag", f"{args.max_lag}ms", "--resolution", "1ms",
                                      "--surrogates", "0", "--bootstrap", "0", "--json"],
                "FFT reference": [sys.executable, "-c", REFERENCE, str(frame), str(args.max_lag)]}
        res = {k: [] for k in runs}
        for _ in range(max(1, args.repeat)):
            for name, cmd in runs.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                wall, _ = measured(cmd)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                res[name].append((wall, cpu))
    print(f"{os.cpu_count()} cores (shared), n = {n:,} rows at 1 ms, {2 * args.max_lag + 1:,} lags; "
          f"median (min-max) of {len(res['FFT reference'])} runs in turn")

    def cell(v):
        return f"{statistics.median(v):6.2f} ({min(v):.2f}-{max(v):.2f})"
    for name, v in res.items():
        print(f"  {name:20s} wall s {cell([w for w, _ in v])}   CPU s {cell([c for _, c in v])}")
    a, b = res["airlink infer nmi"], res["FFT reference"]
    print(f"  ratio, wall           {cell([x[0] / y[0] for x, y in zip(a, b)])}")
    print(f"  ratio, CPU            {cell([x[1] / y[1] for x, y in zip(a, b)])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_200_000)
    ap.add_argument("--max-lag", type=int, default=6000)
    ap.add_argument("--bins", type=int, default=16)
    ap.add_argument("--sklearn-lags", type=int, default=12, help="lags timed for the sklearn loop")
    ap.add_argument("--bincount-lags", type=int, default=300, help="lags timed for the bincount loop")
    ap.add_argument("--repeat", type=int, default=3, help="FFT scan repetitions (best is reported)")
    ap.add_argument("--command", action="store_true",
                    help="time the whole airlink infer nmi process against the FFT reference process")
    args = ap.parse_args()
    if args.command:
        command(args)
        return

    from sklearn.metrics import mutual_info_score

    import airlink.inference as inf
    from airlink.inference.lagscan import _counts_direct, nmi_from_counts

    rng = np.random.default_rng(2026)
    n, D = args.n, args.max_lag
    # a channel-like AR(1) factor and a target that follows it 1234 samples later
    e = rng.normal(size=n)
    y = np.empty(n)
    y[0] = 0.0
    from scipy.signal import lfilter
    y = lfilter([1.0], [1.0, -0.995], e)
    x = np.roll(y, 1234) + 3.0 * rng.normal(size=n)
    dx, dy = inf.discretize(x, bins=args.bins), inf.discretize(y, bins=args.bins)
    lags = np.arange(-D, D + 1)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, pinned to 1 thread")
    print(f"n = {n:,} samples, {args.bins} bins, lags -{D}..{D} ({lags.size:,} lags)")

    best = np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        scan = inf.lag_scan(dx, dy, max_lag=D, method="fft")
        best = min(best, time.perf_counter() - t0)
    print(f"airlink FFT scan (all lags):      {best:8.2f} s   peak I_N = {scan.peak:.4f} at lag {scan.peak_lag}")

    pick = np.unique(np.concatenate([[-D, -1, 0, 1, D, scan.peak_lag],
                                     rng.choice(lags, args.bincount_lags - 6, replace=False)]))
    t0 = time.perf_counter()
    direct = _counts_direct(dx.codes, dx.n_levels, dy.codes, dy.n_levels, D, pick)
    t_bc = (time.perf_counter() - t0) / pick.size * lags.size
    print(f"np.bincount per lag (extrapolated): {t_bc:8.1f} s   from {pick.size} lags")

    fft_counts = inf.lag_counts(dx, dy, max_lag=D, method="fft")[pick + D]
    same_counts = np.array_equal(fft_counts, direct)
    same_values = np.array_equal(nmi_from_counts(fft_counts), nmi_from_counts(direct))
    print(f"FFT counts == bincount counts at {pick.size} lags: {same_counts}; NMI values identical: {same_values}")

    sk_pick = pick[np.linspace(0, pick.size - 1, args.sklearn_lags).astype(int)]
    t0 = time.perf_counter()
    sk = []
    for d in sk_pick:
        a = dx.codes[max(d, 0):n + min(d, 0)]
        b = dy.codes[max(-d, 0):n - max(d, 0)]
        sk.append(mutual_info_score(a, b))
    t_sk = (time.perf_counter() - t0) / sk_pick.size * lags.size
    mi_fft = nmi_from_counts(inf.lag_counts(dx, dy, max_lag=D, method="fft")[sk_pick + D], "none")
    err = float(np.max(np.abs(mi_fft - np.array(sk)) / np.maximum(np.array(sk), 1e-300)))
    print(f"sklearn mutual_info_score loop:     {t_sk:8.1f} s   (extrapolated from {sk_pick.size} lags; "
          f"max relative MI difference {err:.1e})")
    print(f"speed-up: {t_sk / best:,.0f}x over the sklearn loop, {t_bc / best:,.0f}x over bincount per lag")
    print(f"target: full scan < 2 s on one core and >= 1000x the loop: "
          f"{'met' if best < 2 and t_sk / best >= 1000 else 'NOT met'}")


if __name__ == "__main__":
    main()
