"""The Trace: per-TTI values on an exact regular grid, for one or more users.

A capacity Trace holds **bytes per TTI** for each user (column), with the TTI length kept
as an exact :class:`fractions.Fraction` of a second: 1 ms, 1.667 ms (= 1/600 s, an EV-DO
slot), 2 ms, 0.5 ms and 0.125 ms are all exact, so the start time of TTI ``k`` is
``k * tti`` with no rounding drift however long the trace. Values are float64 so that
byte-granular capacities (e.g. 187.5 bytes per 0.125 ms TTI at 12 Mbit/s) stay exact
on average; consumers carry the fractional remainder forward.

Metadata (``meta``) travels with the values into every file: ``source``, ``scheduler``,
``parameters``, ``seed`` and ``airlink_version``, plus anything a format needs to
reproduce its input exactly.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from airlink.core.bounds import MAX_TRACE_TTIS, RATE_BPS, TTI, check_budget
from airlink.core.errors import AirlinkError, FormatError
from airlink.core.units import parse_tti

if TYPE_CHECKING:
    import pandas as pd

_META_KEY = b"airlink"
UNITS = ("bytes", "bps", "db", "count")


def _version() -> str:
    try:
        from airlink._version import __version__
        return __version__
    except Exception:  # pragma: no cover - traces must work stand-alone
        return "unknown"


@dataclass
class Trace:
    """Per-TTI values for one or more users on an exact time grid.

    Parameters
    ----------
    values : array (n_tti,) or (n_tti, n_users)
        Per-TTI values; for capacity traces, bytes that may be served in each TTI.
    tti : Fraction, str or float
        TTI length in **seconds** as a Fraction, or a string such as ``"1ms"``,
        ``"1.667ms"`` or ``"1/600s"`` (see :func:`airlink.core.units.parse_tti`).
    users : sequence of str, optional
        Column names, default ``"1", "2", ...`` (users are numbered from 1, as in the papers).
    unit : str
        ``"bytes"`` (per TTI) for capacity traces.
    meta : dict
        Provenance: ``source``, ``scheduler``, ``parameters``, ``seed``; JSON-serialisable.
    """

    values: np.ndarray
    tti: Fraction
    users: list = field(default_factory=list)
    unit: str = "bytes"
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.tti, Fraction):
            self.tti = parse_tti(self.tti) if isinstance(self.tti, str) else Fraction(self.tti)
        if self.tti <= 0:
            raise AirlinkError("TTI must be positive")
        v = np.asarray(self.values, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2:
            raise AirlinkError(f"trace values must be 1-D or 2-D, got shape {v.shape}")
        self.values = v
        if not self.users:
            self.users = [str(i + 1) for i in range(v.shape[1])]
        self.users = [str(u) for u in self.users]
        if len(self.users) != v.shape[1]:
            raise AirlinkError(f"{len(self.users)} user names for {v.shape[1]} columns")
        if self.unit not in UNITS:
            raise AirlinkError(f"unknown trace unit {self.unit!r} (one of {', '.join(UNITS)})")
        if self.unit == "bytes" and v.size and not (np.isfinite(v).all() and (v >= 0).all()):
            raise AirlinkError("capacity must be finite and non-negative in every TTI")
        self.meta = dict(self.meta)
        self.meta.setdefault("airlink_version", _version())

    # -- shape and time -------------------------------------------------------------
    @property
    def n_tti(self) -> int:
        return self.values.shape[0]

    @property
    def n_users(self) -> int:
        return self.values.shape[1]

    @property
    def tti_ms(self) -> float:
        return float(self.tti * 1000)

    @property
    def duration(self) -> Fraction:
        """Exact duration in seconds."""
        return self.tti * self.n_tti

    def tti_start_ns(self, k=None) -> np.ndarray:
        """Start time of TTI ``k`` (all TTIs by default) in integer nanoseconds, exact."""
        k = np.arange(self.n_tti, dtype=np.int64) if k is None else np.asarray(k, dtype=np.int64)
        ns = self.tti * 10**9
        return (k * ns.numerator) // ns.denominator

    def column(self, user) -> np.ndarray:
        """Values of one user, by name (``"1"``) or by 1-based number (``1``)."""
        name = str(user)
        if name not in self.users:
            raise AirlinkError(
                f"no user {user!r} in this trace (users: {', '.join(self.users)})")
        return self.values[:, self.users.index(name)]

    def select(self, user) -> "Trace":
        """A one-user Trace."""
        return Trace(self.column(user).copy(), self.tti, [str(user)], self.unit,
                     {**self.meta, "selected_user": str(user)})

    # -- derived quantities ---------------------------------------------------------
    def rate_bps(self) -> np.ndarray:
        """Per-TTI rate in bit/s, shape (n_tti, n_users) (capacity traces only)."""
        self._need_bytes()
        return self.values * 8 / float(self.tti)

    def cumulative_bytes(self, t_s) -> np.ndarray:
        """Cumulative capacity up to times ``t_s`` (seconds, array), per user.

        Capacity is taken as spread uniformly within each TTI (a fluid within the TTI),
        so the value is exact at TTI boundaries and linear between them.
        """
        self._need_bytes()
        t = np.asarray(t_s, dtype=np.float64)
        cum = np.vstack([np.zeros((1, self.n_users)), np.cumsum(self.values, axis=0)])
        pos = np.clip(t / float(self.tti), 0, self.n_tti)
        k = np.minimum(np.floor(pos).astype(np.int64), self.n_tti - 1 if self.n_tti else 0)
        frac = (pos - k)[..., None]
        return cum[k] + frac * (cum[k + 1] - cum[k])

    def mean_rate_bps(self) -> np.ndarray:
        self._need_bytes()
        return self.values.sum(axis=0) * 8 / float(self.duration) if self.n_tti else np.zeros(self.n_users)

    def _need_bytes(self):
        if self.unit != "bytes":
            raise AirlinkError(f"this needs a capacity trace in bytes per TTI, not {self.unit!r}")

    # -- conversions ----------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """Long frame of the ``capacity`` kind: ``time`` (UTC), ``user``, ``capacity_bytes``."""
        import pandas as pd     # here, not at import: a shell reading a trace needs no pandas
        start = int(self.meta.get("start_ns", 0))
        t = pd.to_datetime(self.tti_start_ns() + start, utc=True)
        frames = [pd.DataFrame({"time": t, "user": u, "capacity_bytes": self.values[:, i]})
                  for i, u in enumerate(self.users)]
        return pd.concat(frames, ignore_index=True).sort_values(["time", "user"], kind="stable",
                                                                ignore_index=True)

    def to_wide(self) -> pd.DataFrame:
        """Wide frame indexed by UTC ``time``, one column per user."""
        import pandas as pd
        start = int(self.meta.get("start_ns", 0))
        idx = pd.DatetimeIndex(pd.to_datetime(self.tti_start_ns() + start, utc=True), name="time")
        return pd.DataFrame(self.values, index=idx, columns=list(self.users))

    def __repr__(self) -> str:
        return (f"Trace({self.n_tti} TTIs x {self.n_users} users, tti={self.tti_ms:g} ms, "
                f"unit={self.unit}, source={self.meta.get('source', '?')!r})")

    def __eq__(self, other) -> bool:
        return (isinstance(other, Trace) and self.tti == other.tti and self.users == other.users
                and self.unit == other.unit and np.array_equal(self.values, other.values))

    # -- Parquet --------------------------------------------------------------------
    def write_parquet(self, path) -> Path:
        """Write as Parquet: one float64 column per user (``user_<name>``), metadata in the
        schema under the key ``airlink`` (JSON), including the exact TTI as ``"num/den"``."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        path = Path(path)
        from airlink.core.arrowarrays import numpy_array       # pa.table() would load pandas
        table = pa.Table.from_arrays([numpy_array(self.values[:, i], nan_is_null=False) for i in range(len(self.users))],
                                     names=[f"user_{u}" for u in self.users])
        header = {"kind": "trace", "tti_s": f"{self.tti.numerator}/{self.tti.denominator}",
                  "unit": self.unit, "users": self.users, "meta": jsonable(self.meta)}
        table = table.replace_schema_metadata({_META_KEY: json.dumps(header).encode()})
        from airlink.core.atomic import atomic_path
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path

    @classmethod
    def read_parquet(cls, path) -> "Trace":
        import pyarrow.parquet as pq
        path = Path(path)
        try:
            table = pq.read_table(path)
        except Exception as exc:
            raise FormatError(f"{path}: not a readable Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise FormatError(f"{path}: Parquet file has no airlink trace metadata")
        header = _trace_header(path, raw)
        tti, users = header["tti"], header["users"]
        missing = [f"user_{u}" for u in users if f"user_{u}" not in table.column_names]
        if missing:
            raise FormatError(f"{path}: metadata users: no column {missing[0]!r} in the file")
        if users:
            check_budget(table.num_rows * len(users), MAX_TRACE_TTIS, f"{path}: {table.num_rows} TTIs x "
                         f"{len(users)} users make", "values")
        try:
            values = np.column_stack([table.column(f"user_{u}").to_numpy(zero_copy_only=False).astype(np.float64)
                                      for u in users]) if users else np.zeros((table.num_rows, 0))
        except (ValueError, TypeError):
            raise FormatError(f"{path}: a user column does not hold numbers") from None
        if header["unit"] == "bytes" and values.size:
            # at most RATE_BPS.hi in every TTI (a finite, non-negative number of bytes)
            most = float(RATE_BPS.hi * tti / 8)
            bad = ~(np.isfinite(values) & (values >= 0) & (values <= most))
            if bad.any():
                row, col = map(int, np.argwhere(bad)[0])
                raise FormatError(f"{path}: user_{users[col]} row {row + 1}: capacity {float(values[row, col]):g} bytes "
                                  f"per TTI is not between 0 and {most:.3g} (a rate of {RATE_BPS.hi:.3g} bit/s)")
        return cls(values, tti, users, header["unit"], header["meta"])


def _trace_header(path: Path, raw: bytes) -> dict:
    """The checked ``airlink`` metadata of a Parquet trace: ``kind`` "trace", ``tti_s`` an
    exact "num/den" seconds within :data:`~airlink.core.bounds.TTI`, ``users`` a list of
    names, ``unit`` one of :data:`UNITS`, ``meta`` a mapping. A damaged field is a
    FormatError naming the file and the field."""
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise FormatError(f"{path}: airlink metadata is not valid JSON") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: airlink metadata: expected a JSON object, got {type(header).__name__}")
    if header.get("kind") != "trace":
        raise FormatError(f"{path}: holds an airlink {header.get('kind')!r}, not a trace")
    text = header.get("tti_s")
    num, sep, den = text.partition("/") if isinstance(text, str) else ("", "", "")
    if not (sep and num.strip().isdigit() and den.strip().isdigit() and len(text) <= 40):
        raise FormatError(f"{path}: metadata tti_s: expected exact seconds as 'num/den' (got {text!r})")
    if int(den) == 0:
        raise FormatError(f"{path}: metadata tti_s: zero denominator (got {text!r})")
    tti = Fraction(int(num), int(den))
    why = TTI.problem(tti)
    if why is not None:
        raise FormatError(f"{path}: metadata tti_s: {why}")
    users = header.get("users")
    if not isinstance(users, list) or not all(isinstance(u, (str, int)) and not isinstance(u, bool)
                                              for u in users):
        raise FormatError(f"{path}: metadata users: expected a list of user names (got {users!r:.60})")
    if header.get("unit") not in UNITS:
        raise FormatError(f"{path}: metadata unit: expected one of {', '.join(UNITS)} (got {header.get('unit')!r:.40})")
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise FormatError(f"{path}: metadata meta: expected a mapping (got {type(meta).__name__})")
    return {"tti": tti, "users": [str(u) for u in users], "unit": header["unit"], "meta": meta}


def jsonable(obj: Any):
    """``obj`` made JSON- and YAML-safe, recursively: numpy scalars and arrays become Python
    numbers and lists, Fractions ``"n/d"`` strings, paths strings, tuples lists, dict keys
    strings. Trace metadata and every JSON/YAML file airlink writes go through it."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Fraction):
        return f"{obj.numerator}/{obj.denominator}"
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def constant(rate_bps: float, duration_s, tti="1ms", users: Sequence[str] | None = None) -> Trace:
    """A constant-rate capacity Trace: ``rate_bps * tti / 8`` bytes in every TTI."""
    tti = parse_tti(tti) if not isinstance(tti, Fraction) else tti
    n = int(Fraction(duration_s) / tti) if not isinstance(duration_s, float) else int(round(duration_s / float(tti)))
    if rate_bps < 0:
        raise AirlinkError("rate must be non-negative")
    if n <= 0:
        raise AirlinkError("duration must hold at least one TTI")
    users = list(users) if users else ["1"]
    check_budget(n * len(users), MAX_TRACE_TTIS,
                 f"duration {float(duration_s):g} s at a TTI of {float(tti) * 1000:g} ms needs", "TTIs")
    per_tti = float(Fraction(rate_bps).limit_denominator(10**6) * tti / 8)
    vals = np.full((n, len(users)), per_tti)
    return Trace(vals, tti, users, "bytes",
                 {"source": "constant", "parameters": {"rate_bps": rate_bps,
                                                        "duration_s": float(n * tti)}})


#: the longest TTI the link shells serve, and the default of :func:`split_long_ttis`
MAX_LINK_TTI = Fraction(10, 1000)


def split_long_ttis(trace: Trace, *, max_tti=None) -> Trace:
    """The one rule for TTIs longer than a link serves (default 10 ms).

    A TTI of length ``T > max_tti`` becomes ``k = ceil(T / max_tti)`` equal sub-TTIs of
    ``T / k`` holding ``c / k`` bytes each, so every original TTI's total is exact and the
    duration is unchanged; ``meta["resampled_from_tti_s"]`` records the original TTI.
    A trace within the limit is returned as it is.
    """
    if max_tti is None:
        limit = MAX_LINK_TTI
    else:
        from .fromlog import _tti_of     # (pandas there: a shell never gives max_tti)
        limit = _tti_of(max_tti, "max_tti")
    if trace.tti <= limit:
        return trace
    k = -(-trace.tti // limit)
    k = int(k)
    vals = np.repeat(trace.values / k, k, axis=0)
    return Trace(vals, trace.tti / k, list(trace.users), trace.unit,
                 {**trace.meta, "resampled_from_tti_s": f"{trace.tti.numerator}/{trace.tti.denominator}"})
