"""What a long command shows and how it stops: a Rich progress bar for a session, and Ctrl-C that ends it cleanly."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from profiler.session import SessionHooks


@contextmanager
def ctrl_c_stops(stop_event: threading.Event, console: Console) -> Iterator[None]:
    """First Ctrl-C: stop submitting and record a partial run; a second one interrupts for real."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        if stop_event.is_set():
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        stop_event.set()
        console.print("[yellow]Ctrl-C: stopping the load; in-flight requests are aborted and a partial result is written (Ctrl-C again to quit now)[/yellow]")

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def session_progress(console: Console, label: str = "requests") -> Iterator[SessionHooks]:
    """Hooks that drive one progress bar: requests done / total, output tokens per second, elapsed time."""
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=False,
    ) as progress:  # fmt: skip
        task = progress.add_task(label, total=None, rate="")
        started = [time.perf_counter()]

        def on_start(total: int) -> None:
            started[0] = time.perf_counter()
            progress.update(task, total=total)

        def on_done(requests_done: int, tokens: int) -> None:
            elapsed = max(1e-9, time.perf_counter() - started[0])
            progress.update(task, completed=requests_done, rate=f"{tokens / elapsed:6.1f} tok/s")

        yield SessionHooks(on_start=on_start, on_request_done=on_done)
