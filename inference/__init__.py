"""Inference: what drives a scheduler and TCP, measured from time series (Mattar et al. and beyond).

Flat public API::

    import airlink.inference as inf
    inf.normalized_mutual_info(x, y)                 # Mattar et al.'s I_N = I(X;Y)/H(X) at lag 0
    scan = inf.lag_scan(x, y, max_lag=60)            # all lags at once; scan.peak, scan.peak_lag
    sig = inf.peak_significance(x, y, max_lag=60)    # p-value, threshold, bias-corrected, interval
    table = inf.rank_factors(frame, target="assigned_rate_bps", factors=["backlog_bytes", "sinr_db"])
    inf.jain_index([1, 2, 3]); inf.fairness_gap([1, 2, 3])

Sign convention for lags: a positive lag means the factor leads the target (see
:mod:`airlink.inference.lagscan`).
"""
from __future__ import annotations

from airlink.core.lazy import lazy_names

# Public name -> (module, attribute), loaded on first use (PEP 562): `import airlink.inference`
# imports nothing, the fairness metrics need numpy alone, and scipy's FFT (and scipy.special,
# which it imports) loads when a lag scan uses it.
_FROM = {
    "analysis": ("backlog_dependence", "fairness_report", "jitter_report", "rank_factors", "response_lag",
                 "throttle_onset"),
    "fairness": ("active_time_ratios", "fairness_gap", "fairness_summary", "gap_stats", "jain_index",
                 "min_max_ratio", "resource_fractions", "retransmission_ratios", "selection_ratios",
                 "service_gaps"),
    "frames": ("prepare", "read_frame", "read_frames", "with_time_index"),
    "information": ("BINNINGS", "NORMALIZATIONS", "Discretized", "discretize", "entropy", "entropy_from_counts",
                    "joint_counts", "mutual_info", "normalize", "normalized_mutual_info"),
    "lagscan": ("LagScan", "lag_counts", "lag_scan", "nmi_from_counts"),
    "surrogates": ("PeakSignificance", "peak_significance"),
    # the scheduler model pulls in the simulator and scikit-learn
    "scheduler": ("identify_scheduler", "SchedulerClassifier", "load_scheduler_model", "scheduler_features"),
}
_SUBMODULES = ("allocations", "analysis", "cell_logs", "fairness", "frames", "information", "lagscan",
               "pf_params", "results", "scheduler", "surrogates")

__getattr__, __dir__ = lazy_names(__name__, {name: (module, name) for module, names in _FROM.items()
                                             for name in names}, _SUBMODULES)

__all__ = [
    "discretize", "Discretized", "entropy", "entropy_from_counts", "joint_counts", "mutual_info",
    "normalized_mutual_info", "normalize", "BINNINGS", "NORMALIZATIONS",
    "lag_scan", "lag_counts", "nmi_from_counts", "LagScan",
    "peak_significance", "PeakSignificance",
    "rank_factors", "backlog_dependence", "fairness_report", "jitter_report", "throttle_onset",
    "response_lag",
    "jain_index", "fairness_gap", "resource_fractions", "min_max_ratio", "selection_ratios",
    "active_time_ratios", "retransmission_ratios", "service_gaps", "gap_stats", "fairness_summary",
    "read_frame", "read_frames", "with_time_index", "prepare",
    "identify_scheduler", "SchedulerClassifier", "load_scheduler_model",
]
