"""Fixtures of the replay tests (helpers live in ``_replay_netns``)."""
from __future__ import annotations

import pytest

from tests.replay._replay_netns import TestNS


@pytest.fixture
def test_ns(root_netns):
    """A fresh namespace ``airlink-test-<pid>-<n>``, deleted (with what runs in it) afterwards."""
    ns = TestNS()
    try:
        yield ns
    finally:
        ns.close()
