"""A run's yardstick: a number the compared change cannot move, so that if it moves, the machine moved.

compare plots it per repeat beside the change's metrics; a drift guard can declare a comparison void
when it moves too much. The figure is the model span's time per token the model processed (prefill
and decode tokens, every step): the forward pass is the same code in every run, so swapping the
scheduler, sampler or KV allocator between their Python and C twins (token for token equivalent,
docs/twin-spec.md) leaves it alone, while a slower or busier machine raises it. It is no yardstick
for changes that touch the model, its dtype or threads, or the batch sizes the engine runs (the
batch shape changes what a forward costs per token).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .results import RunData

YARDSTICK_NAME = "model_us_per_token"


@dataclass(frozen=True)
class Yardstick:
    """One run's yardstick: its value, what it is, and how many steps and tokens it rests on."""

    name: str
    label: str
    unit: str
    value: float
    steps: int
    tokens: int


def yardstick(run: RunData) -> Yardstick | None:
    """The model span's time per processed token in microseconds (see the module docstring), or None
    when the run has no traced model span (profile off) or processed no token."""
    steps = run.steps
    if steps.empty or not {"model_ms", "prefill_tokens", "decode_tokens"} <= set(steps.columns):
        return None
    model_ms = pd.to_numeric(steps["model_ms"], errors="coerce").fillna(0.0)
    tokens = pd.to_numeric(steps["prefill_tokens"], errors="coerce").fillna(0) + pd.to_numeric(
        steps["decode_tokens"], errors="coerce"
    ).fillna(0)
    total_tokens = int(tokens.sum())
    if total_tokens <= 0 or float(model_ms.sum()) <= 0:
        return None
    return Yardstick(
        name=YARDSTICK_NAME,
        label="model span time per processed token",
        unit="us",
        value=float(model_ms.sum()) * 1e3 / total_tokens,
        steps=int((tokens > 0).sum()),
        tokens=total_tokens,
    )


# How far the yardstick may move before an A/B is void: past these limits a change in throughput says
# more about the machine than about the change. The limits sit between what identical configurations
# moved on a quiet machine and what a CPU hog or a slow-down part-way through did (docs/measurements.md,
# "Figures that stood in code comments").
DRIFT_LIMIT = 0.10  # after mean / before mean further than this from 1
SPREAD_LIMIT = 0.20  # slowest / fastest run over all runs, minus 1


def drift_void(before: list[float], after: list[float], *, noise: float | None = None) -> str | None:
    """Why an A/B whose runs have these yardsticks is void (the machine changed), or None when it held.

    noise: when given (the reference side's own spread, e.g. --verify's two Python runs), the sides
    may differ by that much before the A/B is void, and no limit applies to the spread between runs:
    the caller already reports that spread as the noise floor of what it measured."""
    if not before or not after:
        return None
    ratio = (sum(after) / len(after)) / (sum(before) / len(before))
    values = [*before, *after]
    spread = max(values) / min(values) - 1.0
    limit = max(DRIFT_LIMIT, noise or 0.0)
    if abs(ratio - 1.0) > limit:
        moved = f"moved {ratio:.2f}x between the sides (limit {1 - limit:.2f}-{1 + limit:.2f}x)"
    elif noise is None and spread > SPREAD_LIMIT:
        moved = f"differs by {spread:.0%} between runs (limit {SPREAD_LIMIT:.0%})"
    else:
        return None
    return (
        f"void: the machine changed: the yardstick (model span time per token, which the compared "
        f"twins cannot move) {moved}; re-run on a quiet machine"
    )
