"""One row of `infer-prof bench native`: a twin pair's per-step Python and C times and their ratio."""

from __future__ import annotations

from typing import Any


def bench_row(
    component: str, batch: int, mix: str, python_s: float, native_s: float, **extra: Any
) -> dict[str, Any]:
    return {
        "component": component,
        "batch": batch,
        "mix": mix,
        "python_us": round(python_s * 1e6, 1),
        "native_us": round(native_s * 1e6, 1),
        "speedup": round(python_s / native_s, 2) if native_s > 0 else float("inf"),
        **extra,
    }
