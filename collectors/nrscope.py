"""NR-Scope per-slot DCI logs (Princeton, CoNEXT 2024) -> ``mac`` frame, one row per DCI.

NR-Scope decodes the downlink control information of **every user** of a 5G SA cell from
the air and writes one CSV row per DCI: ``timestamp`` (epoch seconds at decoding),
``system_frame_index`` (SFN, 0..1023), ``slot_index``, ``rnti``, ``dci_format`` (``1_1``
downlink, ``0_1`` uplink grant), ``frequency_length`` (PRBs), ``mcs_index``,
``transport_block_size`` (**bits**; NR-Scope writes 0 on retransmission rows),
``redundancy_version``, ``new_data_indicator``, ``harq_id``, ``nof_layers``, ``modulation``, ...

Assumptions about time (stated because they decide every number derived from the log):

- **Slot timing is the clock.** A DCI belongs to slot ``SFN * slots_per_frame + slot`` of a
  radio frame of 10 ms; ``slots_per_frame`` is 10 * 2^mu (mu from the subcarrier spacing:
  15 kHz -> 10 slots of 1 ms). Given as ``subcarrier_spacing_khz``, else taken from the
  largest ``slot_index`` seen (rounded up to a valid numerology).
- **SFN wrap-around** (every 1024 frames = 10.24 s) is undone with the decoding
  ``timestamp``: each row's absolute slot is the one of its SFN/slot residue nearest the
  time the timestamp says. This holds while the decoding latency varies by less than half
  a wrap (5.12 s); the real logs' latency spread is below 1.1 s (reported as
  ``attrs["decode_latency_ms_p99"]``).
- ``time`` is the start of the DCI's slot in UTC: the first row's timestamp, moved back
  by the smallest decoding latency in the file (so the fastest-decoded DCI has latency 0).
  Rows are sorted by slot (decoding order differs from slot order by up to ~220 ms).
- Units: ``tbs_bytes = transport_block_size / 8`` (NR TBS are whole bytes);
  ``prbs = frequency_length``.

Row handling: repeated header lines inside the file are skipped (counted in
``attrs["repeated_headers"]``); a cut last line (file ends mid-row) is dropped and counted
(``attrs["truncated_last_line"]``); any other row with a missing or non-numeric value in a
needed column is an error naming the line and column. DCIs without an allocation (0 PRBs,
which NR-Scope writes with ``frequency_start`` 275 and TBS 0) are dropped and counted
(``attrs["empty_dcis"]``); the same DCI twice (same slot, RNTI, format and HARQ process)
is kept once (``attrs["duplicate_dcis"]``).

:func:`select_direction` keeps the DCIs of one direction.

Columns: ``time``, ``user`` (RNTI as text), ``slot`` (absolute slot number from the first
slot of the log), ``sfn`` and ``slot_index`` (as logged), ``decoded_time`` (the logged
timestamp), ``dci_direction`` (``downlink``/``uplink``/``unknown``), ``prbs``, ``prb_start``,
``mcs``, ``tbs_bytes``, ``layers``, ``modulation``, ``harq_id``, ``rv``, ``ndi`` and
``retransmission`` (True when PRBs are allocated and the TBS is 0: a HARQ retransmission
carries no new bytes).
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.errors import AirlinkError, FormatError
from airlink.core.schema import validate

from ._tabular import check_log_times, check_table_shape, header_columns

NAME = "nrscope"
SIGNATURE = {"system_frame_index", "slot_index", "rnti", "transport_block_size", "dci_format"}
NUMERIC = ["timestamp", "system_frame_index", "slot_index", "rnti", "frequency_start", "frequency_length",
           "mcs_index", "transport_block_size", "redundancy_version", "new_data_indicator", "harq_id"]
OPTIONAL_NUMERIC = ["nof_layers"]
DIRECTIONS = {"1_1": "downlink", "1_0": "downlink", "0_1": "uplink", "0_0": "uplink"}
FRAMES_PER_WRAP = 1024
FRAME_S = Fraction(1, 100)


def is_format(path) -> bool:
    return SIGNATURE <= set(header_columns(path))


def why_not(path) -> str:
    return f"header lacks {', '.join(sorted(SIGNATURE - set(header_columns(path))))}"


def _slots_per_frame(subcarrier_spacing_khz, max_slot: int, path) -> int:
    if subcarrier_spacing_khz is not None:
        mu = {15: 0, 30: 1, 60: 2, 120: 3, 240: 4}.get(int(subcarrier_spacing_khz))
        if mu is None:
            raise AirlinkError(f"{path}: subcarrier spacing {subcarrier_spacing_khz!r} kHz is not an NR "
                               f"numerology (15, 30, 60, 120 or 240)")
        spf = 10 * 2 ** mu
        if max_slot >= spf:
            raise FormatError(f"{path}: slot_index {max_slot} does not exist at {subcarrier_spacing_khz} kHz "
                              f"({spf} slots per frame)")
        return spf
    for spf in (10, 20, 40, 80, 160):
        if max_slot < spf:
            return spf
    raise FormatError(f"{path}: slot_index {max_slot} exceeds 159, the most slots an NR frame has")


def read(path, *, subcarrier_spacing_khz: int | None = None) -> pd.DataFrame:
    """Read one NR-Scope DCI CSV into a ``mac`` frame (see the module notes for the rules).

    ``subcarrier_spacing_khz`` (15, 30, ...) fixes the slot length (``1 ms * 15 / scs``);
    ``None`` infers it from the largest slot index in the file. ``attrs["tti_s"]`` holds the
    slot length in seconds as ``"num/den"`` (the capacity-trace TTI of this log).
    """
    path = Path(path)
    check_table_shape(path)
    try:
        raw = pd.read_csv(path, dtype=str, skip_blank_lines=False, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{path}: cannot parse as CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in NUMERIC + ["dci_format"] if c not in raw.columns]
    if missing:
        raise FormatError(f"{path}: not an NR-Scope DCI log: column(s) {', '.join(missing)} missing")
    line = pd.Series(np.arange(len(raw)) + 2, index=raw.index)      # file line of each row
    blank = (raw == "").all(axis=1)
    header = raw["timestamp"].str.strip() == "timestamp"
    keep = ~(blank | header)
    raw, line = raw[keep], line[keep]
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 1))
        ends_cut = size > 0 and f.read(1) not in (b"\n", b"\r")
    cols = NUMERIC + [c for c in OPTIONAL_NUMERIC if c in raw.columns]
    num = pd.DataFrame({c: pd.to_numeric(raw[c].str.strip(), errors="coerce") for c in cols})
    bad = num.isna()
    truncated = 0
    if len(num) and ends_cut and bad.iloc[-1].any():
        num, raw, line, bad = num.iloc[:-1], raw.iloc[:-1], line.iloc[:-1], bad.iloc[:-1]
        truncated = 1
    if bad.to_numpy().any():
        r, c = np.argwhere(bad.to_numpy())[0]
        col = cols[c]
        raise FormatError(f"{path}: line {int(line.iloc[r])}: column {col!r}: "
                          f"{raw[col].iloc[r]!r} is not a number")
    if num.empty:
        raise FormatError(f"{path}: no DCI rows")
    spf = _slots_per_frame(subcarrier_spacing_khz, int(num["slot_index"].max()), path)
    if (num["system_frame_index"] >= FRAMES_PER_WRAP).any() or (num["system_frame_index"] < 0).any():
        r = int(np.flatnonzero((num["system_frame_index"] >= FRAMES_PER_WRAP) | (num["system_frame_index"] < 0))[0])
        raise FormatError(f"{path}: line {int(line.iloc[r])}: system_frame_index outside 0..1023")
    slot_s = FRAME_S / spf
    wrap = FRAMES_PER_WRAP * spf
    residue = (num["system_frame_index"].to_numpy(np.int64) * spf + num["slot_index"].to_numpy(np.int64))
    ts = num["timestamp"].to_numpy(float)
    check_log_times(ts, line.to_numpy(), path)
    # elapsed slots since the first row by the decoding clock, then the nearest slot with
    # the row's residue: absolute = residue + wrap * round((m0 + elapsed - residue) / wrap)
    elapsed = (ts - ts[0]) / float(slot_s)
    absolute = residue + wrap * np.round((residue[0] + elapsed - residue) / wrap).astype(np.int64)
    latency = residue[0] + elapsed - absolute        # decoding latency + const, in slots
    lat0 = float(latency.min())
    first_ns = int(round(ts[0] * 1e9))
    slot_ns = slot_s * 10**9
    start_slot = int(absolute.min())
    rel = absolute - start_slot
    # time of slot a = t0 + (a - m0 + min latency) slots
    t_ns = first_ns + np.round((absolute - residue[0] + lat0) * float(slot_ns)).astype(np.int64)
    fmt = raw["dci_format"].str.strip().to_numpy()
    prbs = num["frequency_length"].to_numpy(np.int64)
    tbs_bits = num["transport_block_size"].to_numpy(np.int64)
    frame = pd.DataFrame({
        "time": pd.to_datetime(t_ns, unit="ns", utc=True),
        "user": num["rnti"].astype(np.int64).astype(str).to_numpy(),
        "slot": rel.astype(np.int64),
        "sfn": num["system_frame_index"].to_numpy(np.int64),
        "slot_index": num["slot_index"].to_numpy(np.int64),
        "decoded_time": pd.to_datetime(np.round(ts * 1e9).astype(np.int64), unit="ns", utc=True),
        "dci_direction": pd.Series(fmt).map(DIRECTIONS).fillna("unknown").to_numpy(),
        "dci_format": fmt,
        "prbs": prbs,
        "prb_start": num["frequency_start"].to_numpy(np.int64),
        "mcs": num["mcs_index"].to_numpy(np.int64),
        "tbs_bytes": tbs_bits / 8.0,
        "layers": num["nof_layers"].to_numpy(np.int64) if "nof_layers" in num else 1,
        "modulation": raw["modulation"].str.strip().to_numpy() if "modulation" in raw else "",
        "harq_id": num["harq_id"].to_numpy(np.int64),
        "rv": num["redundancy_version"].to_numpy(np.int64),
        "ndi": num["new_data_indicator"].to_numpy(np.int64),
        "retransmission": (prbs > 0) & (tbs_bits == 0),
    })
    empty = frame["prbs"] <= 0
    frame = frame[~empty]
    frame = frame.sort_values(["slot", "user"], kind="stable")
    dup = frame.duplicated(["slot", "user", "dci_format", "harq_id"], keep="first")
    frame = frame[~dup].reset_index(drop=True)
    frame.attrs.update({
        "source": str(path), "reader": NAME, "tti_s": f"{slot_s.numerator}/{slot_s.denominator}",
        "slots_per_frame": spf, "start_ns": int(frame["time"].iloc[0].value) if len(frame) else first_ns,
        "repeated_headers": int(header.sum()), "truncated_last_line": truncated,
        "empty_dcis": int(empty.sum()), "duplicate_dcis": int(dup.sum()),
        "decode_latency_ms_p99": float(np.percentile(latency - lat0, 99) * float(slot_s) * 1000),
        "time_rule": "slot start from SFN/slot, wrap-around undone with the decoding timestamp",
    })
    return validate(frame, "mac", name=str(path))


def select_direction(frame: pd.DataFrame, direction: str = "downlink") -> pd.DataFrame:
    """The DCIs of one direction (``downlink`` or ``uplink``), with the reader's ``attrs``
    kept; a frame without ``dci_direction`` (one direction only) is returned as it is."""
    if direction not in ("downlink", "uplink"):
        raise AirlinkError(f"direction must be downlink or uplink, got {direction!r}")
    if "dci_direction" not in frame.columns:
        return frame
    out = frame[frame["dci_direction"] == direction]
    out.attrs.update(frame.attrs)
    out.attrs["direction"] = direction
    return out
