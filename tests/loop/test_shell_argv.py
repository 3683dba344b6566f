"""The command lines the runner gives the shells are read by the shells' real parsers.

Every key of the ``shells`` and ``cell`` sections is set to a value other than its default
and must arrive, as written here by hand, in the namespace ``airlink delay|loss|link|cell``
parses from the argv the live stage builds; every bundled example's argv parses, and the
chained command line splits back into the same shells.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from airlink.experiment.live import check_experiment_shells, shell_command
from airlink.experiment.spec import Cell, DelayShell, LinkShell, LossShell, load_experiment
from airlink.traces import AirlinkError

REPO = Path(__file__).resolve().parents[2]
OUT = Path("OUTDIR")
APPS = [{"bulk": 2}]


def _shells(*shells):
    return {"radio": {"preset": "quick"}, "shells": list(shells), "applications": APPS}


def _cell(**keys):
    return {"cell": {"preset": "quick", "users": 2, "applications": APPS, **keys}}


# (model, key, experiment, shell, namespace attribute, value the shell must parse)
CASES = [
    (DelayShell, "ms", _shells({"delay": 12.5}), "delay", "ms", 12.5),
    (DelayShell, "trace", _shells({"delay": {"trace": "d.csv"}}), "delay", "trace", Path("d.csv")),
    (LossShell, "downlink", _shells({"loss": {"downlink": 0.02}}), "loss", ("direction", "rate"), ("downlink", 0.02)),
    (LossShell, "uplink", _shells({"loss": {"uplink": 0.03}}), "loss", ("direction", "rate"), ("uplink", 0.03)),
    (LinkShell, "queue", _shells({"link": {"queue": "codel"}}), "link", "downlink_queue", "codel"),
    (LinkShell, "queue_args", _shells({"link": {"queue": "codel", "queue_args": "target=5ms"}}), "link",
     "downlink_queue_args", "target=5ms"),
    (LinkShell, "downlink_queue", _shells({"link": {"downlink_queue": "pie"}}), "link", "downlink_queue", "pie"),
    (LinkShell, "downlink_queue_args", _shells({"link": {"downlink_queue": "droptail",
                                                         "downlink_queue_args": "packets=9"}}),
     "link", "downlink_queue_args", "packets=9"),
    (LinkShell, "uplink_queue", _shells({"link": {"uplink": "u.trace", "uplink_queue": "codel"}}),
     "link", "uplink_queue", "codel"),
    (LinkShell, "uplink_queue_args", _shells({"link": {"uplink": "u.trace", "uplink_queue": "drophead",
                                                       "uplink_queue_args": "bytes=9000"}}),
     "link", "uplink_queue_args", "bytes=9000"),
    (LinkShell, "uplink", _shells({"link": {"uplink": "u.trace"}}), "link", ("uplink", "uplink_log"),
     (Path("u.trace"), OUT / "uplink.log")),
    (LinkShell, "once", _shells({"link": {"once": True}}), "link", "once", True),
    (Cell, "preset", _cell(preset="evdo"), "cell", "preset", "evdo"),
    (Cell, "scheduler", _cell(scheduler="maxcir"), "cell", "scheduler", "maxcir"),
    (Cell, "users", _cell(users=3), "cell", "users", 3),
    (Cell, "seed", _cell(seed=4), "cell", "seed", 4),
    (Cell, "tti", _cell(tti="2ms"), "cell", "tti", "2ms"),
    (Cell, "duration", _cell(duration="5s"), "cell", "duration", "5s"),
    (Cell, "overrides", _cell(set={"pf_a": 0.01}), "cell", "config", [OUT / "apps" / "cell-set.yaml"]),
    (Cell, "queue", _cell(queue="drophead"), "cell", "queue", "drophead"),
    (Cell, "queue", _cell(queue="l4s"), "cell", "queue", "l4s"),
    (Cell, "ecn", _cell(queue="codel", ecn=True), "cell", ("queue", "ecn"), ("codel", True)),
    (Cell, "queue_args", _cell(queue_args="bytes=30000"), "cell", "queue_args", "bytes=30000"),
    (Cell, "uplink", _cell(uplink="2Mbit/s"), "cell", "uplink", "2Mbit/s"),
    (Cell, "warmup", _cell(warmup="10KB"), "cell", "warmup", "10KB"),
    (Cell, "late_after", _cell(late_after="1ms"), "cell", "late_after", "1ms"),
    (Cell, "realtime", _cell(realtime=True), "cell", "realtime", True),
    (Cell, "from_log", _cell(from_log="no-such.csv"), "cell", "from_log", Path("no-such.csv")),
    (Cell, "follow_rnti", _cell(from_log="x.csv", follow_rnti=[23938, "model"]), "cell", "follow_rnti",
     "23938,model"),
    (Cell, "log_direction", _cell(from_log="x.csv", log_direction="uplink"), "cell", "log_direction", "uplink"),
    (Cell, "log_start", _cell(from_log="x.csv", log_start="68.5s"), "cell", "log_start", "68.5s"),
    (Cell, "log_others", _cell(from_log="x.parquet", log_others="demand"), "cell", "log_others", "demand"),
    (Cell, "log_channel", _cell(from_log="x.parquet", log_channel="selective"), "cell", "log_channel",
     "selective"),
    (Cell, "rps", _cell(rps="pin"), "cell", "rps", "pin"),
]
# keys that do not travel on a shell's command line, and why
NOT_ON_THE_COMMAND_LINE = {
    (LossShell, "gilbert"): "refused by the spec (test_gilbert_is_refused_with_a_pointer)",
    (Cell, "applications"): "the applications run inside the cell (apps/plan.json)",
    (Cell, "ues"): "per-UE applications (apps/plan.json)",
}


@pytest.mark.parametrize("model,key,spec,shell,attr,want", CASES, ids=[f"{c[0].__name__}.{c[1]}" for c in CASES])
def test_every_key_reaches_the_shells_parser(model, key, spec, shell, attr, want):
    parsed = [ns for argv, ns in check_experiment_shells(load_experiment(spec), outdir=OUT) if argv[0] == shell]
    assert len(parsed) == 1
    got = tuple(getattr(parsed[0], a) for a in attr) if isinstance(attr, tuple) else getattr(parsed[0], attr)
    assert got == want


@pytest.mark.parametrize("model", [DelayShell, LossShell, LinkShell, Cell])
def test_every_key_of_the_sections_is_covered(model):
    covered = {key for m, key, *_ in CASES if m is model} | {k for m, k in NOT_ON_THE_COMMAND_LINE if m is model}
    assert covered == set(model.model_fields)


def _examples():
    """Every bundled experiment, and every point of every bundled sweep."""
    import yaml

    from airlink.sweep.spec import check_points, load_sweep
    for path in sorted((REPO / "examples").glob("**/*.yaml")):
        if "experiment" in yaml.safe_load(path.read_text()):
            for point, exp in check_points(load_sweep(path)).items():
                yield f"{path.name}:{point}", exp
        else:
            yield path.name, load_experiment(path)


def test_every_example_gives_the_shells_command_lines_they_parse():
    from airlink.cli._shellargs import split_command
    seen = 0
    for name, exp in _examples():
        argvs = [argv for argv, _ in check_experiment_shells(exp, outdir=OUT)]
        if not argvs:
            assert not exp.model.applications and exp.model.cell is None, name    # no live stage
            continue
        # the chained command line splits back into the same shells, outermost first
        command = shell_command(argvs) + ["--", "true"]
        for argv in argvs:
            start = command.index(argv[0])
            own, command = split_command(command[start:])
            assert own == argv, name
        assert command == ["true"], name
        seen += 1
    assert seen >= 10


def test_gilbert_is_refused_with_a_pointer():
    with pytest.raises(AirlinkError, match=r"shells\[0\]\.loss.*gilbert.*airlink loss DIRECTION --gilbert"):
        load_experiment(_shells({"loss": {"downlink": 0.01, "gilbert": "0.1,0.3"}}))


def test_a_value_a_shell_refuses_is_a_spec_error_naming_the_section():
    with pytest.raises(AirlinkError, match=r"experiment: shells\[1\]\.link\.queue: Input should be 'infinite', "
                                           r"'droptail', .* \(got 'fifo'\)"):
        load_experiment(_shells({"delay": 5}, {"link": {"queue": "fifo"}}))
    # arguments the queue does not take: refused by the check, before a run starts
    with pytest.raises(AirlinkError, match=r"experiment: shells\[1\]\.link: droptail queue takes packets, "
                                           r"bytes, ecn; got bogus"):
        load_experiment(_shells({"delay": 5}, {"link": {"queue": "droptail", "queue_args": "bogus=1"}}))
