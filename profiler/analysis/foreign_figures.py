"""The figures behind another engine's verdict, counted from its processes' samples into one typed record (LoopFigures).

The method is profiler.analysis.foreign's: the engine loop's busy time is every sample of its engine threads
that is not a wait for work; the interpreter share is a Wilson interval of it with native stacks, a bound from
control-code lines to every Python-innermost line without them; each component's Amdahl bound is its share
of the busy time, a model worker's scaled by the loop's wait on it. Sentences are foreign_words's, the
result's sections foreign's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..rundir.schema import ForeignProcess, SampledThread
from ..stats import Interval, wilson_interval
from .sample_counts import SampleCounts, sum_counts

# Components whose Python-innermost samples are the engine's control code, not a line calling a kernel.
CONTROL = ("scheduler", "kv_alloc", "prepare", "tokenizer", "detokenizer", "queue", "api", "sampler")
AMDAHL_COMPONENTS = (
    "scheduler",
    "kv_alloc",
    "prepare",
    "sampler",
    "detokenizer",
    "tokenizer",
    "api",
    "model_glue",
    "none",
)
WORKER_COMPONENTS = ("sampler", "prepare", "model_glue", "model_kernels")


@dataclass(frozen=True)
class WorkerFigures:
    """The model worker's own split of its busy samples, counted from its engine threads."""

    pid: int | None
    busy: float  # samples that were not waits for work
    native: bool  # sampled with native stacks: only then are kernel and interpreter told apart
    kernel: float  # samples
    interpreter: float  # samples
    components: dict[str, float]  # component -> share of the busy samples


@dataclass(frozen=True)
class ComponentBound:
    """A component's share of the loop's busy time (its Amdahl bound at an infinite speedup) and its Wilson interval."""

    bound: float
    low: float
    high: float
    samples: float
    in_worker: bool  # a model worker's component (scaled by the loop's wait on it), else the loop's own
    worker_pid: int | None  # the model worker's pid (None where the sampler did not say)


@dataclass(frozen=True)
class WaitCounts:
    """The samples every sampled thread spent waiting, by kind, and all their samples."""

    idle: float  # waiting for work
    queueing: float  # a request waiting behind another for the engine
    client: float  # a request handler waiting for its next token
    lock: float  # contention
    total: float

    def shares(self) -> dict[str, float]:
        """Each wait kind's share of every sampled thread's samples."""
        total = self.total
        return {
            "idle": self.idle / total if total else 0.0,
            "queueing": self.queueing / total if total else 0.0,
            "client": self.client / total if total else 0.0,
            "lock": self.lock / total if total else 0.0,
        }


@dataclass(frozen=True)
class ApiFigures:
    """The API server's event loop (the api thread with the most work): its busy share and GIL waits."""

    pid: int | None
    thread_id: int | None
    name: str | None
    work_share: float
    gil_wait: float | None  # native stacks only
    components: dict[str, float] | None


@dataclass(frozen=True)
class LoopFigures:
    """Everything the foreign verdict says about an engine loop that worked while sampled, as counted."""

    pid: int | None  # None where the sampler did not say
    role: str  # "engine loop", "model worker", or another role standing in
    engine: str | None
    engine_threads: list[int]
    native: bool
    samples: float
    busy: float
    idle: float  # samples that waited for work
    interpreter: float  # samples; Python-innermost lines without native stacks
    control: float  # interpreter samples in control code (CONTROL)
    kernel: float
    on_worker: float  # samples waiting on the model worker
    lock: float  # samples waiting on contention
    gil: float
    share: float  # the interpreter share of the busy time, and its interval
    low: float
    high: float
    bottleneck: str  # the category with the most samples
    bottleneck_component: str | None
    bottleneck_samples: float
    worker_found: bool  # a model worker process was sampled beside the loop
    worker: WorkerFigures | None  # its split, when the loop waited on it and it worked
    bounds: dict[str, ComponentBound]
    waits: WaitCounts
    api: ApiFigures | None
    confidence: float = 0.95  # of the interpreter share's interval


def loop_counts(threads: Sequence[SampledThread]) -> SampleCounts:
    """The engine loop's counts from its threads. A pool that takes turns running the loop (llama-cpp-python's
    AnyIO workers run each token on whichever is free) is one loop: while one works the others wait for work,
    so summed they would read idle (N-1)/N of the time whatever the load. When their work fits in one
    thread's samples, the pool is counted as one thread sampled that often: the idle samples beyond it go."""
    out = sum_counts(thread["counts"] for thread in threads)
    if len(threads) < 2:
        return out
    instants = max(int(thread["counts"].get("samples", 0)) for thread in threads)
    idle = out["categories"].get("idle", 0)
    excess = min(idle, out["samples"] - max(instants, out["work"]))
    if excess <= 0:
        return out  # the threads worked at the same time: they are not one loop taking turns
    keep = (idle - excess) / idle
    for key, value in list(out["by_category"].items()):
        category, _, component = key.partition("/")
        if category == "idle":
            out["by_category"][key] = value * keep
            out["components"][component] = out["components"].get(component, 0) - value * (1 - keep)
    out["categories"]["idle"] = idle - excess
    if "idle" in out["waits"]:
        out["waits"]["idle"] = max(0.0, out["waits"]["idle"] - excess)
    out["native_samples"] = out["native_samples"] * (out["samples"] - excess) / out["samples"]
    out["samples"] -= excess
    return out


def engine_process(processes: Sequence[ForeignProcess]) -> ForeignProcess | None:
    """The process whose engine thread is the engine loop (else a model worker's), the most work first."""

    def work(process: ForeignProcess) -> float:
        return sum(
            thread["counts"]["work"]
            for thread in process["threads"]
            if thread["thread_id"] in process["engine_threads"]
        )

    for role in ("engine loop", "model worker", None):  # None: a thread standing in, whose job no table names
        found = [
            process
            for process in processes
            if process.get("engine_thread") is not None and (role is None or process["role"] == role)
        ]
        if found:
            return max(found, key=work)
    return None


def engine_threads(process: ForeignProcess) -> list[SampledThread]:
    """The process's engine threads."""
    return [thread for thread in process["threads"] if thread["thread_id"] in process["engine_threads"]]


def loop_figures(
    processes: Sequence[ForeignProcess], chosen: ForeignProcess, *, confidence: float = 0.95
) -> LoopFigures | None:
    """The figures of the chosen process's engine loop (engine_process), or None when it only waited for work;
    the interpreter share's interval at `confidence` (a run that goes on until resolved spends its miss rate over
    its looks: profiler.stats.spent_confidence)."""
    loop = loop_counts(engine_threads(chosen))
    categories = loop["categories"]
    native = chosen.get("resolution") == "native"
    idle = categories.get("idle", 0)
    busy = loop["samples"] - idle
    if busy <= 0:
        return None
    by_category = loop["by_category"]
    interpreter = categories.get("interpreter", 0)
    control = sum(
        count
        for key, count in by_category.items()
        if key.split("/")[0] == "interpreter" and key.split("/")[1] in CONTROL
    )
    share, low, high = _interpreter_share(native, interpreter, control, busy, confidence)
    on_worker = loop["waits"].get("worker", 0)
    found = _worker_process(processes, chosen)
    worker_counts = loop_counts(engine_threads(found)) if found is not None and on_worker else None
    worker = (
        _worker_figures(found, worker_counts) if found is not None and worker_counts is not None else None
    )
    category_counts = _category_counts(categories)
    bottleneck = max(category_counts, key=lambda key: category_counts[key])
    return LoopFigures(
        pid=chosen["pid"],
        role=chosen["role"],
        engine=chosen.get("engine"),
        engine_threads=chosen["engine_threads"],
        native=native,
        samples=loop["samples"],
        busy=busy,
        idle=idle,
        interpreter=interpreter,
        control=control,
        kernel=categories.get("kernel", 0),
        on_worker=on_worker,
        lock=loop["waits"].get("lock", 0),
        gil=loop["gil"],
        share=share,
        low=low,
        high=high,
        bottleneck=bottleneck,
        bottleneck_component=_largest_component(by_category, bottleneck),
        bottleneck_samples=category_counts[bottleneck],
        worker_found=found is not None,
        worker=worker,
        bounds=_bounds(loop, busy, worker, worker_counts),
        waits=_wait_counts(processes),
        api=_api_figures(processes),
        confidence=confidence,
    )


def _interpreter_share(
    native: bool, interpreter: float, control: float, busy: float, confidence: float
) -> tuple[float, float, float]:
    """The interpreter share of the busy samples and its interval: measured with native stacks; without them,
    bounded from the control-code lines (low) to every Python-innermost line (high), the midpoint its share."""
    if native:
        measured = _interval(interpreter, busy, confidence)
        return measured.point, measured.low, measured.high
    low, high = _interval(control, busy, confidence).low, _interval(interpreter, busy, confidence).high
    return (control + interpreter) / 2 / busy, low, high


def _category_counts(categories: Mapping[str, float]) -> dict[str, float]:
    """The loop's samples by category, in the order the bottleneck is chosen among equals."""
    return {
        "interpreter": categories.get("interpreter", 0),
        "kernel": categories.get("kernel", 0),
        "waiting": categories.get("waiting", 0),
        "lock": categories.get("lock", 0),
        "allocation": categories.get("allocation", 0),
        "other": categories.get("other", 0),
        "idle": categories.get("idle", 0),
    }


def _interval(hits: float, trials: float, confidence: float = 0.95) -> Interval:
    """The Wilson interval of hits among trials, hits held inside [0, trials]."""
    return wilson_interval(max(0.0, min(hits, trials)), trials, confidence=confidence)


def _worker_process(processes: Sequence[ForeignProcess], chosen: ForeignProcess) -> ForeignProcess | None:
    """The model worker process beside the chosen one with the most work in its engine threads."""
    workers = [
        process for process in processes if process is not chosen and process["role"] == "model worker"
    ]
    return max(workers, key=lambda p: sum(t["counts"]["work"] for t in engine_threads(p)), default=None)


def _worker_figures(worker: ForeignProcess, counts: SampleCounts) -> WorkerFigures | None:
    """The worker's split of its busy samples, or None when it only waited for work."""
    busy = counts["samples"] - counts["categories"].get("idle", 0)
    if busy <= 0:
        return None
    return WorkerFigures(
        pid=worker["pid"],
        busy=busy,
        native=worker.get("resolution") == "native",
        kernel=counts["categories"].get("kernel", 0),
        interpreter=counts["categories"].get("interpreter", 0),
        components={key: value / busy for key, value in counts["components"].items()},
    )


def _largest_component(by_category: Mapping[str, float], category: str) -> str | None:
    """The component with the most samples in the category, the loop's other code ("none") left out."""
    found = {
        key.split("/", 1)[1]: count for key, count in by_category.items() if key.split("/", 1)[0] == category
    }
    found.pop("none", None)
    return max(found, key=lambda key: found[key]) if found else None


def _working(by_category: Mapping[str, float], name: str) -> float:
    """The component's samples that were neither waits for work nor waits on the worker."""
    return sum(
        value
        for key, value in by_category.items()
        if key.split("/", 1)[1] == name and key.split("/", 1)[0] not in ("idle", "waiting")
    )


def _bounds(
    loop: SampleCounts, busy: float, worker: WorkerFigures | None, worker_counts: SampleCounts | None
) -> dict[str, ComponentBound]:
    """Per component, its Amdahl bound at infinite speedup and its interval; a worker's components scaled by the
    loop's wait on the worker."""
    out: dict[str, ComponentBound] = {}
    for name in AMDAHL_COMPONENTS:
        count = _working(loop["by_category"], name)
        if count:
            part = _interval(count, busy)
            out[name] = ComponentBound(
                bound=part.point,
                low=part.low,
                high=part.high,
                samples=count,
                in_worker=False,
                worker_pid=None,
            )
    waiting = loop["waits"].get("worker", 0)
    if worker is None or worker_counts is None or not waiting:
        return out
    wait = _interval(waiting, busy)
    for name in WORKER_COMPONENTS:
        count = _working(worker_counts["by_category"], name)
        if count:
            part = _interval(count, worker.busy)
            out[f"worker:{name}"] = ComponentBound(
                bound=wait.point * part.point,
                low=wait.low * part.low,
                high=min(1.0, wait.high * part.high),
                samples=count,
                in_worker=True,
                worker_pid=worker.pid,
            )
    return out


def _wait_counts(processes: Sequence[ForeignProcess]) -> WaitCounts:
    """Which waits the run saw, over every thread: for work (idle), behind another request (queueing), contention."""
    idle: float = 0
    queueing: float = 0
    contention: float = 0
    client: float = 0
    total: float = 0
    for process in processes:
        for thread in process["threads"]:
            waits = thread["counts"].get("waits") or {}
            total += thread["counts"]["samples"]
            idle += waits.get("idle", 0)
            queueing += waits.get("queueing", 0)
            client += waits.get("client", 0)
            contention += waits.get("lock", 0)
    return WaitCounts(idle=idle, queueing=queueing, client=client, lock=contention, total=total)


def _api_figures(processes: Sequence[ForeignProcess]) -> ApiFigures | None:
    """The API / event-loop thread with the most work: its busy share and GIL waits."""
    candidates = [
        (process, thread) for process in processes for thread in process["threads"] if thread["role"] == "api"
    ]
    if not candidates:
        return None
    # The event loop itself first (a request handler in a pool thread is api code too, but not the loop).
    process, thread = max(
        candidates, key=lambda pair: (bool(pair[1].get("event_loop")), pair[1]["counts"]["work"])
    )
    counts = thread["counts"]
    return ApiFigures(
        pid=process["pid"],
        thread_id=thread["thread_id"],
        name=thread["name"],
        work_share=counts["work"] / counts["samples"] if counts["samples"] else 0.0,
        gil_wait=thread.get("gil_wait"),
        components=thread.get("components"),
    )
