"""The Typer faces of infer-prof, the top floor above profiler/ and reports/: one module per command; the only code that imports typer or Rich progress bars."""

import os
import signal

# The signals a command has already told the user about (progress.GracefulStop): main() says "interrupted"
# for the others, such as a Ctrl-C that click turned into exit code 130 without a word.
ANNOUNCED_STOPS: list[int] = []


def exit_quietly_on_signals() -> None:
    """Ctrl-C or SIGTERM while Python is importing (the entry point's imports, and the heavy ones each command
    makes lazily) ends the process with one line and 128 + the signal: an interrupted import leaves modules
    half-made, and whatever runs next (another thread, a handler) fails on them with tracebacks. Anywhere else
    SIGINT is KeyboardInterrupt as usual (main() turns it into one line and 130) and SIGTERM ends the process
    with one line; commands that stop gracefully install their own handlers over this one."""

    def stop(signum: int, frame: object) -> None:
        if signum == signal.SIGINT and not _importing(frame):
            raise KeyboardInterrupt
        os.write(2, f"infer-prof: interrupted ({signal.Signals(signum).name})\n".encode())
        os._exit(128 + signum)  # unwinding half-done imports would print tracebacks

    for number in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(number, stop)
        except ValueError:  # imported from a thread other than the main one: nothing to guard
            return


def _importing(frame: object) -> bool:
    """Whether the interrupted frame is inside an import (importlib's frozen bootstrap is on its stack)."""
    while frame is not None:
        code = getattr(frame, "f_code", None)
        if code is not None and code.co_filename.startswith("<frozen importlib"):
            return True
        frame = getattr(frame, "f_back", None)
    return False


exit_quietly_on_signals()

from .main import main  # noqa: E402 - after the signal guard, which must come first

__all__ = ["main"]
