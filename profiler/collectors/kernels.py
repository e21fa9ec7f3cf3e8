"""torch.profiler over short windows of engine steps spread over the run: per span, aten op time split into kernel and framework fee.

torch.profiler slows a CPU step and records thousands of events a step (docs/measurements.md, "Figures
moved out of code comments"), so it runs only over windows of `steps` steps: the first at `first_step`
(after warm-up), then one every `every` steps but never less than `min_gap_s` of unpaused time after the
last one, nor less than the last window's measured cost over `cost_budget` (which bound what windows cost
where steps are short and where they are long), switched on and off by the spans tracer's step callbacks
on the engine thread. One window's read of a model span's kernel share moved widely between runs of one
scenario (docs/measurements.md); windows spread over the run describe the run, not one moment of it. At
most `max_windows` are kept: when that many are held, the period doubles and every other window is
dropped, so the kept ones stay evenly spread however long the run is. While a window runs, every engine span is also marked as a `record_function("span:<name>")`, so
each op's self time is attributed to the span it ran in.

An op's self time is not all compute. Ops that compute nothing (views, reshapes, tensor creation:
FEE_OPS) are pure framework fee, and every other op pays a fee on the way in (dispatcher, autograd
and meta wrappers, TensorIterator set-up, the output tensor) that stack samples count as dispatch.
That fee is priced once per process, under the profiler, as each op's self time on tiny tensors on
one thread (no OpenMP fork, next to no compute: see price_op_fees); oneDNN's per-call set-up is
kernel by the issue's definition, so mkldnn ops pay only the generic fee. Each op is charged at most
its own self time. `fee_ns` per span is what the breakdown counts on the control side.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypedDict

from ..rundir.schema import TopKernel
from .base import Collector, CollectorResult
from .kineto_chatter import quietly_profiling, without_kineto_chatter
from .spans import STEP_SPAN, RecordingTracer

if TYPE_CHECKING:
    from torch.profiler import profile as TorchProfile

SPAN_PREFIX = "span:"
OUTSIDE_SPANS = ""
# CPU-side GPU runtime/driver calls: cudaStreamSynchronize, cudaLaunchKernel, cuLaunchKernel, hipMemcpy...
_RUNTIME = re.compile(r"^(?:cuda[A-Z]|cu[A-Z]|hip[A-Z])")
# The runtime calls that put work on the GPU: one per kernel, or one per replayed CUDA graph.
LAUNCHES = re.compile(
    r"^(?:cudaLaunchKernel\w*|cuLaunchKernel\w*|cudaGraphLaunch\w*|cuGraphLaunch\w*|hipLaunchKernel\w*|hipGraphLaunch\w*)$"
)
# Ops that compute nothing: views and reshapes make a tensor header, empty* allocates, to/contiguous/
# type_as are wrappers whose copy (if any) is a child op. Their self time is all framework fee.
FEE_OPS = re.compile(
    r"^aten::(?:view|_unsafe_view|_reshape_alias|reshape|as_strided|select|slice|narrow|transpose|t|"
    r"permute|expand|expand_as|unsqueeze|squeeze|flatten|unflatten|view_as|view_as_real|view_as_complex|"
    r"alias|detach|lift_fresh|split|split_with_sizes|chunk|unbind|movedim|diagonal|empty|empty_strided|"
    r"empty_like|new_empty|new_empty_strided|resize_|result_type|to|_to_copy|type_as|contiguous|"
    r"_has_compatible_shallow_copy_type)$"
)


class TimeRange(Protocol):
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...


class ProfilerEvent(Protocol):
    """The fields of torch.profiler's FunctionEvent read here (times in us; device_type read where present)."""

    @property
    def name(self) -> str: ...
    @property
    def cpu_parent(self) -> ProfilerEvent | None: ...
    @property
    def self_cpu_time_total(self) -> float: ...
    @property
    def time_range(self) -> TimeRange: ...
    @property
    def thread(self) -> int: ...


class CudaSummary(TypedDict):
    """GPU kernel time and idle gaps over the windows (ns), and the kernels that took the most device time."""

    kernels: int
    kernel_ns: float
    busy_ns: float
    window_ns: float
    idle_gap_ns: float
    gpu_idle_fraction: float | None
    mean_kernel_ns: float
    top_kernels: list[TopKernel]


class SpanTime(TypedDict):
    """One span's torch time in a summary (ns, ops counted): aten ops' self time, the framework fee in it, the ops,
    their device time and the GPU runtime calls' time."""

    aten_self_ns: float
    fee_ns: float
    ops: int
    device_ns: float
    runtime_ns: float


class SpanSplit(TypedDict):
    """One span's split in one window (ns): what the breakdown reads of SpanTime."""

    aten_self_ns: float
    fee_ns: float
    runtime_ns: float


class KernelWindow(TypedDict, total=False):
    """One window: its first step, how many steps it profiled, and (once split) each span's SpanSplit."""

    first_step: int
    steps: int
    by_span: dict[str, SpanSplit]


class TopOp(TypedDict):
    name: str
    self_ns: float
    count: int
    fee_op: bool  # a do-nothing op (FEE_OPS): all its self time is fee


class KernelFigures(TypedDict, total=False):
    """What summarize_events gives, and the kernel collector's result with it: over the windows' ops (ns)."""

    aten_self_ns: float | None
    op_fee_ns: float | None  # the generic fee
    by_span: dict[str, SpanTime]
    ops_per_step: float | None
    top_level_ops_per_step: float | None
    launches_per_step: float | None  # 0 on a CPU run: nothing is launched
    top_ops: list[TopOp]
    cuda: CudaSummary | None


class EventSummary(KernelFigures, total=False):
    """summarize_events(): its figures, and each window's own by_span (in order)."""

    by_window: list[dict[str, SpanTime]]


class KernelOverhead(TypedDict, total=False):
    """What the windows cost: a step inside one against a step before, and the engine's pauses to switch them."""

    window_step_ms: float | None
    before_step_ms: float | None
    slowdown: float | None
    engine_pause_ns: int


# (window, step, op, start_ns, end_ns, depth, span): kernel_events.csv's rows
KernelEventRow = tuple[int, int, str, int, int, int, str]


class KernelResult(CollectorResult, KernelFigures, total=False):
    """KernelCollector.result(): the windows' figures, the windows themselves and their ops on the spans' clock."""

    fee_source: str
    windows: list[KernelWindow]
    profiled_steps: int
    timeline: list[KernelEventRow]
    overhead: KernelOverhead
    note: str  # no window: why


def _span_split(entry: SpanTime) -> SpanSplit:
    return {
        "aten_self_ns": entry["aten_self_ns"],
        "fee_ns": entry["fee_ns"],
        "runtime_ns": entry["runtime_ns"],
    }


def _interval_union(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals."""
    if not intervals:
        return 0.0
    ordered = sorted(intervals)
    covered = 0.0
    current_start, current_end = ordered[0]
    for start, end in ordered[1:]:
        if start > current_end:
            covered += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return covered + current_end - current_start


def _device(event: ProfilerEvent) -> bool:
    return "CUDA" in str(getattr(event, "device_type", "CPU"))


def _kernel(event: ProfilerEvent) -> bool:
    """Device work: a device event that is not the GPU-side copy of a `span:` marker, which Kineto
    reports as a device event covering the whole span (counting it hid every gap in the span)."""
    return _device(event) and not event.name.startswith(SPAN_PREFIX)


def _span_of(event: ProfilerEvent) -> str:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(SPAN_PREFIX):
            return parent.name[len(SPAN_PREFIX) :]
        parent = parent.cpu_parent
    return OUTSIDE_SPANS


def op_fee_us(events: list[ProfilerEvent]) -> float | None:
    """The framework's fee for one op call (us): the median self time of the do-nothing ops (FEE_OPS)
    that call no other op, or None when the events hold none."""
    op_parents = {
        id(event.cpu_parent) for event in events if event.cpu_parent is not None and _is_op(event.name)
    }
    fees = sorted(
        event.self_cpu_time_total
        for event in events
        if not _device(event) and FEE_OPS.match(event.name) and id(event) not in op_parents
    )
    return fees[len(fees) // 2] if fees else None


def _cuda_summary(windows: list[list[ProfilerEvent]]) -> CudaSummary | None:
    """GPU kernel time and idle gaps, each window's gaps measured against its own CPU time span, and the
    kernels that took the most device time."""
    kernels = 0
    kernel_us = busy_us = span_us = 0.0
    by_kernel: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for events in windows:
        for event in events:
            if _kernel(event):
                entry = by_kernel[event.name]
                entry[0] += event.time_range.end - event.time_range.start
                entry[1] += 1
        gpu = [(e.time_range.start, e.time_range.end) for e in events if _kernel(e)]
        cpu = [(e.time_range.start, e.time_range.end) for e in events if not _device(e)]
        if not gpu:
            continue
        kernels += len(gpu)
        kernel_us += sum(end - start for start, end in gpu)
        busy_us += _interval_union(gpu)
        if cpu:
            span_us += max(end for _, end in cpu) - min(start for start, _ in cpu)
    if not kernels:
        return None
    summary: CudaSummary = {
        "kernels": kernels,
        "kernel_ns": kernel_us * 1e3,
        "busy_ns": busy_us * 1e3,
        "window_ns": span_us * 1e3,
        "idle_gap_ns": max(0.0, span_us - busy_us) * 1e3,
        "gpu_idle_fraction": max(0.0, 1 - busy_us / span_us) if span_us > 0 else None,
        "mean_kernel_ns": kernel_us * 1e3 / kernels,
        "top_kernels": [
            {"name": name, "device_ns": total * 1e3, "count": int(count)}
            for name, (total, count) in sorted(by_kernel.items(), key=lambda item: -item[1][0])[:10]
        ],
    }
    return summary


def summarize_events(
    events: list[ProfilerEvent],
    steps: int,
    *,
    windows: list[list[ProfilerEvent]] | None = None,
    fees_us: dict[str, float] | None = None,
) -> EventSummary:
    """Summarize torch.profiler FunctionEvents (times in us) of `steps` profiled steps.

    `events` may pool several windows; pass them separately in `windows` instead (events is then
    ignored) to also get each window's own by_span (`by_window`, in order) and GPU idle gaps measured
    inside each window, not across the time between windows.
    by_span[span] = {aten_self_ns, fee_ns, ops, device_ns, runtime_ns}: fee_ns is the part of
    aten_self_ns that is framework fee (all of a FEE_OPS op; the priced fee, at most its self time, of
    any other op). `fees_us` maps op names to their priced fee, GENERIC_FEE to the fee of the others;
    without it the fee of every op is the median self time of the window's do-nothing ops (a floor).
    """
    per_window = windows if windows is not None else [events]
    if not fees_us:
        fees_us = {GENERIC_FEE: op_fee_us([event for part in per_window for event in part]) or 0.0}
    fee_us = fees_us.get(GENERIC_FEE, 0.0)
    tally = _EventTally()
    for part in per_window:
        tally.add_window(part, fees_us, fee_us)
    return tally.summary(steps, fee_us, per_window)


def _new_span() -> SpanTime:
    return {"aten_self_ns": 0.0, "fee_ns": 0.0, "ops": 0, "device_ns": 0.0, "runtime_ns": 0.0}


class _EventTally:
    """summarize_events' running sums: by span (over all windows and per window), by op, and the counts."""

    def __init__(self) -> None:
        self.by_span: dict[str, SpanTime] = defaultdict(_new_span)
        self.by_window: list[dict[str, SpanTime]] = []
        self.by_op: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        self.total_self_us = 0.0
        self.ops = self.top_level_ops = self.launches = 0

    def add_window(self, part: list[ProfilerEvent], fees_us: dict[str, float], fee_us: float) -> None:
        """Count one window's host events: its CUDA runtime calls and its ops (device events are skipped)."""
        window_spans: dict[str, SpanTime] = defaultdict(_new_span)
        self.by_window.append(window_spans)
        for event in part:
            if _device(event):
                continue
            name = event.name
            runtime = _RUNTIME.match(name) is not None
            if not (runtime or _is_op(name)):
                continue
            span = _span_of(event)
            if runtime:
                self.launches += LAUNCHES.match(name) is not None
                # CUDA runtime calls (launches, copies, synchronizations) sit under aten ops, outside their
                # self time: waiting for the GPU at a sync is kernel time, not the span's Python.
                for entry in (self.by_span[span], window_spans[span]):
                    entry["runtime_ns"] += event.self_cpu_time_total * 1e3
                continue
            self._add_op(event, (self.by_span[span], window_spans[span]), fees_us, fee_us)

    def _add_op(
        self,
        event: ProfilerEvent,
        entries: tuple[SpanTime, SpanTime],
        fees_us: dict[str, float],
        fee_us: float,
    ) -> None:
        name = event.name
        parent = event.cpu_parent
        top_level = parent is None or not _is_op(parent.name)
        self_us = event.self_cpu_time_total
        device_us = getattr(event, "self_device_time_total", 0.0) or 0.0
        fee = self_us if FEE_OPS.match(name) else min(self_us, fees_us.get(name, fee_us))
        for entry in entries:
            entry["aten_self_ns"] += self_us * 1e3
            entry["fee_ns"] += fee * 1e3
            entry["ops"] += 1
            entry["device_ns"] += device_us * 1e3
        self.by_op[name][0] += self_us * 1e3
        self.by_op[name][1] += 1
        self.total_self_us += self_us
        self.ops += 1
        self.top_level_ops += top_level

    def summary(self, steps: int, fee_us: float, per_window: list[list[ProfilerEvent]]) -> EventSummary:
        """The sums as summarize_events' result, per step where it says so."""
        top_ops = sorted(self.by_op.items(), key=lambda item: -item[1][0])[:15]
        return {
            "aten_self_ns": self.total_self_us * 1e3,
            "op_fee_ns": fee_us * 1e3,  # the generic fee
            "by_span": {span: values.copy() for span, values in self.by_span.items()},
            "ops_per_step": self.ops / steps if steps else None,
            "top_level_ops_per_step": self.top_level_ops / steps if steps else None,
            "launches_per_step": self.launches / steps
            if steps
            else None,  # 0 on a CPU run: nothing is launched
            "top_ops": [
                {
                    "name": name,
                    "self_ns": values[0],
                    "count": int(values[1]),
                    "fee_op": bool(FEE_OPS.match(name)),
                }
                for name, values in top_ops
            ],
            "cuda": _cuda_summary(per_window),
            "by_window": [
                {span: values.copy() for span, values in spans.items()} for spans in self.by_window
            ],
        }


GENERIC_FEE = "*"  # key of the fee charged to ops the probe did not price


def _check_windows(
    first_step: int,
    steps: int,
    every: int,
    max_windows: int,
    min_gap_s: float,
    cost_budget: float | None,
    first_windows: int,
    first_gap_s: float,
) -> None:
    """ValueError unless KernelCollector's window plan is one it can keep."""
    if (
        steps < 1
        or first_step < 0
        or every < steps
        or max_windows < 2
        or min_gap_s < 0
        or (cost_budget is not None and not 0 < cost_budget <= 1)
        or first_windows < 0
        or first_gap_s < 0
    ):
        raise ValueError(
            "kernel windows need first_step >= 0, steps >= 1, every >= steps, max_windows >= 2, "
            "min_gap_s >= 0, a cost_budget in (0, 1], first_windows >= 0 and first_gap_s >= 0"
        )


def _torch_importable() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _tiny_ops_probe() -> None:
    """The ops an engine step runs (linears, attention, norms, indexing, sampling), on tiny tensors."""
    import torch
    import torch.nn.functional as F

    x, w, index = torch.randn(2, 8), torch.randn(8, 8), torch.tensor([1, 0])
    q = torch.randn(1, 2, 2, 4)
    with torch.inference_mode():
        torch.addmm(x, x, w)
        x @ w.t()
        F.silu(x) * x + x
        torch.rsqrt(x.abs() + 1) / 2
        x.pow(2).mean(-1, keepdim=True)
        F.rms_norm(x, (8,), torch.ones(8), 1e-5)
        F.embedding(index, w)
        x.index_select(0, index)
        torch.zeros(4, 8).index_copy_(0, index, x)
        F.scaled_dot_product_attention(q, q, q)
        torch.softmax(x, -1).cumsum(-1)
        torch.topk(x, 2)
        torch.sort(x, -1)
        x.argmax(-1)
        x.max(-1)
        x.sum(-1)
        torch.gather(x, 1, index.view(2, 1))
        torch.where(x > 0, x, 0.0).exp_()
        torch.multinomial(torch.ones(2, 8), 1)
        torch.cat([x, x]).float().clone()


def price_op_fees(probe: Callable[[], None] = _tiny_ops_probe, repeats: int = 20) -> dict[str, float]:
    """{op name: median self time in us} of `probe` under torch.profiler on one thread, plus GENERIC_FEE:
    the median over the compute ops priced. Do-nothing ops (FEE_OPS) and mkldnn ops are left out
    (the first are all fee anyway; the second's set-up is oneDNN code, which counts as kernel)."""
    import torch
    import torch.profiler as torch_profiler

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops do not fork OpenMP anyway; this makes sure none does
    try:
        for _ in range(3):
            probe()
        with quietly_profiling(
            torch_profiler.profile(activities=[torch_profiler.ProfilerActivity.CPU])
        ) as profile:
            for _ in range(repeats):
                probe()
        events = list(profile.events())
    finally:
        torch.set_num_threads(threads)
    by_name: dict[str, list[float]] = defaultdict(list)
    for event in events:
        if _is_op(event.name) and not FEE_OPS.match(event.name) and not event.name.startswith("mkldnn::"):
            by_name[event.name].append(event.self_cpu_time_total)
    fees = {name: sorted(values)[len(values) // 2] for name, values in by_name.items()}
    if fees:
        ordered = sorted(fees.values())
        fees[GENERIC_FEE] = ordered[len(ordered) // 2]
    return fees


class KernelCollector(Collector[KernelResult]):
    """Runs torch.profiler over windows of `steps` engine steps: at `first_step`, then every `every` steps.

    result() = {windows: [{first_step, steps, by_span: {span: {aten_self_ns, fee_ns, runtime_ns}}}], profiled_steps,
    timeline: [(window, step, op, start_ns, end_ns, depth, span)] (the engine thread's ops on the spans' clock,
    see window_timeline), aten_self_ns, op_fee_ns, by_span: {span:
    {aten_self_ns, fee_ns, ops, device_ns, runtime_ns}}, ops_per_step, top_level_ops_per_step, top_ops,
    cuda: null | {kernels, kernel_ns, busy_ns, window_ns, idle_gap_ns, gpu_idle_fraction}, overhead:
    {window_step_ms, before_step_ms, slowdown, engine_pause_ns}}
    `engine_pause_ns` is the time the engine thread spent starting/stopping the profiler between
    steps (outside every span); the breakdown moves it from idle to other.
    """

    name = "kernels"

    def __init__(
        self,
        *,
        tracer: RecordingTracer | None = None,
        first_step: int = 20,
        steps: int = 5,
        every: int = 40,
        max_windows: int = 16,
        min_gap_s: float = 0.0,
        cost_budget: float | None = None,
        first_windows: int = 0,
        first_gap_s: float = 0.5,
        mark_spans: bool = True,
        warm_up: bool = True,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        """`min_gap_s`: a due window opens only this long after the last one opened, not counting time the
        collector was paused (the in-run A/B's "off" blocks, which would otherwise crowd the windows into
        its "on" blocks and overstate their cost); 0 = by steps alone. `cost_budget`: the share of the
        engine's time the windows may take; after each window the gap grows to its measured cost (the
        engine's pause to start and stop torch.profiler, and how much longer its steps took than the step
        before it) divided by this share, so a model with long steps gets fewer windows. `first_windows`: that
        many windows open first at `first_gap_s` apart, outside the budget, so that even a short run holds enough
        windows for the kernel fraction's interval to close (profiler.analysis.share_interval: with one window
        it cannot close at all); the gap and the budget apply from then on."""
        super().__init__()
        _check_windows(
            first_step, steps, every, max_windows, min_gap_s, cost_budget, first_windows, first_gap_s
        )
        self.first_step = first_step
        self.steps = steps
        self.every = every
        self.max_windows = max_windows
        self._min_gap_ns = int(min_gap_s * 1e9)
        self._cost_budget = cost_budget
        self._first_windows = first_windows
        self._first_gap_ns = int(first_gap_s * 1e9)
        self._opened = 0  # windows opened so far
        # The gap before the next window: the minimum, or the last window's cost over the budget (the first
        # `first_windows` windows: first_gap_s).
        self._gap_ns = self._first_gap_ns if first_windows else self._min_gap_ns
        self._window_cost_ns = 0  # the open window's cost so far
        # The last step outside every window: what a profiled step's length is held to.
        self._usual_step_ns: int | None = None
        self._last_open_ns: int | None = None
        self._held_ns = 0  # time paused so far (the in-run A/B), kept out of the gap
        self._held_ns_at_open = 0
        # Paused by the in-run A/B since then (None: measuring): no new window opens, one open runs to its end.
        self._held_since: int | None = None
        self._clock = clock
        self._tracer = tracer
        self._mark_spans = mark_spans and tracer is not None
        self._profile: TorchProfile | None = None
        self._open_at: int | None = None  # first step of the window being recorded
        self._open_steps = 0
        # Stopped windows: (first step, steps, profile); events are read after the run, off the engine thread.
        self._windows: list[tuple[int, int, TorchProfile]] = []
        self._splits: dict[int, dict[str, SpanSplit]] = {}  # windows_so_far()'s, by first step
        # (first step, steps) of windows already split whose events were dropped (see _release_summarized)
        self._released: list[tuple[int, int]] = []
        self._step_begin: dict[int, int] = {}
        self._step_ms: dict[int, float] = {}
        self._engine_pause_ns = 0
        self._marks = threading.local()
        self._cuda = False
        self._fees_us: dict[str, float] = {}  # price_op_fees(), at warm-up
        self._lock = threading.Lock()  # stop() (session thread) vs a window's end (engine thread)
        if not _torch_importable():
            self.skip("torch is not importable")
            return
        if warm_up:
            self._warm_up()

    def _warm_up(self) -> None:
        """Price the per-op fees now, before the engine runs: this also pays torch.profiler's first start (a
        one-time init of most of a second: docs/measurements.md), which would otherwise pause the engine thread
        mid-run."""
        try:
            self._fees_us = price_op_fees()
        except Exception as exc:  # never break the engine thread
            self.skip(f"torch.profiler does not work here: {type(exc).__name__}: {exc}")

    def _start(self) -> None:
        import torch

        self._cuda = torch.cuda.is_available()
        if self._tracer is not None:
            self._tracer.add_step_listener(self.on_step)

    def _due(self, step: int) -> bool:
        return step >= self.first_step and (step - self.first_step) % self.every == 0

    def _can_pause(self) -> bool:
        return True

    def _pause(self) -> None:
        self._held_since = self._clock()

    def _resume(self) -> None:
        if self._held_since is not None:
            self._held_ns += self._clock() - self._held_since
            self._held_since = None

    def _gap_passed(self, now_ns: int) -> bool:
        if self._last_open_ns is None:
            return True
        return now_ns - self._last_open_ns - (self._held_ns - self._held_ns_at_open) >= self._gap_ns

    def _near_window(self, step: int) -> bool:
        """Inside a window or among the `steps` steps before one (the comparison for the slowdown)."""
        offset = (step - self.first_step) % self.every
        return step >= self.first_step - self.steps and (
            offset < self.steps or offset >= self.every - self.steps
        )

    def on_step(self, step: int, begin: bool) -> None:
        """Step callback (engine thread): open a window at its first step, close it after its last."""
        if self.status != "ok":
            return
        now = self._clock()
        if begin:
            self._step_begin[step] = now
            if (
                self._profile is None
                and self._held_since is None
                and self._due(step)
                and self._gap_passed(now)
            ):
                self._last_open_ns, self._held_ns_at_open = now, self._held_ns
                self._opened += 1
                self._open_window(step)
                opened = self._clock()
                self._engine_pause_ns += opened - now
                self._window_cost_ns = opened - now
                self._step_begin[step] = opened
            return
        began = self._step_begin.pop(step, None)
        took = None if began is None else now - began
        if took is not None and self._near_window(step):
            self._step_ms[step] = took / 1e6
        if self._profile is not None and self._open_at is not None and step >= self._open_at:
            if took is not None and self._usual_step_ns is not None:
                self._window_cost_ns += max(0, took - self._usual_step_ns)
            self._open_steps = step - self._open_at + 1
            if self._open_steps >= self.steps:
                self._close_window()
                closed = self._clock() - now
                self._engine_pause_ns += closed
                self._window_cost_ns += closed
                if self._opened < self._first_windows:
                    self._gap_ns = self._first_gap_ns
                elif self._cost_budget is not None:
                    self._gap_ns = max(self._min_gap_ns, int(self._window_cost_ns / self._cost_budget))
                else:
                    self._gap_ns = self._min_gap_ns
        elif took is not None:
            self._usual_step_ns = took

    def _open_window(self, step: int) -> None:
        try:
            import torch.profiler as torch_profiler

            activities = [torch_profiler.ProfilerActivity.CPU]
            if self._cuda:
                activities.append(torch_profiler.ProfilerActivity.CUDA)
            profile = torch_profiler.profile(activities=activities, record_shapes=False, with_stack=False)
            with without_kineto_chatter():  # a window spans steps, so it is opened and closed by hand
                profile.__enter__()
            self._profile, self._open_at, self._open_steps = profile, step, 0
            if self._mark_spans and self._tracer is not None:
                self._tracer.add_span_hook(self._mark)
        except Exception as exc:
            self.fail(f"torch.profiler could not start: {type(exc).__name__}: {exc}")

    def _mark(self, name: str, enter: bool) -> None:
        import torch.profiler as torch_profiler

        stack = getattr(self._marks, "stack", None)
        if stack is None:
            stack = self._marks.stack = []
        if enter:
            scope = torch_profiler.record_function(SPAN_PREFIX + name)
            scope.__enter__()
            stack.append(scope)
        elif stack:
            stack.pop().__exit__(None, None, None)

    def _close_window(self) -> None:
        with self._lock:
            profile, first, steps = self._profile, self._open_at, self._open_steps
            if profile is None or first is None:
                return
            self._profile, self._open_at = None, None
            if self._tracer is not None:
                self._tracer.remove_span_hook(self._mark)
            try:
                with without_kineto_chatter():
                    profile.__exit__(None, None, None)
            except Exception as exc:
                self.fail(f"torch.profiler could not stop: {type(exc).__name__}: {exc}")
                return
            if steps:
                self._windows.append((first, steps, profile))
            if len(self._windows) >= self.max_windows and not self._release_summarized():
                self._thin_out()

    def _release_summarized(self) -> bool:
        """Drop the events of windows windows_so_far() already split (their splits stay, in result()'s windows),
        so a run that looks between rounds keeps its windows' period and every window's measurement; False
        when none was split (a run that never looks thins out as before)."""
        # The newest window keeps its events: result() reads events from at least one (fees, top ops, timeline).
        summarized = {window[0] for window in self._windows[:-1] if window[0] in self._splits}
        if not summarized:
            return False
        self._released.extend((first, steps) for first, steps, _ in self._windows if first in summarized)
        self._windows = [window for window in self._windows if window[0] not in summarized]
        return True

    def windows_so_far(self) -> list[KernelWindow]:
        """The windows closed so far, each with its own split ({first_step, steps, by_span: {span: {aten_self_ns,
        fee_ns, runtime_ns}}}), for a running estimate between rounds of the load; each window's events are read
        once, on the caller's thread (torch keeps them for result())."""
        with self._lock:
            closed, released = list(self._windows), list(self._released)
        out: list[KernelWindow] = [
            {"first_step": first, "steps": steps, "by_span": self._splits[first]} for first, steps in released
        ]
        for first, steps, profile in closed:
            split = self._splits.get(first)
            if split is None:
                summary = summarize_events(
                    [], steps, windows=[list(profile.events())], fees_us=self._fees_us or None
                )
                split = self._splits[first] = {
                    span: _span_split(entry) for span, entry in summary["by_window"][0].items()
                }
            out.append({"first_step": first, "steps": steps, "by_span": split})
        return sorted(out, key=lambda window: window["first_step"])

    def _thin_out(self) -> None:
        """Double the period and keep the windows that fall on it: bounded memory, still evenly spread."""
        self.every *= 2
        self._windows = [window for window in self._windows if self._due(window[0])]

    def _stop(self) -> None:
        # A run that ends inside a window still reports the steps it profiled.
        self._close_window()

    def _result(self) -> KernelResult:
        windows: list[KernelWindow] = [
            {"first_step": first, "steps": steps} for first, steps, _ in self._windows
        ]
        profiled = sum(window["steps"] for window in windows)
        if not self._windows:
            return {
                "windows": [],
                "timeline": [],
                "profiled_steps": 0,
                "aten_self_ns": None,
                "op_fee_ns": None,
                "by_span": {},
                "ops_per_step": None,
                "top_level_ops_per_step": None,
                "top_ops": [],
                "cuda": None,
                "overhead": {"engine_pause_ns": self._engine_pause_ns},
                "note": f"the run ended before step {self.first_step}: no kernel window",
            }
        per_window = [list(profile.events()) for _, _, profile in self._windows]
        summary = summarize_events([], profiled, windows=per_window, fees_us=self._fees_us or None)
        for window, by_span in zip(windows, summary["by_window"]):
            # Each window's own split, so the breakdown can follow a run whose phases differ.
            window["by_span"] = {span: _span_split(entry) for span, entry in by_span.items()}
        inside_steps = {first + offset for first, steps, _ in self._windows for offset in range(steps)}
        before_steps = {first - offset for first, steps, _ in self._windows for offset in range(1, steps + 1)}
        inside = [ms for step, ms in self._step_ms.items() if step in inside_steps]
        before = [
            ms for step, ms in self._step_ms.items() if step in before_steps and step not in inside_steps
        ]
        inside_mean = sum(inside) / len(inside) if inside else None
        before_mean = sum(before) / len(before) if before else None
        # Windows whose events were dropped once split (a run that looked between rounds) keep their splits.
        released: list[KernelWindow] = [
            {"first_step": first, "steps": steps, "by_span": self._splits[first]}
            for first, steps in self._released
        ]
        return {
            "aten_self_ns": summary["aten_self_ns"],
            "op_fee_ns": summary["op_fee_ns"],
            "by_span": summary["by_span"],
            "ops_per_step": summary["ops_per_step"],
            "top_level_ops_per_step": summary["top_level_ops_per_step"],
            "launches_per_step": summary["launches_per_step"],
            "top_ops": summary["top_ops"],
            "cuda": summary["cuda"],
            "fee_source": "tiny-op probe" if self._fees_us else "median do-nothing op in the windows",
            "windows": sorted(windows + released, key=lambda window: window["first_step"]),
            "profiled_steps": profiled + sum(steps for _, steps in self._released),
            "timeline": self._timeline(per_window),
            "overhead": {
                "window_step_ms": inside_mean,
                "before_step_ms": before_mean,
                # Steps before a window may differ in shape (prefill vs decode): a rough ratio only.
                "slowdown": inside_mean / before_mean if inside_mean and before_mean else None,
                "engine_pause_ns": self._engine_pause_ns,
            },
        }

    def _timeline(self, per_window: list[list[ProfilerEvent]]) -> list[KernelEventRow]:
        """Every window's ops on the engine thread at their real times, on the spans' clock (see window_timeline)."""
        if self._tracer is None:
            return []
        step_starts = {
            step: start
            for state in self._tracer.thread_states()
            for name, start, _end, _self, _cpu, _depth, step in state.events.records()
            if name == STEP_SPAN and step >= 0
        }
        rows: list[KernelEventRow] = []
        for number, ((first, steps, _), events) in enumerate(zip(self._windows, per_window)):
            starts = [step_starts[step] for step in range(first, first + steps) if step in step_starts]
            if len(starts) == steps:
                rows.extend(
                    (number, first + step, op, start, end, depth, span)
                    for step, op, start, end, depth, span in window_timeline(events, starts)
                )
        return rows


def window_timeline(
    events: list[ProfilerEvent], step_starts_ns: list[int]
) -> list[tuple[int, str, int, int, int, str]]:
    """(step offset in the window, op, start_ns, end_ns, op depth, span) of each op on the engine thread.

    torch.profiler's times count from its own trace start, on its own clock; the spans tracer's count
    on perf_counter_ns. Each window is put on the tracer's clock by its step markers: the n-th
    `span:step` record_function opens within microseconds of the tracer's n-th step (but the first),
    so the median of their differences is the offset. The engine thread is the thread those markers ran on. Depth 0 is
    an op called from Python; deeper ones are ops inside ops.
    """
    markers = sorted(
        (e for e in events if e.name == SPAN_PREFIX + STEP_SPAN and not _device(e)),
        key=lambda event: event.time_range.start,
    )
    if not markers or len(markers) != len(step_starts_ns):
        return []
    pairs = list(zip(markers, step_starts_ns))
    # The window's first marker opens early (record_function's first use costs about a millisecond between its
    # clock read and the tracer's: docs/measurements.md): leave it out when there are others.
    offsets = sorted(start - round(marker.time_range.start * 1e3) for marker, start in (pairs[1:] or pairs))
    offset = offsets[len(offsets) // 2]
    thread = markers[0].thread
    rows: list[tuple[int, str, int, int, int, str]] = []
    for event in events:
        if _device(event) or event.thread != thread or not _is_op(event.name):
            continue
        start = round(event.time_range.start * 1e3) + offset
        end = round(event.time_range.end * 1e3) + offset
        step = max(0, bisect.bisect_right(step_starts_ns, start) - 1)
        depth, parent = 0, event.cpu_parent
        while parent is not None:
            depth += _is_op(parent.name)
            parent = parent.cpu_parent
        rows.append((step, event.name, start, end, depth, _span_of(event)))
    return rows


def _is_op(name: str) -> bool:
    """A dispatched torch op of any namespace: aten::mm, but also mkldnn::_linear_pointwise (the model's
    linears on CPU), quantized::..., and custom ops; span markers are `span:<name>` (one colon)."""
    return "::" in name and not name.startswith(SPAN_PREFIX)
