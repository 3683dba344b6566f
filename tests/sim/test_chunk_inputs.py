"""The inputs of a chunk of TTIs (airlink.sim.step.Radio.inputs) against a literal
transcription of their definition: the reported SINR is the real one ``csi_delay_tti`` TTIs
old (TTI 0 before the first), block-error thresholds ``z = ((1 - u) / u)^(1 / beta)`` of
the block-error stream's uniform draws (the C library's ``pow``), wideband SINR = 10 log10 of the mean over the
subchannels of each array - bit for bit, whatever the chunk sizes and with the MAC log
turned off and on between chunks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from airlink.sim.block_errors import error_thresholds, error_thresholds_reference
from airlink.sim.engine import check_config, make_scheduler, resolve_config
from airlink.sim.step import Radio

CHUNKS = (1, 2, 5, 13, 40)          # shorter and longer than the CSI delays below


def _radio(preset, **overrides):
    cfg = resolve_config(preset, overrides)
    cfg["seed"] = 11
    n_u, n_c = check_config(cfg)
    return Radio(cfg, make_scheduler(cfg["scheduler"], cfg), n_users=n_u, n_subchannels=n_c,
                 n_tti=sum(CHUNKS))


def _db(x):
    with np.errstate(divide="ignore"):
        return (10 * np.log10(x.mean(axis=2))).astype(np.float32)


@pytest.mark.parametrize("preset,delay", [("nr-fr1", 4), ("nr-tmobile-10mhz", 7), ("imt-advanced", 0),
                                          ("evdo", 3)])
def test_inputs_follow_their_definition(preset, delay):
    radio = _radio(preset, csi_delay_tti=delay)
    twin = _radio(preset, csi_delay_tti=delay)      # its channel, drawn chunk by chunk alike
    draws = np.random.default_rng([11, 0x5C4E])
    history = None
    k0 = 0
    for j, n in enumerate(CHUNKS):
        mac_log = j != 2
        got = radio.inputs(k0, n, mac_log=mac_log)
        real = twin.channel.sinr_chunk(k0, n)
        if history is None:
            history = np.repeat(real[:1], delay, axis=0)
        line = np.concatenate([history, real])
        rep = line[:n]
        history = line[n:]
        u = draws.random((n, max(radio.n_users, radio.n_subchannels)))
        # the C library's pow, as the definition says (not numpy's vector power)
        z = np.array([[math.inf if x == 0 else math.pow((1 - x) / x, 1 / radio.beta) for x in row]
                      for row in u]).reshape(u.shape)
        assert got.real.dtype == got.rep.dtype == np.float32
        np.testing.assert_array_equal(got.real, real)
        np.testing.assert_array_equal(got.rep, rep)
        np.testing.assert_array_equal(got.u_err, z)
        if mac_log:
            np.testing.assert_array_equal(got.sinr_db, _db(real))
            np.testing.assert_array_equal(got.sinr_rep_db, _db(rep))
            assert not np.shares_memory(got.sinr_db, got.sinr_rep_db)
        k0 += n


def test_chunk_arrays_stay_their_own():
    """A later chunk does not change an earlier chunk's arrays."""
    radio = _radio("nr-fr1", csi_delay_tti=4)
    first = radio.inputs(0, 6)
    kept = first.real.copy(), first.rep.copy(), first.sinr_rep_db.copy()
    radio.inputs(6, 3)
    radio.inputs(9, 8)
    for a, b in zip(kept, (first.real, first.rep, first.sinr_rep_db)):
        np.testing.assert_array_equal(a, b)


def test_error_thresholds_hand_worked_and_compiled_alike():
    # u = 1/2: (1 - u) / u = 1 -> z = 1; u = 1/5 with 1/beta = 1/2: 4^(1/2) = 2; u = 0: inf
    u = np.array([0.5, 0.2, 0.0, 0.8])
    np.testing.assert_allclose(error_thresholds_reference(u, 0.5)[[0, 1, 3]], [1.0, 2.0, 0.5], rtol=1e-15)
    assert np.isinf(error_thresholds_reference(u, 0.5)[2])
    draws = np.random.default_rng(3).random((200, 37))
    draws[0, 0] = 0.0
    for inv_beta in (0.5, 2.0, 1 / 8.685889638065035, 0.3, 0.7):
        np.testing.assert_array_equal(error_thresholds(draws, inv_beta),
                                      error_thresholds_reference(draws, inv_beta))
    np.testing.assert_array_equal(error_thresholds(u, 0.5), error_thresholds_reference(u, 0.5))
