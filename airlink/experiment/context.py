"""What the stages of one run share, handed to each stage as an argument: :class:`RunContext`."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from airlink import rundir
from airlink.experiment.spec import STAGES, Experiment


class Progress:
    """One line per stage on stderr; a tqdm bar for the live stage's seconds when on a tty."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()

    def stage(self, i: int, name: str, what: str):
        if self.enabled:
            print(f"airlink run: [{i}/{len(STAGES)}] {name}: {what}", file=sys.stderr, flush=True)

    def note(self, text: str):
        if self.enabled:
            print(f"airlink run: {text}", file=sys.stderr, flush=True)

    def timer(self, total_s: float, desc: str):
        if not self.tty:
            return None
        from tqdm import tqdm
        return tqdm(total=round(total_s), desc=desc, unit="s", leave=False)


@dataclass
class RunContext:
    """The run every stage works on, and what earlier stages left for later ones.

    ``exp``: the checked experiment; ``folder``: the run folder (locked; every file a stage
    writes goes through it and is recorded in its manifest); ``progress``: the stage lines
    on stderr; ``info``: the content of ``run.json``, which stages add to (``notes``,
    ``live``, ``applications``, ``cell``, ``replayed_user``); ``want_live``: None runs the
    live stage where this machine allows it, True requires it, False skips it.

    Left by the radio stage: ``trace_path`` (the capacity trace the link shell replays) and
    ``user`` (its user); by the live stage: ``captures`` (the pcaps the collect stage reads).
    """

    exp: Experiment
    folder: rundir.RunFolder
    progress: Progress
    info: dict
    want_live: bool | None = None
    trace_path: Path | None = None
    user: str | None = None
    captures: list = field(default_factory=list)

    @property
    def out(self) -> Path:
        """The run folder's path."""
        return self.folder.path

    def note(self, text: str) -> None:
        """A note of the run: kept in ``run.json`` and said on stderr."""
        self.info["notes"].append(text)
        self.progress.note(text)
