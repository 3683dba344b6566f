"""Fixtures for the sweep tests: a real dask.distributed cluster (a ``dask scheduler`` and
two ``dask worker`` processes on loopback), removed at the end even when a test fails."""
from __future__ import annotations

import pytest
from tests.sweep._sweep_helpers import DASK, DaskCluster


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    # dask/distributed are airlink dependencies: a missing `dask` command is a broken install
    assert DASK.exists(), f"the dask command is missing ({DASK}): distributed is not installed"
    cluster = DaskCluster(tmp_path_factory.mktemp("dask"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()
