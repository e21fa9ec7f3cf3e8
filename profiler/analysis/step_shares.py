"""Each control path's share of step time over the run's steps, with a moving-block bootstrap interval: the noise a prediction's share carries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..rundir.schema import StepShare
from ..stats import bootstrap, rate_statistic

# steps.csv's phase columns (exclusive ms per step) for the paths a C twin can take over.
PHASE_COLUMNS = {
    "scheduler": "scheduler_ms",
    "kv_alloc": "kv_alloc_ms",
    "prepare": "prepare_ms",
    "sampler": "sampler_ms",
}
MIN_STEPS = 20  # fewer steps give no interval: a block bootstrap needs several blocks


def step_share_intervals(steps: pd.DataFrame) -> dict[str, StepShare]:
    """{component: {share, low, high, steps}}: sum(phase ms) / sum(step ms) over the steps, its 95% interval
    from resampling runs of neighbouring steps (so a drift within the run widens it, as a rerun would see)."""
    if "duration_ms" not in steps or len(steps) < MIN_STEPS:
        return {}
    duration = steps["duration_ms"].to_numpy(dtype=float)
    found: dict[str, StepShare] = {}
    for name, column in PHASE_COLUMNS.items():
        if column not in steps:
            continue
        values = steps[column].fillna(0.0).to_numpy(dtype=float)
        keep = np.isfinite(values) & np.isfinite(duration) & (duration > 0)
        if keep.sum() < MIN_STEPS or values[keep].sum() <= 0:
            continue
        interval = bootstrap(
            [np.column_stack([values[keep], duration[keep]])], rate_statistic, block=None, resamples=1000
        )
        if math.isnan(interval.low) or math.isnan(interval.high):
            continue
        found[name] = {
            "share": interval.point,
            "low": interval.low,
            "high": interval.high,
            "steps": int(keep.sum()),
        }
    return found
