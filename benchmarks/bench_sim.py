"""Benchmark of airlink.sim: the imt-advanced preset end to end, and its scheduling step
against a per-TTI pure-Python MC-PFS loop (and a per-TTI numpy loop) on the same input.

    .venv/bin/python benchmarks/bench_sim.py [--duration 60s] [--ref-ttis 300] [--repeat 3]
    .venv/bin/python benchmarks/bench_sim.py --nr [--duration 60s] [--repeat 3] [--ref-ttis 2000]
    .venv/bin/python benchmarks/bench_sim.py --nr-phases [--duration 20s] [--repeat 3]

``--nr-phases``: the same run in-process, its CPU time split into the channel, the other chunk
inputs, the compiled kernel, the MAC log's columns, the written files and the rest.

``--nr``: the 5G NR goal of issue #27 - ``airlink simulate --preset nr-fr1`` (10 users x 273
PRBs, 0.5 ms slots) as a whole process (``--repeat`` runs; CPU time of the child from
``getrusage``, interpreter start, channel, kernel and the written files included), in CPU
seconds per simulated second (goal <= 0.1), beside a plain per-slot numpy PF loop on the same
preset's channel and rate table (scheduling only, no channel, no HARQ, no files), and a
process's fixed start (``--duration 5ms``; ``--first-run``: also with an empty numba cache).

Prints TTIs per second (CPU time of this process, so that other work on a shared machine
does not skew the ratios; wall time is printed too), the ratios, peak memory, and checks
that airlink and the references make the same scheduling decisions on the same input.

What is timed (10 users x 400 subchannels, MC-PFS with t_a = 1000):

- airlink full step (``kernel.run_chunk``): MCS lookup from the reported SINR, PF metric,
  best user per subchannel, each block's error check and HARQ bookkeeping (no block errors
  drawn, so no retransmissions), per-user outputs, average update;
- airlink full step with block errors (BLER about 10 %, HARQ with up to 11 transmissions and
  priority, as in the preset): the same plus retransmissions (decisions then differ from the
  references, which have no HARQ: speed only);
- airlink step alone (``airlink.sim.schedule_rates``): on the same given rates as the plain
  loop, PF metric, best user per subchannel, average update;
- references: a pure-Python loop looking the rates up per TTI, the plainest pure-Python PF
  loop with the rates looked up beforehand (not timed), and a per-TTI numpy loop.
"""
from __future__ import annotations

import os

# one core: keep BLAS (the channel's matrix products) single-threaded
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def kernel_pf(sinr, table, bytes_per_mcs, perm, window=1000, harq=False, seed=7):
    """airlink's compiled step: MCS from SINR, MC-PFS, block error check and HARQ
    bookkeeping; no block errors (z_err = 0) unless ``harq`` (errors drawn as the engine
    does, up to 11 transmissions, retransmissions first)."""
    n, u, c = sinr.shape
    ip = np.zeros(K.N_IP, np.int64)
    ip[[K.IP_SCHED, K.IP_MAX_TX, K.IP_HARQ_PRIORITY, K.IP_LA_INTERVAL, K.IP_BL_INTERVAL, K.IP_PF_WINDOW,
        K.IP_SECTOR_CHANNELS]] = [2, 11 if harq else 1, 1 if harq else 0, 10, 1, window, 32]
    z_err = np.zeros((n, c))
    if harq:
        beta = table.slope * 10 / np.log(10)
        p = np.random.default_rng(seed).random((n, c))
        with np.errstate(divide="ignore"):
            z_err = ((1 - p) / p) ** (1 / beta)
    fp = np.zeros(K.N_FP)
    fp[[K.FP_PF_A, K.FP_LAMBDA, K.FP_DRAIN_TTI, K.FP_LA_BLER_UP, K.FP_LA_BLER_DOWN, K.FP_LA_HYBRID_DB,
        K.FP_OLLA_STEP_DB, K.FP_OLLA_MAX_DB, K.FP_BLER_TARGET]] = [0.001, 1.0, 1, 0.3, 0.1, 15, 0.5, 10.0, 0.1]
    z = lambda *s, d=np.float64: np.zeros(s, d)  # noqa: E731
    outs = [z(n, u), z(n, u), z(n, u, d=np.int64), z(n, u), z(n, u, d=np.int64), z(n, u),
            z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64)]
    ring = 4096 if harq else 8
    st = [z(u), z(u), z(u), z(u, ring), z(u, ring, d=np.int64), z(u, ring), z(u, ring, d=np.int64),
          z(u, d=np.int64),
          z(u, d=np.int64), z(4, d=np.int64), z(u, d=np.int64), z(u), z(u, d=np.int64), z(u, d=np.int64),
          z(u, d=np.int64), z(u, d=np.int64),
          np.ones(u, np.int64), np.full(u, 1500.0), z(u), z(u, ring, d=np.int64),
          z(u, ring, d=np.int64), z(u, 2, 1, d=np.int64)]
    t0 = time.process_time()
    K.run_chunk(sinr, sinr, z(n, u), z_err, perm, np.zeros((1, 1), np.int64),
                (10 ** (table.threshold_db / 10)).astype(np.float32), bytes_per_mcs, 10 ** (table.s50_db / 10),
                np.zeros(1, np.int64), -40.0, 0.1, ip, fp, *st, np.zeros(1), np.ones(1, np.int64), *outs)
    return time.process_time() - t0, outs[2]


def given_rates(sinr, table, bytes_per_mcs):
    """The rates of the plain loop: rate of the MCS each SINR supports (bytes per TTI)."""
    thr_lin = (10 ** (table.threshold_db / 10)).astype(np.float32)
    rate_of = np.concatenate([[0.0], bytes_per_mcs])
    return rate_of[np.searchsorted(thr_lin, sinr, side="right")]


def airlink_given_rates(rates, perm, window=1000):
    """airlink's step alone (``airlink.sim.schedule_rates``) on the plain loop's inputs."""
    t0 = time.process_time()
    best, _ = S.schedule_rates(rates, scheduler="mcpfs", window=window, order=perm)
    dt = time.process_time() - t0
    counts = np.stack([np.bincount(b[b >= 0], minlength=rates.shape[1]) for b in best])
    return dt, counts


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


def best_of(fn, repeat):
    """Run ``fn() -> (cpu_seconds, result)`` ``repeat`` times: (min, median, result)."""
    runs = [fn() for _ in range(repeat)]
    times = sorted(t for t, _ in runs)
    return times[0], times[len(times) // 2], runs[0][1]


#: the measured processes' environment: Python's default bytecode caching (airlink's own
#: modules compiled once, into __pycache__), unless ``--as-is`` keeps this environment's
#: ``PYTHONDONTWRITEBYTECODE`` (every process then compiles them again: ~0.5 s of CPU)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def nr_whole_process(duration: str, outdir: str, env=None) -> float:
    """CPU seconds (user + system) of one ``airlink simulate --preset nr-fr1`` process
    (``env``: its environment, default :data:`CHILD_ENV`; e.g. ``NUMBA_CACHE_DIR`` of an
    empty folder for a first run)."""
    env = CHILD_ENV if env is None else env
    exe = Path(sys.executable).with_name("airlink")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([str(exe), "simulate", "--preset", "nr-fr1", "--duration", duration, "--seed", "1",
                    "-o", tempfile.mkdtemp(dir=outdir), "--no-progress"],   # a new, empty folder per run
                   check=True, stdout=subprocess.DEVNULL, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def nr_inputs(n_tti: int):
    """nr-fr1's reported SINR, rate table and bytes per MCS and subchannel for ``n_tti`` slots."""
    from airlink.sim.step import Radio
    cfg = S.resolve_config("nr-fr1")
    cfg["seed"] = 1
    from airlink.sim.engine import make_scheduler
    radio = Radio(cfg, make_scheduler("pf", cfg), n_users=int(cfg["n_users"]),
                  n_subchannels=int(cfg["n_subchannels"]), n_tti=n_tti)
    inp = radio.inputs(0, n_tti, mac_log=False)
    return inp.rep, radio.table, radio.bytes_per_mcs, inp.perm


def nr_main(args):
    from airlink.traces import parse_duration
    sim_s = float(parse_duration(args.duration))
    S.simulate("nr-fr1", duration="5ms")      # compile / load the cached kernel once
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        print("PYTHONDONTWRITEBYTECODE is set here: " + ("kept (--as-is): every process compiles airlink's modules"
                                                          if CHILD_ENV is os.environ else
                                                          "the measured processes run without it (Python's default: "
                                                          "bytecode cached in __pycache__; --as-is keeps it)"))
    with tempfile.TemporaryDirectory() as tmp:      # a first process writes the bytecode cache
        nr_whole_process("5ms", tmp)
    with tempfile.TemporaryDirectory() as tmp:
        cpu = sorted(nr_whole_process(args.duration, tmp) for _ in range(args.repeat))
    med = cpu[len(cpu) // 2]
    per_s = [c / sim_s for c in cpu]
    slots = sim_s / 0.0005
    print(f"airlink simulate --preset nr-fr1 --duration {args.duration} (10 users x 273 PRBs, "
          f"{slots:,.0f} slots of 0.5 ms), whole process, {args.repeat} runs: CPU {med:.2f} s median "
          f"({cpu[0]:.2f}-{cpu[-1]:.2f}) = {med / sim_s:.3f} s CPU per simulated s "
          f"({per_s[0]:.3f}-{per_s[-1]:.3f}); goal <= 0.1: {'met' if med / sim_s <= 0.1 else 'NOT met'}")
    m = args.ref_ttis
    sinr, table, bpm, perm = nr_inputs(m)
    tn, _ = numpy_pf(sinr, table, bpm, perm)
    print(f"plain per-slot numpy PF loop on nr-fr1's channel and rate table (scheduling only): "
          f"{m / tn:,.0f} slots per CPU s = {0.0005 * m / tn:.3f} simulated s per CPU s "
          f"-> {tn / (m * 0.0005):.3f} s CPU per simulated s")
    print(f"ratio: airlink whole process / numpy loop (scheduling only), CPU per simulated s: "
          f"{(med / sim_s) / (tn / (m * 0.0005)):.3f} (airlink is {(tn / (m * 0.0005)) / (med / sim_s):.1f}x faster)")
    nr_fixed_start(args.repeat, args.first_run)


def nr_fixed_start(repeat: int, first_run: bool):
    """The fixed cost of a process: ``airlink simulate --preset nr-fr1 --duration 5ms``
    (interpreter, imports, numba's set-up and cached kernels, 10 slots, the files), and
    with ``first_run`` the same with an empty numba cache (a fresh clone's first run, which
    compiles the kernels and fills the cache)."""
    with tempfile.TemporaryDirectory() as tmp:
        cached = sorted(nr_whole_process("5ms", tmp) for _ in range(repeat))
        print(f"fixed start (--duration 5ms, numba cache filled), {repeat} runs: CPU {cached[len(cached) // 2]:.2f} s "
              f"median ({cached[0]:.2f}-{cached[-1]:.2f})")
        if first_run:
            env = dict(CHILD_ENV, NUMBA_CACHE_DIR=tempfile.mkdtemp(dir=tmp))
            first = nr_whole_process("5ms", tmp, env)
            again = nr_whole_process("5ms", tmp, env)
            print(f"first run with an empty numba cache: CPU {first:.2f} s (compiles the kernels); "
                  f"the next run with that cache: {again:.2f} s")


def nr_phases(duration: str):
    """CPU seconds of each phase of one in-process ``airlink simulate --preset nr-fr1``: the
    channel (``ChannelModel.sinr_chunk``), the rest of the chunk inputs (CSI delay, error
    draws, tie order, wideband SINR for the log), the compiled kernel, the MAC frame and the
    written files, and what is left (the engine's loop, summary, printing)."""
    import contextlib
    import io
    from airlink import cli
    from airlink.sim import channel, result, step
    spent = {}

    def timed(owner, name, label):
        inner = getattr(owner, name)

        def wrapper(*a, **kw):
            t0 = time.process_time()
            try:
                return inner(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - t0
        setattr(owner, name, wrapper)
        return inner

    saved = [(o, n, timed(o, n, label)) for o, n, label in (
        (channel.ChannelModel, "sinr_chunk", "channel"), (step.Radio, "inputs", "inputs"),
        (K, "run_chunk", "kernel"), (step.Radio, "mac_columns", "MAC columns"),
        (result.SimResult, "write", "files"))]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["simulate", "--preset", "nr-fr1", "--duration", duration, "--seed", "1",
                      "-o", tmp, "--no-progress"])
        total = time.process_time() - t0
    for owner, name, inner in saved:
        setattr(owner, name, inner)
    spent["inputs"] -= spent["channel"]        # inputs() calls the channel
    spent["rest"] = total - sum(spent.values())
    return total, spent


def nr_phases_main(args):
    from airlink.traces import parse_duration
    sim_s = float(parse_duration(args.duration))
    S.simulate("nr-fr1", duration="5ms")      # compile / load the cached kernel once
    runs = [nr_phases(args.duration) for _ in range(args.repeat)]
    totals = sorted(t for t, _ in runs)
    print(f"airlink simulate --preset nr-fr1 --duration {args.duration}, in-process (interpreter start and "
          f"imports excluded), {args.repeat} runs: {totals[len(totals) // 2] / sim_s:.4f} s CPU per simulated s "
          f"median ({totals[0] / sim_s:.4f}-{totals[-1] / sim_s:.4f})")
    for label in runs[0][1]:
        v = sorted(p[label] / sim_s for _, p in runs)
        print(f"  {label:10s} {v[len(v) // 2]:.4f} s CPU per simulated s ({v[0]:.4f}-{v[-1]:.4f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="60s")
    ap.add_argument("--ref-ttis", type=int, default=300)
    ap.add_argument("--step-ttis", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each airlink step (median and best)")
    ap.add_argument("--nr", action="store_true", help="the nr-fr1 whole-process benchmark (issue #27)")
    ap.add_argument("--nr-phases", action="store_true",
                    help="where nr-fr1's CPU time goes: channel, inputs, kernel, MAC columns, files, rest")
    ap.add_argument("--first-run", action="store_true",
                    help="with --nr: also a process with an empty numba cache (a fresh clone's first run)")
    ap.add_argument("--as-is", action="store_true",
                    help="--nr: measure in this environment as it is (keep PYTHONDONTWRITEBYTECODE if set)")
    args = ap.parse_args()
    if args.as_is:
        global CHILD_ENV
        CHILD_ENV = os.environ
    if args.nr_phases:
        return nr_phases_main(args)
    if args.nr:
        return nr_main(args)
    print(f"numba kernel compiled: {K.COMPILED}")
    S.simulate("imt-advanced", duration="5ms")   # compile / load the cached kernel once
    res, dt, wall = end_to_end(args.duration)
    n = res.capacity.n_tti
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"end to end: imt-advanced {args.duration} ({n} TTIs, 10 users x 400 subchannels, TU6, "
          f"MC-PFS, HARQ, CSI delay 3), channel included: {dt:.2f} s CPU ({wall:.2f} s wall) "
          f"= {n / dt:,.0f} TTI/s; "
          f"peak RSS {rss_mb:.0f} MB; aggregate {res.summary['aggregate_throughput_mbps']:.1f} Mbit/s")

    n_step = args.step_ttis
    sinr, table, bpm, perm = inputs(max(n_step, args.ref_ttis))
    rates = given_rates(sinr, table, bpm)
    kernel_pf(sinr[:10], table, bpm, perm[:10])                 # warm-up (compiled code in cache)
    kernel_pf(sinr[:10], table, bpm, perm[:10], harq=True)
    airlink_given_rates(rates[:10], perm[:10])
    s_, p_ = sinr[:n_step], perm[:n_step]
    full_min, full_med, _ = best_of(lambda: kernel_pf(s_, table, bpm, p_), args.repeat)
    harq_min, harq_med, _ = best_of(lambda: kernel_pf(s_, table, bpm, p_, harq=True), args.repeat)
    alone_min, alone_med, _ = best_of(lambda: airlink_given_rates(rates[:n_step], p_), args.repeat)

    m = args.ref_ttis
    ref, ref_perm = sinr[:m], perm[:m]
    tp, counts_p = python_pf(ref, table, bpm, ref_perm)
    tn, counts_n = numpy_pf(ref, table, bpm, ref_perm)
    tg, counts_g = python_pf_given_rates(ref, table, bpm, ref_perm)
    _, counts_k = kernel_pf(ref, table, bpm, ref_perm)
    _, counts_a = airlink_given_rates(rates[:m], ref_perm)
    k_counts = counts_k.sum(axis=0)
    def total(c):
        return np.asarray(c).reshape(-1, 10).sum(axis=0)

    same = {name: bool(np.array_equal(total(c), k_counts))
            for name, c in (("pure-Python", counts_p), ("plain loop", counts_g), ("numpy", counts_n),
                            ("step alone", counts_a))}
    same["step alone per TTI"] = bool(np.array_equal(counts_a, counts_k))
    r_py, r_plain, r_np = m / tp, m / tg, m / tn

    def rate(t):
        return n_step / t

    print(f"scheduling step, 10 users x 400 subchannels, MC-PFS; CPU time, median (best) of "
          f"{args.repeat} runs of {n_step} TTIs:")
    print(f"  airlink full step (MCS lookup + MC-PFS + block/HARQ bookkeeping, no block errors): "
          f"{rate(full_med):,.0f} ({rate(full_min):,.0f}) TTI/s")
    print(f"  airlink full step with block errors and HARQ retransmissions:                   "
          f"{rate(harq_med):,.0f} ({rate(harq_min):,.0f}) TTI/s")
    print(f"  airlink step alone on the plain loop's rates (schedule_rates):                  "
          f"{rate(alone_med):,.0f} ({rate(alone_min):,.0f}) TTI/s")
    print(f"  references on {m} TTIs: pure-Python loop with lookup {r_py:,.0f} TTI/s; plain Python PF loop, "
          f"rates given (lookup not timed) {r_plain:,.0f} TTI/s; numpy per-TTI loop {r_np:,.0f} TTI/s")
    print("ratios (median):")
    print(f"  full step / pure-Python loop with lookup (same work):       {rate(full_med) / r_py:,.0f}x")
    print(f"  full step / plain loop, rates given (airlink does more):    {rate(full_med) / r_plain:,.1f}x")
    print(f"  step alone / plain loop, rates given (same inputs, work):   {rate(alone_med) / r_plain:,.1f}x")
    print(f"  full step with HARQ errors / plain loop, rates given:       {rate(harq_med) / r_plain:,.1f}x")
    print(f"  full step / numpy per-TTI loop:                             {rate(full_med) / r_np:,.1f}x")
    target = 50
    def verdict(r):
        return "met" if r / r_plain >= target else "NOT met"

    print(f"target >= {target}x the plain loop: full step {verdict(rate(full_med))}, "
          f"step alone {verdict(rate(alone_med))}")
    print(f"same decisions on {m} TTIs as the full step: " + ", ".join(f"{k} {v}" for k, v in same.items()))


if __name__ == "__main__":
    main()
