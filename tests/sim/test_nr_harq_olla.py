"""HARQ feedback delay (K1) and outer-loop link adaptation (OLLA) of the shared kernel."""
import numpy as np
import pytest

import airlink.sim as S
from airlink.sim.nr_rates import nr_rate_table


def _first_tx_bler(mac) -> float:
    # with harq_max_tx = 2 every retransmission answers exactly one failed first transmission
    retx = mac["harq_retransmissions"].sum()
    blocks = mac["subchannels"].sum()
    return retx / (blocks - retx)


def test_olla_brings_the_first_transmission_bler_to_the_target():
    # a constant channel 0.1 dB below the CQI 8 threshold: CQI link adaptation uses CQI 7's
    # MCS, 2 dB inside its range (BLER ~0.2 %); OLLA raises its offset until the next MCS is
    # used part of the time and the first-transmission BLER is the 10 % target
    table = nr_rate_table(scs_khz=15, bandwidth_mhz=10, symbols=12, dmrs_symbols=2, cdm_groups=1, layers=2)
    snr = float(table.threshold_db[7]) - 0.1
    common = dict(n_users=1, snr_db=snr, profile="none", csi_delay_tti=0, harq_max_tx=2,
                  duration="4s", seed=3)
    cqi = S.simulate("nr-tmobile-10mhz", link_adaptation="cqi", **common).mac
    olla = S.simulate("nr-tmobile-10mhz", link_adaptation="olla", **common).mac
    assert _first_tx_bler(cqi) < 0.01
    assert 0.085 < _first_tx_bler(olla) < 0.115
    assert olla["served_bytes"].sum() > cqi["served_bytes"].sum()


@pytest.mark.parametrize("k1", [0, 3, 7])
def test_retransmissions_wait_for_the_harq_feedback(k1):
    # one PRB, one user, a stale CQI on a fast-fading channel: many failed blocks; a block that
    # fails in TTI j can go again from TTI j + K1 + 1 only
    mac = S.simulate("nr-tmobile-10mhz", n_users=1, n_subchannels=1, snr_db=12, profile="flat",
                     speed_kmh=60, csi_delay_tti=6, harq_max_tx=4, harq_feedback_tti=k1,
                     duration="3s", seed=4).mac
    tx = mac["tx_bytes"].to_numpy()
    failed = (tx > 0) & (mac["served_bytes"].to_numpy() == 0)
    retx = mac["harq_retransmissions"].to_numpy()
    assert failed.sum() > 100 and retx.sum() > 50
    lag = k1 + 1
    cum_failed = np.concatenate([np.zeros(lag, np.int64), np.cumsum(failed)[:-lag]])
    assert np.all(np.cumsum(retx) <= cum_failed)
    # and the delay is used, not exceeded needlessly: some retransmission goes exactly K1 + 1
    # TTIs after a failure
    j = np.flatnonzero(retx > 0)
    assert np.any(failed[j - lag])


def _one_prb(**kw):
    return S.simulate("nr-tmobile-10mhz", n_users=1, n_subchannels=1, duration="300ms", seed=4, **kw).mac


def test_sixteen_processes_run_out_when_the_feedback_is_late():
    # one user, one PRB, no block errors (30 dB, static channel), K1 = 20: a process that sent
    # in TTI t is free again in TTI t + 21, so 16 processes carry TTIs 0-15, then the user
    # waits 5 TTIs for process 0's feedback: new data in TTI k exactly when k mod 21 < 16
    clean = dict(snr_db=30, profile="flat", speed_kmh=0, csi_delay_tti=0, harq_feedback_tti=20)
    mac = _one_prb(**clean)
    assert mac["harq_retransmissions"].sum() == 0
    sent = mac["tx_bytes"].to_numpy() > 0
    k = np.arange(sent.size)
    assert np.array_equal(sent, k % 21 < 16)
    # unlimited processes (the older presets' default): every TTI
    assert (_one_prb(harq_processes=0, **clean)["tx_bytes"] > 0).all()
    # K1 short enough for 16 processes: every TTI as well (a process is free again after K1 + 1 <= 16)
    assert (_one_prb(**{**clean, "harq_feedback_tti": 15})["tx_bytes"] > 0).all()


def test_a_failed_block_keeps_its_process_busy():
    # fast fading and a stale CQI: many failures. A new transmission occupies its process for
    # at least K1 + 1 TTIs, so any K1 + 1 consecutive TTIs hold at most 16 new transmissions;
    # a failed block holds its process until retransmitted, so fewer new ones than without errors
    mac = _one_prb(snr_db=12, profile="flat", speed_kmh=60, csi_delay_tti=6, harq_max_tx=4,
                   harq_feedback_tti=20, link_adaptation="cqi")
    tx = mac["tx_bytes"].to_numpy() > 0
    retx = mac["harq_retransmissions"].to_numpy() > 0
    new = tx & ~retx
    assert retx.sum() > 10
    per_window = np.convolve(new.astype(int), np.ones(21, int), mode="valid")
    assert per_window.max() <= 16
    assert new.sum() < 16 / 21 * new.size - 5


def test_incremental_redundancy_only_turns_failed_retransmissions_into_successes():
    # the same run (seed, channel, draws) combined as chase and as ideal IR: IR's effective SINR
    # is chase's plus a s / G >= 0 (sim/nr_harq.py), and a first transmission is judged the
    # same, so the two runs are equal up to the first retransmission that IR decodes and chase
    # does not - never the other way round
    kw = dict(n_users=1, n_subchannels=1, snr_db=12, profile="flat", speed_kmh=60, csi_delay_tti=6,
              harq_max_tx=4, duration="1s", seed=4)
    chase = S.simulate("nr-tmobile-10mhz", harq_combining="chase", **kw).mac
    ir = S.simulate("nr-tmobile-10mhz", harq_combining="ir", **kw).mac
    assert chase.equals(S.simulate("nr-tmobile-10mhz", **kw).mac)       # chase is the default
    diff = np.flatnonzero((chase["served_bytes"] != ir["served_bytes"]).to_numpy())
    assert diff.size > 0
    t = diff[0]
    assert chase["harq_retransmissions"].iat[t] > 0 and ir["harq_retransmissions"].iat[t] > 0
    assert ir["served_bytes"].iat[t] > chase["served_bytes"].iat[t] == 0
    assert ir["harq_retransmissions"].sum() < chase["harq_retransmissions"].sum()
