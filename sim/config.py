"""The simulator's parameters, declared once: :class:`CellConfig`.

Every parameter a preset, a ``--config`` file, ``--set``, a keyword of
:func:`airlink.sim.simulate`, ``airlink cell`` or an experiment's ``radio``/``cell.set``
section may give is a field here, with its type, its default, its unit (in the
description) and its range (as field bounds). :data:`DEFAULTS` and :data:`ALIASES` are
derived from it; nothing else declares a default.

Validation keeps the values as given (an integer stays an integer, a string duration stays
a string): the simulator reads the same numbers whichever route they came by. A value of
the wrong type or out of range is an :class:`~airlink.core.errors.AirlinkError` of one
line naming the parameter (``pf_a: must be at most 1, got 2.0``).

This module imports only pydantic and :mod:`airlink.traces` (not numpy), so specs and the
command line can read it cheaply.
"""
from __future__ import annotations

from fractions import Fraction
from numbers import Real
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WrapValidator

from airlink.core import bounds as B
from airlink.core.errors import AirlinkError
from airlink.core.units import parse_duration, parse_tti

#: link adaptation modes, in the order of their kernel ids (``airlink.sim.step.LINK_ADAPTATION``)
LINK_ADAPTATION_MODES = ("cqi", "ci", "bler", "hybrid", "ideal", "olla")


def _is_number(v) -> bool:
    # numpy scalars register as numbers.Real; bool is an int but never a number here
    return isinstance(v, Real) and not isinstance(v, bool)


def _number(value, handler):
    if not _is_number(value):
        raise ValueError(f"expected a number, got {value!r}")
    handler(float(value))           # bounds, on the value as a float
    return value


def _numbers(value, handler):
    items = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else [value]
    if not items or not all(_is_number(v) for v in items):
        raise ValueError(f"expected a number or a list of numbers, got {value!r}")
    for v in items:
        handler(float(v))
    return value


def _integer(value, handler):
    if not _is_number(value):
        raise ValueError(f"expected an integer, got {value!r}")
    if not float(value).is_integer():
        raise ValueError(f"expected an integer, got {value!r}")
    handler(int(value))
    return value


def _texts(value, handler):
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(v, str) for v in items):
        raise ValueError(f"expected a name or a list of names, got {value!r}")
    return value


def _parsed_by(parse, example: str, bound: B.Bound):
    """A check that ``parse(value)`` reads the value (a string, a number or a Fraction) and
    that what it reads lies in ``bound``'s range, keeping the value as given; the parser's or
    the range's message on failure."""
    def check(value, handler):
        if isinstance(value, bool) or not isinstance(value, (str, Real, Fraction)):
            raise ValueError(f"expected {example}, got {value!r}")
        try:
            parsed = parse(value)
        except AirlinkError as exc:
            raise ValueError(str(exc)) from None
        why = bound.problem(parsed)
        if why is not None:
            raise ValueError(why)
        return value
    return check


def _each_within(bound: B.Bound):
    """A check that a number, or each number of a list, lies in ``bound``'s range."""
    def check(value):
        for v in value if isinstance(value, (list, tuple)) else [value]:
            why = bound.problem(v)
            if why is not None:
                raise ValueError(why)
        return value
    return AfterValidator(check)


#: The declared range (:mod:`airlink.core.bounds`) of every parameter that has one; the
#: fields below take their limits from here, so the simulator, ``airlink simulate``'s options
#: and the experiment spec refuse the same values.
RANGES = {"tti": B.TTI, "duration": B.SIM_DURATION, "n_users": B.USERS, "n_subchannels": B.SUBCHANNELS,
          "speed_kmh": B.SPEED_KMH, "n_oscillators": B.N_OSCILLATORS, "csi_delay_tti": B.CSI_DELAY_TTI,
          "harq_max_tx": B.HARQ_MAX_TX, "la_interval": B.LA_INTERVAL, "pf_a": B.PF_A, "pf_window": B.PF_WINDOW,
          "lam": B.LAMBDA, "buffer_packets": B.BUFFER_PACKETS, "chunk_elements": B.CHUNK_ELEMENTS,
          "harq_ring": B.HARQ_RING}


def _ranged(kind, name: str):
    """``kind`` (:data:`Integer`, :data:`Number`, :data:`Numbers`) held to the declared range
    of parameter ``name``, refused in the range's words (``must be between 1 and 10000``)."""
    return Annotated[kind, _each_within(RANGES[name])]


#: a real number (int or float kept as given); bounds go in ``Field``
Number = Annotated[float, WrapValidator(_number)]
#: an integer (``4`` or ``4.0``, kept as given)
Integer = Annotated[int, WrapValidator(_integer)]
#: one number for every user, or one per user
Numbers = Annotated[Union[float, list[float]], WrapValidator(_numbers)]
#: one name for every user, or one per user
Names = Annotated[Union[str, list[str]], WrapValidator(_texts)]
#: a duration: ``"10s"``, ``"500ms"`` or seconds
Duration = Annotated[Union[str, float], WrapValidator(_parsed_by(
    parse_duration, "a duration such as 10s or 500ms", RANGES["duration"]))]
#: a TTI: ``"1ms"``, ``"1/600s"``, or milliseconds
Tti = Annotated[Union[str, float], WrapValidator(_parsed_by(
    lambda v: parse_tti(v if isinstance(v, Fraction) else str(v)), "a TTI such as 1ms or 1/600s", RANGES["tti"]))]
FilePath = Union[str, Path]


class CellConfig(BaseModel):
    """Every parameter of a simulated cell, with its default (``quick``'s values come from
    its preset file on top of these). Per-user parameters (:data:`Numbers`, :data:`Names`)
    take one value for all users or a list that follows ``n_users``."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    # -- the cell
    description: str = Field("", description="one line saying what the preset models")
    tti: Tti = Field("1ms", description="TTI (slot) length: '1ms', '0.5ms', '1/600s', or milliseconds")
    duration: Duration = Field("10s", description="simulated time: '10s', '500ms', or seconds")
    n_users: _ranged(Integer, "n_users") = Field(4, description="number of users (UEs)")
    n_subchannels: _ranged(Integer, "n_subchannels") = Field(1,
        description="subchannels (resource blocks, PRBs) per TTI")
    subchannel_hz: Number = Field(200e3, gt=0, description="bandwidth of one subchannel, Hz")
    carrier_hz: Number = Field(2.0e9, gt=0, description="carrier frequency, Hz (Doppler, path loss)")

    # -- radio: rate table and block errors
    rate_table: str = Field("lte-cqi", description="rate table: evdo, hsdpa, egprs, imt-advanced, lte-cqi, "
                                                   "nr, or a CSV file (airlink.sim.rates)")
    table_rates: Literal["band", "subchannel"] = Field(
        "band", description="the table's rates are the whole band's (split over the subchannels) or "
                            "each subchannel's")
    bandwidth_hz: Optional[Number] = Field(None, gt=0, description="bandwidth of an lte-cqi or efficiency "
                                                                   "table, Hz (None: the table's own)")
    bler_slope: Optional[Number] = Field(None, gt=0, description="slope of the BLER curves, 1/dB "
                                                                 "(None: the table's)")
    bler_target: Optional[Number] = Field(None, gt=0, lt=1, description="BLER at each MCS's switching "
                                                                        "SINR (None: the table's)")
    payload_fraction: Number = Field(1.0, gt=0, le=1, description="share of a block's bytes that are "
                                                                  "payload (the rest: RLC/MAC headers)")

    # -- radio: SINR
    snr_db: Numbers = Field(10.0, description="nominal SNR per user, dB (unless distance_m is given)")
    distance_m: Optional[Numbers] = Field(None, description="distance of each user from the site, m: "
                                                            "the SNR from path loss 128.1 + 37.6 log10(R km)")
    tx_power_dbm: Number = Field(43.0, description="transmit power, dBm (with distance_m)")
    antenna_gain_db: Number = Field(14.0, description="antenna gain, dB (with distance_m)")
    noise_figure_db: Number = Field(9.0, description="receiver noise figure, dB (with distance_m)")
    noise_bandwidth_hz: Optional[Number] = Field(None, gt=0, description="noise bandwidth, Hz (with "
                                                                         "distance_m; None: subchannel_hz)")
    snr_offset_db: Numbers = Field(0.0, description="added to every user's SNR, dB (e.g. power share, "
                                                    "interference)")
    profile: Names = Field("flat", description="power-delay profile per user: flat, ped-a, ped-b, veh-a, "
                                               "gsm-tu6 (airlink.sim.channel.PROFILES)")
    speed_kmh: _ranged(Numbers, "speed_kmh") = Field(3.0, description="user speed, km/h (Doppler of the fading)")
    shadowing_std_db: Number = Field(0.0, ge=0, description="log-normal shadowing standard deviation, dB")
    shadowing_corr_m: Number = Field(50.0, gt=0, description="shadowing decorrelation distance, m")
    n_oscillators: _ranged(Integer, "n_oscillators") = Field(128,
        description="sinusoids per fading path (sum of sinusoids)")
    channel_trace: Optional[Union[FilePath, Any]] = Field(
        None, description="measured SINR log that replaces the nominal SNR: a Parquet/CSV file or a "
                          "frame with time and SINR columns")
    channel_column: Optional[str] = Field(None, description="column of channel_trace to use (None: the "
                                                            "first SINR-like column)")
    channel_resample: Literal["hold", "linear"] = Field("hold", description="how channel_trace samples "
                                                                           "become TTIs")
    csi_delay_tti: _ranged(Integer, "csi_delay_tti") = Field(0, description="age of the reported CQI, TTIs")

    # -- radio: HARQ and link adaptation
    harq_max_tx: _ranged(Integer, "harq_max_tx") = Field(4,
        description="transmissions per block at most (1 = no HARQ)")
    harq_priority: bool = Field(True, description="retransmissions go before new data")
    harq_feedback_tti: Integer = Field(0, ge=0, description="K1: TTIs from a block to its ACK/NACK "
                                                            "(a retransmission from K1 + 1 TTIs after)")
    harq_processes: Integer = Field(0, ge=0, description="HARQ processes per user (0: unlimited): new data "
                                                         "needs a free one (NR: 16, TS 38.331 "
                                                         "nrofHARQ-ProcessesForPDSCH)")
    harq_combining: Literal["chase", "ir"] = Field("chase", description="how a block's transmissions "
                                                   "combine: chase (SINRs add) or ir (incremental "
                                                   "redundancy, information adds: sim/nr_harq.py)")
    link_adaptation: Literal[LINK_ADAPTATION_MODES] = Field(
        "cqi", description="MCS choice: cqi (reported SINR), ci (averaged C/I), bler (measured BLER), "
                           "hybrid, ideal (real SINR), olla (outer loop towards bler_target)")
    la_interval: _ranged(Integer, "la_interval") = Field(10, description="TTIs between ci/bler/hybrid decisions")
    la_bler_up: Number = Field(0.3, ge=0, le=1, description="measured BLER above which bler steps the MCS down")
    la_bler_down: Number = Field(0.1, ge=0, le=1, description="measured BLER below which bler steps the MCS up")
    la_hybrid_db: Number = Field(15.0, description="average C/I above which hybrid uses the C/I method, dB")
    la_olla_step_db: Number = Field(0.5, gt=0, description="OLLA offset step on a NACK, dB")
    la_olla_max_db: Number = Field(10.0, ge=0, description="OLLA offset bound, +- dB")

    # -- 5G NR carrier (rate_table: nr; airlink.sim.nr_rates)
    nr_scs_khz: Optional[Number] = Field(None, description="subcarrier spacing, kHz (15, 30, 60, 120, ...)")
    nr_bandwidth_mhz: Optional[Number] = Field(None, description="channel bandwidth, MHz")
    nr_frequency_range: str = Field("fr1", description="fr1 or fr2 (TS 38.101-1 / -2)")
    nr_symbols: Integer = Field(12, description="OFDM symbols of the PDSCH per slot")
    nr_dmrs_symbols: Integer = Field(1, description="DM-RS symbols per slot")
    nr_cdm_groups: Integer = Field(2, description="DM-RS CDM groups without data")
    nr_layers: Integer = Field(1, description="MIMO layers")
    nr_mcs_table: str = Field("qam256", description="MCS table: qam64, qam256, qam64lowse (TS 38.214 5.1.3.1)")
    nr_overhead_re: Integer = Field(0, description="xOverhead, resource elements per PRB (TS 38.214 5.1.3.2)")
    nr_cqi_table: Optional[str] = Field(None, description="CQI table (None: the one of nr_mcs_table)")

    # -- scheduling
    scheduler: str = Field("pf", description="rr, maxcir, pf, lambda, backlog, mcpfs, or package.module:Class")
    pf_a: _ranged(Number, "pf_a") = Field(0.001, description="PF averaging constant a of the EWMA (per TTI)")
    pf_window: _ranged(Integer, "pf_window") = Field(0,
        description="PF averaging window t_a, TTIs (0: the EWMA with pf_a)")
    lam: _ranged(Number, "lam") = Field(1.0, description="fairness exponent of the generalized PF (lambda)")
    backlog_channel_bps: Number = Field(9600.0, gt=0, description="rate of one code channel, bit/s")
    backlog_channels: Numbers = Field([1, 2, 4, 8, 16], description="code channels a user may be given")
    backlog_thresholds_db: Numbers = Field([-14.0, -11.0, -8.0, -5.0, -2.0],
                                           description="SINR needed for each of backlog_channels, dB")
    backlog_sector_channels: Integer = Field(32, ge=1, description="code channels of the sector")
    backlog_interval_s: Number = Field(0.1, gt=0, description="time between channel decisions, s")
    backlog_drain_s: Number = Field(0.5, gt=0, description="time in which a backlog should drain, s")
    backlog_greedy_bytes: Number = Field(6000.0, ge=0, description="backlog above which a user turns greedy, bytes")
    backlog_greedy_s: Number = Field(3.0, ge=0, description="time a user may stay greedy, s")
    backlog_greedy_channels: Integer = Field(8, ge=0, description="code channels a greedy user holds at most "
                                                                  "(0: no limit)")

    # -- traffic
    traffic: Names = Field("full", description="per user: full, cbr, onoff, poisson, trace")
    traffic_rate_bps: Numbers = Field(1e6, description="source rate of cbr/onoff/poisson traffic, bit/s")
    packet_bytes: Numbers = Field(1500, description="packet size, bytes")
    buffer_packets: Optional[_ranged(Integer, "buffer_packets")] = Field(500,
        description="per-user base-station buffer, packets (0 or None: unbounded)")
    on_s: Number = Field(1.0, ge=0, description="on period of onoff traffic, s (mean if exponential)")
    off_s: Number = Field(5.0, ge=0, description="off period of onoff traffic, s (mean if exponential)")
    onoff_exponential: bool = Field(False, description="exponential on/off periods instead of fixed ones")
    traffic_trace: Optional[Union[FilePath, Any]] = Field(
        None, description="arrivals of traffic: trace, a Mahimahi or Parquet trace file")

    # -- engine
    chunk_elements: _ranged(Integer, "chunk_elements") = Field(4_000_000,
        description="SINR values generated per chunk (memory bound; the result does not depend on it)")
    harq_ring: _ranged(Integer, "harq_ring") = Field(4096, description="HARQ blocks queued per user at most")
    mac_log: bool = Field(True, description="keep the per-TTI MAC log (False: only the capacity trace)")


#: every parameter's default, derived from :class:`CellConfig`
DEFAULTS = {name: field.get_default(call_default_factory=True)
            for name, field in CellConfig.model_fields.items()}

#: short names accepted for parameters (``lambda: 2`` = ``lam: 2``)
ALIASES = {"lambda": "lam", "a": "pf_a", "t_a": "pf_window", "users": "n_users",
           "subchannels": "n_subchannels", "buffer": "buffer_packets", "csi_delay": "csi_delay_tti",
           "speed": "speed_kmh"}


def parameter_name(key: str, where: str = "") -> str:
    """The parameter ``key`` names (aliases resolved); an AirlinkError naming ``where`` and
    the key when there is no such parameter."""
    name = ALIASES.get(key, key)
    if name not in CellConfig.model_fields:
        prefix = f"{where}: " if where else ""
        known = ", ".join(sorted(CellConfig.model_fields))
        raise AirlinkError(f"{prefix}unknown preset parameter {key!r} (known: {known})")
    return name


def validate_config(cfg: dict, where: str = "") -> CellConfig:
    """Check every parameter of ``cfg`` (keys outside :class:`CellConfig` such as ``preset``
    and ``seed`` are ignored) and return the typed config; the values in ``cfg`` stay as
    given. An AirlinkError of one line names ``where`` (a file) and the parameter."""
    values = {k: v for k, v in cfg.items() if k in CellConfig.model_fields}
    try:
        return CellConfig.model_validate(values)
    except ValidationError as exc:
        raise AirlinkError(_one_line(exc, where)) from None


def _one_line(exc: ValidationError, where: str) -> str:
    err = exc.errors(include_url=False)[0]
    key = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    key = ".".join(p for p in key.split(".") if p not in ("float", "int", "str", "list[float]", "list[str]"))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    else:
        msg = f"{msg.replace('Input should be', 'must be')}, got {err['input']!r}"
    prefix = f"{where}: " if where else ""
    return f"{prefix}{key}: {msg}"
