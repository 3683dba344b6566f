"""Address blocks of the shells: more than 64 at once, none overlapping a route already
in the namespace (pure checks; the many-shells run is in test_many_shells_netns.py)."""
from __future__ import annotations

import ipaddress

from airlink.replay.plumbing import candidate_blocks, free_blocks, link_addresses, routed_networks

ROUTES = """\
default via 192.0.2.1 dev eth0
100.64.0.0/20 dev al17 scope link
100.96.0.0/11 dev tailscale0 table 52
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
local 100.64.0.1 dev al17 table local proto kernel scope host src 100.64.0.1
broadcast 127.255.255.255 dev lo table local proto kernel scope link src 127.0.0.1
"""


def test_outermost_blocks_are_1024_disjoint_slash20s_of_the_shared_range():
    blocks = candidate_blocks(None)
    assert len(blocks) == 1024 == 2 ** (20 - 10)
    assert all(b.prefixlen == 20 and b.subnet_of(ipaddress.ip_network("100.64.0.0/10")) for b in blocks)
    assert len({b.network_address for b in blocks}) == 1024
    assert link_addresses(blocks[0]) == ("100.64.0.1", "100.64.0.2")


def test_a_block_overlapping_any_route_is_not_free():
    free = free_blocks(candidate_blocks(None), routed_networks(ROUTES))
    # 100.64.0.0/20 is taken (a shell); 100.96.0.0/11 = 100.96.0.0 .. 100.127.255.255 is a VPN's
    assert free[0] == ipaddress.ip_network("100.64.16.0/20")
    assert not any(b.overlaps(ipaddress.ip_network("100.96.0.0/11")) for b in free)
    assert len(free) == 1024 - 1 - 2 ** (20 - 11)


def test_nesting_goes_six_levels_deep_from_an_outermost_block():
    block, depth = candidate_blocks(None)[0], 1
    while True:
        try:
            block = candidate_blocks(str(block))[0]
        except Exception:
            break
        depth += 1
    assert depth == 6 and block.prefixlen == 30
