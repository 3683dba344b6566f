"""Build hook for the compiled parts: the replay shells' per-packet path, the
collectors' per-record loops (pcap record walk, header decoder, connection table, census)
and the TCP analysis' per-row loops.

All metadata stays in setup.cfg. Both extensions are optional: when no C compiler is
available the build goes on, the shells use their pure-Python event loop and the
collectors find records and decode headers with numpy. The shells' link core
(replay/_linkcore.c) is compiled into both of their extensions.
"""
from setuptools import Extension, setup

# -ffp-contract=off: the AQMs compute their probabilities as Python does (no fused multiply-add)
LINKCORE = dict(depends=["replay/_linkcore.h"], extra_compile_args=["-O2", "-fvisibility=hidden", "-ffp-contract=off"], optional=True)

setup(ext_modules=[
    Extension("airlink.replay._fastpath", ["replay/_fastpath.c", "replay/_linkcore.c"], **LINKCORE),
    Extension("airlink.replay._cellpath", ["replay/_cellpath.c", "replay/_linkcore.c"], **LINKCORE),
    Extension("airlink.collectors._records", ["collectors/_records.c"], depends=["collectors/_census.c"],
              extra_compile_args=["-O2"], optional=True),
    Extension("airlink.collectors._tcploops", ["collectors/_tcploops.c"], extra_compile_args=["-O2"], optional=True),
])
