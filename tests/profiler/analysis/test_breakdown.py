"""The time split on synthetic collector results whose answers are worked out by hand."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infer_prof.profiler.analysis.breakdown import build_breakdown
from infer_prof.profiler.rundir.results import CATEGORIES, COMPONENTS

ENGINE = "infer-prof-engine"
WALL = 1000  # ns; every number below is a share of it


def span(self_ns: int) -> dict[str, int]:
    return {"count": 1, "total_ns": self_ns, "self_ns": self_ns, "cpu_ns": self_ns}


def spans_result() -> dict[str, Any]:
    """Engine thread: spans' self times 680, lock waits 40 in the scheduler + 10 outside spans,
    GC 20 in the sampler + 10 outside; covered = 680 + 40 + 20 = 740; window = steps 0-1."""
    return {
        "status": "ok",
        "reason": None,
        "threads": {
            ENGINE: {
                "native_ids": [11],
                "spans": {
                    "step": span(50),
                    "scheduler": span(100),
                    "kv_alloc": span(20),
                    "model": span(400),
                    "sampler": span(80),
                    "detokenizer": span(30),
                },
                "locks": {
                    "queue": {
                        "count": 2,
                        "wait_ns": 50,
                        "hold_ns": 5,
                        "max_wait_ns": 40,
                        "by_parent": {"scheduler": 40, "": 10},
                    }
                },
                "pauses": {"gc": {"count": 2, "total_ns": 30, "by_parent": {"sampler": 20, "": 10}}},
                "covered_ns": 740,
                "spans_recorded": 8,
            },
            "client-0": {
                "native_ids": [12],
                "spans": {"tokenizer": span(300)},
                "locks": {},
                "pauses": {},
                "covered_ns": 300,
                "spans_recorded": 1,
            },
        },
        # Kernel window steps 0..1: model self 200 ns, sampler self 80 ns in those steps (ms units).
        "steps": [
            {"step": 0, "model_ms": 1e-4, "sampler_ms": 4e-5},
            {"step": 1, "model_ms": 1e-4, "sampler_ms": 4e-5},
            {"step": 2, "model_ms": 2e-4, "sampler_ms": 0.0},
        ],
        "counters": {},
        "window_ns": WALL,
    }


def kernels_result() -> dict[str, Any]:
    """aten self time in the window: model 150 of 200 (75%), sampler 40 of 80 (50%); 40 ns engine pause."""
    return {
        "status": "ok",
        "reason": None,
        "windows": [{"first_step": 0, "steps": 2}],
        "profiled_steps": 2,
        "aten_self_ns": 190,
        "by_span": {
            "model": {"aten_self_ns": 150, "ops": 10, "device_ns": 0},
            "sampler": {"aten_self_ns": 40, "ops": 4, "device_ns": 0},
            "": {"aten_self_ns": 5, "ops": 1, "device_ns": 0},
        },
        "overhead": {"engine_pause_ns": 40},
    }


def sampling_result(*, native: bool = True) -> dict[str, Any]:
    engine = {
        "thread_ids": [11],
        "samples": 100,
        "native_samples": 100 if native else 0,
        "categories": {"interpreter": 30, "kernel": 40, "lock": 5, "allocation": 5, "idle": 20},
        "components": {"model_kernels": 40, "model_glue": 10, "scheduler": 15, "sampler": 10, "none": 25},
        "dispatch": 8,
    }
    return {
        "status": "ok",
        "reason": None,
        "mode": "native" if native else "nonblocking",
        "engine_thread_id": 11,
        "threads": {
            ENGINE: engine,
            "client-0": {
                "thread_ids": [12],
                "samples": 50,
                "native_samples": 0,
                "categories": {"interpreter": 30, "lock": 20},
                "components": {"none": 50},
                "dispatch": 0,
            },
            "infer-prof-nvml": {
                "thread_ids": [13],
                "samples": 50,
                "native_samples": 50,
                "categories": {"idle": 50},
                "components": {"none": 50},
                "dispatch": 0,
            },
        },
    }


def all_results(**overrides: Any) -> dict[str, Any]:
    results = {
        "spans": spans_result(),
        "kernels": kernels_result(),
        "sampling": sampling_result(),
        "gc": {"status": "ok", "reason": None, "by_thread": {ENGINE: {"count": 2, "total_ns": 30}}},
    }
    results.update(overrides)
    return results


def test_spans_split_matches_the_hand_computed_answer() -> None:
    breakdown = build_breakdown(all_results(), wall_ns=WALL)
    spans = breakdown["methods"]["spans"]
    # kernel = 400 x 0.75 + 80 x 0.5 = 340; interpreter = 680 - 340 = 340; lock = 50; allocation = 30;
    # idle = (1000 - 740) - 10 (GC outside) - 10 (lock outside) - 40 (profiler pause) = 200; other = 40.
    assert spans["categories"] == pytest.approx(
        {
            "interpreter": 0.34,
            "lock": 0.05,
            "allocation": 0.03,
            "kernel": 0.34,
            "idle": 0.20,
            "waiting": 0.0,
            "other": 0.04,
        }
    )
    assert sum(spans["categories"].values()) == pytest.approx(1.0)
    assert spans["components"] == pytest.approx(
        {
            "scheduler": 0.14,
            "sampler": 0.10,
            "kv_alloc": 0.02,
            "prepare": 0.0,
            "tokenizer": 0.0,
            "detokenizer": 0.03,
            "model_glue": 0.10,
            "model_kernels": 0.30,
            "d2h": 0.0,  # a CPU model: no logits copied to the host
            "queue": 0.0,
            "api": 0.0,  # no HTTP layer in an in-process run
        }
    )
    assert spans["lock_by_component"] == pytest.approx({"scheduler": 0.04})
    assert spans["allocation_by_component"] == pytest.approx({"sampler": 0.02})
    assert spans["kernel_fraction_by_span"] == pytest.approx({"model": 0.75, "sampler": 0.5})
    assert spans["dispatch"] is None  # no fee was priced
    assert breakdown["wall_s"] == pytest.approx(1e-6)
    assert any("torch.profiler over 2 steps in 1 windows (steps 0..1)" in note for note in breakdown["notes"])


def test_torch_fee_inside_ops_counts_as_interpreter_and_dispatch() -> None:
    kernels = kernels_result()
    kernels["by_span"]["model"]["fee_ns"] = 50  # of the model's 150 ns of op time in the window
    kernels["op_fee_ns"] = 5
    spans = build_breakdown(all_results(kernels=kernels), wall_ns=WALL)["methods"]["spans"]
    # model: kernel (150 - 50) / 200 = 50%, fee 25% of its 400 ns: kernel 200 + 40 (sampler) = 240,
    # interpreter 680 - 240 = 440, of which the fee inside ops is 100.
    assert spans["kernel_fraction_by_span"] == pytest.approx({"model": 0.5, "sampler": 0.5})
    assert spans["fee_fraction_by_span"] == pytest.approx({"model": 0.25, "sampler": 0.0})
    assert spans["categories"]["kernel"] == pytest.approx(0.24)
    assert spans["categories"]["interpreter"] == pytest.approx(0.44)
    assert spans["dispatch"] == pytest.approx(0.10)


def test_kernel_fraction_pools_every_window() -> None:
    spans = spans_result()
    spans["steps"] = [{"step": step, "model_ms": 1e-4} for step in range(6)]  # 100 ns of model per step
    kernels = kernels_result()
    kernels["windows"] = [{"first_step": 1, "steps": 1}, {"first_step": 4, "steps": 2}]
    kernels["by_span"] = {
        "model": {"aten_self_ns": 240, "fee_ns": 0, "ops": 3, "device_ns": 0, "runtime_ns": 0}
    }
    breakdown = build_breakdown(all_results(spans=spans, kernels=kernels), wall_ns=WALL)
    # 240 ns of op time over 3 profiled steps x 100 ns: 80%.
    assert breakdown["methods"]["spans"]["kernel_fraction_by_span"] == pytest.approx({"model": 0.8})
    assert any("over 3 steps in 2 windows (steps 1..5)" in note for note in breakdown["notes"])


def test_each_window_speaks_for_the_steps_nearest_to_it() -> None:
    spans = spans_result()
    # Steps 0-2 (ramp-up) hold 100 ns of model each, steps 3-9 (steady state) 300 ns each.
    spans["steps"] = [{"step": step, "model_ms": (1e-4 if step < 3 else 3e-4)} for step in range(10)]
    kernels = kernels_result()
    kernels["windows"] = [
        {
            "first_step": 1,
            "steps": 1,
            "by_span": {"model": {"aten_self_ns": 20, "fee_ns": 0, "runtime_ns": 0}},
        },
        {
            "first_step": 8,
            "steps": 1,
            "by_span": {"model": {"aten_self_ns": 270, "fee_ns": 30, "runtime_ns": 0}},
        },
    ]
    kernels["by_span"] = {
        "model": {"aten_self_ns": 290, "fee_ns": 30, "ops": 4, "device_ns": 0, "runtime_ns": 0}
    }
    kernels["op_fee_ns"] = 5
    fractions = build_breakdown(all_results(spans=spans, kernels=kernels), wall_ns=WALL)["methods"]["spans"]
    # Window 1 (20% kernel) speaks for steps 0-4 (100 x 3 + 300 x 2 = 900 ns), window 8 (80% kernel,
    # 10% fee) for steps 5-9 (1500 ns): kernel (0.2 x 900 + 0.8 x 1500) / 2400 = 57.5%, fee 6.25%;
    # pooling the two windows would have said (290 - 30) / 400 = 65%.
    assert fractions["kernel_fraction_by_span"]["model"] == pytest.approx(0.575)
    assert fractions["fee_fraction_by_span"]["model"] == pytest.approx(0.0625)


def test_kernel_fraction_is_the_raw_window_ratio_and_the_slowdown_is_reported() -> None:
    spans = spans_result()
    # Steps 0-1 before the window: model 100 ns each; window steps 2-3: 150 ns each (x1.5 slower).
    spans["steps"] = [
        {"step": 0, "model_ms": 1e-4},
        {"step": 1, "model_ms": 1e-4},
        {"step": 2, "model_ms": 1.5e-4},
        {"step": 3, "model_ms": 1.5e-4},
    ]
    kernels = kernels_result()
    kernels["windows"] = [{"first_step": 2, "steps": 2}]
    kernels["by_span"] = {"model": {"aten_self_ns": 150, "ops": 10, "device_ns": 0, "runtime_ns": 0}}
    breakdown = build_breakdown(all_results(spans=spans, kernels=kernels), wall_ns=WALL)
    # 150 / 300 = 50% of the model span's 400 ns; the window's x1.5 slowdown is reported, not divided out.
    assert breakdown["methods"]["spans"]["kernel_fraction_by_span"] == pytest.approx({"model": 0.5})
    assert breakdown["methods"]["spans"]["categories"]["kernel"] == pytest.approx(0.20)
    assert any(
        "model 50% kernel + 0% fee (windows x1.50 slower than the steps before)" in note
        for note in breakdown["notes"]
    )
    assert any("native samples put 80% of the model span in kernels" in note for note in breakdown["notes"])


def test_samples_split_disagreement_and_client_threads() -> None:
    breakdown = build_breakdown(all_results(), wall_ns=WALL)
    samples = breakdown["methods"]["samples"]
    assert samples["resolution"] == "native" and samples["samples"] == 100
    assert samples["categories"] == pytest.approx(
        {
            "interpreter": 0.30,
            "lock": 0.05,
            "allocation": 0.05,
            "kernel": 0.40,
            "idle": 0.20,
            "waiting": 0.0,
            "other": 0.0,
        }
    )
    assert samples["dispatch"] == pytest.approx(0.08)
    assert samples["components"]["model_kernels"] == pytest.approx(0.40)
    assert breakdown["disagreement"] == pytest.approx(
        {
            "interpreter": -4.0,
            "lock": 0.0,
            "allocation": 2.0,
            "kernel": 6.0,
            "idle": 0.0,
            "waiting": 0.0,
            "other": -4.0,
        }
    )
    assert breakdown["component_disagreement"]["scheduler"] == pytest.approx(1.0)  # 15% vs 14%
    clients = breakdown["client_threads"]  # the NVML thread is the profiler's own, not a client
    assert clients["samples"] == 50 and clients["resolution"] == "python"
    assert clients["categories"]["lock"] == pytest.approx(0.4) and clients["python_leaf"] == pytest.approx(
        0.6
    )


def test_waits_only_samples_see_are_named_in_the_notes() -> None:
    sampling = sampling_result()
    engine = sampling["threads"][ENGINE]
    engine["categories"] = {"interpreter": 25, "kernel": 40, "lock": 10, "allocation": 5, "idle": 20}
    notes = build_breakdown(all_results(sampling=sampling), wall_ns=WALL)["notes"]
    # Spans traced 5% of lock waits; samples saw 10%: 5 points the spans method cannot see.
    assert any(note.startswith("samples saw the engine thread waiting 5.0 points more") for note in notes)
    quiet = build_breakdown(all_results(), wall_ns=WALL)["notes"]  # 5% vs 5%
    assert not any(note.startswith("samples saw the engine thread waiting") for note in quiet)


def test_python_only_samples_leave_unresolvable_categories_null() -> None:
    breakdown = build_breakdown(all_results(sampling=sampling_result(native=False)), wall_ns=WALL)
    samples = breakdown["methods"]["samples"]
    assert samples["resolution"] == "python"
    assert samples["categories"]["interpreter"] is None and samples["categories"]["kernel"] is None
    assert samples["python_leaf"] == pytest.approx(0.30) and samples["dispatch"] is None
    assert (
        samples["components"]["model"] == pytest.approx(0.50) and samples["components"]["model_glue"] is None
    )
    assert set(breakdown["disagreement"]) == {"lock", "idle", "waiting", "other"}


def test_without_a_kernel_window_native_samples_give_the_model_split() -> None:
    results = all_results()
    del results["kernels"]
    breakdown = build_breakdown(results, wall_ns=WALL)
    spans = breakdown["methods"]["spans"]
    # model kernel share from samples: 40 / (40 + 10) = 0.8 -> kernel 320, interpreter 680 - 320 = 360,
    # idle 260 - 10 - 10 = 240 (no profiler pause), other 0.
    assert spans["categories"] == pytest.approx(
        {
            "interpreter": 0.36,
            "lock": 0.05,
            "allocation": 0.03,
            "kernel": 0.32,
            "idle": 0.24,
            "waiting": 0.0,
            "other": 0.0,
        }
    )
    assert any("native stack samples" in note for note in breakdown["notes"])
    assert spans["kernel_source"] == "native samples"


def test_without_kernels_or_samples_the_model_span_counts_as_kernel() -> None:
    results = all_results(sampling={"status": "skipped", "reason": "py-spy is not installed"})
    del results["kernels"]
    breakdown = build_breakdown(results, wall_ns=WALL)
    spans = breakdown["methods"]["spans"]
    assert spans["categories"]["kernel"] == pytest.approx(0.40)
    assert spans["categories"]["interpreter"] == pytest.approx(0.28)
    assert breakdown["methods"]["samples"] is None and breakdown["disagreement"] == {}
    assert breakdown["client_threads"] is None
    assert any("lower bound" in note for note in breakdown["notes"])
    assert spans["kernel_source"] == "assumed"  # the reports print it as such, never as a measurement


def test_native_components_count_as_other() -> None:
    breakdown = build_breakdown(all_results(), wall_ns=WALL, native_components=("scheduler",))
    categories = breakdown["methods"]["spans"]["categories"]
    assert categories["interpreter"] == pytest.approx(0.24)  # 340 - 100 of scheduler self time
    assert categories["other"] == pytest.approx(0.14)  # 100 + the 40 ns profiler pause
    assert breakdown["methods"]["spans"]["components"]["scheduler"] == pytest.approx(
        0.14
    )  # still its component


def test_engine_samples_are_found_by_native_thread_id() -> None:
    sampling = sampling_result()
    sampling["threads"]["Thread-7"] = sampling["threads"].pop(ENGINE)
    breakdown = build_breakdown(all_results(sampling=sampling), wall_ns=WALL)
    assert breakdown["methods"]["samples"]["samples"] == 100


def test_missing_engine_thread_gives_no_spans_split_and_says_why() -> None:
    spans = spans_result()
    spans["threads"]["engine-renamed"] = spans["threads"].pop(ENGINE)
    breakdown = build_breakdown(all_results(spans=spans), wall_ns=WALL)
    assert breakdown["methods"]["spans"] is None
    assert any("infer-prof-engine" in note for note in breakdown["notes"])


def test_gc_without_tracer_attribution_is_taken_from_the_step_loop() -> None:
    spans = spans_result()
    thread = spans["threads"][ENGINE]
    thread["pauses"] = {}
    thread["spans"]["step"] = span(80)  # the 30 ns of GC now hide in the step loop's self time
    thread["covered_ns"] = 750  # self times 710 + lock waits 40
    breakdown = build_breakdown(all_results(spans=spans), wall_ns=WALL)
    categories = breakdown["methods"]["spans"]["categories"]
    # The GC collector's 30 ns on the engine thread move from the step loop to allocation.
    assert categories == pytest.approx(
        {
            "interpreter": 0.34,
            "lock": 0.05,
            "allocation": 0.03,
            "kernel": 0.34,
            "idle": 0.20,
            "waiting": 0.0,
            "other": 0.04,
        }
    )
    assert any("GC pauses were not attributed" in note for note in breakdown["notes"])


@settings(max_examples=60, deadline=None)
@given(
    self_times=st.dictionaries(
        st.sampled_from(["step", "scheduler", "model", "sampler", "kv_alloc", "queue"]),
        st.integers(0, 10_000),
        min_size=1,
    ),
    lock_in=st.integers(0, 1000),
    gc_in=st.integers(0, 1000),
    outside=st.integers(0, 10_000),
    kernel_share=st.floats(0, 1.5),
)
def test_spans_categories_always_add_up_to_the_wall(
    self_times: dict[str, int], lock_in: int, gc_in: int, outside: int, kernel_share: float
) -> None:
    spans = spans_result()
    parent = next(iter(self_times))
    spans["threads"][ENGINE].update(
        spans={name: span(value) for name, value in self_times.items()},
        locks={
            "queue": {
                "count": 1,
                "wait_ns": lock_in,
                "hold_ns": 0,
                "max_wait_ns": lock_in,
                "by_parent": {parent: lock_in},
            }
        },
        pauses={"gc": {"count": 1, "total_ns": gc_in, "by_parent": {parent: gc_in}}},
        covered_ns=sum(self_times.values()) + lock_in + gc_in,
    )
    kernels = copy.deepcopy(kernels_result())
    kernels["by_span"]["model"]["aten_self_ns"] = kernel_share * 200
    wall = sum(self_times.values()) + lock_in + gc_in + outside + 40
    breakdown = build_breakdown(all_results(spans=spans, kernels=kernels), wall_ns=max(wall, 1))
    split = breakdown["methods"]["spans"]
    assert set(split["categories"]) == set(CATEGORIES) and set(split["components"]) == set(COMPONENTS)
    if wall > 0:
        assert sum(split["categories"].values()) == pytest.approx(1.0)
        assert all(value >= -1e-12 for value in split["categories"].values())


def test_a_gap_is_beyond_noise_only_when_the_spans_share_leaves_the_samples_interval() -> None:
    from infer_prof.profiler.analysis.breakdown import _beyond_noise

    spans = {"categories": {"interpreter": 0.10, "kernel": 0.90}}
    # 2 engine-thread samples, one of each: a 40-point gap that 2 samples cannot show.
    two = {"samples": 2, "categories": {"interpreter": 0.5, "kernel": 0.5}}
    assert _beyond_noise(two, spans, "categories") == []
    many = {"samples": 4000, "categories": {"interpreter": 0.5, "kernel": 0.5}}
    assert _beyond_noise(many, spans, "categories") == ["interpreter", "kernel"]
    close = {"samples": 4000, "categories": {"interpreter": 0.105, "kernel": 0.895}}
    assert _beyond_noise(close, spans, "categories") == []
