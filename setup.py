"""Build hook for the one compiled part: the replay shells' per-packet path.

All metadata stays in setup.cfg. The extension is optional: when no C compiler is
available the build goes on and the shells use their pure-Python event loop.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("airlink.replay._fastpath", ["replay/_fastpath.c"],
                             extra_compile_args=["-O2"], optional=True)])
