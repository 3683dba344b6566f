"""Scheduler identification: which rule (RR, MaxCIR, PF, backlog-driven) explains a trace.

Only what a measurement can see is used: per-user allocation (PRBs/subchannels, or the
allocated rate), channel quality (reported SINR, SNR or CQI) and, where known, the
backlog. From these, scale-free features are computed (rank correlations, how often the
most-served user is the one with the best channel / best channel relative to its own
mean / longest wait / largest backlog, service-gap regularity, share spread), and a
scikit-learn random forest trained on ``airlink.sim.simulate`` runs across schedulers,
loads (full buffer, on-off, Poisson), cell sizes, speeds and PF time constants predicts
the scheduler with a probability. Two models are trained: ``cell`` (several users
visible, all features) and ``user`` (one user's view only, as in per-UE logs such as
iCellSpeed); the frame picks which applies.

Training runs on first use (about a minute on one core) and is cached under
``$AIRLINK_CACHE`` or ``~/.cache/airlink``; the held-out accuracy on whole simulated
runs never seen in training is stored and printed with the model.

PF's averaging time constant ``t_c = 1/a`` (the EV-DO study: ``T_i(t+1) = (1-a) T_i(t) + a R_i(t)``)
is estimated by replaying the PF rule with candidate ``t_c`` on the measured channel
(rate proxy ``log2(1 + SINR)``) and served amounts, keeping the ``t_c`` whose choices agree
most with the observed allocation.
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.signal import lfilter
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, ClassifierMixin

from airlink.core.errors import AirlinkError, frame_source

from .allocations import device_groups
from .frames import prepare, sample_period_s, wide_many

CLASSES = ("rr", "maxcir", "pf", "backlog")
ALLOC_COLUMNS = ("prbs", "subchannels", "served_bytes", "assigned_rate_bps", "tbs_bps")
CHANNEL_COLUMNS = ("sinr_reported_db", "sinr_db", "snr_db", "cqi", "rsrq_db", "ecio_db", "rsrp_dbm")
TC_GRID = (3, 10, 30, 100, 300, 1000, 3000)
MODEL_VERSION = 5
CONFIDENT_PROBABILITY = 0.6
# what the training cells look like (training_runs/_views): 1 ms and 20 ms TTIs, and their
# 10-sample averages (10 ms, 200 ms); cells of 3 and 6 users (allowed up to twice that)
TRAINED_PERIOD_S = (0.0005, 0.4)
TRAINED_USERS = (3, 12)
MIN_SAMPLES = 20
#: a user holding at least this share of the allocations (or of the carrier's resources) is
#: alone: RR, PF and max-CIR all give a lone user everything, so its log cannot tell them apart
LONE_USER_SHARE = 0.9
#: columns giving the carrier's resources per sample (a one-user log's denominator)
CAPACITY_COLUMNS = ("prbs_max", "cell_prbs", "total_prbs", "total_rbs")
BACKLOG_COLUMNS = ("backlog_bytes", "backlog_packets")
#: every column :func:`observe` may choose among: all a scheduler identification reads (the
#: rest of a frame stays off its grid: an all-user log's 137 RNTIs x 16 columns at 1 ms
#: would not fit it)
COLUMNS_READ = (*ALLOC_COLUMNS, *CHANNEL_COLUMNS, *BACKLOG_COLUMNS, *CAPACITY_COLUMNS)
# the best t_c must agree this much better than the median candidate to count as resolved
PF_RESOLVED_MARGIN = 0.05

USER_FEATURES = ["served_frac", "rank_corr_channel", "rank_corr_rel10", "rank_corr_rel100",
                 "alloc_cv", "served_autocorr1", "gap_cov", "gap_max_over_mean", "backlog_known",
                 "rank_corr_backlog", "served_when_backlogged", "alloc_levels"]
CELL_FEATURES = USER_FEATURES + ["agree_maxchannel", "agree_relchannel", "agree_pf", "agree_longestwait",
                                 "agree_maxbacklog", "jain_alloc", "share_vs_channel", "users_served_per_tti",
                                 "contention_frac", "top_maxchannel", "top_pf", "top_longestwait"]


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return 0.0
    a, b = a[ok], b[ok]
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _rank_corr(a, b) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return 0.0
    return _corr(rankdata(a[ok]), rankdata(b[ok]))


def _ewma(x: np.ndarray, tc: float) -> np.ndarray:
    """Exponential average along time (axis 0) with ``a = 1/tc``, started at the first value."""
    a = 1.0 / max(tc, 1.0)
    x = np.nan_to_num(x)
    zi = (1 - a) * x[:1]
    out, _ = lfilter([a], [1, -(1 - a)], x, axis=0, zi=zi)
    return out


def _argmax_rows(m: np.ndarray) -> np.ndarray:
    m = np.where(np.isfinite(m), m, -np.inf)
    return np.argmax(m, axis=1)


@dataclass
class Observed:
    """What a measurement gives: allocation, channel and maybe backlog, ``(time, user)``."""

    alloc: np.ndarray
    channel: np.ndarray
    backlog: np.ndarray | None
    period_s: float
    columns: dict = field(default_factory=dict)
    users: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    capacity: np.ndarray | None = None


def observe(frame: pd.DataFrame, *, alloc=None, channel=None, backlog=None, resolution=None,
            time_column=None, by=None, require_channel: bool = True, require_alloc: bool = True) -> Observed:
    """Pick the allocation, channel and backlog columns of a frame as ``(time, user)`` arrays,
    on the frame's regular grid (:func:`~airlink.inference.frames.prepare`: ``resolution``,
    ``time_column`` and ``by`` are passed on). ``Observed.columns`` names the columns used and
    ``users`` the series taken as users. Without a channel column ``channel`` is all NaN
    (or an error when ``require_channel``); likewise the allocation (``require_alloc``)."""
    frame = prepare(frame, resolution=resolution, time_column=time_column, by=by,
                    columns=[x for x in (alloc, channel, backlog) if x])
    source = frame_source(frame)

    def pick(given, names, what, keyword, required=True):
        if given:
            return given
        for c in names:
            if c in frame.columns and pd.to_numeric(frame[c], errors="coerce").notna().any():
                return c
        if required:
            raise AirlinkError(f"{source}: no {what} column (one of {', '.join(names)}); name it with {keyword}=")
        return None

    a = pick(alloc, ALLOC_COLUMNS, "allocation", "alloc", required=require_alloc)
    c = pick(channel, CHANNEL_COLUMNS, "channel-quality", "channel", required=require_channel)
    b = pick(backlog, BACKLOG_COLUMNS, "backlog", "backlog", required=False)
    cap = pick(None, CAPACITY_COLUMNS, "capacity", "capacity", required=False) if a in ("prbs", "subchannels") \
        else None
    if a is None:  # a stand-in of the right shape, all missing
        tables = wide_many(frame.assign(_no_alloc=0.0), ["_no_alloc", *[x for x in (c, b) if x]])
        tables["_no_alloc"] = tables["_no_alloc"] * np.nan
        first = "_no_alloc"
    else:
        tables = wide_many(frame, [x for x in (a, c, b, cap) if x])
        first = a
    period = sample_period_s(frame)
    A = tables[first].to_numpy(float)
    return Observed(A, tables[c].to_numpy(float) if c else np.full(A.shape, np.nan),
                    tables[b].to_numpy(float) if b else None, period,
                    dict(alloc=a, channel=c, backlog=b, capacity=cap),
                    users=[str(u) for u in tables[first].columns] if "user" in frame.columns else [],
                    keys=list(frame.attrs.get("by", [])),
                    capacity=tables[cap].to_numpy(float) if cap else None)


def _user_features(A, C, B) -> dict:
    served = np.nan_to_num(A) > 0
    f = dict(served_frac=float(served.mean()))
    rc, r10, r100, cv, ac, gcov, gmax, rb, swb, lev = ([] for _ in range(10))
    for u in range(A.shape[1]):
        a, c = np.nan_to_num(A[:, u]), C[:, u]
        cf = np.where(np.isfinite(c), c, np.nanmean(c) if np.isfinite(c).any() else 0.0)
        rc.append(_rank_corr(a, c))
        r10.append(_rank_corr(a, cf - _ewma(cf, 10)))
        r100.append(_rank_corr(a, cf - _ewma(cf, 100)))
        pos = a[a > 0]
        cv.append(float(pos.std() / pos.mean()) if pos.size > 1 else 0.0)
        lev.append(float(np.unique(pos).size / max(pos.size, 1)))
        s = served[:, u].astype(float)
        ac.append(_corr(s[1:], s[:-1]) if s.size > 2 else 0.0)
        idx = np.flatnonzero(served[:, u])
        g = np.diff(idx)
        gcov.append(float(g.std() / g.mean()) if g.size > 1 else 0.0)
        gmax.append(float(g.max() / g.mean()) if g.size > 1 else 0.0)
        if B is not None:
            b = np.nan_to_num(B[:, u])
            rb.append(_rank_corr(a, b))
            busy = b > 0
            swb.append(float(served[busy, u].mean()) if busy.any() else 0.0)
    f.update(rank_corr_channel=np.mean(rc), rank_corr_rel10=np.mean(r10), rank_corr_rel100=np.mean(r100),
             alloc_cv=np.mean(cv), served_autocorr1=np.mean(ac), gap_cov=np.mean(gcov),
             gap_max_over_mean=np.mean(gmax), backlog_known=float(B is not None),
             rank_corr_backlog=np.mean(rb) if rb else 0.0,
             served_when_backlogged=np.mean(swb) if swb else 0.0, alloc_levels=np.mean(lev))
    return f


def _active(A, B, window: int = 25) -> np.ndarray:
    """Which users have data: backlog > 0 where known, else served within +-window samples."""
    if B is not None:  # data queued before the TTI (the log shows the backlog after it) or served in it
        b = np.nan_to_num(B) > 0
        return np.vstack([b[:1], b[:-1]]) | (np.nan_to_num(A) > 0)
    served = (np.nan_to_num(A) > 0).astype(np.int64)
    # served within +-window samples: a running count from the cumulative sum (same length
    # as the series whatever its length; np.convolve(mode="same") is not when shorter)
    c = np.vstack([np.zeros((1, served.shape[1]), np.int64), np.cumsum(served, axis=0)])
    T = served.shape[0]
    hi = np.minimum(np.arange(T) + window + 1, T)
    lo = np.maximum(np.arange(T) - window, 0)
    return (c[hi] - c[lo]) > 0


def _pf_metrics(a: np.ndarray, c_db: np.ndarray, grid):
    """PF metrics ``R_i(t) / T_i(t-1)`` replayed on the measured channel for each ``t_c`` in
    ``grid``: ``R = log2(1 + SINR)``, ``T`` the EWMA of ``R`` weighted by the user's share."""
    R = np.log2(1 + 10 ** (np.clip(c_db, -40, 60) / 10))
    served_rate = R * (a / np.maximum(a.max(axis=1, keepdims=True), 1e-12))
    for tc in grid:
        T = _ewma(served_rate, tc)
        prev = np.vstack([T[:1], T[:-1]])
        yield R / np.maximum(prev, 1e-9)


def _cell_features(A, C, B) -> dict:
    f = _user_features(A, C, B)
    a = np.nan_to_num(A)
    active = _active(A, B)
    contended = active.sum(axis=1) >= 2
    f["contention_frac"] = float(contended.mean())
    any_served = (a.sum(axis=1) > 0) & contended
    if not any_served.any():
        any_served = a.sum(axis=1) > 0
    top = _argmax_rows(np.where(any_served[:, None], a, np.nan))
    c = np.where(np.isfinite(C), C, np.nanmean(C, axis=0, keepdims=True))
    c = np.nan_to_num(c)

    share = a / np.maximum(a.sum(axis=1, keepdims=True), 1e-12)
    n_act = active.sum(axis=1)

    def agree(metric):
        """Allocation-weighted rank (0 worst .. 1 best among the users with data) of the
        rule's metric, over contended TTIs: 1 when the rule's favourite always gets it all."""
        m = np.where(active, np.nan_to_num(metric, nan=-1e300), -np.inf)
        r = rankdata(m, axis=1, method="average") - (a.shape[1] - n_act)[:, None] - 1
        r = r / np.maximum(n_act - 1, 1)[:, None]
        w = (share * np.where(active, r, 0)).sum(axis=1)
        return float(np.mean(w[any_served])) if any_served.any() else 0.5

    def agree_top(metric):
        """How often the most-served user is the rule's favourite among users with data."""
        pick = _argmax_rows(np.where(active, metric, np.nan))
        return float(np.mean(pick[any_served] == top[any_served])) if any_served.any() else 0.0

    f["agree_maxchannel"] = agree(c)
    f["agree_relchannel"] = agree(c - _ewma(c, 100))
    pf = list(_pf_metrics(a, c, (10, 100, 1000)))
    f["agree_pf"] = max(agree(m) for m in pf)
    f["top_maxchannel"] = agree_top(c)
    f["top_pf"] = max(agree_top(m) for m in pf)
    # time since last service, per user
    T, U = a.shape
    last = np.full(U, -1)
    wait = np.empty((T, U))
    served = a > 0
    for t in range(T):
        wait[t] = t - last
        last = np.where(served[t], t, last)
    f["agree_longestwait"] = agree(wait)
    f["top_longestwait"] = agree_top(wait)
    f["agree_maxbacklog"] = agree(np.nan_to_num(B)) if B is not None else 0.0
    tot = a.sum(axis=0)
    f["jain_alloc"] = float(tot.sum() ** 2 / (U * (tot ** 2).sum())) if (tot ** 2).sum() > 0 else 1.0
    f["share_vs_channel"] = _rank_corr(tot, np.nanmean(C, axis=0)) if U > 2 else 0.0
    f["users_served_per_tti"] = float((served[any_served].sum(axis=1) / np.maximum(n_act[any_served], 1)).mean()) \
        if any_served.any() else 0.0
    return f


def scheduler_features(obs: Observed, *, view: str = "cell") -> np.ndarray:
    """Feature vector of an observation (``view``: ``cell`` or ``user``)."""
    A, C, B = obs.alloc, obs.channel, obs.backlog
    if view == "user":
        f = _user_features(A, C, B)
        return np.array([f[k] for k in USER_FEATURES], dtype=float)
    f = _cell_features(A, C, B)
    return np.array([f[k] for k in CELL_FEATURES], dtype=float)


def estimate_pf_time_constant(obs: Observed, *, grid=TC_GRID) -> dict:
    """PF averaging time constant ``t_c = 1/a`` in samples and seconds: the candidate whose
    replayed PF choices (argmax ``R_i / T_i``, ``R = log2(1 + SINR)``, ``T`` the EWMA of served
    ``R``) agree most with the observed allocation (several users), or correlate best with a
    single user's allocation."""
    A = np.nan_to_num(obs.alloc)
    c = obs.channel
    c = np.where(np.isfinite(c), c, np.nanmean(c, axis=0, keepdims=True))
    R = np.log2(1 + 10 ** (np.nan_to_num(c) / 10))
    served = A > 0
    active = _active(obs.alloc, obs.backlog)
    scores = []
    for tc in grid:
        Tavg = _ewma(R * (A / np.maximum(A.max(axis=1, keepdims=True), 1e-12)), tc)
        prev = np.vstack([Tavg[:1], Tavg[:-1]])
        metric = R / np.maximum(prev, 1e-9)
        if A.shape[1] > 1:
            any_served = served.any(axis=1)
            scores.append(float(np.mean(_argmax_rows(np.where(active, metric, np.nan))[any_served] ==
                                        _argmax_rows(np.where(any_served[:, None], A, np.nan))[any_served]))
                          if any_served.any() else 0.0)
        else:
            scores.append(_rank_corr(A[:, 0], metric[:, 0]))
    k = int(np.argmax(scores))
    tc = float(grid[k])
    margin = float(scores[k] - np.median(scores))
    return dict(tc_samples=tc, tc_s=tc * obs.period_s if np.isfinite(obs.period_s) else float("nan"),
                scores=dict(zip([int(g) for g in grid], scores)), margin=margin,
                resolved=bool(margin >= PF_RESOLVED_MARGIN))


# ----------------------------------------------------------------------------- training
def _simulate(preset, seed, duration, **overrides):
    """The one place that calls the simulator (so a change of its API changes one line)."""
    from airlink.sim import simulate
    return simulate(preset, seed=seed, duration=duration, **overrides).mac


def training_runs(n_seeds: int = 3):
    """The grid of simulated cells the model learns from: (label, preset, seed, duration, overrides)."""
    runs = []
    pf_as = (0.1, 0.01, 0.001)
    k = 0
    for preset, duration in (("quick", "4s"), ("1xrtt", "90s")):
        for sched in CLASSES:
            for traffic in ("full", "onoff", "poisson"):
                for n_users in (3, 6):
                    for s in range(n_seeds):
                        k += 1
                        ov = dict(scheduler=sched, traffic=traffic, n_users=n_users,
                                  speed_kmh=(3, 30)[(k // 3) % 2])
                        # users at different distances (a cell where PF and MaxCIR differ)
                        hi = 20 if preset == "quick" else 8
                        ov["snr_db"] = list(np.linspace(hi, hi - 22 + 4 * (k % 3), n_users).round(1))
                        if traffic != "full":  # loads where users contend for the cell
                            ov["traffic_rate_bps"] = (4e6 if preset == "quick" else 80e3) * (1 + k % 3)
                            ov.update(on_s=0.5, off_s=0.5 * (1 + k % 3))
                        if sched == "pf":
                            ov.update(pf_window=0, pf_a=pf_as[k % 3])
                        dur = duration if traffic == "full" or preset != "quick" else "8s"
                        runs.append((sched, preset, 1000 + k, dur, ov))
    return runs


def _views(obs: Observed):
    """The run as measured at its own resolution and averaged over 10-sample windows."""
    yield obs
    n = obs.alloc.shape[0] // 10 * 10
    if n >= 100:
        def avg(x):
            return None if x is None else np.nanmean(x[:n].reshape(n // 10, 10, -1), axis=1)
        yield Observed(avg(obs.alloc), avg(obs.channel), avg(obs.backlog), obs.period_s * 10, obs.columns)


def _without_backlog(obs: Observed) -> Observed:
    return Observed(obs.alloc, obs.channel, None, obs.period_s, obs.columns)


class SchedulerClassifier(ClassifierMixin, BaseEstimator):
    """Random-forest scheduler classifier on :func:`scheduler_features`, a scikit-learn
    estimator: parameters are stored by ``__init__`` (``get_params``/``set_params``/``clone``
    work), everything learned is set in :meth:`fit` and ends with ``_`` (``forest_``,
    ``classes_``, ``n_features_in_``).

    Parameters
    ----------
    view : {"cell", "user"}
        Which feature set the rows are (several users visible, or one user's view); recorded
        with the model, not used in the arithmetic.
    n_estimators, min_samples_leaf, random_state
        Passed to :class:`sklearn.ensemble.RandomForestClassifier`.
    """

    def __init__(self, *, view: str = "cell", n_estimators: int = 300, min_samples_leaf: int = 2,
                 random_state: int = 0):
        self.view = view
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def fit(self, X, y):
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data
        X, y = validate_data(self, X, y)
        check_classification_targets(y)
        self.forest_ = RandomForestClassifier(n_estimators=self.n_estimators, random_state=self.random_state,
                                              min_samples_leaf=self.min_samples_leaf, n_jobs=1)
        self.forest_.fit(X, y)
        self.classes_ = self.forest_.classes_
        return self

    def predict_proba(self, X):
        from sklearn.utils.validation import check_is_fitted, validate_data
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.forest_.predict_proba(X)

    def predict(self, X):
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


def _observe_run(run) -> Observed:
    label, preset, seed, duration, ov = run
    return observe(_simulate(preset, seed, duration, **ov))


def build_dataset(runs=None, *, progress: bool = False, n_jobs: int = 2):
    """Feature rows for both views from simulated runs: ``{view: (X, y, run, kind)}``."""
    runs = training_runs() if runs is None else runs
    rows = {"cell": ([], [], [], []), "user": ([], [], [], [])}
    it = enumerate(runs)
    if progress:
        from tqdm import tqdm
        it = tqdm(it, total=len(runs), desc="simulating cells", leave=False)
    from joblib import Parallel, delayed
    observed = Parallel(n_jobs=n_jobs)(delayed(_observe_run)(run) for _, run in it)
    for g, ((label, *_), obs) in enumerate(zip(runs, observed)):
        for res, view_obs in zip(("native", "avg10"), _views(obs)):
            for o, bk in ((view_obs, "+backlog"), (_without_backlog(view_obs), "")):
                kind = res + bk
                X, y, G, K = rows["cell"]
                X.append(scheduler_features(o, view="cell")); y.append(label); G.append(g); K.append(kind)
                X, y, G, K = rows["user"]
                for u in range(o.alloc.shape[1]):
                    one = Observed(o.alloc[:, u:u + 1], o.channel[:, u:u + 1],
                                   None if o.backlog is None else o.backlog[:, u:u + 1], o.period_s)
                    X.append(scheduler_features(one, view="user")); y.append(label); G.append(g); K.append(kind)
    return {v: tuple(np.array(a) for a in arrays) for v, arrays in rows.items()}


def train_scheduler_model(*, runs=None, progress: bool = False, n_folds: int = 4, n_jobs: int = 2) -> dict:
    """Train both views. Held-out accuracy: ``n_folds``-fold cross-validation grouped by
    simulated run (every run is predicted once by a model that never saw it), reported
    overall and per kind of view (``native``/``avg10`` resolution, with/without backlog)."""
    from sklearn.model_selection import GroupKFold
    data = build_dataset(runs, progress=progress, n_jobs=n_jobs)
    out = dict(version=MODEL_VERSION, classes=list(CLASSES), models={}, heldout_accuracy={},
               heldout_by_kind={}, n_runs=int(len(set(data["cell"][2]))))
    for view, (X, y, G, K) in data.items():
        pred = np.empty(len(y), dtype=object)
        for tr, te in GroupKFold(n_folds).split(X, y, G):
            pred[te] = SchedulerClassifier(view=view).fit(X[tr], y[tr]).predict(X[te])
        ok = pred == y
        out["heldout_accuracy"][view] = float(ok.mean())
        out["heldout_by_kind"][view] = {str(k): float(ok[K == k].mean()) for k in sorted(set(K))}
        out["models"][view] = SchedulerClassifier(view=view).fit(X, y)  # final model on all runs
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("AIRLINK_CACHE") or Path.home() / ".cache" / "airlink")


def load_scheduler_model(*, retrain: bool = False, progress: bool = False) -> dict:
    """The cached model (trained and cached on first use, or when ``retrain``)."""
    path = cache_dir() / f"scheduler-model-v{MODEL_VERSION}.pkl"
    if path.exists() and not retrain:
        try:
            with open(path, "rb") as fh:
                model = pickle.load(fh)
            if model.get("version") == MODEL_VERSION:
                return model
        except Exception:  # stale or foreign pickle: train again
            pass
    model = train_scheduler_model(progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        pickle.dump(model, fh)
    os.replace(tmp, path)
    return model


def _carrier_groups(obs: Observed) -> dict:
    """``{device: [series index, ...]}`` when the series are split by carrier (several carriers
    of one device are one UE's carrier aggregation, not users competing for a cell)."""
    return device_groups(obs.users, obs.keys)


def _subset(obs: Observed, cols) -> Observed:
    cols = list(cols)
    return Observed(obs.alloc[:, cols], obs.channel[:, cols], None if obs.backlog is None else obs.backlog[:, cols],
                    obs.period_s, obs.columns, [obs.users[i] for i in cols] if obs.users else [], obs.keys,
                    None if obs.capacity is None else obs.capacity[:, cols])


def lone_user(obs: Observed) -> str | None:
    """Why the log shows one user alone, or None: a single series (one phone's log) holding at
    least :data:`LONE_USER_SHARE` of the carrier's resources, given by a capacity column such
    as ``prbs_max``, in the samples it was served. RR, PF and max-CIR all give a lone user
    everything, so nothing in its allocation can tell them apart. The capacity is per slot:
    a log whose allocation exceeds it (PRBs summed over a second) is not judged by this rule.
    (Several series where one
    takes nearly all are not this case: others starved while backlogged is max-CIR's mark.)"""
    a = np.nan_to_num(obs.alloc)
    if a.size == 0 or a.shape[1] != 1 or not (a > 0).any():
        return None
    if obs.capacity is None:
        return None
    served = a[:, 0] > 0
    cap = np.nan_to_num(obs.capacity[:, 0])[served]
    if not (cap > 0).any():
        return None
    if np.any(a[served, 0] > cap * (1 + 1e-9)):
        return None      # allocation summed over several slots per sample: not comparable to one slot's PRBs
    held, total = float(a[served, 0][cap > 0].sum()), float(cap[cap > 0].sum())
    share = held / total
    if share >= LONE_USER_SHARE:
        per = np.median(a[served, 0][cap > 0]), np.median(cap[cap > 0])
        return (f"one user cannot distinguish RR from PF: the only user in the log holds {share:.0%} of the "
                f"carrier's resources when served (median {per[0]:.0f} of {per[1]:.0f} "
                f"{obs.columns.get('alloc')}; >= {LONE_USER_SHARE:.0%}): alone in the cell it gets everything "
                f"under every rule")
    return None


def out_of_distribution(obs: Observed, view: str) -> list:
    """Reasons the observation is unlike the simulated cells the model learned from (empty
    when it is like them): sampling period outside :data:`TRAINED_PERIOD_S`, a user count
    outside :data:`TRAINED_USERS` (cell view), no channel, too few samples or no service."""
    reasons = []
    if obs.columns.get("alloc") is None:
        reasons.append(f"no allocation column (one of {', '.join(ALLOC_COLUMNS)}): nothing shows what the "
                       f"scheduler gave")
    lo, hi = TRAINED_PERIOD_S
    if not np.isfinite(obs.period_s):
        reasons.append("the sampling period is unknown")
    elif not lo <= obs.period_s <= hi:
        reasons.append(f"one sample per {obs.period_s:g} s: the model learned from per-TTI logs and their "
                       f"10-TTI averages ({lo * 1e3:g} ms to {hi * 1e3:g} ms); coarser samples average many "
                       f"scheduling decisions away")
    n_users = obs.alloc.shape[1]
    ulo, uhi = TRAINED_USERS
    if view == "cell" and not ulo <= n_users <= uhi:
        reasons.append(f"{n_users} users: the cell model learned from cells of {ulo} to {uhi} users")
    if obs.columns.get("channel") is None or not np.isfinite(obs.channel).any():
        reasons.append("no channel-quality values (SINR, SNR, CQI, ...): the rules differ in how they "
                       "follow the channel")
    if obs.alloc.shape[0] < MIN_SAMPLES:
        reasons.append(f"{obs.alloc.shape[0]} samples (at least {MIN_SAMPLES} needed)")
    if obs.columns.get("alloc") is not None and not (np.nan_to_num(obs.alloc) > 0).any():
        reasons.append("no sample with an allocation > 0")
    return reasons


def identify_scheduler(frame: pd.DataFrame, *, model: dict | None = None, alloc=None, channel=None,
                       backlog=None, resolution=None, time_column=None, by=None) -> dict:
    """Which scheduler explains the frame, or an honest "cannot tell".

    Returns a dict: ``scheduler`` (``rr``, ``maxcir``, ``pf``, ``backlog``, or ``"unknown"``
    when the data are out of the model's distribution), ``best_guess`` and ``probability``
    (the model's top class, also when unknown), ``probabilities``, ``confident`` (top
    probability >= :data:`CONFIDENT_PROBABILITY` and nothing out of distribution),
    ``reasons`` (why not confident / why unknown), ``view`` (cell or user), ``users_used``
    (the series taken as users), ``ignored`` (series left out, with the reason), ``columns``,
    ``samples``, ``sample_period_s``, ``pf_time_constant_*`` when PF is the answer,
    ``allocation`` (how an allocation log was read: direction, slot, rate; None for other
    frames) and the model's held-out accuracy. It never raises on a readable frame with an allocation column;
    the grid options are those of :func:`~airlink.inference.frames.prepare`.
    """
    ignored = []
    if by is None and "carrier" in frame.columns and frame["carrier"].nunique() > 1:
        by = ["carrier"]  # a per-carrier MAC log: its carriers are examined below, never mixed
    obs = observe(frame, alloc=alloc, channel=channel, backlog=backlog, resolution=resolution,
                  time_column=time_column, by=by, require_channel=False, require_alloc=False)
    groups = _carrier_groups(obs)
    if groups and any(len(v) > 1 for v in groups.values()):
        keep = []
        for device, idx in groups.items():
            served = np.nansum(obs.alloc[:, idx], axis=0)
            main = idx[int(np.argmax(served))] if served.size else idx[0]
            keep.append(main)
            for i in idx:
                if i != main:
                    ignored.append(dict(series=obs.users[i], reason=f"another carrier of device {device!r} "
                                        f"(carrier aggregation: one UE's cells, not competing users); "
                                        f"its carrier with the most allocation, {obs.users[main]!r}, is used"))
        obs = _subset(obs, sorted(keep))
    view = "cell" if obs.alloc.shape[1] > 1 else "user"
    alone = lone_user(obs)
    if alone:
        return dict(view=view, users_used=obs.users or [obs.columns["alloc"] or "-"], ignored=ignored,
                    columns=obs.columns, users=int(obs.alloc.shape[1]), samples=int(obs.alloc.shape[0]),
                    sample_period_s=obs.period_s, scheduler="unknown", cannot_tell=alone, best_guess=None,
                    probability=float("nan"), probabilities={}, reasons=[alone], confident=False,
                    pf_time_constant_tti=None, pf_time_constant_s=None, pf_time_constant_resolved=None,
                    model=None, allocation=frame.attrs.get("allocation"))
    reasons = out_of_distribution(obs, view)
    model = model or load_scheduler_model()
    clf = model["models"][view]
    out = dict(view=view, users_used=obs.users or [obs.columns["alloc"] or "-"], ignored=ignored,
               columns=obs.columns, users=int(obs.alloc.shape[1]), samples=int(obs.alloc.shape[0]),
               sample_period_s=obs.period_s, cannot_tell=None, allocation=frame.attrs.get("allocation"))
    computable = obs.alloc.shape[0] >= 3 and (np.nan_to_num(obs.alloc) > 0).any() and np.isfinite(obs.channel).any()
    if computable:
        with np.errstate(all="ignore"):
            feats = scheduler_features(obs, view=view)
        feats = np.nan_to_num(feats)
        proba = clf.predict_proba(np.atleast_2d(feats))[0]
        probs = {str(c): float(p) for c, p in zip(clf.classes_, proba)}
        best = max(probs, key=probs.get)
    else:
        probs, best = {}, None
    out.update(best_guess=best, probability=probs.get(best, float("nan")) if best else float("nan"),
               probabilities=probs)
    if best is not None and probs[best] < CONFIDENT_PROBABILITY:
        reasons.append(f"top probability {probs[best]:.2f} < {CONFIDENT_PROBABILITY}: below this the held-out "
                       f"answers were right little more often than a coin")
    ood = bool(out_of_distribution(obs, view))
    out["scheduler"] = "unknown" if ood or best is None else best
    out["reasons"] = reasons
    out["confident"] = bool(best is not None and not reasons)
    if best == "pf" and not ood:
        pf = estimate_pf_time_constant(obs)
        out.update(pf_time_constant_tti=pf["tc_samples"], pf_time_constant_s=pf["tc_s"],
                   pf_time_constant_resolved=pf["resolved"])
    else:
        out.update(pf_time_constant_tti=None, pf_time_constant_s=None, pf_time_constant_resolved=None)
    out["model"] = dict(description=f"random forest ({view} view), trained on {model['n_runs']} simulated runs",
                        heldout_accuracy=model["heldout_accuracy"][view],
                        heldout_by_kind=model["heldout_by_kind"][view], version=model["version"])
    return out
