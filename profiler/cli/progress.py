"""What a long command shows and how it stops: a Rich progress bar for a session, and Ctrl-C or SIGTERM that end it cleanly."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from profiler.session import SessionHooks

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulStop:
    """The first SIGINT or SIGTERM asks the command to stop (stop_event); a second one stops it at once.

    The exit code follows the shell's convention for the first signal: 130 for SIGINT, 143 for SIGTERM.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.event = threading.Event()
        self.signal: int | None = None

    @property
    def exit_code(self) -> int | None:
        return None if self.signal is None else 128 + self.signal

    def _handle(self, signum: int, frame: object) -> None:
        if self.event.is_set():
            for number in STOP_SIGNALS:
                signal.signal(number, signal.SIG_DFL)
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)
        self.signal = signum
        self.event.set()
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        self.console.print(f"[yellow]{name}: stopping; in-flight requests are aborted and a partial result is written "
                           "(send it again to quit now)[/yellow]")  # fmt: skip


@contextmanager
def stop_on_signals(console: Console) -> Iterator[GracefulStop]:
    """Install GracefulStop for SIGINT and SIGTERM (main thread only) for the duration of the block."""
    stop = GracefulStop(console)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    for number in STOP_SIGNALS:
        signal.signal(number, stop._handle)
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


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
            if not console.is_terminal:
                console.print(f"{label}: load started, {total} requests")  # a log line where no bar is drawn

        def on_done(requests_done: int, tokens: int) -> None:
            elapsed = max(1e-9, time.perf_counter() - started[0])
            progress.update(task, completed=requests_done, rate=f"{tokens / elapsed:6.1f} tok/s")

        def message(text: str) -> None:  # work after the load (e.g. the replay) says what it is doing
            progress.update(task, rate=text)

        yield SessionHooks(on_start=on_start, on_request_done=on_done, message=message)
