"""The Typer faces of infer-prof: one module per command; the only code that imports typer, Rich progress or reports."""

import os
import signal

_SIGNALS_BEFORE: dict[int, object] = {}


def exit_quietly_on_signals() -> None:
    """Until main() starts, Ctrl-C or SIGTERM (the imports below take seconds) ends the process with one line and
    128 + the signal, not a KeyboardInterrupt traceback; main() puts the previous handlers back (restore_signals)."""

    def stop(signum: int, _frame: object) -> None:
        os.write(2, f"infer-prof: interrupted ({signal.Signals(signum).name}) while starting\n".encode())
        os._exit(128 + signum)  # nothing is open or written yet; unwinding half-done imports could print tracebacks

    for number in (signal.SIGINT, signal.SIGTERM):
        try:
            _SIGNALS_BEFORE[number] = signal.signal(number, stop)
        except ValueError:  # imported from a thread other than the main one: nothing to guard
            return


def restore_signals() -> None:
    """The handlers from before exit_quietly_on_signals(): Ctrl-C is KeyboardInterrupt again, for main() to catch."""
    while _SIGNALS_BEFORE:
        number, handler = _SIGNALS_BEFORE.popitem()
        signal.signal(number, handler)  # type: ignore[arg-type]


exit_quietly_on_signals()

from profiler.cli.main import main  # noqa: E402 - after the signal guard, which must come first

__all__ = ["main"]
