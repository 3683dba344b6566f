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
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.traces import Trace, parse_duration, parse_tti
from airlink.traces.errors import AirlinkError

from . import kernel as K
from .channel import ChannelModel, measured_snr_db, snr_from_geometry
from .metrics import SummaryAccumulator
from .rates import rate_table
from .result import SimResult
from .sched_backlog import BacklogScheduler
from .sched_base import Context
from .sched_lambda import GeneralizedPF
from .sched_maxcir import MaxCIR
from .sched_mcpfs import MultiCarrierPF
from .sched_pf import ProportionalFair
from .sched_rr import RoundRobin
from .traffic import Traffic

PRESET_DIR = Path(__file__).parent / "presets"
PRESETS = tuple(sorted(p.stem for p in PRESET_DIR.glob("*.yaml")))
DEFAULT_PRESET = "quick"

#: name -> scheduler class (``airlink simulate --scheduler NAME``)
schedulers = {"rr": RoundRobin, "maxcir": MaxCIR, "pf": ProportionalFair, "lambda": GeneralizedPF,
              "backlog": BacklogScheduler, "mcpfs": MultiCarrierPF}

MAC_COLUMNS = ("subchannels", "mcs", "sinr_db", "sinr_reported_db", "served_bytes", "capacity_bytes",
               "tx_bytes", "harq_retransmissions", "backlog_bytes", "backlog_packets",
               "assigned_rate_bps", "arrivals_bytes", "drops_packets")

LINK_ADAPTATION = {"cqi": 0, "ci": 1, "bler": 2, "hybrid": 3, "ideal": 4}

#: every parameter a preset or an override may set, with its default
DEFAULTS = {
    "description": "", "tti": "1ms", "duration": "10s", "n_users": 4, "n_subchannels": 1,
    "subchannel_hz": 200e3, "carrier_hz": 2.0e9,
    # radio
    "rate_table": "lte-cqi", "table_rates": "band", "bandwidth_hz": None, "bler_slope": None,
    "bler_target": None, "payload_fraction": 1.0,
    "snr_db": 10.0, "distance_m": None, "tx_power_dbm": 43.0, "antenna_gain_db": 14.0,
    "noise_figure_db": 9.0, "noise_bandwidth_hz": None, "snr_offset_db": 0.0,
    "profile": "flat", "speed_kmh": 3.0, "shadowing_std_db": 0.0, "shadowing_corr_m": 50.0,
    "n_oscillators": 128, "channel_trace": None, "channel_column": None, "channel_resample": "hold",
    "csi_delay_tti": 0,
    "harq_max_tx": 4, "harq_priority": True,
    "link_adaptation": "cqi", "la_interval": 10, "la_bler_up": 0.3, "la_bler_down": 0.1,
    "la_hybrid_db": 15.0,
    # scheduling
    "scheduler": "pf", "pf_a": 0.001, "pf_window": 0, "lam": 1.0,
    "backlog_channel_bps": 9600.0, "backlog_channels": [1, 2, 4, 8, 16],
    "backlog_thresholds_db": [-14.0, -11.0, -8.0, -5.0, -2.0], "backlog_sector_channels": 32,
    "backlog_interval_s": 0.1, "backlog_drain_s": 0.5, "backlog_greedy_bytes": 6000.0,
    "backlog_greedy_s": 3.0, "backlog_greedy_channels": 8,
    # traffic
    "traffic": "full", "traffic_rate_bps": 1e6, "packet_bytes": 1500, "buffer_packets": 500,
    "on_s": 1.0, "off_s": 5.0, "onoff_exponential": False, "traffic_trace": None,
    # engine
    "chunk_elements": 4_000_000, "harq_ring": 4096, "mac_log": True,
}
ALIASES = {"lambda": "lam", "a": "pf_a", "t_a": "pf_window", "users": "n_users",
           "subchannels": "n_subchannels", "buffer": "buffer_packets", "csi_delay": "csi_delay_tti",
           "speed": "speed_kmh"}


def read_parameter_file(path) -> dict:
    """The ``parameter: value`` mapping of a YAML file (preset or ``--config`` file), with
    one clear error line when the file is missing, not YAML or not a mapping."""
    import yaml
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such parameter file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise AirlinkError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise AirlinkError(f"{path}: expected a mapping of parameter: value")
    return data


def load_preset(name) -> dict:
    """Parameters of a preset (``evdo``, ``imt-advanced``, ``hsdpa``, ``egprs``, ``1xrtt``,
    ``quick``) or of a YAML file; a file may name a ``preset`` to start from."""
    path = Path(str(name))
    if str(name) in PRESETS:
        path = PRESET_DIR / f"{name}.yaml"
    elif not (path.suffix in (".yaml", ".yml") and path.exists()):
        raise AirlinkError(f"unknown preset {name!r} (one of {', '.join(PRESETS)}, or a YAML file)")
    data = {k: _numeric(v) for k, v in read_parameter_file(path).items()}
    base = data.pop("preset", None)
    if base:
        merged = load_preset(base)
        merged.update(data)
        return merged
    data.setdefault("preset", str(name) if str(name) in PRESETS else path.stem)
    return data


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
    """The full parameter set: defaults <- preset <- overrides (unknown names rejected)."""
    cfg = dict(DEFAULTS)
    base = load_preset(preset or DEFAULT_PRESET)
    cfg["preset"] = base.pop("preset", preset or DEFAULT_PRESET)
    for source, values in (("preset " + str(cfg["preset"]), base), ("override", overrides or {})):
        for key, value in values.items():
            key = ALIASES.get(key, key)
            if key not in DEFAULTS and key != "preset":
                raise AirlinkError(f"{source}: unknown parameter {key!r} "
                                   f"(known: {', '.join(sorted(DEFAULTS))})")
            value = _numeric(value)
            if value is not None or key in ("bandwidth_hz", "channel_trace", "traffic_trace"):
                cfg[key] = value
    return cfg


def _load_object(spec: str):
    """A class or object named ``package.module:Name`` or ``package.module.Name``."""
    mod, sep, attr = spec.partition(":")
    if not sep:
        mod, _, attr = spec.rpartition(".")
    if not mod:
        raise AirlinkError(f"unknown scheduler {spec!r} (one of {', '.join(schedulers)}, "
                           "or a dotted path to your class)")
    try:
        return getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as exc:
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


def _scheduler_name(s) -> str:
    return getattr(s, "name", None) or type(s).__name__


def _snr_db(cfg: dict, n_users: int):
    if cfg.get("distance_m") is not None:
        bw = cfg["noise_bandwidth_hz"] or cfg["subchannel_hz"]
        dist = np.resize(np.atleast_1d(np.asarray(cfg["distance_m"], dtype=np.float64)), n_users)
        return snr_from_geometry(dist, tx_power_dbm=cfg["tx_power_dbm"],
                                 antenna_gain_db=cfg["antenna_gain_db"],
                                 noise_figure_db=cfg["noise_figure_db"], bandwidth_hz=bw,
                                 offset_db=_offsets(cfg, n_users)).tolist()
    snr = cfg["snr_db"]
    if isinstance(snr, (list, tuple)):
        snr = list(snr)
        if len(snr) != n_users:
            if len(snr) < 1:
                raise AirlinkError("snr_db: no values")
            # a preset's list for another number of users: spread its range evenly
            snr = np.linspace(max(snr), min(snr), n_users).tolist() if n_users > 1 else [snr[0]]
    else:
        snr = [float(snr)] * n_users
    return (np.asarray(snr, dtype=np.float64) + _offsets(cfg, n_users)).tolist()


def _offsets(cfg: dict, n_users: int) -> np.ndarray:
    """``snr_offset_db`` per user (a scalar, or a list repeated to ``n_users``)."""
    off = _per_user_list(cfg["snr_offset_db"], n_users)
    off = np.atleast_1d(np.asarray(off, dtype=np.float64))
    return np.resize(off, n_users)


def _per_user_list(value, n_users):
    if isinstance(value, (list, tuple)) and len(value) not in (1, n_users):
        return [value[i % len(value)] for i in range(n_users)]
    return value


def simulate(preset: str | None = None, *, seed: int = 0, duration="10s", progress: bool = False,
             **overrides) -> SimResult:
    """Simulate a cell and return per-TTI capacity traces, a MAC log and a summary.

    Parameters
    ----------
    preset : name of a preset (``airlink.sim.PRESETS``: ``evdo``, ``imt-advanced``,
        ``hsdpa``, ``egprs``, ``1xrtt``, ``quick``) or a YAML file; default ``quick``
    seed : the run's random seed (identical seed -> identical output)
    duration : simulated time, e.g. ``"10s"``, ``"500ms"`` or seconds; ``None`` = the
        preset's ``duration``
    progress : show a tqdm progress bar on stderr (only when stderr is a terminal)
    **overrides : any preset parameter (``airlink.sim.engine.DEFAULTS``), e.g.
        ``scheduler="maxcir"``, ``n_users=4``, ``traffic="onoff"``, ``buffer_packets=40``,
        ``speed_kmh=120``, ``csi_delay_tti=3``, ``lam=2.0``, ``pf_a=0.01``. ``scheduler`` may
        also be a scheduler object or class (see :mod:`airlink.sim.sched_base`).

    Returns
    -------
    SimResult with ``capacity`` (Trace), ``mac`` (frame), ``summary`` (dict), ``config``.
    """
    sched_spec = overrides.pop("scheduler", None)
    cfg = resolve_config(preset, {**overrides, "scheduler": sched_spec if isinstance(sched_spec, str) else None})
    if duration is not None:
        cfg["duration"] = duration
    if sched_spec is None or isinstance(sched_spec, str):
        sched_spec = cfg["scheduler"]
    scheduler = make_scheduler(sched_spec, cfg)
    cfg["scheduler"] = sched_spec if isinstance(sched_spec, str) else _scheduler_name(scheduler)
    cfg["seed"] = int(seed)
    return _run(cfg, scheduler, progress)


_NUMERIC_LISTS = ("snr_db", "speed_kmh", "traffic_rate_bps", "packet_bytes", "distance_m",
                  "snr_offset_db", "backlog_channels", "backlog_thresholds_db")


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _validate(cfg):
    for key, default in DEFAULTS.items():
        value = cfg.get(key)
        if value is None:
            continue
        if key in _NUMERIC_LISTS:
            items = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
            if len(items) == 0 or not all(_is_number(v) for v in items):
                raise AirlinkError(f"{key}: expected a number or a list of numbers, got {value!r}")
        elif _is_number(default) and not _is_number(value):
            raise AirlinkError(f"{key}: expected a number, got {value!r}")
    n_u, n_c = int(cfg["n_users"]), int(cfg["n_subchannels"])
    if n_u < 1 or n_c < 1:
        raise AirlinkError("n_users and n_subchannels must be at least 1")
    if int(cfg["harq_max_tx"]) < 1:
        raise AirlinkError("harq_max_tx must be at least 1 (1 = no HARQ retransmissions)")
    if int(cfg["csi_delay_tti"]) < 0:
        raise AirlinkError("csi_delay_tti must not be negative")
    if cfg["link_adaptation"] not in LINK_ADAPTATION:
        raise AirlinkError(f"unknown link_adaptation {cfg['link_adaptation']!r} "
                           f"(one of {', '.join(LINK_ADAPTATION)})")
    if not 0 < float(cfg["pf_a"]) <= 1:
        raise AirlinkError("pf_a must be in (0, 1]")
    return n_u, n_c


def _run(cfg: dict, scheduler, progress: bool) -> SimResult:
    n_u, n_c = _validate(cfg)
    tti = cfg["tti"] if isinstance(cfg["tti"], Fraction) else parse_tti(str(cfg["tti"]))
    tti_s = float(tti)
    duration = parse_duration(cfg["duration"])
    n_tti = int(duration / tti)
    if n_tti < 1:
        raise AirlinkError(f"duration {float(duration):g} s holds no {tti_s * 1000:g} ms TTI")
    cfg["tti"] = f"{tti.numerator}/{tti.denominator}s" if tti.denominator != 1000 else f"{tti.numerator}ms"
    cfg["duration"] = f"{float(duration):g}s"
    seed = cfg["seed"]
    table = rate_table(cfg["rate_table"], bandwidth_hz=cfg["bandwidth_hz"], slope=cfg["bler_slope"],
                       bler_target=cfg["bler_target"])
    per_sub = cfg["table_rates"] == "subchannel"
    bytes_per_mcs = table.rate_bps / (1 if per_sub else n_c) * tti_s / 8 * float(cfg["payload_fraction"])

    snr_series = None
    if cfg["channel_trace"] is not None:
        frame = cfg["channel_trace"]
        if not isinstance(frame, pd.DataFrame):
            frame = _read_frame(frame)
        s = measured_snr_db(frame, n_tti, tti_s, column=cfg["channel_column"],
                            method=cfg["channel_resample"])
        snr_series = np.repeat(s[:, None], n_u, axis=1) + _offsets(cfg, n_u)[None, :]
    channel = ChannelModel(n_users=n_u, n_subchannels=n_c, tti_s=tti_s, snr_db=_snr_db(cfg, n_u),
                           profile=_per_user_list(cfg["profile"], n_u),
                           speed_kmh=_per_user_list(cfg["speed_kmh"], n_u),
                           carrier_hz=float(cfg["carrier_hz"]), subchannel_hz=float(cfg["subchannel_hz"]),
                           shadowing_std_db=float(cfg["shadowing_std_db"]),
                           shadowing_corr_m=float(cfg["shadowing_corr_m"]), seed=seed,
                           n_osc=int(cfg["n_oscillators"]), snr_series_db=snr_series)
    traffic = Traffic(_per_user_list(cfg["traffic"], n_u), n_users=n_u, tti_s=tti_s,
                      rate_bps=_per_user_list(cfg["traffic_rate_bps"], n_u),
                      packet_bytes=_per_user_list(cfg["packet_bytes"], n_u), on_s=cfg["on_s"], off_s=cfg["off_s"],
                      exponential=cfg["onoff_exponential"], trace=cfg["traffic_trace"], seed=seed)
    rng = np.random.default_rng([int(seed), 0x5C4E])          # block errors
    rng_ties = np.random.default_rng([int(seed), 0x71E5])     # tie-breaking order
    scheduler.reset(n_users=n_u, n_subchannels=n_c, tti_s=tti_s, rng=np.random.default_rng([int(seed), 0x05C1]))
    kid = getattr(scheduler, "kernel_id", None)
    kp = scheduler.kernel_params() if kid is not None else {}
    sched_id = kid if kid is not None else 5

    # link adaptation lookup: best expected-throughput scheme per 0.1 dB
    lut_lo, lut_step = -40.0, 0.1
    best_lut = table.best(np.arange(lut_lo, 70.0, lut_step)).astype(np.int64)
    la_mode = LINK_ADAPTATION[cfg["link_adaptation"]]

    pkt = traffic.packet.astype(np.float64)          # per user
    buf = int(cfg["buffer_packets"] or 0)
    full = traffic.full_mask
    bl_interval = max(1, int(round(float(kp.get("interval_s", 0.1)) / tti_s)))
    ip = np.array([sched_id, int(cfg["harq_max_tx"]), int(bool(cfg["harq_priority"])), int(full.all()), buf,
                   la_mode, int(cfg["la_interval"]), bl_interval,
                   int(round(float(kp.get("greedy_s", 0)) / tti_s)), 0, int(kp.get("pf_window", 0)),
                   int(cfg["backlog_sector_channels"]), int(kp.get("greedy_channels", 0))],
                  dtype=np.int64)
    fp = np.array([float(kp.get("pf_a", cfg["pf_a"])), float(kp.get("lam", cfg["lam"])), float(pkt[0]), table.slope,
                   float(cfg["backlog_channel_bps"]) * tti_s / 8,
                   float(kp.get("drain_s", 0.5)) / tti_s, float(kp.get("greedy_bytes", 0)),
                   float(cfg["la_bler_up"]), float(cfg["la_bler_down"]), float(cfg["la_hybrid_db"]),
                   (buf or 500) * float(pkt[0])], dtype=np.float64)
    ring = int(cfg["harq_ring"])
    st = dict(backlog=np.zeros(n_u), inflight=np.zeros(n_u), avg_thr=np.zeros(n_u),
              pend_bytes=np.zeros((n_u, ring)), pend_mcs=np.zeros((n_u, ring), np.int64),
              pend_acc=np.zeros((n_u, ring)), pend_tx=np.zeros((n_u, ring), np.int64),
              pend_head=np.zeros(n_u, np.int64), pend_count=np.zeros(n_u, np.int64),
              misc=np.zeros(4, np.int64), user_mcs=np.full(n_u, len(table) // 2, np.int64),
              la_ci_sum=np.zeros(n_u), la_err=np.zeros(n_u, np.int64), la_blocks=np.zeros(n_u, np.int64),
              assigned_ch=np.zeros(n_u, np.int64), greedy_cnt=np.zeros(n_u, np.int64),
              full_u=full.astype(np.int64), pkt_u=pkt)
    bl_thr = np.asarray(kp.get("bl_thr_db", [0.0]), dtype=np.float64)
    bl_ch = np.asarray(kp.get("bl_channels", [1]), dtype=np.int64)
    # float32 like the SINR, so that every path compares the same numbers
    thr_lin = (10 ** (table.threshold_db.astype(np.float64) / 10)).astype(np.float32)
    s50 = 10 ** (table.s50_db.astype(np.float64) / 10)
    beta = table.slope * 10 / np.log(10)

    names = ("served", "tx", "nsub", "mcs", "retx", "backlog", "drops", "blocks", "active", "gaveup")
    ints = {"nsub", "retx", "drops", "blocks", "active", "gaveup"}
    d = int(cfg["csi_delay_tti"])
    chunk = max(1, min(n_tti, int(cfg["chunk_elements"]) // (n_u * n_c)))
    # With the MAC log, per-TTI outputs are kept for the whole run; without it (mac_log=False,
    # for long runs) only the capacity (8 bytes per user and TTI) and running sums are.
    mac_log = bool(cfg["mac_log"])
    rows = n_tti if mac_log else chunk
    out = {n: np.zeros((rows, n_u), np.int64 if n in ints else np.float64) for n in names}
    served_all = out["served"] if mac_log else np.zeros((n_tti, n_u))
    sinr_db = np.zeros((n_tti if mac_log else 0, n_u), np.float32)
    sinr_rep_db = np.zeros_like(sinr_db)
    arrivals_all = np.zeros((n_tti if mac_log else 0, n_u))
    n_res = int(cfg["backlog_sector_channels"]) if isinstance(scheduler, BacklogScheduler) else n_c
    acc = SummaryAccumulator([str(i + 1) for i in range(n_u)], tti_s, n_res)
    gaveup = 0
    hist = None
    bar = _progress(n_tti, progress, f"simulate {cfg['preset']}")
    n_slots = max(n_c, n_u)
    dummy_forced = np.zeros((1, 1), np.int64)
    for k0 in range(0, n_tti, chunk):
        n = min(chunk, n_tti - k0)
        real = channel.sinr_chunk(k0, n)
        if d > 0:
            if hist is None:
                hist = np.repeat(real[:1], d, axis=0)
            both = np.concatenate([hist, real], axis=0)
            rep = np.ascontiguousarray(both[:n])
            hist = both[n:].copy() if len(both) - n >= d else both[-d:].copy()
        else:
            rep = real
        arr = traffic.chunk(k0, n)
        if mac_log:
            arrivals_all[k0:k0 + n] = arr
        u_err = rng.random((n, n_slots))
        with np.errstate(divide="ignore", over="ignore"):
            # BLER_m(s) = 1 / (1 + (s / s50_m)**beta): the block fails when s < s50_m * z
            u_err = ((1 - u_err) / u_err) ** (1 / beta)
        perm = rng_ties.permuted(np.tile(np.arange(n_u, dtype=np.int64), (n, 1)), axis=1)
        if mac_log:
            sl = {name: out[name][k0:k0 + n] for name in names}
        else:
            sl = {name: out[name][:n] for name in names}
            for a in sl.values():
                a.fill(0)
        if sched_id != 5:
            ip[9] = k0
            K.run_chunk(rep, real, arr, u_err, perm, dummy_forced, thr_lin, bytes_per_mcs, s50,
                        best_lut, lut_lo, lut_step, ip, fp, st["backlog"], st["inflight"], st["avg_thr"],
                        st["pend_bytes"], st["pend_mcs"], st["pend_acc"], st["pend_tx"], st["pend_head"],
                        st["pend_count"], st["misc"], st["user_mcs"], st["la_ci_sum"], st["la_err"],
                        st["la_blocks"], st["assigned_ch"], st["greedy_cnt"], st["full_u"], st["pkt_u"],
                        bl_thr, bl_ch, sl["served"], sl["tx"], sl["nsub"], sl["mcs"], sl["retx"], sl["backlog"],
                        sl["drops"], sl["blocks"], sl["active"], sl["gaveup"])
        else:
            _run_external(scheduler, k0, n, rep, real, arr, u_err, perm, thr_lin, bytes_per_mcs, s50,
                          best_lut, lut_lo, lut_step, ip, fp, st, bl_thr, bl_ch, sl, full)
        acc.update(served=sl["served"], nsub=sl["nsub"], blocks=sl["blocks"], retx=sl["retx"],
                   active=sl["active"], drops=sl["drops"])
        gaveup += int(sl["gaveup"].sum())
        if mac_log:
            with np.errstate(divide="ignore"):
                sinr_db[k0:k0 + n] = 10 * np.log10(real.mean(axis=2))
                sinr_rep_db[k0:k0 + n] = 10 * np.log10(rep.mean(axis=2))
        else:
            served_all[k0:k0 + n] = sl["served"]
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    summary = acc.result()
    summary.update({"preset": cfg["preset"], "scheduler": cfg["scheduler"], "seed": cfg["seed"],
                    "tti_ms": tti_s * 1000, "n_users": n_u, "n_subchannels": n_c,
                    "harq_given_up_blocks": gaveup})
    return _assemble(cfg, scheduler, table, tti, n_tti, n_u, served_all, out if mac_log else None,
                     sinr_db, sinr_rep_db, arrivals_all, pkt, summary)


def _run_external(scheduler, k0, n, rep, real, arr, u_err, perm, thr_lin, bytes_per_mcs, s50, best_lut,
                  lut_lo, lut_step, ip, fp, st, bl_thr, bl_ch, sl, full):
    """Per-TTI loop for a scheduler given as a Python object (kernel mode 5, assignment given)."""
    n_u = rep.shape[1]
    rate_of = np.concatenate([[0.0], bytes_per_mcs])
    for k in range(n):
        rate = rate_of[np.searchsorted(thr_lin, rep[k], side="right")]
        backlog = np.where(full, np.inf, st["backlog"] + arr[k])
        eligible = (backlog - st["inflight"] > 1e-9) | (st["pend_count"] > 0)
        ctx = Context(tti=k0 + k, rate_bytes=rate, eligible=eligible, backlog_bytes=backlog,
                      pending_retx=st["pend_count"].copy(), order=perm[k].copy())
        assign = np.asarray(scheduler.assign(ctx), dtype=np.int64).reshape(1, -1)
        if assign.shape[1] != rep.shape[2] or assign.max(initial=-1) >= n_u or assign.min(initial=0) < -1:
            raise AirlinkError(f"scheduler {_scheduler_name(scheduler)!r} returned an invalid assignment "
                               f"(need {rep.shape[2]} user indices in -1..{n_u - 1}, got {assign.ravel()[:8]})")
        ip[9] = k0 + k
        s = slice(k, k + 1)
        K.run_chunk(rep[s], real[s], arr[s], u_err[s], perm[s], assign, thr_lin, bytes_per_mcs, s50, best_lut,
                    lut_lo, lut_step, ip, fp, st["backlog"], st["inflight"], st["avg_thr"], st["pend_bytes"],
                    st["pend_mcs"], st["pend_acc"], st["pend_tx"], st["pend_head"], st["pend_count"],
                    st["misc"], st["user_mcs"], st["la_ci_sum"], st["la_err"], st["la_blocks"],
                    st["assigned_ch"], st["greedy_cnt"], st["full_u"], st["pkt_u"], bl_thr, bl_ch,
                    sl["served"][s], sl["tx"][s], sl["nsub"][s], sl["mcs"][s], sl["retx"][s],
                    sl["backlog"][s], sl["drops"][s], sl["blocks"][s], sl["active"][s], sl["gaveup"][s])
        scheduler.update(sl["tx"][k] * 8.0)


def _read_frame(path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such channel trace file")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    frame = pd.read_csv(path)
    frame.columns = [str(c).strip() for c in frame.columns]
    if "time" not in frame.columns:
        col = next((c for c in frame.columns if c.lower() in ("time", "time_s", "timestamp", "seconds")), None)
        if col is None:
            raise AirlinkError(f"{path}: channel trace needs a time column (time, time_s or seconds)")
        t = frame[col]
        frame["time"] = pd.to_datetime(t, unit="s", utc=True) if np.issubdtype(t.dtype, np.number) \
            else pd.to_datetime(t, utc=True)
    frame.columns = [c.lower() for c in frame.columns]
    return frame


def _progress(total, enabled, desc):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit="TTI", disable=not sys.stderr.isatty(), leave=False)


def _assemble(cfg, scheduler, table, tti, n_tti, n_u, served, out, sinr_db, sinr_rep_db, arrivals,
              pkt, summary) -> SimResult:
    users = [str(i + 1) for i in range(n_u)]
    tti_s = float(tti)
    params = {k: v for k, v in cfg.items() if k not in ("description",)}
    meta = {"source": "airlink.sim", "preset": cfg["preset"], "scheduler": cfg["scheduler"],
            "parameters": params, "seed": cfg["seed"], "rate_table": table.name,
            "kernel": "numba" if K.COMPILED else "python"}
    capacity = Trace(served.copy(), tti, users, "bytes", meta)
    if out is None:   # mac_log=False: an empty MAC frame with the columns
        from airlink.traces.schema import utc
        mac = pd.DataFrame({"time": utc(np.zeros(0, np.int64)), "user": pd.Series([], dtype=object),
                            **{c: pd.Series([], dtype=np.float64) for c in MAC_COLUMNS}})
        return SimResult(capacity, mac, summary, cfg)
    ns = capacity.tti_start_ns()
    time = pd.to_datetime(np.repeat(ns, n_u), utc=True)
    blocks = out["blocks"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mcs = np.where(blocks > 0, out["mcs"] / np.maximum(blocks, 1), 0.0)
    if scheduler.__class__ is BacklogScheduler:
        assigned = out["nsub"] * float(cfg["backlog_channel_bps"])
    else:
        assigned = out["tx"] * 8 / tti_s
    backlog = out["backlog"]
    mac = pd.DataFrame({
        "time": time,
        "user": np.tile(np.array(users, dtype=object), n_tti),
        "subchannels": out["nsub"].ravel(),
        "mcs": mcs.ravel(),
        "sinr_db": sinr_db.astype(np.float64).ravel(),
        "sinr_reported_db": sinr_rep_db.astype(np.float64).ravel(),
        "served_bytes": out["served"].ravel(),
        "capacity_bytes": out["served"].ravel(),
        "tx_bytes": out["tx"].ravel(),
        "harq_retransmissions": out["retx"].ravel(),
        "backlog_bytes": backlog.ravel(),
        "backlog_packets": np.ceil(backlog / pkt[None, :] - 1e-9).astype(np.int64).ravel(),
        "assigned_rate_bps": assigned.ravel().astype(np.float64),
        "arrivals_bytes": arrivals.ravel(),
        "drops_packets": out["drops"].ravel(),
    })
    return SimResult(capacity, mac, summary, cfg)
