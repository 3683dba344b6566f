"""Experiments: the whole loop (radio -> live -> collect -> infer -> report) described in one
YAML file and run by ``airlink run`` or :func:`run_experiment`.

The file's sections and keys are declared in :mod:`~airlink.experiment.spec`; docs/loop.md
explains them with examples. Modules: :mod:`~airlink.experiment.spec` (the file),
:mod:`~airlink.experiment.runner` (the runner; radio, collect and report stages),
:mod:`~airlink.experiment.context` (the :class:`RunContext` every stage is given),
:mod:`~airlink.experiment.live` (shells, applications, captures),
:mod:`~airlink.experiment.infer_stage` (NMI factor rankings), :mod:`~airlink.experiment.cellrun`
(a cell run's per-UE numbers), :mod:`~airlink.experiment.inside` (what runs inside the link);
the run folder's artifacts are declared in :mod:`airlink.rundir`.
"""
from __future__ import annotations

from airlink.experiment.inside import run_inside
from airlink.experiment.live import live_unavailable_reason
from airlink.experiment.spec import Experiment, check_experiment, load_experiment
from airlink.experiment.runner import RunResult, Runner, versions


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

