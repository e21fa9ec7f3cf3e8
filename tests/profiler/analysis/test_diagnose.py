"""The verdict: rule-of-thumb thresholds, Amdahl predictions, blind spots, and the overhead helpers."""

from __future__ import annotations

from typing import Any

import pytest

from infer_prof.profiler.analysis.diagnose import (
    RULE_REWRITE,
    RULE_STAY,
    RULE_TARGETED,
    amdahl_gain,
    diagnose,
    measured_gain,
    rule_for,
)
from infer_prof.profiler.overhead.costs import (
    ABResult,
    collector_costs,
    interleave_ab,
    overhead_section,
    slowdown,
    throughput_ratio,
)

ALL_OK = {name: {"status": "ok", "reason": None} for name in ("spans", "gc", "sampling", "kernels", "gpu")}


def split(
    categories: dict[str, float], components: dict[str, float] | None = None, **extra: Any
) -> dict[str, Any]:
    base_components = dict.fromkeys(
        (
            "scheduler",
            "sampler",
            "kv_alloc",
            "tokenizer",
            "detokenizer",
            "model_glue",
            "model_kernels",
            "queue",
        ),
        0.0,
    )
    base_components.update(components or {})
    full = dict.fromkeys(("interpreter", "lock", "allocation", "kernel", "idle", "other"), 0.0)
    full.update(categories)
    return {"categories": full, "components": base_components, "dispatch": None, **extra}


def breakdown(
    spans: dict[str, Any] | None, samples: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    return {"wall_s": 10.0, "methods": {"spans": spans, "samples": samples}, "disagreement": {}, **extra}


@pytest.mark.parametrize(
    ("share", "rule"),
    [
        (0.0, RULE_STAY),
        (0.01, RULE_STAY),  # the field's rule: about 1% or below
        (0.0101, RULE_TARGETED),
        (0.0499, RULE_TARGETED),  # stayed in Python under the old 5% cut-off
        (0.05, RULE_TARGETED),
        (0.2999, RULE_TARGETED),
        (0.30, RULE_REWRITE),
        (0.9, RULE_REWRITE),
    ],
)
def test_rule_thresholds(share: float, rule: str) -> None:
    assert rule_for(share) == rule


def test_amdahl_numbers() -> None:
    assert amdahl_gain(0.2, 4.0) == pytest.approx(0.15)
    assert amdahl_gain(0.5, 2.0) == pytest.approx(0.25)
    assert amdahl_gain(0.3, 1.0) == 0.0
    assert amdahl_gain(0.1, 0.5) == pytest.approx(-0.1)  # a slower twin costs time
    with pytest.raises(ValueError):
        amdahl_gain(0.1, 0.0)
    assert measured_gain(python_step_ms=10.0, native_step_ms=8.0) == pytest.approx(0.2)


def test_verdict_for_a_python_bound_engine_with_predictions() -> None:
    spans = split(
        {"interpreter": 0.36, "kernel": 0.40, "lock": 0.02, "allocation": 0.02, "idle": 0.20},
        {"scheduler": 0.16, "sampler": 0.08, "kv_alloc": 0.04, "model_glue": 0.08, "model_kernels": 0.40},
    )
    samples = split({"interpreter": 0.4, "kernel": 0.6}, resolution="native")
    verdict = diagnose(
        breakdown(spans, samples),
        native_speedups={"scheduler": 5.0, "sampler": 2.0},
        measured_gains={"scheduler": 0.15},
        collectors=ALL_OK,
    )
    assert verdict["category"] == "kernel" and verdict["share"] == pytest.approx(0.40)
    assert verdict["component"] == "model_kernels"
    assert verdict["interpreter_share"] == pytest.approx(0.45)  # 0.36 of the busy 0.80
    assert verdict["rule"] == RULE_REWRITE and verdict["source"] == "spans"
    predictions = verdict["predictions"]
    # scheduler: share of busy time 0.16 / 0.8 = 0.2; gain 0.2 x (1 - 1/5) = 0.16
    figures = ("share", "native_speedup", "predicted_gain", "measured_gain")
    assert {name: predictions["scheduler"][name] for name in figures} == pytest.approx(
        {"share": 0.2, "native_speedup": 5.0, "predicted_gain": 0.16, "measured_gain": 0.15}
    )
    # A microbenchmark's figure has no interval: none is made up for it.
    assert predictions["scheduler"]["speedup_source"] == "microbenchmark"
    assert (
        predictions["scheduler"]["predicted_gain_low"]
        is None
        is predictions["scheduler"]["native_speedup_high"]
    )
    assert predictions["sampler"]["predicted_gain"] == pytest.approx(0.1 * 0.5)
    assert {name: predictions["kv_alloc"][name] for name in figures} == pytest.approx(
        {"share": 0.05, "native_speedup": None, "predicted_gain": None, "measured_gain": None}
    )
    text = " ".join(verdict["reasons"])
    assert "45.0% of the engine's busy time" in text and "a native rewrite pays" in text
    assert "would save about 16.0%" in text and "measured 15.0% against 16.0% predicted" in text
    assert verdict["blind_spots"] == []
    no_samples = diagnose(breakdown(spans), native_speedups=None, measured_gains=None, collectors=ALL_OK)
    assert (
        no_samples["blind_spots"][0]
        == "py-spy ran but saw no engine thread samples: nothing cross-checks the spans."
    )
    # Without native samples nothing sees a lock taken outside the tracer, and the verdict says so.
    assert no_samples["blind_spots"][1].startswith("Spans see only locks taken through the tracer")
    assert len(no_samples["blind_spots"]) == 2


def test_verdict_stay_in_python_and_interpreter_component() -> None:
    spans = split(
        {"interpreter": 0.008, "kernel": 0.982, "lock": 0.01}, {"sampler": 0.006, "model_kernels": 0.982}
    )
    verdict = diagnose(breakdown(spans), native_speedups=None, measured_gains=None, collectors=ALL_OK)
    assert verdict["rule"] == RULE_STAY and verdict["interpreter_share"] == pytest.approx(0.008)
    assert all(entry["predicted_gain"] is None for entry in verdict["predictions"].values())


def test_idle_dominated_run_says_the_load_limits_throughput() -> None:
    spans = split(
        {"interpreter": 0.06, "kernel": 0.14, "idle": 0.80}, {"scheduler": 0.04, "model_kernels": 0.14}
    )
    verdict = diagnose(breakdown(spans), native_speedups=None, measured_gains=None, collectors=ALL_OK)
    assert verdict["category"] == "idle" and verdict["component"] == "queue"
    assert verdict["interpreter_share"] == pytest.approx(0.3)  # 0.06 of the busy 0.20
    assert any("waited for work 80.0%" in reason for reason in verdict["reasons"])


def test_lock_and_allocation_components_come_from_their_attribution() -> None:
    spans = split(
        {"lock": 0.5, "interpreter": 0.3, "kernel": 0.2},
        {"queue": 0.3, "scheduler": 0.4},
        lock_by_component={"scheduler": 0.1, "queue": 0.4},
    )
    verdict = diagnose(breakdown(spans), native_speedups=None, measured_gains=None, collectors=ALL_OK)
    assert (verdict["category"], verdict["component"]) == ("lock", "queue")


def test_disagreement_and_dispatch_become_reasons() -> None:
    spans = split({"interpreter": 0.2, "kernel": 0.8}, {"model_kernels": 0.8})
    samples = split({"interpreter": 0.35, "kernel": 0.65}, resolution="native", dispatch=0.07)
    verdict = diagnose(
        breakdown(spans, samples, disagreement={"interpreter": 15.0, "kernel": -15.0}),
        native_speedups=None,
        measured_gains=None,
        collectors=ALL_OK,
    )
    text = " ".join(verdict["reasons"])
    assert "disagree on interpreter by +15.0 percentage points" in text
    assert "dispatch (argument parsing, dispatcher, tensor creation) is 7.0%" in text


def test_samples_are_used_when_there_are_no_spans_and_nothing_gives_no_verdict() -> None:
    samples = split({"interpreter": 0.5, "kernel": 0.5}, resolution="native")
    verdict = diagnose(breakdown(None, samples), native_speedups=None, measured_gains=None, collectors=ALL_OK)
    assert verdict["source"] == "samples" and verdict["rule"] == RULE_REWRITE
    python_only = split({"idle": 0.5}, resolution="python")
    empty = diagnose(
        breakdown(None, python_only), native_speedups=None, measured_gains=None, collectors=ALL_OK
    )
    assert empty["rule"] is None and empty["category"] is None and "no verdict" in empty["reasons"][0]


def test_blind_spots_name_what_was_not_seen() -> None:
    collectors = {
        "spans": {"status": "ok", "reason": None},
        "gc": {"status": "ok", "reason": None},
        "sampling": {"status": "skipped", "reason": "py-spy could not attach to pid 7: Permission denied"},
        "gpu": {"status": "skipped", "reason": "no NVIDIA GPU/driver (NVML Shared Library Not Found)"},
    }
    spans = split({"interpreter": 0.1, "kernel": 0.9}, {"model_kernels": 0.9})
    spots = diagnose(breakdown(spans), native_speedups=None, measured_gains=None, collectors=collectors)[
        "blind_spots"
    ]
    assert len(spots) == 4
    assert "No stack samples (py-spy could not attach to pid 7: Permission denied)" in spots[0]
    assert "torch.profiler did not run (not configured)" in spots[1]
    assert spots[2] == "No GPU utilization (no NVIDIA GPU/driver (NVML Shared Library Not Found))."
    assert spots[3].startswith("Spans see only locks taken through the tracer")
    python_samples = split({"idle": 0.5}, resolution="python")
    spots = diagnose(
        breakdown(spans, python_samples), native_speedups=None, measured_gains=None, collectors=ALL_OK
    )["blind_spots"]
    assert spots and "without --native" in spots[0]


def test_interleave_ab_alternates_abba_and_takes_the_median_pair_ratio() -> None:
    calls: list[str] = []
    a_values = iter([0.0, 100.0, 100.0, 100.0, 100.0])  # the first is the discarded warm-up
    b_values = iter([0.0, 90.0, 80.0, 95.0, 90.0])

    def run_a() -> float:
        calls.append("a")
        return next(a_values)

    def run_b() -> float:
        calls.append("b")
        return next(b_values)

    result = interleave_ab(run_a, run_b, pairs=4, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]
    assert result.order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert result.pair_ratios == pytest.approx([0.9, 0.8, 0.95, 0.9])
    assert result.ratio == pytest.approx(0.9)
    with pytest.raises(ValueError):
        interleave_ab(run_a, run_b, pairs=0)


def test_throughput_ratio_and_slowdown() -> None:
    assert throughput_ratio([90.0, 80.0, 100.0], [100.0, 110.0, 90.0]) == pytest.approx(0.9)
    assert slowdown(0.8) == pytest.approx(1.25)
    with pytest.raises(ValueError):
        throughput_ratio([], [1.0])


def test_overhead_section_measured_or_estimated() -> None:
    wall = 10_000_000_000
    results = {
        "spans": {"status": "ok", "overhead": {"estimated_ns": 20_000_000}},
        "gc": {"status": "ok", "overhead": {"estimated_ns": 10_000_000}},
        "kernels": {
            "status": "ok",
            "profiled_steps": 10,
            "overhead": {"window_step_ms": 15.0, "slowdown": 1.5, "engine_pause_ns": 50_000_000},
        },
        "sampling": {"status": "ok", "overhead": {"py_spy_cpu_fraction": 0.1}},
        "gpu": {"status": "skipped", "reason": "no NVIDIA GPU/driver"},
    }
    costs = collector_costs(results, wall_ns=wall)
    # kernels: 10 steps x 15 ms x (1 - 1/1.5) = 50 ms extra + 50 ms pause = 100 ms of 10 s;
    # sampling: py-spy's CPU share of one core, whatever the machine's core count
    assert costs == pytest.approx({"spans": 0.002, "gc": 0.001, "kernels": 0.01, "sampling": 0.1})
    estimated = overhead_section(results, wall_ns=wall)
    assert estimated["throughput_ratio"] == pytest.approx(1 / 1.113) and estimated["method"].startswith(
        "estimated"
    )
    measured = overhead_section(
        results, wall_ns=wall, ab=ABResult(a=[100.0, 100.0], b=[95.0, 97.0], order=[])
    )
    assert (
        measured["throughput_ratio"] == pytest.approx(0.96)
        and "interleaved A/B: 2 pairs" in measured["method"]
    )


def _native_samples(interpreter: float, samples: int, idle: float = 0.0) -> dict[str, Any]:
    return split(
        {"interpreter": interpreter, "kernel": 1.0 - interpreter - idle, "idle": idle},
        resolution="native",
        samples=samples,
    )


def test_the_verdict_carries_the_interpreter_shares_interval_and_says_when_it_straddles() -> None:
    spans = split({"interpreter": 0.02, "kernel": 0.98}, {"sampler": 0.02, "model_kernels": 0.98})
    # 2% of 200 samples: Wilson [0.6%, 5.0%] holds the 1% threshold; of 20,000 samples it does not.
    few = diagnose(
        breakdown(spans, _native_samples(0.02, 200)),
        native_speedups=None,
        measured_gains=None,
        collectors=ALL_OK,
    )
    assert few["rule"] == RULE_TARGETED and few["straddles"] == [0.01]
    assert few["interpreter_interval"]["low"] < 0.01 < few["interpreter_interval"]["high"]
    assert any("straddles the 1% threshold" in reason for reason in few["reasons"])
    many = diagnose(
        breakdown(spans, _native_samples(0.02, 20_000)),
        native_speedups=None,
        measured_gains=None,
        collectors=ALL_OK,
    )
    assert many["straddles"] == [] and any(
        "clears the rule's thresholds" in reason for reason in many["reasons"]
    )
    # Idle samples are not busy time: 30% of the busy half of 1,000 samples, straddling 30%.
    idle = diagnose(
        breakdown(spans, _native_samples(0.15, 1000, idle=0.5)),
        native_speedups=None,
        measured_gains=None,
        collectors=ALL_OK,
    )
    assert idle["interpreter_interval"]["samples"] == 500 and idle["straddles"] == [0.30]


def test_a_disagreement_within_sampling_noise_is_not_reported() -> None:
    spans = split({"interpreter": 0.10, "kernel": 0.90}, {"model_kernels": 0.90})
    for samples, beyond, said in ((2, [], False), (5000, ["interpreter", "kernel"], True)):
        sampled = _native_samples(0.467, samples)
        gap = {"interpreter": 36.7, "kernel": -36.7}
        verdict = diagnose(
            breakdown(spans, sampled, disagreement=gap, beyond_noise=beyond),
            native_speedups=None,
            measured_gains=None,
            collectors=ALL_OK,
        )
        assert any("36.7" in reason for reason in verdict["reasons"]) == said


def test_a_native_twins_added_copy_is_subtracted_from_its_predicted_gain() -> None:
    from infer_prof.profiler.analysis.diagnose import _predictions, _speedups
    from infer_prof.profiler.session.transfer import sampler_copy_share

    split = {"components": {"sampler": 0.40, "scheduler": 0.0, "kv_alloc": 0.0, "prepare": 0.0}}
    speedups = _speedups({"sampler": 10.0}, None)
    plain = _predictions(split, 0.8, speedups, None, [])
    reasons: list[str] = []
    with_copy = _predictions(split, 0.8, speedups, None, reasons, {"sampler": 0.04})
    assert plain["sampler"]["predicted_gain"] == pytest.approx(0.5 * 0.9)
    assert with_copy["sampler"]["predicted_gain"] == pytest.approx(
        0.5 * 0.9 - 0.05
    )  # 4% of wall = 5% of busy
    assert any("copy of the logits to the host" in reason for reason in reasons)
    # The copy's share: one copy a step of the median batch, priced by the probe (here 2 us per row).
    steps = [{"batch_size": 4}, {"batch_size": 8}, {"batch_size": 8}, {"batch_size": 0}]
    share = sampler_copy_share(
        "cuda:0", steps, 49152, 1_000_000, probe=lambda device, rows, vocab: rows * 2_000.0
    )
    assert share == pytest.approx(3 * 16_000 / 1_000_000)
    assert sampler_copy_share("cpu", steps, 49152, 1_000_000) is None  # no copy on the CPU
