"""Which TTIs a cell accepts: 0.125 to 10 ms, and under 0.5 ms only where the compiled step
decides the TTIs (the Python step does not keep up with NR's 0.25 / 0.125 ms slots).
Options are checked when the shell is made, before any namespace exists (no root needed)."""
from __future__ import annotations

import numpy as np
import pytest

from airlink.core.errors import AirlinkError
from airlink.replay.cell import CellShell, _cellpath
from airlink.sim import kernel


class _FirstWithData:
    """A scheduler given as a Python class (no compiled twin): the first UE with data."""
    name = "first"

    def reset(self, **kw):
        pass

    def assign(self, ctx):
        users = np.flatnonzero(ctx.eligible)
        return np.full(ctx.rate_bytes.shape[1], users[0] if len(users) else -1)

    def update(self, sent_bits):
        pass


def test_tti_bounds_and_the_step_short_ttis_need():
    with pytest.raises(AirlinkError, match=r"a cell's TTI must be 0.125 to 10 ms, got 0.1 ms"):
        CellShell(preset="quick", tti="0.1ms")
    with pytest.raises(AirlinkError, match=r"a cell's TTI must be 0.125 to 10 ms, got 20 ms"):
        CellShell(preset="quick", tti="20ms")
    # a scheduler class runs on the Python step only: 0.5 ms is its shortest TTI
    assert CellShell(preset="quick", tti="0.5ms", scheduler=_FirstWithData()).tti * 2000 == 1
    with pytest.raises(AirlinkError, match=r"under 0.5 ms needs the compiled step.*a scheduler class"):
        CellShell(preset="nr-fr2", users=2, scheduler=_FirstWithData())
    if not kernel.COMPILED or _cellpath() is None:
        pytest.skip("no compiled step here (numba or the C packet path missing)")
    for preset, tti in (("nr-fr2", None), ("quick", "0.25ms"), ("imt-advanced", "0.125ms")):
        shell = CellShell(preset=preset, users=2, tti=tti)
        assert float(shell.tti) * 1000 == (0.125 if tti is None else float(tti[:-2]))
