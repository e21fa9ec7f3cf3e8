"""Keep what the engine asked of its scheduler and sampler during a run, so that the run can be replayed.

The scheduler's inputs (arrivals, finished ids, free blocks) determine every plan, and through the
plans every KV event and model input; the sampler's registrations give each sequence's parameters
and prompt, and its calls which sequences drew which tokens. That is the whole control workload of
the run; a few of its logits rows are kept too, so that the sampler is replayed on the model's own
distribution (a flat row and a peaked one cost a sampler very different amounts).

Recording stops after MAX_STEPS steps, so that a long run keeps bounded memory; the replay then
covers the run's first MAX_STEPS steps and says so. Per step it costs two list appends inside the
scheduler and sampler spans, and every `capture_every`-th sampler call copies CAPTURE_ROWS rows: every
CAPTURE_EVERY-th at first, then, each time MAX_CAPTURES are held, every other capture is dropped and the
period doubles, so a short run keeps many captures and a long one no more than MAX_CAPTURES. Each sampler
call is also timed (two clock reads), which prices the engine's sampler in the run's own conditions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ...engine.sampler import PythonSampler

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ...engine.types import NewSequence, Sampler, SamplingParams, Scheduler, StepPlan

MAX_STEPS = 1024
# Why 8 and 48: with a fixed period of 32 a short run kept too few captures for a narrow replay interval
# (docs/measurements.md); the replay plays up to 24 calls (replay.SAMPLER_STEPS), which 48 leave room to spread.
CAPTURE_EVERY = 8
MAX_CAPTURES = 48  # even: the capture after a thinning falls on a multiple of the doubled period
CAPTURE_ROWS = 4
# Why chunks: the Python sampler's time a row drifts within a run as it moves between runs, and a bootstrap
# over single calls would count that drift as settled; chunks of 8 neighbouring calls gave an interval about
# as wide as the spread between quiet runs of one scenario (docs/measurements.md). A move that lasts the whole
# run is not seen by any chunk.
CHUNK_CALLS = 8


def captured_call(log: WorkloadLog, snapshot: int) -> int:
    """The index in log.samples of the call that log.logits_rows[snapshot] was captured at (the rule in
    RecordingSampler.sample: every log.capture_every-th call, from the first)."""
    return snapshot * log.capture_every


@dataclass
class WorkloadLog:
    """One run's control workload, in the order the engine issued it."""

    # Per schedule() call: (arrivals, finished ids, free blocks); the lists are the engine's own, never reused.
    schedules: list[tuple[Sequence[NewSequence], Sequence[int], int]] = field(default_factory=list)
    # seq_id -> (SamplingParams, prompt token ids), from sampler.add().
    sequences: dict[int, tuple[SamplingParams, Sequence[int]]] = field(default_factory=dict)
    # Per sample() call: (index of the schedule() call it belongs to, seq ids, tokens drawn).
    samples: list[tuple[int, Sequence[int], list[int]]] = field(default_factory=list)
    logits_rows: list[torch.Tensor] = field(
        default_factory=list
    )  # float32 CPU tensors, CAPTURE_ROWS rows at most each
    logits_device: str = "cpu"  # where the run's logits were: the Python sampler is replayed there
    # torch's thread count on the engine thread at each capture (engine.thread_governor may lower it under
    # contention): the Python sampler is replayed at the count it ran at.
    capture_threads: list[int] = field(default_factory=list)
    # The engine's own sampler over every recorded call but the first (which carries torch's one-off set-up),
    # timed around the call in the run's conditions: [ns, rows, calls] per CHUNK_CALLS consecutive calls. Where
    # the engine's sampler was the Python twin (python_sampler), the replay prices that twin by these instead
    # of by its own timing, with an interval over the chunks.
    sampler_chunks: list[list[int]] = field(default_factory=list)
    python_sampler: bool = False
    capture_every: int = CAPTURE_EVERY  # the period captures are kept at now (doubles as they thin out)
    steps_seen: int = 0  # schedule() calls in the whole run, recorded or not

    @property
    def open(self) -> bool:
        return len(self.schedules) < MAX_STEPS


class RecordingScheduler:
    """Forwards to the engine's scheduler, keeping each schedule() call's inputs while the log is open."""

    def __init__(self, inner: Scheduler, log: WorkloadLog) -> None:
        self._inner = inner
        self._log = log

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], free_blocks: int
    ) -> StepPlan:
        log = self._log
        log.steps_seen += 1
        if log.open:
            log.schedules.append((arrivals, finished, free_blocks))
        return self._inner.schedule(arrivals, finished, free_blocks)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingSampler:
    """Forwards to the engine's sampler, keeping registrations, draws and a few logits rows while the log is open."""

    def __init__(self, inner: Sampler, log: WorkloadLog) -> None:
        self._inner = inner
        self._log = log

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        if self._log.open:
            self._log.sequences[seq_id] = (params, prompt_token_ids)
        self._inner.add(seq_id, params, prompt_token_ids)

    def remove(self, seq_id: int) -> None:
        self._inner.remove(seq_id)

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        log = self._log
        step = log.steps_seen - 1
        if step >= len(log.schedules):  # the step's schedule() call was not recorded: the log has closed
            return self._inner.sample(logits, seq_ids)
        start = time.perf_counter_ns()
        tokens = self._inner.sample(logits, seq_ids)
        took = time.perf_counter_ns() - start
        if log.samples:  # not the first call: it carries torch's one-off set-up
            chunks = log.sampler_chunks
            if not chunks or chunks[-1][2] >= CHUNK_CALLS:
                chunks.append([0, 0, 0])
            chunk = chunks[-1]
            chunk[0] += took
            chunk[1] += len(seq_ids)
            chunk[2] += 1
        if len(log.samples) % log.capture_every == 0:
            log.logits_rows.append(logits[:CAPTURE_ROWS].detach().to("cpu", dtype=torch.float32, copy=True))
            log.logits_device = str(logits.device)
            log.capture_threads.append(torch.get_num_threads())
            if len(log.logits_rows) >= MAX_CAPTURES:  # keep the even ones: multiples of twice the period
                del log.logits_rows[1::2], log.capture_threads[1::2]
                log.capture_every *= 2
        log.samples.append((step, seq_ids, tokens))
        return tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install_recorder(engine: Engine) -> WorkloadLog:
    """Put recording proxies in front of the engine's scheduler and sampler (before it starts); the log fills as it runs."""
    log = WorkloadLog(python_sampler=isinstance(engine.sampler, PythonSampler))
    engine.scheduler = RecordingScheduler(engine.scheduler, log)
    engine.sampler = RecordingSampler(engine.sampler, log)
    return log
