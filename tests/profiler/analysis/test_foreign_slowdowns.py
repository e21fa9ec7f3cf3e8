"""The foreign verdict's predictions say how each was obtained: a component a slowdown run measured gets its
sensitivity and predicted gain in place of "bound only (Amdahl)"; every other keeps its bound, marked as one."""

from __future__ import annotations

from typing import cast

from infer_prof.profiler.analysis.foreign import BOUND_ONLY, bound_only, with_slowdowns
from infer_prof.profiler.analysis.probe_slowdown import slowdown_sentences
from infer_prof.profiler.rundir.schema import ProbeWhatIf, Verdict


def _verdict() -> Verdict:
    bound = {"low": 0.1, "high": 0.3, "samples": 40, "where": "engine loop", "method": BOUND_ONLY}
    reasons = [
        "The engine loop spends 40% of its busy time in the Python interpreter.",
        f"If the scheduler cost nothing, the engine loop's step would be at most 20.0% shorter (Amdahl ...); {bound_only('vllm')}",
        f"If the model worker's sampler cost nothing, the engine loop's step would be at most 30.0% shorter (Amdahl ...); {bound_only('vllm')}",
    ]
    return cast(
        Verdict,
        {
            "reasons": reasons,
            "foreign": {
                "engine": "vllm",
                "amdahl": {"scheduler": {"bound": 0.2, **bound}, "worker:sampler": {"bound": 0.3, **bound}},
            },
        },
    )


def test_a_measured_component_reads_slowdown_measured_and_the_rest_bound_only() -> None:
    verdict = _verdict()
    what_if = cast(
        ProbeWhatIf,
        {
            "components": {
                "sampler": {
                    "sensitivity": 0.95,
                    "low": 0.85,
                    "high": 1.05,
                    "path": "step",
                    "units": "steps",
                    "linear": True,
                    "gain": {"speedup": 10.0, "gain": 0.256, "low": 0.23, "high": 0.284},
                },
                "scheduler": {"sensitivity": None, "note": "no pairs"},  # measured nothing: stays a bound
            }
        },
    )
    with_slowdowns(verdict, what_if)
    reasons = verdict["reasons"]
    assert reasons[0].startswith("The engine loop spends")
    assert reasons[1].endswith(bound_only("vllm"))
    assert reasons[2].startswith("If the model worker's sampler cost nothing")
    assert reasons[2].endswith(
        "slowdown-measured (sensitivity 0.95 [0.85, 1.05]): 10x faster, it would save 25.6% [23.0%, 28.4%] of the step."
    )
    amdahl = verdict["foreign"]["amdahl"]
    assert amdahl["scheduler"]["method"] == BOUND_ONLY
    assert amdahl["worker:sampler"]["method"].startswith("slowdown-measured (sensitivity 0.95")


def test_without_a_slowdown_every_prediction_stays_a_bound() -> None:
    verdict = _verdict()
    before = list(verdict["reasons"])
    with_slowdowns(verdict, None)
    assert verdict["reasons"] == before
    assert all(entry["method"] == BOUND_ONLY for entry in verdict["foreign"]["amdahl"].values())


def test_a_sensitivity_whose_interval_is_wider_than_one_reads_unresolved() -> None:
    """vLLM's CPU build, four pairs of turns: the sampler read 0.78 [-0.17, 1.40], which cannot tell a serial path
    from an overlapped one; its line says so instead of reading as measured."""
    verdict = _verdict()
    entry = {
        "sensitivity": 0.78,
        "low": -0.17,
        "high": 1.40,
        "pairs": 4,
        "path": "step",
        "units": "steps",
        "linear": False,
        "levels": [],
        "share": 0.368,
        "gain": {"speedup": 10.0, "gain": 0.257, "low": -0.058, "high": 0.464},
    }
    with_slowdowns(verdict, cast(ProbeWhatIf, {"components": {"sampler": entry}}))
    method = verdict["foreign"]["amdahl"]["worker:sampler"]["method"]
    assert method.startswith("slowdown unresolved (sensitivity 0.78 [-0.17, 1.40])")
    assert "cannot tell a serial path from an overlapped one" in method
    (line,) = slowdown_sentences(cast(ProbeWhatIf, {"components": {"sampler": entry}}))
    assert "unresolved: its interval is wider than 1" in line
