"""One reader for airlink's YAML (experiment and sweep files, presets and parameter files,
column mappings, ``--set`` values): what they hold, or one error line naming the file and the
place - a missing file, a line that is not YAML, bytes that are not text, a tag the safe
loader refuses (``!!python/object``), nesting too deep, an alias bomb, or a document that is
not a mapping.

Aliases let a few lines of YAML stand for a huge document (each level of ``&a [*b, *b, ...]``
multiplies the size): a document whose aliases expand to more than :data:`MAX_YAML_NODES`
nodes is refused before it is built.
"""
from __future__ import annotations

from pathlib import Path

from .errors import AirlinkError

MAX_YAML_NODES = 10**6
"""Nodes (scalars, lists, mappings) a YAML document may hold with every alias expanded; an
experiment file holds a few hundred."""


class _TooBig(Exception):
    pass


def _loader():
    """A safe loader that measures the document, aliases expanded, before building it."""
    import yaml
    from yaml.nodes import MappingNode, SequenceNode

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedLoader(base):
        def get_single_data(self):
            node = self.get_single_node()
            if node is None:
                return None
            sizes: dict = {}

            def size(n) -> int:                   # expanded node count, shared nodes counted per use
                key = id(n)
                if key in sizes:
                    if sizes[key] is None:
                        raise _TooBig("an alias refers to itself")
                    return sizes[key]
                sizes[key] = None
                total = 1
                if isinstance(n, SequenceNode):
                    for child in n.value:
                        total += size(child)
                        if total > MAX_YAML_NODES:
                            break
                elif isinstance(n, MappingNode):
                    for k, v in n.value:
                        total += size(k) + size(v)
                        if total > MAX_YAML_NODES:
                            break
                if total > MAX_YAML_NODES:
                    raise _TooBig(f"its aliases expand to more than {MAX_YAML_NODES:.0e} nodes")
                sizes[key] = total
                return total
            size(node)
            return self.construct_document(node)
    return BoundedLoader


def load_yaml_text(text: str, where: str, error=AirlinkError):
    """The value of YAML ``text``; ``where`` starts the one-line error (a file's name, or
    ``--set 'radio.seed=[1'``)."""
    import yaml
    try:
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            # YAML marks a text that ends too early after its last line: name the last line
            # instead, and no line of a one-line text (a --set value)
            lines = text.rstrip("\n").count("\n") + 1
            place = "" if "\n" not in text.strip() else f"line {min(mark.line + 1, lines)}: "
            why = getattr(exc, "problem", None)
        elif isinstance(exc, yaml.reader.ReaderError):
            place, why = f"character {exc.position + 1}: ", exc.reason
        else:
            place, why = "", None
        why = " ".join(str(why or exc).split())
        raise error(f"{where}: {place}not valid YAML ({why[:160]})") from None
    except _TooBig as exc:
        raise error(f"{where}: refused: {exc}") from None
    except (ValueError, OverflowError, RecursionError, TypeError) as exc:   # a 5000-digit number, deep nesting
        why = "nested too deeply" if isinstance(exc, RecursionError) else ' '.join(str(exc).split())[:120]
        raise error(f"{where}: not valid YAML ({why})") from None


def read_yaml_mapping(path, *, what: str, expect: str, error=AirlinkError) -> dict:
    """The mapping in YAML file ``path``; an empty file is ``{}``.

    ``what`` names the kind of file in "no such ``what`` file"; ``expect`` is the message for a
    document that is not a mapping (e.g. "an experiment file is a mapping of sections");
    ``error`` is the exception class raised (an :class:`AirlinkError`).
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what} file" if not path.exists() else f"{path}: is a directory")
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    data = load_yaml_text(text, str(path), error)
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
