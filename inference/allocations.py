"""How every analysis reads an allocation log: its direction, its grid and its rate column.

An allocation log has one row per grant: NR-Scope's per-slot DCIs of every RNTI of a cell
(``dci_direction``, ``slot``, ``tbs_bytes``, ``attrs["tti_s"]``) or iCellSpeed's per-carrier
seconds of one phone (``carrier``, ``tbs_bps``, ``throughput_bps``). Read like any frame they
give wrong answers without a warning: uplink grants counted as more users, a grid of the
median row spacing (6 ms on a 1 ms slot log), PRBs or the device's throughput (repeated on
every carrier row) as the rate. :func:`allocation_view` is the one place that decides, for
``airlink infer cell``, ``fairness``, ``scheduler`` and ``jitter`` alike:

- **direction**: DCIs of one direction (``dl``, the default, or ``ul``); ``both`` keeps
  them as separate series (``user/direction``), never mixed;
- **grid**: the log's slot (``attrs["tti_s"]``, from the numerology the reader found), so
  one grid step is one scheduling decision;
- **rate**: the transport block size (``tbs_bytes`` per slot, or a carrier's ``tbs_bps``),
  the bytes the scheduler granted - not the PRBs (resources, shown as such) nor the
  device's application throughput;
- **carriers**: an iCellSpeed device's carriers are its carrier aggregation, one user:
  analyses between users combine them per device (:func:`device_groups`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import pandas as pd

from airlink.core.errors import AirlinkError

DIRECTIONS = {"dl": "downlink", "downlink": "downlink", "ul": "uplink", "uplink": "uplink", "both": "both"}
#: the rate column of an allocation log, in the order looked for
ALLOCATION_RATES = ("tbs_bytes", "tbs_bps")


@dataclass
class AllocationView:
    """An allocation log read the one way: ``frame`` (rows of ``direction``), ``resolution``
    (the slot as a Timedelta, or None when the log does not say), ``rate`` (default rate
    column or None), ``by`` (extra series keys) and ``notes`` (what was chosen, in words)."""
    frame: pd.DataFrame
    direction: str | None = None
    resolution: pd.Timedelta | None = None
    rate: str | None = None
    by: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def describe(self) -> dict:
        return {"direction": self.direction, "slot_s": None if self.resolution is None
                else self.resolution.value / 1e9, "rate": self.rate, "notes": list(self.notes)}


def is_allocation_log(frame: pd.DataFrame) -> bool:
    """One row per grant: a ``dci_direction`` column, or a per-carrier ``tbs_bps`` log."""
    return "dci_direction" in frame.columns or ("carrier" in frame.columns and "tbs_bps" in frame.columns)


def normalize_direction(direction) -> str:
    d = DIRECTIONS.get(str(direction).strip().lower()) if direction is not None else "downlink"
    if d is None:
        raise AirlinkError(f"direction must be dl, ul or both, got {direction!r}")
    return d


def slot_of(frame: pd.DataFrame):
    """The log's slot length as a Timedelta from ``attrs["tti_s"]`` (``"1/1000"`` or seconds),
    or None."""
    tti = frame.attrs.get("tti_s")
    if not tti:
        return None
    s = Fraction(str(tti)) if isinstance(tti, str) else Fraction(tti).limit_denominator(10**9)
    return pd.Timedelta(int(round(s * 10**9)), unit="ns")


def allocation_view(frame: pd.DataFrame, direction=None) -> AllocationView:
    """The frame as analyses read it (see the module notes); a frame that is not an
    allocation log is returned unchanged with nothing chosen."""
    if not is_allocation_log(frame):
        return AllocationView(frame)
    view = AllocationView(frame)
    notes = view.notes
    if "dci_direction" in frame.columns:
        d = normalize_direction(direction)
        view.direction = d
        counts = frame["dci_direction"].value_counts()
        if d == "both":
            view.by = ["dci_direction"]
            notes.append("downlink and uplink grants kept apart: one series per user and direction")
        else:
            kept = frame[frame["dci_direction"] == d]
            kept.attrs.update(frame.attrs)
            kept.attrs["direction"] = d
            view.frame = kept
            other = int(len(frame) - len(kept))
            notes.append(f"{d} grants only ({len(kept)} rows; {other} of other directions left out)")
            if kept.empty:
                raise AirlinkError(f"{frame.attrs.get('source', 'frame')}: no {d} grants "
                                   f"(directions in the log: {', '.join(map(str, counts.index))})")
    slot = slot_of(frame)
    if slot is not None:
        view.resolution = slot
        notes.append(f"grid: the log's slot, {slot.value / 1e6:g} ms")
    view.rate = next((c for c in ALLOCATION_RATES if c in frame.columns
                      and pd.to_numeric(frame[c], errors="coerce").notna().any()), None)
    if view.rate:
        notes.append(f"rate: {view.rate} (the transport blocks granted)")
    return view


def airlink_allocations(frame: pd.DataFrame) -> pd.DataFrame:
    """A MAC log airlink wrote (``airlink simulate``'s or ``airlink cell``'s ``mac.parquet``:
    one row per user and TTI with ``subchannels``, ``tx_bytes``, ``harq_retransmissions``)
    as an allocation log, the columns a decoded log has:

    - ``prbs`` = ``subchannels``: the PRBs (or PRB groups, subchannels, code channels) the
      scheduler gave the user in the TTI;
    - ``tbs_bytes`` = ``tx_bytes``: the bytes of the blocks sent in it;
    - ``retransmission``: every block of the row a HARQ retransmission (the simulator sends
      one block per subchannel, so ``harq_retransmissions == subchannels > 0``); a row mixing
      new blocks and retransmissions counts as new, its bytes as new bytes.

    A frame that already has ``prbs`` (a decoded log, or the rows of a measured cell,
    which carry both) or has no ``subchannels`` is returned unchanged."""
    if "prbs" in frame.columns or "subchannels" not in frame.columns:
        return frame
    sub = pd.to_numeric(frame["subchannels"], errors="coerce").fillna(0)
    cols = {"prbs": sub.astype("int64")}
    if "tx_bytes" in frame.columns and "tbs_bytes" not in frame.columns:
        cols["tbs_bytes"] = frame["tx_bytes"]
    if "harq_retransmissions" in frame.columns and "retransmission" not in frame.columns:
        retx = pd.to_numeric(frame["harq_retransmissions"], errors="coerce").fillna(0)
        cols["retransmission"] = (sub > 0) & (retx >= sub)
    out = frame.assign(**cols)
    out.attrs.update(frame.attrs)
    return out


def device_groups(labels, keys) -> dict:
    """``{device: [position, ...]}`` of series labels ``"a/b/..."`` made from ``keys`` when
    one of the keys is ``carrier`` (several carriers of one device are one user's carrier
    aggregation, not users competing for a cell); ``{}`` otherwise."""
    keys = list(keys or [])
    if "carrier" not in keys or not labels:
        return {}
    pos = keys.index("carrier")
    groups = {}
    for i, name in enumerate(labels):
        parts = str(name).split("/")
        device = "/".join(p for j, p in enumerate(parts) if j != pos) or "device"
        groups.setdefault(device, []).append(i)
    return groups
