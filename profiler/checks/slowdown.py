"""`run --what-if` on the built-in engine: a run whose named components get a busy delay per call in ABBA turns of steps, and each one's sensitivity from the steps' response.

Coz's virtual speedup for the engine loop: every call of a named component is followed by a delay of a
fraction (the level) of that call's own measured duration, CPU work that holds a core, and the GIL for
the share of the component's own time it holds it (profiler.checks.delay). The delay comes from a span hook on the recording tracer, so the engine knows
nothing of it: the component's own span keeps its own time, and the step around it grows by what the
delay costs the step. Turns of BLOCK_STEPS steps cycle through off, on, on, off per (component, level),
the order of the pairs reversed every other cycle (ABBA, so a steady drift favours no level), and two
off turns meet between pairs (the A/A). Each step is labelled with its turn, its level and the ms the
delay added; profiler.analysis.sensitivity pairs the turns and gives each component's sensitivity.

The slowdown runs apart from the main run, in what-if/ under it: the main run's shares and replayed
speedups stay those of an undelayed engine, and the slowdown's predicted gain uses them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ...errors import OptionError
from ..analysis.sensitivity import (
    DelayBlock,
    NotEnoughBlocks,
    Sensitivity,
    estimate_sensitivity,
)
from .delay import Clock, Spinner

if TYPE_CHECKING:
    from ...engine.engine import Engine

# The engine loop's components that a span names (engine/trace.py) and a step runs in turn.
COMPONENTS = ("scheduler", "kv_alloc", "prepare", "sampler", "detokenizer")
LEVELS = (0.5, 1.0)  # fractions of a call's own duration: two, so a curve would show
# Steps a turn lasts. One-step turns cancel the most drift, but a delayed step lets more requests arrive
# for the next one, and that next step would be an off turn's; four steps keep that aftereffect to a
# quarter of a turn.
BLOCK_STEPS = 4
# The ceiling of a scaled level: a component of 0.25% of the step (vLLM's scheduler, an engine's detokenizer)
# reaches the target share at 100x its call. A ceiling of 10x left those at a few % added, inside a step's own
# swing, unresolved (docs/measurements.md, "llama-cpp-python's server: slowdowns through the probe with levels
# scaled"); a smaller component stays capped, and its line says so.
MAX_LEVEL = 100.0
# A component's levels are scaled up (at most to MAX_LEVEL) until the top one adds about this share of the step:
# a delay of half or all of a call that takes 2% of the step adds 1-2%, inside one step's own noise, and such a
# sensitivity never resolves; scaled, the delay stands out, and the two levels still show a curve.
TARGET_ADDED_SHARE = 0.25
MAX_ROWS = 2_000_000  # labelled steps kept
RESOLVES_WIDTH = 1.0  # an interval at most this wide can tell sensitivity 1 (serial) from 0 (overlapped)
ROUND_COLUMN = "round"  # labelled steps of several runs of one experiment: the run each came from


def check_components(names: Sequence[str], levels: Sequence[float] = LEVELS) -> tuple[str, ...]:
    """The components of `--what-if` on the built-in engine, checked before work starts (OptionError names the fix)."""
    chosen = tuple(dict.fromkeys(name.strip() for name in names if name.strip()))
    if not chosen:
        raise OptionError(f"--what-if needs at least one component: one or more of {', '.join(COMPONENTS)}")
    unknown = [name for name in chosen if name not in COMPONENTS]
    if unknown:
        raise OptionError(
            f"--what-if {','.join(unknown)}: the built-in engine has no such component; use {', '.join(COMPONENTS)}"
        )
    if not levels or not all(0 < level <= MAX_LEVEL for level in levels):
        raise OptionError(
            f"--what-if levels {list(levels)}: give fractions of a call above 0, up to {MAX_LEVEL:g}"
        )
    return chosen


@dataclass(frozen=True, slots=True)
class Turn:
    """A block's setting: the component delayed (None: no delay) and its level."""

    component: str | None
    level: float


def level_scale(share: float | None, levels: Sequence[float]) -> float:
    """How much to scale a component's levels so the top one adds about TARGET_ADDED_SHARE of the step, from its
    share of the step undelayed; 1 when the share is unknown or already large enough, never past MAX_LEVEL."""
    top = max(levels)
    if share is None or not math.isfinite(share) or share <= 0:
        return 1.0
    return max(1.0, min(TARGET_ADDED_SHARE / (share * top), MAX_LEVEL / top))


def turn_of(
    block: int,
    components: Sequence[str],
    levels: Sequence[float],
    scales: Mapping[str, float] | None = None,
) -> Turn:
    """Block `block`'s turn: per (component, level) off, on, on, off; the pairs in reverse order every other cycle.
    A component's levels are multiplied by its `scales` entry (level_scale), if any."""
    scales = scales or {}
    experiments = [
        (component, level * scales.get(component, 1.0)) for component in components for level in levels
    ]
    cycle, position = divmod(block, 4 * len(experiments))
    pair, within = divmod(position, 4)
    if cycle % 2:
        pair = len(experiments) - 1 - pair
    if within in (0, 3):
        return Turn(None, 0.0)
    component, level = experiments[pair]
    return Turn(component, level)


@dataclass(slots=True)
class _StepRow:
    step: int
    block: int
    component: str | None
    level: float
    added_ns: int = 0
    requested_ns: int = 0
    calls: int = 0


class SlowdownExperiment:
    """Delays the named components' calls in turns of steps, through the engine's recording tracer's hooks.

    Duck-types profiler.checks.twin_switch.SamplerSwitch for a session's hooks: install(engine) before
    the engine starts, start() once the collectors run (warm-up over); until then no step is delayed.
    """

    def __init__(
        self,
        components: Sequence[str],
        *,
        levels: Sequence[float] = LEVELS,
        scales: Mapping[str, float] | None = None,
        released: Mapping[str, float] | None = None,
        block_steps: int = BLOCK_STEPS,
        clock: Clock = time.perf_counter_ns,
        spinner: Spinner | None = None,
    ) -> None:
        """`scales`: per component, the factor its levels are multiplied by (level_scale: 1 when not given);
        `released`: per component, the share of its delay spent with the GIL released (its kernel share: 0 when
        not given)."""
        if block_steps < 1:
            raise ValueError(f"block_steps={block_steps}: a turn holds at least one step")
        self.components = check_components(components, levels)
        self.levels = tuple(levels)
        self.scales = {name: float((scales or {}).get(name, 1.0)) for name in self.components}
        if not all(1.0 <= scale and scale * max(self.levels) <= MAX_LEVEL for scale in self.scales.values()):
            raise ValueError(f"scales {self.scales}: each at least 1, and no level past {MAX_LEVEL:g}")
        self.released = {name: float((released or {}).get(name, 0.0)) for name in self.components}
        if not all(0.0 <= share <= 1.0 for share in self.released.values()):
            raise ValueError(f"released {self.released}: each a share of the delay, from 0 to 1")
        self.block_steps = block_steps
        self.clock = clock
        self.spinner = spinner or Spinner(clock)
        self.rows: list[_StepRow] = []
        self.calls: dict[str, list[tuple[int, int]]] = {
            name: [] for name in self.components
        }  # (requested, added) ns
        self._started = False
        self._steps = 0  # steps begun since start()
        self._row: _StepRow | None = None  # the step in progress
        self._target: str | None = None  # the component this step delays
        self._entered_ns = 0

    def install(self, engine: Engine) -> None:
        """Before the engine starts: hook its recording tracer's steps and spans."""
        tracer = engine.tracer
        if not hasattr(tracer, "add_span_hook") or not hasattr(tracer, "add_step_listener"):
            raise RuntimeError(
                "--what-if delays calls through the recording tracer: the run must be profiled"
            )
        tracer.add_step_listener(self.on_step)
        tracer.add_span_hook(self.on_span)

    def start(self, _collectors: object = None) -> None:
        """The session's on_collectors hook: calibrate the delay, then delay from the next step on."""
        self.spinner.calibrate()
        self._started = True

    def on_step(self, step: int, begin: bool) -> None:
        if not begin:
            row, self._row, self._target = self._row, None, None
            if row is not None and len(self.rows) < MAX_ROWS:
                self.rows.append(row)
            return
        if not self._started:
            return
        block = self._steps // self.block_steps
        self._steps += 1
        turn = turn_of(block, self.components, self.levels, self.scales)
        self._row = _StepRow(step, block, turn.component, turn.level)
        self._target = turn.component

    def on_span(self, name: str, enter: bool) -> None:
        if name != self._target:
            return
        now = self.clock()
        if enter:
            self._entered_ns = now
            return
        row = self._row
        assert row is not None  # a target is set only inside a step
        requested = int(row.level * (now - self._entered_ns))
        added = self.spinner.spin(now, requested, self.released[name])
        row.added_ns += added
        calls = self.calls[name]
        if len(calls) < MAX_ROWS:
            calls.append((requested, added))
        row.requested_ns += requested
        row.calls += 1

    def labels(self) -> pd.DataFrame:
        """Per delayed-run step: its turn's block, component ("" when off), level, and the delay's ms and calls."""
        return pd.DataFrame(
            {
                "step": [row.step for row in self.rows],
                "block": [row.block for row in self.rows],
                "what_if_component": [row.component or "" for row in self.rows],
                "what_if_level": [row.level for row in self.rows],
                "what_if_added_ms": [row.added_ns / 1e6 for row in self.rows],
                "what_if_requested_ms": [row.requested_ns / 1e6 for row in self.rows],
                "what_if_calls": [row.calls for row in self.rows],
            }
        )


def label_steps(labels: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The run's steps that a turn covered, with their labels (the tracer numbers steps as the engine does)."""
    if not len(labels) or steps is None or not len(steps) or "step" not in steps:
        return pd.DataFrame(columns=[*(steps.columns if steps is not None else []), *labels.columns])
    return steps.merge(labels, on="step", how="inner")


def expected_ms(labelled: pd.DataFrame) -> np.ndarray:
    """Each step's time by its kind alone, fitted on the off turns' steps: its kind's mean (batch size, and whether
    it prefills) plus a pooled slope per prefill token. A delay does not choose which steps prefill, so taking this
    out of every step leaves the delay's response and removes most of the noise that a turn's mix of steps adds."""
    if not len(labelled) or not {"batch_size", "prefill_tokens"} <= set(labelled.columns):
        return np.zeros(len(labelled))
    kind = labelled["batch_size"].astype(str) + "/" + (labelled["prefill_tokens"] > 0).astype(str)
    prefill = labelled["prefill_tokens"].to_numpy(dtype=float)
    duration = labelled["duration_ms"].to_numpy(dtype=float)
    off = (labelled["what_if_component"] == "").to_numpy()
    frame = pd.DataFrame({"kind": kind[off], "prefill": prefill[off], "duration": duration[off]})
    if not len(frame):
        return np.zeros(len(labelled))
    means = frame.groupby("kind")[["prefill", "duration"]].mean()
    centred_prefill = frame["prefill"] - frame["kind"].map(means["prefill"])
    centred_duration = frame["duration"] - frame["kind"].map(means["duration"])
    spread = float((centred_prefill**2).sum())
    slope = float((centred_prefill * centred_duration).sum()) / spread if spread > 0 else 0.0
    kind_prefill = kind.map(means["prefill"]).to_numpy(dtype=float, copy=True)
    kind_duration = kind.map(means["duration"]).to_numpy(dtype=float, copy=True)
    # A kind no off step had: the off steps' overall level, by the same slope.
    unseen = np.isnan(kind_duration)
    kind_prefill[unseen] = frame["prefill"].mean()
    kind_duration[unseen] = frame["duration"].mean()
    return kind_duration + slope * (prefill - kind_prefill)


def delay_blocks(labelled: pd.DataFrame, component: str) -> list[DelayBlock]:
    """One DelayBlock per turn that was off or delayed `component` (other components' turns are left out), each
    with the time its steps take by their kind (expected_ms), which the pairs take out of the response. Steps of
    several rounds (a `round` column: one run each) keep their round: each round's kinds are fitted on its own off
    steps, and its blocks pair only among themselves."""
    if ROUND_COLUMN not in labelled or not len(labelled):
        return _round_blocks(labelled, component, 0)
    blocks = []
    for number, rows in labelled.groupby(ROUND_COLUMN, sort=True):
        blocks.extend(_round_blocks(rows, component, int(number)))
    return blocks


def _round_blocks(labelled: pd.DataFrame, component: str, run: int) -> list[DelayBlock]:
    mine = labelled.assign(expected_ms=expected_ms(labelled))
    mine = mine[(mine["what_if_component"] == "") | (mine["what_if_component"] == component)]
    blocks = []
    for block, rows in mine.groupby("block", sort=True):
        blocks.append(
            DelayBlock(
                index=int(block),
                level=float(rows["what_if_level"].iloc[0]),
                added_ms=float(rows["what_if_added_ms"].sum()),
                response_ms=float(rows["duration_ms"].sum()),
                units=float(len(rows)),
                expected_ms=float(rows["expected_ms"].sum()),
                run=run,
            )
        )
    return blocks


@dataclass(frozen=True, slots=True)
class ComponentSlowdown:
    """One component's experiment: its sensitivity (None with `void` saying why) and the delay's accuracy."""

    component: str
    sensitivity: Sensitivity | None
    void: str | None
    requested_ms: float
    added_ms: float
    calls: int
    share_off: float | None  # its span time over step time in the off turns: its share undelayed
    median_error: float | None = None  # per call: the median of |added / requested - 1|
    within_5pct: float | None = (
        None  # per call: the share of calls whose added time was within 5% of the request
    )

    @property
    def accuracy(self) -> float | None:
        """added / requested over the run (1.0: exact)."""
        return self.added_ms / self.requested_ms if self.requested_ms > 0 else None


def analyse(
    labelled: pd.DataFrame, components: Sequence[str], *, resamples: int = 2000
) -> list[ComponentSlowdown]:
    """Each component's sensitivity over the labelled steps, and what its delay added against what was asked."""
    found = []
    off = labelled[labelled["what_if_component"] == ""] if len(labelled) else labelled
    for component in components:
        mine = labelled[labelled["what_if_component"] == component] if len(labelled) else labelled
        column = f"{component}_ms"
        share = None
        if len(off) and column in off and off["duration_ms"].sum() > 0:
            share = float(off[column].sum() / off["duration_ms"].sum())
        sensitivity: Sensitivity | None = None
        try:
            measured = estimate_sensitivity(
                component, delay_blocks(labelled, component) if len(labelled) else [], resamples=resamples
            )
            sensitivity, void = measured, unresolved(measured)
        except NotEnoughBlocks as error:
            void = str(error)
        found.append(
            ComponentSlowdown(
                component=component,
                sensitivity=sensitivity,
                void=void,
                requested_ms=float(mine["what_if_requested_ms"].sum()) if len(mine) else 0.0,
                added_ms=float(mine["what_if_added_ms"].sum()) if len(mine) else 0.0,
                calls=int(mine["what_if_calls"].sum()) if len(mine) else 0,
                share_off=share if share is None or math.isfinite(share) else None,
            )
        )
    return found


def unresolved(sensitivity: Sensitivity) -> str | None:
    """Why a sensitivity cannot be acted on: no interval, or one too wide to tell a serial path (1) from an
    overlapped one (0); None when it can. A component whose calls are a sliver of the step adds a delay
    smaller than the step's own noise, and the ratio then swings far past 0 and 1 either way."""
    low, high = sensitivity.low, sensitivity.high
    if low is None or high is None:
        return f"{sensitivity.component}: too few delayed turns for an interval ({sensitivity.pairs} pair(s))"
    if high - low > RESOLVES_WIDTH:
        return (
            f"{sensitivity.component}: its interval [{low:.2f}, {high:.2f}] is wider than {RESOLVES_WIDTH:g}, so it "
            "cannot tell a serial path from an overlapped one: its delay is within the step's noise in this run"
        )
    return None


def call_accuracy(calls: Sequence[tuple[int, int]]) -> tuple[float | None, float | None]:
    """(median |added / requested - 1|, share of calls within 5%) over (requested, added) ns per call."""
    errors = np.array([abs(added / requested - 1.0) for requested, added in calls if requested > 0])
    if not len(errors):
        return None, None
    return float(np.median(errors)), float((errors <= 0.05).mean())
