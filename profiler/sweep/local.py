"""Run a sweep's cells on this machine, one at a time (the default): each run has the machine to itself."""

from __future__ import annotations

import threading
from pathlib import Path

from ..rundir.sweepdir import run_dir_of
from ..session.runner import ModelCache
from .cell import run_cell
from .grid import Cell
from .hooks import SweepHooks


def run_local(
    runs: list[tuple[Cell, int]], out_dir: Path, *, hooks: SweepHooks, stop_event: threading.Event
) -> None:
    """Each (cell, repeat) in order; stops after the run in flight when stop_event is set."""
    models = ModelCache()  # each model is built or loaded once for the whole sweep
    for cell, repeat in runs:
        if stop_event.is_set():
            return
        hooks.run_started(cell, repeat)
        finished = run_cell(
            cell,
            repeat,
            run_dir_of(out_dir, cell.id, repeat),
            models=models,
            stop_event=stop_event,
            hooks=hooks.session_hooks(cell, repeat),
        )
        hooks.run_done(cell, repeat, finished)
        if not finished:
            return
