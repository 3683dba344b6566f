"""A default shared by a library function and its command-line option is one value: the
option's default is the function's, for every pair below (the values as documented in
docs/inference.md and docs/traces.md, written here by hand)."""
from __future__ import annotations

import inspect

import pytest

from airlink.cli import build_parser


def _option_default(path, dest):
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if a.dest in ("command", "infer_command", "trace_command")
                      and name in (a.choices or {})).choices[name]
    return parser.get_default(dest)


def _library(name):
    import importlib
    module = {"rank_factors": "airlink.inference", "backlog_dependence": "airlink.inference",
              "analyze_cell": "airlink.inference.cell_logs", "compare": "airlink.traces",
              "analyze_tcp": "airlink.collectors.tcp"}[name]
    return getattr(importlib.import_module(module), name)


# (command path, option dest, library function, parameter, the documented value)
PAIRS = [
    (("infer", "nmi"), "max_lag", "rank_factors", "max_lag", "60s"),
    (("infer", "nmi"), "bins", "rank_factors", "bins", 16),
    (("infer", "nmi"), "surrogates", "rank_factors", "surrogates", 100),
    (("infer", "nmi"), "bootstrap", "rank_factors", "bootstrap", 100),
    (("infer", "nmi"), "seed", "rank_factors", "seed", 0),
    (("infer", "backlog"), "max_lag", "backlog_dependence", "max_lag", "2s"),
    (("infer", "backlog"), "window", "backlog_dependence", "window", "1s"),
    (("infer", "backlog"), "bins", "backlog_dependence", "bins", 16),
    (("infer", "backlog"), "surrogates", "backlog_dependence", "surrogates", 100),
    (("infer", "cell"), "window", "analyze_cell", "window", "1s"),
    (("trace", "from-log"), "max_lag", "compare", "max_lag", "3s"),
    (("collect",), "resolution", "analyze_tcp", "resolution", "1s"),
]


@pytest.mark.parametrize("path,dest,function,parameter,documented", PAIRS,
                         ids=[f"{' '.join(p[0])} {p[1]}" for p in PAIRS])
def test_the_option_and_the_function_share_one_default(path, dest, function, parameter, documented):
    library = inspect.signature(_library(function)).parameters[parameter].default
    assert _option_default(path, dest) == library == documented


def test_the_experiment_reads_the_same_declarations():
    from airlink.experiment.spec import Collect, Infer, NmiAnalysis
    rank = inspect.signature(_library("rank_factors")).parameters
    infer = Infer()
    assert (infer.bins, infer.surrogates, infer.bootstrap, infer.alpha) == \
        (rank["bins"].default, rank["surrogates"].default, rank["bootstrap"].default, rank["alpha"].default)
    assert Collect().resolution == inspect.signature(_library("analyze_tcp")).parameters["resolution"].default
    # the experiment's own, shorter lag scan (see airlink.experiment.spec.EXPERIMENT_MAX_LAG)
    assert NmiAnalysis(target="x", factors=["y"]).max_lag == "5s"
