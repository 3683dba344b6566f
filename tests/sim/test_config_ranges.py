"""The simulator's parameters and the declared ranges of airlink.core.bounds agree: each
CellConfig field that a Bound declares takes exactly that range (the Bound's limits are
accepted, one step beyond each is refused), whichever route the value comes by."""
from __future__ import annotations

from fractions import Fraction

import pytest

from airlink.sim.config import DEFAULTS, RANGES, CellConfig, validate_config
from airlink.traces import AirlinkError
from airlink.core import bounds as B

# "duration" names two Bounds (a simulation's and a constant trace's): the simulator's is SIM_DURATION
SAME_NAME = {"duration": B.SIM_DURATION}


def test_every_field_with_a_declared_range_takes_it():
    declared = {}
    for bound in vars(B).values():
        if isinstance(bound, B.Bound) and bound.name in CellConfig.model_fields:
            declared.setdefault(bound.name, bound)
    declared.update(SAME_NAME)
    assert RANGES == declared


def _edges(bound):
    """(accepted, refused) values at the Bound's two ends, as the field's own type."""
    step = 1 if bound.integer else Fraction(1, 10**9)
    accepted, refused = [], []
    for end, sign, is_open in ((bound.lo, -1, bound.lo_open), (bound.hi, +1, bound.hi_open)):
        if end is None:
            continue
        end = Fraction(end)
        (refused if is_open else accepted).append(end)
        refused.append(end + sign * step * (1 if end == 0 or bound.integer else abs(end)))
        if is_open:
            accepted.append(end - sign * step * (1 if end == 0 or bound.integer else abs(end)))
    return accepted, refused


def _as_field(name, bound, value: Fraction):
    if name in ("tti", "duration"):
        return value                        # a Fraction of seconds
    return int(value) if bound.integer else float(value)


@pytest.mark.parametrize("name", sorted(RANGES))
def test_the_ends_of_the_range(name):
    bound = RANGES[name]
    accepted, refused = _edges(bound)
    assert accepted and refused
    for value in accepted:
        validate_config({**DEFAULTS, name: _as_field(name, bound, value)})
    for value in refused:
        with pytest.raises(AirlinkError, match=rf"^{name}: "):
            validate_config({**DEFAULTS, name: _as_field(name, bound, value)})


def test_hand_read_ranges():
    """Three ranges as airlink/core/bounds.py declares them, read by hand."""
    validate_config({**DEFAULTS, "n_users": 10_000, "buffer_packets": 0, "pf_a": 1})
    for bad in ({"n_users": 10_001}, {"pf_a": 0}, {"speed_kmh": [3.0, 1001.0]}, {"duration": "200h"}):
        with pytest.raises(AirlinkError, match=next(iter(bad))):
            validate_config({**DEFAULTS, **bad})
