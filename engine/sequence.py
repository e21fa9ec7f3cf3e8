"""The engine's per-request state and the public records it hands out: RequestOutput, StepRecord, RequestHandle."""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING

from .types import SamplingParams

if TYPE_CHECKING:
    from .tokenizer import IncrementalDetokenizer

FINISH_REASONS = ("stop", "length", "abort", "error")


@dataclass(slots=True)
class RequestOutput:
    """A finished request: its tokens, its text and its timestamps (time.perf_counter_ns, or the engine's clock)."""

    request_id: int
    prompt: str | None  # None when the prompt was given as token ids
    prompt_token_ids: list[int]
    token_ids: list[int]  # generated ids, the stop token included when the request stopped on one
    text: str  # the decoded output, cut before a stop string if it stopped on one
    finish_reason: str  # one of FINISH_REASONS
    error: str | None
    arrival_ns: int
    scheduled_ns: int | None  # first time a step scheduled it
    first_token_ns: int | None
    token_ns: list[int]  # when each generated token was sampled
    finish_ns: int
    num_preemptions: int

    @property
    def ok(self) -> bool:
        return self.finish_reason in ("stop", "length")

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(slots=True)
class StepRecord:
    """What one engine step did (field names are the profiler's steps.csv columns)."""

    step: int
    start_ns: int
    end_ns: int
    batch_size: int
    prefill_tokens: int
    decode_tokens: int
    blocks_used: int
    blocks_free: int
    kv_utilization: float
    fragmentation_slots: int  # allocated but unused token slots, after the step
    preemptions: int
    waiting: int
    running: int


# StepRecord's fields as StepLog keeps them: every one but kv_utilization, which is blocks_used / blocks.
_LOGGED = tuple(name for name in StepRecord.__dataclass_fields__ if name != "kv_utilization")
_READ_LOGGED = attrgetter(*_LOGGED)


class StepLog(Sequence[StepRecord]):
    """Every step's record, kept as integers in one array: a run keeps all of them, one per step.

    As dataclass instances with their int and float objects, a record cost ~250 bytes; a
    10,000-request soak made ~23,000 steps. In the array it costs 96 bytes; reading gives StepRecords.
    """

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values = array("q")

    def append(self, record: StepRecord) -> None:
        # One C call (attrgetter), no Python: the budgets count Python calls per step, and astuple makes ~40.
        self._values.extend(_READ_LOGGED(record))

    def __len__(self) -> int:
        return len(self._values) // len(_LOGGED)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("step record index out of range")
        width = len(_LOGGED)
        fields = dict(zip(_LOGGED, self._values[index * width : (index + 1) * width], strict=True))
        total = fields["blocks_used"] + fields["blocks_free"]
        return StepRecord(**fields, kv_utilization=fields["blocks_used"] / total if total else 0.0)


@dataclass(slots=True, eq=False)
class Request:
    """One request in flight: owned by the engine thread once submitted, except the stream state."""

    request_id: int
    prompt: str | None
    prompt_token_ids: list[int]
    params: SamplingParams  # the seed resolved
    max_tokens: int  # params.max_tokens, capped so that prompt + output fits max_model_len
    priority: int
    arrival_ns: int
    on_token: Callable[[str], None] | None = None
    on_finish: Callable[[RequestOutput], None] | None = None
    token_ids: list[int] = field(default_factory=list)  # prompt + output: what the model computes
    detokenizer: IncrementalDetokenizer | None = None
    text: str = ""
    num_emitted: int = 0  # characters of `text` already streamed
    stop_checked: int = 0  # characters of `text` already searched for stop strings
    scheduled_ns: int | None = None
    token_ns: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    output: RequestOutput | None = None
    # Streaming: text deltas appended by the engine thread, read by any client thread.
    deltas: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[len(self.prompt_token_ids) :]

    def publish(self, delta: str) -> None:
        with self.changed:
            self.deltas.append(delta)
            self.changed.notify_all()

    def finish(self, reason: str, error: str | None, now_ns: int) -> RequestOutput:
        output_ids = self.output_token_ids
        self.output = RequestOutput(
            request_id=self.request_id,
            prompt=self.prompt,
            prompt_token_ids=list(self.prompt_token_ids),
            token_ids=output_ids,
            text=self.text,
            finish_reason=reason,
            error=error,
            arrival_ns=self.arrival_ns,
            scheduled_ns=self.scheduled_ns,
            first_token_ns=self.token_ns[0] if self.token_ns else None,
            token_ns=list(self.token_ns),
            finish_ns=now_ns,
            num_preemptions=self.num_preemptions,
        )
        with self.changed:
            self.changed.notify_all()
        return self.output


class RequestHandle:
    """What submit() returns: wait for the result, stream the text, or cancel."""

    __slots__ = ("_cancel", "_request")

    def __init__(self, request: Request, cancel: Callable[[int], bool]) -> None:
        self._request = request
        self._cancel = cancel

    @property
    def request_id(self) -> int:
        return self._request.request_id

    def done(self) -> bool:
        return self._request.output is not None

    def result(self, timeout: float | None = None) -> RequestOutput:
        """The finished request; raises TimeoutError if it has not finished within `timeout` seconds."""
        request = self._request
        with request.changed:
            if not request.changed.wait_for(lambda: request.output is not None, timeout):
                raise TimeoutError(f"request {request.request_id} did not finish within {timeout} s")
        assert request.output is not None
        return request.output

    def stream(self) -> Iterator[str]:
        """The output text as it is produced, delta by delta, from the start (any number of readers)."""
        request = self._request
        index = 0

        def ready() -> bool:
            return len(request.deltas) > index or request.output is not None

        while True:
            with request.changed:
                request.changed.wait_for(ready)
                new = request.deltas[index:]
                finished = request.output is not None
            index += len(new)
            yield from new
            if finished and index == len(request.deltas):
                return

    def cancel(self) -> bool:
        """Abort the request (finish_reason "abort"); False if it had already finished."""
        return self._cancel(self.request_id)
