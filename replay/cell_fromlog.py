"""A recorded cell replayed live: ``airlink cell --from-log LOG``.

Two kinds of log hold what every user of a cell got, TTI by TTI:

- an NR-Scope log (:mod:`airlink.collectors.nrscope`): the DCIs of every user of a real
  cell, slot by slot (users are RNTIs, MCS values 38.214 indices);
- airlink's own MAC log (``mac.parquet`` of ``airlink cell --mac-log`` or ``airlink
  simulate``; :mod:`airlink.collectors.macparquet`): one row per UE and TTI. Each row with
  subchannels becomes one DCI of user ``N`` (the UE's number): ``prbs`` = its
  ``subchannels``, placed after the earlier UEs' of the same TTI (``prb_start`` = their
  sum: the log does not say which subchannels, and a followed channel is flat, so only
  their number matters), ``mcs`` = the 1-based rate-table row of its blocks (the row
  mean, rounded), ``tbs_bytes`` = ``tx_bytes``, a retransmission when it carried HARQ
  retransmissions. The cross-traffic's users are named ``log-N`` in the replay's MAC log.
  This is the **scheduler-driven replay** of one UE of a recorded cell: ``--follow-rnti N
  --users 1`` gives the live UE UE ``N``'s recorded channel and the other UEs' recorded
  resources as cross-traffic, and the cell's scheduler serves it TTI by TTI from its live
  backlog (docs/replay.md).

**Idle TTIs**: a MAC log also says whether a UE had data at a TTI's decision. What the
others took in a TTI where the followed UE had none says nothing about what they would
have left it (a work-conserving scheduler gives a backlogged neighbour everything), so
there the cross-traffic is that of the latest TTI where a followed UE had data (before
the first such TTI, the first one's): the share the others took beside a UE that wanted
data. ``hold_idle=False`` keeps every TTI as recorded.

**Others as demand** (``others="demand"``, an airlink MAC log only): instead of taking
their recorded subchannels first, the other UEs become simulated UEs of the cell
(:class:`Demand`; :meth:`FromLogRadio.step` runs each TTI through an inner radio of the
live UEs followed by them): their queues get their recorded ``arrivals_bytes`` (and start
with what they held at the start slot), their channel is a followed UE's (their recorded
wideband SINR over the cell's fading, or their recorded row held, below), and the
scheduler divides the subchannels between them and the live UEs every TTI with their PF
averages kept as for live UEs - a live UE that was idle takes more, as in the recorded
cell. The replay's MAC log then has the live UEs' rows only
(the others' service stays in the shell process: ``FromLogRadio.others_served``).

**Others as flows** (``others="flows"``): the same simulated UEs, but each one's demand is
its recorded *on-periods* rather than its arrivals TTI by TTI (:func:`as_flows`): the bytes
an on-period brought (its queue at its first decision and its arrivals) arrive at once at
its first TTI, and a UE that had data at :data:`FULL_SHARE` of the log's TTIs or more is a
full buffer. A recorded TCP neighbour sent at the pace it was served in the recording; as a
flow it takes what the replayed cell leaves it and ends when its bytes are served.

**Others mixed** (``others="mixed"``): the same simulated UEs, a full buffer where
``"flows"`` makes one (:func:`full_buffer`: data at :data:`FULL_SHARE` of the log's TTIs or
more) and every other one open loop, fed by its recorded arrivals as in ``"demand"``. A bulk
neighbour takes what the replayed cell leaves it (as it would have, its TCP queue never
empty); an on-off neighbour's fetches keep the pace they had in the recording.

:func:`measured_cell` turns either into what the live cell needs per slot:

- **Cross-traffic**: the DCIs of the RNTIs no live UE follows, in one direction (downlink
  by default). Their PRBs (``prb_start .. prb_start + prbs - 1``) are taken first: in that
  slot no live UE can be given them.
- **Channels**: live UE ``i`` follows a recorded RNTI's MCS series (the MCS of its new
  transmissions, held from one DCI to the next and, before its first DCI, the first one's),
  or the preset's channel model (``None``). An NR-Scope MCS index maps to the highest rate
  table row whose index is not above it; an airlink MAC log's row is the row.

:class:`FromLogRadio` is the cell's :class:`airlink.sim.step.Radio` with those applied to
the chunks of inputs it makes (:meth:`FromLogRadio.inputs`); the step itself is the shared
one. How:

- a PRB of the cross-traffic gets the reported and real SINR ``MASKED`` (-1, linear) for
  every live UE: below every MCS threshold, so no scheduler gives it a new block (its
  metric is not above 0, round robin skips a subchannel without MCS), and not above the
  -1 the step's search for a HARQ retransmission's subchannel starts from, so no
  retransmission goes there either. (What the step would need instead: a per-TTI mask of
  available subchannels as an input of :func:`airlink.sim.kernel.run_chunk`.)
- **selective channel** (``channel="selective"``, the default; an airlink MAC log only, whose
  ``sinr_db`` is each UE's wideband real SINR, ``10 log10`` of its mean linear SINR over the
  subchannels, every TTI): a followed UE's real SINR on subchannel ``c`` in TTI ``k`` is
  ``W(slot(k)) * G(k, c) / mean_c' G(k, c')``, with ``W`` its recorded wideband SINR
  (linear) and ``G`` the fading power gain of the cell's own channel model for that UE (the
  preset's power-delay profile and speed: :mod:`airlink.sim.channel`), and its reported SINR
  the same ``csi_delay_tti`` TTIs earlier, as in the recorded cell; the other users of
  ``others="demand"``/``"flows"``/``"mixed"`` get the same from the inner radio's channel
  model, one draw over the log's slots made before the live loop starts and repeating with
  the log (:meth:`FromLogRadio._others_channel`). The wideband SINR is the recording's (the
  replay's MAC log shows it unchanged); how it is spread over the subchannels is the
  model's, a fresh draw of the recorded cell's kind of fading, since the log does not say
  which subchannels were good. PF then takes each UE's better subchannels and splits TTIs
  as the recorded cell did, and link adaptation from the reported SINR
  (``link_adaptation: cqi``) picks a row per subchannel with the errors of the recorded
  cell's (its blocks fail as often as a live UE's, not at a threshold).
- **flat channel** (``channel="flat"``, and always for an NR-Scope log, which has no
  wideband SINR, or a MAC log without ``sinr_db``): a followed UE's reported and real SINR on every PRB is the linear
  threshold of the rate table's row of the recorded MCS (the highest row whose 38.214 MCS
  index is not above it), so per-slot link adaptation from the reported SINR
  (``link_adaptation: cqi``, which the cell then uses: the recorded MCS is the base
  station's choice, its own outer loop included) picks that row, and its first
  transmissions fail with the table's BLER at the threshold (10 %).

Time: TTI ``k`` of the run is slot ``(start + k) mod L`` of the log (``L`` = last slot + 1,
slots numbered by the collector from the log's first, TTIs of an airlink MAC log from
its first ``time``): the log repeats, and a slot without
DCIs (a gap) has no cross-traffic. The log's slot length must be the cell's TTI.

The MAC log gets one row per cross-traffic DCI (``cross_traffic`` True, ``user`` its RNTI,
``prbs``/``subchannels`` its PRBs, ``mcs`` the table row as for the live UEs,
``mcs_index`` the logged index (-1 from an airlink MAC log), ``tbs_bytes``/``served_bytes``
the logged transport block, 0 on an NR-Scope retransmission) next to the live UEs' rows
(``cross_traffic`` False, ``prbs`` = ``subchannels``), with the TTI number in ``slot``:
``airlink infer cell`` reads it like a decoded log.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.sim.step import Radio
from airlink.core.errors import AirlinkError

#: linear SINR of a PRB the cross-traffic holds (see the module notes)
MASKED = np.float32(-1.0)
#: ``others="flows"`` and ``"mixed"``: a user with data at this share of the log's decisions or more is a
#: full buffer - a bulk download, whose TCP queue runs dry only in loss recoveries (the
#: benchmark's bulk neighbour: 97.9 %; its on-off ones 61 and 75 %)
FULL_SHARE = 0.95
#: how a replay of a MAC log treats its other users (``others`` of :func:`measured_cell`)
OTHERS = ("share", "demand", "flows", "mixed")
#: the replayed UEs' channel (``channel`` of :func:`measured_cell`): their recorded wideband
#: SINR spread over the subchannels by the cell's own fading model, or their recorded row on
#: every subchannel
CHANNELS = ("selective", "flat")
#: TTIs of draws the demand mode's inner radio makes at a time
_DRAWS = 1000
#: TTIs of the others' fading made at a time (:meth:`FromLogRadio._fading_by_slot`)
_SHAPE_TTIS = 100
#: the highest MCS index of a new transmission (28-31 of the 256QAM table and 29-31 of the
#: 64QAM ones are reserved: they only name a retransmission's modulation)
_MAX_NEW_MCS = 28


@dataclass
class Demand:
    """The other UEs of an airlink MAC log as simulated UEs of the replaying cell.

    users : their names in the log; rows : int64 (K, L) their MCS as 1-based rate-table rows
    per slot (held as for a followed UE); arrivals : float64 (K, L) bytes arriving at their
    queue per slot (``arrivals_bytes``); backlog : float64 (K, L) bytes queued at each
    slot's decision less its arrivals (the start's is their queue when the replay begins);
    full : bool (K,) full-buffer users (always data); mode : ``"demand"`` (arrivals as
    recorded), ``"flows"`` (arrivals and backlog by :func:`as_flows`) or ``"mixed"`` (as
    recorded, the :func:`full_buffer` users full buffers); sinr : float32 (K, L) their
    recorded wideband real SINR per slot (linear, held over slots without one), or None (a
    flat channel at their rows)
    """

    users: list
    rows: np.ndarray
    arrivals: np.ndarray
    backlog: np.ndarray
    full: np.ndarray = None
    mode: str = "demand"
    sinr: np.ndarray = None

    def __post_init__(self):
        if self.full is None:
            self.full = np.zeros(len(self.users), bool)


def full_buffer(had) -> bool:
    """True when a user had data (bool (L,) ``had``, per slot) in :data:`FULL_SHARE` of the
    log's slots or more: a bulk download, which the replay makes a full buffer."""
    return bool(np.mean(had) >= FULL_SHARE) if len(had) else False


def as_flows(arrivals, backlog, had) -> tuple:
    """``(arrivals', backlog', full)``: one user's recorded demand as flows, per slot of a
    log that repeats (slot ``L - 1`` is followed by slot 0).

    arrivals, backlog : float64 (L,) bytes arriving at each slot's decision and queued before
        them (:class:`Demand`); had : bool (L,) the user had data at the decision
    An on-period is a run of slots with ``had`` (cyclic: one that holds the last slot and
    slot 0 is one period). With ``a`` its first slot and ``B = backlog[a] + sum(arrivals)``
    over the period: ``arrivals'[a] = B`` and ``arrivals'`` is 0 elsewhere; ``backlog'[s]``
    (the queue when a replay starts at ``s``) is, inside a period after its first slot,
    ``backlog[s] + the period's arrivals from s on``, else 0 - so the bytes a replay starting
    anywhere is given over one cycle of the log are what the recording handled. ``full``:
    :func:`full_buffer` (a bulk download: the user always has data); then ``arrivals'`` and
    ``backlog'`` are the recorded ones.
    """
    arrivals, backlog = np.asarray(arrivals, np.float64), np.asarray(backlog, np.float64)
    had = np.asarray(had, bool)
    full = full_buffer(had)
    if full or not had.any():
        return arrivals.copy(), backlog.copy(), full
    n = len(had)
    order = (np.arange(n) + int(np.argmin(had))) % n     # the log from a slot without data
    h, a, b = had[order], np.where(had, arrivals, 0.0)[order], backlog[order]
    first = h & ~np.roll(h, 1)                            # h[0] is False: no period wraps here
    period = np.cumsum(first) - 1                         # the period of each slot with data
    total = np.bincount(period[h], weights=a[h], minlength=int(first.sum()))
    before = np.cumsum(a) - a                             # arrivals before each slot (rotated)
    start = np.flatnonzero(first)
    rest = total[period] - (before - before[start[period]])   # the period's arrivals from s on
    out_a, out_b = np.zeros(n), np.zeros(n)
    out_a[start] = b[start] + total
    inside = h & ~first
    out_b[inside] = b[inside] + rest[inside]
    back = np.empty(n, np.int64)
    back[order] = np.arange(n)
    return out_a[back], out_b[back], False


@dataclass
class MeasuredCell:
    """What a live cell replays from a log (see the module notes).

    source : the log's path; direction : ``downlink`` or ``uplink``
    tti : the log's slot (s); n_slots : ``L``, the log's slots (last + 1); start : first slot
    follow : per live UE, the RNTI (text) whose MCS it follows, or None (the preset's model)
    cross : the cross-traffic DCIs sorted by slot: ``slot``, ``user``, ``prb_start``,
        ``prbs``, ``mcs``, ``tbs_bytes``, ``retransmission``
    mcs_series : per followed RNTI, int64 (L,) its MCS in every slot
    mcs_rows : True when MCS values are 1-based rate-table rows (an airlink MAC log), False
        when they are 38.214 MCS indices (NR-Scope)
    held_slots : slots whose cross-traffic is a held one (no followed UE had data there)
    demand : the other users as simulated UEs (``others`` ``"demand"``, ``"flows"`` or
        ``"mixed"``), or None
    channel : ``"selective"`` (the followed UEs' and the others' channels are their recorded
        wideband SINR over the cell's fading: :class:`FromLogRadio`) or ``"flat"``
    sinr_series : with ``"selective"``, per followed RNTI, float32 (L,) its recorded wideband
        real SINR (linear) in every slot
    """

    source: str
    direction: str
    tti: Fraction
    n_slots: int
    start: int
    follow: list
    cross: pd.DataFrame
    mcs_series: dict = field(default_factory=dict)
    mcs_rows: bool = False
    held_slots: int = 0
    demand: "Demand | None" = None
    channel: str = "flat"
    sinr_series: dict = field(default_factory=dict)

    def slots_of(self, k0: int, n: int) -> np.ndarray:
        """The log slots of TTIs ``k0 .. k0+n-1``."""
        return (self.start + np.arange(k0, k0 + n, dtype=np.int64)) % self.n_slots

    def cross_rows(self, k0: int, n: int) -> tuple:
        """``(tti, rows)``: the positions in :attr:`cross` of the DCIs of TTIs ``k0 ..
        k0+n-1`` and each one's TTI, in TTI order."""
        slot = self.cross["slot"].to_numpy()
        idx = self.slots_of(k0, n)
        lo = np.searchsorted(slot, idx, "left")
        counts = np.searchsorted(slot, idx, "right") - lo
        total = int(counts.sum())
        first = np.cumsum(counts) - counts
        rows = np.arange(total) - np.repeat(first, counts) + np.repeat(lo, counts)
        return np.repeat(np.arange(k0, k0 + n, dtype=np.int64), counts), rows

    def table_rows(self, table, mcs) -> np.ndarray:
        """The 0-based rows of ``table`` of logged MCS values (see :attr:`mcs_rows`)."""
        mcs = np.asarray(mcs, dtype=np.int64)
        if self.mcs_rows:
            return np.clip(mcs - 1, 0, len(table) - 1)
        return rows_of_mcs(table, mcs)

    def describe(self) -> dict:
        return {"source": self.source, "direction": self.direction, "log_slots": self.n_slots,
                "start_slot": self.start, "follow_rnti": self.follow,
                "cross_traffic_rntis": int(self.cross["user"].nunique()),
                "cross_traffic_dcis": len(self.cross), "held_slots": self.held_slots,
                "others": "share" if self.demand is None else self.demand.mode, "channel": self.channel}


def measured_cell(path, *, n_users: int, n_prbs: int, tti: Fraction, follow=None,
                  direction: str = "downlink", start=None, hold_idle: bool = True,
                  others: str = "share", channel: str = "selective") -> MeasuredCell:
    """Read a cell's log (NR-Scope CSV or airlink MAC log, see the module notes) for a live
    cell of ``n_users`` UEs over ``n_prbs`` PRBs (subchannels) with slots of ``tti`` seconds.

    follow : None or ``"busiest"`` (every UE follows the RNTI with the most PRBs in the
        direction), one entry for every UE, or a list of one per UE; an entry is an RNTI
        (int or text; in an airlink MAC log a UE's number), ``"busiest"``, or
        ``"model"``/None (the preset's channel model)
    start : where in the log the run starts (seconds, a duration such as ``"120s"``, or
        None: its first slot)
    hold_idle : an airlink MAC log only: in TTIs where no followed UE had data, the
        cross-traffic is that of the latest TTI where one had (see the module notes);
        False: as recorded in every TTI
    others : ``"share"`` (the other users' recorded PRBs are taken first) or, for an
        airlink MAC log, ``"demand"``: the other UEs are simulated UEs of the cell fed by
        their recorded arrivals and channels (:class:`Demand`), scheduled with the live ones,
        or ``"flows"``: the same fed by their recorded on-periods (:func:`as_flows`), or
        ``"mixed"``: those with data throughout (:func:`full_buffer`) full buffers, the others
        fed by their recorded arrivals
    channel : ``"selective"``: a replayed UE's real SINR on subchannel ``c`` in TTI ``k`` is its
        recorded wideband SINR times the cell's fading shape there (:class:`FromLogRadio`),
        where the log has a wideband SINR for every followed UE and every other UE it
        simulates (an airlink MAC log's ``sinr_db``); otherwise, and with ``"flat"``, the
        threshold of its recorded row on every subchannel. :attr:`MeasuredCell.channel` says
        which one the replay got.

    Errors name the file (and for a bad row of an NR-Scope log the line and column).
    """
    from airlink.core.units import parse_duration
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such cell log")
    if not path.is_file():
        raise AirlinkError(f"{path}: not a file (a cell log is an NR-Scope CSV or an airlink MAC log)")
    if others not in OTHERS:
        raise AirlinkError(f"others: 'share', 'demand', 'flows' or 'mixed', not {others!r}")
    if channel not in CHANNELS:
        raise AirlinkError(f"channel: 'selective' or 'flat', not {channel!r}")
    mac_log = is_mac_log(path)
    if others != "share" and not mac_log:
        raise AirlinkError(f"{path}: other users as {others} need an airlink MAC log (an NR-Scope log has no "
                           f"arrivals)")
    frame = mac_log_dcis(path, direction) if mac_log else _nrscope_dcis(path, direction)
    wanted = every = None
    if mac_log:
        every = frame
        wanted = frame[frame["wanted"]][["slot", "user"]]
        frame = frame[frame["prbs"] > 0]
    log_tti = Fraction(frame.attrs["tti_s"])
    if log_tti != Fraction(tti):
        raise AirlinkError(f"{path}: the log's slots last {float(log_tti) * 1e3:g} ms, the cell's TTI "
                           f"{float(tti) * 1e3:g} ms (use a preset with the log's numerology)")
    if frame.empty:
        raise AirlinkError(f"{path}: no {direction} DCIs" if not mac_log else f"{path}: no UE was ever scheduled")
    n_slots = int(frame["slot"].max()) + 1
    first = 0
    if start is not None:
        first = int(parse_duration(start) / log_tti)
        if not 0 <= first < n_slots:
            raise AirlinkError(f"{path}: start {start} is outside the log's {float(n_slots * log_tti):g} s")
    busiest = str(frame.groupby("user")["prbs"].sum().idxmax())
    follow = _per_ue(follow, n_users)
    rntis = set(frame["user"])
    who = "UE" if mac_log else "RNTI"
    chosen = []
    for entry in follow:
        if entry is None or str(entry).strip().lower() == "model":
            chosen.append(None)
            continue
        rnti = busiest if str(entry).strip().lower() == "busiest" else str(entry).strip()
        if not rnti.isdigit():
            raise AirlinkError(f"follow RNTI {entry!r}: an RNTI (a number), 'busiest' or 'model'")
        rnti = str(int(rnti))
        if rnti not in rntis:
            raise AirlinkError(f"{path}: {who} {rnti} has no {direction} DCIs (busiest: {busiest})")
        chosen.append(rnti)
    live_names = {str(i + 1) for i in range(n_users)}
    followed = {r for r in chosen if r is not None}
    cross = frame[~frame["user"].isin(followed)]
    if mac_log:             # the other UEs keep their numbers, after "log-": none is a live UE's name
        cross = cross.assign(user="log-" + cross["user"].astype(str),
                             prb_start=cross.groupby("slot")["prbs"].cumsum() - cross["prbs"])
    clash = sorted(live_names & set(cross["user"]))
    if clash:
        raise AirlinkError(f"{path}: RNTI {clash[0]} has a live UE's name; follow it or use fewer UEs")
    end = cross["prb_start"] + cross["prbs"]
    if (end > n_prbs).any():
        r = cross[end > n_prbs].iloc[0]
        raise AirlinkError(f"{path}: RNTI {r['user']} in slot {int(r['slot'])} holds PRBs {int(r['prb_start'])}-"
                           f"{int(r['prb_start'] + r['prbs'] - 1)}, beyond the cell's {n_prbs} PRBs "
                           f"(use a preset of the log's carrier)")
    cross = cross[["slot", "user", "prb_start", "prbs", "mcs", "tbs_bytes", "retransmission"]]
    cross = cross.sort_values("slot", kind="stable").reset_index(drop=True)
    held = 0
    demand = None
    if others != "share":
        demand = _demand(every, frame, sorted(set(every["user"]) - followed, key=lambda u: (len(u), u)), n_slots,
                         mode=others)
        cross = cross.iloc[:0]
    elif wanted is not None and followed and hold_idle:
        had = np.zeros(n_slots, bool)
        had[wanted[wanted["user"].isin(followed)]["slot"].to_numpy(np.int64)] = True
        cross, held = _hold_over_idle(cross, had)
    series = {r: _mcs_series(frame, r, n_slots, rows=mac_log) for r in sorted(followed)}
    sinr = {}
    if channel == "selective" and mac_log:
        sinr = {r: _sinr_series(every, r, n_slots) for r in sorted(followed)}
        if demand is not None:
            others_sinr = [_sinr_series(every, u, n_slots) for u in demand.users]
            demand.sinr = None if any(x is None for x in others_sinr) else \
                np.stack(others_sinr) if others_sinr else np.zeros((0, n_slots), np.float32)
        if any(x is None for x in sinr.values()) or (demand is not None and demand.sinr is None):
            sinr = {}
            if demand is not None:
                demand.sinr = None
    return MeasuredCell(str(path), direction, log_tti, n_slots, first, chosen, cross, series, mac_log, held,
                        demand, "selective" if sinr else "flat", sinr)


def _demand(every: pd.DataFrame, scheduled: pd.DataFrame, users: list, n_slots: int, *,
            mode: str = "demand") -> Demand:
    """:class:`Demand` of ``users`` from a MAC log's rows (``every``: one per UE and TTI;
    ``scheduled``: those with subchannels); ``mode`` ``"flows"``: their demand as flows
    (:func:`as_flows`), ``"mixed"``: as recorded, the :func:`full_buffer` users full
    buffers. A user never given a new block gets row 1."""
    k = len(users)
    rows = np.ones((k, n_slots), np.int64)
    arrivals = np.zeros((k, n_slots))
    backlog = np.zeros((k, n_slots))
    full = np.zeros(k, bool)
    for i, u in enumerate(users):
        f = every[every["user"] == u]
        slot = f["slot"].to_numpy(np.int64)
        arrivals[i, slot] = f["arrivals_bytes"].to_numpy(np.float64)
        backlog[i, slot] = np.maximum(f["seen_bytes"].to_numpy(np.float64) - arrivals[i, slot], 0.0)
        if mode != "demand":
            had = np.zeros(n_slots, bool)
            had[slot] = f["wanted"].to_numpy(bool)
            had |= arrivals[i] > 0                  # bytes arriving at a decision are data there
            if mode == "flows":
                arrivals[i], backlog[i], full[i] = as_flows(arrivals[i], backlog[i], had)
            else:
                full[i] = full_buffer(had)
        try:
            rows[i] = _mcs_series(scheduled, u, n_slots, rows=True)
        except AirlinkError:
            pass
    return Demand(users, rows, arrivals, backlog, full, mode)


def _hold_over_idle(cross: pd.DataFrame, had: np.ndarray) -> tuple:
    """``(cross, n)``: the cross-traffic with the DCIs of every slot where ``had`` is False
    replaced by those of the latest slot where it is True (before the first: the first);
    ``n`` such slots. Unchanged when ``had`` is never True."""
    n_slots = len(had)
    if had.all() or not had.any():
        return cross, 0
    idx = np.arange(n_slots)
    src = np.maximum.accumulate(np.where(had, idx, -1))
    src[src < 0] = int(np.argmax(had))
    slot = cross["slot"].to_numpy()
    lo = np.searchsorted(slot, src, "left")
    counts = np.searchsorted(slot, src, "right") - lo
    first = np.cumsum(counts) - counts
    rows = np.arange(int(counts.sum())) - np.repeat(first, counts) + np.repeat(lo, counts)
    out = cross.iloc[rows].reset_index(drop=True)
    out["slot"] = np.repeat(idx, counts)
    return out, int((~had).sum())


def _nrscope_dcis(path: Path, direction: str) -> pd.DataFrame:
    from airlink.collectors import nrscope
    return nrscope.select_direction(nrscope.read(path), direction)


def is_mac_log(path) -> bool:
    """True for a Parquet file (airlink's MAC log); an NR-Scope log is CSV."""
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def mac_log_header(path) -> dict:
    """The ``meta`` of the ``airlink`` header of a MAC log written by ``airlink cell`` or
    ``airlink simulate`` (``{}`` without one)."""
    import json

    import pyarrow.parquet as pq
    try:
        raw = (pq.read_schema(path).metadata or {}).get(b"airlink", b"{}")
        meta = json.loads(raw).get("meta", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def mac_log_dcis(path, direction: str = "downlink") -> pd.DataFrame:
    """An airlink MAC log as DCIs (see the module notes), one row per UE and TTI: ``slot``
    (TTIs from the log's first), ``user``, ``prb_start``, ``prbs`` (0 when not scheduled),
    ``mcs`` (1-based rate-table row), ``tbs_bytes``, ``retransmission``, ``wanted`` (the UE
    had data at the TTI's decision: ``backlog_seen_bytes`` > 0 in a cell's log, ``backlog_bytes
    + served_bytes`` > 0 in the simulator's, or it got subchannels), ``sinr_db`` (the UE's
    wideband real SINR, dB; NaN where the log has none); ``attrs["tti_s"]`` the
    log's TTI (``"num/den"``), ``attrs["parameters"]`` the recorded cell's parameters."""
    from airlink.collectors import macparquet
    from airlink.core.units import parse_tti
    path = Path(path)
    if direction != "downlink":
        raise AirlinkError(f"{path}: an airlink MAC log holds the downlink only, not the {direction}")
    meta = mac_log_header(path)
    params = meta.get("parameters") or {}
    tti = meta.get("tti_s") or params.get("tti")
    if tti is None:
        raise AirlinkError(f"{path}: no TTI in the MAC log's airlink header (a log of airlink cell or "
                           f"airlink simulate has one)")
    tti = Fraction(str(tti)) if "/" in str(tti) else parse_tti(str(tti))
    frame = macparquet.read(path)
    for name in ("subchannels", "mcs", "tx_bytes", "harq_retransmissions"):
        if name not in frame.columns:
            raise AirlinkError(f"{path}: MAC log without column {name!r}")
    if "slot" in frame.columns:       # a replayed cell's log numbers its TTIs
        slot = frame["slot"].to_numpy(np.int64)
    else:
        ns = frame["time"].astype("int64").to_numpy()
        tti_ns = tti * 10**9
        slot = np.rint((ns - ns.min()) * tti_ns.denominator / tti_ns.numerator).astype(np.int64) \
            if len(ns) else np.zeros(0, np.int64)
    nsub = frame["prbs" if "prbs" in frame.columns else "subchannels"].to_numpy(np.int64)
    mcs = frame["mcs"].to_numpy(np.float64)
    if "backlog_seen_bytes" in frame.columns:       # what the cell's scheduler saw
        seen = frame["backlog_seen_bytes"].to_numpy(np.float64)
    else:                                            # the simulator's queue before the TTI's service
        seen = frame["backlog_bytes"].to_numpy(np.float64) + frame["served_bytes"].to_numpy(np.float64)
    rows = pd.DataFrame({"slot": slot, "user": frame["user"].astype(str).to_numpy(), "prbs": nsub,
                         "mcs": np.rint(np.nan_to_num(mcs)).astype(np.int64),
                         "tbs_bytes": frame["tx_bytes"].to_numpy(np.float64),
                         "retransmission": frame["harq_retransmissions"].to_numpy(np.int64) > 0,
                         "wanted": (np.nan_to_num(seen) > 0) | (nsub > 0), "seen_bytes": np.nan_to_num(seen),
                         "arrivals_bytes": np.nan_to_num(frame["arrivals_bytes"].to_numpy(np.float64))
                         if "arrivals_bytes" in frame.columns else np.zeros(len(frame)),
                         "sinr_db": frame["sinr_db"].to_numpy(np.float64) if "sinr_db" in frame.columns
                         else np.full(len(frame), np.nan)})
    rows = rows.sort_values(["slot"], kind="stable").reset_index(drop=True)
    # each TTI's DCIs side by side: one after another from PRB 0, in the log's user order
    # (measured_cell places the cross-traffic's again, without the followed UEs)
    rows["prb_start"] = rows.groupby("slot")["prbs"].cumsum() - rows["prbs"]
    rows.attrs.update(tti_s=f"{tti.numerator}/{tti.denominator}", parameters=params, source=str(path))
    return rows


def _per_ue(follow, n_users):
    if follow is None:
        return ["busiest"] * n_users
    if isinstance(follow, (str, int)):
        follow = [p for p in str(follow).split(",")]
    follow = list(follow)
    if len(follow) == 1:
        return follow * n_users
    if len(follow) != n_users:
        raise AirlinkError(f"follow RNTI: {len(follow)} entries for {n_users} UEs (give one, or one per UE)")
    return follow


def _mcs_series(frame, rnti, n_slots, *, rows: bool = False) -> np.ndarray:
    """The RNTI's MCS in every slot: that of its latest new transmission (the first one's
    before it). ``rows``: the MCS values are rate-table rows (every value names one)."""
    usable = frame["mcs"] > 0 if rows else frame["mcs"] < _MAX_NEW_MCS
    f = frame[(frame["user"] == rnti) & ~frame["retransmission"] & usable]
    if f.empty:
        raise AirlinkError(f"RNTI {rnti}: no new transmission to take an MCS from")
    slot, mcs = f["slot"].to_numpy(), f["mcs"].to_numpy(np.int64)
    pos = np.searchsorted(slot, np.arange(n_slots), "right") - 1
    return mcs[np.maximum(pos, 0)]


def _sinr_series(every, user, n_slots):
    """float32 (L,): a MAC log user's wideband real SINR (linear) in every slot, that of its
    latest row with one (the first one's before it); None when it has none."""
    f = every[(every["user"] == user) & np.isfinite(every["sinr_db"])]
    if f.empty:
        return None
    slot, db = f["slot"].to_numpy(), f["sinr_db"].to_numpy(np.float64)
    pos = np.searchsorted(slot, np.arange(n_slots), "right") - 1
    return (10 ** (db[np.maximum(pos, 0)] / 10)).astype(np.float32)


def table_mcs_indices(table) -> np.ndarray:
    """The 38.214 MCS index of every row of an NR rate table (rows named ``MCS<i> ...`` by
    :func:`airlink.sim.nr_rates.nr_rate_table`)."""
    return np.array([int(str(name).split()[0][3:]) for name in table.mcs], dtype=np.int64)


def rows_of_mcs(table, mcs) -> np.ndarray:
    """The rate table row (0-based) of recorded MCS indices: the highest row whose MCS index
    is not above it (row 0 below the table)."""
    return np.maximum(np.searchsorted(table_mcs_indices(table), np.asarray(mcs), "right") - 1, 0)


def measured_for(cfg: dict, scheduler, path, *, n_users: int, n_prbs: int, tti, follow=None,
                 direction: str = "downlink", start=None, others: str = "share",
                 channel: str = "flat") -> MeasuredCell:
    """:func:`measured_cell` for a cell of configuration ``cfg`` (checked with
    :func:`check_cell`); when a UE follows a recorded RNTI, ``cfg["link_adaptation"]`` becomes
    ``cqi`` (the recorded MCS is the base station's choice, its outer loop included)."""
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such cell log")
    if not path.is_file():
        raise AirlinkError(f"{path}: not a file (a cell log is an NR-Scope CSV or an airlink MAC log)")
    recorded = (mac_log_header(path).get("parameters") or {}) if is_mac_log(path) else None
    check_cell(cfg, scheduler, recorded=recorded, source=path)
    measured = measured_cell(path, n_users=n_users, n_prbs=n_prbs, tti=tti, follow=follow,
                             direction=direction, start=start, others=others, channel=channel)
    if any(f is not None for f in measured.follow):
        cfg["link_adaptation"] = "cqi"
    return measured


#: parameters a cell replaying an airlink MAC log must share with the recorded cell: they
#: decide what a subchannel is and what a rate-table row carries
SAME_AS_RECORDED = ("rate_table", "n_subchannels", "table_rates", "bandwidth_hz", "nr_bandwidth_mhz",
                    "nr_scs_khz", "nr_frequency_range")


def check_cell(cfg: dict, scheduler, *, recorded: dict | None = None, source=None) -> None:
    """What a cell replaying a log needs of its configuration (AirlinkError otherwise): for
    an NR-Scope log (``recorded`` None) an NR rate table with one subchannel per PRB; for an
    airlink MAC log the recorded cell's :data:`SAME_AS_RECORDED` parameters (``recorded``:
    the log's ``parameters``); and a scheduler of the compiled step that works per
    subchannel, a link adaptation that does not read the real SINR."""
    from airlink.sim.nr_numerology import max_prbs
    if recorded is not None:
        for key in SAME_AS_RECORDED:
            if key in recorded and recorded[key] != cfg.get(key):
                raise AirlinkError(f"{source}: the recorded cell has {key} {recorded[key]!r}, this one "
                                   f"{cfg.get(key)!r} (use the log's preset, {recorded.get('preset')!r})")
    else:
        if cfg["rate_table"] != "nr":
            raise AirlinkError(f"a cell replaying an NR-Scope log needs an NR preset (rate_table nr), "
                               f"not {cfg['preset']!r}: e.g. nr-tmobile-10mhz")
        n_rb = max_prbs(cfg["nr_bandwidth_mhz"], cfg["nr_scs_khz"], cfg["nr_frequency_range"])
        if int(cfg["n_subchannels"]) != n_rb:
            raise AirlinkError(f"n_subchannels: a cell replaying a log needs one subchannel per PRB "
                               f"({n_rb}), not {int(cfg['n_subchannels'])}")
    if getattr(scheduler, "kernel_id", None) not in (0, 1, 2, 3):
        raise AirlinkError("a cell replaying a log schedules PRBs with rr, maxcir, pf, mcpfs or lambda: "
                           "the backlog scheduler and schedulers given as Python classes cannot be kept "
                           "off the recorded PRBs")
    if cfg["link_adaptation"] == "ideal":
        raise AirlinkError("link_adaptation ideal reads the real SINR of every PRB, which a cell replaying "
                           "a log sets to 'unavailable' on the recorded PRBs: use cqi or olla")


def fading_shape(sinr) -> np.ndarray:
    """float32, the shape of ``sinr`` (..., C): each value over the mean of its last axis (the
    subchannels), so that a wideband SINR ``W`` times the shape has the mean ``W`` - the
    cell's MAC log's ``sinr_db`` (``10 log10`` of that mean) is kept exactly, up to float32
    rounding. Any per-TTI level of ``sinr`` (nominal SNR, shadowing, the fading's wideband
    power) divides out; what is left is how the subchannels differ."""
    sinr = np.asarray(sinr, np.float32)
    return (sinr / sinr.mean(axis=-1, keepdims=True)).astype(np.float32)


class FromLogRadio(Radio):
    """The cell's radio with a measured cell's cross-traffic and channels applied to its
    inputs (see the module notes); everything else is :class:`~airlink.sim.step.Radio`'s."""

    def __init__(self, cfg: dict, scheduler, *, measured: MeasuredCell, **kw):
        super().__init__(cfg, scheduler, **kw)
        self.measured = measured
        n_c = self.n_subchannels
        cross = measured.cross
        # the PRBs of every slot with cross-traffic (a row per such slot, sorted)
        self._busy_slots, inv = np.unique(cross["slot"].to_numpy(), return_inverse=True)
        mask = np.zeros((len(self._busy_slots), n_c + 1), np.int32)
        start = cross["prb_start"].to_numpy(np.int64)
        np.add.at(mask, (inv, start), 1)
        np.add.at(mask, (inv, start + cross["prbs"].to_numpy(np.int64)), -1)
        self._busy = np.cumsum(mask, axis=1)[:, :n_c] > 0
        self._row_of = {r: measured.table_rows(self.table, s) for r, s in measured.mcs_series.items()}
        self._cross_rows = measured.table_rows(self.table, cross["mcs"]) if len(cross) else None
        self._inner = self._others_shape = None
        self._started = False
        if measured.demand is not None:
            self._inner = self._inner_radio()
            if measured.demand.sinr is not None:
                self._others_shape = self._fading_by_slot()
        self.others_served = np.zeros(len(measured.demand.users) if measured.demand is not None else 0)

    # -- other users as demand ----------------------------------------------------------------
    def step(self, inp, i0: int, i1: int, out: dict, *, backlog=None) -> None:
        """:meth:`Radio.step`; with :attr:`MeasuredCell.demand`, the TTIs are run by a radio
        of the live UEs followed by the other users as simulated UEs (:meth:`_demand_step`)."""
        if self.measured.demand is None:
            return super().step(inp, i0, i1, out, backlog=backlog)
        for i in range(i0, i1):
            self._demand_step(inp, i, {name: a[i - i0:i - i0 + 1] for name, a in out.items()}, backlog)

    def _demand_step(self, inp, i: int, out: dict, backlog) -> None:
        """TTI ``inp.k0 + i`` with the other users as UEs ``U .. U+K-1`` of an inner radio of
        the same cell: their queues (kept by the inner radio's step, no buffer limit) get their
        recorded arrivals; the live UEs' inputs are this TTI's; the others' channel is
        :meth:`_others_channel`; block-error and tie-breaking draws are the inner radio's own
        (:meth:`_draw`). The live UEs'
        outputs are added to ``out``; the others' served bytes to :attr:`others_served`."""
        from airlink.sim.step import OUTPUTS
        d = self.measured.demand
        n_u = self.n_users
        k = inp.k0 + i
        slot = int(self.measured.slots_of(k, 1)[0])
        if not self._started:
            self._start_demand(slot)
        inner, x = self._inner, self._x
        j = self._drawn % _DRAWS
        if j == 0:
            self._draw()
        self._drawn += 1
        x.k0 = k
        x.real[0, :n_u], x.rep[0, :n_u] = inp.real[i], inp.rep[i]
        x.real[0, n_u:], x.rep[0, n_u:] = self._others_channel(k, slot)
        x.arrivals[0, n_u:] = d.arrivals[:, slot]
        x.u_err, x.perm = self._u_err[j:j + 1], self._perm[j:j + 1]
        row = self._row
        for a in row.values():
            a.fill(0)
        full = None
        if backlog is not None:
            full = inner.state["backlog"].copy()
            full[:n_u] = backlog
        inner.step(x, 0, 1, row, backlog=full)
        for name in OUTPUTS:
            out[name][0] += row[name][0, :n_u]
        self.others_served += row["served"][0, n_u:]

    def _inner_radio(self) -> Radio:
        """The inner radio: the cell's configuration with the other users added (UEs ``U ..``)."""
        from airlink.sim.engine import make_scheduler
        n = self.n_users + len(self.measured.demand.users)
        cfg = dict(self.cfg, n_users=n)
        return Radio(cfg, make_scheduler(self.cfg["scheduler"], cfg), n_users=n,
                     n_subchannels=self.n_subchannels, n_tti=self.n_tti, live=True)

    def _fading_by_slot(self) -> np.ndarray:
        """float32 (L, K, C): the other users' fading shape (:func:`fading_shape`) at every
        slot of the log, TTIs ``0 .. L-1`` of the inner radio's channel model; made before
        the live loop starts and repeating with the log (the slot after the last is slot 0,
        as for the recorded wideband SINR)."""
        n_slots, n_u = self.measured.n_slots, self.n_users
        shape = np.empty((n_slots, len(self.measured.demand.users), self.n_subchannels), np.float32)
        for k0 in range(0, n_slots, _SHAPE_TTIS):
            n = min(_SHAPE_TTIS, n_slots - k0)
            shape[k0:k0 + n] = fading_shape(self._inner.channel.fading_chunk(k0, n)[:, n_u:, :])
        return shape

    def _start_demand(self, slot: int) -> None:
        """The inner radio's input buffers, the others' per-slot SINR and their queues at
        ``slot``."""
        from airlink.sim.step import ChunkInputs
        d = self.measured.demand
        n = self.n_users + len(d.users)
        inner = self._inner
        self._started = True
        inner.state["backlog"][self.n_users:] = d.backlog[:, slot]
        inner.full[self.n_users:] = d.full            # the kernel's full buffers: always data
        inner.state["full_u"][self.n_users:] = d.full
        # (L, K): each other user's linear SINR per slot, the threshold of its recorded row
        self._others_lin = self.thr_lin[np.clip(d.rows - 1, 0, len(self.thr_lin) - 1)].T.copy()
        real = np.zeros((1, n, self.n_subchannels), np.float32)
        none = np.zeros((0, n), np.float32)
        self._x = ChunkInputs(-1, 1, real, real.copy(), np.zeros((1, n)), None, None, none, none)
        self._row = inner.new_outputs(1)
        self._drawn = 0

    def _others_channel(self, k: int, slot: int) -> tuple:
        """``(real, rep)``: the other users' real and reported SINR (float32 (K, C), linear)
        in TTI ``k`` (log slot ``slot``). A flat channel: the threshold of their recorded row
        on every subchannel. A selective one: their recorded wideband SINR of the slot times
        their fading shape there (:meth:`_fading_by_slot`), the reported one both
        ``csi_delay_tti`` slots earlier, as the cell's own channel is (:meth:`inputs` does
        the same for the live UEs)."""
        d = self.measured.demand
        if d.sinr is None:
            lin = self._others_lin[slot][:, None]
            return lin, lin
        before = int(self.measured.slots_of(k - self.csi_delay, 1)[0])
        shape = self._others_shape
        return d.sinr[:, slot, None] * shape[slot], d.sinr[:, before, None] * shape[before]

    def _draw(self) -> None:
        """The inner radio's next :data:`_DRAWS` TTIs of block-error thresholds and
        tie-breaking orders (:meth:`Radio.draws`)."""
        self._u_err, self._perm = self._inner.draws(_DRAWS)

    def busy_prbs(self, k0: int, n: int) -> np.ndarray:
        """bool (n, subchannels): the PRBs the cross-traffic holds in TTIs ``k0 .. k0+n-1``."""
        idx = self.measured.slots_of(k0, n)
        out = np.zeros((n, self.n_subchannels), bool)
        if len(self._busy_slots):
            pos = np.minimum(np.searchsorted(self._busy_slots, idx), len(self._busy_slots) - 1)
            hit = self._busy_slots[pos] == idx
            out[hit] = self._busy[pos[hit]]
        return out

    def inputs(self, k0: int, n: int, *, mac_log: bool = True):
        inp = super().inputs(k0, n, mac_log=mac_log)
        real = inp.real.copy()
        rep = real if inp.rep is inp.real else inp.rep.copy()
        idx = self.measured.slots_of(k0, n)
        selective = self.measured.channel == "selective"
        if selective:       # the shapes of this chunk's channel and of the one it reports
            before = self.measured.slots_of(k0 - self.csi_delay, n)
            shape_real, shape_rep = fading_shape(inp.real), fading_shape(inp.rep)
        for u, rnti in enumerate(self.measured.follow):
            if rnti is None:
                continue
            if selective:
                lin, lin_rep = self.measured.sinr_series[rnti][idx], self.measured.sinr_series[rnti][before]
                real[:, u, :] = lin[:, None] * shape_real[:, u, :]
                rep[:, u, :] = lin_rep[:, None] * shape_rep[:, u, :]
            else:
                lin = lin_rep = self.thr_lin[self._row_of[rnti][idx]]
                real[:, u, :] = lin[:, None]
                rep[:, u, :] = lin[:, None]
            if mac_log:
                inp.sinr_db[:, u] = 10 * np.log10(lin)
                inp.sinr_rep_db[:, u] = 10 * np.log10(lin_rep)
        busy = np.broadcast_to(self.busy_prbs(k0, n)[:, None, :], real.shape)
        real[busy] = MASKED
        rep[busy] = MASKED
        inp.real, inp.rep = real, rep
        return inp

    # -- the MAC log ------------------------------------------------------------------------
    def measured_columns(self, cols: dict, out: dict, k0: int, start_ns: int) -> dict:
        """The live rows ``cols`` (:meth:`mac_columns`) with the cross-traffic DCIs of the
        same TTIs as rows of their own, in time order, and the columns ``cross_traffic``,
        ``prbs``, ``slot``, ``mcs_index``, ``tbs_bytes`` and ``retransmission``."""
        n_u = self.n_users
        n = out["served"].shape[0]
        cols = dict(cols)
        cols["slot"] = np.repeat(np.arange(k0, k0 + n, dtype=np.int64), n_u)
        cols["prbs"] = cols["subchannels"]
        cols["cross_traffic"] = np.zeros(n * n_u, bool)
        cols["mcs_index"] = np.full(n * n_u, -1, np.int64)
        blocks, retx = out["blocks"].ravel(), out["retx"].ravel()
        cols["tbs_bytes"] = cols["tx_bytes"]
        cols["retransmission"] = (blocks > 0) & (retx == blocks)
        tti, rows = self.measured.cross_rows(k0, n)
        if not len(rows):
            return cols
        c = self.measured.cross.iloc[rows]
        m = len(rows)
        ns = self.tti * 10**9
        tbs = c["tbs_bytes"].to_numpy(np.float64)
        extra = {name: np.zeros(m, a.dtype) if a.dtype != object else np.empty(m, object)
                 for name, a in cols.items()}
        for name, a in extra.items():
            if a.dtype.kind == "f":
                a[:] = np.nan
        extra.update({
            "time": int(start_ns) + (tti * ns.numerator) // ns.denominator,
            "user": c["user"].to_numpy(object), "slot": tti,
            "subchannels": c["prbs"].to_numpy(np.int64), "prbs": c["prbs"].to_numpy(np.int64),
            "mcs": (self._cross_rows[rows] + 1).astype(np.float64),
            "mcs_index": np.full(m, -1, np.int64) if self.measured.mcs_rows else c["mcs"].to_numpy(np.int64),
            "served_bytes": tbs, "capacity_bytes": tbs, "tx_bytes": tbs, "tbs_bytes": tbs,
            "harq_retransmissions": c["retransmission"].to_numpy(np.int64),
            "retransmission": c["retransmission"].to_numpy(bool),
            "assigned_rate_bps": tbs * 8 / self.tti_s, "cross_traffic": np.ones(m, bool)})
        order = np.argsort(np.concatenate([cols["slot"], tti]), kind="stable")
        return {name: np.concatenate([cols[name], extra[name].astype(cols[name].dtype, copy=False)])[order]
                for name in cols}
