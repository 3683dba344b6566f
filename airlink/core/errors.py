"""The one exception type users see from airlink's public API.

Every reader and parser raises :class:`AirlinkError` (or a subclass) with a message
that names the file, the place in it and the problem, e.g.
``"down.trace: line 17: timestamps must not decrease"``. The command line prints the
message as one line (``airlink: error: ...``) and exits with status 2.
"""


class AirlinkError(Exception):
    """An error caused by the user's input, reported as one clear line."""


class FormatError(AirlinkError, ValueError):
    """A file does not follow the format it was read as."""


class SchemaError(AirlinkError, ValueError):
    """A frame lacks required columns or has columns of the wrong kind."""


def frame_source(frame, default: str = "frame") -> str:
    """The file a frame was read from, to name in messages: its ``attrs["source"]`` (set
    by the readers that made it), else ``default`` (``"frame"``, ``"log"``: what the
    message calls a frame given directly)."""
    return str(getattr(frame, "attrs", {}).get("source", default))
