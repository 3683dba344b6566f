"""An NR-Scope log two ways: through airlink's reader (downlink DCIs) and as the raw CSV
filtered by hand (downlink format 1_1, rows with PRBs) - the independent expectation."""
import pandas as pd

from airlink import collectors as C
from airlink.collectors.nrscope import select_direction


def downlink_and_raw(path):
    frame = select_direction(C.read(path), "downlink")
    raw = pd.read_csv(path)
    return frame, raw[(raw["dci_format"] == "1_1") & (raw["frequency_length"] > 0)]
