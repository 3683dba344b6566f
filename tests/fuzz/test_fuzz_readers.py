"""Every reader and parser, and the command line, fuzzed, under a memory cap.

The properties live in ``_fuzz_readers.py`` (damaged copies of the real files) and
``_fuzz_cli.py`` (every non-shell subcommand with mistyped values); this test runs them in a
child pytest whose
address space is capped at :data:`MEMORY_BOUND_BYTES` (``RLIMIT_AS``), so a reader that
tries to allocate from a huge field (a trace period of 10^11 ms, a record length of 4 GB)
fails here with MemoryError instead of passing on a large machine. The bound is airlink's
stated one: a reader's peak stays within ~1.5 GiB above the interpreter's imports whatever
a file of these sizes says (docs/collectors.md, docs/traces.md).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MEMORY_BOUND_BYTES = 3 * 1024 ** 3


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND_BYTES, MEMORY_BOUND_BYTES))


@pytest.mark.slow
def test_readers_survive_fuzzing_within_memory_bound(shared_data, tmp_path):
    env = dict(os.environ, AIRLINK_FUZZ_EXAMPLES=os.environ.get("AIRLINK_FUZZ_EXAMPLES", "60"),
               NUMBA_DISABLE_JIT="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--basetemp", str(tmp_path / "fuzz"), str(HERE / "_fuzz_readers.py"),
                        str(HERE / "_fuzz_cli.py")],
                       cwd=HERE.parents[1], env=env, preexec_fn=_cap_memory,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
