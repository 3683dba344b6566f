"""CellReplay trace sets: read them into :class:`CellReplayTraces`, write them back.

CellReplay (Sentosa et al., "CellReplay: Towards accurate record-and-replay for cellular
networks", NSDI'25; the public repository williamsentosa95/cellreplay) replays a cellular
path from four or six text files, written by its ``record/trace-processor`` scripts and read
by ``mm-cellular`` (``src/frontend/cellular_queue.cc``). In a trace-set folder they are named
as in that repository's traces:

``up-heavy-pdo``, ``down-heavy-pdo`` (heavy trace, one per direction)
    The packet delivery opportunities (PDOs) a saturator saw: one non-negative integer per
    line, a millisecond at which one 1400-byte opportunity (``PDO_BYTES``) occurs; values
    never decrease, the last is not 0 - the Mahimahi trace format. Values are relative to
    the first recorded opportunity.
``up-delay-light-pdo``, ``down-delay-light-pdo`` (light trace with the base-delay series)
    One packet train per line, fields separated by one space::

        time_ms base_delay_ms pdo_0 pdo_1 ... pdo_k

    ``time_ms`` is when the train was sent, relative to the first kept train, never
    decreasing; ``base_delay_ms`` is the one-way base delay at that time (half the RTT of the
    train's first packet); the PDOs are the arrival times of the train's packets relative to
    its first packet's arrival (so ``pdo_0 == 0``), never decreasing. Both directions come
    from the same trains, so the two files have the same times and base delays line by line.
    ``mm-cellular`` needs at least three lines.
``latency-offset-up``, ``latency-offset-down`` (packet-size latency offset, optional)
    One line per packet size, ``size_bytes offset_ms``: sizes 100, 200, 300, ... bytes in
    steps of 100; the offset (a decimal number of milliseconds, may be negative) is added to
    the release time of a packet of that size, linearly interpolated between sizes
    (:meth:`SizeOffset.offset_ms_at`).

The files contain nothing else: no header, no comments, every line ends with ``\\n``.

Stricter than ``mm-cellular``, so that reading and writing back is byte-identical and a cut
file is caught: integers are written without sign or leading zeros, offsets as plain
decimals (``-?digits[.digits]``), a file must end with a newline (a last line without one is
reported as truncated), no empty lines. Beyond the single files, a set must be consistent
(:func:`check_set`): the two light traces pair line by line, and each light trace lasts as
long as the heavy trace of its direction (within its longest gap between trains).

Every error is a :class:`~airlink.traces.FormatError` naming the file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

from airlink.core.errors import FormatError

#: Bytes of one heavy-trace delivery opportunity in mm-cellular (its ``PACKET_SIZE``).
PDO_BYTES = 1400
#: Step of the packet sizes in a latency-offset file (mm-cellular requires 100, 200, ...).
OFFSET_SIZE_STEP = 100
#: mm-cellular refuses a light trace of fewer trains.
MIN_LIGHT_LINES = 3

#: File names of a trace set in a folder: (direction, part) -> name.
FILE_NAMES = {
    ("up", "heavy"): "up-heavy-pdo",
    ("down", "heavy"): "down-heavy-pdo",
    ("up", "light"): "up-delay-light-pdo",
    ("down", "light"): "down-delay-light-pdo",
    ("up", "offset"): "latency-offset-up",
    ("down", "offset"): "latency-offset-down",
}

_INT = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?\Z")


@dataclass(frozen=True, eq=False)
class LightTrace:
    """One direction's light trace: packet trains sent at ``time_ms`` (int64 array, ms,
    never decreasing) with the one-way ``base_delay_ms`` at that time (int64 array) and the
    train's delivery opportunities ``pdo_ms`` (one int64 array per train, ms after the first
    packet's arrival, starting at 0, never decreasing)."""
    time_ms: np.ndarray
    base_delay_ms: np.ndarray
    pdo_ms: tuple

    def __post_init__(self):
        if not (len(self.time_ms) == len(self.base_delay_ms) == len(self.pdo_ms)):
            raise ValueError("a light trace needs one time, one base delay and one PDO list per train")

    def __len__(self) -> int:
        return len(self.time_ms)

    def __eq__(self, other) -> bool:
        return (isinstance(other, LightTrace) and np.array_equal(self.time_ms, other.time_ms)
                and np.array_equal(self.base_delay_ms, other.base_delay_ms)
                and len(self.pdo_ms) == len(other.pdo_ms)
                and all(np.array_equal(a, b) for a, b in zip(self.pdo_ms, other.pdo_ms)))


@dataclass(frozen=True)
class SizeOffset:
    """Packet-size latency offset: ``offset_ms[i]`` (exact decimals, ms) for packets of
    ``size_bytes[i]`` = 100, 200, ... bytes."""
    size_bytes: tuple
    offset_ms: tuple

    def offset_ms_at(self, size_bytes: int) -> float:
        """The offset of a packet of ``size_bytes`` as mm-cellular computes it: the 100-byte
        value below 100 bytes, the last value at or above the last size, and in between
        ``o[i] + (size % 100) / 100 * (o[i+1] - o[i])`` with ``i = size // 100 - 1``."""
        o = [float(v) for v in self.offset_ms]
        i = size_bytes // OFFSET_SIZE_STEP - 1
        if i < 0:
            return o[0]
        if i >= len(o) - 1:
            return o[-1]
        return o[i] + (size_bytes % OFFSET_SIZE_STEP) / OFFSET_SIZE_STEP * (o[i + 1] - o[i])


@dataclass(frozen=True, eq=False)
class Direction:
    """What one direction of a recorded path replays from: the heavy trace (opportunity
    timestamps in ms, int64 array, ``PDO_BYTES`` each), the light trace with the base-delay
    series, and the optional packet-size latency offset."""
    heavy_ms: np.ndarray
    light: LightTrace
    size_offset: SizeOffset | None = None

    def __eq__(self, other) -> bool:
        return (isinstance(other, Direction) and np.array_equal(self.heavy_ms, other.heavy_ms)
                and self.light == other.light and self.size_offset == other.size_offset)


@dataclass(frozen=True, eq=False)
class CellReplayTraces:
    """A CellReplay trace set: uplink and downlink :class:`Direction`. ``meta`` carries
    provenance (not written into the files, which have no room for it)."""
    up: Direction
    down: Direction
    meta: dict = field(default_factory=dict)

    def __eq__(self, other) -> bool:
        return isinstance(other, CellReplayTraces) and self.up == other.up and self.down == other.down

    @property
    def base_delay_ms(self):
        """The base-delay series: ``(time_ms, one_way_delay_ms)`` int64 arrays."""
        return self.down.light.time_ms, self.down.light.base_delay_ms


# ---------------------------------------------------------------- single files: text

def _lines(text: str, name: str) -> list[str]:
    """The lines of ``text``; refuses an empty file, a missing final newline and empty lines."""
    if not text:
        raise FormatError(f"{name}: empty file")
    lines = text.split("\n")
    if lines[-1] != "":
        raise FormatError(f"{name}: line {len(lines)}: truncated (the file does not end with a newline)")
    lines.pop()
    for no, line in enumerate(lines, 1):
        if not line:
            raise FormatError(f"{name}: line {no}: empty line")
    return lines


def _int(word: str, name: str, no: int, what: str) -> int:
    if not _INT.match(word):
        raise FormatError(f"{name}: line {no}: {what} is not a non-negative integer without "
                          f"leading zeros: {word[:40]!r}")
    return int(word)


def parse_heavy(text: str, name: str = "<heavy trace>") -> np.ndarray:
    """Heavy-trace text -> opportunity timestamps (ms, int64). The checks of a Mahimahi
    trace (:func:`airlink.traces.mahimahi.parse_trace_text`) plus the strict form above."""
    from .mahimahi import parse_trace_text
    lines = _lines(text, name)
    values = parse_trace_text(text, name)
    if format_heavy(values) != text:
        for no, line in enumerate(lines, 1):
            _int(line, name, no, "the timestamp")
    return values


def format_heavy(heavy_ms) -> str:
    """Heavy-trace text of opportunity timestamps (ms)."""
    return "\n".join(map(str, np.asarray(heavy_ms, dtype=np.int64).tolist())) + "\n"


def parse_light(text: str, name: str = "<light trace>") -> LightTrace:
    """Light-trace text -> :class:`LightTrace` (format in the module notes)."""
    times, delays, pdos = [], [], []
    for no, line in enumerate(_lines(text, name), 1):
        words = line.split(" ")
        if len(words) < 2:
            raise FormatError(f"{name}: line {no}: missing base delay (expected "
                              "'time_ms base_delay_ms pdo_0 ... pdo_k')")
        if len(words) < 3:
            raise FormatError(f"{name}: line {no}: missing the train's delivery opportunities "
                              "(expected 'time_ms base_delay_ms pdo_0 ... pdo_k')")
        t = _int(words[0], name, no, "the time")
        d = _int(words[1], name, no, "the base delay")
        p = [_int(w, name, no, f"delivery opportunity {k}") for k, w in enumerate(words[2:])]
        if times and t < times[-1]:
            raise FormatError(f"{name}: line {no}: timestamps must not decrease ({t} after {times[-1]})")
        if p[0] != 0:
            raise FormatError(f"{name}: line {no}: the first delivery opportunity is {p[0]}, "
                              "not 0 (they are relative to the train's first packet)")
        for k in range(1, len(p)):
            if p[k] < p[k - 1]:
                raise FormatError(f"{name}: line {no}: delivery opportunities must not decrease "
                                  f"({p[k]} after {p[k - 1]} at position {k})")
        times.append(t)
        delays.append(d)
        pdos.append(np.array(p, dtype=np.int64))
    if len(times) < MIN_LIGHT_LINES:
        raise FormatError(f"{name}: line {len(times)}: truncated: a light trace needs at least "
                          f"{MIN_LIGHT_LINES} trains (mm-cellular interpolates between them)")
    return LightTrace(np.array(times, dtype=np.int64), np.array(delays, dtype=np.int64), tuple(pdos))


def format_light(light: LightTrace) -> str:
    """Light-trace text of a :class:`LightTrace`."""
    rows = (f"{int(t)} {int(d)} " + " ".join(map(str, p.tolist()))
            for t, d, p in zip(light.time_ms, light.base_delay_ms, light.pdo_ms))
    return "\n".join(rows) + "\n"


def parse_offset(text: str, name: str = "<latency offset>") -> SizeOffset:
    """Latency-offset text -> :class:`SizeOffset`."""
    sizes, offsets = [], []
    for no, line in enumerate(_lines(text, name), 1):
        words = line.split(" ")
        if len(words) != 2:
            raise FormatError(f"{name}: line {no}: expected 'size_bytes offset_ms', got "
                              f"{len(words)} field{'s' if len(words) != 1 else ''}")
        size = _int(words[0], name, no, "the packet size")
        want = OFFSET_SIZE_STEP * no
        if size != want:
            raise FormatError(f"{name}: line {no}: packet size {size}, expected {want} (sizes start "
                              f"at {OFFSET_SIZE_STEP} bytes in steps of {OFFSET_SIZE_STEP})")
        if not _DECIMAL.match(words[1]):
            raise FormatError(f"{name}: line {no}: the offset is not a plain decimal number of "
                              f"milliseconds: {words[1][:40]!r}")
        sizes.append(size)
        offsets.append(Decimal(words[1]))
    return SizeOffset(tuple(sizes), tuple(offsets))


def format_offset(offset: SizeOffset) -> str:
    """Latency-offset text of a :class:`SizeOffset` (offsets written in plain notation)."""
    return "".join(f"{int(s)} {_plain(o)}\n" for s, o in zip(offset.size_bytes, offset.offset_ms))


def _plain(value) -> str:
    text = format(Decimal(value) if not isinstance(value, Decimal) else value, "f")
    if not _DECIMAL.match(text):
        raise FormatError(f"latency offset {value!r} cannot be written as a plain decimal")
    return text


# ---------------------------------------------------------------- sets: folders

def check_set(traces: CellReplayTraces, names: dict | None = None) -> None:
    """Refuse an inconsistent set; ``names`` maps ``(direction, part)`` to the file names
    used in messages (default :data:`FILE_NAMES`).

    - the up and down light traces have the same number of trains and, line by line, the
      same time and base delay (they describe the same trains);
    - each light trace reaches the end of its direction's heavy trace: its last time plus
      its longest gap between trains is at least the heavy trace's last timestamp.
    """
    names = {**FILE_NAMES, **(names or {})}
    up, down = traces.up.light, traces.down.light
    nu, nd = names["up", "light"], names["down", "light"]
    for no, (tu, td, du, dd) in enumerate(zip(up.time_ms, down.time_ms, up.base_delay_ms,
                                              down.base_delay_ms), 1):
        if tu != td or du != dd:
            raise FormatError(f"{nd}: line {no}: inconsistent set: time {td} ms, base delay {dd} ms, "
                              f"but {nu} line {no} has time {tu} ms, base delay {du} ms")
    if len(up) != len(down):
        longer, n = (nu, len(up)) if len(up) > len(down) else (nd, len(down))
        shorter = nd if longer == nu else nu
        raise FormatError(f"{longer}: line {min(len(up), len(down)) + 1}: inconsistent set: "
                          f"{shorter} has {min(len(up), len(down))} trains, this file {n}")
    for d in ("up", "down"):
        direction = getattr(traces, d)
        light, heavy = direction.light, direction.heavy_ms
        gap = int(np.diff(light.time_ms).max()) if len(light) > 1 else 0
        light_end, heavy_end = int(light.time_ms[-1]), int(heavy[-1])
        if light_end + gap < heavy_end:
            raise FormatError(f"{names[d, 'light']}: line {len(light)}: light trace shorter than heavy: "
                              f"it ends at {light_end} ms (+{gap} ms between trains), "
                              f"{names[d, 'heavy']} at {heavy_end} ms (line {len(heavy)})")


def read_cellreplay(folder=None, *, paths: dict | None = None) -> CellReplayTraces:
    """Read a CellReplay trace set from ``folder`` (files named as in :data:`FILE_NAMES`)
    or from ``paths`` (``{(direction, part): path}``, overriding the folder's names). The
    heavy and light files of both directions are required, the offsets are optional;
    the set is checked with :func:`check_set`."""
    where = {}
    if folder is not None:
        folder = Path(folder)
        if not folder.is_dir():
            raise FormatError(f"{folder}: not a folder (a CellReplay trace set is a folder of "
                              f"{', '.join(FILE_NAMES.values())})")
        where = {key: folder / name for key, name in FILE_NAMES.items()}
        where = {k: p for k, p in where.items() if p.exists() or k[1] != "offset"}
    where.update({k: Path(p) for k, p in (paths or {}).items()})
    for key in FILE_NAMES:
        if key[1] == "offset":
            continue
        what = {"heavy": "heavy trace", "light": "base delay and light trace"}[key[1]]
        if key not in where or not where[key].exists():
            place = where.get(key, FILE_NAMES[key])
            raise FormatError(f"{place}: missing: the {what} of the {key[0]}link")
    dirs = {}
    for d in ("up", "down"):
        heavy = parse_heavy(_read(where[d, "heavy"]), str(where[d, "heavy"]))
        light = parse_light(_read(where[d, "light"]), str(where[d, "light"]))
        off = where.get((d, "offset"))
        offset = parse_offset(_read(off), str(off)) if off is not None else None
        dirs[d] = Direction(heavy, light, offset)
    traces = CellReplayTraces(dirs["up"], dirs["down"],
                              {"source": str(folder) if folder is not None else None,
                               "format": "cellreplay",
                               "files": {f"{k[0]}_{k[1]}": str(p) for k, p in where.items()}})
    check_set(traces, {k: str(p) for k, p in where.items()})
    return traces


def write_cellreplay(traces: CellReplayTraces, folder) -> dict:
    """Write a trace set into ``folder`` (created when missing) under :data:`FILE_NAMES`;
    each file appears whole or not at all. Returns ``{(direction, part): path}``."""
    from airlink.core.atomic import write_text
    check_set(traces)
    folder = Path(folder)
    out = {}
    for d in ("up", "down"):
        direction = getattr(traces, d)
        out[d, "heavy"] = write_text(folder / FILE_NAMES[d, "heavy"], format_heavy(direction.heavy_ms))
        out[d, "light"] = write_text(folder / FILE_NAMES[d, "light"], format_light(direction.light))
        if direction.size_offset is not None:
            out[d, "offset"] = write_text(folder / FILE_NAMES[d, "offset"],
                                          format_offset(direction.size_offset))
    return out


def heavy_trace(traces: CellReplayTraces, direction: str = "downlink"):
    """One direction's heavy trace as a one-user capacity :class:`~airlink.traces.Trace` of
    1 ms TTIs (``PDO_BYTES`` per opportunity, as mm-cellular delivers them), its user named
    ``downlink`` or ``uplink``; ``meta["cellreplay"]`` keeps what a capacity trace cannot
    hold: the light trains' count and the one-way base delay (median, min, max, ms)."""
    from .mahimahi import trace_from_timestamps
    from .trace import Trace
    key = {"downlink": "down", "down": "down", "uplink": "up", "up": "up"}.get(str(direction))
    if key is None:
        raise FormatError(f"a CellReplay set has the directions downlink and uplink, not {direction!r}")
    d = getattr(traces, key)
    name = f"{key}link"
    src = (traces.meta.get("files") or {}).get(f"{key}_heavy") or FILE_NAMES[key, "heavy"]
    one = trace_from_timestamps(d.heavy_ms, PDO_BYTES, source=src)
    delay = d.light.base_delay_ms
    meta = {**one.meta, "format": "cellreplay", "direction": name,
            "cellreplay": {"set": traces.meta.get("source"), "trains": int(len(delay)),
                           "base_delay_ms": {"median": float(np.median(delay)), "min": int(delay.min()),
                                             "max": int(delay.max())},
                           "size_offset": d.size_offset is not None}}
    return Trace(one.values, one.tti, [name], one.unit, meta)


def is_cellreplay_set(folder) -> bool:
    """True when ``folder`` holds the four required files of a set (never raises)."""
    try:
        folder = Path(folder)
        return all((folder / n).is_file() for k, n in FILE_NAMES.items() if k[1] != "offset")
    except OSError:
        return False


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("ascii")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not a text file (byte {exc.start} is not ASCII)") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror}") from None
