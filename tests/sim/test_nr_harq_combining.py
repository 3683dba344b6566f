"""NR HARQ combining rules (airlink.sim.nr_harq): chase and ideal incremental redundancy
by mutual-information accumulation, against hand-worked values and the information sum."""
import math

import numpy as np
import pytest

from airlink.sim.nr_harq import combine, inverse_gap
from airlink.traces import AirlinkError


def test_hand_worked_two_transmissions():
    # G = 2, s1 = 1, s2 = 3: chase 1 + 3 = 4; IR 2 ((1 + 1/2)(1 + 3/2) - 1) = 5.5
    assert combine(combine(0.0, 1.0, 0.0), 3.0, 0.0) == 4.0
    assert combine(combine(0.0, 1.0, 0.5), 3.0, 0.5) == 5.5
    assert math.log2(1 + 5.5 / 2) == pytest.approx(math.log2(1.5) + math.log2(2.5))


def test_ir_adds_the_information_of_every_transmission():
    g = 10 ** 0.3                                   # the rate tables' 3 dB gap
    s = 10 ** (np.random.default_rng(1).uniform(-10, 25, 4) / 10)
    acc = 0.0
    for k, si in enumerate(s, 1):
        acc = combine(acc, si, inverse_gap("ir"))
        # one transmission at acc carries what the k transmissions carried together
        assert math.log2(1 + acc / g) == pytest.approx(sum(math.log2(1 + x / g) for x in s[:k]), rel=1e-12)
        assert acc >= sum(s[:k])                    # never below chase
    assert combine(0.0, 7.0, inverse_gap("ir")) == 7.0      # a first transmission is judged as before


def test_ir_is_chase_at_low_sinr_and_names_are_checked():
    s = 1e-3
    assert combine(s, s, inverse_gap("ir")) == pytest.approx(2 * s, rel=1e-3)
    assert inverse_gap("chase") == 0.0 and inverse_gap("ir", 3.0) == pytest.approx(10 ** -0.3)
    with pytest.raises(AirlinkError, match="unknown HARQ combining 'soft'"):
        inverse_gap("soft")


def test_combine_compiles_as_the_kernel_would_call_it():
    """The step's compiled loop calls ``combine`` per retransmission: under numba's njit it
    gives the same bits as in Python (chase: exactly ``acc + s``)."""
    numba = pytest.importorskip("numba", reason="numba not installed: the kernel runs in Python")
    jitted = numba.njit(combine)

    @numba.njit
    def accumulate(s, inv_gap):            # a block's transmissions, one after another
        acc = 0.0
        out = np.empty(s.size)
        for i in range(s.size):
            acc = jitted(acc, s[i], inv_gap)
            out[i] = acc
        return out

    s = 10 ** (np.random.default_rng(4).uniform(-10, 30, 64) / 10)
    for inv_gap in (0.0, inverse_gap("ir")):
        want, acc = [], 0.0
        for x in s:
            acc = combine(acc, float(x), inv_gap)
            want.append(acc)
        np.testing.assert_array_equal(accumulate(s, inv_gap), want)
    np.testing.assert_array_equal(accumulate(s, 0.0), np.cumsum(s))
