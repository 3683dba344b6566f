"""Captures of a cellular core's user plane (S1-U, N3): the users' TCP flows inside GTP-U
tunnels. The reference is the same packets captured without the tunnel - the analysis of
the tunnelled capture must give the same flows, TCP time series and events - and tshark,
which dissects GTP-U on UDP port 2152, for the inner headers packet by packet."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.collectors import _capture

from tests.collectors.pcapcraft import gtpu_packet, link_wrap, pcap_bytes, tcp_packet, udp_packet

T0 = 1_700_000_000 * 10**9
TS = [("NOP", None), ("NOP", None), ("Timestamp", (1, 1))]


def transfer(client, server, cport, v6=False, segments=40, lost=(7, 19)):
    """A download from ``server`` to ``client``: handshake, ``segments`` data segments of
    1000 bytes each ACKed, the segments in ``lost`` resent after three duplicate ACKs,
    FIN both ways. ``[(t_ns, ip bytes, downlink?)]``."""
    out, t = [], 0

    def add(ip, down, dt=1_000_000):
        nonlocal t
        t += dt
        out.append((t, ip, down))

    c = dict(src=client, dst=server, sport=cport, dport=443, v6=v6)
    s = dict(src=server, dst=client, sport=443, dport=cport, v6=v6)
    add(tcp_packet(**c, seq=100, flags="S", options=[("MSS", 1400), ("SAckOK", b"")] + TS), False)
    add(tcp_packet(**s, seq=5000, ack=101, flags="SA", options=[("MSS", 1400), ("SAckOK", b"")] + TS), True)
    add(tcp_packet(**c, seq=101, ack=5001, flags="A", options=TS), False)
    acked = 5001
    for k in range(segments):
        seq = 5001 + 1000 * k
        add(tcp_packet(**s, seq=seq, ack=101, flags="PA", payload=bytes(1000), options=TS), True)
        if k in lost:
            continue
        if lost and k in [x + j for x in lost for j in (1, 2, 3)]:
            add(tcp_packet(**c, seq=101, ack=acked, flags="A", options=TS), False)     # duplicate
            if k - 3 in lost:
                hole = acked
                add(tcp_packet(**s, seq=hole, ack=101, flags="PA", payload=bytes(1000), options=TS), True)
                acked = seq + 1000
                add(tcp_packet(**c, seq=101, ack=acked, flags="A", options=TS), False)
            continue
        acked = seq + 1000
        add(tcp_packet(**c, seq=101, ack=acked, flags="A", options=TS), False)
    add(tcp_packet(**s, seq=acked, ack=101, flags="FA", options=TS), True)
    add(tcp_packet(**c, seq=101, ack=acked + 1, flags="FA", options=TS), False)
    add(tcp_packet(**s, seq=acked + 1, ack=102, flags="A", options=TS), True)
    return out


def captures(tmp_path):
    """(plain, tunnelled) captures of the same packets at the same times: three users'
    downloads (IPv4 and IPv6 inside, interleaved), each direction its own tunnel, every GTP-U
    header layout (none, a sequence number, 5G's PDU session container; outer IPv4 and
    IPv6), plus GTP-U echo requests and a DNS query between the tunnel endpoints."""
    flows = [transfer("10.45.0.2", "93.184.216.34", 40001),
             transfer("10.45.0.3", "93.184.216.34", 40002, lost=()),
             transfer("2001:db8:45::2", "2001:db8:1::80", 40003, v6=True)]
    plain, tunnel = [], []
    for u, flow in enumerate(flows):
        for t, ip, down in flow:
            t = T0 + t + u * 333_000
            plain.append((t, link_wrap(ip, 1)))
            wrapped = gtpu_packet(ip, teid=(u << 1) | down, seq=t % 65536 if u == 1 else None,
                                  pdu_session=9 if u == 2 else None, outer_v6=u == 2 and down)
            tunnel.append((t, link_wrap(wrapped, 1)))
    others = [(T0 + 5_500_000, link_wrap(gtpu_packet(b"", message=1), 1)),
              (T0 + 9_500_000, link_wrap(udp_packet(src="192.0.2.1", dst="192.0.2.53"), 1))]
    plain.sort(key=lambda r: r[0])
    tunnel = sorted(tunnel + others, key=lambda r: r[0])
    a, b = tmp_path / "plain.pcap", tmp_path / "tunnel.pcap"
    a.write_bytes(pcap_bytes(plain))
    b.write_bytes(pcap_bytes(tunnel))
    return a, b


@pytest.mark.parametrize("compiled", [True, False])
def test_tunnelled_capture_is_analysed_as_its_users_flows(tmp_path, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setattr(_capture, "_records", None)        # the numpy reference decoder
    plain, tunnel = captures(tmp_path)
    p, t = C.analyze_tcp(plain), C.analyze_tcp(tunnel)
    tcp_flows = t.flows[t.flows["proto"] == 6].reset_index(drop=True)
    assert len(tcp_flows) == 3
    # the tunnel's own traffic: the GTP-U echo (port 2152) and the DNS query stay UDP flows
    udp = t.flows[t.flows["proto"] == 17]
    assert sorted(udp["dport"]) == [53, 2152]
    key = ["src", "dst", "sport", "dport"]
    got = tcp_flows.drop(columns="flow").sort_values(key).reset_index(drop=True)
    want = p.flows.drop(columns="flow").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
    assert list(want["retransmissions"]) == [2, 0, 2]           # the segments resent
    flow_of = dict(zip(t.flows["flow"], zip(*(t.flows[k] for k in key))))
    plain_flow = {v: k for k, v in zip(p.flows["flow"], zip(*(p.flows[k] for k in key)))}
    for name in ("series", "events"):
        a, b = getattr(t, name), getattr(p, name)
        a = a[a["flow"].map(lambda f: flow_of[f] in plain_flow)].copy()
        a["flow"] = a["flow"].map(lambda f: plain_flow[flow_of[f]])
        if "packet" in a:          # a packet's index in its capture: the tunnel's two more come before some
            t_ns = a["time"].astype("datetime64[ns, UTC]").astype("int64")
            a["packet"] -= (t_ns > T0 + 5_500_000).astype(int) + (t_ns > T0 + 9_500_000).astype(int)
        cols = list(b.columns)
        a = a[cols].sort_values(cols[:3]).reset_index(drop=True)
        b = b.sort_values(cols[:3]).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_categorical=False)


def test_inner_headers_agree_with_tshark(tmp_path):
    if not shutil.which("tshark"):
        pytest.skip("tshark is not installed (scripts/bootstrap installs it)")
    _, tunnel = captures(tmp_path)
    pk = C.read_pcap(tunnel)
    out = subprocess.run(["tshark", "-r", str(tunnel), "-Y", "tcp", "-T", "fields", "-E", "occurrence=l",
                          "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "tcp.dstport",
                          "-e", "tcp.seq_raw", "-e", "tcp.ack_raw", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [line.split("\t") for line in out]
    tcp = pk[pk["proto"] == 6].reset_index(drop=True)
    assert len(rows) == len(tcp) > 100
    # the last IP header's source: the user's (an IPv6 user's packet may ride an IPv4 tunnel)
    assert list(tcp["src"].astype(str)) == [r[1] or r[0] for r in rows]
    assert {"10.45.0.2", "10.45.0.3", "2001:db8:45::2", "93.184.216.34", "2001:db8:1::80"} == set(tcp["src"].astype(str))
    for k, col in ((2, "sport"), (3, "dport"), (4, "seq"), (5, "ack"), (6, "payload_bytes")):
        assert np.array_equal(tcp[col].astype(np.int64).to_numpy(), np.array([int(r[k]) for r in rows])), col


@pytest.mark.parametrize("compiled", [True, False])
def test_tunnel_ids_agree_with_tshark(tmp_path, monkeypatch, compiled):
    """Each user packet's TEID (gtp.teid) and 5G QFI (gtp.ext_hdr.pdu_ses_con.qos_flow_id)
    as tshark dissects them; -1 for the packets outside a tunnel's G-PDUs (the echo request
    and the DNS query between the tunnel endpoints)."""
    if not shutil.which("tshark"):
        pytest.skip("tshark is not installed (scripts/bootstrap installs it)")
    if not compiled:
        monkeypatch.setattr(_capture, "_records", None)        # the numpy reference decoder
    _, tunnel = captures(tmp_path)
    pk = C.read_pcap(tunnel)
    out = subprocess.run(["tshark", "-r", str(tunnel), "-T", "fields", "-e", "gtp.message",
                          "-e", "gtp.teid", "-e", "gtp.ext_hdr.pdu_ses_con.qos_flow_id"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [line.split("\t") for line in out]
    assert len(rows) == len(pk) > 100
    gpdu = [bool(r[0]) and int(r[0], 0) == 255 for r in rows]          # G-PDU (0xff)
    want_teid = [int(r[1], 0) if g else -1 for r, g in zip(rows, gpdu)]
    want_qfi = [int(r[2]) if g and r[2] else -1 for r, g in zip(rows, gpdu)]
    assert pk["teid"].tolist() == want_teid
    assert pk["qfi"].tolist() == want_qfi
    assert set(want_qfi) == {-1, 9} and len(set(want_teid)) == 7     # 3 users x 2 directions, and -1
    # each direction of a user's flow rides one tunnel
    tcp = pk[pk["proto"] == 6]
    assert (tcp.groupby(["flow", "direction"], observed=True)["teid"].nunique() == 1).all()
