"""The progress view of a sweep: runs done / total with an ETA, and the run in flight with its requests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from profiler.session import SessionHooks
from profiler.sweep.hooks import SweepHooks

if TYPE_CHECKING:
    from profiler.sweep.grid import Cell

# Runs take seconds to minutes: the ETA averages over the last ten minutes, not Rich's default 30 s.
SPEED_WINDOW_S = 600


@contextmanager
def sweep_progress(console: Console, *, ray: bool = False) -> Iterator[SweepHooks]:
    """Hooks for two bars: runs (cells x repeats) done with an ETA, and the requests of the run in flight."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        speed_estimate_period=SPEED_WINDOW_S,
    ) as progress:
        runs = progress.add_task("runs", total=None, note="")
        current = None if ray else progress.add_task("", total=None, note="", visible=False)

        def on_plan(total: int, finished: int) -> None:
            progress.update(
                runs,
                total=total,
                completed=finished,
                note=f"({finished} finished before)" if finished else "",
            )

        def on_run_start(cell: Cell, repeat: int) -> None:
            if current is not None:
                progress.reset(
                    current, total=None, description=f"  {cell.label()} r{repeat}", note="", visible=True
                )

        def on_run_done(cell: Cell, repeat: int, finished: bool) -> None:
            if finished:
                progress.advance(runs)
            if not finished:
                console.print(f"[yellow]{cell.id} r{repeat} did not finish: a resume runs it again[/yellow]")

        def session(cell: Cell, repeat: int) -> SessionHooks | None:
            if current is None:
                return None
            return SessionHooks(
                on_start=lambda total: progress.update(current, total=total),
                on_request_done=lambda done, tokens: progress.update(
                    current, completed=done, note=f"{tokens} tokens"
                ),
            )

        yield SweepHooks(
            on_plan=on_plan,
            on_run_start=on_run_start,
            on_run_done=on_run_done,
            session=session,
            message=lambda text: console.print(f"[dim]{text}[/dim]"),
        )
