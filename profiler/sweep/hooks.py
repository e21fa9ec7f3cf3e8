"""What a face (the CLI, tests) can watch a sweep through: the plan, each run starting and ending."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..session.session import SessionHooks
    from .grid import Cell


@dataclass
class SweepHooks:
    """Callbacks, all optional; `session` gives a run's own hooks (requests done), local runs only."""

    on_plan: Callable[[int, int], None] | None = None  # (runs in the sweep, runs already finished)
    on_run_start: Callable[[Cell, int], None] | None = None
    on_run_done: Callable[[Cell, int, bool], None] | None = None  # (cell, repeat, finished)
    session: Callable[[Cell, int], SessionHooks | None] | None = None
    message: Callable[[str], None] | None = None

    def plan(self, total: int, finished: int) -> None:
        if self.on_plan:
            self.on_plan(total, finished)

    def run_started(self, cell: Cell, repeat: int) -> None:
        if self.on_run_start:
            self.on_run_start(cell, repeat)

    def run_done(self, cell: Cell, repeat: int, finished: bool) -> None:
        if self.on_run_done:
            self.on_run_done(cell, repeat, finished)

    def session_hooks(self, cell: Cell, repeat: int) -> SessionHooks | None:
        return self.session(cell, repeat) if self.session else None

    def say(self, text: str) -> None:
        if self.message:
            self.message(text)
