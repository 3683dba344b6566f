"""Radio simulator: fading channels, rate tables, HARQ and link adaptation, schedulers ->
per-TTI capacity traces and MAC logs.

Main entry points::

    import airlink.sim as S
    res = S.simulate("imt-advanced", scheduler="maxcir", duration="10s", seed=3)
    res.capacity          # Trace: bytes served per TTI per user
    res.mac               # frame of kind "mac": per TTI and user
    res.summary["aggregate_throughput_mbps"]
    res.write("out/", mahimahi=True)

``S.PRESETS`` names the presets, ``S.load_preset(name)`` returns one as a dict,
``S.CellConfig`` declares every parameter (type, default, unit, range; ``S.DEFAULTS``) and
``S.schedulers`` maps scheduler names to classes. A scheduler of your own implements
``reset/assign/update`` (see :mod:`airlink.sim.sched_base`).
``S.schedule_rates(rate_bytes)`` runs the metric schedulers alone on rates you give.
``S.Radio`` is the per-TTI step that ``simulate`` and the live cell shell share.

5G NR: ``S.transport_block_bits`` is the TS 38.214 5.1.3 transport block size (vectorised),
``S.nr_rate_table`` the SINR -> CQI -> MCS -> TBS table of a carrier, ``S.max_prbs`` and
``S.slot_seconds`` the carrier sizes and slots of the NR numerologies; the presets
``nr-fr1``, ``nr-fr2``, ``nr-tmobile-10mhz`` and ``nr-tmobile-15mhz`` use them.
"""
from __future__ import annotations

from .channel import (PROFILES, ChannelModel, SumOfSinusoids, doppler_hz, frequency_correlation,
                      measured_snr_db, pathloss_db, resample_measured, snr_from_geometry)
from .config import DEFAULTS, CellConfig
from .engine import PRESETS, check_config, check_parameters, load_preset, resolve_config, scheduler_name, schedulers, simulate
from .given_rates import schedule_rates
from .nr_numerology import max_prbs, slot_seconds
from .nr_rates import nr_rate_table
from .nr_tbs import transport_block_bits
from .rates import RATE_TABLES, RateTable, rate_table, read_rate_table
from .result import SimResult, read_mac
from .sched_backlog import BacklogScheduler
from .sched_base import Context, Scheduler, argmax_ties
from .sched_lambda import GeneralizedPF
from .sched_maxcir import MaxCIR
from .sched_mcpfs import MultiCarrierPF
from .sched_pf import ProportionalFair
from .sched_rr import RoundRobin
from .step import Radio
from .traffic import Traffic

__all__ = ["check_parameters", 
    "simulate", "schedule_rates", "SimResult", "load_preset", "PRESETS", "DEFAULTS", "CellConfig", "schedulers", "resolve_config",
    "check_config", "scheduler_name",
    "read_mac", "RateTable", "rate_table", "read_rate_table", "RATE_TABLES", "ChannelModel",
    "SumOfSinusoids", "PROFILES", "doppler_hz", "pathloss_db", "snr_from_geometry",
    "frequency_correlation", "resample_measured", "measured_snr_db", "Traffic", "Scheduler",
    "Context", "argmax_ties", "RoundRobin", "MaxCIR", "ProportionalFair", "MultiCarrierPF",
    "GeneralizedPF", "BacklogScheduler", "Radio", "transport_block_bits", "nr_rate_table", "max_prbs",
    "slot_seconds",
]
