"""The per-TTI step shared by the simulator and the live cell shell (airlink.sim.step.Radio).

The cell shell steps one TTI at a time with the live queue backlogs; the simulator steps
whole chunks with its own queues. These tests check that the two ways of driving the same
step give the same decisions, against the simulator's own output files.
"""
from __future__ import annotations

import numpy as np
import pytest

from airlink.sim import simulate
from airlink.sim.engine import check_config, make_scheduler, resolve_config
from airlink.sim.step import Radio, n_tti_of


def _radio(preset, scheduler, duration, live, **overrides):
    cfg = resolve_config(preset, {"scheduler": scheduler, **overrides})
    cfg["duration"], cfg["seed"] = duration, 5
    n_u, n_c = check_config(cfg)
    return Radio(cfg, make_scheduler(scheduler, cfg), n_users=n_u, n_subchannels=n_c,
                 n_tti=n_tti_of(cfg), live=live)


def _tti_by_tti(radio, backlog_of=None):
    """Served bytes per TTI, stepping one TTI at a time (as the cell shell does)."""
    rows = []
    for k0 in range(0, radio.n_tti, radio.chunk):
        n = min(radio.chunk, radio.n_tti - k0)
        inp = radio.inputs(k0, n)
        for i in range(n):
            out = radio.new_outputs(1)
            backlog = None if backlog_of is None else backlog_of(radio)
            radio.step(inp, i, i + 1, out, backlog=backlog)
            rows.append(out["served"][0].copy())
    return np.array(rows)


@pytest.mark.parametrize("preset,scheduler", [("quick", "pf"), ("quick", "maxcir"), ("quick", "rr"),
                                              ("imt-advanced", "pf"), ("1xrtt", "backlog"),
                                              ("quick", "airlink.sim.sched_pf:ProportionalFair"),
                                              ("nr-tmobile-10mhz", "pf"), ("nr-fr2", "rr")])
def test_stepping_one_tti_at_a_time_gives_the_simulators_schedule(preset, scheduler):
    overrides = {"traffic": "onoff"} if scheduler == "backlog" else {}
    sim = simulate(preset, seed=5, duration="0.4s", scheduler=scheduler, **overrides)
    radio = _radio(preset, scheduler, "0.4s", live=False, **overrides)
    assert np.array_equal(_tti_by_tti(radio), sim.capacity.values)


@pytest.mark.parametrize("preset,scheduler", [("quick", "pf"), ("quick", "maxcir"), ("quick", "rr"),
                                              ("quick", "mcpfs"), ("nr-tmobile-10mhz", "pf")])
def test_live_queues_kept_full_decide_as_the_full_buffer_simulation(preset, scheduler):
    """Live backlogs that never run dry (500 packets of 1500 bytes at the start of every
    TTI, as UDP above capacity keeps them) give the full-buffer simulation's service (NR:
    with the HARQ feedback delay and OLLA of the preset)."""
    sim = simulate(preset, seed=5, duration="0.5s", scheduler=scheduler)
    radio = _radio(preset, scheduler, "0.5s", live=True)
    full = np.full(radio.n_users, 500 * 1500.0)
    assert np.array_equal(_tti_by_tti(radio, lambda r: full), sim.capacity.values)


def test_a_ue_with_an_empty_live_queue_is_skipped():
    """UE 2's queue is empty: it is never served and the others share its resources, as
    in a simulation where user 2 has no traffic (a zero-rate CBR source)."""
    sim = simulate("quick", seed=5, duration="0.5s", scheduler="pf",
                   traffic=["full", "cbr", "full", "full"], traffic_rate_bps=[1e6, 0.0, 1e6, 1e6])
    radio = _radio("quick", "pf", "0.5s", live=True)
    live = np.array([500 * 1500.0, 0.0, 500 * 1500.0, 500 * 1500.0])
    served = _tti_by_tti(radio, lambda r: live)
    assert served[:, 1].sum() == 0
    assert np.array_equal(served, sim.capacity.values)


def test_live_backlog_limits_service_and_harq_bytes_stay_queued():
    """A live queue of 3000 bytes, never refilled and reduced by what was delivered: the UE
    gets exactly 3000 bytes in total (blocks that failed stay queued until delivered)."""
    radio = _radio("quick", "pf", "0.5s", live=True, n_users=1)
    left = [3000.0]

    def backlog(r):
        return np.array(left)

    total = 0.0
    for k0 in range(0, radio.n_tti, radio.chunk):
        n = min(radio.chunk, radio.n_tti - k0)
        inp = radio.inputs(k0, n)
        for i in range(n):
            out = radio.new_outputs(1)
            radio.step(inp, i, i + 1, out, backlog=backlog(radio))
            left[0] -= out["served"][0, 0]
            total += out["served"][0, 0]
            assert out["served"][0, 0] <= out["tx"][0, 0] + 1e-9
    assert total == pytest.approx(3000.0)
    assert left[0] == pytest.approx(0.0)
