"""Split the engine thread's wall time into categories and components, by spans and by samples, and compare.

Both methods describe the engine thread (named "infer-prof-engine") over the run's wall time W;
every number in a SPLIT is a fraction of W.

How each category is computed
-----------------------------
                 spans (exact times, a model for kernel)          samples (py-spy stack counts / all samples)
  interpreter    self time of every span (step loop, scheduler,    innermost frame is a Python frame or the
                 sampler, model...) minus its kernel part; the     eval loop; torch dispatch frames counted
                 spans' own lock waits and GC pauses are children  here too (also reported as `dispatch`)
                 and so not in it. Includes torch's per-op fee
                 (`dispatch`: view/creation ops, the fee priced
                 on every other op; see collectors.kernels)
  kernel         per span s: self(s) x k(s), k(s) = (op self     innermost frame in torch kernels, BLAS,
                 time - fee + CUDA runtime calls) / self(s),       OpenMP, oneDNN, CUDA runtime
                 in torch.profiler windows spread over the run,
                 each applied to the steps nearest to it (syncs
                 wait for the GPU); the
                 windows' slowdown is reported, not divided out;
                 clamped to [0, 1]. Without windows:
                 the native samples' model_kernels / model ratio,
                 else the whole model span (an assumption, noted)
  lock           waits inside tracer.lock(): asking -> getting     any lock wait, whichever file takes it:
                 (only those: an untraced lock's wait is its        threading/queue waits, a lock object's
                 span's time; the split says so, `locks_seen`)      C method, futex/mutex/condvar/semaphore,
                                                                   take_gil (needs --native for C-level ones)
  allocation     GC pauses (gc.callbacks) on the engine thread     malloc/free/PyObject_Malloc/GC frames
  idle           engine-thread time outside every span (the loop   a wait inside the engine's `_wait_for_work`,
                 waiting for work), minus GC, lock waits and       sleeps, select/poll
                 profiler pauses that happened there
  waiting        0 (the engine thread is nobody's client)          a client or load-generator thread waiting
                                                                   for the engine (its next token, its result)
  other          spans of components running native (C twins),     native control code of the twins,
                 and time the kernel window's start/stop paused     frames with nothing decisive
                 the engine between steps
Spans categories add up to W exactly. Without --native, samples cannot tell a Python line from the
native call it makes, so interpreter/kernel/allocation/dispatch are null there (`python_leaf` gives
the share whose innermost frame was Python: an upper bound on interpreter).

Components: spans give them exactly (a span's self time + its lock waits + its GC pauses; the model
span is split into model_kernels and model_glue with the kernel model above; kv_alloc bookkeeping is
a component, not a category). Samples give them from the innermost Python frame (profiler.analysis.classify).

`disagreement` is samples minus spans in percentage points, per category both methods resolve;
`beyond_noise` names those where the spans share lies outside the samples share's Wilson interval
(profiler.stats), the only disagreements worth a word. The evidence travels with the split: the
samples split's `samples` (engine-thread stacks) and the spans split's `spans` and `steps`.
`client_threads` is the samples split of every other thread of the process, pooled.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

from ...engine.engine import ENGINE_THREAD_NAME
from ..collectors.spans import OUTSIDE
from ..rundir.results import CATEGORIES, COMPONENTS, LEGACY_SPAN_NAMES
from ..rundir.schema import Breakdown, Split
from ..stats import wilson_interval
from .sample_counts import SampleCounts, from_thread_counts, pool_counts

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from ..collectors.base import CollectorResult
    from ..collectors.gc import GcResult
    from ..collectors.kernels import KernelResult, KernelWindow, SpanSplit, SpanTime
    from ..collectors.registry import CollectorResults
    from ..collectors.sampling import SamplingResult
    from ..collectors.spans import LockTotals, PauseTotals, SpanResult, SpanThread

    ResultT = TypeVar("ResultT", bound=CollectorResult)

# A steps row: the tracer's (collectors.spans.StepRow) or steps.csv's, {step, <span>_ms...}, numbers or null.
StepsRow = Mapping[str, float | None]

# Engine span names (engine.trace.SPAN_NAMES) -> breakdown components; "step" is the loop itself. Runs recorded
# before the spans took their components' names called two of them "tokenize" and "detokenize" (LEGACY_SPAN_NAMES).
SPAN_COMPONENTS = {
    "scheduler": "scheduler",
    "sampler": "sampler",
    "kv_alloc": "kv_alloc",
    "prepare": "prepare",
    "tokenizer": "tokenizer",
    "detokenizer": "detokenizer",
    **LEGACY_SPAN_NAMES,
    "queue": "queue",
    "model": "model",
    "d2h": "d2h",  # a GPU model's logits copied to the host for a sampler that reads host memory
    "api": "api",  # infer-prof serve's HTTP layer: its hand-off runs on the engine thread too
}
# Threads the profiler itself runs in the process: not the engine's clients.
PROFILER_THREADS = frozenset({"infer-prof-nvml"})
# Lock waits samples see beyond the spans' traced locks, in points, worth a note (GIL waits).
UNSEEN_WAIT_PP = 3.0
# The spans method's blind spot, said in every split it makes.
LOCK_SCOPE = (
    "spans see only locks taken through tracer.lock(): a wait on any other lock (a plain threading.Lock, a "
    "Condition, a queue, a C mutex) counts as the time of the span it happens in"
)
# A samples split resolves interpreter vs kernel only when most of its stacks carry native frames.
NATIVE_RESOLUTION_MIN = 0.5


def _ok(result: ResultT | None) -> TypeIs[ResultT]:
    return bool(result) and result is not None and result.get("status") == "ok"


def _fractions(values: Mapping[str, float | None], wall: float) -> dict[str, float | None]:
    return {key: (value / wall if value is not None and wall > 0 else None) for key, value in values.items()}


def _window_steps(kernels: KernelResult) -> set[int]:
    return {
        window["first_step"] + offset
        for window in kernels.get("windows", [])
        for offset in range(window["steps"])
    }


def step_index(row: StepsRow) -> int:
    """The row's step index (a step row's values are numbers or None: its step is always set)."""
    step = row["step"]
    assert step is not None
    return int(step)


def _self_ns_in(steps: Sequence[StepsRow], span: str, chosen: set[int]) -> float:
    column = f"{span}_ms"
    return sum(row.get(column) or 0.0 for row in steps if row["step"] in chosen) * 1e6


def _samples_model_fraction(samples_engine: Split | None) -> float | None:
    if not samples_engine or samples_engine.get("resolution") != "native":
        return None
    components = samples_engine.get("components", {})
    kernel = components.get("model_kernels") or 0.0
    glue = components.get("model_glue") or 0.0
    return kernel / (kernel + glue) if kernel + glue > 0 else None


def _window_inflation(steps: Sequence[StepsRow], span: str, kernels: KernelResult, inside: set[int]) -> float:
    """How much the profiler windows (`inside`: their steps) slowed `span`: its mean self time per step
    inside the windows over the same mean in the steps just before each window (>= 1; 1 when there is
    nothing to compare)."""
    before = {
        window["first_step"] - offset
        for window in kernels.get("windows", [])
        for offset in range(1, window["steps"] + 1)
    } - inside
    column = f"{span}_ms"
    inside_rows = [row.get(column) or 0.0 for row in steps if row["step"] in inside]
    before_rows = [row.get(column) or 0.0 for row in steps if row["step"] in before]
    if not inside_rows or not before_rows or sum(before_rows) <= 0:
        return 1.0
    return max(1.0, (sum(inside_rows) / len(inside_rows)) / (sum(before_rows) / len(before_rows)))


def _split(entry: SpanSplit | SpanTime, self_ns: float) -> tuple[float, float]:
    """(kernel, fee) fractions of a span's self time from its op times in the same steps.

    The raw ratio, uncorrected for the windows' slowdown: scaling by it assumed the profiler's cost
    fell on the Python side only, and overshot the native samples by 30+ points on a control-bound
    run; the raw ratio agreed within a few."""
    fee_ns = min(entry.get("fee_ns", 0.0), entry["aten_self_ns"])
    kernel = min(1.0, max(0.0, (entry["aten_self_ns"] - fee_ns + entry.get("runtime_ns", 0.0)) / self_ns))
    return kernel, min(1.0 - kernel, max(0.0, fee_ns / self_ns))


def _follow_windows(
    rows: Sequence[StepsRow], span: str, windows: Sequence[KernelWindow]
) -> tuple[float, float] | None:
    """(kernel, fee) fractions of `span` over the whole run: each window's own split applied to the
    steps nearest to it, weighted by the span's time in those steps (a run's phases differ: ramp-up,
    steady state, drain). None when the windows carry no split of their own."""
    column = f"{span}_ms"
    by_step = {step_index(row): (row.get(column) or 0.0) * 1e6 for row in rows}
    usable = []
    for window in windows:
        entry = window.get("by_span", {}).get(span)
        first, count = window["first_step"], window["steps"]
        self_ns = sum(by_step.get(step, 0.0) for step in range(first, first + count))
        if entry is not None and self_ns > 0:
            usable.append((first + (count - 1) / 2, _split(entry, self_ns)))
    if not usable:
        return None
    usable.sort(key=lambda item: item[0])
    # Steps past the midpoint between two window centres belong to the later window.
    bounds = [(left[0] + right[0]) / 2 for left, right in zip(usable, usable[1:])]
    weight = [0.0] * len(usable)
    for step, self_ns in by_step.items():
        weight[bisect.bisect_left(bounds, step)] += self_ns
    total = sum(weight)
    if total <= 0:
        return None
    kernel = sum(w * split[0] for w, (_, split) in zip(weight, usable)) / total
    fee = sum(w * split[1] for w, (_, split) in zip(weight, usable)) / total
    return kernel, fee


KERNEL_WINDOWS, KERNEL_SAMPLES, KERNEL_ASSUMED = "profiler windows", "native samples", "assumed"


class SpanFractions(NamedTuple):
    """Per span name, the fractions of its self time spent in torch kernels and in torch's fee."""

    kernel: dict[str, float]
    fee: dict[str, float]
    # Where the kernel share came from: KERNEL_WINDOWS and KERNEL_SAMPLES are measurements of this run;
    # KERNEL_ASSUMED (no window ran, no native samples) is not, and the reports say so.
    source: str


def _windows_fractions(
    rows: Sequence[StepsRow],
    kernels: KernelResult,
    profiled: set[int],
    samples_fraction: float | None,
    notes: list[str],
) -> SpanFractions:
    """Per span, its kernel and fee fractions from the torch.profiler windows (`profiled`: their steps), each window
    applied to the steps nearest it; the notes say what each window measured and how much slower it ran."""
    kernel: dict[str, float] = {}
    fee: dict[str, float] = {}
    described = []
    for span, entry in kernels["by_span"].items():
        if span == OUTSIDE:
            continue
        window_self = _self_ns_in(rows, span, profiled)
        if window_self <= 0:
            continue
        kernel[span], fee[span] = _follow_windows(rows, span, kernels.get("windows", [])) or _split(
            entry, window_self
        )
        inflation = _window_inflation(rows, span, kernels, profiled)
        described.append(
            f"{span} {kernel[span]:.0%} kernel + {fee[span]:.0%} fee (windows x{inflation:.2f} slower than "
            "the steps before)"
        )
    windows = kernels.get("windows", [])
    fee_each = kernels.get("op_fee_ns")
    source = kernels.get("fee_source", "the windows")
    priced = (
        f"others their fee priced by the {source} ({fee_each / 1e3:.2f} us generic)"
        if fee_each
        else "others not priced"
    )
    notes.append(
        f"kernel time per span from torch.profiler over {len(profiled)} steps in {len(windows)} windows "
        f"(steps {windows[0]['first_step']}..{windows[-1]['first_step'] + windows[-1]['steps'] - 1}): op self "
        f"time minus the framework fee (view/creation ops whole, {priced}) / span self time: "
        + ", ".join(sorted(described))
    )
    if samples_fraction is not None and "model" in kernel:
        notes.append(
            f"native samples put {samples_fraction:.0%} of the model span in kernels "
            f"(torch.profiler: {kernel['model']:.0%})"
        )
    # Results without a priced fee (older runs, hand-made tests) say nothing about dispatch.
    return SpanFractions(kernel, fee if "op_fee_ns" in kernels else {}, KERNEL_WINDOWS)


def kernel_fractions(
    rows: Sequence[StepsRow],
    kernels: KernelResult | None,
    samples_engine: Split | None,
    notes: list[str],
) -> SpanFractions:
    """Per span name, the fraction of its self time spent in torch kernels (the kernel model above), and
    the fraction that is torch's per-op fee (inside ops but not compute: counted as interpreter).

    Each window's ratios apply to the steps nearest to it (pooled over all windows when they carry no
    split of their own), as measured; how much slower the windows ran than the steps before them is
    reported in the notes, not divided out.
    """
    samples_fraction = _samples_model_fraction(samples_engine)
    profiled = _window_steps(kernels) if _ok(kernels) else set()
    if _ok(kernels) and kernels.get("by_span") and profiled:
        return _windows_fractions(rows, kernels, profiled, samples_fraction, notes)
    if samples_fraction is not None:
        notes.append(
            f"no kernel window: the model span's kernel share ({samples_fraction:.0%}) comes from native "
            "stack samples"
        )
        return SpanFractions({"model": samples_fraction}, {}, KERNEL_SAMPLES)
    notes.append(
        "no kernel window and no native samples: the whole model span is counted as kernel time, so "
        "interpreter time is a lower bound (model glue unseen)"
    )
    return SpanFractions({"model": 1.0}, {}, KERNEL_ASSUMED)


class SpanTimes(NamedTuple):
    """The engine thread's spans as the spans split counts them, in ns: each span's self time, and the lock waits and
    pauses summed by the span they happened inside (OUTSIDE: between spans)."""

    self_ns: dict[str, float]
    lock_by_parent: dict[str, float]
    pause_by_parent: dict[str, float]


def spans_split(
    spans: SpanResult,
    *,
    engine_thread_name: str,
    wall_ns: int,
    kernels: KernelResult | None,
    gc: GcResult | None,
    samples_engine: Split | None,
    native_components: Iterable[str],
    notes: list[str],
) -> Split | None:
    """The spans SPLIT of the engine thread (see the module docstring), or None without its spans."""
    thread = spans.get("threads", {}).get(engine_thread_name)
    if thread is None:
        notes.append(f"no spans were recorded on a thread named {engine_thread_name!r}")
        return None
    wall = float(wall_ns)
    times = _span_times(thread, gc, engine_thread_name, notes)
    engine_pause = float(kernels.get("overhead", {}).get("engine_pause_ns", 0) or 0) if _ok(kernels) else 0.0
    fractions = kernel_fractions(spans.get("steps", []), kernels, samples_engine, notes)
    native = {span for span, component in SPAN_COMPONENTS.items() if component in set(native_components)}
    kernel_ns = _python_spans_part(times.self_ns, fractions.kernel, native)
    fee_ns = _python_spans_part(times.self_ns, fractions.fee, native)
    covered = float(thread["covered_ns"])
    categories = _span_categories(times, kernel_ns, native, max(0.0, wall - covered), engine_pause)
    notes.append(
        LOCK_SCOPE + (f" (traced here: {', '.join(sorted(thread['locks']))})" if thread["locks"] else "")
    )
    components, lock_by_component, allocation_by_component = _components(
        times.self_ns, kernel_ns, times.lock_by_parent, times.pause_by_parent
    )
    if covered > wall * 1.001:
        notes.append(
            f"spans cover {covered / 1e9:.3f} s, more than the run's wall time {wall / 1e9:.3f} s: "
            "pass the window the tracer recorded"
        )
    kernel_fraction_by_span: dict[str, float | None] = dict(fractions.kernel)
    fee_fraction_by_span: dict[str, float | None] = dict(fractions.fee)
    return {
        "categories": _fractions(categories, wall),
        "components": _fractions(components, wall),
        # Only the fee inside ops: argument parsing on the Python side is in interpreter, not separable.
        "dispatch": sum(fee_ns.values()) / wall if fractions.fee and wall > 0 else None,
        "lock_by_component": _fractions(lock_by_component, wall),
        "allocation_by_component": _fractions(allocation_by_component, wall),
        "kernel_fraction_by_span": kernel_fraction_by_span,
        "kernel_source": fractions.source,
        "fee_fraction_by_span": fee_fraction_by_span,
        "steps": len(spans.get("steps", [])),
        "spans": sum(
            int(entry.get("count", 0)) for entry in thread["spans"].values()
        ),  # the evidence: spans timed
        # What `lock` can hold: waits on locks taken through tracer.lock() alone (see LOCK_SCOPE).
        "locks_seen": "traced",
        "traced_locks": sorted(thread["locks"]),
    }


def _span_times(
    thread: SpanThread, gc: GcResult | None, engine_thread_name: str, notes: list[str]
) -> SpanTimes:
    """The thread's span self times, lock waits and pauses; GC the gc collector timed on the thread but the tracer
    was not told of is taken out of the step loop's self time (noted)."""
    self_ns = {name: float(entry["self_ns"]) for name, entry in thread["spans"].items()}
    lock_by_parent = _by_parent(thread["locks"])
    pause_by_parent = _by_parent(thread["pauses"])
    if not thread["pauses"] and _ok(gc):
        # GC was timed but not reported to the tracer: assume it interrupted Python code (interpreter).
        engine_gc_thread = gc.get("by_thread", {}).get(engine_thread_name)
        engine_gc = engine_gc_thread.get("total_ns", 0) if engine_gc_thread else 0
        if engine_gc:
            pause_by_parent["step"] = float(engine_gc)
            self_ns["step"] = self_ns.get("step", 0.0) - engine_gc
            notes.append("GC pauses were not attributed to spans; they are taken out of the step loop's time")
    return SpanTimes(self_ns, lock_by_parent, pause_by_parent)


def _python_spans_part(
    self_ns: dict[str, float], fraction: dict[str, float], native: set[str]
) -> dict[str, float]:
    """Each span's self time times its fraction (of kernel, or of fee), the spans of C twins left out."""
    return {name: value * fraction.get(name, 0.0) for name, value in self_ns.items() if name not in native}


def _span_categories(
    times: SpanTimes, kernel_ns: dict[str, float], native: set[str], outside: float, engine_pause: float
) -> dict[str, float]:
    """The engine thread's time by category, in ns (the module docstring's table): `outside` is the time outside
    every span, `engine_pause` the kernel windows' pauses of the engine between steps."""
    self_ns, lock_by_parent, pause_by_parent = times
    idle = max(
        0.0, outside - pause_by_parent.get(OUTSIDE, 0.0) - lock_by_parent.get(OUTSIDE, 0.0) - engine_pause
    )
    return {
        "interpreter": sum(
            value - kernel_ns.get(name, 0.0) for name, value in self_ns.items() if name not in native
        ),
        "lock": sum(lock_by_parent.values()),
        "allocation": sum(pause_by_parent.values()),
        "kernel": sum(kernel_ns.values()),
        "idle": idle,
        "waiting": 0.0,  # the engine thread is no client: it never waits for its own tokens
        "other": sum(self_ns.get(name, 0.0) for name in native) + engine_pause,
    }


def _by_parent(entries: Mapping[str, LockTotals] | Mapping[str, PauseTotals]) -> dict[str, float]:
    """Lock waits or pauses summed by the span they happened inside (OUTSIDE: between spans)."""
    totals: dict[str, float] = {}
    for entry in entries.values():
        for parent, duration in entry["by_parent"].items():
            totals[parent] = totals.get(parent, 0.0) + duration
    return totals


def _components(
    self_ns: dict[str, float],
    kernel_ns: dict[str, float],
    lock_by_parent: dict[str, float],
    pause_by_parent: dict[str, float],
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per component: its spans' self time plus the lock waits and pauses inside them (the model span
    split into kernels and glue), and the lock waits and pauses alone, each in ns."""

    def attributed(span: str) -> float:
        return self_ns.get(span, 0.0) + lock_by_parent.get(span, 0.0) + pause_by_parent.get(span, 0.0)

    components: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
    lock_by_component: dict[str, float] = {}
    allocation_by_component: dict[str, float] = {}
    for span, component in SPAN_COMPONENTS.items():
        if component == "model":
            components["model_kernels"] = kernel_ns.get("model", 0.0)
            components["model_glue"] = attributed("model") - components["model_kernels"]
            component = "model_glue"  # waits and pauses inside the model span are glue-side
        else:
            components[component] += attributed(span)
        if lock_by_parent.get(span):
            lock_by_component[component] = lock_by_component.get(component, 0.0) + lock_by_parent[span]
        if pause_by_parent.get(span):
            allocation_by_component[component] = (
                allocation_by_component.get(component, 0.0) + pause_by_parent[span]
            )
    return components, lock_by_component, allocation_by_component


SplitTable = Literal["categories", "components"]  # the two share tables of a Split the methods compare


def _shares(counts: Mapping[str, float] | None, total: float) -> dict[str, float | None]:
    return {name: count / total for name, count in (counts or {}).items() if count and name in COMPONENTS}


def samples_split(counts: SampleCounts | None) -> Split | None:
    """A SPLIT from pooled sample counts; categories a Python-only sample cannot resolve are null."""
    if not counts:
        return None
    total = counts["samples"]
    resolution = "native" if counts["native_samples"] >= NATIVE_RESOLUTION_MIN * total else "python"
    categories: dict[str, float | None] = {
        name: counts["categories"].get(name, 0) / total for name in CATEGORIES
    }
    components: dict[str, float | None] = {
        name: counts["components"].get(name, 0) / total for name in COMPONENTS
    }
    split: Split = {"samples": int(total), "resolution": resolution}  # whole samples (a pool's are floats)
    if resolution == "python":
        split["python_leaf"] = categories["interpreter"]
        for name in ("interpreter", "kernel", "allocation"):
            categories[name] = None
        components["model"] = (components.pop("model_glue") or 0.0) + (components.pop("model_kernels") or 0.0)
        components["model_glue"] = components["model_kernels"] = None
    split["categories"] = categories
    split["components"] = components
    split["lock_by_component"] = _shares(counts.get("lock_components"), total)
    # GIL waits (part of lock) are seen only in native stacks: a Python-only sample shows the line that waits.
    split["gil_by_component"] = (
        _shares(counts.get("gil_components"), total) if resolution == "native" else None
    )
    split["dispatch"] = counts["dispatch"] / total if resolution == "native" else None
    return split


def _difference_pp(samples: Split | None, spans: Split | None, key: SplitTable) -> dict[str, float | None]:
    if not samples or not spans:
        return {}
    out: dict[str, float | None] = {}
    for name, value in samples[key].items():
        other = spans[key].get(name)
        if value is not None and other is not None:
            out[name] = round((value - other) * 100, 2)
    return out


def _beyond_noise(samples: Split | None, spans: Split | None, key: SplitTable) -> list[str]:
    """Names whose spans share (exact) lies outside the samples share's Wilson interval (its sampling noise)."""
    if not samples or not spans or not samples.get("samples"):
        return []
    total = samples["samples"]
    out = []
    for name, value in samples[key].items():
        other = spans[key].get(name)
        if (
            value is not None
            and other is not None
            and wilson_interval(round(value * total), total).excludes(other)
        ):
            out.append(name)
    return sorted(out)


def _sampled_counts(
    sampling: SamplingResult | None, engine_thread_name: str, notes: list[str]
) -> tuple[SampleCounts | None, SampleCounts | None]:
    """The engine thread's sample counts (its name's, or its native id's threads pooled) and every other thread's
    but the profiler's own, pooled; (None, None) when py-spy did not sample."""
    if not _ok(sampling):
        return None, None
    threads = sampling.get("threads", {})
    engine_id = sampling.get("engine_thread_id")
    engine_names = {
        name
        for name, data in threads.items()
        if name == engine_thread_name or (engine_id is not None and engine_id in data["thread_ids"])
    }
    engine_counts = pool_counts(
        from_thread_counts(data) for name, data in threads.items() if name in engine_names
    )
    client_counts = pool_counts(
        from_thread_counts(data)
        for name, data in threads.items()
        if name not in engine_names and name not in PROFILER_THREADS
    )
    if engine_counts is None:
        notes.append(f"py-spy saw no thread named {engine_thread_name!r}")
    if sampling.get("native_stacks") and sampling.get("scheduling") == "normal":
        notes.append(
            "py-spy could not run under SCHED_FIFO (needs root or CAP_SYS_NICE): with every core busy its "
            "samples can wait for a core and land after parallel kernels end (on a 2-core decode loop, "
            "4.4 points fewer in the linears than direct timing, 0.5 under SCHED_FIFO; see "
            "profiler.collectors.sampling)"
        )
    return engine_counts, client_counts


def build_breakdown(
    collector_results: CollectorResults,
    *,
    engine_thread_name: str = ENGINE_THREAD_NAME,
    wall_ns: int,
    native_components: Iterable[str] = (),
) -> Breakdown:
    """The result's `breakdown` section from {collector name: collector result} (see the module docstring).

    wall_ns: the engine thread's observed wall time (normally the spans tracer's recorded window).
    native_components: components running as C twins in this run (their spans count as "other").
    """
    notes: list[str] = []
    engine_counts, client_counts = _sampled_counts(
        collector_results.get("sampling"), engine_thread_name, notes
    )
    samples = samples_split(engine_counts)
    spans_result = collector_results.get("spans")
    spans = None
    if _ok(spans_result):
        spans = spans_split(
            spans_result,
            engine_thread_name=engine_thread_name,
            wall_ns=wall_ns,
            kernels=collector_results.get("kernels"),
            gc=collector_results.get("gc"),
            samples_engine=samples,
            native_components=native_components,
            notes=notes,
        )
    disagreement = _difference_pp(samples, spans, "categories")
    beyond_noise = _beyond_noise(samples, spans, "categories")
    if (disagreement.get("lock") or 0.0) >= UNSEEN_WAIT_PP and "lock" in beyond_noise:
        notes.append(
            f"samples saw the engine thread waiting {disagreement['lock']:.1f} points more than its traced locks "
            "account for (mostly the GIL, taken back after each torch call): the spans method cannot see those "
            "waits and counts them in the span they happen in, mostly as interpreter"
        )
    return {
        "wall_s": wall_ns / 1e9,
        "methods": {"spans": spans, "samples": samples},
        "disagreement": disagreement,
        "component_disagreement": _difference_pp(samples, spans, "components"),
        # Categories and components whose spans share lies outside the samples' Wilson interval: only
        # these disagree beyond sampling noise (2 samples put any share within [0, 0.66] or so).
        "beyond_noise": beyond_noise,
        "components_beyond_noise": _beyond_noise(samples, spans, "components"),
        "client_threads": samples_split(client_counts),
        "notes": notes,
    }
