"""NR HARQ: how the transmissions of one transport block combine (chase or incremental redundancy).

A block is sent with redundancy versions 0, 2, 3, 1 (the usual order; the one TS 38.214
Table 5.1.2.1-2 applies to a repeated PDSCH); TS 38.212 5.4.2.1 (Table 5.4.2.1-2) starts RV
0, 1, 2, 3 at 0, 17/66, 33/66 and 56/66 of the LDPC circular buffer (base graph 1; 0, 13/50,
25/50, 43/50 for base graph 2). The simulator decides each transmission on an
*effective SINR* ``s_eff`` of all transmissions so far and the block's MCS curve
``BLER_m(s_eff)`` (:mod:`airlink.sim.rates`): the block fails when
``s_eff < s50_m * z`` for the transmission's random draw ``z``.

Chase combining (CC)
    Every RV carries the same coded bits; maximum-ratio combining adds their SINRs:
    ``s_eff = s_1 + ... + s_k``.

Incremental redundancy (IR), by mutual-information accumulation
    Every RV brings new parity; the decoder gathers the information of all of them. Under
    the attenuated Shannon bound the rate tables are built on (threshold of spectral
    efficiency ``eta``: ``s = G (2^eta - 1)``, ``G`` the gap, 3 dB), a transmission at SINR
    ``s_i`` carries ``log2(1 + s_i / G)`` bit per channel use, and the block decodes when
    the sum reaches the MCS's ``eta``. The single transmission with the same information::

        s_eff = G * (prod_i (1 + s_i / G) - 1)

    or, one transmission ``s`` at a time on the previous ``a``::

        s_eff = a + s + a * s / G

    so the first transmission is judged exactly as before (``s_eff = s_1``), ``1 / G = 0``
    is chase combining, and at low SINR (``s << G``) IR and CC coincide, as they do for a
    real decoder; at high SINR IR gains much more (two transmissions halve the code rate).
    This is ideal IR: it assumes every RV's bits are new, which NR's RVs 2 and 3 nearly are
    (they start half way and 56/66 of the way along the buffer), while a block of code rate
    ``R`` covers the mother code (rate 1/3 for LDPC base graph 1, 1/5 for base graph 2)
    after about ``R / (1/3)`` transmissions: beyond that, further RVs repeat bits and IR
    overstates their gain. Chase is the lower bound, ideal IR the upper.

Worked example (the test's): ``G = 2``, ``s_1 = 1``, ``s_2 = 3``: CC ``4``; IR
``1 + 3 + 1 * 3 / 2 = 5.5`` = ``2 ((1 + 1/2)(1 + 3/2) - 1)``, and the information adds:
``log2(1 + 5.5/2) = log2(1.5) + log2(2.5)``.
"""
from __future__ import annotations

from airlink.core.errors import AirlinkError

from .rates import GAP_DB

#: combining rules and the ``1 / G`` each gives :func:`combine`
COMBINING = ("chase", "ir")


def inverse_gap(combining: str, gap_db: float = GAP_DB) -> float:
    """``1 / G`` of a combining rule: 0 for ``chase``, ``10^(-gap_db / 10)`` for ``ir``."""
    if combining == "chase":
        return 0.0
    if combining == "ir":
        return 10.0 ** (-float(gap_db) / 10.0)
    raise AirlinkError(f"unknown HARQ combining {combining!r} (one of {', '.join(COMBINING)})")


def combine(acc: float, s: float, inv_gap: float) -> float:
    """Effective linear SINR after one more transmission at linear SINR ``s`` on the
    previous effective SINR ``acc`` (0 before the first): ``acc + s + acc * s * inv_gap``
    (``inv_gap`` from :func:`inverse_gap`; see the module notes). Plain arithmetic, so a
    compiled kernel can call it as it is."""
    return acc + s + acc * s * inv_gap
