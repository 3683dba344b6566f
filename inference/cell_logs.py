"""Inference on all-user scheduling logs (e.g. NR-Scope's per-slot DCIs of every RNTI of a cell).

A log of every user's allocations is the ground truth of how a real scheduler shared a
cell. :func:`analyze_cell` measures, from a ``mac`` frame with one row per allocation
(``time``, ``user``, ``prbs``; optional ``slot``, ``mcs``, ``tbs_bytes``, ``retransmission``):

- per user: allocations, PRBs, **resource fraction** ``rho_m = PRB_m / sum PRB``, new bytes,
  mean MCS, **HARQ retransmission ratio** (retransmitted allocations / allocations),
  **inter-service gaps** (time between consecutive slots in which the user was served:
  mean, std, CoV = std/mean, max);
- per window (default 1 s) over the users **active in that window** (at least one
  allocation): Jain's index ``(sum y)^2 / (n sum y^2)`` and the fairness gap
  ``(max y - min y) / min y`` of their PRB totals ``y``, and the cell's **PRB utilisation**
  ``sum PRB / (cell PRBs * slots in the window)``;
- a **scheduler verdict with its evidence**: does the allocation follow the channel (a
  user's PRB share against its MCS, both centred within the window, Spearman), demand
  (backlog proxy: allocations that leave PRBs unused while no other user is scheduled in
  the slot), or turns (equal shares: Jain's index; regular gaps) - or "cannot tell" with the
  reason when the cell was rarely full enough for users to compete.

Every metric is the one in :mod:`airlink.inference.fairness`. Assumptions: the cell's PRBs
are the highest PRB any allocation reaches unless given (``cell_prbs``); a decoder such as
NR-Scope misses some DCIs, so utilisation and shares are lower bounds of what was sent;
the channel of a user is seen only when it is served (its MCS), never in between.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd

from airlink.core import bounds as B
from airlink.core.errors import AirlinkError, SchemaError, frame_source
from airlink.core.units import parse_duration

from .allocations import airlink_allocations
from .fairness import fairness_gap, gap_stats, jain_index, resource_fractions, retransmission_ratios, service_gaps

#: a slot counts as "full" when its allocations reach this share of the cell's PRBs
FULL_SLOT = 0.9
#: windows with at least this utilisation and two active users count as contended
CONTENDED_WINDOW = 0.5
#: fewest contended windows for a verdict
MIN_CONTENDED_WINDOWS = 10


@dataclass
class CellAnalysis:
    """Result of :func:`analyze_cell`. ``users`` and ``windows`` are frames; ``summary`` and
    ``verdict`` are dicts (``verdict["label"]``, ``verdict["confident"]``, ``verdict["reasons"]``,
    ``verdict["evidence"]``)."""
    users: pd.DataFrame
    windows: pd.DataFrame
    summary: dict
    verdict: dict
    params: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.users

    def to_dict(self) -> dict:
        users = self.users.replace({np.inf: None}).to_dict(orient="records")
        return {"params": self.params, "summary": self.summary, "verdict": self.verdict, "users": users}


def _slots(frame: pd.DataFrame, tti_s: Fraction) -> np.ndarray:
    if "slot" in frame.columns:
        return frame["slot"].to_numpy(np.int64)
    t = frame["time"].array.asi8
    ns = tti_s * 10**9
    return ((t - t.min()) * ns.denominator) // ns.numerator


def default_cell_prbs(frame: pd.DataFrame, slot: np.ndarray, given=None) -> int:
    """The carrier's PRBs when not given: the highest PRB an allocation reaches
    (``prb_start + prbs``, a decoded log); else ``given`` (``attrs["cell_prbs"]``: the cell
    a MAC log airlink wrote was made with) but never fewer than the most PRBs allocated in
    one slot, which is the answer when neither is known (a slot's allocations hold
    distinct PRBs)."""
    if "prb_start" in frame.columns:
        return int((frame["prb_start"] + frame["prbs"]).max())
    _, at = np.unique(slot, return_inverse=True)
    busiest = int(np.bincount(at.ravel(), weights=frame["prbs"].to_numpy(float)).max())
    return max(int(given or 0), busiest)


def refuse_one_device(frame: pd.DataFrame, src: str) -> None:
    """An iCellSpeed log (``carrier`` rows with ``tbs_bps``) holds one phone's carriers, one row
    per second: no other user, no slot. Analyses of how a cell was shared need a log of every
    user's allocations per slot; say so instead of asking for a slot length."""
    if "carrier" in frame.columns and "tbs_bps" in frame.columns:
        raise AirlinkError(f"{src}: one phone's carriers, a row per carrier and second: not a log of every "
                           f"user's allocations per slot (an NR-Scope DCI log, or the mac.parquet of airlink "
                           f"simulate or airlink cell)")


def check_cell_prbs(frame: pd.DataFrame, slot: np.ndarray, prbs: np.ndarray, cell_prbs: int, src: str) -> None:
    """A cell size given for a log must hold its allocations (``prbs`` per row, ``slot`` per
    row): every allocation's last PRB (``prb_start + prbs``, when the log has PRB positions)
    and every slot's PRBs. A smaller cell would count slots above 100 % and shares of PRBs
    that do not exist."""
    prbs = np.asarray(prbs, float)
    if "prb_start" in frame.columns:
        end = frame["prb_start"].to_numpy(float) + prbs
        if (end > cell_prbs).any():
            i = int(np.nanargmax(end))
            raise AirlinkError(f"{src}: user {frame['user'].iloc[i]} holds PRBs {int(frame['prb_start'].iloc[i])}-"
                               f"{int(end[i]) - 1} at {frame['time'].iloc[i]}, beyond a cell of {cell_prbs} PRBs "
                               f"(the log's allocations reach {int(end[i])} PRBs)")
    _, at = np.unique(np.asarray(slot), return_inverse=True)
    most = float(np.bincount(at.ravel(), weights=prbs).max()) if prbs.size else 0.0
    if most > cell_prbs:
        raise AirlinkError(f"{src}: {most:g} PRBs allocated in one slot, more than a cell of {cell_prbs} PRBs holds")


def _spearman_centred(share: pd.Series, mcs: pd.Series, window: pd.Series) -> float:
    """Spearman correlation of share and MCS after removing each window's mean of both."""
    s = share - share.groupby(window).transform("mean")
    m = mcs - mcs.groupby(window).transform("mean")
    ok = s.notna() & m.notna()
    if ok.sum() < 5 or s[ok].std() == 0 or m[ok].std() == 0:
        return float("nan")
    return float(s[ok].rank().corr(m[ok].rank()))


def analyze_cell(frame: pd.DataFrame, *, window=B.CELL_WINDOW, tti=None, cell_prbs: int | None = None,
                 source: str | None = None) -> CellAnalysis:
    """Fairness, utilisation, gaps and a scheduler verdict from an all-user allocation log.

    Parameters
    ----------
    frame : DataFrame
        ``mac`` frame, one row per allocation of one direction (filter uplink grants out first),
        or a MAC log airlink wrote, read as :func:`~airlink.inference.allocations.airlink_allocations`
        says (``subchannels`` are its PRBs).
    window : str or Timedelta
        Window over which active users, shares, Jain's index and utilisation are taken (1 s).
    tti : str or Fraction, optional
        Slot length; default ``frame.attrs["tti_s"]`` (the reader's slot timing).
    cell_prbs : int, optional
        PRBs of the carrier; default :func:`default_cell_prbs`.
    """
    src = source or frame_source(frame, "log")
    refuse_one_device(frame, src)
    frame = airlink_allocations(frame)
    for col in ("time", "user", "prbs"):
        if col not in frame.columns:
            raise SchemaError(f"{src}: an all-user log needs column {col!r} (or airlink's 'subchannels') "
                              f"(it has {', '.join(map(str, frame.columns[:16]))})")
    if frame.empty:
        raise AirlinkError(f"{src}: no allocations to analyse")
    if tti is None:
        if not frame.attrs.get("tti_s"):
            raise AirlinkError(f"{src}: the slot length is unknown; give the TTI")
        tti_s = Fraction(frame.attrs["tti_s"])
    else:
        tti_s = Fraction(parse_duration(tti, default_unit="ms")) if not isinstance(tti, Fraction) else tti
    win_s = Fraction(parse_duration(window)) if not isinstance(window, pd.Timedelta) \
        else Fraction(int(window.value), 10**9)
    per_win = int(win_s / tti_s)
    if per_win < 1:
        raise AirlinkError(f"{src}: window {window} is shorter than one slot")
    f = frame.assign(_slot=_slots(frame, tti_s), user=frame["user"].astype(str))
    f = f[f["prbs"] > 0]
    if f.empty:
        raise AirlinkError(f"{src}: no allocations to analyse (no row with PRBs > 0)")
    if cell_prbs is None:
        cell_prbs = default_cell_prbs(f, f["_slot"].to_numpy(), frame.attrs.get("cell_prbs"))
    else:
        check_cell_prbs(f, f["_slot"].to_numpy(), f["prbs"].to_numpy(float), int(cell_prbs), src)
    s0 = int(f["_slot"].min())
    n_slots = int(f["_slot"].max()) - s0 + 1
    B.check_budget(n_slots, B.MAX_GRID_POINTS, f"{src}: {float(n_slots * tti_s):.6g} s of "
                   f"{float(tti_s) * 1000:g} ms slots need", "slots (a damaged timestamp?)")
    f["_rel"] = f["_slot"] - s0
    f["_win"] = f["_rel"] // per_win
    retx = f["retransmission"].astype(bool) if "retransmission" in f.columns else pd.Series(False, index=f.index)
    new_bytes = f["tbs_bytes"].where(~retx, 0.0) if "tbs_bytes" in f.columns else pd.Series(np.nan, index=f.index)
    f = f.assign(_retx=retx.to_numpy(), _new=new_bytes.to_numpy())

    # -- per user --------------------------------------------------------------------------------
    users = sorted(f["user"].unique(), key=lambda u: -int((f["user"] == u).sum()))
    agg = f.groupby("user").agg(allocations=("prbs", "size"), prbs=("prbs", "sum"), new_bytes=("_new", "sum"),
                                retransmissions=("_retx", "sum"), slots=("_rel", "nunique"))
    agg = agg.loc[users]
    agg["mcs_mean"] = f.groupby("user")["mcs"].mean().loc[users] if "mcs" in f.columns else np.nan
    agg["resource_fraction"] = resource_fractions(agg["prbs"].to_numpy(float))
    agg["retransmission_ratio"] = retransmission_ratios(agg["retransmissions"].to_numpy(float),
                                                        agg["allocations"].to_numpy(float))
    gaps = {}
    for u, g in f.groupby("user"):
        served = np.zeros(n_slots)
        served[g["_rel"].to_numpy()] = 1.0
        gaps[u] = gap_stats(service_gaps(served, tti_s=float(tti_s))[0])
    for key, name in (("mean", "gap_mean_s"), ("cov", "gap_cov"), ("max", "gap_max_s")):
        agg[name] = [gaps[u][key] for u in users]
    agg = agg.reset_index()

    # -- per window ------------------------------------------------------------------------------
    uw = f.groupby(["_win", "user"]).agg(prbs=("prbs", "sum"),
                                         mcs=("mcs", "mean") if "mcs" in f.columns else ("prbs", "size"))
    rows = []
    for w, g in uw.groupby(level=0):
        y = g["prbs"].to_numpy(float)
        slots_in = min(per_win, n_slots - int(w) * per_win)
        rows.append({"window": int(w), "start_s": float(int(w) * per_win * tti_s), "active_users": int(y.size),
                     "prbs": float(y.sum()), "utilization": float(y.sum() / (cell_prbs * slots_in)),
                     "jain_index": jain_index(y) if y.size >= 2 else np.nan,
                     "fairness_gap": fairness_gap(y) if y.size >= 2 else np.nan})
    windows = pd.DataFrame(rows)

    # -- cell --------------------------------------------------------------------------------------
    per_slot = f.groupby("_rel").agg(prbs=("prbs", "sum"), users=("user", "nunique"))
    alone = f["_rel"].map(per_slot["users"]) == 1
    spare = alone & (f["prbs"] < FULL_SLOT * cell_prbs)
    summary = {
        "source": src, "cell_prbs": int(cell_prbs), "tti_s": float(tti_s), "window_s": float(win_s),
        "slots": n_slots, "duration_s": float(n_slots * tti_s), "users": len(users),
        "allocations": int(len(f)),
        "prb_utilization": float(f["prbs"].sum() / (cell_prbs * n_slots)),
        "slots_with_allocation": float(len(per_slot) / n_slots),
        "full_slots": float((per_slot["prbs"] >= FULL_SLOT * cell_prbs).sum() / n_slots),
        "slots_with_several_users": float((per_slot["users"] > 1).sum() / max(len(per_slot), 1)),
        "allocations_leaving_prbs_unused_alone": float(spare.mean()),
        "harq_retransmission_ratio": float(f["_retx"].mean()),
        "windows_with_2_users": int((windows["active_users"] >= 2).sum()) if len(windows) else 0,
        "jain_index_median": _median(windows, "jain_index"),
        "fairness_gap_median": _median(windows, "fairness_gap"),
    }
    verdict = _verdict(uw, windows, summary, agg, has_mcs="mcs" in f.columns)
    return CellAnalysis(agg, windows, summary, verdict,
                        {"window_s": float(win_s), "tti_s": float(tti_s), "cell_prbs": int(cell_prbs)})


def _median(windows: pd.DataFrame, column: str) -> float:
    """Median of a window column over the windows that have a finite value (those with two or
    more active users), NaN when none has: no numpy warning about an empty slice."""
    if column not in windows.columns:
        return float("nan")
    v = windows[column].to_numpy(float)
    v = v[np.isfinite(v)]
    return float(np.median(v)) if v.size else float("nan")


def _verdict(uw, windows, summary, users, *, has_mcs: bool) -> dict:
    """What the allocation follows, with the numbers that say so, or why it cannot be told."""
    active = uw.index.get_level_values(0).map(windows.set_index("window")["active_users"])
    busy = uw.index.get_level_values(0).map(windows.set_index("window")["utilization"])
    win = pd.Series(uw.index.get_level_values(0), index=uw.index)
    share = uw["prbs"] / uw.groupby(level=0)["prbs"].transform("sum")
    several = np.asarray(active >= 2)
    keep = several & np.asarray(busy >= CONTENDED_WINDOW)
    contended = windows[(windows["active_users"] >= 2) & (windows["utilization"] >= CONTENDED_WINDOW)]

    def rho(mask):
        return _spearman_centred(share[mask], uw["mcs"][mask], win[mask]) if has_mcs and mask.any() \
            else float("nan")
    rho_cont = rho(keep)
    evidence = {
        "contended_windows": int(len(contended)),
        "prb_utilization": summary["prb_utilization"],
        "full_slots": summary["full_slots"],
        "slots_with_several_users": summary["slots_with_several_users"],
        "allocations_leaving_prbs_unused_alone": summary["allocations_leaving_prbs_unused_alone"],
        "share_vs_mcs_spearman_all_windows": rho(several),
        "share_vs_mcs_spearman_contended": rho_cont,
        "jain_index_contended_median": float(contended["jain_index"].median()) if len(contended) else float("nan"),
        "gap_cov_median": float(users["gap_cov"].median()),
    }
    reasons = []
    if summary["allocations_leaving_prbs_unused_alone"] > 0.5:
        reasons.append(f"{summary['allocations_leaving_prbs_unused_alone'] * 100:.0f} % of allocations leave PRBs "
                       f"unused with no other user in the slot: allocation sizes follow each user's demand "
                       f"(backlog), not a sharing rule")
    if len(contended) < MIN_CONTENDED_WINDOWS:
        reasons.append(f"only {len(contended)} window(s) with two or more active users and utilisation >= "
                       f"{CONTENDED_WINDOW:.0%} (need {MIN_CONTENDED_WINDOWS}): users rarely competed for PRBs "
                       f"(PRB utilisation {summary['prb_utilization'] * 100:.1f} %, full slots "
                       f"{summary['full_slots'] * 100:.2f} %)")
        demand = summary["allocations_leaving_prbs_unused_alone"] > 0.5
        return {"label": "cannot tell", "confident": False, "follows": "demand" if demand else None,
                "reasons": reasons, "evidence": evidence}
    jain = evidence["jain_index_contended_median"]
    if jain == jain and jain >= 0.9:
        # shares within a few per cent of each other: which user got the odd extra PRB may rank
        # with its MCS (a user in a deep fade misses a PRB), but that is no sharing rule
        why = f"active users get near-equal PRBs (median Jain {jain:.2f}) whatever their MCS (Spearman " \
              f"{rho_cont:.2f}"
        why += ")" if rho_cont != rho_cont or abs(rho_cont) < 0.3 else \
            ": a rank correlation of such small differences is no evidence of channel-following)"
        return {"label": "equal shares (turns)", "confident": True, "follows": "turns",
                "reasons": reasons + [why], "evidence": evidence}
    if rho_cont == rho_cont and rho_cont >= 0.5:
        return {"label": "channel-aware (share follows MCS)", "confident": True, "follows": "channel",
                "reasons": reasons + [f"in contended windows a user's PRB share rises with its MCS "
                                      f"(Spearman {rho_cont:.2f}) and the shares differ (median Jain "
                                      f"{jain:.2f} < 0.9)"], "evidence": evidence}
    reasons.append(f"neither channel-following (Spearman {rho_cont:.2f} < 0.5) nor equal shares "
                   f"(median Jain {jain:.2f} < 0.9) is clear")
    return {"label": "cannot tell", "confident": False, "follows": None, "reasons": reasons, "evidence": evidence}
