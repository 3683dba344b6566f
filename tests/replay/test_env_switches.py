"""The environment's on/off switches (airlink.core.envflags): one reading for every switch of
the shells and the simulator, and a bad value refused with the variable's name."""
from __future__ import annotations

import pytest

from airlink.core.envflags import env_flag, parse_flag
from airlink.core.errors import AirlinkError
from tests.errorline import one_error_line


@pytest.mark.parametrize("text, want", [
    ("1", True), ("yes", True), ("On", True), (" TRUE ", True),
    ("0", False), ("no", False), ("OFF", False), ("false\n", False),
    ("2", None), ("maybe", None), ("", None), ("y", None), ("enable", None),
])
def test_the_words(text, want):
    assert parse_flag(text) is want


def test_unset_or_empty_is_the_default_and_a_bad_value_names_the_variable():
    assert env_flag("AIRLINK_X", True, {}) is True
    assert env_flag("AIRLINK_X", False, {"AIRLINK_X": "  "}) is False
    assert env_flag("AIRLINK_X", True, {"AIRLINK_X": "off"}) is False
    assert env_flag("AIRLINK_X", False, {"AIRLINK_X": "Yes"}) is True
    with pytest.raises(AirlinkError, match=r"environment variable AIRLINK_X='sometimes': expected 1 or 0"):
        env_flag("AIRLINK_X", True, {"AIRLINK_X": "sometimes"})


def test_every_switch_of_the_shells_reads_the_same_words(monkeypatch):
    """Each switch, given words it once read differently: AIRLINK_CELL_WRITER took only "1",
    AIRLINK_PURE_PYTHON and AIRLINK_PYTHON_STEP took any text (even "0") as on."""
    from airlink.replay import cell, stages
    monkeypatch.setenv("AIRLINK_CELL_WRITER", "yes")
    assert cell._writer_wanted() is True
    monkeypatch.setenv("AIRLINK_CELL_WRITER", "off")
    assert cell._writer_wanted() is False
    monkeypatch.setenv("AIRLINK_PURE_PYTHON", "true")
    assert cell._cellpath() is None and stages._fastpath() is None and stages.offload_wanted() is False
    monkeypatch.setenv("AIRLINK_PURE_PYTHON", "0")
    monkeypatch.setenv("AIRLINK_OFFLOAD", "No")
    assert stages.offload_wanted() is False
    monkeypatch.setenv("AIRLINK_PYTHON_STEP", "0")
    assert cell._why_python_step(object(), True) != "AIRLINK_PYTHON_STEP is set"
    monkeypatch.setenv("AIRLINK_PYTHON_STEP", "on")
    assert cell._why_python_step(object(), True) == "AIRLINK_PYTHON_STEP is set"
    monkeypatch.setenv("AIRLINK_CELL_UPLINK_SLOTS", "yes")
    assert cell._uplink_slots_wanted() is True
    monkeypatch.delenv("AIRLINK_CELL_UPLINK_SLOTS")
    assert cell._uplink_slots_wanted() is False
    monkeypatch.setenv("AIRLINK_CELL_RESCUE", "false")
    assert cell._rescue_ns(500_000, cell.Fraction(1, 1000)) == 0
    monkeypatch.setenv("AIRLINK_CELL_RESCUE", "1")
    assert cell._rescue_ns(500_000, cell.Fraction(1, 1000)) == 500_000 // cell.RESCUE_DIVISOR


@pytest.mark.parametrize("name", ["AIRLINK_CELL_WRITER", "AIRLINK_CELL_UPLINK_SLOTS", "AIRLINK_OFFLOAD", "AIRLINK_CELL_RESCUE",
                                  "AIRLINK_PYTHON_STEP", "AIRLINK_PURE_PYTHON"])
def test_a_bad_switch_is_one_error_line_before_the_cell_starts(run_airlink, monkeypatch, name):
    """Refused when the cell is set up (no root needed: nothing has started yet)."""
    monkeypatch.setenv(name, "maybe")
    status, _out, err = run_airlink("cell", "--users", "2", "--", "true")
    assert status == 2
    one_error_line(err, f"environment variable {name}='maybe'")


def test_a_bad_numba_switch_is_an_error_not_numba_off(tmp_path):
    """AIRLINK_NUMBA is read when the simulator's kernels are imported; a bad value stopped
    nothing before (any value but "0" meant on)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    r = subprocess.run([str(Path(sys.executable).parent / "airlink"), "simulate", "--preset", "quick",
                        "--duration", "10ms", "-o", str(tmp_path / "out")],
                       env=dict(os.environ, AIRLINK_NUMBA="nope"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and not (tmp_path / "out").exists()
    one_error_line(r.stderr, "environment variable AIRLINK_NUMBA='nope'")
