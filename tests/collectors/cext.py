"""When a test of the collectors' C loops may skip: only where nothing could build the
extension (no C compiler) or AIRLINK_PURE_PYTHON turns it off. Where a compiler exists, a
missing extension or a missing function of it is a build regression, and the test fails."""
from __future__ import annotations

import os
import shutil
import sysconfig

import pytest

from airlink.collectors import _capture


def c_records(*functions: str):
    """The collectors' C extension (``airlink.collectors._records``) with ``functions``;
    skips or fails as the module notes say."""
    if os.environ.get("AIRLINK_PURE_PYTHON"):
        pytest.skip("AIRLINK_PURE_PYTHON is set: the numpy path is what runs")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if _capture._records is None:
        if shutil.which(cc) is None:
            pytest.skip(f"no C compiler ({cc}) here, so the collectors' C extension is not built")
        pytest.fail(f"the collectors' C extension is not importable although {cc} exists: a build failure")
    missing = [f for f in functions if not hasattr(_capture._records, f)]
    if missing:
        pytest.fail(f"the collectors' C extension lacks {', '.join(missing)}: rebuild it "
                    f"(pip install -e .) or fix the build")
    return _capture._records
