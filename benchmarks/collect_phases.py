"""Where ``airlink collect CAPTURE`` spends its main thread: CPU seconds (user, system) and
minor page faults of each step, measured with ``getrusage(RUSAGE_THREAD)`` around the
functions that make the steps, in one process running the command as users run it.

    .venv/bin/python benchmarks/collect_phases.py CAPTURE [--no-packets] [--runs N]

Printed per run: the process' totals (every thread, start-up included), the main thread's
from the command's start (after the interpreter and numpy are imported), and per step its
calls, faults, user and system seconds. Steps nest: ``read_columns`` (the census pass)
includes its decoding, ``_analyze`` the engine's ``chunk``/``finish``/``_time_slices``;
``decode_connections`` counts the analysis pass' decoding only. Start-up and imports
(~0.26 s) are what the command takes on a capture of a few packets.
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import sys
import tempfile


def _thread_usage():
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_minflt, r.ru_utime, r.ru_stime


def _measured(acc, owner, name, label=None):
    """Wrap ``owner.name`` so each call adds its faults and CPU seconds to ``acc[label]``."""
    f = getattr(owner, name)
    label = label or name

    def wrapper(*a, **k):
        s = _thread_usage()
        try:
            return f(*a, **k)
        finally:
            e = _thread_usage()
            x = acc[label]
            for i in range(3):
                x[i] += e[i] - s[i]
            x[3] += 1
    setattr(owner, name, wrapper)


def run(capture: str, packets: bool) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")     # as airlink collect sets it
    import gc
    gc.disable()                                            # as airlink collect runs
    from airlink.cli import main
    import airlink.collectors._connections as CN
    import airlink.collectors._sortedruns as SR
    import airlink.collectors._tcpinput as TI
    import airlink.collectors._tcpstream as TS
    import airlink.collectors.collect as CC
    import airlink.collectors.tcp as TCP
    acc = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
    for owner, name, label in (
            (TI, "read_columns", None), (TI.PacketColumns, "add", "PacketColumns.add"),
            (TI._Census, "add", "census.add"), (TCP, "_from_columns", None), (TCP, "_time_slices", None),
            (TCP, "_analyze", None), (TS.FlowStream, "chunk", "engine.chunk"),
            (TS.FlowStream, "finish", "engine.finish"), (TCP, "_return_freed_memory", None),
            (TCP, "_moved_packets", None), (CN, "decode_connections", None), (CC, "_write", None),
            (SR.SortedRuns, "add", "runs.add")):
        _measured(acc, owner, name, label)
    out = tempfile.mkdtemp(prefix="collect-phases-")
    try:
        s0 = _thread_usage()
        main(["collect", capture, "-o", out, *([] if packets else ["--no-packets"])])
        e = _thread_usage()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    p = resource.getrusage(resource.RUSAGE_SELF)
    print(f"process (all threads, start-up included): minflt {p.ru_minflt} user {p.ru_utime:.3f} "
          f"sys {p.ru_stime:.3f}")
    print(f"main thread from the command's start: minflt {e[0] - s0[0]} user {e[1] - s0[1]:.3f} "
          f"sys {e[2] - s0[2]:.3f}")
    for k, (f, u, s, n) in sorted(acc.items(), key=lambda kv: -kv[1][1] - kv[1][2]):
        if n:
            print(f"  {k:22s} calls {n:4d}  minflt {f:7d}  user {u:6.3f}  sys {s:6.3f}")


def cli(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--no-packets", action="store_true", help="as airlink collect --no-packets")
    ap.add_argument("--runs", type=int, default=1, help="runs, each in a fresh process")
    a = ap.parse_args(argv)
    if a.runs > 1:
        import subprocess
        for i in range(a.runs):
            print(f"== run {i + 1}", flush=True)
            subprocess.run([sys.executable, __file__, a.capture, *(["--no-packets"] if a.no_packets else [])],
                           check=True)
        return 0
    run(a.capture, not a.no_packets)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
