"""Put several frames on one time grid, and estimate the clock offset between two captures.

:func:`align` bins each frame's ``time`` onto a common grid of ``resolution`` (aligned to
the Unix epoch) and aggregates every numeric column with a rule:

* ``mean`` (default for levels: dBm, dB, ms, rates in ``_bps``, windows, MCS, ...),
* ``sum`` (default for amounts and counts: ``_bytes``, ``_packets``, ``packets``,
  ``retransmissions``, ``drops``, ``dupacks``, ...),
* ``last`` (default for categories and text),
* ``rate``: sum of a ``_bytes`` column turned into bit/s (``x * 8 / resolution``), named
  ``..._bps`` (e.g. ``served_bytes`` -> ``served_bps``).

``how`` overrides: one rule for every column, or ``{column: rule}``. Frames with key columns
(``flow``, ``direction``, ``user``, ``carrier``, ``cell_id``) are spread into one column per key
(``name.column[key]``). The result has one row per grid step from the earliest to the latest
time in any frame (gaps stay NaN for means, 0 for sums).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from airlink.traces.errors import AirlinkError
from airlink.traces.units import parse_duration

KEYS = ("flow", "direction", "user", "carrier", "cell_id")
SUM_SUFFIX = ("_bytes", "_packets")
SUM_NAMES = {"packets", "bytes", "retransmissions", "fast_retransmissions", "timeout_retransmissions",
             "spurious_retransmissions", "dupacks", "zero_windows", "frame_errors",
             "harq_retransmissions", "rlp_retransmissions", "drops"}
RULES = ("mean", "sum", "last", "rate", "max", "min", "median")


def default_rule(column: str, dtype) -> str:
    if not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return "last"
    if column.endswith(SUM_SUFFIX) or column in SUM_NAMES:
        return "sum"
    return "mean"


def _ns(res) -> int:
    try:
        r = parse_duration(res)
    except AirlinkError:
        raise AirlinkError(f"resolution {res!r}: expected a duration such as 100ms or 1s") from None
    ns = int(r * 10**9)
    if ns <= 0:
        raise AirlinkError(f"resolution must be positive, got {res!r}")
    return ns


def align(frames, resolution="1s", how=None) -> pd.DataFrame:
    """One frame on a common grid: ``time`` plus ``name.column`` per input column.

    ``frames`` is a dict ``{name: frame}`` or a list (named ``f0``, ``f1``, ...). See the module
    notes for the aggregation rules and ``how``.
    """
    if not isinstance(frames, dict):
        frames = {f"f{i}": f for i, f in enumerate(frames)}
    if not frames:
        raise AirlinkError("align needs at least one frame")
    res = _ns(resolution)
    if isinstance(how, str) and how not in RULES:
        raise AirlinkError(f"unknown aggregation {how!r} (one of {', '.join(RULES)})")
    binned = {}
    lo, hi = None, None
    for name, fr in frames.items():
        if "time" not in fr.columns and fr.index.name == "time":
            fr = fr.reset_index()
        if "time" not in fr.columns:
            raise AirlinkError(f"frame {name!r} has no time column")
        t = pd.DatetimeIndex(fr["time"])
        if t.tz is None:
            t = t.tz_localize("UTC")
        b = t.asi8 // res
        if len(b):
            lo = b.min() if lo is None else min(lo, b.min())
            hi = b.max() if hi is None else max(hi, b.max())
        binned[name] = (fr, b)
    if lo is None:
        return pd.DataFrame({"time": pd.Series([], dtype="datetime64[ns, UTC]")})
    grid = np.arange(lo, hi + 1)
    out = {"time": pd.to_datetime(grid * res, unit="ns", utc=True)}
    for name, (fr, b) in binned.items():
        keys = [k for k in KEYS if k in fr.columns]
        data = fr.drop(columns=["time"]).copy()
        data["_bin"] = b
        for col in [c for c in data.columns if c not in keys and c != "_bin"]:
            rule = (how.get(col) if isinstance(how, dict) else how) or default_rule(col, data[col].dtype)
            if rule not in RULES:
                raise AirlinkError(f"unknown aggregation {rule!r} for {col!r} (one of {', '.join(RULES)})")
            agg = "sum" if rule == "rate" else rule
            if agg != "last" and not pd.api.types.is_numeric_dtype(data[col].dtype):
                raise AirlinkError(f"cannot take the {rule} of non-numeric column {name}.{col}")
            g = data.groupby(["_bin", *keys], observed=True)[col].agg(agg)
            if keys:
                g = g.unstack(keys)
                series = {f"[{','.join(map(str, k if isinstance(k, tuple) else (k,)))}]": g[k]
                          for k in g.columns}
            else:
                series = {"": g}
            outcol = col[:-len("_bytes")] + "_bps" if rule == "rate" and col.endswith("_bytes") else col
            for suffix, s in series.items():
                v = s.reindex(grid)
                if agg == "sum":
                    v = v.fillna(0)
                if rule == "rate":
                    v = v * 8e9 / res
                out[f"{name}.{outcol}{suffix}"] = v.to_numpy()
    frame = pd.DataFrame(out)
    frame.attrs["resolution_s"] = res / 1e9
    return frame


def estimate_clock_offset(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """Clock offset of capture ``b`` relative to capture ``a`` of the same traffic.

    Packets are matched on (src, dst, sport, dport, seq, ack, ip_len, tsval). With matches in
    both directions, ``delta = t_b - t_a`` is ``offset + owd`` for packets going a->b and
    ``offset - owd`` for b->a; assuming equal minimum one-way delays,
    ``offset = (min(delta_ab) + max(delta_ba)) / 2``. With one direction only, the minimum
    (or maximum) delta is returned with ``symmetric=False`` (offset plus the one-way delay).

    Returns ``offset_s``, ``owd_min_s`` (one-way delay estimate), ``matched``, ``symmetric``.
    """
    cols = [c for c in ("src", "dst", "sport", "dport", "seq", "ack", "ip_len_bytes", "tsval")
            if c in a.columns and c in b.columns]
    if not {"src", "dst"} <= set(cols):
        raise AirlinkError("clock offset needs two packets frames (read_pcap)")

    def prep(f):
        d = f[cols].copy()
        for c in ("src", "dst"):
            d[c] = d[c].astype(str)
        d["_t"] = pd.DatetimeIndex(f["time"]).asi8
        return d.drop_duplicates(cols, keep="first")
    pa, pb = prep(a), prep(b)
    m = pa.merge(pb, on=cols, suffixes=("_a", "_b"))
    if m.empty:
        raise AirlinkError("no packets match between the two captures (different traffic or filters?)")
    delta = (m["_t_b"] - m["_t_a"]).to_numpy(np.float64) / 1e9
    # direction: the side where the packet was seen first in most flows is the sender side;
    # packets from a's host have src equal to an address that appears as src first in a
    first_src = str(a["src"].iloc[0])
    ab = (m["src"] == first_src).to_numpy()
    if ab.any() and (~ab).any():
        lo_ab = float(np.min(delta[ab]))
        hi_ba = float(np.max(delta[~ab]))
        if lo_ab < hi_ba:                       # a's first source sits on the b side: swap
            lo_ab, hi_ba = float(np.min(delta[~ab])), float(np.max(delta[ab]))
        offset = (lo_ab + hi_ba) / 2
        owd = (lo_ab - hi_ba) / 2
        return {"offset_s": offset, "owd_min_s": owd, "matched": int(len(m)), "symmetric": True}
    return {"offset_s": float(np.min(delta)), "owd_min_s": float("nan"), "matched": int(len(m)),
            "symmetric": False}
