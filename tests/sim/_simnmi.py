"""A small reference NMI for the simulator's fidelity tests (Mattar et al.'s definition).

``I_N(X;Y) = (H(X) + H(Y) - H(X,Y)) / H(X)`` over equal-frequency bins, peak over shifts.
Kept in the tests so that they do not depend on the inference package being built.
"""
import numpy as np


def _bins(x, n):
    x = np.asarray(x, dtype=np.float64)
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n + 1)[1:-1]))
    return np.searchsorted(edges, x, side="right")


def _h(*cols):
    _, counts = np.unique(np.stack(cols, axis=1), axis=0, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def nmi(x, y, *, bins=10, max_shift=3):
    bx, by = _bins(x, bins), _bins(y, bins)
    hx = _h(bx)
    if hx == 0:
        return 0.0
    best = 0.0
    for d in range(-max_shift, max_shift + 1):
        if d >= 0:
            a, b = bx[d:], by[:len(by) - d]
        else:
            a, b = bx[:d], by[-d:]
        best = max(best, (_h(a) + _h(b) - _h(a, b)) / _h(a) if _h(a) else 0.0)
    return best


def per_second(mac, user, column, tti_s):
    """Mean of ``column`` of one user over 1 s bins."""
    f = mac[mac["user"] == str(user)]
    per = int(round(1 / tti_s))
    v = f[column].to_numpy(float)
    n = len(v) // per
    return v[:n * per].reshape(n, per).mean(axis=1)
