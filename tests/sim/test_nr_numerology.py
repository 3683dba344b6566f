"""NR numerologies and carrier sizes against 38.211 and the guard bands published in 38.101."""
from fractions import Fraction

import pytest

from airlink.sim.nr_numerology import guard_band_khz, max_prbs, numerology, slot_seconds
from airlink.core.errors import AirlinkError


@pytest.mark.parametrize("scs,mu,slot", [(15, 0, Fraction(1, 1000)), (30, 1, Fraction(1, 2000)),
                                         (60, 2, Fraction(1, 4000)), (120, 3, Fraction(1, 8000))])
def test_numerologies(scs, mu, slot):
    assert numerology(scs) == mu and slot_seconds(scs) == slot


@pytest.mark.parametrize("bw,scs,fr,n_rb", [(100, 30, "fr1", 273), (10, 15, "fr1", 52), (15, 15, "fr1", 79),
                                            (100, 120, "fr2", 66), (50, 120, "fr2", 32), (400, 120, "fr2", 264),
                                            (50, 60, "fr2", 66), (100, 60, "fr1", 135)])
def test_carrier_sizes(bw, scs, fr, n_rb):
    assert max_prbs(bw, scs, fr) == n_rb


# Minimum guard bands (kHz) as printed in TS 38.101-1 / 38.101-2 Table 5.3.3-1: an independent
# check of every transcribed N_RB used here (the guard band follows from N_RB).
PUBLISHED_GUARD_KHZ = [(5, 15, "fr1", 242.5), (10, 15, "fr1", 312.5), (20, 15, "fr1", 452.5),
                       (50, 15, "fr1", 692.5), (10, 30, "fr1", 665), (100, 30, "fr1", 845),
                       (40, 30, "fr1", 905), (100, 60, "fr1", 1370), (50, 120, "fr2", 1900),
                       (100, 120, "fr2", 2420), (200, 120, "fr2", 4900), (400, 120, "fr2", 9860),
                       (50, 60, "fr2", 1210), (100, 60, "fr2", 2450), (200, 60, "fr2", 4930)]


@pytest.mark.parametrize("bw,scs,fr,guard", PUBLISHED_GUARD_KHZ)
def test_guard_bands_match_the_published_table(bw, scs, fr, guard):
    assert guard_band_khz(bw, scs, fr) == pytest.approx(guard)


@pytest.mark.parametrize("args,msg", [((100, 15), "not an FR1 channel bandwidth"), ((100, 45), "numerology"),
                                      ((100, 120), "not used in FR1"), ((100, 30, "fr3"), "fr1 or fr2")])
def test_invalid_combinations(args, msg):
    with pytest.raises(AirlinkError, match=msg):
        max_prbs(*args)
