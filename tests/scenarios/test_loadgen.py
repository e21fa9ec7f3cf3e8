"""The load generator: open-loop timing on a fake clock, closed-loop concurrency, failures, stops, warmup;
with client threads waiting on tickets and with a submit that notifies (the calling thread drives)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from infer_prof.scenarios.loadgen import LoadRecord, RequestSpec, run_load
from tests.scenarios.fake_time import FakeClock


def make_requests(arrivals: list[float], warmup: int = 0) -> list[RequestSpec]:
    return [
        RequestSpec(
            index=i,
            arrival_s=0.0 if i < warmup else arrival,
            prompt_tokens=8,
            prompt_text=None,
            max_tokens=4,
            sampling={"seed": i},
            warmup=i < warmup,
        )
        for i, arrival in enumerate([0.0] * warmup + arrivals)
    ]


class DoneTicket:
    def wait(self, timeout: float | None = None) -> bool:
        return True


class GatedTicket:
    """A request that finishes when the test opens the gate."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate

    def wait(self, timeout: float | None = None) -> bool:
        return self.gate.wait(timeout)


class InFlightTracker:
    """A fake engine: each request takes a few milliseconds; counts how many are in flight at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.random = random.Random(0)

    def submit(self, request: RequestSpec) -> InFlightTracker.Ticket:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            delay = self.random.uniform(0.002, 0.005)
        return InFlightTracker.Ticket(self, delay)

    class Ticket:
        def __init__(self, tracker: InFlightTracker, delay: float) -> None:
            self.tracker, self.delay = tracker, delay

        def wait(self, timeout: float | None = None) -> bool:
            time.sleep(self.delay)
            with self.tracker.lock:
                self.tracker.in_flight -= 1
            return True


class EndedTicket:
    """What a notifying submit returns: wait() reports how the fake engine thread saw the request end."""

    def __init__(self) -> None:
        self.error: Exception | None = None

    def wait(self, timeout: float | None = None) -> bool:
        if self.error is not None:
            raise self.error
        return True


def notifying(submit: Callable[[RequestSpec], Any]) -> Callable[[RequestSpec, Callable[[], None]], Any]:
    """A notifying submit over a ticket-returning one: a fake engine thread waits on the ticket, then
    calls done(); the load reads the ended request from an EndedTicket."""

    def submit_notifying(request: RequestSpec, done: Callable[[], None]) -> EndedTicket:
        ticket, ended = submit(request), EndedTicket()

        def finish() -> None:
            try:
                ticket.wait()
            except Exception as err:
                ended.error = err
            done()

        threading.Thread(target=finish, name="fake-engine", daemon=True).start()
        return ended

    return submit_notifying


def done_at_once(request: RequestSpec, done: Callable[[], None]) -> DoneTicket:
    done()  # the request ended inside submit(): the load must still see it after submit returns
    return DoneTicket()


@pytest.mark.parametrize("notifies", [False, True])
@pytest.mark.parametrize("clients", [1, 4, 9])
def test_closed_loop_keeps_at_most_n_in_flight(clients: int, notifies: bool) -> None:
    tracker = InFlightTracker()
    submit = notifying(tracker.submit) if notifies else tracker.submit
    result = run_load(
        make_requests([0.0] * 60), submit, mode="closed-loop", clients=clients, notifies=notifies
    )
    assert tracker.peak == clients == result.peak_in_flight
    assert result.count("done") == 60 and result.client_threads == (0 if notifies else clients)
    assert {record.client for record in result.records} == set(range(clients))


def test_a_notifying_load_starts_no_thread_and_submits_from_the_calling_thread() -> None:
    submitters: set[int] = set()
    tracker = InFlightTracker()

    def submit(request: RequestSpec) -> InFlightTracker.Ticket:
        submitters.add(threading.get_ident())
        return tracker.submit(request)

    before = {thread.name for thread in threading.enumerate()}
    result = run_load(
        make_requests([0.0] * 40, warmup=4),
        notifying(submit),
        mode="closed-loop",
        clients=6,
        notifies=True,
        on_done=lambda record: submitters.add(threading.get_ident()),
    )
    assert submitters == {threading.get_ident()}  # submits and on_done, all on this thread
    assert not {t.name for t in threading.enumerate()} - before - {"fake-engine"}
    assert result.count("done") == 44
    # done() is stamped on the engine's thread, so a request can end before the calling thread stamps
    # accepted_ns (CI saw it when the caller was descheduled): only submit_ns is ordered before both.
    assert all(r.scheduled_ns <= r.submit_ns <= r.accepted_ns for r in result.records)
    assert all(r.submit_ns < r.done_ns for r in result.records)


@pytest.mark.parametrize("notifies", [False, True])
def test_open_loop_submits_on_schedule_with_a_fake_clock(notifies: bool) -> None:
    fake = FakeClock()
    arrivals = [0.0, 0.5, 0.5, 1.25, 3.0, 3.0000001]
    result = run_load(
        make_requests(arrivals),
        done_at_once if notifies else lambda request: DoneTicket(),
        mode="open-loop",
        clients=2,
        clock=fake.clock,
        sleep=fake.sleep,
        notifies=notifies,
    )
    for record, arrival in zip(result.records, arrivals):
        assert record.scheduled_ns == result.start_ns + round(arrival * 1e9)
        assert record.dispatched_ns == record.scheduled_ns  # the dispatcher slept exactly until then
        assert record.scheduled_ns <= record.submit_ns <= record.done_ns
    assert sum(fake.sleeps) == pytest.approx(3.0000001)
    assert max(fake.sleeps) <= 0.1  # sleeps in slices so a stop is noticed quickly
    assert result.count("done") == 6 and not result.stopped_early
    assert result.schedule_lag_ms()["max"] >= 0


@pytest.mark.parametrize("notifies", [False, True])
def test_open_loop_never_waits_for_slow_requests(notifies: bool) -> None:
    fake, gate = FakeClock(), threading.Event()
    submitted = threading.Semaphore(0)

    def submit(request: RequestSpec) -> GatedTicket:
        submitted.release()
        return GatedTicket(gate)

    results = []
    runner = threading.Thread(
        target=lambda: results.append(
            run_load(
                make_requests([0.0, 1.0, 2.0, 3.0, 4.0]),
                notifying(submit) if notifies else submit,
                mode="open-loop",
                clients=1,
                clock=fake.clock,
                sleep=fake.sleep,
                notifies=notifies,
            )
        )
    )
    runner.start()
    for _ in range(5):  # all five reach submit() while none has finished
        assert submitted.acquire(timeout=5)
    gate.set()
    runner.join(timeout=5)
    (result,) = results
    assert result.client_threads == (0 if notifies else 5) and result.peak_in_flight == 5
    assert [record.dispatched_ns - result.start_ns for record in result.records] == [0, 1e9, 2e9, 3e9, 4e9]


@pytest.mark.parametrize("notifies", [False, True])
def test_a_refused_request_fails_and_the_load_continues(notifies: bool) -> None:
    def submit(request: RequestSpec) -> DoneTicket:
        if request.index == 2:
            raise ValueError("prompt too long for the KV pool")
        return DoneTicket()

    class BrokenTicket:
        def wait(self, timeout: float | None = None) -> bool:
            raise RuntimeError("engine died")

    wrap = notifying if notifies else lambda submit: submit
    for mode in ("open-loop", "closed-loop"):
        result = run_load(make_requests([0.0] * 5), wrap(submit), mode=mode, clients=2, notifies=notifies)
        assert [record.status for record in result.records] == ["done", "done", "failed", "done", "done"]
        assert result.records[2].error == "ValueError: prompt too long for the KV pool"
        assert result.records[2].done_ns is not None and result.records[2].ticket is None
    result = run_load(
        make_requests([0.0]),
        wrap(lambda request: BrokenTicket()),
        mode="closed-loop",
        clients=1,
        notifies=notifies,
    )
    assert result.records[0].error == "RuntimeError: engine died"


def test_duration_stops_open_loop_submissions() -> None:
    fake = FakeClock()
    result = run_load(
        make_requests([0.0, 1.0, 2.0, 3.0, 4.0]),
        lambda request: DoneTicket(),
        mode="open-loop",
        clients=1,
        duration_s=2.5,
        clock=fake.clock,
        sleep=fake.sleep,
    )
    assert [record.status for record in result.records] == ["done"] * 3 + ["not_submitted"] * 2
    assert not result.stopped_early


@pytest.mark.parametrize("notifies", [False, True])
def test_duration_stops_closed_loop_clients(notifies: bool) -> None:
    fake = FakeClock()

    class OneSecondTicket:
        def wait(self, timeout: float | None = None) -> bool:
            fake.sleep(1.0)
            return True

    submit = lambda request: OneSecondTicket()  # noqa: E731
    result = run_load(
        make_requests([0.0] * 10),
        notifying(submit) if notifies else submit,
        mode="closed-loop",
        clients=1,
        duration_s=2.5,
        clock=fake.clock,
        sleep=fake.sleep,
        notifies=notifies,
    )
    assert result.count("done") == 3 and result.count("not_submitted") == 7


def test_stop_event_ends_an_open_loop_load_early() -> None:
    fake, stop = FakeClock(), threading.Event()

    def sleep(seconds: float) -> None:
        fake.sleep(seconds)
        if fake.now_ns - start_ns >= 1.5e9:
            stop.set()  # what a Ctrl-C handler does

    start_ns = fake.clock()
    result = run_load(
        make_requests([0.0, 1.0, 2.0, 3.0]),
        lambda request: DoneTicket(),
        mode="open-loop",
        clients=1,
        stop_event=stop,
        clock=fake.clock,
        sleep=sleep,
    )
    assert [record.status for record in result.records] == ["done", "done", "not_submitted", "not_submitted"]
    assert result.stopped_early


@pytest.mark.parametrize("notifies", [False, True])
def test_stop_without_waiting_leaves_in_flight_requests_to_the_caller(notifies: bool) -> None:
    gate, stop = threading.Event(), threading.Event()

    def submit(request: RequestSpec) -> GatedTicket:
        stop.set()
        return GatedTicket(gate)

    result = run_load(
        make_requests([0.0, 0.0, 0.0]),
        notifying(submit) if notifies else submit,
        mode="closed-loop",
        clients=1,
        stop_event=stop,
        wait_on_stop=False,
        notifies=notifies,
    )
    assert [record.status for record in result.records] == ["in_flight", "not_submitted", "not_submitted"]
    gate.set()


def test_warmup_finishes_before_the_measured_load_starts() -> None:
    done: list[LoadRecord] = []
    tracker = InFlightTracker()
    result = run_load(
        make_requests([0.0, 0.001, 0.002], warmup=3), tracker.submit, mode="open-loop", on_done=done.append
    )
    warmups = [record for record in result.records if record.request.warmup]
    measured = [record for record in result.records if not record.request.warmup]
    assert max(record.done_ns for record in warmups) <= result.start_ns <= min(r.submit_ns for r in measured)
    assert result.warmup_ns > 0 and len(done) == 6


@pytest.mark.parametrize("notifies", [False, True])
def test_a_failing_on_done_callback_is_raised(notifies: bool) -> None:
    def on_done(record: LoadRecord) -> None:
        raise KeyError("bug in the caller")

    with pytest.raises(KeyError, match="bug in the caller"):
        run_load(
            make_requests([0.0] * 3),
            done_at_once if notifies else lambda request: DoneTicket(),
            mode="closed-loop",
            clients=1,
            on_done=on_done,
            notifies=notifies,
        )


def test_bad_mode_or_clients_are_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        run_load([], lambda request: DoneTicket(), mode="burst")
    with pytest.raises(ValueError, match="clients"):
        run_load([], lambda request: DoneTicket(), mode="closed-loop", clients=0)
