"""One reader for airlink's YAML files (experiment and sweep files, presets and parameter
files, column mappings): the mapping they hold, or one error line naming the file and the
place - a missing file, a line that is not YAML, bytes that are not text, or a document that
is not a mapping.
"""
from __future__ import annotations

from pathlib import Path

from .errors import AirlinkError


def read_yaml_mapping(path, *, what: str, expect: str, error=AirlinkError) -> dict:
    """The mapping in YAML file ``path``; an empty file is ``{}``.

    ``what`` names the kind of file in "no such ``what`` file"; ``expect`` is the message for a
    document that is not a mapping (e.g. "an experiment file is a mapping of sections");
    ``error`` is the exception class raised (an :class:`AirlinkError`).
    """
    import yaml
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what} file" if not path.exists() else f"{path}: is a directory")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where, why = f"line {mark.line + 1}: ", getattr(exc, "problem", None)
        elif isinstance(exc, yaml.reader.ReaderError):
            where, why = f"character {exc.position + 1}: ", exc.reason
        else:
            where, why = "", None
        why = " ".join(str(why or exc).split())
        raise error(f"{path}: {where}not valid YAML ({why})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    except (ValueError, OverflowError, RecursionError) as exc:   # a 5000-digit number, deep nesting
        raise error(f"{path}: not valid YAML ({' '.join(str(exc).split())[:120]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path}: {expect}")
    return data


# The wording of a checked YAML file's errors (experiment files, column mappings): one
# place, so every file airlink reads says ``FILE: KEY.PATH: what is wrong`` the same way.
def error_key_path(loc) -> str:
    """The key path of a pydantic error location: ``collect.resolution``, ``shells[0].delay``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part) in ("str", "int", "float", "bool") or str(part).startswith(("function-", "union[")) \
                or "[" in str(part):
            continue  # pydantic's names for the branch of a union it tried (a key "strength" is kept)
        else:
            # a key that is not a plain word (a line break, a dot, spaces) is shown quoted
            name = str(part) if str(part).replace("_", "").replace("-", "").isalnum() else repr(str(part))
            out += f".{name}" if out else name
    return out


def error_message(err: dict) -> str:
    """What is wrong, in one phrase, for one pydantic error (``unknown key``, ...)."""
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "missing":
        return "required key is missing"
    msg = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.replace(prefix, "")
    got = err.get("input")
    if err["type"] not in ("value_error",) and not isinstance(got, (dict, list)):
        msg += f" (got {got!r})"
    return msg
