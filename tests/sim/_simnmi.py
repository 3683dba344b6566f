"""The reference NMI (tests/reference_nmi.py) as the simulator's fidelity tests use it:
equal-frequency bins, the peak over a few shifts. Kept in the tests so that they do not
depend on the inference package being built.
"""
import numpy as np

from tests.reference_nmi import entropy, nmi_curve, quantile_codes


def nmi(x, y, *, bins=10, max_shift=3):
    bx, by = quantile_codes(x, bins), quantile_codes(y, bins)
    if entropy(bx) == 0:
        return 0.0
    return max(0.0, *nmi_curve(bx, by, max_shift))


def per_second(mac, user, column, tti_s):
    """Mean of ``column`` of one user over 1 s bins."""
    f = mac[mac["user"] == str(user)]
    per = int(round(1 / tti_s))
    v = f[column].to_numpy(float)
    n = len(v) // per
    return v[:n * per].reshape(n, per).mean(axis=1)
