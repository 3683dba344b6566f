"""The 5G NR rate table of the simulator: SINR -> CQI -> MCS -> transport block per slot.

A cell is a carrier of ``N_RB`` PRBs (:func:`airlink.sim.nr_numerology.max_prbs`) at one
numerology, scheduled slot by slot. :func:`nr_rate_table` builds the
:class:`~airlink.sim.rates.RateTable` the scheduler works with:

1. **SINR -> CQI.** The reported CQI is the highest index of the CQI table whose spectral
   efficiency ``eta`` (bit/s/Hz per layer) an attenuated Shannon bound reaches:
   CQI ``c`` is reported from ``SINR >= 10 log10(2^eta_c - 1) + gap_db`` (3 dB gap, the rule
   the LTE table uses, :func:`airlink.sim.rates.gap_threshold_db`). CQI tables: TS 38.214
   Table 5.2.2.1-2 (``cqi_table=1``, up to 64QAM) and 5.2.2.1-3 (``cqi_table=2``, up to
   256QAM); by default table 2 with the 256QAM MCS table, else table 1.
2. **CQI -> MCS.** The highest MCS index of the MCS table (TS 38.214 5.1.3.1) whose
   spectral efficiency ``Q_m R`` does not exceed the CQI's (MCS 0 below the table); CQI
   levels that land on the same MCS are one row (the lowest threshold).
3. **MCS -> rate.** The row's rate over the whole carrier is the TBS of all ``N_RB`` PRBs
   (:func:`airlink.sim.nr_tbs.transport_block_bits`, with the preset's symbols, DM-RS,
   layers and xOverhead) per slot. The engine divides it evenly among the subchannels (PRBs
   or PRB groups), so a user holding every PRB gets exactly the TBS; a partial allocation
   gets its PRB share of it (the TBS quantisation of smaller allocations, under 2 % above a
   few PRBs, is not modelled).

Row names read ``MCS<i> <modulation> <R x 1024> (CQI<c>)``; the MAC log's ``mcs`` column is
the 1-based row.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from airlink.core.errors import AirlinkError

from .nr_numerology import max_prbs, slot_seconds
from .nr_tbs import mcs_arrays, transport_block_bits
from .rates import GAP_DB, RateTable, gap_threshold_db

#: TS 38.214 Table 5.2.2.1-2 (CQI table 1): CQI 1..15 -> (Q_m, R x 1024)
CQI_TABLE_1 = ((2, 78), (2, 120), (2, 193), (2, 308), (2, 449), (2, 602), (4, 378), (4, 490), (4, 616),
               (6, 466), (6, 567), (6, 666), (6, 772), (6, 873), (6, 948))
#: TS 38.214 Table 5.2.2.1-3 (CQI table 2): CQI 1..15 -> (Q_m, R x 1024)
CQI_TABLE_2 = ((2, 78), (2, 193), (2, 449), (4, 378), (4, 490), (4, 616), (6, 466), (6, 567), (6, 666),
               (6, 772), (6, 873), (8, 711), (8, 797), (8, 885), (8, 948))
CQI_TABLES = {1: CQI_TABLE_1, 2: CQI_TABLE_2}
MODULATION = {2: "QPSK", 4: "16QAM", 6: "64QAM", 8: "256QAM"}


def cqi_to_mcs(cqi_table: int = 2, mcs_table: str = "qam256") -> np.ndarray:
    """MCS index for CQI 1..15 (array of 15): the highest index with ``Q_m R`` not above the
    CQI's spectral efficiency, 0 where none is."""
    if int(cqi_table) not in CQI_TABLES:
        raise AirlinkError(f"CQI table must be 1 or 2 (TS 38.214 Table 5.2.2.1-2 or -3), got {cqi_table!r}")
    qm, r = mcs_arrays(mcs_table)
    se_mcs = np.where(np.isfinite(r), qm * r, np.inf)
    out = []
    for q, rc in CQI_TABLES[int(cqi_table)]:
        ok = np.flatnonzero(se_mcs <= q * rc)
        out.append(int(ok.max()) if ok.size else 0)
    return np.array(out, dtype=np.int64)


def nr_rate_table(*, scs_khz, bandwidth_mhz, frequency_range: str = "fr1", symbols: int = 12,
                  dmrs_symbols: int = 1, cdm_groups: int = 2, layers: int = 1, mcs_table: str = "qam256",
                  overhead_re: int = 0, cqi_table=None, gap_db: float = GAP_DB) -> RateTable:
    """The NR rate table of a carrier (see the module docstring); rates in bit/s over all PRBs."""
    n_rb = max_prbs(bandwidth_mhz, scs_khz, frequency_range)
    slot = slot_seconds(scs_khz)
    if cqi_table is None:
        cqi_table = 2 if str(mcs_table).lower() in ("qam256", "256qam") else 1
    mcs = cqi_to_mcs(int(cqi_table), mcs_table)
    eta = np.array([q * r / 1024 for q, r in CQI_TABLES[int(cqi_table)]])
    thr = gap_threshold_db(eta, gap_db)
    keep = np.concatenate([[True], mcs[1:] != mcs[:-1]])
    mcs, thr, cqi = mcs[keep], thr[keep], np.flatnonzero(keep) + 1
    tbs = transport_block_bits(mcs, n_rb, symbols, table=mcs_table, dmrs_symbols=dmrs_symbols,
                               cdm_groups=cdm_groups, layers=layers, overhead_re=overhead_re)
    qm, r = mcs_arrays(mcs_table)
    names = [f"MCS{m} {MODULATION[int(qm[m])]} {r[m]:g} (CQI{c})" for m, c in zip(mcs, cqi)]
    rate = tbs / float(slot)
    return RateTable(f"nr-{scs_khz:g}khz-{n_rb}prb", names, thr, rate)


def nr_rate_table_of(cfg: dict, tti: Fraction) -> RateTable:
    """:func:`nr_rate_table` from a simulator configuration's ``nr_*`` parameters; the TTI
    (s) must be the numerology's slot."""
    if cfg.get("nr_scs_khz") is None or cfg.get("nr_bandwidth_mhz") is None:
        raise AirlinkError("rate_table nr needs nr_scs_khz and nr_bandwidth_mhz")
    try:
        slot = slot_seconds(cfg["nr_scs_khz"])
    except AirlinkError as exc:
        raise AirlinkError(f"nr_scs_khz: {exc}") from None
    if tti != slot:
        raise AirlinkError(f"tti: an NR slot at {cfg['nr_scs_khz']:g} kHz lasts {float(slot) * 1e3:g} ms, "
                           f"not {float(tti) * 1e3:g} ms")
    try:
        n_rb = max_prbs(cfg["nr_bandwidth_mhz"], cfg["nr_scs_khz"], cfg["nr_frequency_range"])
    except AirlinkError as exc:
        raise AirlinkError(f"nr_bandwidth_mhz: {exc}") from None
    if int(cfg["n_subchannels"]) > n_rb:
        raise AirlinkError(f"n_subchannels: {int(cfg['n_subchannels'])} is more than the carrier's {n_rb} PRBs")
    if cfg.get("table_rates", "band") != "band":
        raise AirlinkError("table_rates: an NR rate table is the whole carrier's (band), shared by the subchannels")
    try:
        return nr_rate_table(scs_khz=float(cfg["nr_scs_khz"]), bandwidth_mhz=float(cfg["nr_bandwidth_mhz"]),
                             frequency_range=cfg["nr_frequency_range"], symbols=int(cfg["nr_symbols"]),
                             dmrs_symbols=int(cfg["nr_dmrs_symbols"]), cdm_groups=int(cfg["nr_cdm_groups"]),
                             layers=int(cfg["nr_layers"]), mcs_table=cfg["nr_mcs_table"],
                             overhead_re=int(cfg["nr_overhead_re"]), cqi_table=cfg["nr_cqi_table"])
    except AirlinkError as exc:
        raise AirlinkError(f"nr_* parameters: {exc}") from None
