"""Collectors: the recording tracer's exact arithmetic (fake clock), GC pauses, kernel window, GPU, registry."""

from __future__ import annotations

import gc
import os
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from infer_prof.engine.trace import Tracer
from infer_prof.profiler.collectors import ProfileError, default_collectors, find_tracer, start_all, stop_all
from infer_prof.profiler.collectors.base import Collector
from infer_prof.profiler.collectors.gc import GcCollector
from infer_prof.profiler.collectors.gpu import GpuCollector
from infer_prof.profiler.collectors.kernels import KernelCollector, summarize_events
from infer_prof.profiler.collectors.registry import DEFAULT_KERNEL_WINDOWS, TRACED_RATE_HZ
from infer_prof.profiler.collectors.sampling import SamplingCollector
from infer_prof.profiler.collectors.spans import RecordingTracer, SpanCollector


class FakeClock:
    """A clock that moves only when told to (pyinstrument's fake-time pattern)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


class SlowLock:
    """A lock whose acquire takes `wait_ns` of fake time, as if another thread held it."""

    def __init__(self, clock: FakeClock, wait_ns: int) -> None:
        self.clock = clock
        self.wait_ns = wait_ns
        self.held = False

    def acquire(self) -> bool:
        self.clock.advance(self.wait_ns)
        self.held = True
        return True

    def release(self) -> None:
        self.held = False


def run_nested(tracer: RecordingTracer, clock: FakeClock, cpu: FakeClock | None = None) -> SlowLock:
    """One step: scheduler (with kv_alloc inside), a lock wait of 7, a GC pause of 4; 81 ns in all."""
    lock = SlowLock(clock, wait_ns=7)
    with tracer.span("step"):  # t=0
        clock.advance(10)
        with tracer.span("scheduler"):  # t=10
            clock.advance(30)
            if cpu:
                cpu.advance(25)
            with tracer.span("kv_alloc"):  # t=40
                clock.advance(5)
            clock.advance(2)  # t=47
        with tracer.lock(lock, "queue"):  # asked at 47, got at 54
            assert lock.held
            clock.advance(3)  # held until 57
        assert not lock.held
        clock.advance(4)
        tracer.record_pause("gc", 57, 61)
        clock.advance(20)  # t=81
    return lock


def test_recording_tracer_exact_exclusive_times_lock_waits_and_pauses(recorder: str) -> None:
    clock, cpu = FakeClock(), FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=cpu)
    assert tracer.recorder == recorder
    run_nested(tracer, clock, cpu)
    thread = tracer.summary()["threads"][threading.current_thread().name]
    spans = thread["spans"]
    # step: 81 total - scheduler 37 - lock wait 7 - gc 4 = 33 (10 before, 3 held under the lock, 20 after)
    assert spans["step"] == {"count": 1, "total_ns": 81, "self_ns": 33, "cpu_ns": 25}
    assert spans["scheduler"] == {"count": 1, "total_ns": 37, "self_ns": 32, "cpu_ns": 25}
    assert spans["kv_alloc"] == {"count": 1, "total_ns": 5, "self_ns": 5, "cpu_ns": 0}
    assert thread["locks"]["queue"] == {
        "count": 1,
        "wait_ns": 7,
        "hold_ns": 3,
        "max_wait_ns": 7,
        "by_parent": {"step": 7},
    }
    assert thread["pauses"]["gc"] == {"count": 1, "total_ns": 4, "by_parent": {"step": 4}}
    assert thread["covered_ns"] == 81


def test_a_span_nested_in_one_of_its_own_name_is_timed_as_two(recorder: str) -> None:
    # The tracer reuses one context manager per span name and thread: each use's times live on the stack.
    clock = FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=None)
    outer = tracer.span("model")
    with outer:
        clock.advance(10)
        inner = tracer.span("model")
        with inner:
            clock.advance(5)
        clock.advance(1)
    assert inner is outer  # the same object served both uses
    spans = tracer.summary()["threads"][threading.current_thread().name]["spans"]
    assert spans["model"] == {"count": 2, "total_ns": 16 + 5, "self_ns": 11 + 5, "cpu_ns": 0}


def test_step_rows_add_up_to_the_step_duration(recorder: str) -> None:
    clock = FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=None)
    run_nested(tracer, clock)
    clock.advance(100)
    run_nested(tracer, clock)
    rows = tracer.summary()["steps"]
    assert [row["step"] for row in rows] == [0, 1]
    first = rows[0]
    assert first["start_ns"] == 0 and first["end_ns"] == 81
    assert first["step_ms"] == pytest.approx(33e-6)
    assert first["scheduler_ms"] == pytest.approx(32e-6)
    assert first["kv_alloc_ms"] == pytest.approx(5e-6)
    assert first["lock_wait_ms"] == pytest.approx(7e-6)
    assert first["gc_ms"] == pytest.approx(4e-6)
    parts = sum(value for key, value in first.items() if key.endswith("_ms"))
    assert parts == pytest.approx((first["end_ns"] - first["start_ns"]) / 1e6)
    assert rows[1]["start_ns"] == 181


def test_step_phase_table_for_the_sessions_steps_csv(recorder: str) -> None:
    clock = FakeClock()
    tracer = RecordingTracer(clock=clock, cpu_clock=None)
    run_nested(tracer, clock)
    with tracer.span("tokenizer"):  # outside any step: not in the table
        clock.advance(9)
    assert tracer.step_phase_table() == {
        0: {"step": 33, "scheduler": 32, "kv_alloc": 5, "lock_wait": 7, "gc": 4}
    }


def test_spans_outside_steps_and_on_other_threads_are_kept_apart(recorder: str) -> None:
    tracer = RecordingTracer()
    both_open = threading.Barrier(2)

    def client() -> None:
        with tracer.span("tokenizer"):
            both_open.wait(timeout=5)

    worker = threading.Thread(target=client, name="client-0")
    worker.start()
    with tracer.span("step"):
        both_open.wait(timeout=5)
    worker.join()
    threads = tracer.summary()["threads"]
    assert set(threads["client-0"]["spans"]) == {"tokenizer"}
    assert set(threads[threading.current_thread().name]["spans"]) == {"step"}
    # The client's span was open at the same time but is not the engine step's child.
    assert (
        threads[threading.current_thread().name]["spans"]["step"]["self_ns"]
        == threads[threading.current_thread().name]["spans"]["step"]["total_ns"]
    )
    assert [row["step"] for row in tracer.summary()["steps"]] == [0]


def test_step_listeners_and_span_hook_see_every_step_and_span(recorder: str) -> None:
    tracer = RecordingTracer()
    seen: list[tuple[Any, ...]] = []
    tracer.add_step_listener(lambda step, begin: seen.append(("step", step, begin)))
    tracer.add_span_hook(lambda name, enter: seen.append(("span", name, enter)))
    for _ in range(2):
        with tracer.span("step"), tracer.span("model"):
            pass
    assert seen[:6] == [
        ("step", 0, True),
        ("span", "step", True),
        ("span", "model", True),
        ("span", "model", False),
        ("span", "step", False),
        ("step", 0, False),
    ]
    assert seen[6] == ("step", 1, True)


def test_several_span_hooks_each_see_every_span_until_removed(recorder: str) -> None:
    tracer = RecordingTracer()
    first: list[tuple[str, bool]] = []
    second: list[tuple[str, bool]] = []
    hook_one, hook_two = (
        (lambda name, enter: first.append((name, enter))),
        (lambda name, enter: second.append((name, enter))),
    )
    tracer.add_span_hook(hook_one)
    tracer.add_span_hook(hook_two)
    with tracer.span("model"):
        pass
    tracer.remove_span_hook(hook_one)
    with tracer.span("sampler"):
        pass
    tracer.remove_span_hook(hook_two)
    with tracer.span("d2h"):
        pass
    assert first == [("model", True), ("model", False)]
    assert second == [("model", True), ("model", False), ("sampler", True), ("sampler", False)]
    assert tracer._span_hook is None


def test_tracer_is_an_engine_tracer_and_records_only_while_enabled(recorder: str) -> None:
    collector = SpanCollector()
    tracer = collector.tracer
    assert isinstance(tracer, Tracer)
    lock = threading.Lock()
    with tracer.span("model"), tracer.lock(lock, "queue"):  # before start(): nothing recorded
        assert lock.locked()
    collector.start()
    with tracer.span("model"):
        tracer.counter("batch_size", 3)
        tracer.counter("batch_size", 5)
    collector.stop()
    with tracer.span("model"):
        pass
    result = collector.result()
    assert result["status"] == "ok"
    assert result["threads"][threading.current_thread().name]["spans"]["model"]["count"] == 1
    assert result["counters"]["batch_size"] == {"count": 2, "mean": 4.0, "min": 3, "max": 5, "last": 5}
    assert result["overhead"]["per_span_ns"] > 0 and result["window_ns"] > 0


def test_gc_pause_is_timed_and_attributed_to_the_open_span(recorder: str) -> None:
    spans = SpanCollector()
    collector = GcCollector(tracer=spans.tracer)
    spans.start()
    collector.start()
    with spans.tracer.span("sampler"):
        gc.collect()
    collector.stop()
    spans.stop()
    assert collector._on_gc not in gc.callbacks
    result = collector.result()
    name = threading.current_thread().name
    assert result["collections"] >= 1 and result["total_ns"] > 0
    assert result["by_generation"]["2"]["count"] >= 1
    assert result["by_thread"][name]["total_ns"] == result["total_ns"]
    thread = spans.result()["threads"][name]
    sampler = thread["spans"]["sampler"]
    assert thread["pauses"]["gc"]["by_parent"]["sampler"] == sampler["total_ns"] - sampler["self_ns"]
    assert collector.pauses()[0][1] == name


def test_kernel_window_attributes_aten_time_to_spans() -> None:
    spans = SpanCollector(cpu_time=False)
    kernels = KernelCollector(tracer=spans.tracer, first_step=1, steps=2, every=3)
    spans.start()
    kernels.start()
    weights = torch.randn(32, 32)
    for _ in range(6):
        with spans.tracer.span("step"):
            with spans.tracer.span("model"):
                hidden = torch.relu(weights @ weights)
            with spans.tracer.span("sampler"):
                hidden.argmax(-1)
    kernels.stop()
    spans.stop()
    result = kernels.result()
    assert result["status"] == "ok"
    assert [(w["first_step"], w["steps"]) for w in result["windows"]] == [(1, 2), (4, 2)]
    assert result["profiled_steps"] == 4
    # Each window carries its own split; together they make up the pooled one.
    for key in ("aten_self_ns", "fee_ns"):
        pooled = result["by_span"]["model"][key]
        assert sum(w["by_span"]["model"][key] for w in result["windows"]) == pytest.approx(pooled)
    assert 0 < result["by_span"]["model"]["fee_ns"] < result["by_span"]["model"]["aten_self_ns"]
    assert result["by_span"]["model"]["ops"] >= 4 and result["by_span"]["model"]["aten_self_ns"] > 0
    assert result["by_span"]["sampler"]["ops"] >= 2
    assert result["top_level_ops_per_step"] == pytest.approx(3.0)  # matmul, relu, argmax
    assert result["cuda"] is None or torch.cuda.is_available()
    assert spans.tracer._span_hook is None  # the hook is removed when the window closes


def test_kernel_windows_thin_out_evenly_when_the_cap_is_reached() -> None:
    spans = SpanCollector(cpu_time=False)
    kernels = KernelCollector(
        tracer=spans.tracer, first_step=0, steps=1, every=1, max_windows=4, mark_spans=False
    )
    spans.start()
    kernels.start()
    for _ in range(10):
        with spans.tracer.span("step"):
            torch.ones(2).add_(1)
    kernels.stop()
    spans.stop()
    # Windows at 0-3 reach the cap: period 2 keeps 0, 2 and adds 4, 6; period 4 keeps 0, 4 and adds 8.
    assert [window["first_step"] for window in kernels.result()["windows"]] == [0, 4, 8]


def test_a_paused_kernel_collector_opens_no_window_until_resumed() -> None:
    spans = SpanCollector(cpu_time=False)
    kernels = KernelCollector(tracer=spans.tracer, first_step=0, steps=1, every=2, mark_spans=False)
    spans.start()
    kernels.start()
    for step in range(8):
        if step == 2:
            assert kernels.pause()  # the in-run A/B's "off" block: steps 2-5 are due at 2 and 4, none opens
        if step == 6:
            kernels.resume()
        with spans.tracer.span("step"):
            torch.ones(2).add_(1)
    kernels.stop()
    spans.stop()
    assert [window["first_step"] for window in kernels.result()["windows"]] == [0, 6]


def _window_steps(
    steps: int,
    *,
    first_step: int,
    min_gap_s: float,
    step_s: float,
    profiled_step_s: float | None = None,
    cost_budget: float | None = None,
    paused: tuple[int, int] | None = None,
    first_windows: int = 0,
    first_gap_s: float = 0.5,
) -> list[int]:
    """First steps of the kernel windows over `steps` steps of `step_s` seconds (`profiled_step_s` inside a
    window), due at every even step from `first_step`, at least `min_gap_s` apart and within `cost_budget`
    of the time; `paused`: (step, step) the collector is paused from and resumed at."""
    spans = SpanCollector(cpu_time=False)
    now = [0]
    kernels = KernelCollector(
        tracer=spans.tracer,
        first_step=first_step,
        steps=1,
        every=2,
        min_gap_s=min_gap_s,
        cost_budget=cost_budget,
        first_windows=first_windows,
        first_gap_s=first_gap_s,
        mark_spans=False,
        clock=lambda: now[0],
    )
    spans.start()
    kernels.start()
    for step in range(steps):
        if paused and step == paused[0]:
            kernels.pause()
        if paused and step == paused[1]:
            kernels.resume()
        with spans.tracer.span("step"):
            torch.ones(2).add_(1)
            profiled = profiled_step_s is not None and kernels._profile is not None
            now[0] += int((profiled_step_s if profiled else step_s) * 1e9)
    kernels.stop()
    spans.stop()
    return [window["first_step"] for window in kernels.result()["windows"]]


def _windows_a_second_apart(steps: int, paused: tuple[int, int] | None = None) -> list[int]:
    """Steps 0.3 s long, windows due at every even step and at least 1 s apart."""
    return _window_steps(steps, first_step=0, min_gap_s=1.0, step_s=0.3, paused=paused)


def test_a_due_kernel_window_waits_for_the_minimum_gap_after_the_last_one() -> None:
    # Due at 0, 2, 4, 6, 8 (0, 0.6, 1.2, 1.8, 2.4 s): 2 is 0.6 s after 0, and 6 is 0.6 s after 4.
    assert _windows_a_second_apart(10) == [0, 4, 8]


def test_time_paused_does_not_count_towards_the_windows_gap() -> None:
    # Window at 0 s; paused 0.3-1.5 s (as the in-run A/B's "off" blocks are), so 1.0 s of unpaused time
    # has passed only at 2.2 s: step 8 (2.4 s) opens the next one, not step 6 (1.8 s, 0.6 s unpaused),
    # as it would without the pause.
    assert _windows_a_second_apart(12, paused=(1, 5)) == [0, 8]


def _windows_that_cost(steps: int, cost_budget: float | None) -> list[int]:
    """Steps of 0.1 s, 0.3 s inside a window; windows due at every even step from 2, at least 0.5 s apart."""
    return _window_steps(
        steps, first_step=2, min_gap_s=0.5, step_s=0.1, profiled_step_s=0.3, cost_budget=cost_budget
    )


def test_a_window_that_cost_more_than_its_budget_pushes_the_next_one_further_off() -> None:
    # The window at step 2 (0.2 s) made its step 0.2 s longer than the one before: at a 10% budget the next
    # may open 2 s after it, at step 20 (0.5 s + 17 steps of 0.1 s); the 0.5 s minimum alone allows step 6.
    assert _windows_that_cost(24, cost_budget=0.1) == [2, 20]
    assert _windows_that_cost(24, cost_budget=None)[:3] == [2, 6, 10]


def test_the_first_windows_open_at_their_own_gap_then_the_budget_rules() -> None:
    # Steps of 0.1 s, 0.3 s inside a window, due at every even step from 2. The first three windows need only
    # 0.2 s between openings, outside the 10% budget: each due step opens one (2, 4, 6: a profiled step alone
    # is 0.3 s); then the third's cost pushes the fourth 2 s off (step 24), as the budget alone did after one.
    budgeted = _window_steps(
        40,
        first_step=2,
        min_gap_s=0.5,
        step_s=0.1,
        profiled_step_s=0.3,
        cost_budget=0.1,
        first_windows=3,
        first_gap_s=0.2,
    )
    assert budgeted == [2, 4, 6, 24]
    assert _windows_that_cost(40, cost_budget=0.1) == [2, 20, 38]


def test_kernel_windows_refuse_an_impossible_schedule() -> None:
    with pytest.raises(ValueError, match="every >= steps"):
        KernelCollector(first_step=0, steps=5, every=2, warm_up=False)
    with pytest.raises(ValueError, match="min_gap_s >= 0"):
        KernelCollector(first_step=0, steps=1, every=2, min_gap_s=-1.0, warm_up=False)
    with pytest.raises(ValueError, match="cost_budget in"):
        KernelCollector(first_step=0, steps=1, every=2, cost_budget=0.0, warm_up=False)


def test_kernel_window_not_reached_reports_so() -> None:
    spans = SpanCollector(cpu_time=False)
    kernels = KernelCollector(tracer=spans.tracer, first_step=50, steps=5, warm_up=False)
    spans.start()
    kernels.start()
    with spans.tracer.span("step"):
        pass
    kernels.stop()
    result = kernels.result()
    assert result["status"] == "ok" and result["aten_self_ns"] is None and "before step 50" in result["note"]


def fake_event(
    name: str,
    start: float,
    end: float,
    self_us: float,
    parent: Any = None,
    device: str = "CPU",
    device_us: float = 0.0,
) -> SimpleNamespace:
    """The FunctionEvent fields summarize_events reads (times in us, as torch.profiler gives them)."""
    return SimpleNamespace(
        name=name,
        time_range=SimpleNamespace(start=start, end=end),
        self_cpu_time_total=self_us,
        cpu_parent=parent,
        device_type=f"DeviceType.{device}",
        self_device_time_total=device_us,
    )


def test_summarize_events_counts_cuda_runtime_as_torch_time_and_finds_gpu_gaps() -> None:
    model = fake_event("span:model", 0, 100, 10)
    mm = fake_event("aten::mm", 5, 60, 20, model, device_us=30)
    launch = fake_event("cudaLaunchKernel", 10, 15, 5, mm)
    sampler = fake_event("span:sampler", 100, 200, 5)
    copy = fake_event("aten::copy_", 110, 190, 2, sampler)
    sync = fake_event("cudaStreamSynchronize", 111, 189, 78, copy)
    outside = fake_event("aten::add", 200, 210, 4)
    kernels = [
        fake_event("sgemm_kernel", 20, 50, 0, device="CUDA"),
        fake_event("sgemm_kernel", 40, 80, 0, device="CUDA"),
        fake_event("copy_kernel", 150, 160, 0, device="CUDA"),
        # Kineto's GPU-side copy of a span marker, covering the whole span: no kernel, and no busy time.
        fake_event("span:sampler", 100, 200, 0, device="CUDA"),
    ]
    summary = summarize_events([model, mm, launch, sampler, copy, sync, outside, *kernels], steps=1)
    assert summary["by_span"]["model"] == {
        "aten_self_ns": 20_000,
        "fee_ns": 0.0,
        "ops": 1,
        "device_ns": 30_000,
        "runtime_ns": 5_000,
    }
    assert (
        summary["by_span"]["sampler"]["runtime_ns"] == 78_000
        and summary["by_span"]["sampler"]["aten_self_ns"] == 2_000
    )
    assert summary["by_span"][""]["aten_self_ns"] == 4_000
    assert (
        summary["aten_self_ns"] == 26_000
        and summary["ops_per_step"] == 3
        and summary["top_level_ops_per_step"] == 3
    )
    # GPU busy = [20, 80] + [150, 160] = 70 us of the CPU window [0, 210]: 140 us of gaps.
    cuda = dict(summary["cuda"])
    assert cuda.pop("top_kernels") == [
        {"name": "sgemm_kernel", "device_ns": 70_000, "count": 2},
        {"name": "copy_kernel", "device_ns": 10_000, "count": 1},
    ]
    assert cuda == pytest.approx(
        {
            "kernels": 3,
            "kernel_ns": 80_000,
            "busy_ns": 70_000,
            "window_ns": 210_000,
            "idle_gap_ns": 140_000,
            "gpu_idle_fraction": 140 / 210,
            "mean_kernel_ns": 80_000 / 3,
        }
    )
    assert summary["launches_per_step"] == 1  # the one cudaLaunchKernel; the synchronize is no launch


def test_summarize_events_prices_the_framework_fee_with_the_do_nothing_ops() -> None:
    model = fake_event("span:model", 0, 100, 10)
    view = fake_event("aten::view", 1, 3, 2, model)
    select = fake_event("aten::select", 4, 10, 3, model)  # calls as_strided: not a leaf, not priced
    strided = fake_event("aten::as_strided", 5, 9, 4, select)
    mm = fake_event("aten::mm", 10, 60, 50, model)
    tiny = fake_event("aten::add", 60, 61, 1, model)  # cheaper than the fee: all of it is fee
    summary = summarize_events([model, view, select, strided, mm, tiny], steps=1)
    # Leaf do-nothing ops: view 2 us, as_strided 4 us -> median (upper) 4 us per op.
    assert summary["op_fee_ns"] == 4_000
    # Fee: view 2 + select 3 + as_strided 4 (whole) + mm 4 + add 1 (capped at its self time) = 14 us.
    assert summary["by_span"]["model"]["fee_ns"] == 14_000
    assert summary["by_span"]["model"]["aten_self_ns"] == 60_000
    assert {op["name"]: op["fee_op"] for op in summary["top_ops"]}["aten::view"] is True


class _FakeRates:
    gpu, memory = 50, 20


class _FakeMemory:
    total, used = 8 * 2**30, 2**30


class FakeNvml:
    """Just enough of pynvml for the collector."""

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.last_seen: list[int] = []

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "Fake H200"

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.0"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _FakeMemory:
        return _FakeMemory()

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _FakeRates:
        return _FakeRates()

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        # Another process on the same GPU holds more memory: the collector must report only its own.
        return [
            SimpleNamespace(pid=os.getpid(), usedGpuMemory=300 * 2**20),
            SimpleNamespace(pid=os.getpid() + 1, usedGpuMemory=5 * 2**30),
        ]

    def nvmlDeviceGetProcessUtilization(self, handle: int, last_seen: int) -> list[Any]:
        self.last_seen.append(last_seen)
        stamp = len(self.last_seen) * 1000
        return [
            SimpleNamespace(pid=os.getpid(), smUtil=35, timeStamp=stamp),
            SimpleNamespace(pid=os.getpid() + 1, smUtil=90, timeStamp=stamp),
        ]


def test_gpu_collector_skips_without_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("infer_prof.profiler.collectors.gpu._nvml", lambda: FakeNvml(fail_init=True))
    collector = GpuCollector()
    collector.start()
    collector.stop()
    assert collector.result() == {
        "status": "skipped",
        "reason": "no NVIDIA GPU/driver (NVML Shared Library Not Found)",
    }


def test_gpu_collector_on_this_machine_never_crashes() -> None:
    collector = GpuCollector(interval_s=0.01)
    collector.start()
    collector.stop()
    entry = collector.status_entry()
    assert entry["status"] in ("ok", "skipped")
    if entry["status"] == "skipped":
        assert entry["reason"].startswith("no NVIDIA GPU/driver")


def test_gpu_collector_samples_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml()
    monkeypatch.setattr("infer_prof.profiler.collectors.gpu._nvml", lambda: nvml)
    collector = GpuCollector(interval_s=0.005)
    collector.start()
    threading.Event().wait(0.05)
    collector.stop()
    result = collector.result()
    assert result["status"] == "ok" and result["device"] == "Fake H200" and result["samples"] >= 1
    assert result["utilization_pct"]["mean"] == 50 and result["memory_used_mib"]["max"] == 1024
    process = result["process"]
    assert process["pid"] == os.getpid() and process["memory_used_mib"]["max"] == 300
    assert process["sm_utilization_pct"]["max"] == 35  # this process's, not the other one's 90
    assert nvml.last_seen[:2] == [0, 1000]  # each reading asks only for samples newer than the last one


def test_sampling_collector_without_py_spy_is_skipped_with_reason() -> None:
    collector = SamplingCollector(py_spy="/nonexistent/py-spy")
    collector.start()
    collector.stop()
    result = collector.result()
    assert result["status"] == "skipped"
    assert "py-spy is not installed" in result["reason"] and "pip install py-spy" in result["reason"]


def test_a_collector_that_breaks_reports_failed_and_the_run_goes_on() -> None:
    class Broken(Collector):
        name = "broken"

        def _start(self) -> None:
            raise OSError("device busy")

    collector = Broken()
    collector.start()
    collector.stop()
    assert collector.result() == {"status": "failed", "reason": "could not start: OSError: device busy"}


def test_registry_profiles() -> None:
    assert default_collectors("off") == []
    default = default_collectors("default")
    assert [c.name for c in default] == ["spans", "gc", "kernels", "gpu", "sampling"]
    windows = default[2]  # sparse: the model span's kernel share measured in every run, at ~0.5%
    assert (windows.first_step, windows.steps, windows.every) == DEFAULT_KERNEL_WINDOWS  # type: ignore[attr-defined]
    sampling = default[-1]
    assert (
        isinstance(sampling, SamplingCollector)
        and not sampling.native_stacks
        and sampling.rate == TRACED_RATE_HZ
    )
    deep = default_collectors("deep", kernel_windows=(3, 2, 10))
    assert [c.name for c in deep] == ["spans", "gc", "kernels", "gpu", "sampling"]
    assert deep[-1].native_stacks  # type: ignore[attr-defined]
    assert find_tracer(deep) is deep[0].tracer  # type: ignore[attr-defined]
    with pytest.raises(ProfileError, match="--profile='fast'"):
        default_collectors("fast")


def test_registry_wraps_the_sessions_tracer() -> None:
    tracer = RecordingTracer()  # made and injected into the engine before the collectors exist
    with tracer.span("step"):
        pass
    collectors = default_collectors(
        "default", tracer=tracer, engine_thread_name="infer-prof-engine", py_spy="/nonexistent/py-spy"
    )
    assert find_tracer(collectors) is tracer
    start_all(collectors)
    with tracer.span("step"):
        pass
    stop_all(collectors)
    spans = collectors[0].result()
    assert spans["threads"][threading.current_thread().name]["spans"]["step"]["count"] == 2


def test_registry_start_stop_without_py_spy_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    collectors = default_collectors("default", py_spy="/nonexistent/py-spy")
    start_all(collectors)
    tracer = find_tracer(collectors)
    assert tracer is not None
    with tracer.span("step"):
        pass
    stop_all(collectors)
    statuses = {c.name: c.status for c in collectors}
    assert statuses["spans"] == "ok" and statuses["gc"] == "ok" and statuses["sampling"] == "skipped"


def test_record_log_keeps_names_and_numbers_aligned() -> None:
    from infer_prof.profiler.collectors.spans import RecordLog

    log = RecordLog(2, 3)
    for i in range(5):
        log.names.extend((f"lock{i}", "parent"))
        log.values.extend((i, 10**15 + i, -1))
    assert len(log) == 5
    assert list(log.records())[3] == ("lock3", "parent", 3, 10**15 + 3, -1)


def test_counters_of_two_threads_come_back_in_time_order() -> None:
    import threading

    from infer_prof.profiler.collectors.spans import RecordingTracer

    ticks = iter(range(100, 200))
    tracer = RecordingTracer(clock=lambda: next(ticks), cpu_clock=None)
    tracer.counter("batch_size", 1)
    other = threading.Thread(target=lambda: tracer.counter("kv_utilization", 0.5))
    other.start()
    other.join()
    tracer.counter("batch_size", 3)
    assert tracer.counters() == [
        ("batch_size", 100, 1.0),
        ("kv_utilization", 101, 0.5),
        ("batch_size", 102, 3.0),
    ]
