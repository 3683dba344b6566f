"""Public names of a package loaded on first use (PEP 562 module ``__getattr__``).

A package lists ``{name: (submodule, attribute)}`` and the submodules reachable as
attributes; importing it then costs nothing of theirs (numpy, pandas: ~0.3 s), and the
first ``package.name`` imports the submodule and keeps the value as a plain attribute.
"""
from __future__ import annotations

import importlib
import sys


def lazy_names(package: str, names: dict, submodules=()):
    """``(__getattr__, __dir__)`` for the package named ``package``."""
    submodules = set(submodules)

    def __getattr__(name: str):
        if name in names:
            module, attr = names[name]
            value = getattr(importlib.import_module(f"{package}.{module}"), attr)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)     # later lookups are plain attribute reads
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names) | submodules)

    return __getattr__, __dir__
