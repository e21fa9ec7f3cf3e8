"""`infer-prof golden`: prove the C twins change nothing but speed, on a whole seeded workload.

Two checks over the same requests (mixed sampling parameters, a KV pool small enough to force
preemption, every request submitted before the engine starts so that batches are reproducible):

1. shadow run: the Python twins drive the engine while each C twin is fed exactly the same inputs
   (the same plans' inputs, the same logits) and its answer is compared at once. The first
   difference of each request is explained from the exact logits row (profiler/checks/golden_explain.py)
   and classified near-tie or logic error; any scheduler or allocator difference is a logic error.
2. end to end: the C twins drive a second engine; its tokens must equal the Python run's, except in
   requests whose shadow divergence was a near-tie.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from engine.config import EngineConfig
from engine.engine import Engine
from engine.kv_alloc import blocks_for_tokens
from engine.types import SamplingParams
from profiler.checks.golden_explain import Explanation, explain

SHADOW_PHASE, END_TO_END_PHASE = "shadow run", "end-to-end run"

PARAM_MIXES: tuple[dict[str, Any], ...] = (
    {"temperature": 0.0},
    {"temperature": 0.8, "top_k": 50, "top_p": 0.9},
    {"temperature": 1.0, "top_p": 0.95},
    {"temperature": 0.7, "min_p": 0.05},
    {"temperature": 0.9, "repetition_penalty": 1.2, "frequency_penalty": 0.3, "presence_penalty": 0.3},
    {"temperature": 1.0},
    {"temperature": 0.0, "repetition_penalty": 1.3},
    {"temperature": 1.2, "top_k": 5, "min_p": 0.1},
)


@dataclass
class Divergence:
    component: str  # sampler, scheduler, allocator, end-to-end
    step: int
    request: int | None
    position: int | None
    python: Any
    native: Any
    explanation: Explanation | None = None

    @property
    def kind(self) -> str:
        return self.explanation.kind if self.explanation else "logic error"


@dataclass
class GoldenReport:
    requests: int
    tokens: int
    steps: int
    preemptions: int
    divergences: list[Divergence] = field(default_factory=list)
    end_to_end_mismatches: list[int] = field(default_factory=list)  # request ids
    unexplained_end_to_end: list[int] = field(default_factory=list)

    @property
    def logic_errors(self) -> list[Divergence]:
        return [d for d in self.divergences if d.kind == "logic error"]

    @property
    def near_ties(self) -> list[Divergence]:
        return [d for d in self.divergences if d.kind == "near-tie"]

    @property
    def exit_code(self) -> int:
        return 1 if self.logic_errors or self.unexplained_end_to_end else 0


class _Shadow:
    """Shared step counter and divergence log of the three shadow components."""

    def __init__(self) -> None:
        self.step = -1
        self.divergences: list[Divergence] = []
        self.diverged_requests: set[int] = set()


class ShadowScheduler:
    def __init__(self, python: Any, native: Any, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.block_size = python.block_size

    @property
    def num_waiting(self) -> int:
        return self.python.num_waiting

    @property
    def num_running(self) -> int:
        return self.python.num_running

    def schedule(self, arrivals, finished, num_free_blocks):  # type: ignore[no-untyped-def]
        self.shadow.step += 1
        plan = self.python.schedule(arrivals, finished, num_free_blocks)
        other = self.native.schedule(arrivals, finished, num_free_blocks)
        if dataclasses.asdict(plan) != dataclasses.asdict(other):
            self.shadow.divergences.append(Divergence("scheduler", self.shadow.step, None, None, plan, other))
        return plan


class ShadowAllocator:
    def __init__(self, python: Any, native: Any, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.num_blocks, self.block_size = python.num_blocks, python.block_size

    @property
    def num_free_blocks(self) -> int:
        return self.python.num_free_blocks

    def block_table(self, seq_id: int) -> list[int]:
        return self.python.block_table(seq_id)

    def step(self, frees, grow_seq_ids, grow_num_blocks, batch_seq_ids):  # type: ignore[no-untyped-def]
        tables = self.python.step(frees, grow_seq_ids, grow_num_blocks, batch_seq_ids)
        other = self.native.step(frees, grow_seq_ids, grow_num_blocks, batch_seq_ids)
        if not np.array_equal(np.asarray(tables), np.asarray(other)) or self.python.num_free_blocks != self.native.num_free_blocks:
            self.shadow.divergences.append(Divergence("allocator", self.shadow.step, None, None, np.asarray(tables).tolist(), np.asarray(other).tolist()))
        return tables


class ShadowSampler:
    def __init__(self, python: Any, native: Any, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.requests: dict[int, tuple[SamplingParams, list[int], list[int]]] = {}  # params, prompt, output

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        self.python.add(seq_id, params, prompt_token_ids)
        self.native.add(seq_id, params, prompt_token_ids)
        self.requests[seq_id] = (params, list(prompt_token_ids), [])

    def remove(self, seq_id: int) -> None:
        self.python.remove(seq_id)
        self.native.remove(seq_id)

    def sample(self, logits, seq_ids):  # type: ignore[no-untyped-def]
        tokens = self.python.sample(logits, seq_ids)
        others = self.native.sample(logits, seq_ids)
        for index, (seq_id, token, other) in enumerate(zip(seq_ids, tokens, others)):
            params, prompt, output = self.requests[seq_id]
            if token != other and seq_id not in self.shadow.diverged_requests:
                # After a difference the twins' histories part; only the first one per request is meaningful.
                self.shadow.diverged_requests.add(seq_id)
                # Both twins only read the logits (the spec's contract), so the row is still what they saw.
                row = logits[index].detach().cpu().numpy()
                why = explain(row, params, prompt, output, len(output), token, other)
                self.shadow.divergences.append(Divergence("sampler", self.shadow.step, seq_id, len(output), token, other, why))
            output.append(token)
        return tokens


def golden_requests(tokenizer, count: int, seed: int, max_tokens: int) -> list[tuple[list[int], SamplingParams]]:  # type: ignore[no-untyped-def]
    """A seeded mix of prompts (8-120 tokens) and sampling parameters, every request its own seed."""
    from scenarios.prompts import synthetic_prompt

    rng = random.Random(seed)
    requests = []
    for index in range(count):
        length = rng.randint(8, 120)
        ids = tokenizer.encode(synthetic_prompt(length, rng.randrange(2**31)))[:length] or [1]
        mix = PARAM_MIXES[index % len(PARAM_MIXES)]
        params = SamplingParams(**mix, seed=rng.randrange(2**63), max_tokens=max_tokens, ignore_eos=True)
        requests.append((ids, params))
    return requests


Counts = Callable[[str, int, int], None]  # (phase, requests finished, requests in the phase)


def _run(loaded, config: EngineConfig, components, requests, counts: Counts | None = None, phase: str = ""):  # type: ignore[no-untyped-def]
    scheduler, kv_alloc, sampler = components
    engine = Engine(loaded.model, loaded.tokenizer, scheduler=scheduler, kv_alloc=kv_alloc, sampler=sampler, config=config)
    handles = [engine.submit(ids, params) for ids, params in requests]  # before start(): reproducible batches
    engine.start()
    if counts is not None:
        _report_finished(handles, lambda done: counts(phase, done, len(handles)))
    outputs = [handle.result() for handle in handles]
    engine.shutdown()
    return engine, outputs


def _report_finished(handles: list[Any], report: Callable[[int], None], poll_s: float = 0.25) -> None:
    """Call report(finished) whenever the count of finished requests changes, until all have finished."""
    pending = list(handles)
    reported = -1
    while True:
        pending = [handle for handle in pending if not handle.done()]
        finished = len(handles) - len(pending)
        if finished != reported:
            report(finished)
            reported = finished
        if not pending:
            return
        try:
            pending[0].result(timeout=poll_s)
        except TimeoutError:
            pass


def run_golden(loaded, *, requests: int = 200, seed: int = 0, max_tokens: int = 64, max_batch: int = 32,
               kv_blocks: int | None = None, progress=None, counts: Counts | None = None) -> GoldenReport:  # type: ignore[no-untyped-def]  # fmt: skip
    """Run the workload in shadow mode and natively end to end; see the module docstring.

    progress(message) says which run starts; counts(phase, finished, total) follows each run's requests
    (phase is SHADOW_PHASE or END_TO_END_PHASE)."""
    from native_paths.loader import require
    from native_paths.toggles import make_components

    require()  # a clear NativeUnavailableError when the extension is not built
    workload = golden_requests(loaded.tokenizer, requests, seed, max_tokens)
    block_size = 16
    if kv_blocks is None:
        # About a third of what the running batch needs at full length: preemption must happen.
        per_request = blocks_for_tokens(120 + max_tokens, block_size)
        kv_blocks = max(per_request + 1, max_batch * per_request // 3)
    config = EngineConfig(block_size=block_size, num_kv_blocks=kv_blocks, max_num_seqs=max_batch, max_batched_tokens=512, seed=seed)

    def twins(native: str):  # type: ignore[no-untyped-def]
        made = make_components(native, num_blocks=kv_blocks, block_size=block_size, max_num_seqs=max_batch,
                               max_batched_tokens=config.max_batched_tokens, policy=config.policy)  # fmt: skip
        return made.scheduler, made.kv_alloc, made.sampler

    shadow = _Shadow()
    py, nat = twins("none"), twins("all")
    components = (ShadowScheduler(py[0], nat[0], shadow), ShadowAllocator(py[1], nat[1], shadow), ShadowSampler(py[2], nat[2], shadow))
    if progress:
        progress("shadow run: Python twins drive, C twins shadow every call")
    engine, python_outputs = _run(loaded, config, components, workload, counts, SHADOW_PHASE)
    if progress:
        progress("end-to-end run: C twins drive")
    _, native_outputs = _run(loaded, config, twins("all"), workload, counts, END_TO_END_PHASE)

    report = GoldenReport(requests=len(workload), tokens=sum(len(o.token_ids) for o in python_outputs),
                          steps=engine.stats()["steps"], preemptions=engine.stats()["preemptions"],
                          divergences=shadow.divergences)  # fmt: skip
    near_tie_requests = {d.request for d in report.near_ties if d.component == "sampler"}
    for py_out, nat_out in zip(python_outputs, native_outputs):
        if py_out.token_ids != nat_out.token_ids:
            report.end_to_end_mismatches.append(py_out.request_id)
            if py_out.request_id not in near_tie_requests:
                report.unexplained_end_to_end.append(py_out.request_id)
    return report
