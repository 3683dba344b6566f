"""The experiment file, declared: sections, their keys, types and defaults (each defined once,
here), checked before any stage runs.

The models are pydantic v2 with ``extra="forbid"``: an unknown key or a value of the wrong
type is an :class:`~airlink.traces.AirlinkError` naming the file and the key path
(``pf-cell.yaml: collect.resolutoin: unknown key``). Only ``radio`` takes keys of its own
beyond those declared: they are preset overrides passed to :func:`airlink.sim.simulate`,
checked against the simulator's one declaration, :class:`airlink.sim.config.CellConfig`. Durations are strings with a unit (``"500ms"``, ``"20s"``) or numbers of
seconds; they are kept as given and parsed with :func:`airlink.traces.parse_duration`.

:class:`Experiment` keeps the mapping as written (``spec``, with overrides applied: what
``experiment.yaml`` in the run folder holds) and the checked model with every default
filled in (``model``), which the stages read.
"""
from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError,
                      model_validator)

from airlink.cli.cell import RPS_MODES                  # the cell's --rps modes (no numpy)
from airlink.cli.link import QUEUES as SHELL_QUEUES    # the shells' queue disciplines (no numpy)
from airlink.traces import AirlinkError, parse_duration, parse_rate
from airlink.core import bounds as B
from airlink.core.units import parse_size
from airlink.core.yamlfile import error_key_path as _key_path, error_message as _message, read_yaml_mapping

STAGES = ("radio", "live", "collect", "infer", "report")
SHELL_KINDS = ("delay", "loss", "link")
APP_KINDS = ("bulk", "iperf3", "onoff", "command")
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")


def _parses(parse, value, *, example: str):
    """``value`` after ``parse(value)`` succeeded; pydantic's ValueError (its message) if not."""
    if isinstance(value, bool):
        raise ValueError(f"expected {example}")
    try:
        parse(value)
    except AirlinkError as exc:
        raise ValueError(str(exc)) from None
    return value


def _check_duration(value):
    return _parses(parse_duration, value if isinstance(value, str) else f"{value}s",
                   example="a duration such as 500ms or 20s")


def _check_rate(value):
    return _parses(parse_rate, str(value), example="a rate such as 2Mbit/s")


def _check_size(value):
    return _parses(parse_size, value, example="a size in bytes such as 300KB or 50000")


#: a duration: ``"500ms"``, ``"20s"``, or a number of seconds (kept as ``"<n>s"``)
Duration = Annotated[Union[str, int, float], AfterValidator(_check_duration)]
Rate = Annotated[Union[str, int, float], AfterValidator(_check_rate)]


def _duration_in(bound):
    """A :data:`Duration` whose value lies in ``bound``'s range (:mod:`airlink.core.bounds`)."""
    def check(value):
        why = bound.problem(parse_duration(value if isinstance(value, str) else f"{value}s"))
        if why is not None:
            raise ValueError(why)
        return value
    return Annotated[Duration, AfterValidator(check)]
Text = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)]
CC = Literal["reno", "cubic", "bbr"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


# ---------------------------------------------------------------------------- radio
def _check_parameters(values: dict, where: str) -> None:
    """Check simulator parameters (names and values) against
    :class:`airlink.sim.config.CellConfig`, which declares them and their defaults."""
    if not values:
        return
    from airlink.sim.config import DEFAULTS, parameter_name, validate_config
    try:
        named = {parameter_name(key, f"{where}.{key}"): value for key, value in values.items()}
        validate_config({**DEFAULTS, **named})
    except AirlinkError as exc:
        message = str(exc)
        raise ValueError(message if message.startswith(f"{where}.") else f"{where}.{message}") from None


class Radio(_Model):
    """Where capacity comes from: a simulated cell (``preset`` and overrides) or a measured
    ``trace`` (Mahimahi or Parquet)."""

    model_config = ConfigDict(extra="allow")
    preset: str | None = None
    trace: str | None = None
    seed: B.SEED.annotated(int) = 0
    duration: _duration_in(B.SIM_DURATION) | None = None      # None: the preset's duration
    user: Text = "1"

    @model_validator(mode="after")
    def _one_source(self):
        if self.trace is not None and self.preset is not None:
            raise ValueError("give either a preset or a trace, not both")
        _check_parameters(self.overrides(), "radio")
        return self

    def overrides(self) -> dict:
        """The preset overrides (every key not declared above)."""
        return dict(self.model_extra or {})


# ---------------------------------------------------------------------------- shells
class DelayShell(_Model):
    ms: B.DELAY_MS.annotated(float) = 0.0
    trace: str | None = None


class LossShell(_Model):
    """Independent loss on each direction given (``airlink loss DIRECTION RATE``).
    ``gilbert`` is refused with a pointer: ``airlink loss`` takes a rate or a Gilbert-Elliott
    chain, and a direction given here always carries a rate."""
    downlink: B.PROBABILITY.annotated(float) | None = None
    uplink: B.PROBABILITY.annotated(float) | None = None
    gilbert: str | None = None

    @model_validator(mode="after")
    def _no_gilbert(self):
        if self.gilbert is not None:
            raise ValueError("gilbert: bursty loss is not available in an experiment file (a loss "
                             "shell here takes downlink/uplink rates); run `airlink loss DIRECTION "
                             "--gilbert P_GB,P_BG` as the command instead")
        return self


class LinkShell(_Model):
    queue: Literal[tuple(SHELL_QUEUES)] | None = None
    queue_args: Text | None = None
    downlink_queue: Literal[tuple(SHELL_QUEUES)] | None = None
    downlink_queue_args: Text | None = None
    uplink_queue: Literal[tuple(SHELL_QUEUES)] | None = None
    uplink_queue_args: Text | None = None
    uplink: str | None = None
    once: bool = False


def _one_of(kinds):
    """Before-validator of a list item ``{kind: options}`` (or a bare ``kind``): exactly one
    known kind."""
    def check(item):
        if isinstance(item, str) and item in kinds:
            return {item: {}}
        if not isinstance(item, dict) or len(item) != 1 or next(iter(item)) not in kinds:
            raise ValueError(f"must be one of {', '.join(kinds)} with its options")
        kind, options = next(iter(item.items()))
        return {kind: {} if options is None else options}     # `- delay:` = the defaults
    return check


def _scalar_as(key):
    """Before-validator: a bare value stands for ``{key: value}`` (``delay: 20``)."""
    def wrap(v):
        if v is None:
            return {}
        return v if isinstance(v, dict) else {key: v}
    return wrap


class _OneOf(_Model):
    """A list item that is exactly one of the fields in ``KINDS``."""
    KINDS: ClassVar[tuple] = ()

    @property
    def kind(self) -> str:
        return next(k for k in self.KINDS if getattr(self, k) is not None)

    @property
    def options(self):
        return getattr(self, self.kind)


class Shell(_OneOf):
    KINDS: ClassVar[tuple] = SHELL_KINDS
    delay: Annotated[DelayShell, BeforeValidator(_scalar_as("ms"))] | None = None
    loss: Annotated[LossShell, BeforeValidator(_scalar_as("downlink"))] | None = None
    link: Annotated[LinkShell, BeforeValidator(_scalar_as("queue"))] | None = None


# ---------------------------------------------------------------------------- applications
class Bulk(_Model):
    """A TCP download from the host's server, ``cc`` set per socket; ``rwnd``: the client's
    receive buffer (``SO_RCVBUF`` before connecting, e.g. ``8KiB``; None = the kernel's
    autotuning), as in Mattar et al.'s 8 vs 64 KB receive windows."""
    cc: CC | None = None
    seconds: Duration = "10s"
    rwnd: Annotated[Union[str, int], AfterValidator(_check_size)] | None = None
    start: float = Field(0.0, ge=0)


class Iperf3(_Model):
    args: Text | list[Text] = "-R -t 10"
    cc: CC | None = None
    start: float = Field(0.0, ge=0)


class OnOff(_Model):
    """UDP at ``rate`` for ``on`` seconds, silent for ``off`` seconds, for ``seconds``."""
    rate: Rate = "76.8kbps"
    on: float = Field(1.0, gt=0)
    off: float = Field(5.0, ge=0)
    seconds: Duration = "30s"
    size: int = Field(1000, gt=0, le=65507)
    start: float = Field(0.0, ge=0)


class Command(_Model):
    command: Text | list[Text]
    seconds: float = Field(0.0, ge=0)
    start: float = Field(0.0, ge=0)


def _yaml_on_off(v):
    """YAML 1.1 reads the keys ``on``/``off`` as booleans: give them their names back."""
    if isinstance(v, dict):
        return {({True: "on", False: "off"}[k] if isinstance(k, bool) else k): x for k, x in v.items()}
    return v


class Application(_OneOf):
    KINDS: ClassVar[tuple] = APP_KINDS
    bulk: Annotated[Bulk, BeforeValidator(_scalar_as("seconds"))] | None = None
    iperf3: Annotated[Iperf3, BeforeValidator(_scalar_as("args"))] | None = None
    onoff: Annotated[OnOff, BeforeValidator(_yaml_on_off), BeforeValidator(_scalar_as("rate"))] | None = None
    command: Annotated[Command, BeforeValidator(_scalar_as("command"))] | None = None


# ---------------------------------------------------------------------------- cell

def parse_ues(key) -> list[int]:
    """UE numbers of a ``cell.ues`` key: ``3``, ``"2-4"`` (a range, both ends included) or
    ``"1,3,5"`` (and mixes: ``"1,4-6"``)."""
    out = []
    for part in str(key).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not m:
            raise ValueError("a UE number (3), a range (2-4) or a list (1,3,5-7)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo < 1 or hi < lo:
            raise ValueError("UE numbers count from 1 and a range goes upwards (2-4)")
        out.extend(range(lo, hi + 1))
    return out


AppList = Annotated[list[Annotated[Application, BeforeValidator(_one_of(APP_KINDS))]],
                    BeforeValidator(lambda v: [] if v is None else v)]


class Cell(_Model):
    """A live cell (:func:`airlink.replay.cell.run_cell`): every UE in its own namespace, one
    scheduled downlink fed by the live queue backlogs. Options as ``airlink cell``'s; None
    means the preset's value. ``set``: preset parameters (``{pf_a: 0.01}``). Applications:
    ``applications`` run in every UE that ``ues`` does not list; ``ues`` maps UE numbers
    (``1``, ``2-4``, ``1,3``) to that UE's own list."""

    preset: str | None = None
    scheduler: str | None = None
    users: B.CELL_UES.annotated(int) | None = None
    seed: B.SEED.annotated(int) = 0
    tti: _duration_in(B.TTI) | None = None
    duration: _duration_in(B.SIM_DURATION) | None = None           # None: until every UE's applications ended
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set")
    queue: Literal[tuple(SHELL_QUEUES)] = "droptail"
    queue_args: Text | None = None             # without packets=/bytes=: the preset's buffer_packets packets
    ecn: bool = False                          # CE-mark ECN-capable packets instead of dropping (codel, pie)
    uplink: Text | None = None                 # None: unconstrained; a rate or a trace path
    warmup: Annotated[Union[str, int], AfterValidator(_check_size)] | None = None   # bytes
    late_after: _duration_in(B.WINDOW) | None = None         # None: half a TTI
    realtime: bool = False
    rps: Literal[RPS_MODES] = "off"            # Receive Packet Steering on the UEs' devices (airlink cell --rps)
    # a recorded cell replayed (airlink cell --from-log): an NR-Scope CSV or an airlink MAC log,
    # whose RNTIs (UEs) each UE's channel follows (one RNTI, "busiest", "model", or a list of one
    # per UE), the direction of the cross-traffic DCIs, where in the log the run starts, and the
    # other users as their recorded share or (a MAC log) as their recorded demand, flows, or
    # demand with the bulk ones full buffers (mixed); the replayed UEs' channel: their recorded
    # wideband SINR over the preset's fading (selective, where a MAC log has it) or their
    # recorded row (flat; an NR-Scope log always)
    from_log: Text | None = None
    follow_rnti: Union[int, str, list[Union[int, str]]] | None = None
    log_direction: Literal["downlink", "uplink"] = "downlink"
    log_start: Duration | None = None
    log_others: Literal["share", "demand", "flows", "mixed"] = "share"
    log_channel: Literal["flat", "selective"] = "selective"
    applications: AppList = []
    ues: Annotated[dict[str, AppList], BeforeValidator(
        lambda v: {} if v is None else ({str(k): x for k, x in v.items()} if isinstance(v, dict) else v))] = {}

    @model_validator(mode="after")
    def _ues(self):
        _check_parameters(self.overrides, "cell.set")
        seen: dict = {}
        for key in self.ues:
            try:
                numbers = parse_ues(key)
            except ValueError as exc:
                raise ValueError(f"cell.ues.{key}: {exc}") from None
            for n in numbers:
                if n in seen:
                    raise ValueError(f"cell.ues.{key}: UE {n} is also in cell.ues.{seen[n]}")
                if self.users is not None and n > self.users:
                    raise ValueError(f"cell.ues.{key}: UE {n} but the cell has {self.users} UEs (cell.users)")
                seen[n] = key
        if not self.applications and not any(self.ues.values()):
            raise ValueError("cell: no application for any UE (give cell.applications, run by every UE, "
                             "and/or cell.ues, per UE)")
        return self

    def per_ue(self, n_users: int) -> list:
        """The applications of UE 1..``n_users``, a list per UE (``ues`` entries replace
        ``applications`` for the UEs they name)."""
        out = [list(self.applications) for _ in range(n_users)]
        for key, apps in self.ues.items():
            for n in parse_ues(key):
                if n > n_users:
                    raise AirlinkError(f"cell.ues.{key}: UE {n} but the cell has {n_users} UEs")
                out[n - 1] = list(apps)
        return out

    def options(self) -> dict:
        """Keyword options of :class:`airlink.replay.cell.CellShell` (units parsed there)."""
        return dict(preset=self.preset, scheduler=self.scheduler, users=self.users, seed=self.seed,
                    tti=self.tti, duration=self.duration, overrides=dict(self.overrides), queue=self.queue,
                    queue_args=None if self.queue == "infinite" else self.queue_args, ecn=self.ecn,
                    uplink=self.uplink,
                    warmup_bytes=self.warmup, late_after=self.late_after, realtime=self.realtime,
                    from_log=self.from_log, follow_rnti=self.follow_rnti, log_direction=self.log_direction,
                    log_start=self.log_start, log_others=self.log_others, log_channel=self.log_channel,
                    rps=self.rps)

    def resolve(self, *, preset_path=None) -> dict:
        """The simulator's full parameter set of this cell (preset <- ``set`` <- users, tti,
        scheduler); an unknown parameter or preset is an AirlinkError naming its key path.
        ``preset_path``: the preset file as found from the experiment's folder (None: ``preset``
        as written)."""
        from airlink.sim.engine import resolve_config
        from airlink.sim.config import parameter_name
        for key in self.overrides:
            parameter_name(key, f"cell.set.{key}")
        over = dict(self.overrides)
        for key, value in (("n_users", self.users), ("tti", self.tti), ("scheduler", self.scheduler)):
            if value is not None:
                over[key] = value
        try:
            return resolve_config(preset_path or self.preset, over)
        except AirlinkError as exc:
            raise AirlinkError(f"cell.preset: {exc}") from None


# ---------------------------------------------------------------------------- the rest
class Capture(_Model):
    inside: bool = True
    host: bool = True
    snaplen: int = Field(128, ge=68, le=262144)


#: the collect stage's TCP time-series step (``airlink collect``'s), and that of an NMI
#: analysis that names none
RESOLUTION = B.TCP_RESOLUTION

#: Largest |lag| of an experiment's factor rankings: shorter than ``airlink infer nmi``'s
#: minute (:data:`airlink.core.bounds.NMI_MAX_LAG`) because a run lasts seconds to
#: minutes - a scan as long as the run pairs almost no samples at its edges - and TCP's
#: factors (capacity, RTT, packets in flight) act within a few round trips.
EXPERIMENT_MAX_LAG = "5s"

#: Largest |lag| of the default ranking of a MAC log: the scheduler's answer to a
#: backlog, the same scan as ``airlink infer backlog`` (:data:`airlink.core.bounds.BACKLOG_MAX_LAG`).
MAC_MAX_LAG = B.BACKLOG_MAX_LAG

#: the grids the default ranking of a MAC log tries, coarsest first (a TTI log is summed
#: into these steps): the first at which the log gives :data:`MAC_PAIRS_PER_CELL` pairs per
#: cell of the ``bins`` x ``bins`` histogram is taken, else the finest. A 20 s simulation
#: gives 200 pairs at 100 ms, too few for any answer at 16 bins (the estimate needs 5 per
#: occupied cell, ``inference.surrogates.MIN_PAIRS_PER_CELL``), and 2,000 at 10 ms.
MAC_RESOLUTIONS = ("100ms", "50ms", "20ms", "10ms")

#: pairs per cell of the full histogram a default MAC grid must give: the full histogram
#: filled 4 deep leaves 5 or more per occupied cell while at most 80 % of the cells are
#: occupied
MAC_PAIRS_PER_CELL = 4


class Collect(_Model):
    resolution: _duration_in(B.RESOLUTION) = RESOLUTION


class NmiAnalysis(_Model):
    """One factor ranking: ``target`` against each of ``factors`` in the ``source`` frame.
    ``resolution`` None: :data:`RESOLUTION`; ``bins``/``seed`` None: the infer section's."""
    source: Literal["mac", "tcp"] = "mac"
    target: str
    factors: list[str] = Field(min_length=1)
    resolution: _duration_in(B.RESOLUTION) | None = None
    max_lag: _duration_in(B.MAX_LAG) = EXPERIMENT_MAX_LAG
    bins: B.BINS.annotated(int) | None = None
    seed: B.SEED.annotated(int) | None = None
    user: Text | None = None


class Infer(_Model):
    """Options of every NMI ranking, with ``airlink infer nmi``'s defaults."""
    enabled: bool = True
    surrogates: B.SURROGATES.annotated(int) = B.NMI_SURROGATES
    bootstrap: B.BOOTSTRAP.annotated(int) = B.NMI_BOOTSTRAP
    bins: B.BINS.annotated(int) = B.NMI_BINS
    alpha: float = Field(B.NMI_ALPHA, gt=0, lt=1)
    seed: B.SEED.annotated(int) = 0
    nmi: list[NmiAnalysis] | None = None


class Offline(_Model):
    captures: list[str] = []


def _false_is_off(v):
    return {"enabled": False} if v is False else ({} if v is None or v is True else v)


def _plain_name(v):
    """An experiment's ``name`` becomes a folder name (``results/<name>``): one path component."""
    from airlink.outfolder import is_plain_name
    if v is not None and not is_plain_name(v):
        raise ValueError(f"must be a plain name (one folder name: no '/', not '.' or '..', not an "
                         f"absolute path), got {v!r}")
    return v


class ExperimentSpec(_Model):
    """The whole file. ``report: false`` turns the report page off. ``name``: a plain name
    (the default output folder is ``results/<name>``)."""
    name: Annotated[Text | None, AfterValidator(_plain_name)] = None
    description: str | None = None
    radio: Annotated[Radio, BeforeValidator(lambda v: {} if v is None else v)] = Radio()
    shells: Annotated[list[Annotated[Shell, BeforeValidator(_one_of(SHELL_KINDS))]],
                      BeforeValidator(lambda v: [] if v is None else v)] = []
    applications: Annotated[list[Annotated[Application, BeforeValidator(_one_of(APP_KINDS))]],
                            BeforeValidator(lambda v: [] if v is None else v)] = []
    capture: Annotated[Capture, BeforeValidator(lambda v: {} if v is None else v)] = Capture()
    collect: Annotated[Collect, BeforeValidator(lambda v: {} if v is None else v)] = Collect()
    infer: Annotated[Infer, BeforeValidator(_false_is_off)] = Infer()
    offline: Annotated[Offline, BeforeValidator(lambda v: {} if v is None else v)] = Offline()
    cell: Cell | None = None
    report: bool = True

    @model_validator(mode="after")
    def _cell_alone(self):
        """A cell is its own radio and its own link: it replaces ``radio``, the ``link``
        shell and the top-level ``applications``; ``delay`` and ``loss`` shells wrap it."""
        if self.cell is None:
            return self
        if "radio" in self.model_fields_set:
            raise ValueError("radio: a cell experiment has no radio section (the cell simulates its own "
                             "radio: cell.preset, cell.set); give radio or cell, not both")
        if self.applications:
            raise ValueError("applications: a cell experiment gives its applications in cell.applications "
                             "(every UE) or cell.ues (per UE)")
        for i, sh in enumerate(self.shells):
            if sh.kind == "link":
                raise ValueError(f"shells[{i}].link: a cell is its own link (queues: cell.queue, "
                                 "cell.queue_args); only delay and loss shells wrap a cell")
        return self

    @model_validator(mode="after")
    def _link_needs_radio(self):
        has_radio = self.radio.preset is not None or self.radio.trace is not None or bool(self.radio.overrides())
        for i, sh in enumerate(self.shells):
            if sh.kind == "link" and not has_radio:
                raise ValueError(f"shells[{i}]: a link shell needs a radio section (preset or trace)")
        return self


# ---------------------------------------------------------------------------- loading
def validate_spec(spec: dict, *, where: str = "experiment") -> "ExperimentSpec":
    """The checked model of an experiment mapping; the first problem is an AirlinkError
    ``WHERE: KEY.PATH: what is wrong``."""
    try:
        return ExperimentSpec.model_validate(spec)
    except ValidationError as exc:
        errors = exc.errors()
        # a union reports one error per branch: the most specific (longest path) explains best
        err = max(errors, key=lambda e: (len(_key_path(e["loc"])), e["type"] == "extra_forbidden"))
        path = _key_path(err["loc"])
        msg = _message(err)
        if msg.startswith(("shells[", "applications[")) or (path and msg.startswith(path)):
            raise AirlinkError(f"{where}: {msg}") from None
        raise AirlinkError(f"{where}: {path + ': ' if path else ''}{msg}") from None


@dataclass
class Experiment:
    """A checked experiment: the mapping as given (``spec``), the model with every default
    (``model``), and where it came from (for relative paths)."""

    spec: dict
    path: Path | None = None
    base: Path = field(default_factory=Path.cwd)
    model: ExperimentSpec = field(default_factory=ExperimentSpec)

    @property
    def name(self) -> str:
        return str(self.model.name or self.spec.get("name") or (self.path.stem if self.path else "experiment"))

    def resolve(self, p) -> Path:
        """A path from the file: as given if it exists (relative to the working directory),
        else relative to the experiment file's folder."""
        p = Path(os.path.expandvars(os.path.expanduser(str(p))))
        if p.is_absolute() or p.exists():
            return p
        alt = self.base / p
        return alt if alt.exists() else p

    def cell_preset_path(self) -> str | None:
        """The ``cell.preset`` file as found by :meth:`resolve`, or None (a preset name)."""
        preset = self.model.cell.preset if self.model.cell is not None else None
        if preset is None or not str(preset).endswith((".yaml", ".yml")):
            return None
        p = self.resolve(preset)
        return str(p) if p.is_file() else None

    def check(self) -> "Experiment":
        """Validate ``spec`` again (after a change to it) and refresh ``model``."""
        where = str(self.path.name if self.path else "experiment")
        self.model = validate_spec(self.spec, where=where)
        from airlink.experiment.live import check_experiment_shells
        try:
            scheduler = self.model.radio.overrides().get("scheduler")
            if scheduler is not None:      # a name or class path, refused before the run starts
                from airlink.sim.config import DEFAULTS, parameter_name
                from airlink.sim.engine import make_scheduler
                named = {parameter_name(k, "radio"): v for k, v in self.model.radio.overrides().items()}
                try:
                    make_scheduler(scheduler, {**DEFAULTS, **named})
                except AirlinkError as exc:
                    raise AirlinkError(f"radio.scheduler: {exc}") from None
            if self.model.cell is not None:
                cfg = self.model.cell.resolve(preset_path=self.cell_preset_path())
                self.model.cell.per_ue(int(cfg["n_users"]))
            # the command lines the live stage will give the shells, read by their parsers
            check_experiment_shells(self)
        except AirlinkError as exc:
            raise AirlinkError(f"{where}: {exc}") from None
        return self


def load_experiment(source, *, overrides: dict | None = None) -> Experiment:
    """Read and check an experiment (a YAML path or a mapping). ``overrides`` are dotted keys
    (``{"radio.seed": 3, "radio.trace": "x.down"}``) applied before checking."""
    path = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        spec = read_yaml_mapping(path, what="experiment", expect="an experiment file is a mapping of sections "
                                 f"({', '.join(ExperimentSpec.model_fields)})")
    elif isinstance(source, dict):
        spec = copy.deepcopy(source)
    else:
        raise AirlinkError(f"an experiment is a YAML file or a mapping, not {type(source).__name__}")
    where = path.name if path else "experiment"
    if not isinstance(spec, dict):
        raise AirlinkError(f"{where}: an experiment file is a mapping of sections "
                           f"({', '.join(ExperimentSpec.model_fields)})")
    for key, value in (overrides or {}).items():
        node = spec
        parts = str(key).split(".")
        for k, part in enumerate(parts[:-1]):
            child = node.get(part) if isinstance(node, dict) else None
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise AirlinkError(f"{where}: {'.'.join(parts[:k + 1])}: not a mapping, cannot set {key}")
            node = child
        node[parts[-1]] = value
    exp = Experiment(spec, path, path.resolve().parent if path else Path.cwd())
    return exp.check()


def check_experiment(exp: Experiment) -> None:
    """Raise one clear line for the first problem in ``exp.spec`` (see :func:`validate_spec`)."""
    exp.check()
