"""Fixtures for the sweep tests: a real dask.distributed cluster (a ``dask scheduler`` and
two ``dask worker`` processes on loopback), removed at the end even when a test fails."""
from __future__ import annotations

import pytest
from _sweep_helpers import DASK, DaskCluster


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    if not DASK.exists():
        pytest.skip(f"the dask command is not installed ({DASK})")
    cluster = DaskCluster(tmp_path_factory.mktemp("dask"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
