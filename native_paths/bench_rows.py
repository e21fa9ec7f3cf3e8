"""One row of `infer-prof bench native`: a twin pair's per-step Python and C times and their ratio."""

from __future__ import annotations

from typing import TypedDict, Unpack


class BenchExtras(TypedDict, total=False):
    """The columns a component's row adds: its own figures, and whether the twins' outputs agreed."""

    floor_us: float  # sampler: numpy reading the same logits once (the memory floor)
    native_floor_ratio: float
    pass_f: str  # sampler: the build of the fast softmax sum that ran
    separate_us: float  # core: the three C twins called one by one
    one_call_gain: float
    tokens_match: bool
    tables_match: bool
    plans_match: bool
    inputs_match: bool


class BenchRow(BenchExtras):
    """A row: the component, the batch and sampling mix, both twins' µs per step and their ratio, and extras."""

    component: str
    batch: int
    mix: str
    python_us: float
    native_us: float
    speedup: float


def bench_row(
    component: str, batch: int, mix: str, python_s: float, native_s: float, **extra: Unpack[BenchExtras]
) -> BenchRow:
    return {
        "component": component,
        "batch": batch,
        "mix": mix,
        "python_us": round(python_s * 1e6, 1),
        "native_us": round(native_s * 1e6, 1),
        "speedup": round(python_s / native_s, 2) if native_s > 0 else float("inf"),
        **extra,
    }
