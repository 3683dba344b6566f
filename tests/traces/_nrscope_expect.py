"""An NR-Scope log two ways: through airlink's reader (downlink DCIs) and as the raw CSV
filtered by hand (downlink format 1_1, rows with PRBs) - the independent expectation."""
import pandas as pd

from airlink import collectors as C
from airlink.collectors.nrscope import select_direction


def downlink_and_raw(path):
    frame = select_direction(C.read(path), "downlink")
    raw = pd.read_csv(path)
    return frame, raw[(raw["dci_format"] == "1_1") & (raw["frequency_length"] > 0)]


def raw_with_slots(path) -> pd.DataFrame:
    """Every row of the raw CSV (repeated header lines dropped, numbers parsed) with ``abs_slot``:
    the slot from the log's first row, by hand - a row's (SFN, slot) residue of the 10.24 s
    wrap nearest to what its decoding timestamp says (1 ms slots, 10 per 10 ms frame)."""
    import numpy as np
    r = pd.read_csv(path, low_memory=False)
    r = r[r["timestamp"].astype(str) != "timestamp"]
    r = r.assign(**{c: pd.to_numeric(r[c]) for c in ("timestamp", "system_frame_index", "slot_index", "rnti",
                                                      "frequency_length", "transport_block_size")})
    residue = (r["system_frame_index"] * 10 + r["slot_index"]).to_numpy()
    ms = ((r["timestamp"] - r["timestamp"].iloc[0]) * 1000).to_numpy()
    absolute = residue + 10240 * np.round((ms + residue[0] - residue) / 10240)
    return r.assign(abs_slot=(absolute - absolute[0]).astype("int64"))
