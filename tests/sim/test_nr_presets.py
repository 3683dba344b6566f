"""The 5G NR presets: rate table from TS 38.214 transport blocks, every scheduler on PRBs."""
import numpy as np
import pytest

import airlink.sim as S
from airlink.sim.nr_rates import cqi_to_mcs, nr_rate_table
from airlink.traces import AirlinkError


def test_cqi_table_2_maps_onto_the_odd_256qam_mcs():
    # TS 38.214 Table 5.2.2.1-3 entries are Table 5.1.3.1-2 rows 1, 3, 5, ..., 27 (CQI 1, QPSK
    # 78/1024, is below MCS 0 and gets it)
    assert cqi_to_mcs(2, "qam256").tolist() == [0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27]
    # CQI table 1 on MCS table 1: 64QAM 466/567/666/772/873/948 are MCS 18, 20, 22, 24, 26, 28
    assert cqi_to_mcs(1, "qam64").tolist()[9:] == [18, 20, 22, 24, 26, 28]


def test_nr_fr1_peak_rate_is_the_hand_worked_transport_block():
    t = nr_rate_table(scs_khz=30, bandwidth_mhz=100, symbols=12, dmrs_symbols=2, cdm_groups=1, layers=2)
    # MCS 27 (256QAM 948/1024), 273 PRBs x (144 - 12) REs, 2 layers: N_info = 533783.25,
    # n = 14, N'_info = 16384 * 33 = 540672, C = 65, TBS = 520 * 1040 - 24 = 540776 bits
    # per 0.5 ms slot
    assert t.mcs[-1].startswith("MCS27 256QAM 948")
    assert t.rate_bps[-1] == 540776 / 0.0005
    assert len(t) == 15 and np.all(np.diff(t.rate_bps) > 0)


@pytest.mark.parametrize("scheduler", ["pf", "maxcir", "rr"])
def test_nr_fr1_runs_every_scheduler_on_prbs(scheduler):
    r = S.simulate("nr-fr1", scheduler=scheduler, duration="0.2s", seed=2)
    assert r.capacity.n_tti == 400 and r.capacity.tti_ms == 0.5
    per_tti = r.mac.groupby("time")["subchannels"].sum()
    assert per_tti.max() <= 273 and per_tti.min() > 0
    peak_bytes = 540776 / 8            # the whole carrier at MCS 27 in one slot
    assert r.capacity.values.sum(axis=1).max() <= peak_bytes + 1e-6


def test_single_saturating_user_gets_its_transport_blocks():
    # one full-buffer user at 40 dB (every PRB at CQI 15) without fading: every slot carries
    # the whole carrier's MCS 27 transport block, so the served bytes are k x TBS / 8
    r = S.simulate("nr-tmobile-10mhz", n_users=1, snr_db=40, profile="none", csi_delay_tti=0,
                   duration="0.1s", seed=1)
    from airlink.sim.nr_tbs import transport_block_bits
    tbs = int(transport_block_bits(27, 52, 12, table="qam256", dmrs_symbols=2, cdm_groups=1, layers=2))
    tx = r.mac["tx_bytes"].to_numpy()
    assert np.allclose(tx, tbs / 8)


def test_fr2_and_tmobile_presets_follow_their_numerology():
    assert S.simulate("nr-fr2", duration="0.01s").capacity.tti_ms == 0.125
    r15 = S.simulate("nr-tmobile-15mhz", duration="0.01s")
    assert r15.config["n_subchannels"] == 79 and r15.capacity.tti_ms == 1


@pytest.mark.parametrize("override,msg", [({"tti": "1ms"}, "tti: an NR slot at 30 kHz lasts 0.5 ms"),
                                          ({"n_subchannels": 300}, "more than the carrier's 273 PRBs"),
                                          ({"nr_bandwidth_mhz": 120}, "nr_bandwidth_mhz: 120"),
                                          ({"nr_scs_khz": 45}, "nr_scs_khz"),
                                          ({"nr_symbols": 15}, "nr_\\* parameters: allocated OFDM symbols"),
                                          ({"nr_mcs_table": "qam1024"}, "unknown MCS table"),
                                          ({"table_rates": "subchannel"}, "table_rates")])
def test_inconsistent_nr_parameters_are_named(override, msg):
    with pytest.raises(AirlinkError, match=msg):
        S.simulate("nr-fr1", duration="0.01s", **override)
