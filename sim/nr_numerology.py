"""5G NR numerologies and carrier sizes (3GPP TS 38.211 4.2-4.3, TS 38.101-1/-2 5.3.2).

Numerology ``mu`` (38.211 Table 4.2-1, normal cyclic prefix): subcarrier spacing
``15 * 2^mu`` kHz, 14 OFDM symbols per slot, ``2^mu`` slots per 1 ms subframe, so a slot
lasts ``1 / 2^mu`` ms: mu 0 -> 15 kHz, 1 ms; 1 -> 30 kHz, 0.5 ms; 2 -> 60 kHz, 0.25 ms;
3 -> 120 kHz, 0.125 ms. A PRB is 12 subcarriers (``12 * SCS`` Hz wide).

Carrier sizes: the maximum transmission bandwidth configuration N_RB (PRBs) of each channel
bandwidth and SCS, FR1 from TS 38.101-1 Table 5.3.2-1 (15/30/60 kHz, 5-100 MHz) and FR2 from
TS 38.101-2 Table 5.3.2-1 (60/120 kHz, 50-400 MHz): e.g. 273 PRBs at 100 MHz / 30 kHz,
52 PRBs at 10 MHz / 15 kHz, 66 PRBs at 100 MHz / 120 kHz (and 32 at 50 MHz / 120 kHz).
The minimum guard band of those tables (Table 5.3.3-1) follows from N_RB as
``(BW - N_RB * 12 * SCS) / 2 - SCS / 2``; see :func:`guard_band_khz`.
"""
from __future__ import annotations

from fractions import Fraction

from airlink.core.errors import AirlinkError

SYMBOLS_PER_SLOT = 14
SUBCARRIERS_PER_PRB = 12

#: 38.211 Table 4.2-1 (data channels): mu -> subcarrier spacing (kHz)
NUMEROLOGIES = {0: 15, 1: 30, 2: 60, 3: 120}

#: TS 38.101-1 Table 5.3.2-1, FR1: SCS kHz -> {channel bandwidth MHz: N_RB}
FR1_PRBS = {
    15: {5: 25, 10: 52, 15: 79, 20: 106, 25: 133, 30: 160, 35: 188, 40: 216, 45: 242, 50: 270},
    30: {5: 11, 10: 24, 15: 38, 20: 51, 25: 65, 30: 78, 35: 92, 40: 106, 45: 119, 50: 133, 60: 162,
         70: 189, 80: 217, 90: 245, 100: 273},
    60: {10: 11, 15: 18, 20: 24, 25: 31, 30: 38, 35: 44, 40: 51, 45: 58, 50: 65, 60: 79, 70: 93,
         80: 107, 90: 121, 100: 135},
}

#: TS 38.101-2 Table 5.3.2-1, FR2: SCS kHz -> {channel bandwidth MHz: N_RB}
FR2_PRBS = {
    60: {50: 66, 100: 132, 200: 264},
    120: {50: 32, 100: 66, 200: 132, 400: 264},
}

RANGES = {"fr1": FR1_PRBS, "fr2": FR2_PRBS}


def numerology(scs_khz) -> int:
    """mu of a subcarrier spacing (15, 30, 60 or 120 kHz)."""
    for mu, scs in NUMEROLOGIES.items():
        if float(scs_khz) == scs:
            return mu
    raise AirlinkError(f"subcarrier spacing {scs_khz!r} kHz is not an NR data numerology "
                       f"(one of {', '.join(str(s) for s in NUMEROLOGIES.values())})")


def slot_seconds(scs_khz) -> Fraction:
    """Slot duration (s) at a subcarrier spacing: 1 ms / 2^mu."""
    return Fraction(1, 1000 * 2 ** numerology(scs_khz))


def max_prbs(bandwidth_mhz, scs_khz, frequency_range: str = "fr1") -> int:
    """N_RB of a channel bandwidth (MHz) at a subcarrier spacing (kHz) in ``fr1`` or ``fr2``."""
    fr = str(frequency_range).lower()
    if fr not in RANGES:
        raise AirlinkError(f"frequency range must be fr1 or fr2, got {frequency_range!r}")
    numerology(scs_khz)
    by_bw = RANGES[fr].get(int(scs_khz))
    if by_bw is None:
        raise AirlinkError(f"{scs_khz} kHz is not used in {fr.upper()} "
                           f"(one of {', '.join(map(str, RANGES[fr]))} kHz)")
    bw = float(bandwidth_mhz)
    if bw not in by_bw:
        raise AirlinkError(f"{bandwidth_mhz} MHz is not an {fr.upper()} channel bandwidth at {scs_khz} kHz "
                           f"(one of {', '.join(map(str, by_bw))} MHz)")
    return by_bw[int(bw)]


def guard_band_khz(bandwidth_mhz, scs_khz, frequency_range: str = "fr1") -> float:
    """Minimum guard band (kHz) of TS 38.101 Table 5.3.3-1: ``(BW - N_RB 12 SCS) / 2 - SCS / 2``."""
    n_rb = max_prbs(bandwidth_mhz, scs_khz, frequency_range)
    return (float(bandwidth_mhz) * 1000 - n_rb * SUBCARRIERS_PER_PRB * float(scs_khz)) / 2 - float(scs_khz) / 2
