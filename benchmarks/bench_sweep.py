"""airlink sweep against the by-hand way: one ``airlink run --offline --set ...`` per point in
a shell loop, on the same sweep file; then the re-run of a finished campaign (nothing to do).

Whole processes, every output written. Prints, over ``--repeat`` rounds, the median and the
min-max of the wall time of each way and their ratios.

    .venv/bin/python benchmarks/bench_sweep.py examples/sweeps/quick.yaml --repeat 3

``--live-slots 1 2`` (root) instead runs a live sweep once per slot count and prints, per
count, the wall time and each run's TCP goodput over the replayed user's trace capacity
(``app1.goodput_bps / summary.user<u>.throughput_mbps``): if concurrent live runs distorted
each other, the ratio would fall as the slots rise.

    sudo .venv/bin/python benchmarks/bench_sweep.py examples/sweeps/quick-live.yaml --live-slots 1 2
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AIRLINK = str(Path(sys.executable).parent / "airlink")


def timed(argv) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def by_hand(sweep, out: Path) -> float:
    t0 = time.perf_counter()
    for p in sweep.points():
        argv = [AIRLINK, "run", str(sweep.experiment_path), "-o", str(out / p.id), "--offline", "--quiet",
                "--no-report"]
        for k, v in p.params.items():
            argv += ["--set", f"{k}={v}"]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def live(sweep_path: Path, slots: list, workers: int) -> int:
    from airlink.sweep import load_sweep, read_campaign
    sweep = load_sweep(sweep_path)
    user = None
    print(f"{sweep_path}: {len(sweep.points())} live points, {workers} workers")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-live-") as tmp:
        for n in slots:
            camp = Path(tmp) / f"slots{n}"
            wall = timed([AIRLINK, "sweep", str(sweep_path), "-o", str(camp), "--workers", str(workers),
                          "--live-slots", str(n), "--quiet"])
            frame, _ = read_campaign(camp)
            done = frame[frame["status"] == "done"]
            user = user or next(c for c in frame.columns if c.startswith("summary.user") and c.endswith("throughput_mbps"))
            ratio = (done["app1.goodput_bps"] / (done[user] * 1e6)).tolist()
            print(f"  --live-slots {n}: wall {wall:6.1f} s, {len(done)}/{len(frame)} done, goodput / capacity "
                  f"median {statistics.median(ratio):.3f} (min {min(ratio):.3f}, max {max(ratio):.3f}), "
                  f"link cpu median {statistics.median(done['link.cpu_s']):.2f} s")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--live-slots", type=int, nargs="+", help="live mode: these slot counts (root)")
    args = ap.parse_args()
    if args.live_slots:
        return live(args.sweep, args.live_slots, max(args.workers))
    from airlink.sweep import load_sweep
    sweep = load_sweep(args.sweep)
    times: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        tmp = Path(tmp)
        for r in range(args.repeat):
            times.setdefault("by hand (airlink run per point)", []).append(by_hand(sweep, tmp / f"hand{r}"))
            for w in args.workers:
                camp = tmp / f"camp{w}-{r}"
                argv = [AIRLINK, "sweep", str(args.sweep), "-o", str(camp), "--workers", str(w), "--quiet"]
                times.setdefault(f"airlink sweep --workers {w}", []).append(timed(argv))
                if w == args.workers[-1]:
                    times.setdefault("airlink sweep again (all kept)", []).append(timed(argv))
                shutil.rmtree(camp)
            shutil.rmtree(tmp / f"hand{r}")
    n = len(sweep.points())
    ref = statistics.median(times["by hand (airlink run per point)"])
    print(f"{args.sweep}: {n} points, {args.repeat} rounds")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:36s} median {med:6.1f} s  (min {min(ts):.1f}, max {max(ts):.1f})  "
              f"by hand / this = {ref / med:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
