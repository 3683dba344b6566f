"""NR transport block size (3GPP TS 38.214 5.1.3) against the standard's worked values, a
literal transcription of 5.1.3.2 kept here, and every decoded DCI of the shared NR-Scope logs."""
from __future__ import annotations

import csv
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airlink.sim.nr_tbs import mcs_table, tbs_from_rate, transport_block_bits
from airlink.core.errors import AirlinkError

# ---------------------------------------------------------------------------------------------
# The literal reference: 38.214 5.1.3.2 read line by line, in exact rational arithmetic.

TABLE_5_1_3_2_1 = [24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168,
                   176, 184, 192, 208, 224, 240, 256, 272, 288, 304, 320, 336, 352, 368, 384, 408, 432,
                   456, 480, 504, 528, 552, 576, 608, 640, 672, 704, 736, 768, 808, 848, 888, 928, 984,
                   1032, 1064, 1128, 1160, 1192, 1224, 1256, 1288, 1320, 1352, 1416, 1480, 1544, 1608,
                   1672, 1736, 1800, 1864, 1928, 2024, 2088, 2152, 2216, 2280, 2408, 2472, 2536, 2600,
                   2664, 2728, 2792, 2856, 2976, 3104, 3240, 3368, 3496, 3624, 3752, 3824]


def _floor_log2(x: Fraction) -> int:
    n = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** n > x:
        n -= 1
    while Fraction(2) ** (n + 1) <= x:
        n += 1
    return n


def _ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def literal_tbs(n_prb, n_symb, n_dmrs_prb, n_oh, qm, r: Fraction, v, s=Fraction(1)) -> int:
    n_re_prime = 12 * n_symb - n_dmrs_prb - n_oh
    n_re = min(156, n_re_prime) * n_prb
    if n_re <= 0:
        return 0
    n_info = s * n_re * r * qm * v
    if n_info <= 3824:
        n = max(3, _floor_log2(n_info) - 6)
        n_info_p = max(24, 2 ** n * math.floor(n_info / 2 ** n))
        return next(t for t in TABLE_5_1_3_2_1 if t >= n_info_p)
    n = _floor_log2(n_info - 24) - 5
    q = (n_info - 24) / Fraction(2) ** n
    rounded = math.floor(q + Fraction(1, 2))        # round(), halves up
    n_info_p = max(3840, 2 ** n * rounded)
    if r <= Fraction(1, 4):
        c = _ceil(Fraction(n_info_p + 24, 3816))
        return 8 * c * _ceil(Fraction(n_info_p + 24, 8 * c)) - 24
    if n_info_p > 8424:
        c = _ceil(Fraction(n_info_p + 24, 8424))
        return 8 * c * _ceil(Fraction(n_info_p + 24, 8 * c)) - 24
    return 8 * _ceil(Fraction(n_info_p + 24, 8)) - 24


# ---------------------------------------------------------------------------------------------
# Worked values: MATLAB 5G Toolbox nrTBS outputs as published in srsRAN Project's test data
# (symbols, N_DMRS^PRB, N_oh, Q_m, R x 1024, layers, TB scaling field, PRBs) -> TBS.
WORKED = [
    (12, 6, 0, 2, 102.4, 1, 0, 6, 160), (12, 6, 0, 2, 102.4, 1, 2, 6, 40),
    (12, 6, 12, 2, 921.6, 1, 0, 6, 1416), (12, 36, 0, 2, 921.6, 1, 0, 11, 2152),
    (12, 36, 12, 4, 921.6, 1, 0, 11, 3824), (12, 36, 12, 4, 921.6, 1, 2, 11, 984),
    (12, 6, 0, 2, 921.6, 4, 0, 11, 11016), (12, 36, 0, 2, 921.6, 4, 0, 11, 8456),
    (12, 6, 0, 4, 921.6, 4, 0, 11, 22032), (12, 36, 12, 4, 921.6, 4, 0, 11, 15112),
    (12, 6, 0, 6, 102.4, 4, 0, 11, 3624), (12, 6, 0, 6, 921.6, 4, 0, 11, 32776),
    (12, 6, 12, 6, 921.6, 4, 0, 11, 29704), (12, 36, 0, 6, 921.6, 4, 0, 11, 25608),
    (12, 6, 0, 8, 102.4, 4, 0, 11, 4872), (12, 6, 0, 8, 921.6, 4, 0, 11, 44040),
    (12, 6, 12, 8, 921.6, 4, 0, 11, 39936), (12, 36, 0, 8, 921.6, 4, 0, 11, 33816),
    (12, 36, 12, 8, 921.6, 4, 0, 11, 30216), (12, 36, 0, 8, 102.4, 4, 0, 11, 3824),
]


@pytest.mark.parametrize("symb,dmrs,oh,qm,r1024,v,scale,prb,expected", WORKED)
def test_worked_values(symb, dmrs, oh, qm, r1024, v, scale, prb, expected):
    got = tbs_from_rate(prb, symb, dmrs, qm, r1024, layers=v, overhead_re=oh, scaling=(1, 0.5, 0.25)[scale])
    assert int(got) == expected


def test_hand_worked_code_block_segmentation():
    # 273 PRBs, 12 symbols, 1 DM-RS symbol of type 1 with 2 CDM groups (12 REs), 256QAM
    # MCS 27 (Q_m 8, R 948/1024), 4 layers: N_RE = 132 * 273 = 36036,
    # N_info = 36036 * 948/1024 * 8 * 4 = 1067566.5; n = floor(log2 1067542.5) - 5 = 15,
    # N'_info = 2^15 * round(32.578..) = 1081344; C = ceil(1081368 / 8424) = 129,
    # TBS = 8 * 129 * ceil(1081368 / 1032) - 24 = 1032 * 1048 - 24 = 1081512
    assert int(transport_block_bits(27, 273, 12, table="qam256", dmrs_symbols=1, cdm_groups=2,
                                    layers=4)) == 1081512
    # low rate: 64QAM-table MCS 0 (QPSK, 120/1024 <= 1/4), 100 PRBs, 14 symbols, 2 DM-RS
    # symbols with 1 CDM group: N_RE = 156 * 100 (capped), N_info = 15600 * 120/1024 * 2 =
    # 3656.25 <= 3824: n = 11 - 6 = 5, N'_info = 32 * 114 = 3648 -> table 3752
    assert int(transport_block_bits(0, 100, 14, table="qam64", dmrs_symbols=2, cdm_groups=1)) == 3752


def test_mcs_tables_transcribed():
    # spot values of Tables 5.1.3.1-1/-2/-3 and their reserved rows
    assert mcs_table("qam64")[28] == (6, 948) and mcs_table("qam64")[29] == (2, None)
    assert mcs_table("256qam")[20] == (8, 682.5) and mcs_table("qam256")[26] == (8, 916.5)
    assert mcs_table("qam256")[27] == (8, 948) and mcs_table("qam256")[28] == (2, None)
    assert mcs_table("qam64lowse")[0] == (2, 30) and mcs_table("qam64lowse")[28] == (6, 772)
    # the tables' printed spectral efficiency column (Q_m R, 4 decimals), including the dip
    # of Table 5.1.3.1-1 from index 16 (16QAM 658) to 17 (64QAM 438)
    printed = {("qam64", 0): 0.2344, ("qam64", 16): 2.5703, ("qam64", 17): 2.5664, ("qam64", 28): 5.5547,
               ("qam256", 4): 1.1758, ("qam256", 20): 5.3320, ("qam256", 27): 7.4063,
               ("qam64lowse", 0): 0.0586, ("qam64lowse", 15): 1.3281, ("qam64lowse", 28): 4.5234}
    for (name, i), se in printed.items():
        q, r = mcs_table(name)[i]
        assert abs(q * r / 1024 - se) <= 0.00005, (name, i)
    for name in ("qam64", "qam256", "qam64lowse"):
        assert len(mcs_table(name)) == 32


def test_reserved_mcs_and_empty_allocation_give_zero():
    got = transport_block_bits([28, 31, 5, 5], [10, 10, 0, 10], 12, table="qam256")
    assert got.tolist()[:3] == [0, 0, 0] and got[3] > 0


@pytest.mark.parametrize("kwargs,msg", [
    (dict(mcs=32), "MCS index"), (dict(n_symbols=15), "symbols"), (dict(cdm_groups=3), "CDM groups"),
    (dict(tb_scaling=3), "TB scaling"), (dict(table="qam1024"), "MCS table"),
])
def test_bad_input_names_the_field(kwargs, msg):
    args = dict(mcs=5, n_prb=10, n_symbols=12)
    args.update(kwargs)
    with pytest.raises(AirlinkError, match=msg):
        transport_block_bits(args.pop("mcs"), args.pop("n_prb"), args.pop("n_symbols"), **args)


@settings(max_examples=400, deadline=None)
@given(table=st.sampled_from(["qam64", "qam256", "qam64lowse"]), mcs=st.integers(0, 27),
       prb=st.integers(0, 275), symb=st.integers(1, 14), dmrs_symb=st.integers(1, 4),
       cdm=st.integers(1, 2), v=st.integers(1, 8), oh=st.sampled_from([0, 6, 12, 18]),
       scale=st.integers(0, 2))
def test_against_literal_transcription(table, mcs, prb, symb, dmrs_symb, cdm, v, oh, scale):
    qm, r = mcs_table(table)[mcs]
    if r is None:       # index 28 of the 64QAM tables is valid, 28 of the 256QAM table is not
        return
    want = literal_tbs(prb, symb, 6 * cdm * dmrs_symb, oh, qm, Fraction(r) / 1024, v,
                       Fraction(1, 2 ** scale))
    got = transport_block_bits(mcs, prb, symb, table=table, dmrs_symbols=dmrs_symb, cdm_groups=cdm,
                               layers=v, overhead_re=oh, tb_scaling=scale)
    assert int(got) == want


def test_vectorised_equals_scalar():
    rng = np.random.default_rng(5)
    mcs, prb, symb = rng.integers(0, 28, 300), rng.integers(1, 274, 300), rng.integers(4, 15, 300)
    v = rng.integers(1, 5, 300)
    many = transport_block_bits(mcs, prb, symb, table="qam256", layers=v)
    one = [int(transport_block_bits(m, p, s, table="qam256", layers=k)) for m, p, s, k in zip(mcs, prb, symb, v)]
    assert many.tolist() == one


# ---------------------------------------------------------------------------------------------
# Every DCI of the shared NR-Scope logs (T-Mobile SA cells, decoded from the air).

NRSCOPE_LOGS = ["t_mobile1_ueactivity_afternoon_1.csv", "t_mobile2_ueactivity_morning_1.csv",
                "t_mobile2_ueactivity_night_1.csv"]
COLUMNS = ["frequency_length", "time_length", "nof_dmrs_cdm_groups", "nof_layers", "mcs_index",
           "transport_block_size", "xoverhead", "tb_scaling_field", "nof_re", "redundancy_version"]


def _read_dcis(path) -> tuple[dict, list]:
    """Numeric columns of every DCI row (repeated headers skipped), and its MCS table name,
    modulation name and code rate."""
    cols = {c: [] for c in COLUMNS}
    text = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["timestamp"] == "timestamp":
                continue
            for c in COLUMNS:
                cols[c].append(int(row[c]))
            text.append((row["mcs_table"], row["modulation"], float(row["code_rate"])))
    return {c: np.array(v) for c, v in cols.items()}, text


@pytest.mark.parametrize("name", NRSCOPE_LOGS)
def test_every_decoded_transport_block_of_the_nrscope_logs(shared_data, name):
    d, text = _read_dcis(shared_data / "nr-scope" / name)
    assert {t for t, _, _ in text} == {"256qam"}
    # the decoder's modulation and code rate of every logged transport block are the rows of
    # Table 5.1.3.1-2 transcribed here
    qm_name = {2: "QPSK", 4: "16QAM", 6: "64QAM", 8: "256QAM"}
    for i in np.flatnonzero(d["transport_block_size"] > 0):
        qm, r = mcs_table("qam256")[d["mcs_index"][i]]
        assert text[i][1] == qm_name[qm] and abs(text[i][2] - r / 1024) < 1e-6
    # The cells use one additional DM-RS position (dmrs-AdditionalPosition pos1): with mapping
    # type A and 11-14 symbols from the slot start that is 2 DM-RS symbols (TS 38.211 Tables
    # 7.4.1.1.2-3 and 6.4.1.1.3-3). NR-Scope's own RE count confirms it row by row:
    # nof_re = (12 L - 6 * 2 * CDM groups) * PRBs * layers.
    logged = d["transport_block_size"] > 0
    re_prb = 12 * d["time_length"] - 12 * d["nof_dmrs_cdm_groups"]
    assert np.array_equal(d["nof_re"][logged], (re_prb * d["frequency_length"] * d["nof_layers"])[logged])
    got = transport_block_bits(d["mcs_index"][logged], d["frequency_length"][logged], d["time_length"][logged],
                               table="qam256", dmrs_symbols=2, cdm_groups=d["nof_dmrs_cdm_groups"][logged],
                               layers=d["nof_layers"][logged], overhead_re=6 * d["xoverhead"][logged],
                               tb_scaling=d["tb_scaling_field"][logged])
    assert np.array_equal(got, d["transport_block_size"][logged])
    # Rows with TBS 0 are the ones the rule gives no TBS for: no PRBs (NR-Scope's empty DCIs),
    # a reserved MCS index (28-31: retransmissions, whose TBS is the first transmission's),
    # or no DM-RS CDM group (an antenna-port value the decoder could not map; no REs).
    zero = ~logged
    explained = (d["frequency_length"] == 0) | (d["mcs_index"] >= 28) | (d["nof_dmrs_cdm_groups"] == 0)
    assert explained[zero].all()
    # a retransmission (RV > 0) with an allocation either signals a reserved index (TBS 0 in
    # the log, the first transmission's by rule) or a full MCS whose TBS was checked above
    retx = (d["redundancy_version"] > 0) & (d["frequency_length"] > 0)
    assert ((d["mcs_index"] >= 28) | logged)[retx].all()
    assert (d["transport_block_size"][d["mcs_index"] >= 28] == 0).all()
