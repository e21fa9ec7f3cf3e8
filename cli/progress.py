"""What a long command shows and how it stops: one progress reporter (Rich bars on a terminal, a plain line
every tenth of the work or every ten seconds elsewhere), and Ctrl-C or SIGTERM that end a command cleanly."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from . import ANNOUNCED_STOPS

if TYPE_CHECKING:
    from rich.console import Console

    from ..profiler.session.session import SessionHooks
    from ..profiler.session.until import Look

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LINE_EVERY_S = (
    10.0  # a log without a terminal hears from a long command at least this often while it advances
)
LINE_STEPS = 10  # ... and at every tenth of the work
RICH_SPEED_WINDOW_S = 30.0  # Rich's own default: the bars' ETA averages the last 30 s


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
        ANNOUNCED_STOPS.append(signum)
        self.event.set()
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        self._say(
            f"{name}: stopping; in-flight requests are aborted and a partial result is written "
            "(send it again to quit now)"
        )

    def _say(self, text: str) -> None:
        """One line in one system call, not through the console: a handler runs between any two bytecodes of the
        main thread, which may be inside a write to this very stream, and Python's buffered writer then raises
        "reentrant call" out of the handler (a run stopped while it printed "writing reports" exited 1 so)."""
        try:
            descriptor = self.console.file.fileno()
        except (AttributeError, OSError, ValueError):  # a console on a StringIO (tests): no descriptor
            self.console.file.write(text + "\n")
            return
        colour = self.console.is_terminal and not self.console.no_color
        line = f"\x1b[33m{text}\x1b[0m\n" if colour else text + "\n"
        try:
            os.write(descriptor, line.encode())
        except OSError:  # stderr closed or full: the stop itself must still happen
            pass


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


def duration_text(seconds: float) -> str:
    """12s, 3m05s, 1h02m: short enough for a progress line."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def rate_text(per_second: float, unit: str) -> str:
    """5.0 requests/s, or per minute or hour when slower (a busy machine's rate is not 0.0)."""
    for scale, per in ((1, "s"), (60, "min")):
        if per_second * scale >= 1:
            return f"{per_second * scale:.1f} {unit}/{per}"
    return f"{per_second * 3600:.1f} {unit}/h"


class LineProgress:
    """One phase's progress as plain lines: a line when `done` crosses each of `steps` equal parts of the
    total, or when `every_s` seconds passed since the last line (on an update, or on tick() while the work
    is quiet); each says phase, done/total, rate and ETA. `steps=0` prints by time alone (many short phases
    in a row, e.g. a sweep's runs)."""

    def __init__(
        self,
        phase: str,
        emit: Callable[[str], None],
        *,
        total: int | None = None,
        unit: str = "requests",
        clock: Callable[[], float] = time.monotonic,
        every_s: float = LINE_EVERY_S,
        steps: int = LINE_STEPS,
    ) -> None:
        self.phase, self.emit, self.total, self.unit = phase, emit, total, unit
        self.clock, self.every_s, self.steps = clock, every_s, steps
        self.started = self._done_at = self._last_line_at = clock()
        self.done = 0
        self.note = ""
        self._last_step = 0  # the last part of the total a line was printed for
        self._last_printed: int | None = None
        self._begun = False  # a phase that never started (e.g. a run with no load) prints nothing
        self._finished = False
        self._lock = threading.Lock()  # tick() comes from the Reporter's thread

    def start(self, total: int | None = None, what: str = "started") -> None:
        """The work begins now (the rate counts from here); one line says so."""
        with self._lock:
            self.total = total if total is not None else self.total
            self.started = self._done_at = self._last_line_at = self.clock()
            self._begun = True
            self.emit(f"{self.phase}: {what}" + (f", {self.total} {self.unit}" if self.total else ""))

    def update(self, done: int | None = None, total: int | None = None, note: str | None = None) -> None:
        """Record progress (None: as before); print a line if a part was crossed or the interval passed."""
        with self._lock:
            now = self.clock()
            if done is not None and done != self.done:
                self.done, self._done_at = done, now
            self.total = total if total is not None else self.total
            self.note = note if note is not None else self.note
            self._begun = True
            crossed = self.steps and self._step(self.done) > self._last_step
            if crossed or now - self._last_line_at >= self.every_s:
                self._print(now)

    def tick(self) -> None:
        """A line if the work is under way and `every_s` passed since the last one (a quiet stretch)."""
        with self._lock:
            now = self.clock()
            if self._begun and not self._finished and now - self._last_line_at >= self.every_s:
                self._print(now)

    def finish(self) -> None:
        """A last line with the final count, unless the last line already said it."""
        with self._lock:
            if self._begun and not self._finished and self._last_printed != self.done:
                self._print(self.clock())
            self._finished = True

    def line(self, now: float) -> str:
        """The text of a line at time `now`: the rate counts up to the last progress, not idle time after it."""
        rate = self.done / max(self._done_at - self.started, 1e-9)
        text = f"{self.phase}: {self.done}"
        if self.total:
            text += f"/{self.total} ({self.done / self.total:.0%})"
        if self.done:  # before the first unit is done there is no rate, nor an ETA, to tell
            text += f", {rate_text(rate, self.unit)}"
        text += f", {duration_text(now - self.started)} elapsed"
        if self.done and self.total and self.done < self.total:
            text += f", ETA {duration_text((self.total - self.done) / rate)}"
        return text + (f"; {self.note}" if self.note else "")

    def _step(self, done: int) -> int:
        if not self.total or not self.steps:
            return 0
        return min(self.steps, done * self.steps // self.total)

    def _print(self, now: float) -> None:
        self.emit(self.line(now))
        self._last_line_at = now
        self._last_step = self._step(self.done)
        self._last_printed = self.done


class ProgressTask:
    """One phase of a Reporter: a Rich bar, or a LineProgress."""

    def __init__(self, reporter: Reporter, phase: str, total: int | None, unit: str, steps: int) -> None:
        self.reporter = reporter
        self.phase = phase
        self.lines: LineProgress | None = None
        self.bar: Any = None
        if reporter.rich is not None:
            self.bar = reporter.rich.add_task(phase, total=total, note="")
        else:
            self.lines = LineProgress(
                phase,
                reporter.emit,
                total=total,
                unit=unit,
                clock=reporter.clock,
                every_s=reporter.every_s,
                steps=steps,
            )

    def start(self, total: int | None = None, what: str = "started") -> None:
        if self.lines is not None:
            self.lines.start(total, what)
        else:
            self.reporter.rich.reset(self.bar, total=total, description=self.phase, note="")

    def update(self, done: int | None = None, total: int | None = None, note: str | None = None) -> None:
        if self.lines is not None:
            self.lines.update(done, total, note)
            return
        # Rich leaves a figure given as None as it was; the note is a field of ours, so it is passed only when given.
        note_field = {"note": note} if note is not None else {}
        self.reporter.rich.update(self.bar, completed=done, total=total, **note_field)

    def finish(self) -> None:
        if self.lines is not None:
            self.lines.finish()


class Reporter:
    """The progress view every long command uses: Rich bars when the console is a terminal, else plain
    lines (LineProgress) a log file or CI can show. Use as a context manager around the work."""

    def __init__(
        self,
        console: Console,
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = LINE_EVERY_S,
        speed_window_s: float | None = None,
    ) -> None:
        self.console, self.clock, self.every_s = console, clock, every_s
        self.speed_window_s = speed_window_s
        self.rich: Any = None
        self.tasks: list[ProgressTask] = []
        self._quiet = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.rich = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
                speed_estimate_period=self.speed_window_s or RICH_SPEED_WINDOW_S,
            )
            self.rich.__enter__()
        else:
            self._ticker = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.rich is not None:
            self.rich.__exit__(*exc)
        if self._ticker is not None:
            self._quiet.set()
            self._ticker.join()

    def _tick(self) -> None:
        """Without a terminal, a phase that goes quiet (a long step, the replay) still prints every every_s."""
        while not self._quiet.wait(min(1.0, self.every_s)):
            for task in list(self.tasks):
                if task.lines is not None:
                    task.lines.tick()

    def task(
        self, phase: str, total: int | None = None, *, unit: str = "requests", steps: int = LINE_STEPS
    ) -> ProgressTask:
        """A new phase of work (a bar, or its lines)."""
        task = ProgressTask(self, phase, total, unit, steps)
        self.tasks.append(task)
        return task

    def emit(self, text: str) -> None:
        """One plain line (no markup: scenario names and paths are printed as they are)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def say(self, text: str) -> None:
        """A dim message above the bars (or a plain line)."""
        if self.rich is not None:
            self.console.print(f"[dim]{text}[/dim]")
        else:
            self.emit(text)


@contextmanager
def session_progress(
    console: Console, label: str = "requests", clock: Callable[[], float] = time.monotonic
) -> Iterator[SessionHooks]:
    """Hooks that report one session: requests done / total, output tokens per second, elapsed time, ETA."""
    from ..profiler.session.session import SessionHooks

    with Reporter(console, clock=clock) as reporter:
        task = reporter.task(label)
        started = [reporter.clock()]

        def on_start(total: int) -> None:
            started[0] = reporter.clock()
            task.start(total, "load started")  # without a terminal: "<label>: load started, N requests"

        estimate = [""]  # `--until resolved`: the last look's share and interval, carried by every later line
        speed = [""]  # the output tokens per second at the last request done

        def on_done(requests_done: int, tokens: int) -> None:
            elapsed = max(1e-9, reporter.clock() - started[0])
            speed[0] = f"{tokens / elapsed:.1f} tok/s"
            task.update(requests_done, note=f"{speed[0]}{estimate[0]}")

        def on_look(look: Look) -> None:  # after each round
            estimate[0] = f"; {look.progress_text()}"
            if reporter.rich is None:
                reporter.emit(f"{label}: round {look.rounds}, {look.progress_text()}")
            # the note every later line carries, before the next request is done too (a quiet stretch's lines)
            task.update(note=f"{speed[0]}{estimate[0]}" if speed[0] else look.progress_text())

        def on_more(total: int) -> None:
            task.update(total=total)

        def message(text: str) -> None:  # work after the load (e.g. the replay) says what it is doing
            if reporter.rich is not None:
                task.update(note=text)
            else:
                reporter.emit(f"{label}: {text}")

        try:
            yield SessionHooks(
                on_start=on_start, on_request_done=on_done, message=message, on_look=on_look, on_more=on_more
            )
        finally:
            task.finish()
