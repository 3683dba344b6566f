"""Experiments: describe the whole loop once in YAML, run it with ``airlink run``.

An experiment file has these sections (all but ``name`` optional)::

    name: pf-cell
    description: PF cell, user 1 replayed under live TCP
    radio:                      # where capacity comes from: a simulated cell ...
      preset: quick             #   any airlink.sim preset
      seed: 1
      duration: 20s
      scheduler: pf             #   any other key is a preset override
      user: 1                   #   the user whose capacity the link replays
    # radio: {trace: path/to/measured.down}   # ... or a measured trace (Mahimahi or Parquet)
    shells:                     # outermost first, as on a command line
      - delay: 20               # ms each way
      - loss: {downlink: 0.001}
      - link: {queue: droptail, queue_args: "packets=200"}
    applications:               # run together inside the emulated link
      - bulk: {cc: cubic, seconds: 15}       # TCP download, TCP_CONGESTION per socket
      - iperf3: {args: "-R -t 10", cc: bbr}
      - onoff: {rate: 76.8kbps, on: 1, off: 5, seconds: 30}
      - command: "ping -c 5 $AIRLINK_BASE"
    capture: {inside: true, host: true, snaplen: 128}
    collect: {resolution: 1s}
    infer:                      # defaults as airlink infer nmi: 100 surrogates, 100 bootstrap, 16 bins
      surrogates: 50
      nmi:                      # default: what the available frames allow
        - {source: mac, target: assigned_rate_bps, factors: [backlog_bytes, sinr_db], max_lag: 5s}
    offline:                    # used when the live part cannot run here
      captures: [../shared/data/tcp-pcaps/zeek-head/206_example_b.pcap]

or, instead of ``radio``, a link shell and ``applications``, a live cell (``airlink cell``:
several UEs share one scheduled downlink; ``delay``/``loss`` shells wrap it)::

    cell:
      preset: quick
      scheduler: pf
      users: 4
      queue_args: packets=100
      set: {pf_a: 0.01}         # any preset parameter
      applications: [{bulk: {cc: reno, seconds: 10}}]        # every UE not in ues
      ues: {1: [{onoff: {rate: 38.4kbps}}], 2-3: [bulk]}      # per UE: number, range, list

Stages, in order: **radio** (simulate or read the trace) -> **live** (shells + applications,
tcpdump inside the namespace and on the host) -> **collect** (captures -> packets, flows and
TCP series and events frames) -> **infer** (:func:`airlink.inference.rank_factors`, as
``airlink infer nmi`` computes it -> ``nmi.json``) -> **report** (``report.html``). The live
stage needs root, ``ip netns`` and ``/dev/net/tun``; without them it is skipped with the
reason, and the offline stages run on what exists (``offline.captures``). The whole file is
checked before any stage runs. Every artifact lands in the output folder (declared in
:mod:`airlink.rundir`, written atomically) with the experiment file as run
(``experiment.yaml``), ``versions.json``, ``run.json`` (stage status, timings, notes) and
``manifest.json`` (what the run wrote, and whether it finished), so a run can be repeated.
A non-empty output folder is refused unless ``overwrite=True``.

Modules, by responsibility: :mod:`~airlink.experiment.spec` (the file: declared sections,
defaults, checks), :mod:`~airlink.experiment.stages` (the runner and the radio, collect and
report stages), :mod:`~airlink.experiment.context` (the :class:`RunContext` every stage is
given: experiment, run folder, progress, ``run.json``'s notes and what earlier stages left), :mod:`~airlink.experiment.live` (the live stage: shells, tcpdump, server,
supervision, the cell's command line), :mod:`~airlink.experiment.cellrun` (a cell run's
per-UE numbers, fairness and jitter), :mod:`~airlink.experiment.infer` (NMI factor rankings through
:func:`airlink.inference.rank_factors`), :mod:`~airlink.experiment.inside` (what runs inside
the emulated link). The run folder's artifacts are declared in :mod:`airlink.rundir`.
"""
from __future__ import annotations

from airlink.experiment.inside import run_inside
from airlink.experiment.live import live_unavailable_reason
from airlink.experiment.spec import Experiment, check_experiment, load_experiment
from airlink.experiment.stages import RunResult, Runner, versions


def run_experiment(experiment, outdir, *, live: bool | None = None, progress: bool = True,
                   report: bool = True, overrides: dict | None = None, overwrite: bool = False) -> RunResult:
    """Run an experiment (a YAML path, a mapping or an :class:`Experiment`) into ``outdir``.

    ``live``: None runs the live stage when this machine allows it (else says why and goes
    on offline), True requires it (error when impossible), False skips it.
    ``overrides``: dotted keys applied to the file, e.g. ``{"radio.trace": "x.down"}``.
    ``overwrite``: an existing non-empty ``outdir`` is an error unless this is True; then the
    artifacts of the earlier run (as its ``manifest.json`` lists them) are removed and any
    other file in the folder stays.
    Returns a :class:`RunResult` whose ``info`` is the content of ``run.json``.
    """
    exp = experiment if isinstance(experiment, Experiment) else load_experiment(experiment, overrides=overrides)
    return Runner(exp, outdir, live=live, progress=progress, report=report, overwrite=overwrite).run()


__all__ = ["Experiment", "load_experiment", "check_experiment", "run_experiment", "Runner", "RunResult",
           "live_unavailable_reason", "versions", "run_inside"]

