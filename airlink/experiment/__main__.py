"""``python -m airlink.experiment inside PLAN.json``: the runner's process inside the link."""
import sys

from airlink.experiment.inside import run_inside

if len(sys.argv) == 3 and sys.argv[1] == "inside":
    sys.exit(run_inside(sys.argv[2]))
print("usage: python -m airlink.experiment inside PLAN.json", file=sys.stderr)
sys.exit(2)
