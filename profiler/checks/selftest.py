"""`infer-prof selftest`: planted bottlenecks whose verdict is known by construction, each run and checked.

Each case is one short profiled session on a synthetic model with a load (and, for lock and
allocation, an explicit injection from profiler.checks.injections) that makes one category dominate by
construction. The verdict's category must name it; a wrong name is a defect of the profiler.

    interpreter  synthetic:tiny, 32 closed-loop clients, top-p sampling, + slow_sampler x4: after each
                 sampler call a pure-Python loop spins three times as long as the call took, so at least
                 three quarters of the sampler's span is interpreter time by construction. (Top-p alone
                 does not make it: measured, its sort over the 49,152-token vocabulary is mostly torch
                 kernel time (docs/measurements.md); it passed only while the default profile assumed that
                 every span but the model's was interpreter.)
    kernel       synthetic:base (SmolLM2-135M's shape, 30 layers), one client, greedy: each step
                 streams ~0.5 GB of weights through matmuls while the control path handles one sequence.
                 The model span's kernel share is measured by the default profile's torch.profiler
                 window (step 5), not assumed: the case fails if the split cannot tell kernels from glue
    lock         synthetic:tiny + contended_lock: the sampler first takes a lock a hog thread holds
                 60 ms of every 62 ms (injections.HOLD_MS)
    untraced-lock the same contention through a plain `with lock:` no tracer sees, under --profile deep;
                 checked on the samples method (the spans cannot see it, and say so). By construction a
                 sampler call finds the lock held 60/62 of the time and then waits ~60 ms less the rest of its step,
                 against steps of a few ms: lock is the samples split's largest category, and most of
                 the lock-object waits sit in the sampler. Judged on the lock samples' components less
                 their GIL waits: on a busy machine the model's glue can outgrow the sampler over all
                 categories, and its torch calls wait to retake the GIL the hog thread contends for
                 (measured in CI: more lock samples in model_glue than in the sampler). py-spy samples
                 this case at 97 Hz, not deep mode's 29: a quick run lasts a second or two, and a
                 judgment on the 16-40 samples 29 Hz gave it was at the mercy of a few
    allocation   synthetic:tiny + allocation_heavy: every sampler call builds 60,000 small objects in
                 reference cycles, alive until the call ends, so the cyclic GC runs (and finds them
                 still alive) over and over; the pauses must land in allocation, under the sampler
    idle         synthetic:tiny under the `trickle` scenario: a short request every few seconds
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...scenarios.lengths import LengthDist
from ...scenarios.sampling import SamplingSettings
from ...scenarios.spec import ScenarioSpec, load_scenario
from ..session.options import EngineOptions, OptionError

if TYPE_CHECKING:
    from ..rundir.results import RunResult
    from ..rundir.schema import Split
    from ..session.runner import ModelCache
    from .injections import Injections


@dataclass(frozen=True, slots=True)
class Case:
    """One planted bottleneck: what to run, and the verdict category it must produce."""

    name: str
    expected: str  # the verdict's category
    component: str  # the verdict's component: where the planted cost sits
    model: str
    planted: str  # one line: how the bottleneck is made
    scenario: Callable[[bool], ScenarioSpec]  # quick -> the load
    injections: Injections | None = None
    profile: str = "default"
    method: str = "verdict"  # what is checked: the verdict, or "samples" (the samples split's largest shares)
    sampling_rate: int | None = None  # py-spy's rate when the profile's own gives too few samples to judge on


@dataclass(slots=True)
class CaseResult:
    case: Case
    category: str | None
    share: float | None
    component: str | None
    seconds: float
    injections: list[str]
    error: str | None = None
    busy: str | None = (
        None  # the run's health said the machine was busy (profiler.rundir.health), with figures
    )

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.category == self.case.expected
            and self.component == self.case.component
        )

    @property
    def void(self) -> str | None:
        """Why a wrong answer says nothing about the profiler: its run was starved of CPU (None when right, or
        when the machine was not the cause)."""
        return None if self.ok or self.error is not None else self.busy


def _closed_loop(
    name: str, clients: int, requests: int, output: int, sampling: SamplingSettings
) -> ScenarioSpec:
    """A closed-loop load of short prompts and fixed-length outputs (every request costs the same)."""
    return ScenarioSpec(
        name=f"selftest-{name}",
        description=f"selftest case {name}: {clients} closed-loop client(s), {requests} requests of {output} tokens",
        prompt_tokens=LengthDist(dist="uniform", low=16, high=32),
        output_tokens=LengthDist(dist="fixed", value=output),
        mode="closed-loop",
        rate=None,
        clients=clients,
        num_requests=requests,
        warmup_requests=1,
        sampling=sampling,
        seed=0,
    )


TOP_P = SamplingSettings(temperature=1.0, top_p=0.9)
GREEDY = SamplingSettings(temperature=0.0)


def _trickle(quick: bool) -> ScenarioSpec:
    spec = load_scenario("trickle")
    return spec.with_overrides(num_requests=4) if quick else spec


CASES: tuple[Case, ...] = (
    Case(
        "interpreter",
        "interpreter",
        "sampler",
        "synthetic:tiny",
        "injection slow_sampler x4: after each top-p sampler call, pure Python spins three times as long",
        lambda quick: _closed_loop("interpreter", 32, 32 if quick else 96, 16 if quick else 32, TOP_P),
        injections={"slow_sampler": 4.0},
    ),
    Case(
        "kernel",
        "kernel",
        "model_kernels",
        "synthetic:base",
        "a 30-layer model at concurrency 1, greedy: matmuls over ~0.5 GB of weights per step",
        lambda quick: _closed_loop("kernel", 1, 1 if quick else 3, 12 if quick else 32, GREEDY),
    ),
    Case(
        "lock",
        "lock",
        "sampler",
        "synthetic:tiny",
        "injection contended_lock: the sampler waits for a lock a hog thread holds 60 of every 62 ms",
        lambda quick: _closed_loop("lock", 4, 8 if quick else 16, 12 if quick else 24, GREEDY),
        injections={"contended_lock": True},
    ),
    Case(
        "untraced-lock",
        "lock",
        "sampler",
        "synthetic:tiny",
        "injection untraced_lock: the sampler waits on a plain threading.Lock (no tracer) a hog holds 60 of every 62 ms",
        lambda quick: _closed_loop("untraced-lock", 4, 8 if quick else 16, 12 if quick else 24, GREEDY),
        injections={"untraced_lock": True},
        profile="deep",
        method="samples",
        sampling_rate=97,
    ),
    Case(
        "allocation",
        "allocation",
        "sampler",
        "synthetic:tiny",
        "injection allocation_heavy: each sampler call builds 60,000 objects in reference cycles (GC pauses)",
        lambda quick: _closed_loop("allocation", 4, 4 if quick else 12, 12 if quick else 24, GREEDY),
        injections={"allocation_heavy": True},
    ),
    Case(
        "idle",
        "idle",
        "queue",
        "synthetic:tiny",
        "the trickle scenario: a short request every ~2 s, served in a fraction of a second",
        _trickle,
    ),
)


def select_cases(only: str | None) -> list[Case]:
    """The cases named in a comma list (all when None); an unknown name is the user's error."""
    if not only:
        return list(CASES)
    names = [name.strip() for name in only.split(",") if name.strip()]
    known = {case.name: case for case in CASES}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise OptionError(
            f"--only {only!r}: unknown case {unknown[0] if unknown else ''!r}; use a comma list of {', '.join(known)}"
        )
    return [known[name] for name in names]


def run_case(case: Case, *, quick: bool, out_dir: Path, models: ModelCache | None = None) -> CaseResult:
    """Run one case and read its verdict; an exception is recorded as the case's error, not raised."""
    from ..analysis.breakdown import KERNEL_WINDOWS
    from ..session.runner import ModelCache
    from ..session.session import run_session

    models = models or ModelCache()
    options = EngineOptions(model=case.model, seed=0, device="cpu")  # the plants are timed on the CPU
    started = time.perf_counter()
    try:
        loaded = models.get(options)
        spec = case.scenario(quick)
        outcome = run_session(
            options,
            spec,
            out_dir / case.name,
            loaded=loaded,
            profile=case.profile,
            injections=case.injections,
            sampling_rate=case.sampling_rate,
        )
    except Exception as exc:  # one broken case must not hide the others' answers
        return CaseResult(
            case, None, None, None, time.perf_counter() - started, [], f"{type(exc).__name__}: {exc}"
        )
    category, share, component = _answer(case, outcome.result)
    source = (((outcome.result.breakdown or {}).get("methods") or {}).get("spans") or {}).get("kernel_source")
    if case.expected == "kernel" and source != KERNEL_WINDOWS:
        # A kernel verdict resting on an assumed split would pass by the assumption it should test.
        return CaseResult(
            case,
            category,
            share,
            component,
            time.perf_counter() - started,
            [],
            f"the model span's kernel share was not measured (source: {source or 'none'})",
        )
    return CaseResult(
        case,
        category,
        share,
        component,
        time.perf_counter() - started,
        list(outcome.result.config.get("injections", [])),
        busy=_busy(outcome.result),
    )


def _busy(result: RunResult) -> str | None:
    """The run's void reason when the machine was busy; a saturated engine is by design in some cases (idle, lock)."""
    from ..rundir.health import VOID_BUSY, void_reason

    health = result.health
    return void_reason(health) if health and health.get("void") == VOID_BUSY else None


def _answer(case: Case, result: RunResult) -> tuple[str | None, float | None, str | None]:
    """(category, share, component) the case is judged on: the verdict's, or the samples split's largest."""
    if case.method != "samples":
        verdict = result.verdict or {}
        return verdict.get("category"), verdict.get("share"), verdict.get("component")
    samples: Split = ((result.breakdown or {}).get("methods") or {}).get("samples") or {}
    categories = {
        name: value for name, value in (samples.get("categories") or {}).items() if value is not None
    }
    components = {
        name: value for name, value in (samples.get("components") or {}).items() if value is not None
    }
    if not categories:
        return None, None, None
    category = max(categories, key=lambda name: categories[name])
    # Where the largest category's time sits, when the split says (lock: the component whose samples waited
    # on a lock object, GIL waits aside); a busy machine can make another component larger over all
    # categories, or wait longer for the GIL, without moving the planted cost.
    where = {
        name: value
        for name, value in (_by_component(samples, category) or components).items()
        if value is not None  # the samples split writes none (breakdown._shares); the spans' may
    }
    if category == "lock":
        for name, gil in (samples.get("gil_by_component") or {}).items():
            if gil is not None:
                where[name] = where.get(name, 0.0) - gil
    return category, categories[category], max(where, key=lambda name: where[name]) if where else None


def _by_component(split: Split, category: str) -> dict[str, float | None] | None:
    """The split's `{category}_by_component` entry, None for a category that has none."""
    if category == "lock":
        return split.get("lock_by_component")
    if category == "gil":
        return split.get("gil_by_component")
    if category == "allocation":
        return split.get("allocation_by_component")
    return None


def run_selftest(
    quick: bool = False,
    only: str | None = None,
    out_dir: Path | None = None,
    on_case: Callable[[Case], None] | None = None,
) -> list[CaseResult]:
    """Run the selected cases (on_case is told which one starts) and return their results, in order."""
    from ..session.runner import ModelCache

    cases = select_cases(only)
    models = ModelCache()
    results = []
    with tempfile.TemporaryDirectory(prefix="infer-prof-selftest-") as scratch:
        root = out_dir or Path(scratch)
        for case in cases:
            if on_case:
                on_case(case)
            results.append(run_case(case, quick=quick, out_dir=root, models=models))
    return results


__all__ = ["CASES", "Case", "CaseResult", "run_case", "run_selftest", "select_cases"]
