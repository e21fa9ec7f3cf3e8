"""Split the engine thread's wall time into categories and components, by spans and by samples, and compare.

Both methods describe the engine thread (named "infer-prof-engine") over the run's wall time W;
every number in a SPLIT is a fraction of W.

How each category is computed
-----------------------------
                 spans (exact times, a model for kernel)          samples (py-spy stack counts / all samples)
  interpreter    self time of every span (step loop, scheduler,    innermost frame is a Python frame or the
                 sampler, model...) minus its kernel part; the     eval loop; torch dispatch frames counted
                 spans' own lock waits and GC pauses are children  here too (also reported as `dispatch`)
                 and so not in it
  kernel         per span s: self(s) x torch(s) x r(s) / self(s)  innermost frame in torch kernels, BLAS,
                 in the torch.profiler window; torch(s) = aten     OpenMP, oneDNN, CUDA runtime
                 ops' self time + CUDA runtime calls (syncs wait
                 for the GPU); r(s) = 1 (the window's slowdown is
                 reported, not divided out: see kernel_fractions);
                 clamped to [0, 1].
                 Without the window:
                 the native samples' model_kernels / model ratio,
                 else the whole model span (an assumption, noted)
  lock           waits inside tracer.lock(): asking -> getting     futex/condvar/semaphore waits, take_gil,
                                                                   threading waits (not inside the idle marker)
  allocation     GC pauses (gc.callbacks) on the engine thread     malloc/free/PyObject_Malloc/GC frames
  idle           engine-thread time outside every span (the loop   a wait inside the engine's `_wait_for_work`,
                 waiting for work), minus GC, lock waits and       sleeps, select/poll
                 profiler pauses that happened there
  other          spans of components running native (C twins),     native control code of the twins,
                 and time the kernel window's start/stop paused     frames with nothing decisive
                 the engine between steps
Spans categories add up to W exactly. Without --native, samples cannot tell a Python line from the
native call it makes, so interpreter/kernel/allocation/dispatch are null there (`python_leaf` gives
the share whose innermost frame was Python: an upper bound on interpreter).

Components: spans give them exactly (a span's self time + its lock waits + its GC pauses; the model
span is split into model_kernels and model_glue with the kernel model above; kv_alloc bookkeeping is
a component, not a category). Samples give them from the innermost Python frame (profiler.classify).

`disagreement` is samples minus spans in percentage points, per category both methods resolve.
`client_threads` is the samples split of every other thread of the process, pooled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from profiler.collectors.base import ENGINE_THREAD_NAME
from profiler.collectors.spans import OUTSIDE
from profiler.results import CATEGORIES, COMPONENTS

# Engine span names (engine.trace.SPAN_NAMES) -> breakdown components; "step" is the loop itself.
SPAN_COMPONENTS = {
    "scheduler": "scheduler",
    "sampler": "sampler",
    "kv_alloc": "kv_alloc",
    "tokenize": "tokenizer",
    "detokenize": "detokenizer",
    "queue": "queue",
    "model": "model",
}
# Threads the profiler itself runs in the process: not the engine's clients.
PROFILER_THREADS = frozenset({"infer-prof-nvml"})
# A samples split resolves interpreter vs kernel only when most of its stacks carry native frames.
NATIVE_RESOLUTION_MIN = 0.5


def _ok(result: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    return bool(result) and result is not None and result.get("status") == "ok"


def _fractions(values: Mapping[str, float | None], wall: float) -> dict[str, float | None]:
    return {key: (value / wall if value is not None and wall > 0 else None) for key, value in values.items()}


def _window_self_ns(steps: list[dict[str, Any]], span: str, first: int, count: int) -> float:
    column = f"{span}_ms"
    return sum(row.get(column, 0.0) for row in steps if first <= row["step"] < first + count) * 1e6


def _samples_model_fraction(samples_engine: dict[str, Any] | None) -> float | None:
    if not samples_engine or samples_engine.get("resolution") != "native":
        return None
    components = samples_engine.get("components", {})
    kernel = components.get("model_kernels") or 0.0
    glue = components.get("model_glue") or 0.0
    return kernel / (kernel + glue) if kernel + glue > 0 else None


def _window_inflation(steps: list[dict[str, Any]], span: str, first: int, count: int) -> float:
    """How much the profiler window slowed `span`: its mean self time per step in the window over the
    same mean in the `count` steps just before it (>= 1; 1 when there is nothing to compare)."""
    column = f"{span}_ms"
    inside = [row.get(column, 0.0) for row in steps if first <= row["step"] < first + count]
    before = [row.get(column, 0.0) for row in steps if first - count <= row["step"] < first]
    if not inside or not before or sum(before) <= 0:
        return 1.0
    return max(1.0, (sum(inside) / len(inside)) / (sum(before) / len(before)))


def kernel_fractions(
    spans: dict[str, Any],
    kernels: dict[str, Any] | None,
    samples_engine: dict[str, Any] | None,
    notes: list[str],
) -> dict[str, float]:
    """Per span name, the fraction of its self time spent inside torch (the kernel model above).

    The fraction is torch op self time over span self time inside the window, as measured; how much
    slower the window ran than the steps before it is reported in the notes, not divided out.
    """
    samples_fraction = _samples_model_fraction(samples_engine)
    if _ok(kernels) and kernels.get("by_span") and kernels.get("window", {}).get("steps"):
        window = kernels["window"]
        first, count = window["first_step"], window["steps"]
        rows = spans.get("steps", [])
        fractions: dict[str, float] = {}
        described = []
        for span, entry in kernels["by_span"].items():
            if span == OUTSIDE:
                continue
            window_self = _window_self_ns(rows, span, first, count)
            if window_self <= 0:
                continue
            inside_torch = entry["aten_self_ns"] + entry.get("runtime_ns", 0.0)
            inflation = _window_inflation(rows, span, first, count)
            # The raw ratio, uncorrected: scaling by the window's slowdown assumed the profiler's cost
            # fell on the Python side only, but in deep mode py-spy --native pauses the whole process
            # too and batches ramp between windows, and the "corrected" kernel share overshot the
            # native samples by 30+ points on a control-bound run; the raw ratio agreed within a few.
            fractions[span] = min(1.0, max(0.0, inside_torch / window_self))
            described.append(f"{span} {fractions[span]:.0%} (window x{inflation:.2f} slower than the steps before)")
        notes.append(
            f"kernel time per span from torch.profiler over steps {first}..{first + count - 1}: torch op self "
            f"time / span self time in the window: " + ", ".join(sorted(described))
        )
        if samples_fraction is not None and "model" in fractions:
            notes.append(
                f"native samples put {samples_fraction:.0%} of the model span in kernels "
                f"(torch.profiler: {fractions['model']:.0%})"
            )
        return fractions
    if samples_fraction is not None:
        notes.append(
            f"no kernel window: the model span's kernel share ({samples_fraction:.0%}) comes from native "
            "stack samples"
        )
        return {"model": samples_fraction}
    notes.append(
        "no kernel window and no native samples: the whole model span is counted as kernel time, so "
        "interpreter time is a lower bound (model glue unseen)"
    )
    return {"model": 1.0}


def spans_split(
    spans: dict[str, Any],
    *,
    engine_thread_name: str,
    wall_ns: int,
    kernels: dict[str, Any] | None,
    gc: dict[str, Any] | None,
    samples_engine: dict[str, Any] | None,
    native_components: Iterable[str],
    notes: list[str],
) -> dict[str, Any] | None:
    """The spans SPLIT of the engine thread (see the module docstring), or None without its spans."""
    thread = spans.get("threads", {}).get(engine_thread_name)
    if thread is None:
        notes.append(f"no spans were recorded on a thread named {engine_thread_name!r}")
        return None
    wall = float(wall_ns)
    self_ns = {name: float(entry["self_ns"]) for name, entry in thread["spans"].items()}
    lock_by_parent: dict[str, float] = {}
    for entry in thread["locks"].values():
        for parent, wait in entry["by_parent"].items():
            lock_by_parent[parent] = lock_by_parent.get(parent, 0.0) + wait
    pause_by_parent: dict[str, float] = {}
    for entry in thread["pauses"].values():
        for parent, duration in entry["by_parent"].items():
            pause_by_parent[parent] = pause_by_parent.get(parent, 0.0) + duration
    if not thread["pauses"] and _ok(gc):
        # GC was timed but not reported to the tracer: assume it interrupted Python code (interpreter).
        engine_gc = gc.get("by_thread", {}).get(engine_thread_name, {}).get("total_ns", 0)
        if engine_gc:
            pause_by_parent["step"] = float(engine_gc)
            self_ns["step"] = self_ns.get("step", 0.0) - engine_gc
            notes.append("GC pauses were not attributed to spans; they are taken out of the step loop's time")
    engine_pause = (
        float((kernels or {}).get("overhead", {}).get("engine_pause_ns", 0) or 0) if _ok(kernels) else 0.0
    )

    kernel_fraction = kernel_fractions(spans, kernels, samples_engine, notes)
    native = {span for span, component in SPAN_COMPONENTS.items() if component in set(native_components)}
    kernel_ns = {
        name: value * kernel_fraction.get(name, 0.0) for name, value in self_ns.items() if name not in native
    }
    covered = float(thread["covered_ns"])
    outside = max(0.0, wall - covered)
    idle = max(
        0.0, outside - pause_by_parent.get(OUTSIDE, 0.0) - lock_by_parent.get(OUTSIDE, 0.0) - engine_pause
    )
    categories = {
        "interpreter": sum(
            value - kernel_ns.get(name, 0.0) for name, value in self_ns.items() if name not in native
        ),
        "lock": sum(lock_by_parent.values()),
        "allocation": sum(pause_by_parent.values()),
        "kernel": sum(kernel_ns.values()),
        "idle": idle,
        "other": sum(self_ns.get(name, 0.0) for name in native) + engine_pause,
    }

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
    if covered > wall * 1.001:
        notes.append(
            f"spans cover {covered / 1e9:.3f} s, more than the run's wall time {wall / 1e9:.3f} s: "
            "pass the window the tracer recorded"
        )
    return {
        "categories": _fractions(categories, wall),
        "components": _fractions(components, wall),
        "dispatch": None,
        "lock_by_component": _fractions(lock_by_component, wall),
        "allocation_by_component": _fractions(allocation_by_component, wall),
        "kernel_fraction_by_span": kernel_fraction,
        "steps": len(spans.get("steps", [])),
    }


def _pool(threads: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    pooled: dict[str, Any] = {
        "samples": 0,
        "native_samples": 0,
        "categories": {},
        "components": {},
        "dispatch": 0,
    }
    for thread in threads:
        pooled["samples"] += thread["samples"]
        pooled["native_samples"] += thread.get("native_samples", 0)
        pooled["dispatch"] += thread.get("dispatch", 0)
        for key in ("categories", "components"):
            for name, count in thread[key].items():
                pooled[key][name] = pooled[key].get(name, 0) + count
    return pooled if pooled["samples"] else None


def samples_split(counts: dict[str, Any] | None) -> dict[str, Any] | None:
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
    split: dict[str, Any] = {"samples": total, "resolution": resolution}
    if resolution == "python":
        split["python_leaf"] = categories["interpreter"]
        for name in ("interpreter", "kernel", "allocation"):
            categories[name] = None
        components["model"] = (components.pop("model_glue") or 0.0) + (components.pop("model_kernels") or 0.0)
        components["model_glue"] = components["model_kernels"] = None
    split["categories"] = categories
    split["components"] = components
    split["dispatch"] = counts["dispatch"] / total if resolution == "native" else None
    return split


def _difference_pp(
    samples: dict[str, Any] | None, spans: dict[str, Any] | None, key: str
) -> dict[str, float]:
    if not samples or not spans:
        return {}
    out = {}
    for name, value in samples[key].items():
        other = spans[key].get(name)
        if value is not None and other is not None:
            out[name] = round((value - other) * 100, 2)
    return out


def build_breakdown(
    collector_results: dict[str, Any],
    *,
    engine_thread_name: str = ENGINE_THREAD_NAME,
    wall_ns: int,
    native_components: Iterable[str] = (),
) -> dict[str, Any]:
    """The result's `breakdown` section from {collector name: collector result} (see the module docstring).

    wall_ns: the engine thread's observed wall time (normally the spans tracer's recorded window).
    native_components: components running as C twins in this run (their spans count as "other").
    """
    notes: list[str] = []
    sampling = collector_results.get("sampling")
    engine_counts = None
    client_counts = None
    if _ok(sampling):
        threads = sampling.get("threads", {})
        engine_id = sampling.get("engine_thread_id")
        engine_names = {
            name
            for name, data in threads.items()
            if name == engine_thread_name or (engine_id is not None and engine_id in data["thread_ids"])
        }
        engine_counts = _pool(data for name, data in threads.items() if name in engine_names)
        client_counts = _pool(
            data
            for name, data in threads.items()
            if name not in engine_names and name not in PROFILER_THREADS
        )
        if engine_counts is None:
            notes.append(f"py-spy saw no thread named {engine_thread_name!r}")
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
    return {
        "wall_s": wall_ns / 1e9,
        "methods": {"spans": spans, "samples": samples},
        "disagreement": _difference_pp(samples, spans, "categories"),
        "component_disagreement": _difference_pp(samples, spans, "components"),
        "client_threads": samples_split(client_counts),
        "notes": notes,
    }
