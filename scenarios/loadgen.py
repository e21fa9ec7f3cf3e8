"""The load generator: submits a request stream on schedule (open loop) or N at a time (closed loop).

    records = run_load(generate_requests(spec, ctx), engine_submit, mode=spec.mode, clients=spec.clients,
                       duration_s=spec.duration_s, stop_event=ctrl_c).records

`submit(request)` is the caller's: it returns a ticket whose `.wait()` returns when the request has
finished, and one client thread waits on each ticket. A caller whose engine can say when a request
ends passes `notifies=True` and a `submit(request, done)` that calls `done()` then: the calling thread
drives the whole load and no client thread starts. That is what a run uses: every client thread is
one more stack for py-spy to read at each sample (30 idle ones cost it about eight times the CPU of
one: docs/measurements.md), and one more thread to wake, per finished request, that competes with the
engine thread for the GIL. Warmup requests run to completion first (like vLLM's initial test run), then the measured
load starts. Time comes from `clock` (perf_counter_ns) and `sleep`, both injectable for fake-clock tests.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from .requests import RequestSpec, generate_requests, prompt_text_for

__all__ = ["LoadRecord", "LoadResult", "RequestSpec", "generate_requests", "prompt_text_for", "run_load"]

CLIENT_THREAD_PREFIX = "loadgen-client"  # thread names, so the profiler can tell client threads apart
DEFAULT_OPEN_LOOP_CLIENTS = 8  # threads started up front; the pool grows when all are busy
_MAX_PAUSE_S = 0.1  # sleep in slices so a stop is noticed within this time


# What a ticket's wait() returns: the caller's own (the engine's output, a client's reply); the load never reads it.
Outcome = TypeVar("Outcome")
OutcomeCo = TypeVar("OutcomeCo", covariant=True)


class Ticket(Protocol[OutcomeCo]):
    def wait(self, timeout: float | None = None) -> OutcomeCo: ...


@dataclass(slots=True)
class LoadRecord(Generic[Outcome]):
    """What happened to one request, in clock() nanoseconds; filled in by the client thread that served it."""

    request: RequestSpec
    scheduled_ns: int | None = (
        None  # when the schedule wanted it submitted (closed loop: when a client took it)
    )
    dispatched_ns: int | None = None  # open loop: when the dispatcher handed it to a client thread
    submit_ns: int | None = None  # when the client called submit()
    accepted_ns: int | None = None  # when submit() returned its ticket (a notified request may end before)
    done_ns: int | None = None  # when ticket.wait() returned, or submit()/wait() raised
    error: str | None = None  # "ExceptionType: message" from submit() or wait()
    ticket: Ticket[Outcome] | None = None  # what submit() returned
    client: int = -1

    @property
    def status(self) -> str:
        if self.submit_ns is None:
            return "not_submitted"
        if self.error is not None:
            return "failed"
        return "done" if self.done_ns is not None else "in_flight"


@dataclass(slots=True)
class LoadResult(Generic[Outcome]):
    """The records of a load (in request order) and how the load went."""

    records: list[LoadRecord[Outcome]]
    mode: str
    start_ns: int  # start of the measured load, after warmup
    end_ns: int
    warmup_ns: int  # how long the warmup requests took
    stopped_early: bool  # stop_event ended the load before every request was submitted
    peak_in_flight: int
    client_threads: int  # client threads started: 0 when the submit notifies (the calling thread drove)

    def count(self, status: str) -> int:
        return sum(record.status == status for record in self.records)

    def joined(self, later: LoadResult[Outcome]) -> LoadResult[Outcome]:
        """This load and a later round of it as one: every record, from this start to the later end."""
        return LoadResult(
            records=self.records + later.records,
            mode=self.mode,
            start_ns=self.start_ns,
            end_ns=later.end_ns,
            warmup_ns=self.warmup_ns + later.warmup_ns,
            stopped_early=self.stopped_early or later.stopped_early,
            peak_in_flight=max(self.peak_in_flight, later.peak_in_flight),
            client_threads=self.client_threads + later.client_threads,
        )

    def schedule_lag_ms(self) -> dict[str, float | None]:
        """How late measured requests reached submit() after their scheduled time (the generator keeping up)."""
        lags = [
            (record.submit_ns - record.scheduled_ns) / 1e6
            for record in self.records
            if not record.request.warmup and record.submit_ns is not None and record.scheduled_ns is not None
        ]
        if not lags:
            return {"mean": None, "p99": None, "max": None}
        return {"mean": float(np.mean(lags)), "p99": float(np.percentile(lags, 99)), "max": float(max(lags))}


def run_load(
    requests: Sequence[RequestSpec],
    submit: Callable[..., Ticket[Outcome]],  # (request) -> Ticket; with notifies, (request, done) -> Ticket
    *,
    mode: str,
    clients: int | None = None,
    duration_s: float | None = None,
    stop_event: threading.Event | None = None,
    on_done: Callable[[LoadRecord[Outcome]], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    sleep: Callable[[float], object] | None = None,
    wait_on_stop: bool = True,
    notifies: bool = False,
) -> LoadResult[Outcome]:
    """Drive `submit` with the requests and return when the load is over.

    open-loop: a dispatcher (the calling thread) sleeps until each arrival time and hands the request
    to an idle client thread, starting a new one when none is idle, so a slow request never delays
    the schedule; `clients` is the number started up front. closed-loop: `clients` threads, each
    submitting its next request when its previous one finished. Submissions stop at `duration_s`
    after the measured start or when `stop_event` is set; in-flight requests are then awaited, unless
    `wait_on_stop` is False and the stop came from `stop_event` (they are left to the caller).
    A failed submit() or wait() marks that request failed and the load continues. `sleep=None` waits
    on the stop event (real time); pass a fake to test the schedule without sleeping.
    `notifies`: submit is `submit(request, done)` and calls `done()` once, from any thread, when the
    request has ended; the calling thread then submits, and reads each finished ticket with wait(0),
    itself (the schedule and the concurrency as above, `client` the closed-loop slot, 0 in open loop).
    A KeyboardInterrupt inside run_load sets stop_event (no new submissions) and propagates.
    """
    if mode not in ("open-loop", "closed-loop"):
        raise ValueError(f"mode {mode!r} is unknown; allowed: open-loop, closed-loop")
    if mode == "closed-loop" and (clients is None or clients < 1):
        raise ValueError(f"clients={clients!r}: a closed-loop load needs clients >= 1")
    load = _Load(submit, stop_event or threading.Event(), on_done, clock, sleep, wait_on_stop, notifies)
    records: list[LoadRecord[Outcome]] = [LoadRecord(request) for request in requests]
    warmups = [record for record in records if record.request.warmup]
    measured = [record for record in records if not record.request.warmup]
    try:
        warmup_start = clock()
        if warmups:
            load.closed_loop(warmups, clients if mode == "closed-loop" else len(warmups), None)  # type: ignore[arg-type]
        start = clock()
        deadline = start + round(duration_s * 1e9) if duration_s is not None else None
        if mode == "open-loop":
            load.open_loop(measured, start, deadline, clients or DEFAULT_OPEN_LOOP_CLIENTS)
        else:
            load.closed_loop(measured, clients, deadline)  # type: ignore[arg-type]
    except BaseException:
        load.stop.set()  # no new submissions from any client thread
        raise
    if load.callback_error is not None:
        raise load.callback_error
    return LoadResult(
        records=records,
        mode=mode,
        start_ns=start,
        end_ns=clock(),
        warmup_ns=start - warmup_start,
        stopped_early=load.stop.is_set() and any(record.submit_ns is None for record in measured),
        peak_in_flight=load.peak_in_flight,
        client_threads=load.threads_started,
    )


class _Load:
    """The shared state of one run_load call: stop flags, in-flight counting, the client threads."""

    def __init__(self, submit, stop, on_done, clock, sleep, wait_on_stop, notifies) -> None:
        self.submit = submit
        self.stop: threading.Event = stop
        self.on_done = on_done
        self.clock = clock
        self.sleep = sleep
        self.wait_on_stop = wait_on_stop
        self.notifies = notifies
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.threads_started = 0
        self.callback_error: BaseException | None = None

    def halted(self) -> bool:
        return self.stop.is_set() or self.callback_error is not None

    def begin(self, record: LoadRecord, client: int, *done: Callable[[], None]) -> bool:
        """Submit one request (`done` goes to a notifying submit); False if submit() refused it."""
        record.client = client
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        record.submit_ns = self.clock()
        try:
            record.ticket = self.submit(record.request, *done)
            record.accepted_ns = self.clock()
            return True
        except Exception as err:  # the engine refused this request; the load goes on
            record.error = f"{type(err).__name__}: {err}"
            return False

    def end(self, record: LoadRecord, done_ns: int | None = None) -> None:
        """Read the finished ticket (wait(0) when notified) and count the request as done."""
        if record.ticket is not None:
            try:
                record.ticket.wait(0 if self.notifies else None)
            except Exception as err:  # the engine failed this request; the load goes on
                record.error = f"{type(err).__name__}: {err}"
        record.done_ns = self.clock() if done_ns is None else done_ns
        with self.lock:
            self.in_flight -= 1
        if self.on_done is not None:
            try:
                self.on_done(record)
            except BaseException as err:  # a caller bug: stop the load, re-raise it from run_load
                self.callback_error = self.callback_error or err

    def serve(self, record: LoadRecord, client: int) -> None:
        """Submit one request and wait for it, on the calling client thread."""
        self.begin(record, client)
        self.end(record)

    def drive_notified(self, records: list[LoadRecord], clients: int | None, deadline: int | None) -> None:
        """Either loop on the calling thread, finished requests arriving by done(): closed (`clients`
        slots) keeps that many in flight; open (`clients` None) submits each record at its scheduled_ns."""
        finished: queue.SimpleQueue[tuple[LoadRecord, int]] = queue.SimpleQueue()
        pending = deque(records)
        free = list(range(clients))[::-1] if clients is not None else []  # closed loop's idle slots

        def next_arrival() -> int | None:
            """Open loop: when the next record is due, None when no more will be submitted."""
            if clients is not None or not pending or self.halted():
                return None
            due = pending[0].scheduled_ns
            return None if deadline is not None and due >= deadline else due  # type: ignore[operator]

        def may_submit() -> bool:
            if clients is None:
                due = next_arrival()
                return due is not None and due <= self.clock()
            open_slot = bool(pending and free) and not self.halted()
            return open_slot and (deadline is None or self.clock() < deadline)

        def done(record: LoadRecord) -> Callable[[], None]:
            return lambda: finished.put((record, self.clock()))

        def close(record: LoadRecord, done_ns: int | None = None) -> None:
            self.end(record, done_ns)
            if clients is not None:
                free.append(record.client)

        while True:
            while may_submit():
                record = pending.popleft()
                if clients is None:
                    record.dispatched_ns = self.clock()
                else:
                    record.scheduled_ns = self.clock()
                if not self.begin(record, free.pop() if clients is not None else 0, done(record)):
                    close(record)  # refused: its slot is free again at once
            due = next_arrival()
            if (not self.in_flight and due is None) or (self.stop.is_set() and not self.wait_on_stop):
                return
            wait_s = _MAX_PAUSE_S if due is None else min(_MAX_PAUSE_S, max(0.0, (due - self.clock()) / 1e9))
            if due is not None and self.sleep is not None and finished.empty():
                self.sleep(wait_s)  # the injected clock's sleep: a test's schedule, without waiting
                continue
            try:
                item = finished.get(timeout=wait_s)
                while True:
                    close(*item)
                    item = finished.get_nowait()
            except queue.Empty:
                pass

    def start_thread(self, target: Callable[[int], None], threads: list[threading.Thread]) -> None:
        number = self.threads_started
        self.threads_started += 1
        thread = threading.Thread(
            target=target, args=(number,), name=f"{CLIENT_THREAD_PREFIX}-{number}", daemon=True
        )
        threads.append(thread)
        thread.start()

    def join(self, threads: list[threading.Thread]) -> None:
        for thread in threads:
            while thread.is_alive():
                thread.join(_MAX_PAUSE_S)
                if self.stop.is_set() and not self.wait_on_stop:
                    return

    def closed_loop(self, records: list[LoadRecord], clients: int, deadline: int | None) -> None:
        if self.notifies:
            self.drive_notified(records, clients, deadline)
            return
        pending = iter(records)

        def client(number: int) -> None:
            while True:
                with self.lock:
                    past_deadline = deadline is not None and self.clock() >= deadline
                    record = None if self.halted() or past_deadline else next(pending, None)
                if record is None:
                    return
                record.scheduled_ns = self.clock()
                self.serve(record, number)

        threads: list[threading.Thread] = []
        for _ in range(min(clients, len(records))):
            self.start_thread(client, threads)
        self.join(threads)

    def open_loop(self, records: list[LoadRecord], start: int, deadline: int | None, clients: int) -> None:
        for record in records:
            record.scheduled_ns = start + round(record.request.arrival_s * 1e9)
        if self.notifies:
            self.drive_notified(records, None, deadline)
            return
        work: queue.SimpleQueue[LoadRecord | None] = queue.SimpleQueue()
        idle = [0]  # threads free to take work; a dispatch reserves one, a finished request frees one

        def client(number: int) -> None:
            while (record := work.get()) is not None:
                self.serve(record, number)
                with self.lock:
                    idle[0] += 1

        threads: list[threading.Thread] = []
        for _ in range(min(clients, len(records))):
            self.start_thread(client, threads)
            idle[0] += 1
        for record in records:
            if deadline is not None and record.scheduled_ns >= deadline:  # type: ignore[operator]
                break
            if not self.pause_until(record.scheduled_ns):  # type: ignore[arg-type]
                break
            with self.lock:
                have_idle = idle[0] > 0
                if have_idle:
                    idle[0] -= 1
            if not have_idle:
                self.start_thread(client, threads)  # the new thread takes this request
            record.dispatched_ns = self.clock()
            work.put(record)
        for _ in threads:
            work.put(None)  # after every request: each thread exits once the queue has drained
        self.join(threads)

    def pause_until(self, target_ns: int) -> bool:
        """Sleep until clock() reaches target_ns; False if the load was stopped meanwhile."""
        while not self.halted():
            remaining_s = (target_ns - self.clock()) / 1e9
            if remaining_s <= 0:
                return True
            if self.sleep is None:
                self.stop.wait(min(remaining_s, _MAX_PAUSE_S))
            else:
                self.sleep(min(remaining_s, _MAX_PAUSE_S))
        return False
