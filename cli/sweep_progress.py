"""The progress view of a sweep: runs done / total with an ETA, and the run in flight with its requests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .progress import ProgressTask, Reporter

if TYPE_CHECKING:
    from rich.console import Console

    from ..profiler.session.session import SessionHooks
    from ..profiler.sweep.grid import Cell
    from ..profiler.sweep.hooks import SweepHooks

# Runs take seconds to minutes: the ETA averages over the last ten minutes, not Rich's default 30 s.
SPEED_WINDOW_S = 600


@contextmanager
def sweep_progress(console: Console, *, ray: bool = False) -> Iterator[SweepHooks]:
    """Hooks for two views: runs (cells x repeats) done with an ETA, and the requests of the run in flight
    (on a terminal as bars; elsewhere as lines, the run's own by time only, so a sweep's log stays short)."""
    from ..profiler.session.session import SessionHooks
    from ..profiler.sweep.hooks import SweepHooks

    with Reporter(console, speed_window_s=SPEED_WINDOW_S) as reporter:
        runs = reporter.task("runs", unit="runs")
        runs_done = [0]
        current: list[ProgressTask | None] = [None]

        def on_plan(total: int, finished: int) -> None:
            runs_done[0] = finished
            runs.start(total, f"{finished} finished before" if finished else "started")
            runs.update(finished, total, note=f"({finished} finished before)" if finished else "")

        def on_run_start(cell: Cell, repeat: int) -> None:
            if ray:
                return
            if current[0] is None or reporter.rich is None:
                current[0] = reporter.task(f"  {cell.label()} r{repeat}", steps=0)
            else:
                reporter.rich.reset(
                    current[0].bar,
                    total=None,
                    description=f"  {cell.label()} r{repeat}",
                    note="",
                    visible=True,
                )

        def on_run_done(cell: Cell, repeat: int, finished: bool) -> None:
            if current[0] is not None:
                current[0].finish()
            if finished:
                runs_done[0] += 1
                runs.update(runs_done[0])
            else:
                console.print(f"[yellow]{cell.id} r{repeat} did not finish: a resume runs it again[/yellow]")

        def session(cell: Cell, repeat: int) -> SessionHooks | None:
            task = current[0]
            if ray or task is None:
                return None
            return SessionHooks(
                on_start=lambda total: task.start(total, "load started"),
                on_request_done=lambda done, tokens: task.update(done, note=f"{tokens} tokens"),
            )

        yield SweepHooks(
            on_plan=on_plan,
            on_run_start=on_run_start,
            on_run_done=on_run_done,
            session=session,
            message=reporter.say,
        )
        runs.finish()
