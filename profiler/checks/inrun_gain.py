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

from ..stats import bootstrap


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


def _same_steps_statistic(kinds: int):
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
    labelled = labelled.assign(
        unit=labelled["block"] // unit_blocks, ns=labelled["end_ns"] - labelled["start_ns"]
    )
    sides = labelled.groupby(["unit", "native"]).size().unstack(fill_value=0)
    complete = (
        sides.index[(sides.get(True, 0) > 0) & (sides.get(False, 0) > 0)] if len(sides.columns) == 2 else []
    )
    labelled = labelled[labelled["unit"].isin(complete)]
    if not len(labelled):
        return None
    units = np.sort(labelled["unit"].unique())
    unit_of = np.searchsorted(units, labelled["unit"].to_numpy())  # each step's unit
    native = labelled["native"].to_numpy(dtype=bool)
    ns = labelled["ns"].to_numpy(dtype=float)
    batch = labelled["batch_size"].to_numpy(dtype=np.int64)

    def per_unit(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.bincount(unit_of[mask], weights=values[mask], minlength=len(units))

    busy_rows = np.column_stack(
        [
            per_unit(batch.astype(float), native),
            per_unit(ns, native),
            per_unit(batch.astype(float), ~native),
            per_unit(ns, ~native),
        ]
    )
    busy = bootstrap([busy_rows], _busy_gain, resamples=resamples, seed=seed)

    kinds, kind_of = np.unique(batch * 2 + (labelled["prefill_tokens"].to_numpy() > 0), return_inverse=True)
    cells = unit_of * len(kinds) + kind_of
    size = len(units) * len(kinds)
    a = native.astype(float)
    p = labelled["prefill_tokens"].to_numpy(dtype=float)
    y = ns / 1e6

    def per_unit_kind(values: np.ndarray) -> np.ndarray:
        return np.bincount(cells, weights=values, minlength=size).reshape(len(units), len(kinds))

    python_mean = [per_unit(y, ~native)[:, None], per_unit(np.ones(len(y)), ~native)[:, None]]

    def same_rows(
        values: np.ndarray,
    ) -> np.ndarray:  # the fit of `values` (ms per step) over the Python steps' mean
        return np.hstack(
            [
                per_unit_kind(column)
                for column in (np.ones(len(y)), a, p, values, a * p, p * p, a * values, p * values)
            ]
            + python_mean
        )

    statistic = _same_steps_statistic(len(kinds))
    mix = bootstrap([same_rows(y)], statistic, resamples=resamples, seed=seed)
    # The same fit on each phase's time (steps.csv's <phase>_ms): where the gain came from (the fit is linear in
    # the time, so the parts add up to the whole less what no phase's span covers). A part outside the twin's
    # own phase is an effect Amdahl's prediction does not count.
    parts = {
        column[:-3]: float(statistic(same_rows(labelled[column].to_numpy(dtype=float))[None, ...])[0])
        for column in labelled.columns
        if column.endswith("_ms") and column not in ("duration_ms", "switch_ms")
    }
    # The twin's own part is what Amdahl's prediction is about; the other phases' noise (the model span on a
    # shared machine) widens the whole gain's interval but not this one.
    own_part = None
    if own is not None and f"{own}_ms" in labelled.columns:
        own_part = bootstrap(
            [same_rows(labelled[f"{own}_ms"].to_numpy(dtype=float))],
            statistic,
            resamples=resamples,
            seed=seed,
        )
    native_steps = np.bincount(kind_of[native], minlength=len(kinds))
    python_steps = np.bincount(kind_of[~native], minlength=len(kinds))
    coverage = float(python_steps[native_steps > 0].sum() / python_steps.sum())
    finite = bool(np.isfinite(mix.point))
    return InRunGain(
        gain=busy.point,
        low=_bound(busy.low),
        high=_bound(busy.high),
        mix_gain=mix.point if finite else None,
        mix_low=_bound(mix.low) if finite else None,
        mix_high=_bound(mix.high) if finite else None,
        mix_coverage=coverage,
        pairs=int(labelled["block"].floordiv(2).nunique()),
        units=len(units),
        steps=len(ns),
        parts=parts,
        batch_native=float(batch[native].mean()),
        batch_python=float(batch[~native].mean()),
        own_low=_bound(own_part.low) if own_part is not None else None,
        own_high=_bound(own_part.high) if own_part is not None else None,
    )
