"""Result objects of the inference reports: a mapping (so ``rep["overall"]`` keeps working)
that also answers the project's convention - ``to_dict()`` gives plain JSON-able values
(frames as lists of records, NaN as None), ``to_frame()`` the report's main table.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _plain(value):
    """A JSON-able copy: frames -> records, numpy scalars -> Python, NaN/inf -> None."""
    if isinstance(value, pd.DataFrame):
        frame = value.reset_index() if value.index.name is not None else value
        return [_plain(r) for r in frame.to_dict(orient="records")]
    if isinstance(value, pd.Series):
        return _plain(value.to_dict())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (pd.Timestamp, pd.Timedelta)):
        return str(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Report(dict):
    """A report: keys as documented by the function that made it; ``table`` names the key
    of its main table (returned by :meth:`to_frame`)."""

    table: str = ""

    def to_dict(self) -> dict:
        return _plain(dict(self))

    def to_frame(self) -> pd.DataFrame:
        value = self.get(self.table)
        if isinstance(value, pd.DataFrame):
            return value.copy()
        return pd.DataFrame(value or [])


class FairnessReport(Report):
    """:func:`~airlink.inference.fairness_report`: ``overall``, ``users`` (the table), ``windows``."""
    table = "users"


class BacklogReport(Report):
    """:func:`~airlink.inference.backlog_dependence`: ``nmi_backlog``, ``nmi_channel``,
    ``backlog_dominates``, ``curve`` (the table: assigned vs sending rate), ``throttle_onset_bps``,
    ``response_lag_s``."""
    table = "curve"


class JitterReport(Report):
    """:func:`~airlink.inference.jitter_report`: ``served`` (the column used), ``users`` (the
    table: count, mean, std, CoV and max of the inter-service gaps, seconds), ``sample_period_s``
    and ``cannot_tell`` (None, or why the samples are too coarse for gaps)."""
    table = "users"
