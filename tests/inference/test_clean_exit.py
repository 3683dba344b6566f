"""Every error path of `airlink infer` ends with exit status 2 and nothing else: no thread of a
library (pyarrow's read-ahead) may still need the interpreter while it shuts down."""
import subprocess
import sys

import pytest

RUNS = 12


@pytest.fixture(scope="module")
def night_mac(shared_data, tmp_path_factory):
    """The MAC frame `airlink collect` writes from an NR-Scope log (collected once; every
    test below only reads it, each in its own interpreter)."""
    from airlink.cli import main
    out = tmp_path_factory.mktemp("nrs")
    assert main(["collect", str(shared_data / "nr-scope" / "t_mobile2_ueactivity_night_1.csv"), "-o", str(out)]) == 0
    (path,) = out.glob("*.mac.parquet")
    return path


def test_infer_backlog_without_backlog_column_exits_2_every_time(night_mac):
    # On this frame a pyarrow read-ahead worker still releasing Python buffers during
    # interpreter shutdown aborts the process (exit 134, "terminate called without an
    # active exception"), so every run must exit 2 cleanly.
    path = night_mac
    code = "from airlink.cli import entry; entry()"
    for k in range(RUNS):
        r = subprocess.run([sys.executable, "-c", code, "infer", "backlog", str(path)],
                           capture_output=True, text=True, timeout=120)
        assert "terminate called" not in r.stderr, f"run {k + 1}: {r.stderr}"
        assert r.returncode == 2, f"run {k + 1}: exit {r.returncode}: {r.stderr}"
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith("airlink: error: ") and "'backlog_bytes'" in r.stderr


ERRORS = [  # one error path of each infer command on the same collected NR-Scope frame
    (["nmi", "--target", "tbs_bytes", "--factor", "nope"], "no column 'nope'"),
    (["fairness", "--by", "nope"], "no column 'nope' to split by"),
    (["jitter", "--served", "nope"], "no column 'nope'"),
    (["scheduler", "--alloc", "nope"], "no column 'nope'"),
    (["cell", "--cell-prbs", "-1"], "--cell-prbs: must be between 1 and 1000 (got -1)"),
]


def test_every_infer_command_exits_2_on_its_error(night_mac):
    path = night_mac
    code = "from airlink.cli import entry; entry()"
    for args, message in ERRORS:
        r = subprocess.run([sys.executable, "-c", code, "infer", args[0], str(path), *args[1:]],
                           capture_output=True, text=True, timeout=120)
        assert "terminate called" not in r.stderr and r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stderr.startswith("airlink: error: ") and r.stderr.count("\n") == 1, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
