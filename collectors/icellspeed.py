"""iCellSpeed dataset (Purdue, MobiCom 2020) -> ``mac`` frame, one row per carrier and second.

Static files (``D1_static``) carry per carrier (``pcell``, ``scell_1..3``) RSRP/RSRQ, SNR,
scheduled transport-block rate ``_tbs`` (Mbit/s), carrier PRBs ``_max_nRB``, PRBs allocated in
the second ``_sum_nRB`` and mean ``_mcs``; ``throughput`` is Mbit/s. Driving files
(``D1_driving``) carry only the serving cells and ``throughput`` in **bit/s**. The unit is
chosen from the layout (per-carrier statistics present -> Mbit/s) and cross-checked against
the values: a "Mbit/s" median above 10 000 or a "bit/s" median below 1 000 is rejected with
a message rather than silently scaled. ``None`` = missing; a carrier with no cell id and
nothing scheduled (no TBS, no PRBs) is absent (no row), one with no cell id but a decoded TBS
(80 carrier-seconds of the static files, e.g. ``scell_1`` of loc-star-001d at 00:31:02) keeps
its row, cell id NaN.

Time: ``seconds_since_epoch``, whole seconds since the Unix epoch (UTC), one row per second
(the statistics of that second); missing seconds stay missing (no row); a repeated
(second, carrier) keeps the last row, counted in ``attrs["duplicate_times"]``. A column the
layout needs that is absent (a renamed ``pcell_sum_nRB``), or text where a number belongs,
is an error naming the file and column (and the line) - never a column of NaN.

Columns: ``time``, ``user`` (``ue``), ``carrier``, ``cell_id``, ``prbs``, ``prbs_max``, ``mcs``,
``tbs_bps``, ``rsrp_dbm``, ``rsrq_db``, ``snr_db``, ``throughput_bps`` (the device's
application throughput, repeated on each carrier row of the second), ``frequency``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import FormatError
from airlink.core.schema import validate

from ._tabular import MISSING, check_log_times, check_table_shape, header_columns, numbers, require_columns

NAME = "icellspeed"
CARRIERS = ["pcell", "scell_1", "scell_2", "scell_3"]
SIGNATURE = {"seconds_since_epoch", "throughput", "pcell_cid"}
STATIC_STATS = ("cid", "rsrp", "rsrq", "tbs", "max_nRB", "sum_nRB", "mcs", "snr")


def is_format(path) -> bool:
    return SIGNATURE <= set(header_columns(path))


def why_not(path) -> str:
    return f"header lacks {', '.join(sorted(SIGNATURE - set(header_columns(path))))}"


def read(path, *, throughput_unit: str | None = None) -> pd.DataFrame:
    """Read one iCellSpeed CSV (static or driving layout) into a per-carrier ``mac`` frame."""
    path = Path(path)
    check_table_shape(path)
    try:
        raw = pd.read_csv(path, na_values=MISSING)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as CSV ({str(exc).splitlines()[0]})") from None
    require_columns(raw, ["seconds_since_epoch", "throughput", "pcell_cid"], path)
    static = any(c.startswith("pcell_") and c not in ("pcell_cid", "pcell_freq") for c in raw.columns)
    carriers = [c for c in CARRIERS if f"{c}_cid" in raw.columns]
    # static layout: every carrier present carries all its statistics (a renamed one is an
    # error, not a column of NaN); driving layout: identity and frequency only
    need = STATIC_STATS if static else ("cid",)
    require_columns(raw, [f"{c}_{x}" for c in carriers for x in need], path,
                    "static-layout" if static else "")

    def num(name, scale=1.0):
        return numbers(raw[name], path=path, column=name) * scale

    unit = throughput_unit or ("Mbit/s" if static else "bit/s")
    thr = num("throughput")
    med = float(thr[thr > 0].median()) if (thr > 0).any() else 0.0
    if unit == "Mbit/s" and med > 1e4:
        raise FormatError(f"{path}: throughput median {med:g} is not plausible in Mbit/s "
                          f"(pass throughput_unit='bit/s')")
    if unit == "bit/s" and 0 < med < 1e3:
        raise FormatError(f"{path}: throughput median {med:g} is not plausible in bit/s "
                          f"(pass throughput_unit='Mbit/s')")
    thr_bps = thr * (1e6 if unit == "Mbit/s" else 1.0)
    seconds = num("seconds_since_epoch")
    check_log_times(seconds.to_numpy(), np.arange(len(seconds)) + 1, path, "seconds_since_epoch", place="row")
    t = pd.to_datetime(seconds * 1e9, unit="ns", utc=True)
    parts = []
    for c in carriers:
        def col(suffix, scale=1.0):
            name = f"{c}_{suffix}"
            return num(name, scale) if name in raw.columns else np.nan
        part = pd.DataFrame({
            "time": t, "user": "ue", "carrier": c, "cell_id": col("cid"), "frequency": col("freq"),
            "prbs": col("sum_nRB"), "prbs_max": col("max_nRB"), "mcs": col("mcs"),
            "tbs_bps": col("tbs", 1e6), "rsrp_dbm": col("rsrp"), "rsrq_db": col("rsrq"),
            "snr_db": col("snr"), "throughput_bps": thr_bps})
        # a carrier is absent when it has no cell id and nothing scheduled; a second whose
        # cell id the logger missed but whose TBS/PRBs were decoded keeps its bytes
        part = part[part["cell_id"].notna() | (part["tbs_bps"] > 0) | (part["prbs"] > 0)]
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["time", "user"])
    frame = frame[frame["time"].notna()]
    order = {c: i for i, c in enumerate(CARRIERS)}
    frame = frame.assign(_o=frame["carrier"].map(order)).sort_values(["time", "_o"], kind="stable") \
        .drop(columns="_o").reset_index(drop=True)
    frame["carrier"] = pd.Categorical(frame["carrier"], categories=CARRIERS)
    dup = frame.duplicated(["time", "carrier"], keep="last")
    frame = frame[~dup].reset_index(drop=True)
    frame.attrs.update({"source": str(path), "reader": NAME, "layout": "static" if static else "driving",
                        "throughput_unit": unit, "duplicate_times": int(dup.sum())})
    return validate(frame, "mac", name=str(path))
