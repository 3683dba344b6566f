"""5G NR transport block size, 3GPP TS 38.214 clause 5.1.3 (PDSCH; PUSCH uses the same rule, 6.1.4.2).

:func:`transport_block_bits` is the whole rule, vectorised over numpy arrays (one call for
every DCI row of a log, or for every MCS x PRB count of a rate table):

1. **MCS -> modulation order Q_m and target code rate R** (5.1.3.1) from one of the three
   MCS index tables, kept below as declarative rows ``(Q_m, R x 1024)``:
   ``qam64`` = Table 5.1.3.1-1, ``qam256`` = Table 5.1.3.1-2, ``qam64lowse`` = Table
   5.1.3.1-3. Indices marked *reserved* (29-31 of the 64QAM tables, 28-31 of the 256QAM
   table) only signal a modulation for a retransmission: their TBS is that of the first
   transmission of the transport block (5.1.3.2), so this function returns 0 there.
2. **Resource elements** (5.1.3.2 step 1)::

       N'_RE = 12 * N_symb^sh - N_DMRS^PRB - N_oh^PRB
       N_RE  = min(156, N'_RE) * n_PRB

   ``N_symb^sh`` = allocated OFDM symbols of the slot, ``N_DMRS^PRB`` = DM-RS REs per PRB in
   the allocation including the CDM groups without data (:func:`dmrs_re_per_prb`:
   6 REs per CDM group and DM-RS symbol for DM-RS configuration type 1, 4 for type 2;
   TS 38.211 7.4.1.1), ``N_oh^PRB`` = ``xOverhead`` (0, 6, 12 or 18).
3. **Information bits** (step 2): ``N_info = S * N_RE * R * Q_m * v`` with ``v`` layers
   and ``S`` the TB scaling of Table 5.1.3.2-2 (1, 0.5, 0.25; only for P-/RA-RNTI DCIs).
4. **N_info <= 3824** (step 3): ``n = max(3, floor(log2 N_info) - 6)``,
   ``N'_info = max(24, 2^n * floor(N_info / 2^n))``, TBS = the smallest entry of
   Table 5.1.3.2-1 not below ``N'_info``.
5. **N_info > 3824** (step 4): ``n = floor(log2(N_info - 24)) - 5``,
   ``N'_info = max(3840, 2^n * round((N_info - 24) / 2^n))`` (round half up), then with LDPC
   code-block segmentation into ``C`` blocks:

   - ``R <= 1/4``: ``C = ceil((N'_info + 24) / 3816)``, TBS = ``8 C ceil((N'_info + 24) / (8 C)) - 24``
   - else if ``N'_info > 8424``: ``C = ceil((N'_info + 24) / 8424)``, same TBS formula
   - else: TBS = ``8 ceil((N'_info + 24) / 8) - 24``

Exactness: every table code rate is a multiple of 1/2048, so ``N_info`` is exact in float64
and the floors, the rounding and ``floor(log2 .)`` (taken from the binary exponent) are
exact; the result is an integer number of **bits** (a multiple of 8). An allocation without
resource elements (0 PRBs) has TBS 0.
"""
from __future__ import annotations

import numpy as np

from airlink.core.errors import AirlinkError

#: TS 38.214 Table 5.1.3.1-1, MCS index table 1 (up to 64QAM): (Q_m, R x 1024); None = reserved
MCS_TABLE_QAM64 = (
    (2, 120), (2, 157), (2, 193), (2, 251), (2, 308), (2, 379), (2, 449), (2, 526), (2, 602), (2, 679),
    (4, 340), (4, 378), (4, 434), (4, 490), (4, 553), (4, 616), (4, 658),
    (6, 438), (6, 466), (6, 517), (6, 567), (6, 616), (6, 666), (6, 719), (6, 772), (6, 822), (6, 873),
    (6, 910), (6, 948),
    (2, None), (4, None), (6, None),
)

#: TS 38.214 Table 5.1.3.1-2, MCS index table 2 (up to 256QAM)
MCS_TABLE_QAM256 = (
    (2, 120), (2, 193), (2, 308), (2, 449), (2, 602),
    (4, 378), (4, 434), (4, 490), (4, 553), (4, 616), (4, 658),
    (6, 466), (6, 517), (6, 567), (6, 616), (6, 666), (6, 719), (6, 772), (6, 822), (6, 873),
    (8, 682.5), (8, 711), (8, 754), (8, 797), (8, 841), (8, 885), (8, 916.5), (8, 948),
    (2, None), (4, None), (6, None), (8, None),
)

#: TS 38.214 Table 5.1.3.1-3, MCS index table 3 (low spectral efficiency, up to 64QAM)
MCS_TABLE_QAM64_LOWSE = (
    (2, 30), (2, 40), (2, 50), (2, 64), (2, 78), (2, 99), (2, 120), (2, 157), (2, 193), (2, 251),
    (2, 308), (2, 379), (2, 449), (2, 526), (2, 602),
    (4, 340), (4, 378), (4, 434), (4, 490), (4, 553), (4, 616),
    (6, 438), (6, 466), (6, 517), (6, 567), (6, 616), (6, 666), (6, 719), (6, 772),
    (2, None), (4, None), (6, None),
)

#: MCS table names (as NR-Scope writes them in ``mcs_table``) -> rows
MCS_TABLES = {"qam64": MCS_TABLE_QAM64, "qam256": MCS_TABLE_QAM256, "qam64lowse": MCS_TABLE_QAM64_LOWSE}
_TABLE_ALIASES = {"64qam": "qam64", "256qam": "qam256", "64qamlowse": "qam64lowse", "qam64-lowse": "qam64lowse",
                  "1": "qam64", "2": "qam256", "3": "qam64lowse"}

#: TS 38.214 Table 5.1.3.2-1: TBS for N_info <= 3824 (bits)
TBS_TABLE_SMALL = np.array([
    24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176, 184, 192,
    208, 224, 240, 256, 272, 288, 304, 320, 336, 352, 368, 384, 408, 432, 456, 480, 504, 528, 552, 576,
    608, 640, 672, 704, 736, 768, 808, 848, 888, 928, 984, 1032, 1064, 1128, 1160, 1192, 1224, 1256,
    1288, 1320, 1352, 1416, 1480, 1544, 1608, 1672, 1736, 1800, 1864, 1928, 2024, 2088, 2152, 2216,
    2280, 2408, 2472, 2536, 2600, 2664, 2728, 2792, 2856, 2976, 3104, 3240, 3368, 3496, 3624, 3752, 3824,
], dtype=np.int64)

#: TS 38.214 Table 5.1.3.2-2: TB scaling field -> S (for DCI format 1_0 with P-RNTI/RA-RNTI)
TB_SCALING = (1.0, 0.5, 0.25)

#: DM-RS REs per PRB per CDM group and DM-RS symbol (TS 38.211 7.4.1.1.2: type 1 uses every
#: other subcarrier, 2 CDM groups; type 2 uses pairs of subcarriers, 3 CDM groups)
DMRS_RE_PER_CDM_GROUP = {1: 6, 2: 4}
_MAX_CDM_GROUPS = {1: 2, 2: 3}


def mcs_table(name) -> tuple:
    """The rows ``(Q_m, R x 1024 or None)`` of an MCS table by name: ``qam64`` (5.1.3.1-1),
    ``qam256`` (5.1.3.1-2), ``qam64lowse`` (5.1.3.1-3); NR-Scope's ``64qam``/``256qam`` also."""
    key = str(name).strip().lower()
    key = _TABLE_ALIASES.get(key, key)
    if key not in MCS_TABLES:
        raise AirlinkError(f"unknown MCS table {name!r} (one of {', '.join(MCS_TABLES)})")
    return MCS_TABLES[key]


def mcs_arrays(name) -> tuple[np.ndarray, np.ndarray]:
    """``(Q_m, R x 1024)`` of every index 0..31 of a table; R is NaN where reserved."""
    rows = mcs_table(name)
    qm = np.array([q for q, _ in rows], dtype=np.int64)
    r = np.array([np.nan if c is None else c for _, c in rows], dtype=np.float64)
    return qm, r


def dmrs_re_per_prb(dmrs_symbols, cdm_groups, config_type: int = 1) -> np.ndarray:
    """``N_DMRS^PRB`` of 38.214 5.1.3.2: DM-RS REs per PRB over the allocation, counting the
    CDM groups without data (``cdm_groups`` 1-2 for type 1, 1-3 for type 2)."""
    per = DMRS_RE_PER_CDM_GROUP.get(int(config_type))
    if per is None:
        raise AirlinkError(f"DM-RS configuration type must be 1 or 2, got {config_type!r}")
    groups = np.asarray(cdm_groups, dtype=np.int64)
    if groups.size and (groups.min() < 1 or groups.max() > _MAX_CDM_GROUPS[int(config_type)]):
        bad = int(groups.min() if groups.min() < 1 else groups.max())
        raise AirlinkError(f"DM-RS CDM groups without data must be 1..{_MAX_CDM_GROUPS[int(config_type)]} "
                           f"for type {config_type}, got {bad}")
    return per * groups * np.asarray(dmrs_symbols, dtype=np.int64)


def _floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2 x) of positive floats, exactly (from the binary exponent)."""
    return np.frexp(x)[1].astype(np.int64) - 1


def tbs_from_rate(n_prb, n_symbols, dmrs_re, qm, code_rate_x1024, *, layers=1, overhead_re=0,
                  scaling=1.0) -> np.ndarray:
    """TBS (bits) of 38.214 5.1.3.2 from a modulation order and target code rate.

    Arrays broadcast. ``code_rate_x1024`` is R x 1024 as in the MCS tables (NaN -> TBS 0);
    ``dmrs_re`` is ``N_DMRS^PRB`` (:func:`dmrs_re_per_prb`); ``overhead_re`` is xOverhead.
    """
    n_prb, n_symbols, dmrs_re, qm, r1024, layers, overhead_re, scaling = np.broadcast_arrays(
        *(np.asarray(a) for a in (n_prb, n_symbols, dmrs_re, qm, code_rate_x1024, layers, overhead_re, scaling)))
    re_prb = np.minimum(156, 12 * n_symbols.astype(np.int64) - dmrs_re - overhead_re)
    n_re = re_prb * n_prb.astype(np.int64)
    r = r1024.astype(np.float64) / 1024.0
    ok = (n_re > 0) & np.isfinite(r)
    n_info = np.where(ok, scaling * n_re * r * qm * layers, 0.0)
    out = np.zeros(n_info.shape, dtype=np.int64)

    small = ok & (n_info <= 3824)
    if small.any():
        ni = n_info[small]
        n = np.maximum(3, _floor_log2(ni) - 6)
        p = np.ldexp(1.0, n)
        ni_q = np.maximum(24.0, p * np.floor(ni / p))
        out[small] = TBS_TABLE_SMALL[np.searchsorted(TBS_TABLE_SMALL, ni_q, side="left")]

    big = ok & (n_info > 3824)
    if big.any():
        x = n_info[big] - 24
        p = np.ldexp(1.0, _floor_log2(x) - 5)
        ni_q = np.maximum(3840.0, p * np.floor(x / p + 0.5)).astype(np.int64)
        low_rate = r[big] <= 0.25
        c = np.where(low_rate, -(-(ni_q + 24) // 3816),
                     np.where(ni_q > 8424, -(-(ni_q + 24) // 8424), 1))
        out[big] = 8 * c * -(-(ni_q + 24) // (8 * c)) - 24
    return out


def transport_block_bits(mcs, n_prb, n_symbols, *, table="qam256", dmrs_symbols=1, cdm_groups=2,
                         dmrs_type: int = 1, layers=1, overhead_re=0, tb_scaling=0) -> np.ndarray:
    """Transport block size (bits) of TS 38.214 5.1.3 for MCS index ``mcs`` of ``table``.

    Arrays broadcast (one value per DCI, or a grid). ``n_prb`` allocated PRBs,
    ``n_symbols`` allocated OFDM symbols (1-14), ``dmrs_symbols`` DM-RS symbols in the
    allocation (TS 38.211 Table 7.4.1.1.2-3), ``cdm_groups`` DM-RS CDM groups without data
    (the DCI's antenna-port field), ``layers`` v, ``overhead_re`` xOverhead (0/6/12/18),
    ``tb_scaling`` the DCI field of Table 5.1.3.2-2 (0-2). Reserved MCS indices give 0
    (the TBS is the first transmission's). See the module docstring for the clauses.
    """
    qm_t, r_t = mcs_arrays(table)
    mcs = np.asarray(mcs, dtype=np.int64)
    if mcs.size and (mcs.min() < 0 or mcs.max() > 31):
        raise AirlinkError(f"MCS index must be 0..31, got {int(mcs.min() if mcs.min() < 0 else mcs.max())}")
    n_symbols = np.asarray(n_symbols, dtype=np.int64)
    if n_symbols.size and (n_symbols.min() < 1 or n_symbols.max() > 14):
        raise AirlinkError("allocated OFDM symbols must be 1..14")
    if np.asarray(n_prb).size and np.min(n_prb) < 0:
        raise AirlinkError("PRB count must not be negative")
    scale_idx = np.asarray(tb_scaling, dtype=np.int64)
    if scale_idx.size and (scale_idx.min() < 0 or scale_idx.max() > 2):
        raise AirlinkError("TB scaling field must be 0, 1 or 2 (3 is reserved)")
    scaling = np.asarray(TB_SCALING)[scale_idx]
    dmrs = dmrs_re_per_prb(dmrs_symbols, cdm_groups, dmrs_type)
    return tbs_from_rate(n_prb, n_symbols, dmrs, qm_t[mcs], r_t[mcs], layers=layers,
                         overhead_re=overhead_re, scaling=scaling)
