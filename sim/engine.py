"""``simulate``: presets and overrides -> channel, traffic, scheduler -> per-TTI loop -> result.

The run is cut into chunks of TTIs (about ``chunk_elements`` SINR values each, so memory
stays bounded however long the run): the channel, arrivals and random draws of a chunk are
generated in numpy, then :func:`airlink.sim.kernel.run_chunk` runs the TTIs. Chunk size
does not change the result (up to the float32 rounding of the
channel's matrix products, ~1e-6, which can in rare cases flip an MCS at a threshold). Random streams are derived from the run's ``seed`` (channel,
shadowing, traffic, errors and tie-breaking each have their own), so the same seed gives
the same files.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

from airlink.traces import Trace, parse_duration
from airlink.core import bounds as B
from airlink.core.errors import AirlinkError
from airlink.core.yamlfile import read_yaml_mapping

from . import kernel as K
from .config import DEFAULTS, parameter_name, validate_config
from .metrics import SummaryAccumulator
from .result import MacColumns, SimResult
from .sched_backlog import BacklogScheduler
from .sched_lambda import GeneralizedPF
from .sched_maxcir import MaxCIR
from .sched_mcpfs import MultiCarrierPF
from .sched_pf import ProportionalFair
from .sched_rr import RoundRobin
from .step import MAC_COLUMNS, Radio, n_tti_of, parse_cfg_tti

PRESET_DIR = Path(__file__).parent / "presets"
PRESETS = tuple(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
DEFAULT_PRESET = "quick"

#: name -> scheduler class (``airlink simulate --scheduler NAME``)
schedulers = {"rr": RoundRobin, "maxcir": MaxCIR, "pf": ProportionalFair, "lambda": GeneralizedPF,
              "backlog": BacklogScheduler, "mcpfs": MultiCarrierPF}


def read_parameter_file(path) -> dict:
    """The ``parameter: value`` mapping of a YAML file (preset or ``--config`` file), with
    one clear error line when the file is missing, not YAML or not a mapping."""
    return read_yaml_mapping(path, what="parameter", expect="expected a mapping of parameter: value")


def read_config_file(path) -> dict:
    """The overrides of a ``--config`` file: its parameters (aliases resolved) checked
    against :class:`airlink.sim.config.CellConfig`, errors naming the file; a ``preset``
    key (the preset to start from) is kept as it is."""
    data = {k: _numeric(v) for k, v in read_parameter_file(path).items()}
    base = data.pop("preset", None)
    data = {parameter_name(k, str(path)): v for k, v in data.items()}
    validate_config({**DEFAULTS, **data}, str(path))
    return data if base is None else {"preset": base, **data}


def read_config_files(paths, preset=None) -> tuple:
    """``(preset, overrides)`` of ``--config`` files read in order (a later file wins): the
    first ``preset`` a file names unless ``preset`` is given, and their parameters."""
    overrides = {}
    for path in paths:
        data = read_config_file(path)
        base = data.pop("preset", None)
        if preset is None:
            preset = base
        overrides.update(data)
    return preset, overrides


def load_preset(name) -> dict:
    """Parameters of a preset (``evdo``, ``imt-advanced``, ``hsdpa``, ``egprs``, ``1xrtt``,
    ``quick``, the 5G NR ``nr-fr1``, ``nr-fr2``, ``nr-tmobile-10mhz``, ``nr-tmobile-15mhz``)
    or of a YAML file; a file may name a ``preset`` to start from."""
    path = Path(str(name))
    if str(name) in PRESETS:
        path = PRESET_DIR / f"{name}.yaml"
    elif not (path.suffix in (".yaml", ".yml") and path.exists()):
        raise AirlinkError(f"unknown preset {name!r} (one of {', '.join(PRESETS)}, or a YAML file)")
    data = read_config_file(path)
    base = data.pop("preset", None)
    merged = load_preset(base) if base else {}
    merged.update(data)
    merged["preset"] = str(name) if str(name) in PRESETS else path.stem     # this file, not its base
    return merged


def _numeric(value):
    """YAML 1.1 reads ``4.32e6`` as a string: numbers written so become floats."""
    if isinstance(value, list):
        return [_numeric(v) for v in value]
    if isinstance(value, str):
        try:
            return float(value) if any(ch.isdigit() for ch in value) and "/" not in value else value
        except ValueError:
            return value
    return value


def resolve_config(preset=None, overrides=None) -> dict:
    """The full parameter set: defaults (:class:`airlink.sim.config.CellConfig`) <- preset
    <- overrides (unknown names rejected; values checked by :func:`validate_config`)."""
    cfg = dict(DEFAULTS)
    base = load_preset(preset or DEFAULT_PRESET)
    cfg["preset"] = base.pop("preset", preset or DEFAULT_PRESET)
    for source, values in (("preset " + str(cfg["preset"]), base), ("override", overrides or {})):
        for key, value in values.items():
            key = parameter_name(key, source)
            value = _numeric(value)
            if value is not None or key in ("bandwidth_hz", "channel_trace", "traffic_trace"):
                cfg[key] = value
    validate_config(cfg)      # before anything (a scheduler, a channel) is built from the values
    return cfg


def _load_object(spec: str):
    """A class or object named ``package.module:Name`` or ``package.module.Name``."""
    mod, sep, attr = spec.partition(":")
    if not sep:
        mod, _, attr = spec.rpartition(".")
    if not mod or mod.startswith(".") or not attr:      # a relative or empty name imports nothing
        raise AirlinkError(f"unknown scheduler {spec!r} (one of {', '.join(schedulers)}, "
                           "or a dotted path to your class, package.module:Class)")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise AirlinkError(f"cannot load scheduler {spec!r}: {exc}") from None


def make_scheduler(spec, cfg: dict):
    """A scheduler object from a name, a dotted path, a class or an object."""
    if isinstance(spec, str) and spec in schedulers:
        cls = schedulers[spec]
        window = int(cfg["pf_window"] or 0)
        if cls is ProportionalFair:
            return ProportionalFair(a=cfg["pf_a"], window=window)
        if cls is MultiCarrierPF:
            return MultiCarrierPF(window=window or 1000, a=cfg["pf_a"])
        if cls is GeneralizedPF:
            return GeneralizedPF(lam=cfg["lam"], a=cfg["pf_a"], window=window)
        if cls is BacklogScheduler:
            return BacklogScheduler(channels=cfg["backlog_channels"],
                                    thresholds_db=cfg["backlog_thresholds_db"],
                                    interval_s=cfg["backlog_interval_s"], drain_s=cfg["backlog_drain_s"],
                                    greedy_bytes=cfg["backlog_greedy_bytes"],
                                    greedy_s=cfg["backlog_greedy_s"],
                                    greedy_channels=cfg["backlog_greedy_channels"])
        return cls()
    if isinstance(spec, str):
        spec = _load_object(spec)
    if isinstance(spec, type):
        spec = spec()
    for method in ("reset", "assign", "update"):
        if not callable(getattr(spec, method, None)):
            raise AirlinkError(f"scheduler {spec!r} lacks a {method}() method "
                               "(see airlink.sim.sched_base for the interface)")
    return spec


def scheduler_name(scheduler) -> str:
    """A scheduler object's name: its ``name`` attribute, else its class name."""
    return getattr(scheduler, "name", None) or type(scheduler).__name__


def simulate(preset: str | None = None, *, seed: int = 0, duration=None, progress: bool = False,
             **overrides) -> SimResult:
    """Simulate a cell and return per-TTI capacity traces, a MAC log and a summary.

    Parameters
    ----------
    preset : name of a preset (``airlink.sim.PRESETS``: ``evdo``, ``imt-advanced``,
        ``hsdpa``, ``egprs``, ``1xrtt``, ``quick``, ``nr-fr1``, ``nr-fr2``,
        ``nr-tmobile-10mhz``, ``nr-tmobile-15mhz``) or a YAML file; default ``quick``
    seed : the run's random seed (identical seed -> identical output)
    duration : simulated time, e.g. ``"10s"``, ``"500ms"`` or seconds; ``None`` = the
        preset's ``duration``
    progress : show a tqdm progress bar on stderr (only when stderr is a terminal)
    **overrides : any preset parameter (:class:`airlink.sim.config.CellConfig`), e.g.
        ``scheduler="maxcir"``, ``n_users=4``, ``traffic="onoff"``, ``buffer_packets=40``,
        ``speed_kmh=120``, ``csi_delay_tti=3``, ``lam=2.0``, ``pf_a=0.01``. ``scheduler`` may
        also be a scheduler object or class (see :mod:`airlink.sim.sched_base`).

    Returns
    -------
    SimResult with ``capacity`` (Trace), ``mac`` (frame), ``summary`` (dict), ``config``.
    """
    cfg, scheduler = _prepare(preset, seed, duration, overrides)
    return _run(cfg, scheduler, progress)


def check_parameters(preset: str | None = None, *, seed: int = 0, duration=None, **overrides) -> dict:
    """Check what :func:`simulate` would be given - the parameter set, its declared ranges
    and the run's size budgets - without simulating; returns the resolved parameters. An
    :class:`~airlink.core.errors.AirlinkError` names the first bad one, as
    :func:`simulate` would, so a caller can refuse before it creates anything."""
    cfg, _ = _prepare(preset, seed, duration, dict(overrides))
    _run_size(cfg)
    return cfg


def _prepare(preset, seed, duration, overrides: dict):
    """The resolved parameters and the scheduler object of a :func:`simulate` call."""
    sched_spec = overrides.pop("scheduler", None)
    cfg = resolve_config(preset, {**overrides, "scheduler": sched_spec if isinstance(sched_spec, str) else None})
    if duration is not None:
        cfg["duration"] = duration
    if sched_spec is None or isinstance(sched_spec, str):
        sched_spec = cfg["scheduler"]
    scheduler = make_scheduler(sched_spec, cfg)
    cfg["scheduler"] = sched_spec if isinstance(sched_spec, str) else scheduler_name(scheduler)
    cfg["seed"] = int(B.SEED.check(seed))
    return cfg, scheduler


def check_config(cfg: dict) -> tuple[int, int]:
    """Check a full parameter set (:func:`resolve_config`, possibly changed since) against
    :class:`airlink.sim.config.CellConfig` and the declared ranges and budgets of
    :mod:`airlink.core.bounds`; returns ``(n_users, n_subchannels)``."""
    checked = validate_config(cfg)       # the declared ranges too (sim.config.RANGES)
    if cfg.get("seed") is not None:
        B.SEED.check(cfg["seed"])
    n_u, n_c = int(checked.n_users), int(checked.n_subchannels)
    B.check_budget(n_u * n_c, B.MAX_USER_SUBCHANNELS, f"{n_u} users x {n_c} subchannels make",
                   "SINR values per TTI")
    return n_u, n_c


def _run_size(cfg: dict):
    """``(n_users, n_subchannels, tti, n_tti)`` of a checked parameter set, the run's size
    held to the budgets of :mod:`airlink.core.bounds` before anything is allocated."""
    n_u, n_c = check_config(cfg)
    tti = B.TTI.check(parse_cfg_tti(cfg["tti"]))
    B.SIM_DURATION.check(parse_duration(cfg["duration"]))
    n_tti = n_tti_of(cfg)
    if cfg["mac_log"]:
        B.check_budget(n_tti * n_u, B.MAX_LOGGED_USER_TTIS,
                       f"{n_tti} TTIs x {n_u} users with the MAC log make", "user-TTIs (mac_log=False keeps "
                       f"only the capacity: at most {B.MAX_USER_TTIS:.3g})")
    B.check_budget(n_tti * n_u, B.MAX_USER_TTIS, f"{n_tti} TTIs x {n_u} users make", "user-TTIs")
    return n_u, n_c, tti, n_tti


def _run(cfg: dict, scheduler, progress: bool) -> SimResult:
    n_u, n_c, tti, n_tti = _run_size(cfg)
    tti_s = float(tti)
    cfg["tti"] = f"{tti.numerator}/{tti.denominator}s" if tti.denominator != 1000 else f"{tti.numerator}ms"
    cfg["duration"] = f"{float(parse_duration(cfg['duration'])):g}s"
    radio = Radio(cfg, scheduler, n_users=n_u, n_subchannels=n_c, n_tti=n_tti)
    chunk = radio.chunk
    # With the MAC log, per-TTI outputs are kept for the whole run; without it (mac_log=False,
    # for long runs) only the capacity (8 bytes per user and TTI) and running sums are.
    mac_log = bool(cfg["mac_log"])
    out = radio.new_outputs(n_tti if mac_log else chunk)
    served_all = out["served"] if mac_log else np.zeros((n_tti, n_u))
    sinr_db = np.zeros((n_tti if mac_log else 0, n_u), np.float32)
    sinr_rep_db = np.zeros_like(sinr_db)
    arrivals_all = np.zeros((n_tti if mac_log else 0, n_u))
    acc = SummaryAccumulator([str(i + 1) for i in range(n_u)], tti_s, radio.n_resources)
    gaveup = 0
    bar = _progress(n_tti, progress, f"simulate {cfg['preset']}")
    for k0 in range(0, n_tti, chunk):
        n = min(chunk, n_tti - k0)
        inp = radio.inputs(k0, n, mac_log=mac_log)
        if mac_log:
            arrivals_all[k0:k0 + n] = inp.arrivals
            sinr_db[k0:k0 + n] = inp.sinr_db
            sinr_rep_db[k0:k0 + n] = inp.sinr_rep_db
            sl = {name: a[k0:k0 + n] for name, a in out.items()}
        else:
            sl = {name: a[:n] for name, a in out.items()}
            for a in sl.values():
                a.fill(0)
        radio.step(inp, 0, n, sl)
        acc.update(served=sl["served"], nsub=sl["nsub"], blocks=sl["blocks"], retx=sl["retx"],
                   active=sl["active"], drops=sl["drops"])
        gaveup += int(sl["gaveup"].sum())
        if not mac_log:
            served_all[k0:k0 + n] = sl["served"]
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    summary = acc.result()
    summary.update({"preset": cfg["preset"], "scheduler": cfg["scheduler"], "seed": cfg["seed"],
                    "tti_ms": tti_s * 1000, "n_users": n_u, "n_subchannels": n_c,
                    "harq_given_up_blocks": gaveup})
    return _assemble(cfg, radio, tti, n_tti, n_u, served_all, out if mac_log else None,
                     sinr_db, sinr_rep_db, arrivals_all, summary)


def _progress(total, enabled, desc):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit="TTI", disable=not sys.stderr.isatty(), leave=False)


def _assemble(cfg, radio, tti, n_tti, n_u, served, out, sinr_db, sinr_rep_db, arrivals,
              summary) -> SimResult:
    users = [str(i + 1) for i in range(n_u)]
    params = {k: v for k, v in cfg.items() if k not in ("description",)}
    meta = {"source": "airlink.sim", "preset": cfg["preset"], "scheduler": cfg["scheduler"],
            "parameters": params, "seed": cfg["seed"], "rate_table": radio.table.name,
            "kernel": "numba" if K.COMPILED else "python",
            "tti_s": f"{tti.numerator}/{tti.denominator}", "cell_prbs": radio.n_resources}
    capacity = Trace(served.copy(), tti, users, "bytes", meta)
    if out is None:   # mac_log=False: an empty MAC frame with the columns
        import pandas as pd
        from airlink.core.schema import utc
        mac = pd.DataFrame({"time": utc(np.zeros(0, np.int64)), "user": pd.Series([], dtype=object),
                            **{c: pd.Series([], dtype=np.float64) for c in MAC_COLUMNS}})
        return SimResult(capacity, mac, summary, cfg)
    # the frame is made on first use of ``mac``; the files are written from the columns
    mac = MacColumns(radio.mac_columns(out, sinr_db, sinr_rep_db, arrivals), users)
    return SimResult(capacity, mac, summary, cfg)
