"""The sentences of another engine's verdict, worded from its figures (profiler.analysis.foreign_figures)."""

from __future__ import annotations

from collections.abc import Sequence

from ..rundir.schema import ForeignProcess, ProbeSlowdown
from .diagnose import (
    REWRITE_FROM,
    RULE_REWRITE,
    RULE_STAY,
    RULE_TARGETED,
    STAY_UP_TO,
)
from .foreign_figures import ApiFigures, LoopFigures, WaitCounts
from .sensitivity import unresolved

COMPONENT_WORDS = {
    "none": "the loop's other code",
    "model_glue": "model glue (Python around the kernels)",
    "kv_alloc": "KV allocation",
    "api": "API handling",
    "model_kernels": "model kernels",
}
BOUND_ONLY = "bound only (Amdahl)"
PYTHON_ONLY_SPOT = (
    "py-spy ran without --native: the interpreter share is bounded, not measured, and GIL waits are "
    "unseen (sample with native stacks: --profile deep, or a default profile where py-spy may pause "
    "the process)"
)
AMDAHL_NOTE = "bounds at an infinite speedup (no C twin exists for this engine to verify them)"


def component_words(component: str) -> str:
    """A component's name as a sentence says it."""
    if component.startswith("worker:"):
        return "the model worker's " + component_words(component[len("worker:") :])
    return COMPONENT_WORDS.get(component, component)


def bound_only(engine: str) -> str:
    """How a bound's line ends: what it is, and why nothing checked it."""
    return f"{BOUND_ONLY}: {engine} has no C twin here, and no slowdown measured it (--what-if would)."


def slowdown_measured(entry: ProbeSlowdown) -> str:
    """How a line measured by a slowdown says so: its sensitivity with its interval, and the gain it predicts."""
    why = unresolved(entry.get("low"), entry.get("high"), entry.get("pairs", 0))
    words = f"{'slowdown unresolved' if why else 'slowdown-measured'} (sensitivity {entry['sensitivity']:.2f}"
    if entry.get("low") is not None and entry.get("high") is not None:
        words += f" [{entry['low']:.2f}, {entry['high']:.2f}]"
    words += ")"
    gain = entry.get("gain")
    if gain is not None:
        interval = (
            f" [{gain['low']:.1%}, {gain['high']:.1%}]"
            if gain.get("low") is not None and gain.get("high") is not None
            else ""
        )
        words += f": {gain['speedup']:g}x faster, it would save {gain['gain']:.1%}{interval} of the " + (
            "step" if entry.get("path") == "step" else f"time per {entry.get('units', 'steps')[:-1]}"
        )
    if entry.get("linear") is False:
        words += " (its levels disagree: a curve, so this holds near the levels tried)"
    if why is not None:
        words += f"; {why}"
    return words + "."


def loop_words(role: str) -> str:
    """What the verdict calls the thread it reads, by its process's role."""
    if role == "engine loop":
        return "engine loop"
    if role == "model worker":
        return "thread running the model (no table names an engine loop in the sampled processes)"
    return "busiest thread (can't tell which is the engine)"


def no_loop_reason(processes: Sequence[ForeignProcess]) -> str:
    """Why there is no verdict when no process holds an engine loop or a model worker."""
    roles = "; ".join(f"pid {p['pid']}: {p['role_words']}" for p in processes) or "no samples"
    return (
        f"No engine loop or model worker was found in the sampled processes ({roles}): "
        "no verdict. Sample the engine's process (--pid), or all of the server's."
    )


def idle_loop_reason(role: str, pid: int | None) -> str:
    """Why there is no verdict when the engine loop only waited for work."""
    return (
        f"The {loop_words(role)} in pid {pid} only waited for work while sampled: "
        "no verdict; send load while it is sampled."
    )


def interval_method(figures: LoopFigures) -> str:
    """How the interpreter share's interval was obtained."""
    level = confidence_words(figures.confidence)
    if figures.native:
        return (
            f"Wilson {level} interval of interpreter samples among the {loop_words(figures.role)}'s "
            f"{figures.busy:,} busy samples"
        )
    return (
        "bounds from Python-only stacks: control-code lines (lower) to every Python-innermost sample "
        f"(upper), each with its Wilson {level} interval; native stacks would measure it"
    )


def verdict_reasons(figures: LoopFigures, rule: str, unsure: list[float]) -> list[str]:
    """The verdict's reasons, in order: the share and its rule, the busy time's split, the critical path, the waits,
    the API server, and the largest Amdahl bounds."""
    reasons = [_share_reason(figures, rule, unsure), _split_reason(figures)]
    critical = _critical_path_reason(figures)
    if critical is not None:
        reasons.append(critical)
    reasons.extend(waits_sentences(figures.waits))
    if figures.api is not None:
        reasons.append(api_sentence(figures.api))
    reasons.extend(_bound_reasons(figures))
    return reasons


def _share_reason(figures: LoopFigures, rule: str, unsure: list[float]) -> str:
    """The interpreter share with its interval, and the rule it gives."""
    native = figures.native
    engine = f"{figures.engine}, " if figures.engine else ""
    return (
        f"The {loop_words(figures.role)} ({engine}pid {figures.pid}) spends {figures.share:.1%} of its busy time in the Python "
        f"interpreter ({'native stack samples' if native else 'Python-only samples: a bound, not a measurement'}; "
        f"{confidence_words(figures.confidence)} interval [{figures.low:.1%}, {figures.high:.1%}] over {figures.busy:,} busy samples); at about {STAY_UP_TO:.0%} or below the "
        f"rule is '{RULE_STAY}', from {REWRITE_FROM:.0%} '{RULE_REWRITE}', between them '{RULE_TARGETED}', so: {rule}"
        + (
            f" (the interval straddles {' and '.join(f'{t:.0%}' for t in unsure)}: this run cannot tell which side; "
            "sample longer" + ("" if native else ", with native stacks") + ")."
            if unsure
            else "."
        )
    )


def _split_reason(figures: LoopFigures) -> str:
    """The loop's busy time split into interpreter, kernels, the wait on the worker, contention and the rest."""
    busy = figures.busy
    interpreter, kernel, on_worker = figures.interpreter, figures.kernel, figures.on_worker
    lock, gil = figures.lock, figures.gil
    split_words = [
        f"{'interpreter' if figures.native else 'Python-innermost lines'} {interpreter / busy:.0%}"
    ]
    if kernel:
        split_words.append(f"kernels {kernel / busy:.0%}")
    if on_worker:
        split_words.append(f"waiting on the model worker {on_worker / busy:.0%}")
    if lock / busy >= 0.005:
        split_words.append(f"lock contention {lock / busy:.0%}")
    if gil / busy >= 0.005:
        split_words.append(f"GIL waits {gil / busy:.0%}")
    rest = busy - interpreter - kernel - on_worker - lock - gil
    if rest / busy >= 0.005:
        split_words.append(f"other {rest / busy:.0%}")
    return f"Its busy time: {', '.join(split_words)}" + (
        f"; it waited for work {figures.idle / figures.samples:.0%} of its samples (idle, not lock: the offered "
        "load limits it there)."
        if figures.idle
        else "."
    )


def _critical_path_reason(figures: LoopFigures) -> str | None:
    """The step's critical path when the loop waits on its model worker: loop work, the wait, the worker's split."""
    busy, on_worker = figures.busy, figures.on_worker
    if not on_worker:
        return None
    sentence = (
        f"The step's critical path: the loop works {(busy - on_worker) / busy:.0%} of its busy time, "
        f"then waits on the model worker {on_worker / busy:.0%}"
    )
    worker = figures.worker
    if not figures.worker_found:
        sentence += " (the worker's process was not sampled: sample it too for its own split)"
    elif worker is not None and worker.native:
        sentence += (
            f" (the worker, pid {worker.pid}, spends its busy time "
            f"{worker.kernel / worker.busy:.0%} in kernels and "
            f"{worker.interpreter / worker.busy:.0%} in Python)"
        )
    elif worker is not None:
        sentence += (
            f" (the worker, pid {worker.pid}, was sampled without native stacks: its kernels "
            "and its Python cannot be told apart)"
        )
    return sentence + ", then back."


def waits_sentences(waits: WaitCounts) -> list[str]:
    """Which waits the run saw, over every thread, each as a share of the samples that waited."""
    waited = waits.idle + waits.queueing + waits.lock + waits.client
    if not waited:
        return []
    parts = []
    if waits.client:
        parts.append(f"request handlers waiting for their next token {waits.client / waited:.0%}")
    if waits.queueing:
        parts.append(f"requests queueing behind one another for the engine {waits.queueing / waited:.0%}")
    if waits.idle:
        parts.append(f"threads waiting for work (idle) {waits.idle / waited:.0%}")
    if waits.lock / waited >= 0.005:
        parts.append(f"lock contention {waits.lock / waited:.0%}")
    return [
        "Of the samples that waited, in every sampled thread: "
        + ", ".join(parts)
        + "."
        + (
            " Queueing is requests waiting behind a busy engine (one request at a time), not a "
            "thread short of work."
            if waits.queueing
            else " No thread was seen waiting behind another request; a server that queues requests on an "
            "asyncio or anyio lock (llama-cpp-python 0.3 does) makes them wait on its event loop, "
            "where stack samples cannot see them: the client's TTFT shows that wait."
        )
    ]


def api_sentence(api: ApiFigures) -> str:
    """The API server's event loop: how much it worked, and its GIL waits where native stacks show them."""
    return (
        f"The API server's event loop ({api.name}, pid {api.pid}) worked {api.work_share:.1%} of its samples"
        + (
            f", {api.gil_wait:.1%} waiting for the GIL"
            if api.gil_wait is not None
            else " (GIL waits need native stacks)"
        )
        + "."
    )


def _bound_reasons(figures: LoopFigures) -> list[str]:
    """The four largest Amdahl bounds of 1% or more, each said as a bound only."""
    engine = figures.engine or "this engine"
    return [
        f"If {component_words(name)} cost nothing, the {loop_words(figures.role)}'s step would be at most "
        f"{entry.bound:.1%} shorter (Amdahl at an infinite speedup, 95% interval {entry.low:.1%}-{entry.high:.1%}); "
        + bound_only(engine)
        for name, entry in sorted(figures.bounds.items(), key=lambda item: -item[1].bound)[:4]
        if entry.bound >= 0.01
    ]


def confidence_words(confidence: float) -> str:
    """95% as "95%", a later look's 99.17% as "99.2%"."""
    return f"{confidence * 100:.3g}%"
