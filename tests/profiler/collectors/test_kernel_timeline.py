"""The deep profile's torch ops land on the engine thread at their real times, on the spans' clock."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from infer_prof.profiler.collectors.kernels import KernelCollector  # noqa: E402
from infer_prof.profiler.collectors.spans import SpanCollector  # noqa: E402
from infer_prof.profiler.session.record import kernel_event_table, span_table  # noqa: E402


def _run_steps(spans: SpanCollector, steps: int) -> None:
    weights = torch.randn(64, 64)
    for _ in range(steps):
        with spans.tracer.span("step"):
            time.sleep(0.002)  # the loop's own code: the model span does not start at the step start
            with spans.tracer.span("model"):
                hidden = torch.relu(weights @ weights)
            with spans.tracer.span("sampler"):
                hidden.argmax(-1)


def test_ops_fall_inside_the_spans_they_ran_in():
    spans = SpanCollector(cpu_time=False)
    kernels = KernelCollector(tracer=spans.tracer, first_step=1, steps=2, every=3, warm_up=False)
    spans.start()
    kernels.start()
    # Another thread running ops meanwhile: its ops are not the engine thread's.
    noise = threading.Thread(target=lambda: [torch.ones(8).sum() for _ in range(200)])
    noise.start()
    _run_steps(spans, 6)
    noise.join()
    kernels.stop()
    spans.stop()
    timeline = kernels.result()["timeline"]
    assert (
        timeline and {row[0] for row in timeline} == {0, 1} and {row[1] for row in timeline} == {1, 2, 4, 5}
    )
    bounds = {
        (step, name): (start, end)
        for state in spans.tracer.thread_states()
        for name, start, end, _s, _c, _d, step in state.events.records()
    }
    slack_ns = 50_000  # alignment is by markers opened microseconds from the tracer's own clock reads
    for _window, step, name, start, end, _depth, span in timeline:
        assert span in ("model", "sampler"), name
        low, high = bounds[(step, span)]
        assert low - slack_ns <= start <= end <= high + slack_ns, (name, step, span)
    names = {row[2] for row in timeline}
    assert {"aten::relu", "aten::argmax"} <= names and "aten::ones" not in names and "aten::sum" not in names
    assert min(row[5] for row in timeline) == 0 and max(row[5] for row in timeline) >= 1  # mm inside matmul


def test_tables_for_the_run_directory():
    spans = SpanCollector(cpu_time=False)
    spans.start()
    _run_steps(spans, 3)
    spans.stop()
    # span_table keeps the engine thread only; this test's thread stands in for it by name.
    threading.current_thread().name, name = "infer-prof-engine", threading.current_thread().name
    try:
        table = span_table(spans.tracer)
    finally:
        threading.current_thread().name = name
    assert list(table["name"][:3]) == ["step", "model", "sampler"] and list(table["depth"][:3]) == [0, 1, 1]
    assert (table["start_ns"].diff().dropna() >= 0).all()
    rows = [
        (window, 0, "aten::mm", window * 10, window * 10 + 5, 0, "model")
        for window in range(6)
        for _ in range(10)
    ]
    capped = kernel_event_table(rows, limit=30)
    assert len(capped) <= 30 and sorted(capped["window"].unique()) == [0, 2, 4], (
        "whole windows, evenly spread"
    )
