"""Drive a scenario's requests through a started engine from the calling thread, with the collectors running around it."""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...engine.types import SamplingParams
from ...errors import RequestError
from ...scenarios.loadgen import LoadRecord, LoadResult, RequestSpec, run_load
from ...scenarios.spec import ScenarioSpec
from ..collectors.health import HealthFigures, HealthProbe
from ..collectors.spill import SpillFile
from ..rundir.schema import HeapTrims
from .heap import HeapTrimmer

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ...engine.sequence import RequestOutput
    from ..collectors.base import Collector


class Ticket:
    """What the load generator waits on: the engine's handle for one request, then only what the run records."""

    __slots__ = ("handle", "request", "spill")

    def __init__(self, handle, request: RequestSpec, spill: SpillFile | None = None) -> None:
        self.handle = handle
        self.request = request
        self.spill = spill

    def wait(self, timeout: float | None = None) -> object:
        """The request's output, once finished; from then on the ticket holds only its compacted form.

        The engine's handle keeps the whole request alive (detokenizer, streamed deltas, a condition,
        the prompt and its ids), so a long soak grew by every finished request (docs/measurements.md); the
        run's tables need only the counts and times (`RunOutput`)."""
        if not isinstance(self.handle, RunOutput):
            self.handle = RunOutput.of(self.handle.result(timeout=timeout), self.spill)
        return self.handle


class RunOutput:
    """A finished request as the run's tables read it: its counts and times in one 8-byte array, no ids or text.

    It stands in for the engine's handle once the request finished (result() returns itself). Ids
    and texts are not needed by requests.csv or the metrics; keeping them as arrays was still the
    largest part of a soak's memory growth (docs/measurements.md). Given a SpillFile, the token times
    go there and only the four request times stay.
    """

    __slots__ = (
        "error",
        "finish_reason",
        "num_preemptions",
        "output_tokens",
        "prompt_tokens",
        "request_id",
        "_spilled",
        "_times",
    )

    NONE = (
        -1
    )  # a time that never happened (scheduled_ns, first_token_ns of a request refused or aborted early)

    def __init__(
        self,
        request_id: int,
        finish_reason: str,
        error: str | None,
        num_preemptions: int,
        prompt_tokens: int,
        output_tokens: int,
        times: array,
        token_ns: array,
        spill: SpillFile | None = None,
    ) -> None:
        self.request_id = request_id
        self.finish_reason = finish_reason
        self.error = error
        self.num_preemptions = num_preemptions
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self._times = times  # arrival, scheduled, first token, finish, then each token's time unless spilled
        self._spilled: tuple[SpillFile, int, int] | None = (
            None  # (file, offset, count) of spilled token times
        )
        at = spill.append(token_ns) if spill is not None and token_ns else None
        if at is None:  # no file, no tokens, or the file refused them: they stay here
            times.extend(token_ns)
        else:
            self._spilled = (spill, at, len(token_ns))  # type: ignore[assignment]

    @classmethod
    def of(cls, output: RequestOutput, spill: SpillFile | None = None) -> RunOutput:
        def known(ns: int | None) -> int:
            return cls.NONE if ns is None else ns

        times = array(
            "q",
            (
                output.arrival_ns,
                known(output.scheduled_ns),
                known(output.first_token_ns),
                known(output.finish_ns),
            ),
        )
        return cls(
            output.request_id,
            output.finish_reason,
            output.error,
            output.num_preemptions,
            output.prompt_tokens,
            output.output_tokens,
            times,
            array("q", output.token_ns),
            spill,
        )

    def result(self, timeout: float | None = None) -> RunOutput:
        return self

    def _time(self, slot: int) -> int | None:
        ns = self._times[slot]
        return None if ns == self.NONE else ns

    @property
    def ok(self) -> bool:
        return self.finish_reason in ("stop", "length")

    @property
    def arrival_ns(self) -> int:
        return self._times[0]

    @property
    def scheduled_ns(self) -> int | None:
        return self._time(1)

    @property
    def first_token_ns(self) -> int | None:
        return self._time(2)

    @property
    def finish_ns(self) -> int | None:
        return self._time(3)

    @property
    def token_ns(self) -> array:
        if self._spilled is not None:
            file, at, count = self._spilled
            return file.read_array("q", at, count)
        return self._times[4:]


@dataclass
class Drive:
    """What driving the load left behind: the handles, the wall-clock window, and how it ended."""

    tickets: dict[int, Ticket] = field(default_factory=dict)
    rejected: dict[int, tuple[int, str]] = field(
        default_factory=dict
    )  # index -> (when, why) the engine refused it
    load: LoadResult | None = None
    wall_start_ns: int = 0
    wall_end_ns: int = 0
    interrupted: bool = False
    heap_trims: HeapTrims = field(default_factory=HeapTrims)  # HeapTrimmer.result() of the run
    spill: SpillFile = field(default_factory=SpillFile)  # finished requests' token times
    health_probe: HealthFigures = field(
        default_factory=HealthFigures
    )  # HealthProbe.result(): the run's CPU and load figures
    rounds: int = 0  # whole rounds of the scenario's load driven (more: the run went on until resolved)

    def outputs(self, timeout_s: float = 5.0) -> dict[int, RequestOutput]:
        """Each submitted request's final output (aborted ones included), by request index."""
        return {index: ticket.handle.result(timeout=timeout_s) for index, ticket in self.tickets.items()}


class DoneCounter:
    """Counts finished measured requests and their tokens for a progress callback, on the thread that drives the load."""

    def __init__(self, callback: Callable[[int, int], None] | None) -> None:
        self.callback = callback
        self.requests = 0
        self.tokens = 0

    def __call__(self, record: LoadRecord) -> None:
        if record.request.warmup:
            return
        tokens = 0
        if record.ticket is not None and record.error is None:
            tokens = record.ticket.wait(timeout=0).output_tokens
        self.requests += 1
        self.tokens += tokens
        if self.callback:
            self.callback(self.requests, self.tokens)


def drive_load(
    engine: Engine,
    scenario: ScenarioSpec,
    requests: Sequence[RequestSpec],
    prompts: dict[int, str],
    collectors: Sequence[Collector],
    *,
    stop_event: threading.Event,
    on_request_done: Callable[[int, int], None] | None = None,
    on_started: Callable[[], None] | None = None,
    engine_thread_name: str = "infer-prof-engine",
    next_round: Callable[[int], Sequence[RequestSpec] | None] | None = None,
) -> Drive:
    """Start the engine and the collectors, run the load, then stop all of them (Ctrl-C included).

    next_round(rounds done) is asked after each whole round of the load for the next round's requests (their
    prompts already in `prompts`), or None to stop: the load of a run that goes on until its answer is known."""
    drive = Drive()
    submit = _submitter(engine, prompts, drive)
    engine.start()
    probe = HealthProbe(engine_thread_name).start()
    for collector in collectors:
        collector.start()
    drive.wall_start_ns = time.perf_counter_ns()
    if on_started:
        on_started()
    trimmer = HeapTrimmer().start()  # started here so that the finally below always stops it
    try:
        _run_rounds(drive, scenario, requests, submit, stop_event, DoneCounter(on_request_done), next_round)
    except KeyboardInterrupt:
        drive.interrupted = True
    finally:
        probe.stop()  # before shutdown: the engine thread's /proc entry goes with it
        # Ctrl-C: no new submissions (stop_event), abort what is in flight, still record what finished.
        engine.shutdown(abort=drive.interrupted or stop_event.is_set())
        drive.wall_end_ns = time.perf_counter_ns()
        for collector in reversed(collectors):
            collector.stop()
        trimmer.stop()
        drive.heap_trims = trimmer.result()
        drive.health_probe = probe.result()
    drive.interrupted = drive.interrupted or bool(drive.load and drive.load.stopped_early)
    return drive


def _submitter(
    engine: Engine, prompts: dict[int, str], drive: Drive
) -> Callable[[RequestSpec, Callable[[], None]], Ticket]:
    """The load's submit: each request to the engine with its prompt, its ticket (or its refusal) kept in `drive`."""

    def submit(request: RequestSpec, done: Callable[[], None]) -> Ticket:
        try:
            params = SamplingParams(**request.sampling)
            handle = engine.submit(
                prompts[request.index],
                params,
                chat=request.chat,
                priority=request.priority,
                on_finish=lambda output: done(),
            )
        except RequestError as refusal:
            # Recorded, not lost: the run's tables and counts show every request the engine refused, and why.
            drive.rejected[request.index] = (time.perf_counter_ns(), str(refusal))
            raise
        drive.tickets[request.index] = ticket = Ticket(handle, request, drive.spill)
        return ticket

    return submit


def _run_rounds(
    drive: Drive,
    scenario: ScenarioSpec,
    requests: Sequence[RequestSpec],
    submit: Callable[[RequestSpec, Callable[[], None]], Ticket],
    stop_event: threading.Event,
    counter: DoneCounter,
    next_round: Callable[[int], Sequence[RequestSpec] | None] | None,
) -> None:
    """Run the scenario's load in whole rounds, joined into `drive.load`, until stopped or next_round has no more."""
    batch: Sequence[RequestSpec] | None = requests
    while batch:
        load = run_load(
            list(batch),
            submit,
            mode=scenario.mode,
            clients=scenario.clients,
            duration_s=scenario.duration_s,
            stop_event=stop_event,
            on_done=counter,
            notifies=True,  # this thread drives the load: no client threads for py-spy to read
        )
        drive.load = load if drive.load is None else drive.load.joined(load)
        drive.rounds += 1
        stopped = stop_event.is_set() or load.stopped_early
        batch = None if stopped or next_round is None else next_round(drive.rounds)
