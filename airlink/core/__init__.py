"""The pieces every part of airlink shares and that belong to none of them.

``airlink.core`` imports nothing else from airlink, so every package (``traces``, ``sim``,
``inference``, ``replay``, ``collectors``) may import it without an import cycle.

- :mod:`airlink.core.errors`: :class:`AirlinkError` and its kinds (format, schema), the one
  error type every command turns into an ``airlink: error:`` line.
- :mod:`airlink.core.units`: rates, sizes, durations and TTIs from text (``10Mbit/s``,
  ``500ms``) and back.
- :mod:`airlink.core.bounds`: every numeric option's declared range and the size budgets.
- :mod:`airlink.core.atomic`: files written under ``NAME.partial`` and renamed when complete.
- :mod:`airlink.core.yamlfile`: the one YAML reader (safe, bounded, line-numbered errors).
- :mod:`airlink.core.schema`: the frame kinds (packets, tcp, mac, rf, ...) and their columns.
- :mod:`airlink.core.parquetframe`: a frame read back from Parquet with airlink's metadata
  checked.
- :mod:`airlink.core.lazy`: package names loaded on first use.
- :mod:`airlink.core.envflags`: on/off switches (``AIRLINK_OFFLOAD=0``, a queue's ``ecn=``)
  read one way: 1/0, yes/no, on/off, true/false; a bad value is an error naming it.
- :mod:`airlink.core.fairness`: fairness and scheduling-jitter metrics (Jain's index, the
  fairness gap, inter-service gaps), used by the simulator's summary and by inference.
"""
