"""The counting run (`--profile counters`): deterministic event counts per step and per token, for CI budgets.

Timing is noisy on shared machines; counts are not. To make the engine see the same batches every
time, all measured requests are submitted before its thread starts (a second engine after a warm-up
engine has absorbed first-time work), sampling is seeded, and the count hooks wrap every step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard

import pandas as pd

from ...engine.types import SamplingParams
from ...scenarios.loadgen import RequestSpec, generate_requests
from ...scenarios.spec import ScenarioSpec
from ..rundir.environment import describe_environment
from ..rundir.results import RunResult, write_run
from .builder import BuiltEngine, build_engine
from .options import EngineOptions
from .record import request_tables, run_config, step_table
from .session import SessionOutcome, engine_section, prepare_prompts

if TYPE_CHECKING:
    from ...engine.engine import Engine
    from ...engine.loader import LoadedModel
    from ...engine.sequence import RequestHandle, RequestOutput
    from ..collectors.counters import HasCalls


@dataclass
class _Counted:
    """The measured phase's engine, its requests' outputs, its counters and its wall-clock window."""

    built: BuiltEngine
    outputs: dict[int, RequestOutput]
    counters: dict[str, float | None]
    started_ns: int
    finished_ns: int


def run_counting(
    options: EngineOptions,
    scenario: ScenarioSpec,
    out_dir: Path,
    *,
    loaded: LoadedModel,
    native_speedups: dict[str, float] | None = None,
) -> SessionOutcome:
    requests = generate_requests(scenario, loaded.config.context_length)
    prompts = prepare_prompts(requests, loaded.tokenizer)
    warmups = [request for request in requests if request.warmup] or requests[:1]
    measured = [request for request in requests if not request.warmup]
    counted = _count(options, loaded, prompts, warmups, measured)
    result, requests_df, steps = _counting_result(options, scenario, loaded, measured, counted)
    write_run(out_dir, result, requests_df, steps)
    return SessionOutcome(out_dir, result, requests_df, steps)


def _submit_all(
    engine: Engine, prompts: dict[int, str], batch: list[RequestSpec]
) -> dict[int, RequestHandle]:
    """Submit every request of the batch (before the engine starts: its first step sees them all)."""
    return {
        request.index: engine.submit(
            prompts[request.index],
            SamplingParams(**request.sampling),
            chat=request.chat,
            priority=request.priority,
        )
        for request in batch
    }


def _count(
    options: EngineOptions,
    loaded: LoadedModel,
    prompts: dict[int, str],
    warmups: list[RequestSpec],
    measured: list[RequestSpec],
) -> _Counted:
    """A warm-up engine, then a second engine whose steps the counters see, each serving its batch to the end."""
    from ..collectors.counters import CounterCollector

    collector: CounterCollector | None = None
    for phase in ("warmup", "measured"):
        built = build_engine(loaded, options)
        engine = built.engine
        if collector is None:
            natives = [component for component in built.components.values() if _counts_calls(component)]
            collector = CounterCollector(native_counters=natives)
        # The counting hook sees exactly the engine's steps: it replaces this engine's bound step (the engine has no
        # step-wrapping hook to install it through).
        engine._step = collector.wrap_step(engine._step)  # type: ignore[method-assign]
        batch = warmups if phase == "warmup" else measured
        handles = _submit_all(engine, prompts, batch)  # before start(): the first step sees every request
        if phase == "measured":
            collector.native_counters = [c for c in built.components.values() if _counts_calls(c)]
            collector.start()
        started = time.perf_counter_ns()
        engine.start()
        outputs = {index: handle.result() for index, handle in handles.items()}
        engine.shutdown()
        finished = time.perf_counter_ns()
    assert collector is not None
    collector.stop()
    generated = sum(output.output_tokens for output in outputs.values())
    counters: dict[str, float | None] = dict(collector.result(generated_tokens=generated))
    return _Counted(built, outputs, counters, started, finished)


def _counts_calls(component: object) -> TypeGuard[HasCalls]:
    """A component that counts its own calls (a C twin's `calls`)."""
    return hasattr(component, "calls")


def _counting_result(
    options: EngineOptions,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    measured: list[RequestSpec],
    counted: _Counted,
) -> tuple[RunResult, pd.DataFrame, pd.DataFrame]:
    """The counting run's RunResult, its requests table and its steps table."""
    from ..analysis.metrics import compute_metrics

    timings, rows = request_tables(measured, counted.outputs)
    metrics = compute_metrics(
        timings,
        duration_s=max(1e-9, (counted.finished_ns - counted.started_ns) / 1e9),
        slos=scenario.slo.as_dict(),
    )
    engine = counted.built.engine
    steps = step_table(engine, None)
    result = RunResult(
        config=run_config(
            options,
            loaded,
            counted.built,
            scenario,
            profile="counters",
            requests=len(measured),
            collectors=["counters"],
            duration_s=None,
        ),
        environment=describe_environment(),
        scenario=scenario.to_dict(),
        metrics=metrics,
        engine=engine_section(engine, steps),
        counters=counted.counters,
        collectors={"counters": {"status": "ok", "reason": None}},
    )
    return result, pd.DataFrame(rows), steps
