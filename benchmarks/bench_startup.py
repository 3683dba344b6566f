"""What `airlink collect` and `airlink infer nmi` import before any work, against the
libraries their work needs.

Each line is a fresh interpreter importing one set of modules, run in turn ``--repeat``
times; printed: CPU seconds (user+sys of the child, from wait4), median and min-max, the
peak RSS of one more run (/usr/bin/time -v's "Maximum resident set size"), and the
heavy packages loaded. numpy's OpenBLAS gets one thread, as `airlink collect` asks.

    python benchmarks/bench_startup.py [--repeat 11]

Rows:

* ``python -c pass``: the interpreter alone;
* ``numpy + pyarrow.parquet``: what the capture analysis and its Parquet writer need;
* ``airlink collect``: its parser (built for the command alone, as ``airlink collect ...``
  does) and every module a capture's collect loads;
* ``pandas + scipy.fft + pyarrow.parquet``: what reading a frame and an FFT lag scan need;
* ``airlink infer nmi``: its parser and every module the command loads before its scan.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

ROWS = {
    "python -c pass": "pass",
    "numpy + pyarrow.parquet": "import numpy, pyarrow.parquet",
    "airlink collect": ("from airlink.cli import build_parser; build_parser('collect')\n"
                        "import airlink.collectors.collect, airlink.collectors.tcp, airlink.collectors.pcap\n"
                        "import airlink.rundir, pyarrow.parquet"),
    "pandas + scipy.fft + pyarrow.parquet": "import pandas, scipy.fft, pyarrow.parquet",
    "airlink infer nmi": ("from airlink.cli import build_parser; build_parser('infer')\n"
                          "import airlink.inference as inf; inf.rank_factors; inf.read_frames; inf.lag_scan\n"
                          "import scipy.fft, pyarrow.parquet"),
}
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "sklearn", "numba", "yaml")
REPORT = "\nimport sys; print(' '.join(m for m in {heavy!r} if m in sys.modules))"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    cpu = {name: [] for name in ROWS}
    for _ in range(max(1, args.repeat)):
        for name, code in ROWS.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"{os.cpu_count()} cores, {args.repeat} runs in turn; CPU s median (min-max), peak RSS")
    for name, code in ROWS.items():
        r = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code + REPORT.format(heavy=HEAVY)],
                           capture_output=True, text=True, check=True, env=env)
        rss = next(int(line.split()[-1]) for line in r.stderr.splitlines() if "Maximum resident" in line)
        v = cpu[name]
        print(f"  {name:38s} {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})  {rss / 1024:6.1f} MiB  "
              f"[{r.stdout.strip()}]")


if __name__ == "__main__":
    main()
