"""Planted bottlenecks: test instruments that wrap engine components to create a known cost.

They exist for `infer-prof selftest`, the budget noise test and the verification of the verdict,
are off by default, and are never active in a normal run: only code that names an injection
explicitly (selftest, tests) turns one on, and the run records which were active in config.injections.

    slow_sampler        the sampler's step takes `factor` times as long (busy-waits the extra time)
    contended_lock      every sampler call takes a lock that a background thread holds most of the time
    untraced_lock       the same, through a plain `with lock:` that no tracer sees (what detection must find)
    allocation_heavy    every step allocates and drops many small Python objects (GC pressure)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    import torch

    from ...engine.trace import Tracer
    from ...engine.types import KVAllocator, Sampler, SamplingParams, Scheduler

INJECTIONS = ("slow_sampler", "contended_lock", "untraced_lock", "allocation_heavy")


class Injections(TypedDict, total=False):
    """The instruments a selftest case plants ({name: setting}), as apply_injections reads them."""

    slow_sampler: float  # how many times slower the sampler runs
    contended_lock: bool
    untraced_lock: bool
    allocation_heavy: int | bool  # objects made a call; True: 60,000


# The lock hog's schedule. A sampler call waits about HOLD_MS - R for the lock, where R is the rest of its
# step, so the wait is the step's largest part while R < HOLD_MS / 2: the hold is long enough that a slow CI
# machine's tiny-model step under --profile deep stays well inside that margin (a shorter one did not:
# docs/measurements.md, "Figures that stood in code comments").
HOLD_MS = 60.0
PERIOD_MS = 62.0


class SlowSampler:
    """Delegates to a sampler, then spins for (factor - 1) x the time the real call took."""

    def __init__(self, inner: Sampler, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        self.inner.add(seq_id, params, prompt_token_ids)

    def remove(self, seq_id: int) -> None:
        self.inner.remove(seq_id)

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        start = time.perf_counter_ns()
        tokens = self.inner.sample(logits, seq_ids)
        extra = (time.perf_counter_ns() - start) * (self.factor - 1.0)
        until = time.perf_counter_ns() + extra
        while time.perf_counter_ns() < until:  # busy: the cost must look like interpreter work
            pass
        return tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ContendedSampler(SlowSampler):
    """Every sample() first takes a lock that a hog thread holds for `hold_ms` out of every `period_ms`."""

    def __init__(
        self, inner: Sampler, tracer: Tracer, hold_ms: float = HOLD_MS, period_ms: float = PERIOD_MS
    ) -> None:
        super().__init__(inner, 1.0)
        self.tracer = tracer
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._hog = threading.Thread(
            target=self._hold, args=(hold_ms / 1000, period_ms / 1000), name="injected-lock-hog", daemon=True
        )
        self._hog.start()

    def _hold(self, hold_s: float, period_s: float) -> None:
        while not self._stop.is_set():
            with self.lock:
                time.sleep(hold_s)
            time.sleep(max(0.0, period_s - hold_s))

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        with self.tracer.lock(self.lock, "injected_contended_lock"):
            return self.inner.sample(logits, seq_ids)

    def close(self) -> None:
        self._stop.set()


class UntracedContendedSampler(ContendedSampler):
    """ContendedSampler whose lock is a plain threading.Lock taken with `with`: no span, no tracer.lock."""

    def __init__(self, inner: Sampler, hold_ms: float = HOLD_MS, period_ms: float = PERIOD_MS) -> None:
        from ...engine.trace import NULL_TRACER

        super().__init__(inner, NULL_TRACER, hold_ms, period_ms)

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        with self.lock:
            return self.inner.sample(logits, seq_ids)


class AllocatingSampler(SlowSampler):
    """Every sample() builds and drops `objects` small containers: allocator and GC work on the step."""

    def __init__(self, inner: Sampler, objects: int = 60_000) -> None:
        super().__init__(inner, 1.0)
        self.objects = objects

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
        garbage = [{"i": i, "l": [i, i + 1]} for i in range(self.objects)]
        for i in range(0, len(garbage) - 1, 2):  # reference cycles: only the cyclic GC can free these
            garbage[i]["peer"] = garbage[i + 1]
            garbage[i + 1]["peer"] = garbage[i]
        del garbage
        return self.inner.sample(logits, seq_ids)


def apply_injections(
    injections: Injections,
    scheduler: Scheduler,
    kv_alloc: KVAllocator,
    sampler: Sampler,
    tracer: Tracer | None = None,
) -> tuple[Scheduler, KVAllocator, Sampler]:
    """Wrap components per `injections` ({name: setting}); unknown names are a programming error."""
    unknown = set(injections) - set(INJECTIONS)
    if unknown:
        raise ValueError(f"unknown injection(s) {sorted(unknown)}; known: {', '.join(INJECTIONS)}")
    if "slow_sampler" in injections:
        sampler = SlowSampler(sampler, float(injections["slow_sampler"]))
    if "contended_lock" in injections:
        from ...engine.trace import NULL_TRACER

        sampler = ContendedSampler(sampler, tracer or NULL_TRACER)
    if "untraced_lock" in injections:
        sampler = UntracedContendedSampler(sampler)
    if "allocation_heavy" in injections:
        sampler = AllocatingSampler(
            sampler,
            int(injections["allocation_heavy"]) if injections["allocation_heavy"] is not True else 60_000,
        )
    return scheduler, kv_alloc, sampler


def close_injections(components: Mapping[str, object]) -> None:
    """Stop what injections started (the lock hog thread) once the run is over; twins are left alone."""
    for component in components.values():
        while isinstance(component, SlowSampler):
            if isinstance(component, ContendedSampler):
                component.close()
            component = component.inner
