"""Fairness and scheduling-jitter metrics (Jain's index, fairness gap, resource fractions,
selection / active-time / retransmission ratios, inter-service gaps).

They live in :mod:`airlink.core.fairness`, which the simulator shares without importing
inference; this module keeps their ``airlink.inference.fairness`` names.
"""
from __future__ import annotations

from airlink.core.fairness import (active_time_ratios, fairness_gap, fairness_summary, gap_stats, jain_index,
                                   min_max_ratio, resource_fractions, retransmission_ratios,
                                   selection_ratios, service_gaps)

__all__ = ["jain_index", "fairness_gap", "resource_fractions", "min_max_ratio", "selection_ratios",
           "active_time_ratios", "retransmission_ratios", "service_gaps", "gap_stats", "fairness_summary"]
