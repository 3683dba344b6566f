"""Frame-level analyses: factor ranking (Mattar et al. Fig. 3, Tables 1-2), backlog dependence
(Fig. 2), fairness and scheduling jitter over a run and per window.

Every frame first goes through :func:`airlink.inference.frames.prepare` (one regular grid
made from its timestamps; ``resolution``, ``time_column`` and ``by`` are passed on), so
lags and windows are in time, never in rows. Per-user frames (a ``user`` column, as the
simulator's MAC log, or the ``by`` keys) are pooled: every user's series is laid end to end
with ``max_lag`` NaN samples between them, so the joint histograms sum over users while no
pair spans two users, and all users share one set of bin edges.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from airlink.core import bounds as B
from airlink.core.errors import AirlinkError, frame_source

from .results import BacklogReport, FairnessReport, JitterReport

from . import fairness as F
from .allocations import device_groups
from .frames import column, pooled_series, prepare, sample_period_s, users_of, wide_many
from .information import discretize
from .lagscan import lag_scan
from .surrogates import peak_significance

CHANNEL_COLUMNS = ("sinr_reported_db", "sinr_db", "snr_db", "cqi", "ecio_db", "rsrq_db", "rsrp_dbm",
                   "mcs")
RATE_COLUMNS = ("assigned_rate_bps", "served_bytes", "tbs_bps", "throughput_bps", "prbs",
                "subchannels")
#: an allocation log whose cell granted anything in fewer of its slots than this was rarely
#: contended (fairness_report's caution)
CONTENDED_SLOTS = 0.5
SENDING_COLUMNS = ("sending_rate_bps", "arrivals_bytes")
#: the columns :func:`backlog_dependence` may choose among besides its backlog column
BACKLOG_READ = (*RATE_COLUMNS, *CHANNEL_COLUMNS, *SENDING_COLUMNS)
THROUGHPUT_COLUMNS = ("served_bytes", "throughput_bps", "assigned_rate_bps", "tbs_bps", "dl_bitrate_bps", "prbs",
                      "subchannels")


def _max_lag_samples(max_lag, period: float) -> int:
    """Grid steps in a frame-level ``max_lag``: a duration (``"10s"``, ``"200ms"``, a
    Timedelta); a bare number is refused, since it could mean seconds or steps."""
    if max_lag is None:
        return 0
    if isinstance(max_lag, pd.Timedelta):
        max_lag = f"{max_lag.total_seconds()}s"
    if not isinstance(max_lag, str):
        raise AirlinkError(f"max lag {max_lag!r}: give a duration with a unit (e.g. '10s', '200ms')")
    if isinstance(max_lag, str):
        from airlink.core.units import parse_duration
        seconds = float(parse_duration(max_lag))
        if not np.isfinite(period) or period <= 0:
            raise AirlinkError(f"max lag {max_lag!r} is a duration but the frame's sample period is unknown")
        return int(round(seconds / period))
    return int(max_lag)


def _framed(frame: pd.DataFrame, resolution=None, time_column=None, by=None, columns=(),
            sparse: bool = False) -> pd.DataFrame:
    """The frame on its regular grid (:func:`~airlink.inference.frames.prepare`), the named
    columns checked; ``sparse`` for an analysis that reads it through ``wide_many`` only."""
    return prepare(frame, resolution=resolution, time_column=time_column, by=by,
                   columns=[c for c in columns if c], sparse=sparse)


_per_user_period = sample_period_s


def rank_factors(frame: pd.DataFrame, *, target: str, factors, max_lag=B.NMI_MAX_LAG, bins=B.NMI_BINS,
                 binning: str = "uniform", normalization: str = "x", surrogates: int = B.NMI_SURROGATES,
                 bootstrap: int = B.NMI_BOOTSTRAP, alpha: float = B.NMI_ALPHA, user=None, seed: int = 0,
                 progress: bool = False, resolution=None, time_column=None, by=None,
                 curves: bool = False) -> pd.DataFrame:
    """Peak ``I_N(target; factor; d)`` over ``|d| <= max_lag`` per factor, with p-value,
    threshold, bias-corrected value and bootstrap interval, sorted by peak (largest first).

    The frame is first put on a regular grid of ``resolution`` (default: the median spacing
    of its timestamps; see :func:`~airlink.inference.frames.prepare`, which also takes
    ``time_column`` and ``by``); missing grid steps drop their pairs. ``max_lag`` is a duration
    (``"60s"``, a Timedelta). Columns of the result: ``factor, peak_nmi,
    lag`` (samples), ``lag_s`` (seconds), ``at_edge`` (the peak sits at ``|lag| = max_lag``:
    the true peak may lie beyond the range scanned), ``p_value, threshold, bias_corrected,
    ci_low, ci_high, n_pairs``. A positive lag means the factor leads the target.
    ``curves=True`` also keeps each factor's whole scan, ``attrs["curves"][factor] =
    {"lag_s": [...], "nmi": [...]}`` (the scan whose peak is the table's ``peak_nmi``).

    "Cannot tell" (column ``cannot_tell``, the reason; ``p_value``/``threshold`` NaN and
    ``significant`` False): fewer pairs at the peak lag than ``min_pairs``, 5 per occupied
    cell of the joint histogram (:mod:`~airlink.inference.surrogates`), or a target with one
    value in every sample (no entropy to explain: a static run's speed). Pooled series (users
    or ``by`` groups) each need at least :func:`min_group_samples` target values; smaller
    groups are left out of the pooled estimate and its surrogate test, named in
    ``attrs["dropped_groups"]`` - a group of one row shifted into another group's time only
    adds noise to the null. Each factor's surrogates and bootstrap draw from their own
    stream, seeded from ``(seed, factor name)``, so a factor's result does not depend on
    which other factors are ranked or in what order.
    """
    factors = list(factors)
    for bound, value in ((B.BINS, bins), (B.SURROGATES, surrogates), (B.BOOTSTRAP, bootstrap), (B.SEED, seed)):
        bound.check(value)
    frame = _framed(frame, resolution, time_column, by, [target, *factors])
    if not factors:
        raise AirlinkError("give at least one factor")
    period = _per_user_period(frame)
    n_per_user = frame.shape[0] // max(len(users_of(frame)), 1)
    D = max(0, min(_max_lag_samples(max_lag, period), max(n_per_user - 2, 0)))
    dropped = []
    if "user" in frame.columns and user is None and len(users_of(frame)) > 1:
        counts = column(frame, target).notna().groupby(frame["user"].astype(str).to_numpy()).sum()
        need = min_group_samples(int(counts.max()))
        small = [str(u) for u, c in counts.items() if c < need]
        if len(small) == len(counts):
            raise AirlinkError(f"every group has fewer than {need} values of {target!r} "
                               f"({', '.join(f'{u}: {int(c)}' for u, c in counts.items())}): cannot tell")
        if small:
            dropped = [dict(group=u, samples=int(counts[u]), needed=need) for u in small]
            attrs = dict(frame.attrs)
            frame = frame[~frame["user"].astype(str).isin(small)]
            frame.attrs.update(attrs)
    series = pooled_series(frame, [target] + factors, user=user, gap=D)
    n = len(series[target])
    B.check_budget((surrogates + bootstrap + 1) * n * (2 * D + 1) * len(factors), B.MAX_NMI_WORK,
                   f"(surrogates {surrogates} + bootstrap {bootstrap} + 1) x {n} samples x {2 * D + 1} lags x "
                   f"{len(factors)} factor(s) make", "histogram updates")
    x = discretize(series[target], bins=bins, binning=binning)
    target_values = np.unique(series[target][np.isfinite(series[target])])
    # a target with one value has no entropy: I / H(X) is undefined, not 0 and not 1
    constant = (f"{target} takes one value ({target_values[0]:g}) in every sample: there is nothing for a "
                f"factor to explain" if target_values.size == 1 else None)
    rows, scans = [], {}
    sample_period = period if np.isfinite(period) else None
    for k, f in enumerate(factors):
        y = discretize(series[f], bins=bins, binning=binning)
        B.check_budget(x.n_levels * y.n_levels, B.MAX_JOINT_BINS,
                       f"binning {binning!r}: {target} in {x.n_levels} and {f} in {y.n_levels} levels need",
                       "joint-histogram cells")
        scan = lag_scan(x, y, max_lag=D, normalization=normalization, sample_period=sample_period)
        if curves:
            scans[f] = {"lag_s": [float(v) for v in scan.lag_s], "nmi": [float(v) for v in scan.values.to_numpy()]}
        sig = peak_significance(x, y, max_lag=D, normalization=normalization, sample_period=sample_period,
                                surrogates=surrogates, bootstrap=bootstrap, alpha=alpha,
                                seed=factor_seed(seed, f), progress=progress, scan=scan)
        d = sig.to_dict()
        rows.append(dict(factor=f, peak_nmi=d["peak_nmi"], lag=d["lag"], lag_s=d["lag_s"],
                         at_edge=bool(D > 0 and abs(int(d["lag"])) == D),
                         p_value=np.nan if constant else d["p_value"], threshold=np.nan if constant else d["threshold"],
                         bias_corrected=d["bias_corrected"], ci_low=d["ci_low"],
                         ci_high=d["ci_high"], n_pairs=d["n_pairs"], min_pairs=d["min_pairs"],
                         significant=d["significant"] and not constant,
                         cannot_tell=constant or d["cannot_tell"]))
    out = pd.DataFrame(rows).sort_values("peak_nmi", ascending=False, kind="stable")
    out.attrs.update(dropped_groups=dropped)
    out.attrs.update(target=target, max_lag=D, sample_period_s=period, bins=bins, binning=binning,
                     normalization=normalization, surrogates=surrogates,
                     empty_bins=frame.attrs.get("empty_bins"), merged_rows=frame.attrs.get("merged_rows"),
                     users=[str(u) for u in users_of(frame)] if "user" in frame.columns else [],
                     **({"curves": scans} if curves else {}))
    return out.reset_index(drop=True)


def factor_seed(seed: int, factor: str) -> np.random.SeedSequence:
    """The random stream of one factor: a SeedSequence of ``(seed, crc32(factor name))``,
    the same whatever other factors are ranked with it, and in whatever order."""
    import zlib
    return np.random.SeedSequence([int(seed) & 0xFFFFFFFF, zlib.crc32(str(factor).encode())])


#: fewest target values of a pooled group, absolute and as a fraction of the largest group
MIN_GROUP_SAMPLES = 20
MIN_GROUP_FRACTION = 0.1


def min_group_samples(largest: int) -> int:
    """Fewest target values a pooled group needs: ``max(20, ceil(0.1 * largest group))``. A
    smaller group adds a handful of pairs to the pooled estimate while the circular-shift
    surrogates move its values into other groups' time, so it adds noise to the null
    without adding evidence."""
    return int(max(MIN_GROUP_SAMPLES, np.ceil(MIN_GROUP_FRACTION * largest)))


def _first_present(frame, names):
    return next((c for c in names if c in frame.columns and pd.to_numeric(frame[c], errors="coerce").notna().any()), None)


def backlog_dependence(frame: pd.DataFrame, *, rate: str | None = None, backlog: str = "backlog_bytes",
                       channel: str | None = None, sending: str | None = None, bins=B.NMI_BINS,
                       window=B.BACKLOG_WINDOW, max_lag=B.BACKLOG_MAX_LAG, surrogates: int = B.NMI_SURROGATES,
                       seed: int = 0,
                       resolution=None, time_column=None, by=None) -> "BacklogReport":
    """How much the assigned rate depends on the user's backlog (Mattar et al., Sec. 4).

    Returns a :class:`~airlink.inference.results.BacklogReport` (a mapping) with ``nmi_backlog`` and ``nmi_channel`` (peak ``I_N(rate; .)`` with
    significance), ``backlog_dominates`` (True, False, or None with the reason in
    ``cannot_tell``: see :func:`_which_dominates`), and when a sending rate is known (column
    ``sending_rate_bps``, or ``arrivals_bytes`` per sample): ``curve`` (mean assigned rate per
    sending-rate bin over ``window`` windows, Mattar et al. Fig. 2), ``throttle_onset_bps`` (the
    sending rate at which the curve stops following it: the peak of the curve when it
    later falls by more than 10 %, else the first bin served below 90 % of its sending
    rate, else NaN), and ``response_lag_s`` (median time from the start of a burst after
    an idle period to the first sample with a non-zero assigned rate). ``resolution``,
    ``time_column``, ``by``: the grid, as for :func:`rank_factors`.
    """
    frame = _framed(frame, resolution, time_column, by, [rate, backlog, channel, sending])
    rate = rate or _first_present(frame, RATE_COLUMNS)
    if rate is None:
        raise AirlinkError(f"{frame_source(frame)}: no rate column (one of {', '.join(RATE_COLUMNS)}); name it with rate=")
    channel = channel or _first_present(frame, CHANNEL_COLUMNS)
    column(frame, backlog)
    result = BacklogReport(rate=rate, backlog=backlog, channel=channel)
    kw = dict(max_lag=max_lag, bins=bins, surrogates=surrogates, seed=seed)
    rb = rank_factors(frame, target=rate, factors=[backlog], **kw).iloc[0].to_dict()
    result["nmi_backlog"] = rb
    if channel is not None:
        result["nmi_channel"] = rank_factors(frame, target=rate, factors=[channel], **kw).iloc[0].to_dict()
        result["backlog_dominates"], result["cannot_tell"] = _which_dominates(rb, result["nmi_channel"])
    else:
        result["nmi_channel"] = None
        result["backlog_dominates"] = None
        result["cannot_tell"] = "no channel column to compare the backlog with"
    period = _per_user_period(frame)
    sending = sending or _first_present(frame, SENDING_COLUMNS)
    result["sending"] = sending
    result.update(curve=[], throttle_onset_bps=float("nan"), response_lag_s=float("nan"))
    if sending is None or not np.isfinite(period):
        return result
    tables = wide_many(frame, [rate, sending], "frame")
    r, s = tables[rate], tables[sending]
    if sending == "arrivals_bytes":
        s = s * 8.0 / period
    if rate == "served_bytes":
        r = r * 8.0 / period
    r_bps = r
    from airlink.core.units import parse_duration
    win = pd.Timedelta(seconds=float(parse_duration(window))) if isinstance(window, str) else pd.Timedelta(seconds=float(window))
    rw, sw = r_bps.resample(win).mean(), s.resample(win).mean()
    xs, ys = sw.to_numpy().ravel(), rw.to_numpy().ravel()
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if xs.size >= 2 and xs.max() > xs.min():
        d = discretize(xs, bins=min(int(bins) if np.ndim(bins) == 0 else 16, 12), keep_levels=False)
        curve = []
        for b in range(d.n_levels):
            m = d.codes == b
            if m.any():
                curve.append(dict(sending_rate_bps=float(xs[m].mean()), assigned_rate_bps=float(ys[m].mean()),
                                  windows=int(m.sum())))
        result["curve"] = curve
        result["throttle_onset_bps"] = throttle_onset([c["sending_rate_bps"] for c in curve],
                                                      [c["assigned_rate_bps"] for c in curve])
    result["response_lag_s"] = response_lag(s.to_numpy(), r_bps.to_numpy(), period)
    return result


def _which_dominates(backlog: dict, channel: dict) -> tuple:
    """``(backlog_dominates, None)`` when the larger of the two peaks is an answer, else
    ``(None, reason)``: equal peaks, a peak of 0 (nothing in common with the rate, e.g. a
    rate that never changed), a peak with too few pairs, or one not above the surrogate
    threshold (chance gives as much)."""
    b, c = float(backlog["peak_nmi"]), float(channel["peak_nmi"])
    if not b > 0 and not c > 0:
        return None, (f"neither {backlog['factor']} nor {channel['factor']} shares information with the rate "
                      f"(peak NMI 0: the rate, or both factors, did not vary)")
    if b == c:
        return None, f"{backlog['factor']} and {channel['factor']} reach the same peak NMI ({b:.3f})"
    win = backlog if b > c else channel
    if win.get("cannot_tell"):
        return None, f"{win['factor']}: {win['cannot_tell']}"
    thr = win.get("threshold")
    if thr is not None and np.isfinite(thr) and not win["peak_nmi"] > thr:
        return None, (f"the larger peak, {win['factor']} {win['peak_nmi']:.3f}, is not above what chance gives "
                      f"(surrogate threshold {thr:.3f})")
    return win is backlog, None


def throttle_onset(sending, assigned, *, drop: float = 0.1, follow: float = 0.9) -> float:
    """Sending rate at which the assigned-vs-sending curve stops following (see
    :func:`backlog_dependence`)."""
    x, y = np.asarray(sending, float), np.asarray(assigned, float)
    if x.size < 2:
        return float("nan")
    k = int(np.argmax(y))
    if k < x.size - 1 and np.min(y[k + 1:]) < (1 - drop) * y[k]:
        return float(x[k])
    below = np.flatnonzero((x > 0) & (y < follow * x))
    return float(x[below[0]]) if below.size else float("nan")


def response_lag(sending, assigned, period_s: float, *, idle: int | None = None) -> float:
    """Median delay (s) from each burst start (sending > 0 after ``idle`` idle samples,
    default ~0.5 s) to the first sample with a non-zero assigned rate."""
    s = np.nan_to_num(np.atleast_2d(np.asarray(sending, float).T).T)
    a = np.nan_to_num(np.atleast_2d(np.asarray(assigned, float).T).T)
    if s.ndim == 1:
        s, a = s[:, None], a[:, None]
    idle = idle or max(1, int(round(0.5 / period_s)))
    delays = []
    for m in range(s.shape[1]):
        on = s[:, m] > 0
        starts = [t for t in np.flatnonzero(on) if t >= idle and not on[t - idle:t].any()]
        served = np.flatnonzero(a[:, m] > 0)
        for t in starts:
            k = np.searchsorted(served, t)
            if k < served.size:
                delays.append((served[k] - t) * period_s)
    return float(np.median(delays)) if delays else float("nan")


def _per_user_fairness(tables: dict, cols: dict, period: float, absent_is_zero: bool = False) -> pd.DataFrame:
    """Per-user table. ``share``: the user's part of the mean rates - or, in an allocation log
    (``absent_is_zero``: a slot without a grant gave the user nothing), of all the bytes
    granted: there the mean is per grant, and an RNTI with one 116-byte grant would get the
    share of one with a 116-byte grant in every slot."""
    rate = tables[cols["rate"]]
    users = list(rate.columns)
    out = pd.DataFrame(index=pd.Index(users, name="user"))
    mean = rate.mean().to_numpy()
    out["mean_" + cols["rate"]] = mean
    out["share"] = F.resource_fractions(np.nansum(rate.to_numpy(), axis=0) if absent_is_zero else np.nan_to_num(mean))
    if cols.get("resource"):
        res = np.nan_to_num(tables[cols["resource"]].sum().to_numpy())
        out["resource_fraction"] = F.resource_fractions(res)
    # Kakuda & Tsuru's s_m counts selections per resource unit (subchannel); per TTI without one
    out["selection_ratio"] = (out["resource_fraction"].to_numpy() if cols.get("resource")
                              else F.selection_ratios(rate.to_numpy()))
    if cols.get("backlog"):
        out["active_time_ratio"] = F.active_time_ratios(tables[cols["backlog"]].to_numpy())
    if cols.get("retx"):
        # transmissions: resource units (blocks) when known, else TTIs with service
        tx = (np.nansum(tables[cols["resource"]].to_numpy(), axis=0) if cols.get("resource")
              else (np.nan_to_num(rate.to_numpy()) > 0).sum(axis=0))
        out["retransmission_ratio"] = F.retransmission_ratios(np.nansum(tables[cols["retx"]].to_numpy(), axis=0), tx)
    return out


def _combine_devices(tables: dict, frame: pd.DataFrame, cols: dict) -> tuple[dict, str | None]:
    """Per-carrier series of one device summed into the device (carrier aggregation is one
    user: its carriers' rates and resources add up); ``(tables, note)``."""
    first = tables[cols["rate"]]
    groups = device_groups(list(first.columns), frame.attrs.get("by", []))
    if not groups or all(len(v) == 1 for v in groups.values()):
        return tables, None
    out = {}
    for name, t in tables.items():
        if name not in (cols["rate"], cols.get("resource")):
            continue
        out[name] = pd.DataFrame({dev: t.iloc[:, idx].sum(axis=1, min_count=1) for dev, idx in groups.items()},
                                 index=t.index)
    shown = "; ".join(f"{dev}: {', '.join(str(first.columns[i]).split('/')[-1] for i in idx)}"
                      for dev, idx in groups.items() if len(idx) > 1)
    return out, (f"carriers of one device are its carrier aggregation, one user, not competing users "
                 f"(summed per device: {shown})")


def _overlap(rate: pd.DataFrame):
    """``(start, end, reason)``: the time span in which every series had a positive rate at
    some step both before and after (first to last active step, intersected), or a reason
    why there is none."""
    active = rate.fillna(0) > 0
    spans = {}
    for u in rate.columns:
        on = rate.index[active[u].to_numpy()]
        if len(on) == 0:
            return None, None, f"series {u} never had a positive rate"
        spans[u] = (on[0], on[-1])
    start = max(a for a, _ in spans.values())
    end = min(b for _, b in spans.values())
    if start > end:
        late = max(spans.items(), key=lambda kv: kv[1][0])
        early = min(spans.items(), key=lambda kv: kv[1][1])
        return None, None, (f"the series never overlapped in time: {early[0]} ended at {early[1][1]} before "
                            f"{late[0]} began at {late[1][0]}; fairness compares users sharing the link at "
                            f"the same time")
    return start, end, None


def fairness_report(frame: pd.DataFrame, *, rate: str | None = None, resource: str | None = None,
                    window=None, resolution=None, time_column=None, by=None,
                    overlap: bool | None = None) -> "FairnessReport":
    """Fairness over the whole run and per window, or "cannot tell" with the reason.

    ``rate``: the per-user throughput; default the allocation log's transport blocks
    (:mod:`~airlink.inference.allocations`: ``tbs_bytes`` of the downlink slots of an
    NR-Scope log, a carrier's ``tbs_bps``), else the first of served_bytes, throughput_bps,
    assigned_rate_bps, tbs_bps, ...; ``resource`` (default ``subchannels`` or ``prbs``) the resource
    fractions. A user's rate is its mean over the grid steps in which it has a row (for an
    allocation log: the rate while served). Returns a :class:`~airlink.inference.results.FairnessReport` (a mapping
    ``{"overall": {...}, "users": DataFrame, "windows": DataFrame}``) with
    the fairness gap, Jain's index, min/max resource-fraction ratio, and per user the
    selection, active-time and retransmission ratios. ``resolution``, ``time_column``, ``by``:
    the grid, as for :func:`rank_factors`.

    Guards (``overall["cannot_tell"]`` holds the reason, the indices are NaN):

    - carriers of one device (series split ``by`` carrier) are one user's carrier
      aggregation: they are summed per device (``overall["note"]`` says so); a single device
      is one user, and one user has no fairness;
    - ``overlap`` (default: when the series are flows, ``by`` holding ``flow``): compare the
      users only over the span where all of them were active (first to last positive
      rate); users that never overlapped cannot be compared.

    ``overall["caution"]`` (else None): an all-user allocation log whose cell granted anything
    in fewer than :data:`CONTENDED_SLOTS` of its slots was rarely contended, so the users'
    shares follow how much each asked for more than how the scheduler shared (the indices are
    still given; ``airlink infer cell`` compares users active in the same window).
    """
    frame = _framed(frame, resolution, time_column, by, [rate, resource], sparse=True)
    alloc = frame.attrs.get("allocation") or {}
    rate = rate or (alloc.get("rate") if alloc.get("rate") in frame.columns else None) \
        or _first_present(frame, THROUGHPUT_COLUMNS)
    if rate is None:
        raise AirlinkError(f"{frame_source(frame)}: no rate column (one of {', '.join(THROUGHPUT_COLUMNS)}); name it with rate=")
    resource = resource or _first_present(frame, ("subchannels", "prbs"))
    cols = dict(rate=rate, resource=resource, backlog=_first_present(frame, ("backlog_bytes", "backlog_packets")),
                retx=_first_present(frame, ("harq_retransmissions", "rlp_retransmissions")))
    names = [c for c in dict.fromkeys(cols.values()) if c]
    tables = wide_many(frame, names, "frame")
    tables, note = _combine_devices(tables, frame, cols)
    if note:
        cols = dict(rate=rate, resource=resource, backlog=None, retx=None)
    reason = None
    overlap = ("flow" in frame.attrs.get("by", [])) if overlap is None else overlap
    span = None
    n_series = tables[rate].shape[1]
    if n_series < 2:
        reason = (f"one user ({tables[rate].columns[0]}): fairness compares two or more users"
                  + (" - its carriers are not users" if note else ""))
    elif overlap:
        start, end, why = _overlap(tables[rate])
        if why:
            reason = why
        else:
            tables = {k: v.loc[start:end] for k, v in tables.items()}
            span = (start, end)
    period = _per_user_period(frame)
    # a per-DCI log (a direction chosen) lists every grant: a slot without a row gave nothing
    users = _per_user_fairness(tables, cols, period, absent_is_zero=bool(alloc.get("direction")))
    mean = users["mean_" + rate].to_numpy()
    res = users["resource_fraction"].to_numpy() if resource else users["selection_ratio"].to_numpy()
    nan = float("nan")
    caution = None
    if alloc.get("direction") and not reason:
        granted = tables[resource or rate]          # PRBs: a retransmission's slot was granted too
        busy = float((granted.fillna(0).to_numpy() > 0).any(axis=1).mean())
        if busy < CONTENDED_SLOTS:
            caution = (f"the cell granted anything in {busy * 100:.2g} % of its slots: users rarely competed, "
                       f"so their shares follow their demand more than the scheduler's rule "
                       f"(airlink infer cell compares users active in the same window)")
    overall = dict(rate=rate, resource=resource or "selections", users=len(users),
                   fairness_gap=F.fairness_gap(mean) if not reason else nan,
                   jain_index=F.jain_index(mean) if not reason else nan,
                   min_max_resource_ratio=F.min_max_ratio(res) if not reason else nan,
                   samples=int(tables[rate].notna().to_numpy().sum()), cannot_tell=reason, note=note,
                   caution=caution,
                   overlap=None if span is None else dict(start=str(span[0]), end=str(span[1]),
                                                          seconds=(span[1] - span[0]).total_seconds() + period),
                   allocation=alloc or None)
    rows = []
    if window is not None and not reason:
        from airlink.core.units import parse_duration
        win = pd.Timedelta(seconds=float(parse_duration(window)) if isinstance(window, str) else float(window))
        rate_w = tables[rate].resample(win).mean()
        res_w = tables[resource].resample(win).sum() if resource else \
            (tables[rate].fillna(0) > 0).resample(win).sum()
        for t in rate_w.index:
            m = rate_w.loc[t].to_numpy()
            # fairness compares users: a window with one user holding a value (the others had
            # no row in it) has none, not Jain 1.0 and gap 0
            several = int(np.count_nonzero(~np.isnan(m))) >= 2
            rows.append(dict(time=t, users=int(np.count_nonzero(~np.isnan(m))),
                             fairness_gap=F.fairness_gap(m) if several else nan,
                             jain_index=F.jain_index(m) if several else nan,
                             min_max_resource_ratio=F.min_max_ratio(np.nan_to_num(res_w.loc[t].to_numpy()))
                             if several else nan))
    return FairnessReport(overall=overall, users=users, windows=pd.DataFrame(rows))


#: the coarsest sample in which inter-service gaps are still a scheduler's: a TTI is 0.0625 to
#: 2 ms in NR, LTE, HSPA and EV-DO, 10 to 80 ms in UMTS Release 99
JITTER_MAX_SAMPLE_S = 0.1


def jitter_report(frame: pd.DataFrame, *, served: str | None = None, resolution=None, time_column=None,
                  by=None) -> "JitterReport":
    """Inter-service gaps per user (the EV-DO study's scheduling jitter): count, mean, std, CoV and
    max in seconds, as a :class:`~airlink.inference.results.JitterReport` (``served``: the
    column used; ``users``: the table, also ``to_frame()``; ``sample_period_s``; ``cannot_tell``:
    None or the reason). ``served`` defaults to the first of served_bytes, subchannels, prbs,
    assigned_rate_bps; a user counts as served in a sample where it is > 0. ``resolution``,
    ``time_column``, ``by``: the grid, as for :func:`rank_factors`.

    Samples longer than :data:`JITTER_MAX_SAMPLE_S` hold many scheduling decisions: a user
    served in any slot of a sample counts as served for all of it, so a gap shorter than a
    sample cannot be seen and the gaps left are those between the log's samples (an
    iCellSpeed second with 8 840 PRBs of a 50-PRB carrier was served in 177 slots or more,
    not once). Then ``cannot_tell`` says so and the gap statistics are NaN."""
    frame = _framed(frame, resolution, time_column, by, [served], sparse=True)
    served = served or _first_present(frame, ("served_bytes", "subchannels", "prbs", "assigned_rate_bps",
                                              "tbs_bps"))
    if served is None:
        raise AirlinkError(f"{frame_source(frame)}: no service column (served_bytes, subchannels, prbs, "
                           f"assigned_rate_bps, tbs_bps); name it with served=")
    table = wide_many(frame, [served], "frame")[served]
    period = _per_user_period(frame)
    reason = None
    if period > JITTER_MAX_SAMPLE_S:
        reason = (f"one sample per {period:g} s: a user served in any slot of a sample counts as served for "
                  f"all of it, so gaps shorter than {period:g} s cannot be seen; the gaps left would be "
                  f"those between the log's samples, not the scheduler's (samples of at most "
                  f"{JITTER_MAX_SAMPLE_S:g} s needed)")
    rows = []
    for user, gaps in zip(table.columns, F.service_gaps(table.to_numpy(), tti_s=period)):
        st = F.gap_stats(gaps if reason is None else np.empty(0))
        rows.append(dict(user=user, gaps=st["count"] if reason is None else None, mean_s=st["mean"],
                         std_s=st["std"], cov=st["cov"], max_s=st["max"]))
    return JitterReport(served=served, users=pd.DataFrame(rows), sample_period_s=period, cannot_tell=reason)
