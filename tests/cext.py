"""When a test of airlink's compiled parts (the collectors' C loops, the replay shells' C
packet paths) may skip: only where nothing could build them (not built, and no C compiler)
or AIRLINK_PURE_PYTHON turns them off. Where a compiler exists, a missing extension or a
missing function of it is a build regression, and the test fails; an extension that is
there but does not import fails everywhere."""
from __future__ import annotations

import importlib
import shutil
import sysconfig

import pytest

from airlink.core.envflags import env_flag


def c_extension(name: str, *functions: str, module_level: bool = False):
    """The compiled module ``name`` (e.g. ``"airlink.replay._fastpath"``) with ``functions``;
    skips (the whole module when ``module_level``) or fails as the module notes say."""
    if env_flag("AIRLINK_PURE_PYTHON", False):
        pytest.skip("AIRLINK_PURE_PYTHON is set: the pure-Python path is what runs",
                    allow_module_level=module_level)
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name and shutil.which(cc) is None:     # not built: nothing here could build it
            pytest.skip(f"no C compiler ({cc}) here, so {name} is not built", allow_module_level=module_level)
        pytest.fail(f"{name} is not importable although {cc} exists: a build failure ({exc})"
                    if exc.name == name else f"{name} fails to import ({exc})", pytrace=False)
    except ImportError as exc:          # built but broken (a missing symbol, another ABI): a failure anywhere
        pytest.fail(f"{name} is built but does not import: {exc}", pytrace=False)
    missing = [f for f in functions if not hasattr(module, f)]
    if missing:
        pytest.fail(f"{name} lacks {', '.join(missing)}: rebuild it (pip install -e .) or fix the build",
                    pytrace=False)
    return module


def c_records(*functions: str):
    """The capture reader's C extension (``airlink.collectors._records``) with ``functions``."""
    return c_extension("airlink.collectors._records", *functions)


def c_tcploops(*functions: str):
    """The TCP analysis' C extension (``airlink.collectors._tcploops``) with ``functions``."""
    return c_extension("airlink.collectors._tcploops", *functions)
