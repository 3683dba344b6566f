"""Rules both TCP analyses share (collectors/_tcprules.py), on hand-worked values: tshark's
duplicate ACKs (with a chunk's carry and across flows), Karn's rule, Eifel detection
(RFC 3522) in 32-bit serial arithmetic (RFC 7323 section 5.2), DSACK edges (RFC 2883)
unwrapped past 2**32 and matched to the retransmission they report."""
from __future__ import annotations

import numpy as np

from airlink.collectors._tcprules import (dsack_edges, dsack_reported, duplicate_acks, eifel_older, karn_voided,
                                         resent_unprompted)

M32 = 2**32


def test_karn_voids_segments_whose_first_byte_was_sent_again():
    retx = np.array([3, 7], np.int64)
    assert karn_voided(np.array([3, 4, 7, 8, 0], np.int64), retx).tolist() == [True, False, True, False, False]
    assert karn_voided(np.array([3, 4], np.int64), np.zeros(0, np.int64)).tolist() == [False, False]


def test_eifel_echo_older_than_the_retransmission_in_serial_arithmetic():
    tsval = np.array([100, 100, 100, 5, M32 - 3], np.uint32)
    tsecr = np.array([99, 100, 101, M32 - 3, 5], np.uint32)
    # 99 < 100: the ACK echoes the original's clock - spurious; the retransmission's own
    # value or a later one: not; across the wrap, M32 - 3 precedes 5 by 8 ticks
    assert eifel_older(tsval, tsecr).tolist() == [True, False, False, True, False]


def test_dsack_edges_relative_and_unwrapped_near_the_ack():
    base = np.array([1000, M32 - 100, 7], np.int64)
    left = np.array([6000, 400, 17], np.uint32)
    near = np.array([6000, M32 + 600, -1], np.int64)
    # 6000 - 1000; 400 is 500 bytes past an ISN of 2**32 - 100, in the lap of an ACK at
    # 2**32 + 600; no ACK yet (-1) counts as 0
    assert dsack_edges(left, base, near).tolist() == [5000, M32 + 500, 10]


def test_dsack_reports_the_last_retransmission_of_the_block_before_it():
    keys = np.array([11, 20, 11], np.int64)       # the block at 11 was sent again twice
    rows = np.array([5, 8, 12], np.int64)
    assert dsack_reported(keys, rows, np.array([11]), np.array([20])).tolist() == [False, False, True]
    # a DSACK before the block's last retransmission, or of another block: none
    assert not dsack_reported(keys, rows, np.array([11]), np.array([10])).any()
    assert not dsack_reported(keys, rows, np.array([12]), np.array([30])).any()
    assert dsack_reported(keys, rows, np.array([20, 11]), np.array([9, 13])).tolist() == [False, True, True]
    assert dsack_reported(np.zeros(0, np.int64), np.zeros(0, np.int64), np.array([11]), np.array([1])).size == 0


def test_duplicate_acks_repeat_the_previous_row_unless_answering_a_keepalive():
    win = np.full(6, 50)
    cand = np.ones(6, bool)
    dr = np.array([0, 1, 1, 0, 1, 1])
    rela = np.array([0, 100, 100, 5, 100, 100])
    keepalive = np.array([False, False, False, True, False, False])
    # row 1: its direction's first row; row 2 repeats it; rows 4 and 5 repeat it too but
    # the other side's previous row (3) is a keep-alive: they answer it
    assert duplicate_acks(dr, rela, win, cand, keepalive).tolist() == [False, False, True, False, False, False]
    # what a chunk carries (per direction, arrays over the flows: sent a row before, its
    # ACK and window, keep-alive or not (-1: no row)): row 1 repeats direction 1's earlier row
    none = (np.array([False]), np.array([0]), np.array([0]), np.array([-1], np.int8))
    d1 = (np.array([True]), np.array([100]), np.array([50]), np.array([0], np.int8))
    assert duplicate_acks(dr, rela, win, cand, keepalive, carry=[none, d1]).tolist()[:3] == [False, True, True]
    # ... unless direction 0's last earlier row was a keep-alive (no row of 0 before row 1 here)
    dr2 = np.array([1, 1, 0, 1])
    r2 = np.array([100, 100, 0, 100])
    ka0 = (np.array([True]), np.array([7]), np.array([50]), np.array([1], np.int8))
    got = duplicate_acks(dr2, r2, np.full(4, 50), np.ones(4, bool), np.zeros(4, bool), carry=[ka0, d1])
    assert got.tolist() == [False, False, False, True]
    # two flows, each with its own carry: only flow 1's first row repeats its flow's earlier row
    two = (np.array([True, True]), np.array([99, 100]), np.array([50, 50]), np.array([0, 0], np.int8))
    none2 = (np.array([False, False]), np.array([0, 0]), np.array([0, 0]), np.array([-1, -1], np.int8))
    got = duplicate_acks(np.array([1, 1, 1]), np.array([100, 100, 100]), np.full(3, 50), np.ones(3, bool),
                         np.zeros(3, bool), fl=np.array([0, 1, 1]), carry=[none2, two])
    assert got.tolist() == [False, True, True]
    # not a candidate, another window, or the previous row in another flow: none
    assert not duplicate_acks(dr, rela, win, np.zeros(6, bool), keepalive).any()
    assert not duplicate_acks(dr, rela, np.array([50, 50, 60, 50, 50, 50]), cand, np.zeros(6, bool))[2]
    fl = np.array([0, 0, 0, 1, 1, 1])
    assert duplicate_acks(dr, rela, win, cand, np.zeros(6, bool), fl=fl).tolist() == \
        [False, False, True, False, False, True]


def test_resent_unprompted_when_the_receiver_sent_nothing_since_the_last_copy():
    fl = np.array([0, 0, 0, 1, 0])
    rel = np.array([5, 5, 5, 5, 9])
    row = np.array([10, 12, 20, 21, 22])
    last_rev = np.array([3, 11, 15, 4, 15])
    # row 12 resends byte 5 after the receiver's row 11, row 20 after its row 15, both
    # later than the copy before them: prompted; flow 1's byte 5 and byte 9 are first copies
    got, held = resent_unprompted(fl, rel, row, last_rev)
    assert got.tolist() == [False, False, False, False, False]
    last_rev = np.array([3, 11, 11, 4, 15])                 # nothing from the receiver after row 12
    assert resent_unprompted(fl, rel, row, last_rev)[0].tolist() == [False, False, True, False, False]
    # a copy held from an earlier chunk (flow 0, byte 9 at row 18), the receiver silent since row 15
    got, held = resent_unprompted(np.array([0]), np.array([9]), np.array([30]), np.array([15]),
                                  held=(np.array([0]), np.array([9]), np.array([18])))
    assert got.tolist() == [True] and [h.tolist() for h in held] == [[0, 0], [9, 9], [18, 30]]
