"""mm-link log files (``--uplink-log`` / ``--downlink-log``): parse and write.

Format (Mahimahi ``link_queue.cc``), one event per line after ``#`` header lines::

    # mahimahi mm-link (downlink) [down.trace] > down.log
    # command line: ...
    # queue: droptail [packets=100]
    # init timestamp: 1700000000000
    # base timestamp: 1700000000000
    12 # 1504          delivery opportunity of 1504 bytes at 12 ms
    12 + 1400          arrival of a 1400-byte packet
    15 - 1400 3        departure of a 1400-byte packet that queued 3 ms
    20 d 2 2800        drop of 2 packets, 2800 bytes, by the queue
    21 m 1 1400        CE mark of 1 packet, 1400 bytes, by an ECN queue (airlink only)

Times are milliseconds after the base timestamp. :func:`read_log` returns a ``linklog``
frame (``time_ms``, ``event``, ``bytes``, ``delay_ms``, ``packets``) with the header in
``frame.attrs["header"]``; :class:`LinkLogWriter` writes the same format (the replay shells
write their logs with it), and airlink adds fractional milliseconds only when asked.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from airlink.core.atomic import commit, create_partial, output_error
from airlink.core.errors import FormatError

EVENTS = {"#": "opportunity", "+": "arrival", "-": "departure", "d": "drop", "m": "mark"}
_FIELDS = {"#": 3, "+": 3, "-": 4, "d": 4, "m": 4}
#: bound on every number of an event line (times in ms, bytes, packets, delays): exact as
#: float64 and as int64, so no value is rounded or wraps on its way into the frame
_LARGEST = 2 ** 53


def _parse_header(lines) -> dict:
    header = {}
    for line in lines:
        body = line.lstrip("#").strip()
        m = re.match(r"([A-Za-z][A-Za-z ]*?):\s*(.*)$", body)
        if m:
            key = m.group(1).strip().replace(" ", "_")
            val = m.group(2).strip()
            # a whole number of int64's width (timestamps in ms); longer digit runs stay text
            header[key] = int(val) if re.fullmatch(r"-?\d{1,18}", val) else val
        elif body:
            header.setdefault("title", body)
    return header


def _slow_parse(lines, first_no: int, name: str):
    rows = []
    for i, line in enumerate(lines):
        no = first_no + i
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 3 or parts[1] not in EVENTS:
            raise FormatError(f"{name}: line {no}: expected 'TIME EVENT SIZE' with EVENT one of "
                              f"# + - d m, got {line.strip()[:60]!r}")
        ev = parts[1]
        if len(parts) != _FIELDS[ev]:
            raise FormatError(f"{name}: line {no}: a {EVENTS[ev]} line has {_FIELDS[ev]} fields, "
                              f"got {len(parts)}")
        try:
            t = float(parts[0])
            nums = [int(p) for p in parts[2:]]
        except ValueError:
            t = float("nan")
        if t != t:                                     # NaN, or not a number at all
            raise FormatError(f"{name}: line {no}: not a number in {line.strip()[:60]!r}")
        if t < 0 or any(n < 0 for n in nums):
            raise FormatError(f"{name}: line {no}: negative value in {line.strip()[:60]!r}")
        if not t < _LARGEST or any(n >= _LARGEST for n in nums):
            raise FormatError(f"{name}: line {no}: value out of range (at most {_LARGEST - 1}) in "
                              f"{line.strip()[:60]!r}")
        if ev in ("d", "m"):
            rows.append((t, EVENTS[ev], nums[1], np.nan, nums[0]))
        elif ev == "-":
            rows.append((t, "departure", nums[0], float(nums[1]), 1))
        else:
            rows.append((t, EVENTS[ev], nums[0], np.nan, 1 if ev == "+" else 0))
    return rows


def read_log(path) -> pd.DataFrame:
    """Parse an mm-link/airlink link log into a ``linklog`` frame (see module notes)."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text file (expected an mm-link log)") from None
    return parse_log_text(text, str(path))


def parse_log_text(text: str, name: str = "<log>") -> pd.DataFrame:
    lines = text.splitlines()
    n_head = 0
    while n_head < len(lines) and lines[n_head].startswith("#"):
        n_head += 1
    header = _parse_header(lines[:n_head])
    body = lines[n_head:]
    if not any(l.strip() for l in body) and not header:
        raise FormatError(f"{name}: empty log file (expected '# ...' header lines and events)")
    frame = None
    if body:
        try:
            raw = pd.read_csv(io.StringIO("\n".join(body)), sep=" ", header=None,
                              names=["t", "ev", "a", "b"], dtype={"ev": str}, engine="c")
            ev = raw["ev"].to_numpy()
            ok = np.isin(ev, list(EVENTS)).all() and raw["t"].notna().all() and raw["a"].notna().all()
            four = np.isin(ev, ["-", "d", "m"])
            ok = ok and raw["b"].notna().to_numpy()[four].all() and raw["b"].isna().to_numpy()[~four].all()
            ok = ok and (raw["t"] >= 0).all() and (raw["a"] >= 0).all()
            nums = raw[["t", "a", "b"]]
            ok = ok and ((nums < _LARGEST) | nums.isna()).to_numpy().all()   # (b is empty on # and +)
            if ok:
                a = raw["a"].to_numpy(np.int64)
                b = raw["b"].to_numpy(np.float64)
                is_drop = (ev == "d") | (ev == "m")     # packets and bytes
                frame = pd.DataFrame({
                    "time_ms": raw["t"].to_numpy(np.float64),
                    "event": pd.Categorical([EVENTS[e] for e in ev] if len(ev) < 64 else
                                            pd.Series(ev).map(EVENTS).to_numpy(),
                                            categories=list(EVENTS.values())),
                    "bytes": np.where(is_drop, np.nan_to_num(b), a).astype(np.int64),
                    "delay_ms": np.where(ev == "-", b, np.nan),
                    "packets": np.select([is_drop, ev == "#"], [a, 0], 1).astype(np.int64),
                })
        except (ValueError, TypeError, pd.errors.ParserError):
            frame = None
    if frame is None:
        rows = _slow_parse(body, n_head + 1, name)
        frame = pd.DataFrame(rows, columns=["time_ms", "event", "bytes", "delay_ms", "packets"])
        frame["event"] = pd.Categorical(frame["event"], categories=list(EVENTS.values()))
        frame["bytes"] = frame["bytes"].astype(np.int64)
        frame["packets"] = frame["packets"].astype(np.int64)
    if (frame["time_ms"] % 1 == 0).all():
        frame["time_ms"] = frame["time_ms"].astype(np.int64)
    frame.attrs["header"] = header
    return frame


def _one_line(value) -> str:
    """A header value on one line: a command or file name with line breaks would otherwise
    end the header and be read as (bad) event lines."""
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


class LinkLogWriter:
    """Streaming writer of the mm-link log format.

    ``LinkLogWriter(path, direction="downlink", trace="down.trace", queue="infinite",
    base_ms=...)`` writes the header; then call :meth:`opportunity`, :meth:`arrival`,
    :meth:`departure` and :meth:`drop` with times in ms since ``base_ms``. Integer times
    are written as Mahimahi does; fractional ones (sub-ms TTIs) with 3 decimals.
    """

    def __init__(self, path, *, direction: str = "downlink", trace: str = "", queue: str = "infinite",
                 base_ms: int = 0, init_ms: int | None = None, command: str = "", tool: str = "airlink link"):
        self.path = Path(path)
        try:
            self._f = open(create_partial(self.path), "w", buffering=1 << 16)
        except OSError as exc:
            raise output_error(self.path, exc, doing="creating the log") from None
        one = _one_line
        self.write_lines(f"# {tool} ({direction}) [{one(trace)}] > {one(self.path)}\n"
                         + (f"# command line: {one(command)}\n" if command else "")
                         + f"# queue: {one(queue)}\n"
                         + f"# init timestamp: {init_ms if init_ms is not None else base_ms}\n"
                         + f"# base timestamp: {base_ms}\n")

    @staticmethod
    def event_line(t_ms, symbol: str, *fields) -> str:
        """One event line: the time in ms since the base timestamp (an integer as Mahimahi
        writes it, else rounded to 3 decimals for sub-ms TTIs), the event's symbol (``#``
        opportunity bytes, ``+`` arrival bytes, ``-`` departure bytes and queueing delay in
        ms, ``d`` dropped and ``m`` CE-marked packets and bytes) and its integer fields."""
        t_ms = round(float(t_ms), 3)
        t = str(int(t_ms)) if t_ms.is_integer() else f"{t_ms:.3f}"
        if len(fields) == 1:        # the per-packet lines: no join (this runs for every packet)
            return f"{t} {symbol} {int(fields[0])}\n"
        return f"{t} {symbol} {int(fields[0])} {int(fields[1])}\n"

    def opportunity(self, t, size: int):
        self.write_lines(self.event_line(t, "#", size))

    def arrival(self, t, size: int):
        self.write_lines(self.event_line(t, "+", size))

    def departure(self, t, size: int, delay):
        self.write_lines(self.event_line(t, "-", size, round(delay)))

    def drop(self, t, packets: int, nbytes: int):
        self.write_lines(self.event_line(t, "d", packets, nbytes))

    def write_lines(self, text: str):
        """Append pre-formatted event lines (a fast path for shells that batch).

        A failing write (disk full, ...) raises :class:`~airlink.core.atomic.OutputError`
        and leaves the log as ``NAME.partial``.
        """
        try:
            self._f.write(text)
        except OSError as exc:
            self.abort()
            raise output_error(self.path, exc, doing="logging") from None

    def abort(self):
        """Stop writing; what was written stays as ``NAME.partial`` (not complete)."""
        try:
            self._f.close()
        except OSError:
            pass

    def close(self):
        """Finish the log: flush it and give it its final name (``NAME.partial`` -> ``NAME``)."""
        if self._f.closed:
            return
        try:
            self._f.close()
        except OSError as exc:
            raise output_error(self.path, exc, doing="logging") from None
        commit(self.path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_log(frame: pd.DataFrame, path, **header) -> Path:
    """Write a ``linklog`` frame in mm-link's format (header fields as keyword arguments)."""
    h = dict(frame.attrs.get("header", {}))
    h.update(header)
    kw = {"direction": h.get("direction", "downlink"), "trace": h.get("trace", ""),
          "queue": h.get("queue", "infinite"), "base_ms": int(h.get("base_timestamp", 0)),
          "init_ms": int(h.get("init_timestamp", h.get("base_timestamp", 0)))}
    with LinkLogWriter(path, **kw) as w:
        for t, ev, b, d, p in frame[["time_ms", "event", "bytes", "delay_ms", "packets"]].itertuples(index=False):
            if ev == "opportunity":
                w.opportunity(t, b)
            elif ev == "arrival":
                w.arrival(t, b)
            elif ev == "departure":
                w.departure(t, b, d)
            else:
                w.drop(t, p, b)
    return Path(path)


def per_ms(frame: pd.DataFrame, bin_ms: float = 1.0) -> pd.DataFrame:
    """Per-bin capacity, arrivals, departures and drops in bytes, plus mean queueing delay.

    Columns: ``time_ms`` (bin start), ``capacity_bytes``, ``arrivals_bytes``,
    ``departures_bytes``, ``drops_bytes``, ``delay_ms`` (mean over departures, NaN if none).
    """
    if frame.empty:
        return pd.DataFrame(columns=["time_ms", "capacity_bytes", "arrivals_bytes",
                                     "departures_bytes", "drops_bytes", "delay_ms"])
    b = np.floor(frame["time_ms"].to_numpy(np.float64) / bin_ms).astype(np.int64)
    b -= b.min() if b.min() < 0 else 0
    n = int(b.max()) + 1
    out = {"time_ms": np.arange(n) * bin_ms}
    ev = frame["event"].astype(str).to_numpy()
    by = frame["bytes"].to_numpy(np.float64)
    for name, e in (("capacity_bytes", "opportunity"), ("arrivals_bytes", "arrival"),
                    ("departures_bytes", "departure"), ("drops_bytes", "drop")):
        m = ev == e
        out[name] = np.bincount(b[m], weights=by[m], minlength=n)
    dep = ev == "departure"
    cnt = np.bincount(b[dep], minlength=n)
    tot = np.bincount(b[dep], weights=frame["delay_ms"].to_numpy(np.float64)[dep], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["delay_ms"] = np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)
    return pd.DataFrame(out)


def is_log_file(path) -> bool:
    """True when the file starts like an mm-link/airlink log (header or event lines)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2048).decode("ascii", "replace")
    except OSError:
        return False
    lines = [l for l in head.splitlines()[:20] if l.strip()]
    if not lines:
        return False
    if lines[0].startswith("# mahimahi") or lines[0].startswith("# airlink") or \
            any(l.startswith("# base timestamp:") for l in lines):
        return True
    return all(re.fullmatch(r"\d+(\.\d+)? [#+d-] \d+( \d+)?", l.strip()) for l in lines[:10])
