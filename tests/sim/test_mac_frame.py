"""The simulator's MAC frame (airlink.sim.step.Radio.mac_frame): TTI start times as UTC
datetimes, one row per TTI and user, and columns that are each their own memory."""
from __future__ import annotations

import numpy as np
import pandas as pd

from airlink.sim import simulate


def test_mac_frame_times_and_independent_columns():
    mac = simulate("nr-fr1", duration="3ms", seed=1).mac      # 6 slots of 0.5 ms x 10 users
    assert len(mac) == 60 and str(mac["time"].dtype) == "datetime64[ns, UTC]"
    want = pd.Timestamp(0, tz="UTC") + pd.to_timedelta(np.repeat(np.arange(6) * 500_000, 10), unit="ns")
    assert (mac["time"].to_numpy() == want.to_numpy()).all()
    assert list(mac["user"][:10]) == [str(i) for i in range(1, 11)]
    served = mac["served_bytes"].to_numpy().copy()
    np.testing.assert_array_equal(mac["capacity_bytes"], served)
    mac.loc[0, "capacity_bytes"] = -1.0                       # one column changed, not its twin
    np.testing.assert_array_equal(mac["served_bytes"], served)
