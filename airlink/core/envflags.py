"""On/off switches: one reading of ``1``/``0``, ``yes``/``no``, ``on``/``off``, ``true``/``false``.

The environment switches (``AIRLINK_OFFLOAD``, ``AIRLINK_CELL_WRITER``, ``AIRLINK_PURE_PYTHON``,
...) and flag-like options (a queue's ``ecn=``) read their value here: any case, blanks
around ignored. An environment variable that is unset or empty has its default; any other
value that is not one of the words is an error naming the variable, never a silent default.
"""
from __future__ import annotations

import os

from .errors import AirlinkError

__all__ = ["TRUE_WORDS", "FALSE_WORDS", "parse_flag", "env_flag"]

TRUE_WORDS = ("1", "yes", "on", "true")
FALSE_WORDS = ("0", "no", "off", "false")


def parse_flag(text: str) -> bool | None:
    """True for one of :data:`TRUE_WORDS`, False for one of :data:`FALSE_WORDS` (any case,
    blanks around ignored), None for anything else."""
    word = str(text).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def env_flag(name: str, default: bool, environ=None) -> bool:
    """The switch ``name`` of the environment (``os.environ`` or ``environ``): ``default``
    when unset or empty; raises :class:`AirlinkError` naming the variable for a value that is
    not an on/off word."""
    value = (os.environ if environ is None else environ).get(name, "")
    if not value.strip():
        return default
    flag = parse_flag(value)
    if flag is None:
        raise AirlinkError(f"environment variable {name}={value!r}: expected 1 or 0 "
                           f"(or yes/no, on/off, true/false)")
    return flag
