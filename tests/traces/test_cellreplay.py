"""CellReplay trace sets (mm-cellular's files): exact round trips, hand-worked values, and
damaged sets refused with the file and line.

The files are written here by hand in the format of CellReplay's trace-processor scripts
(``generate_short_pdo_trace.py``: ``"%d %d %s\\n" % (time, one_way_ms, pdos)``;
``generate_long_pdo_trace.py``: ``"%d\\n"``) and mm-cellular's offset reader (``size offset``
per line from 100 bytes in steps of 100), so the expected values are known independently.
"""
from decimal import Decimal

import numpy as np
import pytest

from airlink.traces import FormatError, cellreplay, read_cellreplay, write_cellreplay

HEAVY_UP = [0, 0, 3, 7, 7, 7, 12, 20, 41, 60]
HEAVY_DOWN = [0, 1, 1, 2, 2, 2, 3, 5, 8, 13, 21, 34, 55, 61]
TRAINS = [  # (time_ms, one-way base delay ms, up PDOs, down PDOs)
    (0, 21, [0, 0, 4], [0, 1, 1, 1, 9, 9]),
    (20, 22, [0, 3], [0, 0, 0, 2]),
    (40, 20, [0], [0, 5, 10, 15, 20]),
    (60, 25, [0, 0, 0, 0, 1], [0, 12]),
]
OFFSETS = [(100, "0"), (200, "0.25"), (300, "-1.5"), (400, "2.125"), (500, "3.10")]


def _write(folder, *, heavy_up=HEAVY_UP, heavy_down=HEAVY_DOWN, trains=TRAINS, offsets=OFFSETS):
    folder.mkdir(exist_ok=True)
    (folder / "up-heavy-pdo").write_text("".join("%d\n" % v for v in heavy_up))
    (folder / "down-heavy-pdo").write_text("".join("%d\n" % v for v in heavy_down))
    for d, k in (("up", 2), ("down", 3)):
        (folder / f"{d}-delay-light-pdo").write_text(
            "".join("%d %d %s\n" % (t[0], t[1], " ".join(map(str, t[k]))) for t in trains))
    if offsets is not None:
        for d in ("up", "down"):
            (folder / f"latency-offset-{d}").write_text("".join(f"{s} {o}\n" for s, o in offsets))
    return folder


def test_read_gives_the_written_values(tmp_path):
    tr = read_cellreplay(_write(tmp_path / "set"))
    assert tr.up.heavy_ms.tolist() == HEAVY_UP and tr.down.heavy_ms.tolist() == HEAVY_DOWN
    t, delay = tr.base_delay_ms
    assert t.tolist() == [0, 20, 40, 60] and delay.tolist() == [21, 22, 20, 25]
    assert [p.tolist() for p in tr.up.light.pdo_ms] == [x[2] for x in TRAINS]
    assert [p.tolist() for p in tr.down.light.pdo_ms] == [x[3] for x in TRAINS]
    assert tr.down.size_offset.size_bytes == (100, 200, 300, 400, 500)
    assert tr.down.size_offset.offset_ms == tuple(Decimal(o) for _, o in OFFSETS)


def test_round_trip_is_byte_identical(tmp_path):
    src = _write(tmp_path / "set")
    tr = read_cellreplay(src)
    out = write_cellreplay(tr, tmp_path / "copy")
    assert len(out) == 6
    for name in cellreplay.FILE_NAMES.values():
        assert (tmp_path / "copy" / name).read_bytes() == (src / name).read_bytes(), name
    assert read_cellreplay(tmp_path / "copy") == tr


def test_offsets_are_optional_and_not_invented(tmp_path):
    tr = read_cellreplay(_write(tmp_path / "set", offsets=None))
    assert tr.up.size_offset is None
    write_cellreplay(tr, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == sorted(
        n for k, n in cellreplay.FILE_NAMES.items() if k[1] != "offset")


def test_offset_interpolation_matches_mm_cellular():
    off = cellreplay.SizeOffset((100, 200, 300), (Decimal("1"), Decimal("3"), Decimal("-1")))
    # mm-cellular: below 100 B the first value; idx = size//100 - 1; o[i] + rem/100*(o[i+1]-o[i])
    assert off.offset_ms_at(40) == 1.0
    assert off.offset_ms_at(150) == 1 + 0.5 * 2
    assert off.offset_ms_at(275) == 3 + 0.75 * (-4)
    assert off.offset_ms_at(300) == -1.0 and off.offset_ms_at(1400) == -1.0


def _damage(tmp_path, name, text):
    folder = _write(tmp_path / "set")
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("name,text,where,what", [
    ("down-heavy-pdo", "0\n5\n3\n9\n", "down-heavy-pdo: line 3", "must not decrease"),
    ("down-heavy-pdo", "0\n5\n9\n7", "down-heavy-pdo: line 4", "truncated"),
    ("up-heavy-pdo", "0\n05\n70\n", "up-heavy-pdo: line 2", "leading zeros"),
    ("up-heavy-pdo", "0\n\n70\n", "up-heavy-pdo: line 2", "empty line"),
    ("up-delay-light-pdo", "0 21 0 0 4\n20 22 0 3\n10 20 0\n60 25 0 0 0 0 1\n",
     "up-delay-light-pdo: line 3", "must not decrease"),
    ("up-delay-light-pdo", "0 21 0 0 4\n20 22 0 3\n40 20 0\n60 25 0 0 0 0 1\n80 2",
     "up-delay-light-pdo: line 5", "truncated"),
    ("down-delay-light-pdo", "0 21 0 1 1 1 9 9\n20\n40 20 0 5 10 15 20\n60 25 0 12\n",
     "down-delay-light-pdo: line 2", "missing base delay"),
    ("down-delay-light-pdo", "0 21 0 1 1 1 9 9\n20 22 0 0 0 2\n40 20 0 5 10 4 20\n60 25 0 12\n",
     "down-delay-light-pdo: line 3", "delivery opportunities must not decrease"),
    ("down-delay-light-pdo", "0 21 0 1 1 1 9 9\n20 22 3 4\n40 20 0 5 10 15 20\n60 25 0 12\n",
     "down-delay-light-pdo: line 2", "not 0"),
    ("down-delay-light-pdo", "0 21 0 1\n20 22 0 0\n", "down-delay-light-pdo: line 2", "at least 3"),
    ("down-delay-light-pdo", "0 21 0 1 1 1 9 9\n20 22  0 0 0 2\n40 20 0\n60 25 0\n",
     "down-delay-light-pdo: line 2", "not a non-negative integer"),
    # inconsistent set: the two light traces describe different trains
    ("down-delay-light-pdo", "0 21 0 1 1 1 9 9\n20 23 0 0 0 2\n40 20 0 5 10 15 20\n60 25 0 12\n",
     "down-delay-light-pdo: line 2", "inconsistent set"),
    ("down-delay-light-pdo", "0 21 0\n20 22 0\n40 20 0\n60 25 0\n80 25 0\n",
     "down-delay-light-pdo: line 5", "inconsistent set"),
    ("latency-offset-up", "100 0\n300 1\n", "latency-offset-up: line 2", "expected 200"),
    ("latency-offset-up", "100 0\n200 1e3\n", "latency-offset-up: line 2", "plain decimal"),
    ("latency-offset-down", "100 0\n200\n", "latency-offset-down: line 2", "1 field"),
])
def test_damaged_files_are_refused_with_file_and_line(tmp_path, name, text, where, what):
    folder = _damage(tmp_path, name, text)
    with pytest.raises(FormatError) as err:
        read_cellreplay(folder)
    msg = str(err.value)
    assert f"{folder / where.split(':')[0]}:{where.split(':', 1)[1]}" in msg and what in msg, msg


def test_light_trace_shorter_than_heavy_is_refused(tmp_path):
    # trains reach 60 ms (+20 ms between trains = 80); a heavy trace to 200 ms outlasts them
    folder = _write(tmp_path / "set", heavy_down=HEAVY_DOWN + [200])
    with pytest.raises(FormatError) as err:
        read_cellreplay(folder)
    msg = str(err.value)
    assert f"{folder / 'down-delay-light-pdo'}: line 4: light trace shorter than heavy" in msg
    assert "200 ms (line 15)" in msg
    # exactly reaching it is fine
    read_cellreplay(_write(tmp_path / "ok", heavy_down=HEAVY_DOWN + [80]))


def test_missing_base_delay_file_is_refused(tmp_path):
    folder = _write(tmp_path / "set")
    (folder / "up-delay-light-pdo").unlink()
    with pytest.raises(FormatError, match=r"up-delay-light-pdo: missing: the base delay and light "
                                          r"trace of the uplink"):
        read_cellreplay(folder)


def test_paths_override_folder_names(tmp_path):
    folder = _write(tmp_path / "set")
    other = tmp_path / "elsewhere.pdo"
    other.write_text("0\n1\n50\n")
    tr = read_cellreplay(folder, paths={("up", "heavy"): other})
    assert tr.up.heavy_ms.tolist() == [0, 1, 50]


def test_a_failed_write_leaves_no_partial_file(tmp_path):
    tr = read_cellreplay(_write(tmp_path / "set"))
    bad = cellreplay.CellReplayTraces(tr.up, cellreplay.Direction(
        tr.down.heavy_ms, tr.down.light,
        cellreplay.SizeOffset((100,), (Decimal("NaN"),))))
    with pytest.raises(FormatError):
        write_cellreplay(bad, tmp_path / "copy")
    assert not list((tmp_path / "copy").glob("latency-offset-down*"))


def test_heavy_trace_values_equal_numpy_reference(tmp_path):
    rng = np.random.default_rng(7)
    stamps = np.sort(rng.integers(0, 5000, 3000))
    stamps[-1] = 5000
    text = "".join(f"{v}\n" for v in stamps)
    assert np.array_equal(cellreplay.parse_heavy(text), stamps)
    assert cellreplay.format_heavy(cellreplay.parse_heavy(text)) == text


def test_a_set_folder_is_a_trace_for_the_trace_commands(tmp_path, run_airlink):
    import json

    from airlink.traces import read_trace
    folder = _write(tmp_path / "set")
    status, out, err = run_airlink("trace", "info", folder, "--json")
    assert status == 0, err
    s = json.loads(out)
    # the downlink heavy trace: one 1400-byte opportunity per listed ms, over its last ms
    assert s["format"] == "cellreplay" and s["n_tti"] == HEAVY_DOWN[-1]
    assert [u["user"] for u in s["users"]] == ["downlink"] and s["users"][0]["total_bytes"] == 1400 * len(HEAVY_DOWN)
    up = read_trace(folder, user="uplink")
    assert up.users == ["uplink"] and up.n_tti == HEAVY_UP[-1] and up.values.sum() == 1400 * len(HEAVY_UP)
    info = up.meta["cellreplay"]
    assert info["trains"] == len(TRAINS) and info["base_delay_ms"] == {"median": 21.5, "min": 20, "max": 25}
    status, _, err = run_airlink("trace", "convert", folder, tmp_path / "down.parquet")
    assert status == 0, err
    assert read_trace(tmp_path / "down.parquet").values.sum() == 1400 * len(HEAVY_DOWN)
    with pytest.raises(FormatError, match="directions downlink and uplink, not 'sideways'"):
        read_trace(folder, user="sideways")
    # one file of the set given to the log readers: the refusal says what it is
    status, _, err = run_airlink("collect", folder / "down-delay-light-pdo", "-o", tmp_path / "frames")
    assert status == 2 and err.count("\n") == 1
    assert f"down-delay-light-pdo is one file of the CellReplay trace set {folder}: a replay input" in err
