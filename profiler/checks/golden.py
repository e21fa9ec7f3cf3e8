"""`infer-prof golden`: prove the C twins change nothing but speed, on a whole seeded workload.

Two checks over the same requests (mixed sampling parameters, a KV pool small enough to force
preemption, every request submitted before the engine starts so that batches are reproducible):

1. shadow run: the Python twins drive the engine while each C twin, and the fused core, is fed
   exactly the same inputs (the same plans' inputs, the same logits) and its answer is compared at
   once. The first difference of each request is explained from the exact logits row
   (profiler/checks/golden_explain.py) and classified near-tie or logic error; any scheduler,
   allocator, preparation or core difference is a logic error.
2. end to end: the C twins drive another engine, once per native combination asked for (by default
   every twin separately, and the core with the C sampler); its tokens must equal the Python run's,
   except, when the C sampler is on, in requests whose shadow divergence was a near-tie.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypedDict, TypeVar

import numpy as np

from ...engine.config import EngineConfig
from ...engine.engine import Engine
from ...engine.kv_alloc import blocks_for_tokens
from ...engine.types import (
    KVAllocator,
    ModelInput,
    NewSequence,
    Prepare,
    Sampler,
    SamplingParams,
    Scheduler,
    StepPlan,
    TextTokenizer,
)
from ..session.options import OPTION
from .golden_explain import Explanation, explain

if TYPE_CHECKING:
    import torch

    from ...engine.loader import LoadedModel
    from ...engine.sequence import RequestHandle, RequestOutput
    from ...native_paths.core import NativeCore

T = TypeVar("T")

SHADOW_PHASE = "shadow run"
DEFAULT_COMBINATIONS = ("all", "core,sampler")


class SamplingMix(TypedDict, total=False):
    """The sampling parameters a golden request sets (the rest of engine.types.SamplingParams at its defaults)."""

    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repetition_penalty: float
    frequency_penalty: float
    presence_penalty: float


PARAM_MIXES: tuple[SamplingMix, ...] = (
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
    component: str  # sampler, scheduler, allocator, prepare, core (the fused core's plan, tables or input)
    step: int
    request: int | None
    position: int | None
    python: object  # each twin's answer (or a word for it), compared and shown, never read
    native: object
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
    end_to_end_mismatches: list[int] = field(default_factory=list)  # request ids, over every combination
    unexplained_end_to_end: list[int] = field(default_factory=list)
    combinations: dict[str, list[int]] = field(default_factory=dict)  # native selection -> unexplained ids

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
    """Shared step counter and divergence log of the shadow components, and the fused core they also feed."""

    def __init__(self, core: NativeCore | None = None) -> None:
        self.step = -1
        self.divergences: list[Divergence] = []
        self.diverged_requests: set[int] = set()
        self.core = core
        self.core_plan: StepPlan | None = None
        self.core_tables: np.ndarray | None = None

    def differ(self, component: str, python: object, native: object) -> None:
        self.divergences.append(Divergence(component, self.step, None, None, python, native))

    def shadowed(self, component: str, python: object, call: Callable[[], T]) -> T | None:
        """A shadowing twin's answer, or None after recording a divergence when it raised where Python did not."""
        try:
            return call()
        except Exception as error:  # any refusal the Python twin did not make is a difference
            self.differ(component, python, f"raised {type(error).__name__}: {error}")
            if component == "core":
                self.core = None  # its state has parted from Python's: later differences would be echoes
            return None


class ShadowScheduler:
    def __init__(self, python: Scheduler, native: Scheduler, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.block_size = python.block_size

    @property
    def num_waiting(self) -> int:
        return self.python.num_waiting

    @property
    def num_running(self) -> int:
        return self.python.num_running

    def schedule(
        self, arrivals: Sequence[NewSequence], finished: Sequence[int], num_free_blocks: int
    ) -> StepPlan:
        shadow = self.shadow
        shadow.step += 1
        plan = self.python.schedule(arrivals, finished, num_free_blocks)
        other = shadow.shadowed(
            "scheduler", plan.as_lists(), lambda: self.native.schedule(arrivals, finished, num_free_blocks)
        )
        if other is not None and plan != other:
            shadow.differ("scheduler", plan.as_lists(), other.as_lists())
        if shadow.core is not None:
            core = shadow.core
            shadow.core_plan = shadow.shadowed(
                "core", plan.as_lists(), lambda: core.scheduler.schedule(arrivals, finished, num_free_blocks)
            )
            if shadow.core_plan is not None and plan != shadow.core_plan:
                shadow.differ("core", plan.as_lists(), shadow.core_plan.as_lists())
                shadow.core = None
        return plan


class ShadowAllocator:
    def __init__(self, python: KVAllocator, native: KVAllocator, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.num_blocks, self.block_size = python.num_blocks, python.block_size

    @property
    def num_free_blocks(self) -> int:
        return self.python.num_free_blocks

    def block_table(self, seq_id: int) -> list[int]:
        return self.python.block_table(seq_id)

    def step(
        self,
        frees: Sequence[int] | np.ndarray,
        grow_seq_ids: Sequence[int] | np.ndarray,
        grow_num_blocks: Sequence[int] | np.ndarray,
        batch_seq_ids: Sequence[int] | np.ndarray,
    ) -> np.ndarray:
        shadow = self.shadow
        tables = self.python.step(frees, grow_seq_ids, grow_num_blocks, batch_seq_ids)
        other = shadow.shadowed(
            "allocator",
            tables.tolist(),
            lambda: self.native.step(frees, grow_seq_ids, grow_num_blocks, batch_seq_ids),
        )
        if other is not None and (
            not np.array_equal(tables, other) or self.python.num_free_blocks != self.native.num_free_blocks
        ):
            shadow.differ("allocator", tables.tolist(), np.asarray(other).tolist())
        core, plan = shadow.core, shadow.core_plan
        if core is not None and plan is not None:
            shadow.core_tables = shadow.shadowed(
                "core",
                tables.tolist(),
                lambda: core.kv_alloc.step(plan.frees, plan.grow_seq_ids, plan.grow_num_blocks, plan.seq_ids),
            )
            if shadow.core_tables is not None and (
                not np.array_equal(tables, shadow.core_tables)
                or self.python.num_free_blocks != core.kv_alloc.num_free_blocks
            ):
                shadow.differ("core", tables.tolist(), shadow.core_tables.tolist())
                shadow.core = None
        return tables


class ShadowPrepare:
    def __init__(self, python: Prepare, native: Prepare, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.block_size = python.block_size

    def _shadows(self) -> list[tuple[str, Prepare]]:
        core = self.shadow.core
        return [("prepare", self.native)] + ([("core", core.prepare)] if core is not None else [])

    def add(self, seq_id: int, prompt_token_ids: Sequence[int]) -> None:
        self.python.add(seq_id, prompt_token_ids)
        for name, twin in self._shadows():
            self.shadow.shadowed(name, "add", partial(twin.add, seq_id, prompt_token_ids))

    def remove(self, seq_id: int) -> None:
        self.python.remove(seq_id)
        for name, twin in self._shadows():
            self.shadow.shadowed(name, "remove", partial(twin.remove, seq_id))

    def append_sampled(self, tokens: Sequence[int]) -> None:
        self.python.append_sampled(tokens)
        for name, twin in self._shadows():
            self.shadow.shadowed(name, "append_sampled", partial(twin.append_sampled, tokens))

    def prepare(self, plan: StepPlan, block_tables: np.ndarray) -> ModelInput:
        shadow = self.shadow
        inp = self.python.prepare(plan, block_tables)
        other = shadow.shadowed("prepare", "an input", lambda: self.native.prepare(plan, block_tables))
        if other is not None and not inp.same_as(other):
            shadow.differ("prepare", inp.as_lists(), other.as_lists())
        core, core_plan, core_tables = shadow.core, shadow.core_plan, shadow.core_tables
        if core is not None and core_plan is not None and core_tables is not None:
            core_input = shadow.shadowed(
                "core", "an input", lambda: core.prepare.prepare(core_plan, core_tables)
            )
            if core_input is not None and not inp.same_as(core_input):
                shadow.differ("core", inp.as_lists(), core_input.as_lists())
                shadow.core = None
        return inp


class ShadowSampler:
    def __init__(self, python: Sampler, native: Sampler, shadow: _Shadow) -> None:
        self.python, self.native, self.shadow = python, native, shadow
        self.requests: dict[int, tuple[SamplingParams, list[int], list[int]]] = {}  # params, prompt, output

    def add(self, seq_id: int, params: SamplingParams, prompt_token_ids: Sequence[int]) -> None:
        self.python.add(seq_id, params, prompt_token_ids)
        self.native.add(seq_id, params, prompt_token_ids)
        self.requests[seq_id] = (params, list(prompt_token_ids), [])

    def remove(self, seq_id: int) -> None:
        self.python.remove(seq_id)
        self.native.remove(seq_id)

    def sample(self, logits: torch.Tensor, seq_ids: Sequence[int]) -> list[int]:
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
                self.shadow.divergences.append(
                    Divergence("sampler", self.shadow.step, seq_id, len(output), token, other, why)
                )
            output.append(token)
        return tokens


Workload = list[tuple[list[int], SamplingParams]]  # (prompt token ids, sampling parameters) per request
Quad = tuple[Scheduler, KVAllocator, Prepare, Sampler]  # one engine's control components


def golden_requests(tokenizer: TextTokenizer, count: int, seed: int, max_tokens: int) -> Workload:
    """A seeded mix of prompts (8-120 tokens) and sampling parameters, every request its own seed."""
    from ...scenarios.prompts import synthetic_prompt

    rng = random.Random(seed)
    requests: Workload = []
    for index in range(count):
        length = rng.randint(8, 120)
        ids = tokenizer.encode(synthetic_prompt(length, rng.randrange(2**31)))[:length] or [1]
        mix = PARAM_MIXES[index % len(PARAM_MIXES)]
        params = SamplingParams(**mix, seed=rng.randrange(2**63), max_tokens=max_tokens, ignore_eos=True)
        requests.append((ids, params))
    return requests


Counts = Callable[[str, int, int], None]  # (phase, requests finished, requests in the phase)


def end_to_end_phase(combination: str) -> str:
    return f"end to end, --native {combination}"


def _run(
    loaded: LoadedModel,
    config: EngineConfig,
    components: Quad,
    requests: Workload,
    counts: Counts | None = None,
    phase: str = "",
) -> tuple[Engine, list[RequestOutput]]:
    scheduler, kv_alloc, prepare, sampler = components
    engine = Engine(
        loaded.model,
        loaded.tokenizer,
        scheduler=scheduler,
        kv_alloc=kv_alloc,
        sampler=sampler,
        prepare=prepare,
        config=config,
    )
    handles = [engine.submit(ids, params) for ids, params in requests]  # before start(): reproducible batches
    engine.start()
    if counts is not None:
        _report_finished(handles, lambda done: counts(phase, done, len(handles)))
    outputs = [handle.result() for handle in handles]
    engine.shutdown()
    return engine, outputs


def _report_finished(
    handles: list[RequestHandle], report: Callable[[int], None], poll_s: float = 0.25
) -> None:
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


def run_golden(
    loaded: LoadedModel,
    *,
    requests: int = 200,
    seed: int = OPTION["seed"].default,
    max_tokens: int = 64,
    max_batch: int = OPTION["max_batch"].default,
    kv_blocks: int | None = None,
    combinations: Sequence[str] = DEFAULT_COMBINATIONS,
    progress: Callable[[str], None] | None = None,
    counts: Counts | None = None,
) -> GoldenReport:
    """Run the workload in shadow mode, then end to end once per native selection in `combinations`
    (each parsed like --native); see the module docstring.

    progress(message) says which run starts; counts(phase, finished, total) follows each run's requests
    (phase is SHADOW_PHASE or end_to_end_phase(combination))."""
    from ...native_paths.loader import require
    from ...native_paths.toggles import parse_native

    require()  # a clear NativeUnavailableError when the extension is not built
    selections = [parse_native(combination) for combination in combinations]
    workload = golden_requests(loaded.tokenizer, requests, seed, max_tokens)
    block_size = OPTION["block_size"].default
    if kv_blocks is None:
        kv_blocks = _preempting_pool(max_tokens, max_batch, block_size)
    config = EngineConfig(block_size=block_size, kv_blocks=kv_blocks, max_batch=max_batch, seed=seed)
    report, python_outputs = _shadow_run(loaded, config, kv_blocks, workload, progress, counts)
    near_tie_requests = {d.request for d in report.near_ties if d.component == "sampler"}
    for combination, selection in zip(combinations, selections):
        if progress:
            progress(f"end-to-end run: --native {combination} drives")
        components = _components(config, kv_blocks, selection)
        _, native_outputs = _run(loaded, config, components, workload, counts, end_to_end_phase(combination))
        # Without the C sampler both runs draw with the Python one: every token must match.
        explained = near_tie_requests if "sampler" in selection else set()
        _compare_end_to_end(report, combination, python_outputs, native_outputs, explained)
    return report


def _preempting_pool(max_tokens: int, max_batch: int, block_size: int) -> int:
    """KV blocks for about a third of what the running batch needs at full length: preemption must happen."""
    per_request = blocks_for_tokens(120 + max_tokens, block_size)
    return max(per_request + 1, max_batch * per_request // 3)


def _components(config: EngineConfig, num_blocks: int, native: frozenset[str]) -> Quad:
    """The four components for `native` (parsed like --native), sized like the engine's config."""
    from ...native_paths.toggles import make_components

    made = make_components(
        native,
        num_blocks=num_blocks,
        block_size=config.block_size,
        max_batch=config.max_batch,
        max_batched_tokens=config.max_batched_tokens,
        policy=config.policy,
    )
    return made.scheduler, made.kv_alloc, made.prepare, made.sampler


def _shadow_run(
    loaded: LoadedModel,
    config: EngineConfig,
    num_blocks: int,
    workload: Workload,
    progress: Callable[[str], None] | None,
    counts: Counts | None,
) -> tuple[GoldenReport, list[RequestOutput]]:
    """The Python twins drive while every C twin and the fused core shadow them: the report of that run (its
    divergences) and its outputs."""
    from ...native_paths.core import NativeCore
    from ...native_paths.toggles import parse_native

    core = NativeCore(
        num_blocks, config.block_size, config.max_batch, config.max_batched_tokens, config.policy
    )
    shadow = _Shadow(core)
    py, nat = (
        _components(config, num_blocks, frozenset()),
        _components(config, num_blocks, parse_native("all")),
    )
    components = (
        ShadowScheduler(py[0], nat[0], shadow),
        ShadowAllocator(py[1], nat[1], shadow),
        ShadowPrepare(py[2], nat[2], shadow),
        ShadowSampler(py[3], nat[3], shadow),
    )
    if progress:
        progress("shadow run: Python twins drive, C twins and the fused core shadow every call")
    engine, python_outputs = _run(loaded, config, components, workload, counts, SHADOW_PHASE)
    report = GoldenReport(
        requests=len(workload),
        tokens=sum(len(o.token_ids) for o in python_outputs),
        steps=engine.stats()["steps"],
        preemptions=engine.stats()["preemptions"],
        divergences=shadow.divergences,
    )
    return report, python_outputs


def _compare_end_to_end(
    report: GoldenReport,
    combination: str,
    python_outputs: list[RequestOutput],
    native_outputs: list[RequestOutput],
    explained: set[int | None],
) -> None:
    """Record in `report` the requests whose tokens differ between the Python run and `combination`'s, and
    those of them no near-tie in `explained` accounts for."""
    unexplained = report.combinations.setdefault(combination, [])
    for py_out, nat_out in zip(python_outputs, native_outputs):
        if py_out.token_ids != nat_out.token_ids:
            if py_out.request_id not in report.end_to_end_mismatches:
                report.end_to_end_mismatches.append(py_out.request_id)
            if py_out.request_id not in explained:
                unexplained.append(py_out.request_id)
                if py_out.request_id not in report.unexplained_end_to_end:
                    report.unexplained_end_to_end.append(py_out.request_id)
