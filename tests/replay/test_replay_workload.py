"""The workload-aware replay rule (airlink.replay.workload) on an injected clock: release times
worked by hand from the rule in docs/replay.md, and the bad trace sets the shell refuses."""
from __future__ import annotations

import numpy as np
import pytest

from airlink.replay.workload import WorkloadStage
from airlink.traces.cellreplay import Direction, LightTrace, SizeOffset

MS = 1_000_000


def _direction(offset=None):
    """Trains at 0, 100, 200 ms with base delays 10, 10, 20 ms; the 100 ms train has 8
    PDOs, the others 5, one per ms. Heavy opportunities every 4 ms up to 300 ms."""
    light = LightTrace(np.array([0, 100, 200]), np.array([10, 10, 20]),
                       (np.arange(5), np.arange(8), np.arange(5)))
    return Direction(np.arange(4, 301, 4), light, offset)


def _releases(stage, times_ms, size=1400):
    return [stage.release_ns(int(t * MS), size) / MS for t in times_ms]


def test_a_short_train_after_idle_rides_the_light_train():
    st = WorkloadStage(_direction())
    # three packets at 50 ms: train of 0 ms (base delay 10 ms), PDOs 0, 1, 2 ms
    assert _releases(st, [50, 50, 50]) == [60, 61, 62]
    assert (st.light_packets, st.heavy_packets, st.bursts) == (3, 0, 1)


def test_a_backlogged_flow_outgrows_the_trains_and_is_served_by_the_heavy_trace():
    st = WorkloadStage(_direction())
    # 12 packets at 150 ms: the 100 ms train's 8 PDOs (150..157 ms) with the base delay at
    # 150 ms, 10 + (20 - 10) * 50 / 100 = 15 ms; then the heavy FIFO from 157 ms:
    # opportunities at 160, 164, 168, 172 ms with the base delay at 157 ms, 15.7 ms
    r = _releases(st, [150] * 12)
    assert r[:8] == [165, 166, 167, 168, 169, 170, 171, 172]
    assert r[8:] == pytest.approx([175.7, 179.7, 183.7, 187.7])
    assert (st.light_packets, st.heavy_packets, st.bursts) == (8, 4, 1)
    # four opportunities spanned (160..172 ms), all used whole
    assert (st.stats()["heavy_opportunities"], st.stats()["heavy_bytes"]) == (4, 4 * 1400)


def test_a_burst_longer_than_its_train_continues_on_the_nearest_longer_train():
    st = WorkloadStage(_direction())
    # a burst at 50 ms starts on the 0 ms train (5 PDOs); packets 6-8 take PDOs 5, 6, 7 of
    # the 100 ms train (the nearest longer one), packet 9 the heavy trace (the first
    # opportunity after 57 ms is 60 ms; base delay 10 ms)
    r = _releases(st, [50] * 9)
    assert r == pytest.approx([60, 61, 62, 63, 64, 65, 66, 67, 70])
    assert (st.light_packets, st.heavy_packets) == (8, 1)


def test_pdos_that_passed_are_skipped_and_small_packets_share_one():
    st = WorkloadStage(_direction(), idle_ms=5)
    # 700-byte packets: two per 1400-byte PDO; a packet at +3.5 ms (within the 5 ms idle
    # time, so the same burst) finds the milliseconds of PDOs 0-2 passed and PDO 3's
    # running: it leaves at once
    r = _releases(st, [50, 50, 50, 53.5], size=700)
    assert r == [60, 60, 61, 63.5]


def test_an_idle_gap_starts_a_new_burst_and_the_idle_time_is_a_threshold():
    st = WorkloadStage(_direction())
    assert _releases(st, [50, 50]) == [60, 61]
    # the queue emptied during 51 ms (PDO 1): within that millisecond's resolution a packet
    # at 51.5 ms is the same burst (PDO 2), one at 52.5 ms starts a new one (PDO 0, no wait)
    assert _releases(st, [51.5]) == [62]
    assert _releases(st, [53.5]) == [63.5]
    assert st.bursts == 2
    held = WorkloadStage(_direction(), idle_ms=5)
    # within 1 + 5 ms of the queue emptying: the same burst; at 56.5 ms PDOs 3-5 have passed
    # (5 of the 100 ms train, the burst outgrew its own) and PDO 6's millisecond runs
    assert _releases(held, [50, 50, 51.5, 56.5]) == [60, 61, 62, 66.5]
    assert held.bursts == 1


def test_heavy_leftover_bytes_serve_the_next_packet_only_if_it_was_queued():
    st = WorkloadStage(_direction())
    _releases(st, [150] * 8)                       # the train is used up
    # 700-byte packets in the heavy FIFO: two share the 160 ms opportunity
    r = _releases(st, [150, 150, 150], size=700)
    assert r == pytest.approx([175.7, 175.7, 179.7])


def test_base_delay_and_size_offset():
    offset = SizeOffset((100, 200), (0, 2))
    st = WorkloadStage(_direction(offset))
    # at 150 ms the base delay is interpolated: 10 + 10 * 50 / 100 = 15 ms; a 150-byte
    # packet's offset is 0 + 0.5 * (2 - 0) = 1 ms
    assert st.base_delay_ns(150 * MS) == 15 * MS
    assert _releases(st, [150], size=150) == [166]
    # a packet whose offset would release it before the previous one leaves after it
    assert _releases(st, [150], size=100) == [166]


def test_the_traces_loop():
    st = WorkloadStage(_direction())
    # the light trace's period is 200 + 100 ms: 350 ms is 50 ms into the second loop
    assert _releases(st, [350, 350]) == [360, 361]
    # the heavy trace's period is 300 ms: the first opportunity after 600 ms + 5 ms is 608 ms
    assert st._heavy_time(st._heavy_first_after(605 * MS)) == 608 * MS


def test_trains_recorded_at_one_time_still_loop():
    light = LightTrace(np.zeros(3, dtype=np.int64), np.full(3, 7), (np.arange(3),) * 3)
    st = WorkloadStage(Direction(np.array([5, 10]), light))
    assert _releases(st, [50, 50]) == [57, 58]


def test_stage_counters_add_up():
    st = WorkloadStage(_direction())
    for t in (50, 50, 50):
        st.push(b"x" * 1400, t * MS)
    assert st.next_event_ns() == 60 * MS
    assert st.pull(60 * MS) == [b"x" * 1400]
    s = st.stats()
    assert s["arrivals_packets"] == s["departures_packets"] + s["queued_packets"] == 3
    assert s["stage"] == "workload" and s["light_packets"] == 3
    # a stage that has served packets is not handed to the C engine half-way
    assert st.fast() is None and "already running" in st.fast_refusal()


def _write_set(folder, *, light_lines=None, heavy_last=1000):
    folder.mkdir()
    light = light_lines or "".join(f"{t} 5 0 1 2\n" for t in range(0, 1001, 250))
    for d in ("up", "down"):
        (folder / f"{d}-heavy-pdo").write_text("".join(f"{t}\n" for t in range(10, heavy_last + 1, 10)))
        (folder / f"{d}-delay-light-pdo").write_text(light)
    return folder


@pytest.mark.parametrize("light,heavy_last,msg", [
    (None, 3000, "-delay-light-pdo: line 5: light trace shorter than heavy"),
    ("0 5 0 1\n250\n500 5 0 1\n", 500, "-delay-light-pdo: line 2: missing base delay"),
])
def test_bad_trace_sets_are_refused_with_file_and_line(run_airlink, tmp_path, light, heavy_last, msg):
    folder = _write_set(tmp_path / "set", light_lines=light, heavy_last=heavy_last)
    status, out, err = run_airlink("link", "--mode", "workload", folder, "--", "true")
    assert status == 2, err
    assert err.startswith("airlink: error:") and msg in err and err.count("\n") == 1


@pytest.mark.parametrize("extra,msg", [
    (["--uplink", "{s}/up-heavy-pdo"], "does not take an uplink trace"),
    (["--downlink-queue", "codel"], "queue disciplines"),
    (["--downlink-tti-log", "d.parquet"], "per-TTI logs"),
])
def test_workload_mode_refuses_options_it_does_not_use(run_airlink, tmp_path, extra, msg):
    folder = _write_set(tmp_path / "set")
    status, out, err = run_airlink("link", "--mode", "workload", folder,
                                   *[a.format(s=folder) for a in extra], "--", "true")
    assert status == 2 and msg in err and err.count("\n") == 1, err


def test_a_trace_set_given_to_the_saturator_mode_names_the_workload_mode(run_airlink, tmp_path):
    folder = _write_set(tmp_path / "set")
    status, out, err = run_airlink("link", folder, "--", "true")
    assert status == 2 and "a CellReplay trace set; the workload mode replays it" in err, err
