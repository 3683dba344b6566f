"""analyze_tcp on hand-built connections whose truth is known, and invariants on real ones."""
from __future__ import annotations

import numpy as np
import pytest

from airlink import collectors as C
from airlink.traces import validate

from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
A, B = "10.0.0.1", "10.0.0.2"


def ts(v, e):
    return [("NOP", None), ("NOP", None), ("Timestamp", (v, e))]


def data(t, seq, tsv, isn=0, size=1000):
    return (t, tcp_packet(A, B, 40000, 80, seq=(isn + seq) % 2**32, ack=1001, flags="PA",
                          payload=b"d" * size, options=ts(tsv, 9)))


def ack(t, a, tse, *, isn=0, sack=None, window=1000):
    opts = ts(9, tse) + ([("NOP", None), ("NOP", None), ("SAck", sack)] if sack else [])
    return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=(isn + a) % 2**32, flags="A", window=window,
                          options=opts))


def ts_handshake(isn=0):
    """SYN at 0, SYN-ACK at 10, ACK at 20 ms, with SACK, timestamps and window scaling."""
    syn = (0, tcp_packet(A, B, 40000, 80, seq=isn % 2**32, flags="S",
                         options=[("MSS", 1000), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None),
                                  ("WScale", 3)]))
    synack = (10, tcp_packet(B, A, 80, 40000, seq=1000, ack=(isn + 1) % 2**32, flags="SA",
                             options=[("MSS", 1000), ("SAckOK", b""), ("Timestamp", (8, 1)),
                                      ("NOP", None), ("WScale", 2)]))
    hs_ack = (20, tcp_packet(A, B, 40000, 80, seq=(isn + 1) % 2**32, ack=1001, flags="A", options=ts(2, 8)))
    return [syn, synack, hs_ack]


def scenario(isn=0):
    """Data A->B: a fast retransmit after 3 duplicate ACKs, then a timeout retransmission
    that was spurious (Eifel and DSACK), then a zero window."""
    pk = ts_handshake(isn)
    for i in range(5):
        pk.append(data(30 + i, 1 + 1000 * i, 100 + i, isn))
    pk.append(ack(80, 1001, 100, isn=isn))
    for k in range(3):
        pk.append(ack(81 + k, 1001, 100, isn=isn, sack=((isn + 2001 + 0) % 2**32, (isn + 2001 + 1000 * (k + 1)) % 2**32)))
    pk.append(data(84, 1001, 110, isn))                        # fast retransmit
    pk.append(ack(134, 5001, 110, isn=isn))
    pk.append(data(140, 5001, 120, isn))
    pk.append(data(400, 5001, 130, isn))                       # timeout retransmission
    pk.append(ack(410, 6001, 120, isn=isn))                    # acks the original: Eifel
    pk.append(ack(460, 6001, 130, isn=isn, sack=((isn + 5001) % 2**32, (isn + 6001) % 2**32)))  # DSACK
    pk.append(ack(500, 6001, 130, isn=isn, window=0))          # zero window
    return [(T0 + t * MS, link_wrap(p, 1)) for t, p in pk]


@pytest.fixture(params=[0, 2**32 - 3000], ids=["isn0", "isn-wraps"])
def analysis(request, tmp_path):
    f = tmp_path / "s.pcap"
    f.write_bytes(pcap_bytes(scenario(request.param)))
    return C.analyze_tcp(f, resolution="100ms")


def test_flow_table(analysis):
    fl = analysis.flows
    validate(fl, "flows")
    assert len(fl) == 1
    r = fl.iloc[0]
    assert (r["src"], r["dst"], r["sport"], r["dport"]) == (A, B, 40000, 80)
    assert r["packets_fwd"] == 10 and r["packets_rev"] == 9
    assert r["mss_bytes"] == 1000 and r["wscale_fwd"] == 3 and r["wscale_rev"] == 2
    assert r["sack_permitted"] and r["timestamps"]


def test_retransmission_classes(analysis):
    r = analysis.flows.iloc[0]
    assert r["retransmissions"] == 2
    assert r["fast_retransmissions"] == 1 and r["timeout_retransmissions"] == 1
    assert r["spurious_retransmissions"] == 1
    assert r["dupacks"] == 4 and r["zero_windows"] == 1      # 3 before the fast retransmit + the DSACK
    ev = analysis.events
    rx = ev[ev["event"] == "retransmission"].reset_index(drop=True)
    assert list(rx["kind"]) == ["fast", "timeout"]
    assert list(rx["seq"]) == [1001, 5001]
    assert list(rx["spurious"]) == [False, True]
    assert rx["spurious_reason"].iloc[1] in ("eifel", "dsack")


def test_rtt_samples_obey_karn(analysis):
    ev = analysis.events
    rtt = ev[ev["event"] == "rtt"]
    seqack = rtt[rtt["kind"] == "seq_ack"]
    # the SYN (0 -> SYN-ACK at 10), the SYN-ACK (10 -> ACK at 20), the first data ACK (30 ->
    # 80); later ACKs cover retransmitted data (Karn)
    assert np.allclose(seqack[seqack["direction"] == "fwd"]["rtt_ms"], [10.0, 50.0])
    assert np.allclose(seqack[seqack["direction"] == "rev"]["rtt_ms"], [10.0])
    tsr = rtt[rtt["kind"] == "timestamp"]
    # fwd: the SYN echoed by the SYN-ACK (10), data echoed by ACKs (50, 50, 270: the ACK at
    # 410 echoes the original sent at 140) and the retransmission at 400 echoed by the
    # DSACK at 460 (60); rev: the SYN-ACK echoed by the handshake ACK (10)
    assert sorted(tsr[tsr["direction"] == "fwd"]["rtt_ms"].round(3)) == [10.0, 50.0, 50.0, 60.0, 270.0]
    assert sorted(tsr[tsr["direction"] == "rev"]["rtt_ms"].round(3)) == [10.0]
    fl = analysis.flows.iloc[0]
    # per direction: sequence/ACK samples where a direction has any, else timestamps
    assert fl["data_direction"] == "fwd"
    assert (fl["rtt_ms_median_fwd"], fl["rtt_samples_fwd"]) == (pytest.approx(30.0), 2)
    assert (fl["rtt_ms_median_rev"], fl["rtt_samples_rev"]) == (pytest.approx(10.0), 1)
    assert fl["rtt_ms_median"] == pytest.approx(40.0)            # the two halves of the path
    assert fl["rtt_ms_min"] == pytest.approx(20.0)


def test_series(analysis):
    s = analysis.series
    validate(s, "tcp")
    fwd = s[s["direction"] == "fwd"]
    assert fwd["retransmissions"].sum() == 2
    assert fwd["throughput_bps"].sum() * 0.1 / 8 == pytest.approx(8000)     # all payload bytes (6 new + 2 again)
    assert fwd["goodput_bps"].sum() * 0.1 / 8 == pytest.approx(6000)        # newly acked bytes
    assert 1000 < fwd["inflight_bytes"].max() <= 5000                      # mean over the bin
    assert (s[s["direction"] == "rev"]["inflight_bytes"].fillna(0) <= 1).all()
    assert fwd["rwnd_bytes"].iloc[4] == 1000 * 4          # 400-500 ms: window 1000 scaled by 2**2
    assert s["dupacks"].sum() == 4
    summ = analysis.summary()[0]
    for k in ("src", "dst", "sport", "dport", "packets", "bytes", "retransmissions",
              "spurious_retransmissions", "rtt_ms_median"):
        assert k in summ
    assert summ["packets"] == 19 and summ["retransmissions"] == 2


def test_receiver_side_capture_counts_hole_fill(tmp_path):
    """Lost before the capture point: the retransmission fills a hole and still counts."""
    pk = scenario()
    del pk[4]                                          # the original of seq 1001 never seen
    f = tmp_path / "r.pcap"
    f.write_bytes(pcap_bytes(pk))
    a = C.analyze_tcp(f)
    assert a.flows.iloc[0]["retransmissions"] == 2


def handshake(isn=0):
    """SYN at 0, SYN-ACK at 10, ACK at 20 ms: a 20 ms handshake RTT (the out-of-order window)."""
    return [(0, tcp_packet(A, B, 40000, 80, seq=isn, flags="S", options=[("MSS", 1000), ("SAckOK", b"")])),
            (10, tcp_packet(B, A, 80, 40000, seq=1000, ack=isn + 1, flags="SA", options=[("MSS", 1000)])),
            (20, tcp_packet(A, B, 40000, 80, seq=isn + 1, ack=1001, flags="A"))]


def classes(tmp_path, pk, chunk=None):
    """(packet number, kind) of each retransmission and the out-of-order packets, analysed
    whole and in time chunks of ``chunk`` packets (the same answer both ways)."""
    f = tmp_path / "c.pcap"
    f.write_bytes(pcap_bytes([(T0 + t * MS, link_wrap(p, 1)) for t, p in pk]))
    out = []
    for kw in ({}, {"max_packets": chunk} if chunk else {}):
        ev = C.analyze_tcp(f, **kw).events
        rx = ev[ev["event"] == "retransmission"]
        out.append((list(zip(rx["packet"], rx["kind"])), list(ev[ev["event"] == "out_of_order"]["packet"])))
    assert out[0] == out[1]
    return out[0]


def test_segment_past_snd_max_long_after_the_last_advance_is_a_retransmission(tmp_path):
    """A segment that starts below snd_max and ends past it advances snd_max itself; the
    out-of-order window (20 ms here) is timed from the advance before it (tshark's
    nextseqtime), 368 ms earlier, so it is a retransmission (no duplicate ACKs: timeout)
    and not out of order. 206_example_b frame 262 is this case."""
    pk = handshake() + [(30 + i, tcp_packet(A, B, 40000, 80, seq=1 + 1000 * i, ack=1001, flags="PA",
                                            payload=b"d" * 1000)) for i in range(3)]
    pk.append((80, tcp_packet(B, A, 80, 40000, seq=1001, ack=1001, flags="A")))
    pk.append((400, tcp_packet(A, B, 40000, 80, seq=2501, ack=1001, flags="PA", payload=b"d" * 1000)))
    assert classes(tmp_path, pk, chunk=4) == ([(7, "timeout")], [])
    # the same segment 10 ms after the last advance: inside the window, but 2501-3000
    # passed the capture point before, so it is sent again, not reordered (tshark: out of order)
    pk[-1] = (42, pk[-1][1])
    pk[-2], pk[-1] = pk[-1], pk[-2]
    assert classes(tmp_path, pk) == ([(6, "timeout")], [])


def test_out_of_order_fills_bytes_the_capture_had_not_seen(tmp_path):
    """1001-2000 arrives after 2001-3000 (a gap at the capture point), 2 ms later: inside
    the out-of-order window (the 20 ms handshake RTT) and never seen before - reordered.
    The same bytes 2 ms later again had passed before: a retransmission, whatever the
    window says."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))
    pk = handshake() + [seg(30, 1), seg(31, 2001), seg(33, 1001), seg(35, 1001)]
    assert classes(tmp_path, pk, chunk=4) == ([(6, "timeout")], [5])


def test_recovery_ends_at_the_full_ack(tmp_path):
    """RFC 6582: fast recovery begun by the fast retransmit at 84 ms (snd_max 5001, so
    recover = 5000) lasts until an ACK covers 5001. The partial ACK at 134 ms is answered by a
    retransmission inside the episode (fast) while snd_max is 6001; that one does not move
    recover, so after the full ACK at 185 ms the retransmission at 400 ms, with no
    duplicate ACK since, is a timeout (fast006 frame 49 is this case)."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))

    def ack_(t, a):
        return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A"))
    pk = handshake() + [seg(30 + i, 1 + 1000 * i) for i in range(5)]
    pk += [ack_(80, 1001), ack_(81, 1001), ack_(82, 1001), ack_(83, 1001)]
    pk += [seg(84, 1001), seg(85, 5001), ack_(134, 3001), seg(135, 3001), ack_(185, 5001), seg(400, 5001)]
    # packets (0-based): 12 fast retransmit, 15 retransmission in the episode, 17 after it
    assert classes(tmp_path, pk, chunk=5) == ([(12, "fast"), (15, "fast"), (17, "timeout")], [])


def test_fast_retransmit_resends_what_the_duplicate_acks_ask_for_once_per_ack(tmp_path):
    """After two duplicate ACKs for 1001: a retransmission of 2001 opens no recovery
    (RFC 5681 section 3.2 resends the segment at the ACK number) - a timeout; the one of
    1001 is the fast retransmit. The same segment again at 400 ms with nothing from the
    receiver since: only the timer can have sent it (RFC 6298 section 5.4), which ends the
    recovery, so 3001 at 401 ms is a timeout too (206_example_b frames 1278-1301 and rto003
    frames 25, 27 and 28, the timer's backoff, are this case). After one more duplicate
    ACK, 1001 sent again answers it, but inside the timeout's recovery (until an ACK covers
    snd_max 5001, RFC 6582 section 4) duplicate ACKs start no fast retransmit: a timeout."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))

    def ack_(t, a):
        return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A"))
    pk = handshake() + [seg(30 + i, 1 + 1000 * i) for i in range(5)]
    pk += [ack_(80, 1001), ack_(81, 1001), ack_(82, 1001)]
    pk += [seg(83, 2001), seg(84, 1001), seg(400, 1001), seg(401, 3001), ack_(450, 1001), seg(451, 1001)]
    assert classes(tmp_path, pk, chunk=4) == \
        ([(11, "timeout"), (12, "fast"), (13, "timeout"), (14, "timeout"), (16, "timeout")], [])


def sack_ack(t, a, left, right):
    """B's pure ACK of ``a`` (relative to A's ISN 0) carrying the SACK block [left, right)."""
    return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A",
                          options=[("NOP", None), ("NOP", None), ("SAck", (left, right))]))


def test_one_ack_with_a_sack_block_asks_for_the_hole(tmp_path):
    """Linux's RACK (RFC 8985) resends the hole once the receiver SACKs data sent after it:
    one duplicate ACK suffices. 1001 is lost; B ACKs 1001 with SACK 2001-3001 (its first
    duplicate ACK) and A resends 1001 1 ms later: fast. Then a full ACK, and a loss of
    5001 whose duplicate ACK carries only a DSACK (4001-5001, data B had twice): that
    reports nothing above the hole, so the resend of 5001 after it alone is a timeout; a
    plain duplicate ACK (no SACK blocks) alone asks for nothing either (tshark's two). An
    ACK that advances but still SACKs data above its new hole (9001, SACK 10001-11001) asks
    for that hole like a duplicate one: fast (comp005 frames 415-416: a window update
    with a SACK block, answered 50 us later)."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))

    def ack_(t, a):
        return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A"))
    pk = handshake() + [seg(30 + i, 1 + 1000 * i) for i in range(3)]          # 1, 1001, 2001
    pk += [ack_(80, 1001), sack_ack(81, 1001, 2001, 3001), seg(82, 1001)]  # packet 8: fast
    pk += [ack_(130, 3001), seg(131, 3001), seg(132, 4001), seg(133, 5001)]
    pk += [ack_(180, 5001), sack_ack(181, 5001, 4001, 5001), seg(182, 5001)]  # packet 15
    pk += [ack_(230, 6001), seg(231, 6001), seg(232, 7001)]
    pk += [ack_(280, 7001), ack_(281, 7001), seg(282, 7001)]                   # packet 21
    pk += [ack_(330, 8001), seg(331, 8001), seg(332, 9001), seg(333, 10001)]
    pk += [sack_ack(380, 9001, 10001, 11001), seg(381, 9001)]                   # packet 27
    assert classes(tmp_path, pk, chunk=5) == \
        ([(8, "fast"), (15, "timeout"), (21, "timeout"), (27, "fast")], [])


@pytest.mark.parametrize("echo,kind", [(101, "fast"), (110, "timeout")])
def test_a_spurious_timeout_ends_its_recovery_at_the_ack_that_shows_it(tmp_path, echo, kind):
    """1 - 4000 in flight; B SACKs 1001-2000 and A resends 1 (fast, TSval 105), then the timer
    resends it again (TSval 110). The first ACK to advance (to 2001) echoes TSval 101, older
    than the timer's copy: the timeout was spurious (Eifel, RFC 3522), Linux undoes its Loss
    state on that ACK, and the hole 2001 that the next ACK's SACK block reports is resent by
    fast retransmit. When that ACK echoes 110 (the retransmission brought it) the timeout
    was real - its jump over 1001-2000, SACKed before, shows no data of the first sending
    either (F-RTO) - its recovery lasts until an ACK covers snd_max 4001, and the resend of
    2001 inside it is a timeout. In chunks of 4 packets the advancing ACK is in the chunk
    after the timer's retransmission."""
    pk = ts_handshake() + [data(30 + i, 1 + 1000 * i, 100 + i) for i in range(4)]
    pk += [ack(50, 1, 100, sack=(1001, 2001)), data(51, 1, 105), data(400, 1, 110)]
    pk += [ack(410, 2001, echo), ack(411, 2001, echo, sack=(3001, 4001)), data(412, 2001, 111)]
    assert classes(tmp_path, pk, chunk=4) == ([(8, "fast"), (9, "timeout"), (12, kind)], [])


@pytest.mark.parametrize("chunk", [3, 4, 5, 100])
@pytest.mark.parametrize("case", ["first ack", "sack first", "second ack", "sack between", "resent between",
                                  "sacked before"])
def test_f_rto_undoes_a_timeout_whose_data_arrives(tmp_path, case, chunk):
    """F-RTO (RFC 5682 section 3.1, SACK-enhanced, as Linux's ``tcp_process_loss``), no
    timestamps: the timer resends 1 while 1 - 6000 are in flight (snd_max 6001) and B had
    reported nothing above its ACK. ``first ack``: the first ACK to advance covers
    1001-3000, sent once - those segments reached the receiver, the timeout was spurious;
    Linux undoes its Loss state there, and the hole 3001 that the next ACK SACKs above is
    resent by fast retransmit. ``sack first``: a SACK of 1001-3000 before that ACK shows the
    same, and undoes it there. ``second ack``: the first advance covers only the resent
    1-1000, new data 6001-7000 goes out (F-RTO's step 2), and the next advance covers
    1001-3000: spurious on that ACK, the resend of 3001 fast. ``sack between``: a SACK of
    the new data comes between them - the loss was real (step 3a), and 3001 is resent
    inside the timeout's recovery (until an ACK covers 6001): a timeout; ``resent
    between``: A resends 1001 instead of new data (conventional recovery), likewise.
    ``sacked before``: B had SACKed 1001-3000 before (A's fast retransmission of 1 was lost
    and the timer sent it again), so the ACK's jump over them shows nothing sent once.
    Whole and in chunks of 3, 4, 5 packets (the verdict in a later chunk than the timer's
    resend, and F-RTO's second ACK in a later chunk than its first)."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))

    def ack_(t, a):
        return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A"))
    pk = handshake() + [seg(30 + i, 1 + 1000 * i) for i in range(6)]
    expected = []
    if case == "sacked before":
        pk += [sack_ack(80, 1, 1001, 3001), seg(81, 1)]
        expected.append((10, "fast"))
    pk.append(seg(400, 1))                                                 # the timer's
    expected.append((len(pk) - 1, "timeout"))
    if case == "sack first":
        pk.append(sack_ack(405, 1, 1001, 3001))
    if case in ("first ack", "sack first", "sacked before"):
        pk.append(ack_(410, 3001))
    else:
        pk += [ack_(410, 1001), seg(411, 1001) if case == "resent between" else seg(411, 6001)]
        if case == "resent between":
            expected.append((len(pk) - 1, "timeout"))
        if case == "sack between":
            pk.append(sack_ack(430, 1001, 6001, 7001))
        pk.append(ack_(450, 3001))
    pk += [sack_ack(451, 3001, 4001, 6001), seg(452, 3001)]
    undone = case in ("first ack", "sack first", "second ack")
    expected.append((len(pk) - 1, "fast" if undone else "timeout"))
    assert classes(tmp_path, pk, chunk=chunk) == (expected, [])


def test_after_a_timeout_sack_holes_are_resent_inside_its_recovery(tmp_path):
    """F-RTO (RFC 5682; comp004 frames 28-39, comp005 frames 426-433): the timer resends
    1001 (snd_max 4001); its ACK is answered with new data, the next ACK is a duplicate
    with a SACK block above the holes, and the holes 2001 and 3001 are resent on it - inside
    the timeout's recovery, which lasts until an ACK covers 4001: timeouts, not fast (Linux
    counts them in TCPSlowStartRetrans). After that full ACK the same pattern is a fast
    retransmission again."""
    def seg(t, seq):
        return (t, tcp_packet(A, B, 40000, 80, seq=seq, ack=1001, flags="PA", payload=b"d" * 1000))

    def ack_(t, a):
        return (t, tcp_packet(B, A, 80, 40000, seq=1001, ack=a, flags="A"))
    pk = handshake() + [seg(30 + i, 1 + 1000 * i) for i in range(4)]          # 1 .. 3001
    pk += [ack_(80, 1001), seg(400, 1001)]                                    # 8: the timer's
    pk += [ack_(450, 2001), seg(451, 4001), seg(452, 5001)]                   # F-RTO's new data
    pk += [sack_ack(500, 2001, 4001, 5001), seg(501, 2001), seg(502, 3001)]   # 13, 14
    pk += [ack_(550, 6001), seg(551, 6001), seg(552, 7001), seg(553, 8001)]
    pk += [sack_ack(600, 6001, 7001, 8001), seg(601, 6001)]                  # 20
    assert classes(tmp_path, pk, chunk=6) == \
        ([(8, "timeout"), (13, "timeout"), (14, "timeout"), (20, "fast")], [])


def test_resolution_is_checked(tmp_path):
    f = tmp_path / "s.pcap"
    f.write_bytes(pcap_bytes(scenario()))
    with pytest.raises(C.AirlinkError if hasattr(C, "AirlinkError") else Exception):
        C.analyze_tcp(f, resolution="fast")


def test_real_captures_invariants(shared_data):
    for f in sorted((shared_data / "tcp-pcaps").rglob("*")):
        if not f.is_file() or f.name == "COPYING":
            continue
        a = C.analyze_tcp(f, resolution="1s")
        fl = a.flows
        assert (fl["spurious_retransmissions"] <= fl["retransmissions"]).all()
        assert (fl["fast_retransmissions"] + fl["timeout_retransmissions"] == fl["retransmissions"]).all()
        assert (fl["rtt_ms_min"].dropna() >= 0).all()
        s = a.series
        for c in ("retransmissions", "dupacks", "spurious_retransmissions"):
            assert s[c].sum() == fl[c].sum(), (f, c)
        assert s.groupby(["flow"])["packets"].sum().sum() == (fl["packets_fwd"] + fl["packets_rev"])[
            fl["proto"] == 6].sum()


def test_filtered_empty_and_udp_only_frames(shared_data):
    pk = C.read_pcap(shared_data / "tcp-pcaps/zeek-head/ssh.pcap")
    whole = C.analyze_tcp(pk).flows.set_index("flow")
    sub = C.analyze_tcp(pk[pk["flow"].isin([3, 7])]).flows.set_index("flow")
    assert list(sub.index) == [3, 7]
    for c in ("packets_fwd", "packets_rev", "retransmissions", "rtt_ms_median", "src", "dport"):
        assert list(sub[c]) == list(whole.loc[[3, 7], c])
    empty = C.analyze_tcp(pk.iloc[:0])
    assert len(empty.flows) == 0 and len(empty.series) == 0 and empty.summary() == []
    udp = pk.copy()
    udp["proto"] = 17
    u = C.analyze_tcp(udp)
    assert len(u.flows) == whole.shape[0] and len(u.series) == 0
    assert all(r["retransmissions"] == 0 and r["proto"] == "udp" for r in u.summary())


def _same_analysis(a, b):
    import pandas as pd
    for k in ("flows", "series", "events"):
        pd.testing.assert_frame_equal(getattr(a, k), getattr(b, k), check_exact=True)
    assert a.attrs == b.attrs and a.summary() == b.summary()


def test_path_analysis_equals_frame_analysis(tmp_path, shared_data):
    """analyze_tcp(path) reads narrow columns without a packets frame: every number must
    equal analyze_tcp(read_pcap(path)), on real captures and on a capture mixing flows,
    UDP, IPv6, a flow without its SYN (direction from its first packet) and records out
    of time order (flow numbers follow time order, not file order)."""
    from tests.collectors.pcapcraft import udp_packet
    recs = scenario()
    recs += scenario(isn=2**32 - 3000)[3:]          # second copy: same flow, no handshake
    late = [(T0 + 50 * MS, link_wrap(tcp_packet("fd00::2", "fd00::1", 443, 5555, seq=7, ack=9,
                                                flags="PA", payload=b"x" * 300, v6=True), 1)),
            (T0 + 5 * MS, link_wrap(udp_packet(), 1)),
            (T0 - 1 * MS, link_wrap(tcp_packet("10.0.0.9", B, 41000, 80, seq=5, flags="A",
                                               payload=b"y" * 100), 1))]
    recs = recs[:6] + late + recs[6:]               # the last one is the earliest in time
    f = tmp_path / "mixed.pcap"
    f.write_bytes(pcap_bytes(recs))
    files = [f] + sorted(p for p in (shared_data / "tcp-pcaps").rglob("*")
                         if p.is_file() and p.name != "COPYING")
    for p in files:
        for res in ("1s", "100ms"):
            _same_analysis(C.analyze_tcp(p, resolution=res), C.analyze_tcp(C.read_pcap(p), resolution=res))
    a = C.analyze_tcp(f)
    assert len(a.flows) == 4 and set(a.flows["proto"]) == {6, 17}
    assert a.flows.iloc[0]["sport"] == 41000        # first in time, last in the file


def test_path_analysis_containers_and_damage(tmp_path):
    """The path reader (columns reserved from the file size) on gzip (the reservation falls short and grows), pcapng, big captures split into
    several batches, and damaged files: the same error as read_pcap, or with salvage the
    same numbers as analysing the salvaged frame."""
    from airlink.collectors._capture import CaptureError
    from tests.collectors.pcapcraft import gz, pcapng_bytes
    recs = []
    for k in range(40):                                  # 40 short connections, 12 packets each
        for t, p in scenario(isn=k * 7919):
            recs.append((t + k * 10**9, p))
    raw = pcap_bytes(recs)
    (tmp_path / "a.pcap").write_bytes(raw)
    (tmp_path / "a.pcap.gz").write_bytes(gz(raw))
    (tmp_path / "a.pcapng").write_bytes(pcapng_bytes([(1, 9)], [(0, t, p) for t, p in recs]))
    ref = C.analyze_tcp(tmp_path / "a.pcap")
    assert len(ref.flows) == 1 and ref.flows.iloc[0]["packets_fwd"] > 0     # same 4-tuple: one flow
    for name in ("a.pcap.gz", "a.pcapng"):
        _same_analysis(C.analyze_tcp(tmp_path / name), C.analyze_tcp(C.read_pcap(tmp_path / name)))
    from airlink.collectors._capture import CaptureReader
    kw = CaptureReader.__init__.__kwdefaults__
    with pytest.MonkeyPatch.context() as mp:              # many small batches
        mp.setitem(kw, "chunk", 4096)
        assert sum(1 for _ in CaptureReader(tmp_path / "a.pcap")) > 10
        many = C.analyze_tcp(tmp_path / "a.pcap")
    _same_analysis(many, ref)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(raw[: len(raw) // 2] + b"\xff" * 40 + raw[len(raw) // 2 + 40:])
    with pytest.raises(CaptureError) as e_frame:
        C.read_pcap(bad)
    with pytest.raises(CaptureError) as e_path:
        C.analyze_tcp(bad)
    assert str(e_path.value) == str(e_frame.value)
    _same_analysis(C.analyze_tcp(bad, salvage=True), C.analyze_tcp(C.read_pcap(bad, salvage=True)))


@pytest.mark.parametrize("records", [
    [],
    [(T0 + i * MS, link_wrap(__import__("tests.collectors.pcapcraft", fromlist=["udp_packet"]).udp_packet(), 1)) for i in range(5)],
    [(T0, b"\x02" * 12 + b"\x08\x06" + b"\x00" * 28)],                     # ARP only
    [(T0, link_wrap(tcp_packet(A, B, 1, 2, flags="A"), 1))],
], ids=["no-packets", "udp-only", "non-ip", "one-packet"])
def test_path_analysis_degenerate_captures(tmp_path, records):
    f = tmp_path / "d.pcap"
    f.write_bytes(pcap_bytes(records))
    _same_analysis(C.analyze_tcp(f), C.analyze_tcp(C.read_pcap(f)))


def test_retransmitted_segments_count_each_packet_in_segments_of_the_mss(tmp_path):
    """B announced MSS 1000: A's resend of 1-2500 in one (GSO) packet is 3 segments, the
    resend of 2501-3000 one, a resent SYN one - 5 segments in 3 packets, as a sender's
    ``RetransSegs`` counts them."""
    syn = (0, tcp_packet(A, B, 40000, 80, seq=0, flags="S", options=[("MSS", 1000), ("SAckOK", b"")]))
    pk = [syn, (5, syn[1])] + handshake()[1:]
    pk += [(30, tcp_packet(A, B, 40000, 80, seq=1, ack=1001, flags="PA", payload=b"d" * 2500)),
           (31, tcp_packet(A, B, 40000, 80, seq=2501, ack=1001, flags="PA", payload=b"d" * 500)),
           (400, tcp_packet(A, B, 40000, 80, seq=1, ack=1001, flags="PA", payload=b"d" * 2500)),
           (401, tcp_packet(A, B, 40000, 80, seq=2501, ack=1001, flags="PA", payload=b"d" * 500))]
    f = tmp_path / "g.pcap"
    f.write_bytes(pcap_bytes([(T0 + t * MS, link_wrap(p, 1)) for t, p in pk]))
    flows = C.analyze_tcp(f).flows
    assert flows["retransmissions"].tolist() == [3]
    assert flows["retransmitted_segments"].tolist() == [5]
