"""The device timer with a fake GPU and a fake clock: CUDA-event pairs around device-work spans become busy time."""

from __future__ import annotations

from infer_prof.profiler.analysis.gpu_idle import device_intervals, gpu_idle_split
from infer_prof.profiler.collectors.base import OK, SKIPPED
from infer_prof.profiler.collectors.device_time import DeviceTimeCollector
from infer_prof.profiler.collectors.spans import RecordingTracer
from tests.support.fake_gpu import FakeEvent, FakeGpu, run_steps


def test_event_pairs_measure_the_device_work_and_the_split_finds_the_host_bound_idle() -> None:
    gpu = FakeGpu()
    tracer = RecordingTracer(clock=gpu.clock, cpu_clock=None)
    collector = DeviceTimeCollector(tracer=tracer, device="cuda:0", event_factory=gpu.event)
    collector.start()
    run_steps(gpu, tracer, 3)
    collector.stop()
    assert collector.status == OK
    result = collector.result()
    # Each step: the model's pair spans its 50 ns of kernels, the copy's pair holds no work.
    assert result["pairs"] == 6 and result["steps"] == 3 and result["device_busy_ns"] == 150
    intervals = device_intervals(collector.pairs())
    split = gpu_idle_split(
        window=(0, gpu.now),
        device=intervals,
        steps=[(0, gpu.now)],
        in_flight=[(0, gpu.now)],
        spans={"scheduler": [(0, 10), (80, 90), (160, 170)], "sampler": [(60, 80), (140, 160), (220, 240)]},
    )
    # A step takes 10 + 50 + 20 = 80 ns (the 5 ns of launching overlap the kernels); the device idles 30.
    assert gpu.now == 240 and split["device_busy_ns"] == 150 and split["idle_host_ns"] == 90
    assert split["idle_host_by_component"] == {"scheduler": 1 / 3, "sampler": 2 / 3}


def test_a_host_only_span_paired_would_time_the_host() -> None:
    """Why the sampler's span is never paired: an idle stream reaches the end event when it is recorded."""
    gpu = FakeGpu()
    tracer = RecordingTracer(clock=gpu.clock, cpu_clock=None)
    collector = DeviceTimeCollector(
        tracer=tracer, device="cuda:0", spans=("sampler",), event_factory=gpu.event
    )
    collector.start()
    run_steps(gpu, tracer, 1)
    collector.stop()
    assert collector.pairs() == [(60, 20)]  # 20 ns of host sampling, no device work at all


def test_pairs_are_read_without_blocking_the_engine_and_the_rest_at_stop() -> None:
    gpu = FakeGpu()
    tracer = RecordingTracer(clock=gpu.clock, cpu_clock=None)
    collector = DeviceTimeCollector(tracer=tracer, device="cuda:0", event_factory=gpu.event)
    collector.start()
    with tracer.span("step"), tracer.span("model"):
        gpu.launch(1_000)  # still running when the span ends: its pair cannot be read yet
    assert collector.pairs() == []
    collector.stop()  # waits for the device
    assert collector.pairs() == [(0, 1_000)]
    assert tracer._span_hook is None  # unhooked at stop


def test_events_are_reused_from_a_pool() -> None:
    gpu = FakeGpu()
    made: list[FakeEvent] = []

    def factory() -> FakeEvent:
        made.append(gpu.event())
        return made[-1]

    tracer = RecordingTracer(clock=gpu.clock, cpu_clock=None)
    collector = DeviceTimeCollector(tracer=tracer, device="cuda:0", event_factory=factory)
    collector.start()
    run_steps(gpu, tracer, 20)
    collector.stop()
    assert collector.result()["pairs"] == 40 and len(made) <= 4


def test_a_cpu_engine_has_no_device_timeline() -> None:
    collector = DeviceTimeCollector(tracer=RecordingTracer(), device="cpu")
    collector.start()
    assert collector.status == SKIPPED and "CPU" in (collector.reason or "")
