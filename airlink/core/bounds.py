"""Declared ranges of airlink's numeric parameters, and the budgets of sizes derived from them.

A :class:`Bound` is one parameter's range, declared once here: the library checks values
with :meth:`Bound.check` (the error names the parameter), the command line declares its
option with ``airlink.cli._common.bounded`` (the error names the option) and the experiment
and sweep specs use :meth:`Bound.annotated` as the field's type (the error names the key
path). A value outside the range, NaN, an infinity or a number too big for its type is
refused with the range, e.g. ``opportunity_bytes: must be between 1 and 65535 (got 0)``.

A *budget* bounds a size that several parameters multiply into (grid points = duration /
resolution, TTIs x users, surrogates x samples): :func:`check_budget` is called before
anything of that size is allocated and says what would have been needed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

from .errors import AirlinkError


class BoundError(AirlinkError, ValueError):
    """A value outside its declared range, or a derived size beyond its budget."""


def _fmt(value, unit: str = "") -> str:
    """A value as the message shows it: integers exactly (long ones shortened), floats with
    ``%g``, durations in s/ms/us."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        text = str(value)
        if unit:
            return (text if len(text) <= 7 else f"{float(value):g}") + f" {unit}"
        return text if len(text) <= 21 else f"{float(value):.3g}"
    if isinstance(value, (Fraction, Real)):
        v = float(value)
        if unit == "s" and math.isfinite(v) and 0 < abs(v) < 1:
            return f"{v * 1000:g} ms" if abs(v) >= 1e-3 else f"{v:g} s"
        return f"{v:g}" + (f" {unit}" if unit else "")
    text = str(value)
    return repr(text if len(text) <= 40 else text[:40] + "...")


@dataclass(frozen=True)
class Bound:
    """The range of one numeric parameter.

    ``lo``/``hi`` are the limits (None: unbounded on that side), inclusive unless
    ``lo_open``/``hi_open``; ``integer`` asks for a whole number; ``unit`` is the unit the
    value is in (``"s"`` for durations given as strings with a unit, ``"bit/s"`` for rates),
    shown with the limits. Every value must be finite.
    """

    name: str
    lo: float | int | Fraction | None = None
    hi: float | int | Fraction | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    unit: str = ""

    def describe(self) -> str:
        """``between 1 and 65535``, ``at least 0``, ``greater than 0 and at most 1``."""
        lo = None if self.lo is None else _fmt(self.lo, self.unit)
        hi = None if self.hi is None else _fmt(self.hi, self.unit)
        if lo is not None and hi is not None and not (self.lo_open or self.hi_open):
            return f"between {lo} and {hi}"
        parts = []
        if lo is not None:
            parts.append(f"greater than {lo}" if self.lo_open else f"at least {lo}")
        if hi is not None:
            parts.append(f"less than {hi}" if self.hi_open else f"at most {hi}")
        return " and ".join(parts) or "finite"

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be between 1 and 65535 (got 0)"``), or None."""
        kind = "a whole number" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, (Real, Fraction)):
            return f"must be {kind} {self.describe()} (got {_fmt(value)})"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be {self.describe()} (got {value})"
        if self.integer and (value != int(value)):
            return f"must be a whole number {self.describe()} (got {_fmt(value, self.unit)})"
        lo, hi = self.lo, self.hi
        low = lo is not None and (value <= lo if self.lo_open else value < lo)
        high = hi is not None and (value >= hi if self.hi_open else value > hi)
        if low or high:
            return f"must be {self.describe()} (got {_fmt(value, self.unit)})"
        return None

    def check(self, value, name: str | None = None):
        """``value`` if it lies in the range, else :class:`BoundError` ``NAME: must be ...``."""
        why = self.problem(value)
        if why is not None:
            raise BoundError(f"{name or self.name}: {why}")
        return int(value) if self.integer and not isinstance(value, int) else value

    def annotated(self, base=None):
        """A pydantic field type (``Annotated[int, AfterValidator(...)]``) that checks this
        range; the spec's error names the key path and shows the range."""
        from typing import Annotated

        from pydantic import AfterValidator

        def check(value):
            if value is None:
                return value
            why = self.problem(value)
            if why is not None:
                raise ValueError(why)
            return value
        return Annotated[base if base is not None else (int if self.integer else float), AfterValidator(check)]


def check_budget(need, budget: int, what: str, why: str = "") -> None:
    """:class:`BoundError` unless ``need`` (a derived size) is at most ``budget``.

    ``what`` names the size and how it was derived (``"--resolution 1e-12 s over 14.5 s"``
    is the caller's part, e.g. ``"resolution 1e-12 s over 14.5 s needs"``); the message
    reads ``"<what> <need> <why>; at most <budget>"``.
    """
    if not (need <= budget):          # also refuses NaN
        need_text = f"{float(need):.3g}" if need >= 1e6 or not float(need).is_integer() else f"{int(need)}"
        raise BoundError(f"{what} {need_text}{' ' + why if why else ''}; at most {budget:.3g}")


# -------------------------------------------------------------------------------- budgets
MAX_GRID_POINTS = 10**8
"""Steps of a regular time grid (duration / resolution) that one series may have: 10^8
float64 steps are 800 MB per column."""

MAX_GRID_VALUES = 10**8
"""Values of a dense grid of several columns (steps x series x data columns): 10^8 float64
values are 800 MB per copy, a few GB while pandas builds it - an all-user NR-Scope log of
137 RNTIs on 301 715 slots of 1 ms with its 16 columns would be 6.6 x 10^8 values, some 25
GB; that is refused with the figures instead of being killed by the kernel."""

MAX_TRACE_TTIS = 10**8
"""TTIs of a capacity trace (duration / TTI): 800 MB per user in float64."""

MAX_MAHIMAHI_OPPORTUNITIES = 10**8
"""Lines of a Mahimahi trace written from a capacity trace (total bytes / opportunity size):
one timestamp each, ~1 GB of text at 10^8."""

MAX_USER_TTIS = 2 * 10**8
"""TTIs x users of a simulated or replayed capacity trace (8 bytes each: 1.6 GB)."""

MAX_LOGGED_USER_TTIS = 2 * 10**7
"""TTIs x users of a simulation that keeps its per-TTI MAC log (about 100 bytes per user and
TTI over the log's columns and the SINR series: ~2 GB); without the log the capacity's
budget :data:`MAX_USER_TTIS` applies."""

MAX_USER_SUBCHANNELS = 10**6
"""Users x subchannels of one TTI (the channel's per-TTI SINR matrix; a simulator chunk holds
at least one TTI of it)."""

MAX_NMI_WORK = 10**10
"""(surrogates + bootstrap + 1) x samples x lags of a factor ranking: the number of joint-
histogram updates, about an hour of CPU at the top of the budget."""

MAX_JOINT_BINS = 10**7
"""Cells of one joint histogram (bins of the target x bins of a factor)."""

MAX_SWEEP_POINTS = 10**5
"""Runs of one sweep (the product of the grid's value counts times the seeds)."""


# --------------------------------------------------------------------- declared ranges
SEED = Bound("seed", 0, 2**63 - 1, integer=True)
"""A random seed: a non-negative integer that fits int64 (numpy's SeedSequence and Parquet)."""

OPPORTUNITY_BYTES = Bound("opportunity_bytes", 1, 65535, integer=True)
"""Bytes of one Mahimahi delivery opportunity (an IP packet: at most 65535)."""

USERS = Bound("n_users", 1, 10_000, integer=True)
"""Users of a simulated cell."""

CELL_UES = Bound("users", 1, 64, integer=True)
"""UEs of a live cell shell: one network namespace, veth pair and queue each."""

SUBCHANNELS = Bound("n_subchannels", 1, 10_000, integer=True)
"""Subchannels (resource blocks) of a simulated cell."""

BUFFER_PACKETS = Bound("buffer_packets", 0, 10**7, integer=True)
"""Per-user base-station buffer in packets (0: unbounded)."""

CSI_DELAY_TTI = Bound("csi_delay_tti", 0, 10_000, integer=True)
"""Channel-report feedback delay in TTIs."""

PF_WINDOW = Bound("pf_window", 0, 10**7, integer=True)
"""PF averaging window t_a in TTIs (0: the EWMA constant pf_a alone)."""

PF_A = Bound("pf_a", 0, 1, lo_open=True)
"""PF averaging constant a of the EWMA, in (0, 1]."""

LAMBDA = Bound("lam", 0, 1000)
"""Fairness exponent of the generalised PF scheduler."""

SPEED_KMH = Bound("speed_kmh", 0, 1000)
"""User speed in km/h (Doppler of the fading channel)."""

SIM_DURATION = Bound("duration", 0, 7 * 86400, lo_open=True, unit="s")
"""Simulated time (its TTIs are also budgeted)."""

TTI = Bound("tti", Fraction(1, 10**6), 60, unit="s")
"""A TTI length: 1 us to 60 s (per-second logs make 1 s TTIs)."""

TRACE_DURATION = Bound("duration", 0, 7 * 86400, lo_open=True, unit="s")
"""Length of a constant-rate trace."""

FILL_LIMIT = Bound("fill_limit", 0, 7 * 86400, unit="s")
"""Longest gap of a rate log that ``trace from-log`` fills by holding or interpolating."""

DEFAULT_FILL_LIMIT = "10s"
"""The longest gap ``from_log`` fills by default (``airlink trace from-log --fill-limit``):
G-NetTrack logs every 1-3 s, so a longer gap is the logger stopped, not a slow sample."""

SESSION_GAP = Bound("session_gap", Fraction(1, 10**6), 7 * 86400, unit="s")
"""A silence of a rate log longer than this ends a session (``--split-sessions``)."""

DEFAULT_SESSION_GAP = "60s"
"""The silence that ends a session of a measured log (``split_sessions``, ``airlink trace
from-log --split-sessions``): longer than any logger's sampling gap, shorter than a pause
between two drives."""

PORT = Bound("port", 1, 65535, integer=True)
"""A TCP/UDP port."""

RECORD_SECONDS = Bound("seconds", 0, 86400, lo_open=True)
"""Length in seconds of one phase of ``airlink record`` (light trains, each heavy direction)."""

TRAIN_GAP_MS = Bound("train_gap_ms", 0, 60_000, lo_open=True)
"""Time in milliseconds between the recorder's packet trains."""

OFFSET_PROBES = Bound("offset_probes", 1, 10_000, integer=True)
"""Echo probes per packet size when the recorder measures the size offset."""

PEER_TIMEOUT_S = Bound("peer_timeout_s", 0, 3600, lo_open=True)
"""Silence in seconds after which a recorder counts its server as lost."""

RATE_BPS = Bound("rate", 0, 10**13, unit="bit/s")
"""A link rate: up to 10 Tbit/s."""

RESOLUTION = Bound("resolution", Fraction(1, 10**6), 86400, unit="s")
"""Step of an analysis time grid: 1 us to one day (the grid's size is budgeted as well)."""

TCP_RESOLUTION = "1s"
"""Default step of the TCP time series (``airlink collect --resolution``, the experiment's
``collect.resolution``): Mattar et al.'s 1 s samples."""

WINDOW = Bound("window", Fraction(1, 10**6), 86400, unit="s")
"""A window of a windowed statistic (rate percentiles, fairness, backlog curve, plot bins)."""

CELL_WINDOW = "1s"
"""Default window of a measured cell's statistics (``analyze_cell``, ``airlink infer cell``):
active users, Jain's index and utilisation per second."""

MAX_LAG = Bound("max_lag", 0, 86400, unit="s")
"""Largest |lag| of a lag scan."""

BINS = Bound("bins", 2, 4096, integer=True)
"""Bins per series of an NMI estimate."""

SURROGATES = Bound("surrogates", 0, 100_000, integer=True)
"""Circular-shift surrogates of a significance test (0: none)."""

BOOTSTRAP = Bound("bootstrap", 0, 100_000, integer=True)
"""Block-bootstrap resamples of an interval (0: none)."""

# Defaults of the analyses above, each declared once: the library function's signature
# (airlink.inference.rank_factors, backlog_dependence, airlink.traces.compare), its
# command-line option and the experiment spec's field read them from here.

NMI_MAX_LAG = "60s"
"""Largest |lag| of a factor ranking (``rank_factors``, ``airlink infer nmi``): a minute of
1 s samples, Mattar et al.'s scale for RF/MAC factors of TCP; clipped to the series' length."""

BACKLOG_MAX_LAG = "2s"
"""Largest |lag| of ``backlog_dependence`` (``airlink infer backlog``): the assigned rate
follows a burst within a second (Mattar et al.); a scan past the on-off period of their
sources (1 s on, 5 s off) would match one burst with the next."""

BACKLOG_WINDOW = "1s"
"""Window of the assigned-rate vs sending-rate curve (Mattar et al.'s 1 s samples)."""

NMI_BINS = 16
"""Bins per series of an NMI estimate."""

NMI_SURROGATES = 100
"""Circular-shift surrogates behind a p-value (the smallest p-value is then 1/101)."""

NMI_BOOTSTRAP = 100
"""Block-bootstrap resamples behind an interval."""

NMI_ALPHA = 0.05
"""Significance level of a factor's p-value."""

COMPARE_MAX_LAG = "3s"
"""Largest offset searched when two trace columns are compared (``compare``,
``airlink trace from-log --compare``)."""

MAX_PACKETS = Bound("max_packets", 1, 10**10, integer=True)
"""Packets analysed at a time by airlink collect."""

CELL_PRBS = Bound("cell_prbs", 1, 1000, integer=True)
"""PRBs of one carrier (NR has at most 275)."""

TOP = Bound("top", 0, 10**6, integer=True)
"""Rows of a listing."""

DELAY_MS = Bound("delay_ms", 0, 100_000)
"""A one-way delay in milliseconds (up to 100 s)."""

PROBABILITY = Bound("probability", 0, 1)
"""A loss probability."""

WORKERS = Bound("workers", 1, 4096, integer=True)
"""Worker processes or concurrent runs."""

WARMUP_BYTES = Bound("warmup_bytes", 0, 10**10, integer=True, unit="bytes")
"""Bytes every UE of a cell must have queued before its TTI clock starts."""

MAX_LINE_BYTES = 1 << 20
"""Bytes of one line of a text table (CSV, TSV, log) a reader accepts: a row of a measured
log is well under a kilobyte; a longer line is a damaged or foreign file."""

MAX_COLUMNS = 10_000
"""Columns of a text table's header line."""

EARLIEST_LOG_TIME_S = 631_152_000
"""1990-01-01T00:00:00Z in Unix seconds: a log time before it is a damaged value (or a
clock never set), not a measurement."""

FUTURE_SLACK_S = 86_400
"""How far past the reading machine's clock a log time may lie (clocks of the measuring and
the reading machine differ, time zones are mislabelled): one day."""

# ------------------------------------------------------- simulator engine parameters
HARQ_MAX_TX = Bound("harq_max_tx", 1, 64, integer=True)
"""Transmissions of one HARQ block (1: no retransmissions)."""

HARQ_RING = Bound("harq_ring", 1, 10**6, integer=True)
"""Slots of the simulator's HARQ ring buffer."""

CHUNK_ELEMENTS = Bound("chunk_elements", 1, 10**9, integer=True)
"""SINR values the simulator generates per chunk of TTIs."""

LA_INTERVAL = Bound("la_interval", 1, 10**6, integer=True)
"""TTIs between outer-loop link-adaptation updates."""

N_OSCILLATORS = Bound("n_oscillators", 1, 10_000, integer=True)
"""Sinusoids of the sum-of-sinusoids fading channel."""
