"""result.json's gpu_time from the device timer, the engine thread's spans and the requests in flight."""

from __future__ import annotations

import threading

from infer_prof.engine.engine import ENGINE_THREAD_NAME
from infer_prof.profiler.collectors.device_time import DeviceTimeCollector
from infer_prof.profiler.collectors.spans import RecordingTracer
from infer_prof.profiler.session.gpu_time import gpu_time_section
from tests.support.fake_gpu import FakeGpu, run_steps


def test_the_section_splits_the_engine_threads_steps_and_leaves_client_threads_out() -> None:
    gpu = FakeGpu()
    tracer = RecordingTracer(clock=gpu.clock, cpu_clock=None)
    timer = DeviceTimeCollector(tracer=tracer, device="cuda:0", event_factory=gpu.event)
    timer.start()

    def engine_loop() -> None:  # two steps of 80 ns (50 of them the model's kernels), then 40 ns idle
        run_steps(gpu, tracer, 2)
        gpu.now += 40

    thread = threading.Thread(target=engine_loop, name=ENGINE_THREAD_NAME)
    thread.start()
    thread.join()
    with tracer.span("tokenizer"):  # a client thread's span: not the engine's, not in the split
        pass
    timer.stop()
    rows = [
        {"arrival_ns": 0, "finish_ns": 160},
        {"arrival_ns": 5, "finish_ns": None},
    ]  # the second never finished
    section = gpu_time_section(
        timer,
        tracer,
        rows,
        (0, gpu.now),
        engine_thread_name=ENGINE_THREAD_NAME,
        kernels={"launches_per_step": 12.0, "profiled_steps": 2, "cuda": {"kernels": 24}},
        nvml={"status": "ok", "process": {"pid": 7, "samples": 3}, "overhead": {"sampler_cpu_s": 0.1}},
    )
    assert section is not None and "status" not in section
    assert section["window_ns"] == 200 and section["device_busy_ns"] == 100
    assert section["idle_host_ns"] == 60 and section["idle_no_work_ns"] == 40
    assert section["idle_host_by_component"] == {"scheduler": 1 / 3, "sampler": 2 / 3}
    assert section["launches_per_step"] == 12.0 and section["kernels_per_step"] == 12.0
    assert section["nvml"] == {"status": "ok", "process": {"pid": 7, "samples": 3}}  # its cost is in overhead
    assert timer.timeline() == [
        (0, "model", 10, 60),
        (0, "d2h", 60, 60),
        (1, "model", 90, 140),
        (1, "d2h", 140, 140),
    ]


def test_nvml_figures_keep_the_status_and_reason_of_a_collector_that_did_not_run() -> None:
    from infer_prof.profiler.session.gpu_time import nvml_figures

    assert nvml_figures({"status": "failed", "reason": "NVML_ERROR_NO_PERMISSION", "samples": 0}) == {
        "status": "failed",
        "reason": "NVML_ERROR_NO_PERMISSION",
    }
    assert nvml_figures(None) == {"status": "off", "reason": None}


def test_no_section_without_a_device_timer_that_ran() -> None:
    tracer = RecordingTracer()
    skipped = DeviceTimeCollector(tracer=tracer, device="cpu")
    assert gpu_time_section(None, tracer, [], (0, 1), engine_thread_name=ENGINE_THREAD_NAME) is None
    assert gpu_time_section(skipped, tracer, [], (0, 1), engine_thread_name=ENGINE_THREAD_NAME) is None
