"""The measured gain of a twin switched in ABBA blocks within one run, with 95% intervals that resample units of neighbouring blocks.

Each step is labelled by the sampler call made in it (profiler.checks.twin_switch): its block, and
whether the C twin served. Two figures, as in profiler.checks.verify: the gain in busy time per token
(1 - the C blocks' step time per token over the Python blocks'; tokens per step are its batch size),
and the gain at the same steps, which is what Amdahl's prediction is for: a step's time is fitted as
its kind's own level (kind: batch size, and whether it prefills) plus a cost per prefill token plus
delta where the C twin served, and the gain is -delta over the Python steps' mean time. The second is
the steadier by far: which block a long prefill lands in moves the first more than the twin does.
The same fit on each phase's time says where the gain came from: the twin's own span, and the other
phases, which the prediction cannot see (the model span can run faster in one twin's blocks too). The
twin's own phase's part gets an interval of its own, far narrower than the whole gain's. What these gave
on SmolLM2 `concurrency-30`, against the prediction and against per-kind means: docs/measurements.md,
"Figures moved out of code comments".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..stats import Statistic, bootstrap


@dataclass(frozen=True, slots=True)
class InRunGain:
    """Gains of the C twin over the Python one (0.08: 8% less busy time per token), each with its interval."""

    gain: float
    low: float | None  # interval ends: None when too few units to give one
    high: float | None
    mix_gain: float | None
    mix_low: float | None
    mix_high: float | None
    mix_coverage: (
        float  # the share of the Python steps whose kind the C twin's steps also had (they fit delta)
    )
    pairs: int  # pairs of neighbouring blocks (one of each twin) in the complete units
    steps: int  # labelled steps in complete units
    batch_native: float | None  # mean batch size of the C blocks' steps, and of the Python blocks'
    batch_python: float | None
    parts: dict[str, float] = field(
        default_factory=dict
    )  # phase -> its share of mix_gain (points of step time)
    own_low: float | None = None  # the interval of the twin's own phase's part (inrun_gain's `own`)
    own_high: float | None = None
    units: int = 0  # the units of blocks the intervals resampled (inrun_gain's unit_blocks)


def label_steps(
    calls: Sequence[tuple[int, int, bool]], steps: pd.DataFrame, switch_ns: Sequence[int] | None = None
) -> pd.DataFrame:
    """The steps that made a sampler call, with that call's `block` and `native` (the C twin served) added,
    and, given the time each call's switch of twins took (`switch_ns`), that time taken out of the step:
    its end, its duration and its sampler phase. No twin pays a switch once it is the only one, and the
    twins do not pay it alike (docs/measurements.md, "The switch's own time")."""
    if not len(calls) or steps is None or not len(steps):
        return pd.DataFrame(columns=[*(steps.columns if steps is not None else []), "block", "native"])
    times = np.array([call[0] for call in calls], dtype=np.int64)
    starts = steps["start_ns"].to_numpy(dtype=np.int64)
    ends = steps["end_ns"].to_numpy(dtype=np.int64)
    index = np.searchsorted(times, starts, side="left")
    found = index < len(times)
    found[found] &= times[index[found]] <= ends[found]
    labelled = steps.loc[found].copy()
    labelled["block"] = [calls[i][1] for i in index[found]]
    labelled["native"] = [calls[i][2] for i in index[found]]
    if switch_ns is not None:
        taken = np.asarray(switch_ns, dtype=np.int64)[index[found]]
        labelled["switch_ms"] = taken / 1e6
        labelled["end_ns"] = labelled["end_ns"].to_numpy(dtype=np.int64) - taken
        for column in ("duration_ms", "sampler_ms"):
            if column in labelled:
                labelled[column] = labelled[column].to_numpy(dtype=float) - taken / 1e6
    return labelled


def _busy_gain(rows: np.ndarray) -> np.ndarray:
    """1 - (C ns / C tokens) / (Python ns / Python tokens) per resample of unit rows (C tokens, C ns, Py tokens, Py ns)."""
    native_tokens, native_ns, python_tokens, python_ns = (
        rows[..., column].sum(axis=1) for column in range(4)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = 1.0 - (native_ns / native_tokens) / (python_ns / python_tokens)
    return np.where((native_tokens == 0) | (python_tokens == 0), np.nan, gain)


# Per (unit, kind of step) sums whose totals give a weighted within-kind regression: n, a, p, y, a*p, p*p, a*y,
# p*y with a = 1 where the C twin served, p = prefill tokens, y = step ms (a*a is a).
_SUMS = 8


def _same_steps_statistic(kinds: int) -> Statistic:
    """The gain at the same steps per resample of unit rows [the _SUMS sums per kind | Python ms | Python steps]:
    step ms = a kind's own level + b * prefill tokens + delta * (C twin served), fitted within kinds; the
    gain is -delta over the Python steps' mean ms."""

    def statistic(rows: np.ndarray) -> np.ndarray:
        totals = rows.sum(axis=1)
        n, a, p, y, ap, pp, ay, py = (totals[..., i * kinds : (i + 1) * kinds] for i in range(_SUMS))
        python_ms, python_steps = totals[..., -2], totals[..., -1]
        with np.errstate(divide="ignore", invalid="ignore"):
            inverse_n = np.where(n > 0, 1.0 / n, 0.0)
            s_aa = (a - a * a * inverse_n).sum(axis=-1)
            s_ap = (ap - a * p * inverse_n).sum(axis=-1)
            s_pp = (pp - p * p * inverse_n).sum(axis=-1)
            s_ay = (ay - a * y * inverse_n).sum(axis=-1)
            s_py = (py - p * y * inverse_n).sum(axis=-1)
            det = s_aa * s_pp - s_ap * s_ap
            # Without prefill tokens varying inside a kind, the prefill term drops out.
            solvable = det > 1e-9 * np.maximum(s_aa * s_pp, 1e-300)
            delta = np.where(solvable, (s_ay * s_pp - s_ap * s_py) / det, s_ay / s_aa)
            return np.where((s_aa > 0) & (python_steps > 0), -delta / (python_ms / python_steps), np.nan)

    return statistic


def _bound(value: float) -> float | None:
    """An interval's end, None where the bootstrap had too few units to give one (NaN)."""
    return float(value) if np.isfinite(value) else None


def inrun_gain(
    labelled: pd.DataFrame,
    *,
    own: str | None = None,
    unit_blocks: int = 2,
    resamples: int = 2000,
    seed: int = 0,
) -> InRunGain | None:
    """The C twin's gains over the Python twin's from the run's steps as label_steps labels them (start_ns,
    end_ns, batch_size, prefill_tokens, block, native); None without a unit of blocks with steps of both.
    The intervals resample whole units of `unit_blocks` neighbouring blocks (an even number: every unit holds
    both twins' blocks), so that steps whose noise is shared stay together however short the blocks are.
    `own` names the twin's own phase (a <phase>_ms column): its part gets an interval over the same units."""
    if unit_blocks < 2 or unit_blocks % 2:
        raise ValueError(f"unit_blocks={unit_blocks}: a unit holds an even number of blocks, at least 2")
    if not len(labelled):
        return None
    labelled = _complete_units(labelled, unit_blocks)
    if not len(labelled):
        return None
    steps = _UnitSteps.of(labelled)
    busy = bootstrap([_busy_rows(steps)], _busy_gain, resamples=resamples, seed=seed)
    statistic = _same_steps_statistic(steps.kinds)
    mix = bootstrap([_same_steps_rows(steps, steps.ms)], statistic, resamples=resamples, seed=seed)
    # The twin's own part is what Amdahl's prediction is about; the other phases' noise (the model span on a
    # shared machine) widens the whole gain's interval but not this one.
    own_part = None
    if own is not None and f"{own}_ms" in labelled.columns:
        own_rows = _same_steps_rows(steps, labelled[f"{own}_ms"].to_numpy(dtype=float))
        own_part = bootstrap([own_rows], statistic, resamples=resamples, seed=seed)
    finite = bool(np.isfinite(mix.point))
    return InRunGain(
        gain=busy.point,
        low=_bound(busy.low),
        high=_bound(busy.high),
        mix_gain=mix.point if finite else None,
        mix_low=_bound(mix.low) if finite else None,
        mix_high=_bound(mix.high) if finite else None,
        mix_coverage=_kind_coverage(steps),
        pairs=int(labelled["block"].floordiv(2).nunique()),
        units=steps.units,
        steps=len(steps.ns),
        parts=_phase_parts(steps, statistic, labelled),
        batch_native=float(steps.batch[steps.native].mean()),
        batch_python=float(steps.batch[~steps.native].mean()),
        own_low=_bound(own_part.low) if own_part is not None else None,
        own_high=_bound(own_part.high) if own_part is not None else None,
    )


def _complete_units(labelled: pd.DataFrame, unit_blocks: int) -> pd.DataFrame:
    """The labelled steps with their `unit` (of `unit_blocks` neighbouring blocks) and `ns`, kept only in the
    units that hold steps of both twins."""
    labelled = labelled.assign(
        unit=labelled["block"] // unit_blocks, ns=labelled["end_ns"] - labelled["start_ns"]
    )
    sides = labelled.groupby(["unit", "native"]).size().unstack(fill_value=0)
    complete = (
        sides.index[(sides.get(True, 0) > 0) & (sides.get(False, 0) > 0)] if len(sides.columns) == 2 else []
    )
    return labelled[labelled["unit"].isin(complete)]


@dataclass(frozen=True)
class _UnitSteps:
    """The steps of complete units as arrays: each step's unit, twin, time, batch, prefill tokens and kind
    (kind: batch size, and whether it prefills)."""

    units: int
    unit_of: np.ndarray  # each step's unit, 0..units-1
    native: np.ndarray  # the C twin served
    ns: np.ndarray
    ms: np.ndarray
    batch: np.ndarray
    prefill: np.ndarray  # prefill tokens
    kinds: int
    kind_of: np.ndarray

    @classmethod
    def of(cls, labelled: pd.DataFrame) -> _UnitSteps:
        unit_ids = np.sort(labelled["unit"].unique())
        ns = labelled["ns"].to_numpy(dtype=float)
        batch = labelled["batch_size"].to_numpy(dtype=np.int64)
        kinds, kind_of = np.unique(
            batch * 2 + (labelled["prefill_tokens"].to_numpy() > 0), return_inverse=True
        )
        return cls(
            units=len(unit_ids),
            unit_of=np.searchsorted(unit_ids, labelled["unit"].to_numpy()),
            native=labelled["native"].to_numpy(dtype=bool),
            ns=ns,
            ms=ns / 1e6,
            batch=batch,
            prefill=labelled["prefill_tokens"].to_numpy(dtype=float),
            kinds=len(kinds),
            kind_of=kind_of,
        )

    def per_unit(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The sum of `values` over each unit's steps where `mask` holds."""
        return np.bincount(self.unit_of[mask], weights=values[mask], minlength=self.units)

    def per_unit_kind(self, values: np.ndarray) -> np.ndarray:
        """The sum of `values` over each unit's steps of each kind (units x kinds)."""
        cells = self.unit_of * self.kinds + self.kind_of
        size = self.units * self.kinds
        return np.bincount(cells, weights=values, minlength=size).reshape(self.units, self.kinds)


def _busy_rows(steps: _UnitSteps) -> np.ndarray:
    """Per unit: the C twin's tokens and ns, the Python twin's tokens and ns (_busy_gain's rows)."""
    tokens = steps.batch.astype(float)
    return np.column_stack(
        [
            steps.per_unit(tokens, steps.native),
            steps.per_unit(steps.ns, steps.native),
            steps.per_unit(tokens, ~steps.native),
            steps.per_unit(steps.ns, ~steps.native),
        ]
    )


def _same_steps_rows(steps: _UnitSteps, values: np.ndarray) -> np.ndarray:
    """Per unit: the _SUMS sums per kind that fit `values` (ms per step), then the Python steps' ms and count
    (_same_steps_statistic's rows)."""
    a, p = steps.native.astype(float), steps.prefill
    ones = np.ones(len(steps.ms))
    python_mean = [
        steps.per_unit(steps.ms, ~steps.native)[:, None],
        steps.per_unit(ones, ~steps.native)[:, None],
    ]
    return np.hstack(
        [steps.per_unit_kind(column) for column in (ones, a, p, values, a * p, p * p, a * values, p * values)]
        + python_mean
    )


def _phase_parts(steps: _UnitSteps, statistic: Statistic, labelled: pd.DataFrame) -> dict[str, float]:
    """The same fit on each phase's time (steps.csv's <phase>_ms): where the gain came from."""
    # The fit is linear in the time, so the parts add up to the whole less what no phase's span covers. A part
    # outside the twin's own phase is an effect Amdahl's prediction does not count.
    return {
        column[:-3]: float(
            statistic(_same_steps_rows(steps, labelled[column].to_numpy(dtype=float))[None, ...])[0]
        )
        for column in labelled.columns
        if column.endswith("_ms") and column not in ("duration_ms", "switch_ms")
    }


def _kind_coverage(steps: _UnitSteps) -> float:
    """The share of the Python steps whose kind the C twin's steps also had (the steps that fit delta)."""
    native_steps = np.bincount(steps.kind_of[steps.native], minlength=steps.kinds)
    python_steps = np.bincount(steps.kind_of[~steps.native], minlength=steps.kinds)
    return float(python_steps[native_steps > 0].sum() / python_steps.sum())
