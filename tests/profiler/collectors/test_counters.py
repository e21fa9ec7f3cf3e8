"""The counting mode: exact, deterministic counts on a tiny seeded workload standing in for engine steps."""

from __future__ import annotations

import threading

import pytest
import torch

from infer_prof.profiler.collectors.counters import CounterCollector


def _double(value: int) -> int:
    return value * 2


class FakeAdapter:
    """Stands in for a native adapter: one foreign call per step, counted in `calls`."""

    def __init__(self) -> None:
        self.calls = 0

    def step(self) -> None:
        self.calls += 1


def make_workload(seed: int, python_calls: int = 3):
    """A seeded fake engine step: some Python calls, some torch ops (one view, one in-place)."""
    generator = torch.Generator().manual_seed(seed)
    adapter = FakeAdapter()

    def step(batch: int) -> int:
        for _ in range(python_calls):
            _double(batch)
        logits = torch.randn(batch, 16, generator=generator)  # 1 op, 1 allocation
        scaled = logits * 0.5  # 1 op, 1 allocation
        flat = scaled.view(-1)  # 1 op, a view: no allocation
        flat.add_(1.0)  # 1 op, in place: no allocation
        adapter.step()
        return int(torch.argmax(scaled[0]).item())  # select (view) + argmax (alloc) + item

    return step, adapter


def run_counted(seed: int, *, python_calls: int = 3, steps: int = 6, **options) -> dict[str, float]:
    step, adapter = make_workload(seed, python_calls)
    collector = CounterCollector(native_counters=[adapter], **options)
    counted = collector.wrap_step(step)
    counted(2)  # warm-up step, before start(): not counted
    collector.start()
    for index in range(steps):
        counted(1 + index % 3)
        collector.add_tokens(1 + index % 3)
    collector.stop()
    return collector.result()


def test_same_seeded_run_gives_the_same_counts_twice() -> None:
    first, second = run_counted(seed=1), run_counted(seed=1)
    assert first == second
    assert run_counted(seed=2) == first  # counts are about work done, not about the random values


def test_python_calls_are_exact_and_exclude_the_collectors_own_work() -> None:
    base = run_counted(seed=0, python_calls=3)
    more = run_counted(seed=0, python_calls=13)
    assert more["python_calls_per_step"] - base["python_calls_per_step"] == 10
    without_torch = run_counted(seed=0, python_calls=3, torch_ops=False)
    # Counting torch ops must not add Python calls of its own (its dispatch handler is excluded).
    assert without_torch["python_calls_per_step"] == base["python_calls_per_step"]
    assert base["python_calls_per_token"] == pytest.approx(base["python_calls_per_step"] * 6 / 12)


def test_torch_ops_allocations_and_native_calls_per_step() -> None:
    counts = run_counted(seed=0)
    assert counts["steps"] == 6 and counts["generated_tokens"] == 12
    assert counts["torch_ops_per_step"] == 7  # randn, mul, view, add_, select, argmax, item
    assert counts["allocations_per_step"] == 3  # randn, mul, argmax: views and in-place ops allocate nothing
    assert counts["native_calls_per_step"] == 1
    assert counts["bytes_copied_per_step"] == 0  # CPU only


def test_native_counter_may_be_a_callable_hook() -> None:
    calls = [0]

    def hook() -> int:
        return calls[0]

    collector = CounterCollector(python_calls=False, torch_ops=False, native_counters=[hook])
    counted = collector.wrap_step(lambda: calls.__setitem__(0, calls[0] + 2))
    collector.start()
    counted()
    counted()
    collector.stop()
    assert collector.result()["native_calls_per_step"] == 2


def test_steps_outside_start_stop_and_on_other_threads_are_not_counted() -> None:
    step, _ = make_workload(0)
    collector = CounterCollector()
    counted = collector.wrap_step(step)
    counted(1)
    collector.start()
    noise = threading.Thread(target=lambda: [_double(i) for i in range(1000)])
    noise.start()
    counted(1)
    noise.join()
    collector.stop()
    counted(1)
    alone = run_counted(seed=0, steps=1)
    assert collector.steps == 1
    assert collector.result()["python_calls_per_step"] == alone["python_calls_per_step"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host<->device copies need a GPU")
def test_host_device_copies_are_counted_in_bytes() -> None:
    collector = CounterCollector(python_calls=False)
    counted = collector.wrap_step(lambda: torch.ones(256, dtype=torch.float32).to("cuda").cpu())
    collector.start()
    counted()
    collector.stop()
    assert collector.result()["bytes_copied_per_step"] == 2 * 256 * 4


def test_an_adapter_passed_twice_counts_once() -> None:
    adapter = FakeAdapter()
    collector = CounterCollector(python_calls=False, torch_ops=False, native_counters=[adapter, adapter])
    counted = collector.wrap_step(adapter.step)
    collector.start()
    counted()
    collector.stop()
    assert collector.result()["native_calls_per_step"] == 1


@pytest.mark.parametrize("native, per_step", [("all", 4), ("core,sampler", 2), ("prepare", 1)])
def test_one_native_call_per_component_per_step_through_the_engine(native: str, per_step: int) -> None:
    from infer_prof.engine.config import EngineConfig
    from infer_prof.engine.engine import Engine
    from infer_prof.engine.types import SamplingParams
    from infer_prof.native_paths import loader
    from infer_prof.native_paths.toggles import make_components
    from tests.engine.fakes import FakeModel, FakeTokenizer

    if not loader.available()["built"]:
        pytest.skip("native extension not built")
    model = FakeModel()
    config = EngineConfig(block_size=4, kv_blocks=64, max_batch=4, max_batched_tokens=64)
    parts = make_components(native, num_blocks=64, block_size=4, max_batch=4, max_batched_tokens=64)
    engine = Engine(
        model,
        FakeTokenizer(),
        scheduler=parts.scheduler,
        kv_alloc=parts.kv_alloc,
        sampler=parts.sampler,
        prepare=parts.prepare,
        config=config,
    )
    counters = [
        part
        for part in (parts.scheduler, parts.kv_alloc, parts.prepare, parts.sampler)
        if hasattr(part, "calls")
    ]
    collector = CounterCollector(python_calls=False, torch_ops=False, native_counters=counters)
    engine._step = collector.wrap_step(engine._step)
    handles = [engine.submit([5, 6, 7, 8], SamplingParams(max_tokens=6, ignore_eos=True)) for _ in range(3)]
    collector.start()
    with engine:
        for handle in handles:
            handle.result(timeout=60)
    collector.stop()
    counts = collector.result()
    # Every step that computes calls each native component once; the last step only hands blocks back.
    assert per_step - 1 < counts["native_calls_per_step"] <= per_step
