"""airlink.inference loads its parts on first use (PEP 562): importing the package loads
no numpy, pandas or scipy; a fairness metric loads numpy alone; every public name is
still there and is its module's object."""
import json
import subprocess
import sys

CODE = """
import json, sys
import airlink.inference as inf
loaded = lambda: sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "pandas", "scipy", "sklearn"})
at_import = loaded()
jain = inf.jain_index([1, 1, 2])
after_jain = loaded()
missing = [n for n in inf.__all__ if not hasattr(inf, n)]
from airlink.inference import lagscan, scheduler, surrogates
same = (inf.lag_scan is lagscan.lag_scan and inf.peak_significance is surrogates.peak_significance
        and inf.identify_scheduler is scheduler.identify_scheduler and set(inf.__all__) <= set(dir(inf)))
print(json.dumps({"at_import": at_import, "jain": jain, "after_jain": after_jain, "missing": missing,
                  "same": same}))
"""


def test_inference_loads_its_parts_on_first_use():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout
    got = json.loads(out.splitlines()[-1])
    assert got["at_import"] == []
    assert got["jain"] == 16 / 18                 # (1 + 1 + 2)^2 / (3 (1 + 1 + 4)), by hand
    assert got["after_jain"] == ["numpy"]
    assert got["missing"] == [] and got["same"]
