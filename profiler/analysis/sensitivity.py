"""A component's sensitivity from slowdown experiments (Coz's virtual speedup): added end-to-end time per added ms of its own time, and the gain it predicts.

A run adds a known delay to every call of one component in blocks of neighbouring steps (or time
slices), on at one or more levels and off between, in ABBA turns. Each delay-on block is paired with the
nearest off block on each side (their mean, so a linear drift cancels); per unit (a step, or a token when
the component lives in another process) the pair gives a response difference and an added-time
difference. The sensitivity is the slope of response on added time through the origin, per level and over
all levels, each pair weighted by the inverse of its units (a pair's response noise comes from its steps, not
from the delay, so it grows with the units and not with the added time); its 95% interval comes from
resampling the pairs. A ratio of the summed differences would weight a pair by its added time alone, and let
a low level whose response sits within the steps' noise pull the pooled value toward 0 (docs/measurements.md,
"The pooled sensitivity"). Off blocks next to off blocks (the A/A) give the null:
the response difference a pair shows when nothing was added.

Sensitivity 1: the component is on the serial critical path, every ms it saves is a ms of the step.
Near 0: its work overlaps other work, and making it faster gains nothing, whatever its share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..stats import bootstrap, difference_of, mean_statistic, slope_statistic

# Levels whose sensitivities differ by more than this (and beyond their noise) make a curve, not a line:
# a tenth of the serial path's 1 is the least difference the predictions would show.
CURVE_TOLERANCE = 0.1


class NotEnoughBlocks(ValueError):
    """The blocks hold no delay-on block with an off neighbour, or the delay added no time."""


@dataclass(frozen=True, slots=True)
class DelayBlock:
    """One block of neighbouring steps (or a time slice) run at one delay level."""

    index: int  # block index in run order: neighbours pair by index (ABBA)
    level: float  # delay per call as a fraction of that call's own measured duration; 0.0 = off
    added_ms: float  # delay actually added in the block, summed over the component's calls (measured)
    response_ms: float  # the end-to-end quantity summed over the block (step time in-process; for a
    # component in another process, wall time attributed to the block's tokens)
    units: float  # what response and added are per: steps (in-process) or tokens generated
    expected_ms: float = 0.0  # optional: the response the block's units take by their kind alone (batch size,
    # prefill), from the off blocks; subtracted before pairing, so a block of long prefills is not read as response
    run: int = (
        0  # the run (a round of the experiment) the block belongs to: blocks pair only within their run
    )


@dataclass(frozen=True, slots=True)
class LevelSensitivity:
    """The sensitivity measured at one delay level, and the pairs behind it."""

    level: float
    value: float
    low: float | None
    high: float | None
    pairs: int
    added_ms_per_unit: float = 0.0  # the mean delay added per unit at this level (the curve's x)
    response_ms_per_unit: float = 0.0  # the mean response added per unit at this level (the curve's y)


@dataclass(frozen=True, slots=True)
class NullCheck:
    """The A/A: off blocks paired with off neighbours; their response difference per unit should be ~0."""

    difference_ms: float  # mean (later - earlier) response per unit
    low: float | None
    high: float | None
    pairs: int


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """Added end-to-end time per added ms of the component's own time (1: serial critical path, ~0: overlapped)."""

    component: str
    value: float
    low: float | None
    high: float | None
    per_level: tuple[LevelSensitivity, ...]
    linear: bool  # False when the levels disagree (a curve)
    pairs: int
    null: NullCheck | None = None


@dataclass(frozen=True, slots=True)
class PredictedGain:
    """The fraction of end-to-end time saved if the component ran `speedup` times faster, from its sensitivity."""

    gain: float
    low: float | None
    high: float | None
    speedup: float
    method: str  # "slowdown"


@dataclass(frozen=True, slots=True)
class _Pair:
    level: float
    response: float  # response difference, summed over the on block's units (ms)
    added: float  # added-time difference, summed over the on block's units (ms)
    units: float


def estimate_sensitivity(
    component: str, blocks: Sequence[DelayBlock], *, resamples: int = 2000, seed: int = 0
) -> Sensitivity:
    """The component's sensitivity over the delay-on blocks against their off neighbours, per level and pooled.

    Raises NotEnoughBlocks when no on block has an off block on either side, or when the pairs' added
    time sums to zero (the delay never ran: the component was not called).
    """
    ordered = sorted(
        (block for block in blocks if block.units > 0), key=lambda block: (block.run, block.index)
    )
    pairs = _pairs(ordered)
    if not pairs:
        raise NotEnoughBlocks(
            f"{component}: no delay-on block has an off block beside it ({len(ordered)} blocks with units); "
            "a slowdown needs on and off blocks in turns"
        )
    if sum(pair.added for pair in pairs) <= 0:
        raise NotEnoughBlocks(
            f"{component}: the delay added no time; the component was not called while it was on"
        )
    value, low, high = _ratio(pairs, resamples, seed)
    levels = sorted({pair.level for pair in pairs})
    per_level = tuple(
        _level(level, [p for p in pairs if p.level == level], resamples, seed) for level in levels
    )
    return Sensitivity(
        component=component,
        value=value,
        low=low,
        high=high,
        per_level=per_level,
        linear=_linear(pairs, levels, resamples, seed),
        pairs=len(pairs),
        null=_null_check(ordered, resamples, seed),
    )


def predicted_gain(sensitivity: Sensitivity, component_share: float, speedup: float) -> PredictedGain:
    """gain = sensitivity x share x (1 - 1/k): the fraction of end-to-end time saved at a k-times faster component.

    The interval is the sensitivity's, scaled the same way; the share is taken as measured.
    """
    if not speedup > 0:
        raise ValueError(f"speedup must be positive, not {speedup}")
    if not 0.0 <= component_share <= 1.0:
        raise ValueError(f"component_share must be in [0, 1], not {component_share}")
    scale = component_share * (1.0 - 1.0 / speedup)
    low = None if sensitivity.low is None else sensitivity.low * scale
    high = None if sensitivity.high is None else sensitivity.high * scale
    if (
        low is not None and high is not None and low > high
    ):  # a slower component (k < 1) flips the scale's sign
        low, high = high, low
    return PredictedGain(sensitivity.value * scale, low, high, speedup, "slowdown")


def _per_unit(block: DelayBlock) -> tuple[float, float]:
    return (block.response_ms - block.expected_ms) / block.units, block.added_ms / block.units


def _neighbours(ordered: list[DelayBlock], position: int) -> list[DelayBlock]:
    """The nearest off block of the same run on each side of ordered[position] (one or two)."""
    run = ordered[position].run
    found = []
    for step in (-1, 1):
        other = position + step
        while 0 <= other < len(ordered) and ordered[other].run == run and ordered[other].level > 0:
            other += step
        if 0 <= other < len(ordered) and ordered[other].run == run:
            found.append(ordered[other])
    return found


def _pairs(ordered: list[DelayBlock]) -> list[_Pair]:
    pairs = []
    for position, block in enumerate(ordered):
        if block.level <= 0:
            continue
        references = _neighbours(ordered, position)
        if not references:
            continue
        off_units = sum(reference.units for reference in references)
        off_response = (
            sum(reference.response_ms - reference.expected_ms for reference in references) / off_units
        )
        off_added = sum(reference.added_ms for reference in references) / off_units
        on_response, on_added = _per_unit(block)
        pairs.append(
            _Pair(
                level=block.level,
                response=(on_response - off_response) * block.units,
                added=(on_added - off_added) * block.units,
                units=block.units,
            )
        )
    return pairs


def _rows(pairs: Sequence[_Pair]) -> np.ndarray:
    """(response, added, weight) per pair, for slope_statistic: a pair's response noise grows with its units."""
    return np.array([[pair.response, pair.added, 1.0 / pair.units] for pair in pairs], dtype=float)


def _bounds(low: float, high: float) -> tuple[float | None, float | None]:
    if math.isnan(low) or math.isnan(high):
        return None, None
    return low, high


def _ratio(pairs: Sequence[_Pair], resamples: int, seed: int) -> tuple[float, float | None, float | None]:
    interval = bootstrap([_rows(pairs)], slope_statistic, resamples=resamples, seed=seed)
    return (interval.point, *_bounds(interval.low, interval.high))


def _level(level: float, pairs: list[_Pair], resamples: int, seed: int) -> LevelSensitivity:
    units = sum(pair.units for pair in pairs)
    if sum(pair.added for pair in pairs) <= 0:
        return LevelSensitivity(level, math.nan, None, None, len(pairs))
    value, low, high = _ratio(pairs, resamples, seed)
    return LevelSensitivity(
        level,
        value,
        low,
        high,
        len(pairs),
        added_ms_per_unit=sum(pair.added for pair in pairs) / units,
        response_ms_per_unit=sum(pair.response for pair in pairs) / units,
    )


def _linear(pairs: list[_Pair], levels: list[float], resamples: int, seed: int) -> bool:
    """False when two levels' sensitivities differ by more than CURVE_TOLERANCE and their difference's interval excludes 0."""
    by_level = {level: _rows([pair for pair in pairs if pair.level == level]) for level in levels}
    usable = [level for level in levels if by_level[level][:, 1].sum() > 0]
    for position, first in enumerate(usable):
        for second in usable[position + 1 :]:
            difference = bootstrap(
                [by_level[first], by_level[second]],
                difference_of(slope_statistic),
                resamples=resamples,
                seed=seed,
            )
            if abs(difference.point) <= CURVE_TOLERANCE:
                continue
            if math.isnan(difference.low) or difference.excludes(0.0):
                return False
    return True


def _null_check(ordered: list[DelayBlock], resamples: int, seed: int) -> NullCheck | None:
    differences = [
        _per_unit(later)[0] - _per_unit(earlier)[0]
        for earlier, later in zip(ordered, ordered[1:])
        if earlier.level <= 0 and later.level <= 0 and earlier.run == later.run
    ]
    if not differences:
        return None
    interval = bootstrap([differences], mean_statistic, resamples=resamples, seed=seed)
    return NullCheck(interval.point, *_bounds(interval.low, interval.high), pairs=len(differences))


RESOLVES_WIDTH = 1.0  # an interval at most this wide can tell sensitivity 1 (serial) from 0 (overlapped)
# A sensitivity is precise when its interval's half width is at most this fraction of its value (of 0.5 for one
# nearer 0): the prediction it makes is then known to the ledger's ±20% band, and more turns would add little.
PRECISION = 0.2


def precise(value: float | None, low: float | None, high: float | None) -> bool:
    """Whether a sensitivity is known well enough to stop measuring it: an interval whose half width is at most
    PRECISION of its value (of 0.5 for a value nearer 0, so an overlapped component's ~0 can be precise too)."""
    if value is None or low is None or high is None or not math.isfinite(value):
        return False
    return (high - low) / 2.0 <= PRECISION * max(abs(value), 0.5)


def unresolved(low: float | None, high: float | None, pairs: int) -> str | None:
    """Why a probed sensitivity cannot be acted on (no interval, or one wider than RESOLVES_WIDTH: its delay is
    within the response's noise), or None when it can; profiler.checks.slowdown says the same of the built-in
    engine's."""
    if low is None or high is None:
        return f"too few delayed turns for an interval ({pairs} pair(s))"
    if high - low > RESOLVES_WIDTH:
        return (
            f"unresolved: its interval is wider than {RESOLVES_WIDTH:g}, so it cannot tell a serial path from an "
            "overlapped one in this run"
        )
    return None
