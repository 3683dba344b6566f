"""The simulator shares the fairness metrics through airlink.core, not through inference
(which imports the simulator): importing airlink.sim loads no airlink.inference module."""
import subprocess
import sys


def test_sim_does_not_import_inference():
    code = ("import sys, airlink.sim, airlink.sim.metrics; "
            "print(sorted(m for m in sys.modules if m.startswith('airlink.inference')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_inference_keeps_the_fairness_names():
    import airlink.core.fairness as core
    import airlink.inference as inference
    import airlink.inference.fairness as fairness
    for name in ("jain_index", "fairness_gap", "service_gaps", "gap_stats", "fairness_summary"):
        assert getattr(inference, name) is getattr(core, name) is getattr(fairness, name)
    # Jain's index by hand: (1 + 1 + 2)^2 / (3 (1 + 1 + 4)) = 16 / 18
    assert core.jain_index([1, 1, 2]) == 16 / 18


def test_simulate_command_writes_its_files_without_pandas(tmp_path):
    # pandas costs about half a second of CPU to import; the command has no use for it
    code = ("import sys; from airlink.cli import main; "
            f"main(['simulate', '--preset', 'quick', '--duration', '20ms', '-o', {str(tmp_path / 'out')!r}, "
            "'--no-progress']); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"
    assert (tmp_path / "out" / "mac.parquet").stat().st_size > 0
