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
