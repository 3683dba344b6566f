"""A compiled function's on-disk cache follows the other files it is built from.

Two throwaway modules in a temporary folder: ``callee.py`` (a compiled ``g``) and
``caller.py`` (a compiled ``f`` and a C callback ``c`` that call ``g``, their caches widened
to ``callee.py`` by :mod:`airlink.sim.compiled_cache`). Each step runs in a fresh process
with its own numba cache folder; the values are what the source says at that step.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

CALLEE = "import numba\n\n\n@numba.njit(cache=True)\ndef g():\n    return {value}\n"

CALLER = textwrap.dedent('''
    import ctypes, json, os
    import numba
    import callee
    from airlink.sim.compiled_cache import cached_cfunc, depend_on

    DEPENDS = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "callee.py")]

    @numba.njit(cache=True)
    def f():
        return callee.g()

    depend_on(f, DEPENDS)

    @cached_cfunc(numba.types.int64(), DEPENDS)
    def c():
        return callee.g()

    value = f()
    proto = ctypes.CFUNCTYPE(ctypes.c_int64)(c.address)
    print(json.dumps({"f": value, "c": proto(), "f_hits": sum(f.stats.cache_hits.values()),
                      "c_hits": c._cache_hits}))
''')


def _step(folder):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder / "cache"),
               PYTHONPATH=os.pathsep.join([str(folder), *sys.path]))
    env.pop("AIRLINK_NUMBA", None)
    r = subprocess.run([sys.executable, "-c", "import caller"], cwd=folder, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_change_in_a_called_file_recompiles_and_the_cache_is_used_between_changes(tmp_path):
    (tmp_path / "caller.py").write_text(CALLER)
    (tmp_path / "callee.py").write_text(CALLEE.format(value=1))
    assert _step(tmp_path) == {"f": 1, "c": 1, "f_hits": 0, "c_hits": 0}
    assert _step(tmp_path) == {"f": 1, "c": 1, "f_hits": 1, "c_hits": 1}     # cached
    (tmp_path / "callee.py").write_text(CALLEE.format(value=22))
    assert _step(tmp_path) == {"f": 22, "c": 22, "f_hits": 0, "c_hits": 0}   # the edit is seen
    assert _step(tmp_path) == {"f": 22, "c": 22, "f_hits": 1, "c_hits": 1}
