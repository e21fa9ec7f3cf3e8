"""The small interface every collector shares: a name, start/stop, a JSON-ready result and an honest status."""

from __future__ import annotations

import threading
from typing import Generic, TypedDict, TypeVar, cast

from ..rundir.schema import CollectorStatus

OK = "ok"
SKIPPED = "skipped"
FAILED = "failed"
NOT_STARTED = "not started"


class CollectorResult(TypedDict, total=False):
    """What every collector's result() holds; each collector's own result type adds its data keys to it."""

    status: str
    reason: str | None


ResultT = TypeVar("ResultT", bound=CollectorResult)


def status_entry(result: CollectorResult) -> CollectorStatus:
    """A result's entry in the run result's `collectors` section: its status and reason."""
    # A collector that was started (every one whose result is read) is ok, skipped or failed.
    return cast(CollectorStatus, {"status": result["status"], "reason": result["reason"]})


class Collector(Generic[ResultT]):
    """Base of all collectors; a collector that cannot run says so (skipped/failed + reason) and never raises.

    Subclasses override `_start`, `_stop` and `_result`; the public methods keep the status honest:
    a failure inside a collector must never stop a profiled run, so it becomes status "failed".
    Step hooks are no-ops unless a collector needs them (the spans tracer calls them on the engine thread).
    A collector that can stop measuring for a while at almost no cost overrides `_can_pause`,
    `_pause` and `_resume`: the in-run overhead A/B switches it off and on in short blocks.
    """

    name: str = "collector"

    def __init__(self) -> None:
        self.status: str = NOT_STARTED
        self.reason: str | None = None
        self.paused = False
        self._stopping = False
        self._pause_lock = threading.Lock()  # pause/resume come from another thread than stop

    # -- public API -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.status in (SKIPPED, FAILED):
            return  # decided unavailable at construction (e.g. missing binary): nothing to start
        try:
            self._start()
        except Exception as exc:  # a collector must not break the run
            self.fail(f"could not start: {type(exc).__name__}: {exc}")
            return
        if self.status == NOT_STARTED:
            self.status = OK

    def stop(self) -> None:
        if self.status != OK:
            return
        with self._pause_lock:
            self._stopping = True  # a late pause() from another thread must not touch a stopped collector
        self.resume()
        try:
            self._stop()
        except Exception as exc:
            self.fail(f"could not stop cleanly: {type(exc).__name__}: {exc}")

    def pause(self) -> bool:
        """Stop measuring for a while and cost (almost) nothing, keeping what was recorded.

        The in-run overhead A/B (profiler.overhead.inrun) alternates pause and resume. Returns False
        when this collector is not running or cannot pause (then it keeps measuring).
        """
        with self._pause_lock:
            if self.status != OK or self._stopping or self.paused or not self._can_pause():
                return False
            try:
                self._pause()
            except Exception:  # a measuring aid; the collector just keeps measuring
                return False
            self.paused = True
            return True

    def resume(self) -> None:
        """Measure again after pause(); a no-op when not paused."""
        with self._pause_lock:
            if self.paused:
                self.paused = False
                self._resume()

    def result(self) -> ResultT:
        """{status, reason, ...collector data}; data keys are present only when status is "ok"."""
        out: dict[str, object] = {"status": self.status, "reason": self.reason}
        if self.status == OK:
            try:
                out.update(self._result())
            except Exception as exc:
                self.fail(f"could not summarize: {type(exc).__name__}: {exc}")
                out = {"status": self.status, "reason": self.reason}
        # status and reason, then _result()'s own keys: the subclass's result type
        return cast(ResultT, out)

    def status_entry(self) -> CollectorStatus:
        """The `collectors` section entry of the run result."""
        return status_entry({"status": self.status, "reason": self.reason})

    def skip(self, reason: str) -> None:
        self.status, self.reason = SKIPPED, reason

    def fail(self, reason: str) -> None:
        self.status, self.reason = FAILED, reason

    # -- step hooks (engine thread) -----------------------------------------------------------------

    def on_step(self, step: int, begin: bool) -> None:
        """Called at the start (begin=True) and end of every engine step, on the engine thread."""

    # -- for subclasses -----------------------------------------------------------------------------

    def _start(self) -> None:
        """Begin collecting."""

    def _stop(self) -> None:
        """Stop collecting; keep what was collected."""

    def _result(self) -> ResultT:
        """The collector's data keys (status and reason are added by result())."""
        return cast(ResultT, {})

    def _can_pause(self) -> bool:
        return False

    def _pause(self) -> None:
        """Stop measuring until _resume (called only when _can_pause() is True)."""

    def _resume(self) -> None:
        """Measure again."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.status}{': ' + self.reason if self.reason else ''}>"
