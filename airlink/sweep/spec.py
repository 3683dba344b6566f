"""The sweep file: a base experiment and a grid of its dotted keys, checked before any work.

A sweep file is a YAML mapping::

    name: pf-vs-maxcir                 # optional (default: the file's stem)
    experiment: ../pf-cell.yaml        # the base experiment, relative to this file
    offline: true                      # only the offline stages (default false: live where root)
    grid:                              # dotted experiment keys -> values; the product is swept
      radio.scheduler: [maxcir, pf]
      radio.duration: [1s, 2s]
    seeds: [1, 2, 3]                   # or  repeat: 3  (= seeds 1, 2, 3)
    seed_key: radio.seed               # the key the seeds go to (default radio.seed; cell.seed for a cell)
    reports: false                     # no report page per run (default: the experiment's setting)
    report:                            # what ``airlink sweep report`` draws (all optional)
      metric: summary.aggregate_throughput_mbps
      x: radio.duration
      by: radio.scheduler

Each point of ``grid x seeds`` is one run of the base experiment with those keys set
(:func:`airlink.experiment.load_experiment` ``overrides``). A point's id is stable: it is
made from its parameters only (not from their order in the file), so adding a value to a
grid keeps the ids, and the folders, of the points that were already there.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from airlink.traces import AirlinkError
from airlink.core import bounds as B
from airlink.core.yamlfile import read_yaml_mapping

Scalar = Union[bool, int, float, str]
#: a grid value: a scalar, or a whole list or mapping put in place of the key's value (how a
#: sweep reaches into the experiment's lists: ``shells: [[...], [...]]``)
Value = Union[Scalar, list, dict]


class ReportSpec(BaseModel):
    """What ``airlink sweep report`` draws; None = chosen from the campaign."""

    model_config = ConfigDict(extra="forbid")
    metric: Optional[str] = None
    x: Optional[str] = None
    by: Optional[str] = None


class SweepSpec(BaseModel):
    """A sweep file as validated (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    name: Optional[str] = None
    description: Optional[str] = None
    experiment: str
    offline: bool = False
    grid: dict[str, list[Value]] = Field(default_factory=dict)
    seeds: Optional[list[B.SEED.annotated(int)]] = None
    repeat: Optional[int] = Field(default=None, ge=1, le=B.MAX_SWEEP_POINTS)
    seed_key: str = "radio.seed"
    reports: Optional[bool] = None
    report: ReportSpec = Field(default_factory=ReportSpec)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v):
        """The default campaign folder is ``campaigns/<name>``: one path component."""
        from airlink.outfolder import is_plain_name
        if v is not None and not is_plain_name(v):
            raise ValueError(f"must be a plain name (one folder name: no '/', not '.' or '..', not an "
                             f"absolute path), got {v!r}")
        return v

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid):
        for key, values in grid.items():
            if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", key):
                raise ValueError(f"{key}: not a dotted key of the experiment file (like radio.seed)")
            if not values:
                raise ValueError(f"{key}: an empty list sweeps nothing")
            seen = set()
            for v in values:
                canon = json.dumps(v)
                if canon in seen:
                    raise ValueError(f"{key}: value {v!r} is listed twice")
                seen.add(canon)
        return grid

    @model_validator(mode="after")
    def _seeds(self):
        if self.seeds is not None and self.repeat is not None:
            raise ValueError("give seeds or repeat, not both")
        if self.seeds is not None:
            if not self.seeds:
                raise ValueError("seeds: an empty list runs nothing")
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError("seeds: a seed is listed twice")
        if (self.seeds is not None or self.repeat is not None) and self.seed_key in self.grid:
            raise ValueError(f"{self.seed_key} is both in grid and given by seeds/repeat")
        sizes = [len(v) for v in self.grid.values()] + [len(self.seed_values or [0])]
        points = 1
        for n in sizes:
            points *= n
        B.check_budget(points, B.MAX_SWEEP_POINTS, "grid: " + " x ".join(map(str, sizes)) + " values make",
                       "points")
        return self

    @property
    def seed_values(self) -> list[int] | None:
        if self.seeds is not None:
            return list(self.seeds)
        if self.repeat is not None:
            return list(range(1, self.repeat + 1))
        return None


@dataclass(frozen=True)
class Point:
    """One run of the sweep: its stable id and the dotted keys it sets."""

    id: str
    params: dict

    def to_dict(self) -> dict:
        return {"id": self.id, "params": dict(self.params)}


@dataclass
class Sweep:
    """A loaded sweep: the checked spec, where it came from, and the base experiment's path."""

    spec: SweepSpec
    path: Path | None
    experiment_path: Path

    @property
    def name(self) -> str:
        return self.spec.name or (self.path.stem if self.path else "sweep")

    @property
    def keys(self) -> list[str]:
        """The swept keys in file order, the seed key last when seeds are given."""
        keys = list(self.spec.grid)
        if self.spec.seed_values is not None:
            keys.append(self.spec.seed_key)
        return keys

    def points(self) -> list[Point]:
        """Every point of the grid (times the seeds), in file order, last key fastest."""
        axes = dict(self.spec.grid)
        if self.spec.seed_values is not None:
            axes[self.spec.seed_key] = self.spec.seed_values
        if not axes:
            return [Point(point_id({}), {})]
        names = list(axes)
        return [Point(point_id(dict(zip(names, combo))), dict(zip(names, combo)))
                for combo in itertools.product(*(axes[k] for k in names))]

    def to_dict(self) -> dict:
        return {"name": self.name, "file": str(self.path) if self.path else None,
                "experiment": str(self.experiment_path), **self.spec.model_dump(mode="json")}


def canonical(obj) -> str:
    """The JSON text hashed for ids and fingerprints: sorted keys, no spaces."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def value_label(value) -> str:
    """A grid value as text: scalars as written, a list or mapping as its canonical JSON."""
    return canonical(value) if isinstance(value, (list, dict)) else str(value)


def point_id(params: dict) -> str:
    """``<last key part>=<value>_..._<8 hex>``: readable, filesystem-safe, and unique by the
    hash of the canonical parameters (sha256 of the sorted-key JSON, first 8 hex digits). A
    list or mapping value is shown by the first 6 hex digits of its own hash."""
    digest = hashlib.sha256(canonical(params).encode()).hexdigest()[:8]
    parts = [f"{k.rsplit('.', 1)[-1]}=" + (str(v) if not isinstance(v, (list, dict)) else
                                             hashlib.sha256(canonical(v).encode()).hexdigest()[:6])
             for k, v in params.items()]
    label = re.sub(r"[^A-Za-z0-9=.+-]+", "-", "_".join(parts))[:80].strip("-_.")
    return f"{label}_{digest}" if label else digest


def _where(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) if str(p).replace("_", "").replace("-", "").isalnum() else repr(str(p))
                   for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        known = ", ".join(SweepSpec.model_fields) if len(err["loc"]) == 1 else ", ".join(ReportSpec.model_fields)
        return f"{loc}: unknown key (known: {known})"
    if err["type"] == "missing":
        return f"{loc}: required key is missing"
    if loc == "grid" and msg.split(":", 1)[0] in (err.get("input") or {}):
        return f"grid.{msg}"  # the validator names the key: grid.<key>: ...
    return f"{loc}: {msg}" if loc else msg


def load_sweep(source) -> Sweep:
    """Read and check a sweep file (a YAML path, or a mapping whose ``experiment`` is relative
    to the working directory). Raises :class:`AirlinkError` naming the file and the key path
    (``sweep.yaml: grid.radio.seed: an empty list sweeps nothing``). Every point is then
    checked against the base experiment by :func:`check_points`."""
    path = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        raw = read_yaml_mapping(path, what="sweep", expect="a sweep file is a mapping (experiment:, grid:, ...)")
    elif isinstance(source, dict):
        raw = source
    else:
        raise AirlinkError(f"a sweep is a YAML file or a mapping, not {type(source).__name__}")
    label = str(path) if path else "sweep"
    if not isinstance(raw, dict):
        raise AirlinkError(f"{label}: a sweep file is a mapping (experiment:, grid:, ...)")
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise AirlinkError(f"{label}: {_where(exc)}") from None
    base = path.resolve().parent if path else Path.cwd()
    exp = Path(spec.experiment).expanduser()
    exp = exp if exp.is_absolute() else (base / exp)
    if not exp.is_file():
        raise AirlinkError(f"{label}: experiment: no such experiment file {exp}")
    if "seed_key" not in raw and "cell" in read_yaml_mapping(exp, what="experiment", expect="a mapping"):
        # a live cell has no radio section: its seed is cell.seed
        spec = SweepSpec.model_validate({**raw, "seed_key": "cell.seed"})
    return Sweep(spec, path, exp.resolve())


def check_points(sweep: Sweep) -> dict[str, Any]:
    """Load the base experiment with every point's overrides (what the runs will do), so a
    bad key or value fails now, naming the sweep file and the point; returns
    ``{point id: Experiment}``."""
    from airlink.experiment import load_experiment
    out = {}
    label = str(sweep.path) if sweep.path else "sweep"
    for p in sweep.points():
        try:
            out[p.id] = load_experiment(sweep.experiment_path, overrides=p.params)
        except AirlinkError as exc:
            raise AirlinkError(f"{label}: point {canonical(p.params)}: {exc}") from None
    return out


__all__ = ["SweepSpec", "ReportSpec", "Sweep", "Point", "load_sweep", "check_points", "point_id", "canonical",
           "value_label"]
