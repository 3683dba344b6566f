"""The pieces every part of airlink shares and that belong to none of them.

``airlink.core`` imports nothing else from airlink, so every package (``traces``, ``sim``,
``inference``, ``replay``, ``collectors``) may import it without an import cycle.

- :mod:`airlink.core.fairness`: fairness and scheduling-jitter metrics (Jain's index, the
  fairness gap, inter-service gaps), used by the simulator's summary and by inference.
"""
