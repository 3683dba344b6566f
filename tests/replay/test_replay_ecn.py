"""ECN marking and the L4S (DualPI2) queue, on an injected clock (no root).

Expected values come from outside the code under test: RFC 1624's worked checksum
example, scapy's own header checksums, CoDel's control law worked by hand (RFC 8289),
and the PI2 update and the coupled probabilities of RFC 9332 computed here.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import pytest
from tests.cext import c_extension
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6

from airlink.replay import LinkStage, make_queue
from airlink.replay.ecn import CE, ECT0, ECT1, NOT_ECT, checksum_update, ecn_of, mark_ce
from airlink.replay.queues import MS
from airlink.traces import AirlinkError, LinkLogWriter, read_log


@functools.lru_cache(maxsize=None)
def ip4(ecn, size=1000, ident=1):
    p = IP(src="100.64.0.1", dst="100.64.0.2", tos=0x28 | ecn, id=ident) / TCP(sport=5201, dport=40000)
    return bytes(p / (b"x" * (size - len(p))))


def ip6(ecn, size=1000):
    p = IPv6(src="fd00::1", dst="fd00::2", tc=0x28 | ecn) / TCP(sport=5201, dport=40000)
    return bytes(p / (b"x" * (size - len(p))))


# ---- the ECN field ------------------------------------------------------------------

def test_rfc1624_worked_example():
    # RFC 1624 section 4: HC = 0xDD2F, m = 0x5555 -> m' = 0x3285 gives HC' = 0x0000
    assert checksum_update(0xDD2F, 0x5555, 0x3285) == 0x0000


@pytest.mark.parametrize("ecn", [ECT0, ECT1, CE])
def test_mark_ce_ipv4_matches_a_recomputed_header(ecn):
    for ident in (0, 1, 0x1234, 0xFFFF):
        p = ip4(ecn, ident=ident)
        ref = IP(p)
        ref.tos |= CE
        del ref.chksum                       # scapy recomputes the whole header sum
        assert mark_ce(p) == bytes(ref)
        assert ecn_of(mark_ce(p)) == CE


@pytest.mark.parametrize("ecn", [ECT0, ECT1])
def test_mark_ce_ipv6(ecn):
    p = ip6(ecn)
    ref = IPv6(p)
    ref.tc |= CE
    assert mark_ce(p) == bytes(ref)
    assert ecn_of(p) == ecn


def test_not_ect_and_non_ip_are_never_marked():
    assert mark_ce(ip4(NOT_ECT)) is None
    assert mark_ce(ip6(NOT_ECT)) is None
    assert mark_ce(b"\x00" * 1000) is None
    assert mark_ce(b"\x45\x03") is None       # too short for a header


# ---- CoDel --------------------------------------------------------------------------

def codel_run(ecn, n=400):
    """400 ECT(0) packets queued at 0, one dequeued per ms: the sojourn stays above target."""
    q = make_queue("codel", {"ecn": ecn, "packets": 1000})
    for i in range(n):
        q.enqueue(ip4(ECT0, ident=i % 7), 0)
    out, t = [], 0
    while (item := q.dequeue(t)) is not None:
        out.append((t, item[0]))
        t += MS
    return q, out


def test_codel_marks_where_the_dropping_codel_drops():
    marking, out = codel_run(True)
    dropping, out_d = codel_run(False)
    # hand-worked RFC 8289: sojourn reaches target (5 ms) at t = 5 ms, so the first
    # signal is at 5 + interval = 105 ms; then drop_next = 105 + 100/sqrt(1) = 205 ms,
    # 205 + 100/sqrt(2) = 275.7 (-> the 276 ms dequeue), 275.7 + 100/sqrt(3) = 333.4 (-> 334)
    marked_at = [t // MS for t, p in out if ecn_of(p) == CE]
    assert marked_at[:4] == [105, 205, 276, 334]
    assert marking.drops_packets == 0 and len(out) == 400
    assert marking.marks_packets == len(marked_at) and marking.marks_bytes == 1000 * len(marked_at)
    assert dropping.drops_packets == marking.marks_packets and dropping.marks_packets == 0
    assert all(ecn_of(p) == ECT0 for _, p in out_d)


def test_codel_with_ecn_still_drops_not_ect_packets():
    q = make_queue("codel", "ecn")
    for i in range(300):
        q.enqueue(ip4(NOT_ECT, ident=i % 7), 0)
    t = 0
    while q.dequeue(t) is not None:
        t += MS
    assert q.drops_packets > 0 and q.marks_packets == 0


def test_a_full_buffer_drops_even_with_ecn():
    for kind in ("droptail", "codel", "pie", "l4s"):
        q = make_queue(kind, {"ecn": True, "packets": 3})
        assert [q.enqueue(ip4(ECT1), 0) for _ in range(5)] == [True, True, True, False, False]
        assert (q.drops_packets, q.marks_packets) == (2, 0)


# ---- PIE ----------------------------------------------------------------------------

def pie_run(ecn, kind_ecn=ECT0):
    """2 packets in per ms, 1 out, for 400 ms: the delay grows and drop_prob rises from 0.
    Returns the queue and drop_prob at every refused arrival."""
    q = make_queue("pie", {"ecn": ecn, "seed": 7, "max_burst": "15ms"})
    t, sent, refused = 0, 0, []
    for _ in range(400):
        for _ in range(2):
            if not q.enqueue(ip4(kind_ecn, ident=sent % 7), t):
                refused.append(q.drop_prob)
            sent += 1
        q.dequeue(t)
        t += MS
    return q, refused


def test_pie_marks_instead_of_early_drops_up_to_ten_percent():
    marking, refused = pie_run(True)
    dropping, refused_d = pie_run(False)
    assert any(p <= 0.1 for p in refused_d)               # the dropping PIE drops early ...
    assert marking.marks_packets > 0
    assert all(p > 0.1 for p in refused)                  # ... the marking one only above 10 %
    nonect, refused_n = pie_run(True, NOT_ECT)
    assert nonect.marks_packets == 0 and any(p <= 0.1 for p in refused_n)


# ---- L4S (DualPI2) ------------------------------------------------------------------

def test_l4s_step_marks_ect1_above_the_threshold_only():
    q = make_queue("l4s", "step=1ms")
    for i in range(4):
        q.enqueue(ip4(ECT1, ident=i), 0)
    got = [q.dequeue(t) for t in (0, 900_000, 1_000_000, 1_100_000)]
    assert [ecn_of(p) for p, _ in got] == [ECT1, ECT1, ECT1, CE]    # sojourn > 1 ms only
    assert q.marks_packets == 1


def test_l4s_pi2_update_matches_rfc9332():
    # a classic packet that waits: updates every 16 ms from the first event at t = 0
    q = make_queue("l4s")
    q.enqueue(ip4(NOT_ECT), 0)
    q._update(16 * MS)
    p1 = 0.16 * (0.016 - 0.015) + 3.2 * (0.016 - 0)
    assert q.p_base == pytest.approx(p1, rel=1e-12)
    q._update(32 * MS)
    assert q.p_base == pytest.approx(p1 + 0.16 * (0.032 - 0.015) + 3.2 * (0.032 - 0.016), rel=1e-12)


def test_l4s_coupled_probabilities():
    """With p' held at 0.3: classic not-ECT dropped with p' ** 2 = 0.09, classic ECT(0)
    marked with 0.09, L4S packets (below the step) marked with K p' = 0.6."""
    n = 20000
    results = {}
    for ecn in (NOT_ECT, ECT0, ECT1):
        q = make_queue("l4s", {"tupdate": "1000s", "seed": 5, "packets": n + 1})
        q._update(0)
        q.p_base = 0.3
        for i in range(n):
            q.enqueue(ip4(ecn, ident=i % 7), 0)
        while q.dequeue(0) is not None:
            pass
        results[ecn] = (q.drops_packets, q.marks_packets)
    sigma = lambda p: 4 * math.sqrt(n * p * (1 - p))     # noqa: E731
    assert abs(results[NOT_ECT][0] - 0.09 * n) < sigma(0.09) and results[NOT_ECT][1] == 0
    assert abs(results[ECT0][1] - 0.09 * n) < sigma(0.09) and results[ECT0][0] == 0
    assert abs(results[ECT1][1] - 0.6 * n) < sigma(0.6) and results[ECT1][0] == 0


def test_l4s_serves_l_first_unless_classic_waited_tshift_longer():
    # p' held at 0 (no update within the test): the C head is never dropped by the
    # coupled coin (p' would reach 0.105 by 32 ms, a 1 % drop of the packet under test)
    q = make_queue("l4s", "tshift=30ms,tupdate=1000s")
    q.enqueue(ip4(NOT_ECT, ident=1), 0)
    q.enqueue(ip4(ECT1, ident=2), 10 * MS)
    assert ecn_of(q.dequeue(11 * MS)[0]) in (ECT1, CE)      # C head only 10 ms older
    q.enqueue(ip4(ECT1, ident=3), 40 * MS)
    assert ecn_of(q.dequeue(41 * MS)[0]) == NOT_ECT         # C head 40 ms older than L head


def test_queue_arguments():
    assert make_queue("codel", "ecn").ecn and not make_queue("codel").ecn
    assert make_queue("pie", "ecn=0").ecn is False
    assert make_queue("l4s").ecn                              # L4S always marks
    assert make_queue("droptail", "packets=5,ecn").describe() == "droptail [packets=5, ecn]"
    with pytest.raises(AirlinkError, match="ecn"):
        make_queue("codel", "ecn=maybe")
    with pytest.raises(AirlinkError, match="step"):
        make_queue("l4s", "step=0ms")


# ---- the link stage: log, stats, the C path ----------------------------------------

def test_link_log_has_mark_lines_and_none_without_marks(tmp_path):
    logs = {}
    for name, ecn, kind in (("mark", True, ECT0), ("off", False, ECT0), ("nonect", True, NOT_ECT)):
        path = tmp_path / f"{name}.log"
        q = make_queue("codel", {"ecn": ecn})
        log = LinkLogWriter(path, direction="downlink", trace="t", queue=q.describe(), base_ms=0)
        st = LinkStage([1000.0], Fraction(1, 1000), queue=q, start_ns=0, log=log, base_ns=0)
        for i in range(400):
            st.push(ip4(kind, ident=i % 7), 0)
        for t in range(1, 420):
            st.pull(t * MS)
        st.close(420 * MS)
        logs[name] = (path.read_text(), read_log(path), st.stats())
    text, frame, stats = logs["mark"]
    marks = frame[frame["event"] == "mark"]
    assert marks["packets"].sum() == stats["marks_packets"] > 0
    assert marks["bytes"].sum() == stats["marks_bytes"]
    assert stats["drops_packets"] == 0 and stats["ecn"] is True
    assert (frame["event"] == "departure").sum() == 400
    for name in ("off", "nonect"):
        text, frame, stats = logs[name]
        assert " m " not in text and stats["marks_packets"] == 0 and stats["drops_packets"] > 0
    assert "ecn" not in logs["off"][0].split("\n# queue: ")[1].split("\n")[0]


@pytest.mark.parametrize("kind,args", [("droptail", "packets=20"), ("drophead", "bytes=20000")])
def test_c_path_makes_the_python_decisions_for_ecn_droptail_and_drophead(kind, args):
    """A full buffer drops whether or not ECN is on, so the C queues (which never mark)
    serve ECN-capable traffic exactly as the Python reference with ``ecn``."""
    c_extension("airlink.replay._fastpath")
    py = LinkStage([1500.0], Fraction(1, 1000), queue=make_queue(kind, args + ",ecn"), start_ns=0)
    c = LinkStage([1500.0], Fraction(1, 1000), queue=make_queue(kind, args + ",ecn"), start_ns=0).fast()
    assert c is not None
    sent = [ip4((ECT0, ECT1, NOT_ECT)[i % 3], size=600 + 7 * i, ident=i) for i in range(300)]
    got_py, got_c = [], []
    for i, p in enumerate(sent):
        t = i * 200_000            # 5 packets per TTI in, about 2 out
        got_py += py.pull(t)
        got_c += c.pull(t)
        py.push(p, t)
        c.push(p, t)
    for t in range(60 * MS, 200 * MS, MS):
        got_py += py.pull(t)
        got_c += c.pull(t)
    assert got_py == got_c and len(got_py) < len(sent)
    sp, sc = py.stats(), c.stats()
    assert (sp["drops_packets"], sp["drops_bytes"]) == (sc["drops_packets"], sc["drops_bytes"])
    assert sp["marks_packets"] == 0


def test_marking_queues_run_in_c_on_packets_of_one_segment():
    """CoDel, PIE and L4S have C versions (tests/replay/test_link_core.py compares their
    decisions with these queues'); they decide per packet, so the shell reads no GSO
    super-packets for them."""
    for kind in ("codel", "pie", "l4s"):
        stage = LinkStage([1.0], Fraction(1, 1000), queue=make_queue(kind, ecn=True))
        assert stage.fast_refusal() is None and stage.fast() is not None and stage.per_packet
    assert not LinkStage([1.0], Fraction(1, 1000), queue=make_queue("droptail", packets=5)).per_packet
