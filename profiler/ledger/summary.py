"""The ledger's score: per kind of prediction and per component, how far measured gains landed from predicted ones."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..stats import wilson_interval
from .records import LedgerRecord

# The project's target for a prediction: measured / predicted within 1 +- this (profiler.checks.verify's band).
AGREEMENT_BAND = 0.2
ALL = "all"


@dataclass(frozen=True, slots=True)
class Score:
    """One group of pairs (a kind, a component, or all): void pairs are counted, and scored only when asked.

    pairs: the pairs scored (the healthy ones; every one with include_void); void: how many are void;

    median_error_points: the median |measured - predicted| in percentage points of the step;
    median_relative_error: the median |measured - predicted| / |predicted| (pairs predicting no gain left out);
    inside / with_interval: pairs whose measured gain fell inside the predicted interval, of those that had
    one, with the share's Wilson 95% interval; within_band: pairs with measured / predicted within
    1 +- AGREEMENT_BAND."""

    kind: str
    component: str
    pairs: int
    void: int
    median_error_points: float | None
    median_relative_error: float | None
    inside: int
    with_interval: int
    inside_share: float | None
    inside_low: float | None
    inside_high: float | None
    within_band: int


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """The whole ledger's score first, then each kind's, then each (kind, component)'s; include_void: void pairs
    were scored too (a view for a machine where every run is void, never the project's score)."""

    total: Score
    by_kind: list[Score]
    by_component: list[Score]
    records: int
    first_recorded: str | None
    last_recorded: str | None
    include_void: bool = False


def summarize(records: Sequence[LedgerRecord], *, include_void: bool = False) -> LedgerSummary:
    """The score of every group of `records` (pure: no I/O); void pairs scored too with include_void."""
    kinds = sorted({record.kind for record in records})
    pairs = sorted({(record.kind, record.component) for record in records})
    times = sorted(record.recorded_at for record in records)
    return LedgerSummary(
        total=score(records, ALL, ALL, include_void=include_void),
        by_kind=[
            score([r for r in records if r.kind == kind], kind, ALL, include_void=include_void)
            for kind in kinds
        ],
        by_component=[
            score([r for r in records if (r.kind, r.component) == key], *key, include_void=include_void)
            for key in pairs
        ],
        records=len(records),
        first_recorded=times[0] if times else None,
        last_recorded=times[-1] if times else None,
        include_void=include_void,
    )


def score(records: Sequence[LedgerRecord], kind: str, component: str, *, include_void: bool = False) -> Score:
    """The score of one group: its healthy pairs' errors and coverage (every pair's with include_void), its void
    pairs counted."""
    healthy = list(records) if include_void else [record for record in records if not record.void]
    errors = [abs(record.error) * 100 for record in healthy]
    relative = [value for value in (record.relative_error for record in healthy) if value is not None]
    judged = [record.inside_predicted for record in healthy if record.inside_predicted is not None]
    inside = sum(judged)
    interval = wilson_interval(inside, len(judged)) if judged else None
    return Score(
        kind=kind,
        component=component,
        pairs=len(healthy),
        void=sum(1 for record in records if record.void),
        median_error_points=statistics.median(errors) if errors else None,
        median_relative_error=statistics.median(relative) if relative else None,
        inside=inside,
        with_interval=len(judged),
        inside_share=interval.point if interval else None,
        inside_low=interval.low if interval else None,
        inside_high=interval.high if interval else None,
        within_band=sum(
            1 for value in relative if value <= AGREEMENT_BAND + 1e-12
        ),  # |m - p| / |p| <= band is |m / p - 1| <= band
    )
