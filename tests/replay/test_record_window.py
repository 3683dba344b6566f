"""The recorder's saturating window (replay/record.py ``_Window``): hand-worked cases of
its rule - limit max(WINDOW_MIN, 4 x the packets acknowledged in the last ~100 ms), in
flight = sent - acked - lost, and losses written off after WINDOW_STALL_NS without
progress while the window is full (no network needed)."""
from airlink.replay.record import WINDOW_MIN, WINDOW_STALL_NS, _Window

MS = 1_000_000


def test_the_limit_follows_what_arrived_in_the_last_100_ms():
    w = _Window()
    assert w.room(0) == WINDOW_MIN                       # nothing heard yet
    w.sent = 64
    for t in range(0, 110, 10):                          # 5 packets acknowledged every 10 ms
        w.feedback(t * MS, 5 * (t // 10 + 1))
    # at 100 ms the oldest entry kept is the one at 0 ms (5 acked): 55 - 5 = 50 recent
    assert w.acked == 55 and w.limit() == 4 * 50
    assert w.in_flight() == 64 - 55 and w.room(100 * MS) == 200 - 9


def test_losses_that_fill_the_window_are_written_off_after_a_stall():
    w = _Window()
    assert w.room(0) == 64
    w.sent = 64
    w.feedback(10 * MS, 32)                              # half of them arrived, half were lost
    assert w.limit() == 64                               # one feedback: nothing "recent"
    assert w.room(20 * MS) == 64 - 32
    w.sent = 96                                          # the sender fills the window
    assert w.room(20 * MS) == 0
    # nothing more arrives: the window stays shut until the stall has lasted WINDOW_STALL_NS
    assert w.room(10 * MS + WINDOW_STALL_NS) == 0
    assert w.room(10 * MS + WINDOW_STALL_NS + 1) == 64 and w.lost == 64
    assert w.in_flight() == 0
    w.sent = 160                                         # sends again; 40 of those arrive
    w.feedback(10 * MS + WINDOW_STALL_NS + 50 * MS, 72)
    assert w.in_flight() == 160 - 72 - 64


def test_a_window_that_is_not_full_is_never_written_off():
    w = _Window()
    w.room(0)
    w.sent = 10
    assert w.room(5 * WINDOW_STALL_NS) == WINDOW_MIN - 10 and w.lost == 0


def test_late_arrivals_of_written_off_packets_do_not_make_room_negative():
    w = _Window()
    w.room(0)
    w.sent = 64
    assert w.room(WINDOW_STALL_NS + 1) == 64 and w.lost == 64
    w.feedback(WINDOW_STALL_NS + 2, 64)                  # they were late, not lost
    assert w.in_flight() == 0 and w.room(WINDOW_STALL_NS + 3) == 64
