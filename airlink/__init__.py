"""airlink: measure, infer and replay how cellular schedulers shape TCP.

Subpackages (imported on demand, so ``import airlink`` stays cheap):

- :mod:`airlink.core`       what every part shares (the fairness metrics); imports no other part
- :mod:`airlink.traces`     Trace model, frame schemas, Mahimahi trace and log formats
- :mod:`airlink.sim`        radio channels, rate tables, HARQ, schedulers
- :mod:`airlink.collectors` pcap/pcapng and radio/MAC log readers -> frames
- :mod:`airlink.inference`  NMI lag scans, fairness, backlog dependence, scheduler id
- :mod:`airlink.replay`     link/delay/loss/cell shells over namespaces and TUN
"""
from ._version import __version__

__all__ = ["__version__"]
