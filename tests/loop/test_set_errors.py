"""Every bad ``--set``/``--config`` (and a sweep's grid, which sets keys the same way) is one
line ``airlink: error: ...`` naming the item or file, exit status 2, no traceback, and no
output folder made."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PF_CELL = str(REPO / "examples" / "pf-cell.yaml")
CELL = str(REPO / "examples" / "cell.yaml")


@pytest.mark.parametrize("argv,names", [
    (["run", PF_CELL, "--offline", "-o", "{out}", "--set", "radio.seed=[1"], "--set 'radio.seed=[1': not valid YAML"),
    (["run", PF_CELL, "--offline", "-o", "{out}", "--set", "radio.seed"], "--set 'radio.seed': expected NAME=VALUE"),
    (["run", PF_CELL, "--offline", "-o", "{out}", "--set", "radio.seed=abc"], "radio.seed: "),
    (["run", PF_CELL, "--offline", "-o", "{out}", "--set", "radio.pf_a=abc"], "radio.pf_a: expected a number"),
    (["run", CELL, "--offline", "-o", "{out}", "--set", "cell.set.pf_a=abc"], "cell.set.pf_a: expected a number"),
    (["run", CELL, "--offline", "-o", "{out}", "--set", "cell.set.nokey=1"], "cell.set.nokey: unknown preset parameter"),
    (["simulate", "--preset", "quick", "-o", "{out}", "--set", "pf_a=[1"], "--set 'pf_a=[1': not valid YAML"),
    (["simulate", "--preset", "quick", "-o", "{out}", "--set", "pf_a=abc"], "--set 'pf_a=abc': pf_a: expected a number"),
    (["simulate", "--preset", "quick", "-o", "{out}", "--set", "nokey=1"], "--set 'nokey=1': unknown preset parameter"),
    (["simulate", "--preset", "quick", "-o", "{out}", "--config", "{bad}"], "bad.yaml: line 2: not valid YAML"),
    (["simulate", "--preset", "quick", "-o", "{out}", "--config", "{list}"], "list.yaml: expected a mapping"),
    (["cell", "--preset", "quick", "--set", "pf_a=[1", "--", "true"], "--set 'pf_a=[1': not valid YAML"),
    (["cell", "--preset", "quick", "--set", "pf_a=abc", "--", "true"], "--set 'pf_a=abc': pf_a: expected a number"),
    (["cell", "--preset", "quick", "--config", "{bad}", "--", "true"], "bad.yaml: line 2: not valid YAML"),
    (["sweep", "{sweep_yaml}", "-o", "{out}"], "sweep.yaml: line 2: not valid YAML"),
    (["sweep", "{sweep_value}", "-o", "{out}"], "radio.seed: "),
])
def test_a_bad_set_or_config_is_one_line(run_airlink, tmp_path, argv, names):
    (tmp_path / "bad.yaml").write_text("pf_a: 0.1\nb: [1\n")
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "sweep.yaml").write_text(f"experiment: {PF_CELL}\ngrid: {{radio.seed: [1\n")
    (tmp_path / "value.yaml").write_text(f"experiment: {PF_CELL}\ngrid: {{radio.seed: [abc]}}\n")
    out = tmp_path / "out"
    subs = dict(out=out, bad=tmp_path / "bad.yaml", list=tmp_path / "list.yaml",
                sweep_yaml=tmp_path / "sweep.yaml", sweep_value=tmp_path / "value.yaml")
    status, stdout, err = run_airlink(*[a.format(**subs) for a in argv])
    assert status == 2, err
    assert err.startswith("airlink: error: ") and err.count("\n") == 1, err
    assert names in err and "Traceback" not in err
    assert not out.exists()
