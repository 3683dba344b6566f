"""The one error line every airlink command ends with on bad input."""
from __future__ import annotations


def one_error_line(err: str, *needles: str) -> str:
    """``err`` (a command's stderr) is exactly one line ``airlink: error: ...`` holding every
    needle, with no traceback; returns that line."""
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.endswith("\n") and err.startswith("airlink: error: "), err
    for n in needles:
        assert n in err, (n, err)
    return err.rstrip("\n")
