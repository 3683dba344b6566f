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

from airlink.traces import bounds as B
from airlink.traces.errors import AirlinkError

from .results import BacklogReport, FairnessReport, JitterReport

from . import fairness as F
from .frames import column, pooled_series, prepare, sample_period_s, users_of, wide_many
from .information import discretize
from .lagscan import lag_scan
from .surrogates import peak_significance

CHANNEL_COLUMNS = ("sinr_reported_db", "sinr_db", "snr_db", "cqi", "ecio_db", "rsrq_db", "rsrp_dbm",
                   "mcs")
RATE_COLUMNS = ("assigned_rate_bps", "served_bytes", "tbs_bps", "throughput_bps", "prbs",
                "subchannels")
THROUGHPUT_COLUMNS = ("served_bytes", "throughput_bps", "assigned_rate_bps", "tbs_bps", "prbs", "subchannels")


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
        from airlink.traces.units import parse_duration
        seconds = float(parse_duration(max_lag))
        if not np.isfinite(period) or period <= 0:
            raise AirlinkError(f"max lag {max_lag!r} is a duration but the frame's sample period is unknown")
        return int(round(seconds / period))
    return int(max_lag)


def _framed(frame: pd.DataFrame, resolution=None, time_column=None, by=None, columns=()) -> pd.DataFrame:
    """The frame on its regular grid (:func:`~airlink.inference.frames.prepare`), the named
    columns checked."""
    return prepare(frame, resolution=resolution, time_column=time_column, by=by,
                   columns=[c for c in columns if c])


_per_user_period = sample_period_s


def rank_factors(frame: pd.DataFrame, *, target: str, factors, max_lag="60s", bins=16,
                 binning: str = "uniform", normalization: str = "x", surrogates: int = 100,
                 bootstrap: int = 100, alpha: float = 0.05, user=None, seed: int = 0,
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
    series = pooled_series(frame, [target] + factors, user=user, gap=D)
    n = len(series[target])
    B.check_budget((surrogates + bootstrap + 1) * n * (2 * D + 1) * len(factors), B.MAX_NMI_WORK,
                   f"(surrogates {surrogates} + bootstrap {bootstrap} + 1) x {n} samples x {2 * D + 1} lags x "
                   f"{len(factors)} factor(s) make", "histogram updates")
    x = discretize(series[target], bins=bins, binning=binning)
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
                                seed=seed + k, progress=progress, scan=scan)
        d = sig.to_dict()
        rows.append(dict(factor=f, peak_nmi=d["peak_nmi"], lag=d["lag"], lag_s=d["lag_s"],
                         at_edge=bool(D > 0 and abs(int(d["lag"])) == D), p_value=d["p_value"], threshold=d["threshold"],
                         bias_corrected=d["bias_corrected"], ci_low=d["ci_low"],
                         ci_high=d["ci_high"], n_pairs=d["n_pairs"]))
    out = pd.DataFrame(rows).sort_values("peak_nmi", ascending=False, kind="stable")
    out.attrs.update(target=target, max_lag=D, sample_period_s=period, bins=bins, binning=binning,
                     normalization=normalization, surrogates=surrogates,
                     empty_bins=frame.attrs.get("empty_bins"), merged_rows=frame.attrs.get("merged_rows"),
                     users=[str(u) for u in users_of(frame)] if "user" in frame.columns else [],
                     **({"curves": scans} if curves else {}))
    return out.reset_index(drop=True)


def _first_present(frame, names):
    return next((c for c in names if c in frame.columns and pd.to_numeric(frame[c], errors="coerce").notna().any()), None)


def backlog_dependence(frame: pd.DataFrame, *, rate: str | None = None, backlog: str = "backlog_bytes",
                       channel: str | None = None, sending: str | None = None, bins=16,
                       window="1s", max_lag="10s", surrogates: int = 100, seed: int = 0,
                       resolution=None, time_column=None, by=None) -> "BacklogReport":
    """How much the assigned rate depends on the user's backlog (Mattar et al., Sec. 4).

    Returns a :class:`~airlink.inference.results.BacklogReport` (a mapping) with ``nmi_backlog`` and ``nmi_channel`` (peak ``I_N(rate; .)`` with
    significance), ``backlog_dominates``, and when a sending rate is known (column
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
        raise AirlinkError(f"frame has no rate column (one of {', '.join(RATE_COLUMNS)}); name the rate column")
    channel = channel or _first_present(frame, CHANNEL_COLUMNS)
    column(frame, backlog)
    result = BacklogReport(rate=rate, backlog=backlog, channel=channel)
    kw = dict(max_lag=max_lag, bins=bins, surrogates=surrogates, seed=seed)
    rb = rank_factors(frame, target=rate, factors=[backlog], **kw).iloc[0].to_dict()
    result["nmi_backlog"] = rb
    if channel is not None:
        result["nmi_channel"] = rank_factors(frame, target=rate, factors=[channel], **kw).iloc[0].to_dict()
        result["backlog_dominates"] = bool(rb["peak_nmi"] > result["nmi_channel"]["peak_nmi"])
    else:
        result["nmi_channel"] = None
        result["backlog_dominates"] = None
    period = _per_user_period(frame)
    sending = sending or _first_present(frame, ("sending_rate_bps", "arrivals_bytes"))
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
    from airlink.traces.units import parse_duration
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


def _per_user_fairness(tables: dict, cols: dict, period: float) -> pd.DataFrame:
    rate = tables[cols["rate"]]
    users = list(rate.columns)
    out = pd.DataFrame(index=pd.Index(users, name="user"))
    mean = rate.mean().to_numpy()
    out["mean_" + cols["rate"]] = mean
    out["share"] = F.resource_fractions(np.nan_to_num(mean))
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


def fairness_report(frame: pd.DataFrame, *, rate: str | None = None, resource: str | None = None,
                    window=None, resolution=None, time_column=None, by=None) -> "FairnessReport":
    """Fairness over the whole run and per window.

    ``rate`` (default the first of served_bytes, throughput_bps, assigned_rate_bps, tbs_bps, ...) gives the
    per-user throughput; ``resource`` (default ``subchannels`` or ``prbs``) the resource
    fractions. Returns a :class:`~airlink.inference.results.FairnessReport` (a mapping
    ``{"overall": {...}, "users": DataFrame, "windows": DataFrame}``) with
    the fairness gap, Jain's index, min/max resource-fraction ratio, and per user the
    selection, active-time and retransmission ratios. ``resolution``, ``time_column``, ``by``:
    the grid, as for :func:`rank_factors`.
    """
    frame = _framed(frame, resolution, time_column, by, [rate, resource])
    rate = rate or _first_present(frame, THROUGHPUT_COLUMNS)
    if rate is None:
        raise AirlinkError(f"frame has no rate column (one of {', '.join(THROUGHPUT_COLUMNS)}); name the rate column")
    resource = resource or _first_present(frame, ("subchannels", "prbs"))
    cols = dict(rate=rate, resource=resource, backlog=_first_present(frame, ("backlog_bytes", "backlog_packets")),
                retx=_first_present(frame, ("harq_retransmissions", "rlp_retransmissions")))
    names = [c for c in dict.fromkeys(cols.values()) if c]
    tables = wide_many(frame, names, "frame")
    period = _per_user_period(frame)
    users = _per_user_fairness(tables, cols, period)
    mean = users["mean_" + rate].to_numpy()
    res = users["resource_fraction"].to_numpy() if resource else users["selection_ratio"].to_numpy()
    overall = dict(rate=rate, resource=resource or "selections", users=len(users),
                   fairness_gap=F.fairness_gap(mean), jain_index=F.jain_index(mean),
                   min_max_resource_ratio=F.min_max_ratio(res))
    rows = []
    if window is not None:
        from airlink.traces.units import parse_duration
        win = pd.Timedelta(seconds=float(parse_duration(window)) if isinstance(window, str) else float(window))
        rate_w = tables[rate].resample(win).mean()
        res_w = tables[resource].resample(win).sum() if resource else \
            (tables[rate].fillna(0) > 0).resample(win).sum()
        for t in rate_w.index:
            m = rate_w.loc[t].to_numpy()
            rows.append(dict(time=t, fairness_gap=F.fairness_gap(m), jain_index=F.jain_index(m),
                             min_max_resource_ratio=F.min_max_ratio(np.nan_to_num(res_w.loc[t].to_numpy()))))
    return FairnessReport(overall=overall, users=users, windows=pd.DataFrame(rows))


def jitter_report(frame: pd.DataFrame, *, served: str | None = None, resolution=None, time_column=None,
                  by=None) -> "JitterReport":
    """Inter-service gaps per user (the EV-DO study's scheduling jitter): count, mean, std, CoV and
    max in seconds, as a :class:`~airlink.inference.results.JitterReport` (``served``: the
    column used; ``users``: the table, also ``to_frame()``). ``served`` defaults to the first of served_bytes, subchannels, prbs,
    assigned_rate_bps; a user counts as served in a sample where it is > 0. ``resolution``,
    ``time_column``, ``by``: the grid, as for :func:`rank_factors`."""
    frame = _framed(frame, resolution, time_column, by, [served])
    served = served or _first_present(frame, ("served_bytes", "subchannels", "prbs", "assigned_rate_bps",
                                              "tbs_bps"))
    if served is None:
        raise AirlinkError("frame has no service column (served_bytes, subchannels, prbs, assigned_rate_bps)")
    table = wide_many(frame, [served], "frame")[served]
    period = _per_user_period(frame)
    rows = []
    for user, gaps in zip(table.columns, F.service_gaps(table.to_numpy(), tti_s=period)):
        st = F.gap_stats(gaps)
        rows.append(dict(user=user, gaps=st["count"], mean_s=st["mean"], std_s=st["std"], cov=st["cov"],
                         max_s=st["max"]))
    return JitterReport(served=served, users=pd.DataFrame(rows))
