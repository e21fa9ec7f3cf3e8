"""Run until resolved: after each whole round of the load, look at the answer so far and go on only while it is not known.

A look reads the steps recorded and the kernel windows closed so far (profiler.analysis.share_interval's
running estimate) and asks two things:
  - does the interpreter share's interval clear the rule's thresholds (1%, 30%)?
  - is every prediction worth a line (a control path at PREDICTION_MIN_SHARE of step time or more) narrow
    enough to act on: its share's half-width within PREDICTION_HALF_WIDTH of the share, or
    PREDICTION_HALF_POINTS of step time, whichever is wider? (Its C twin's speedup is replayed after the
    run, on the run's own work, and carries its own interval.)
On another engine's server (`run --target/--launch`, profiler.session.target.rounds) a look reads py-spy's
samples so far (each py-spy restarted to read them) and, with --probe, the probe's bound on the loop's own work:
its interpreter share's interval must clear the thresholds (its Amdahl bounds do not hold the run), and with
--what-if each slowdown's sensitivity must be precise (profiler.analysis.sensitivity.precise).
If both hold, the run stops; if the next round would pass `max_time_s`, it stops anyway and says which
figure held it up. Each look's intervals are made at profiler.stats.spent_confidence(look), which spends
the 5% miss rate over the looks (alpha / (look (look + 1))), so the interval where the run stops covers
at 95% however many looks it took: stopping when an interval first clears a threshold does not bias it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import scipy.stats

from ...errors import OptionError
from ...scenarios.loadgen import RequestSpec, generate_requests
from ...scenarios.spec import ScenarioSpec
from ..analysis.breakdown import StepsRow
from ..analysis.share_interval import ShareInterval, running_share
from ..rundir.schema import Stopping
from ..stats import bootstrap_standard_error, rate_statistic, spent_confidence

if TYPE_CHECKING:
    from ..collectors.kernels import KernelWindow

THRESHOLDS = (0.01, 0.30)  # the rule's (profiler.analysis.diagnose.THRESHOLDS; analysis imports no session)
PREDICTION_MIN_SHARE = 0.02
PREDICTION_HALF_WIDTH = 0.25
PREDICTION_HALF_POINTS = 0.01
PREDICTION_COLUMNS = ("scheduler", "kv_alloc", "prepare", "sampler")  # the paths a C twin can take over
UNTIL_CHOICES = ("resolved",)
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0


def checked_until(until: str | None, max_time_s: float | None) -> float | None:
    """--until and --max-time checked before any work: the time cap in seconds, or None when not going on."""
    if max_time_s is not None and (not math.isfinite(max_time_s) or not 0 < max_time_s <= MAX_TIME_LIMIT_S):
        raise OptionError(
            f"--max-time={max_time_s}: give the most seconds to run, above 0 and at most a week"
        )
    if until is None:
        if max_time_s is not None:
            raise OptionError(
                "--max-time caps `--until resolved`: give --until resolved too, or use --duration"
            )
        return None
    if until not in UNTIL_CHOICES:
        raise OptionError(f"--until={until!r}: the one condition is 'resolved'")
    if max_time_s is None:
        raise OptionError("--until resolved needs --max-time SECONDS: the most time to spend resolving")
    return max_time_s


class Estimate(Protocol):
    """The interpreter share so far and its interval (share_interval.ShareInterval on the built-in engine)."""

    @property
    def share(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


# A look's question, asked at the look's confidence: (the share so far or None, what holds the answer up).
Judge = Callable[[float], tuple[Estimate | None, list[str]]]
STEPS_WIDTHS = (
    f"share interval clear of {', '.join(f'{t:.0%}' for t in THRESHOLDS)}; each control path at "
    f">= {PREDICTION_MIN_SHARE:.0%} of step time: share half-width <= {PREDICTION_HALF_WIDTH:.0%} of "
    f"the share or {PREDICTION_HALF_POINTS:.0%} of step time"
)


def steps_judge(
    estimate: Callable[[], tuple[Sequence[StepsRow], Sequence[KernelWindow]]],
    native: Sequence[str] = (),
) -> Judge:
    """The built-in engine's look: the steps so far (steps.csv's rows) and the kernel windows closed so far, each with
    its own split, give the running share (share_interval.running_share) and each prediction's width."""

    def judge(confidence: float) -> tuple[Estimate | None, list[str]]:
        rows, windows = estimate()
        share = running_share(rows, windows, confidence=confidence, native=native)
        return share, held_up(share, rows, confidence)

    return judge


@dataclass(frozen=True, slots=True)
class Look:
    """What one look after a round saw: the running share and its interval, and what was not yet resolved."""

    look: int
    rounds: int
    elapsed_s: float
    confidence: float
    share: Estimate | None
    held_by: list[str]
    took_s: float = 0.0  # what the look itself cost (the engine waits between rounds meanwhile)

    def progress_text(self) -> str:
        """The share and its interval for a progress line, and what the run waits for."""
        if self.share is None:
            text = "interpreter share: too few steps yet"
        else:
            text = f"interpreter {self.share.share:.1%} [{self.share.low:.1%}, {self.share.high:.1%}]"
        return text + (f"; waiting on {', '.join(self.held_by)}" if self.held_by else "; resolved")


@dataclass
class Stopper:
    """Decides after each round whether the run goes on (`__call__`), keeping every look it made."""

    max_time_s: float
    judge: Judge  # steps_judge on the built-in engine; target/rounds.samples_judge on a server
    widths: str = STEPS_WIDTHS  # what "resolved" asks, in words, for result.json
    clock: Callable[[], float] = time.monotonic
    on_look: Callable[[Look], None] | None = None
    started: float | None = None
    looks: list[Look] = field(default_factory=list)
    stopped_by: str | None = None  # "resolved", "time cap", or None while going on / never looked

    def start(self) -> None:
        self.started = self.clock()

    def __call__(self, rounds: int) -> bool:
        """After `rounds` whole rounds: True to run another, False to stop."""
        now = self.clock()
        if self.started is None:
            self.started = now
        elapsed = now - self.started
        number = len(self.looks) + 1
        confidence = spent_confidence(number)
        share, held = self.judge(confidence)
        look = Look(number, rounds, elapsed, confidence, share, held, took_s=self.clock() - now)
        self.looks.append(look)
        if self.on_look is not None:
            self.on_look(look)
        if not look.held_by:
            self.stopped_by = "resolved"
            return False
        # Rounds are whole: none starts that would, at the pace so far (its look included), end past the cap.
        per_round = (self.clock() - self.started) / max(1, rounds)
        if elapsed + look.took_s + per_round > self.max_time_s:
            self.stopped_by = "time cap"
            return False
        return True

    @property
    def confidence(self) -> float:
        """The level of the run's final intervals: the last look's."""
        return self.looks[-1].confidence if self.looks else 0.95

    def record(self) -> Stopping:
        """result.json's verdict.stopping."""
        last = self.looks[-1] if self.looks else None
        return {
            "rule": "until resolved",
            "stopped_by": self.stopped_by,
            "looks": len(self.looks),
            "rounds": last.rounds if last else 0,
            "elapsed_s": last.elapsed_s if last else 0.0,
            "max_time_s": self.max_time_s,
            "confidence": self.confidence,
            "held_by": list(last.held_by) if last else [],
            "look_s": sum(look.took_s for look in self.looks),
            "widths": self.widths,
        }


def held_up(share: ShareInterval | None, rows: Sequence[StepsRow], confidence: float) -> list[str]:
    """What is not yet resolved, as phrases (empty: resolved): the share's interval, then each wide prediction."""
    held = []
    if share is None:
        held.append("the interpreter share (too few steps to resample)")
    else:
        straddled = [t for t in THRESHOLDS if share.low <= t <= share.high]
        if straddled:
            held.append(
                f"the interpreter share (straddles {' and '.join(f'{t:.0%}' for t in straddled)}; "
                f"{share.widest})"
            )
    for name, (value, half) in prediction_widths(rows, confidence).items():
        if value >= PREDICTION_MIN_SHARE and half > max(
            PREDICTION_HALF_WIDTH * value, PREDICTION_HALF_POINTS
        ):
            held.append(f"the {name} prediction (share {value:.1%} +- {half:.1%})")
    return held


def prediction_widths(rows: Sequence[StepsRow], confidence: float) -> dict[str, tuple[float, float]]:
    """{control path: (share of step time, half-width at `confidence`)} from the steps so far: the block bootstrap's
    standard error times the normal quantile (the share of hundreds of steps is near normal)."""
    steps = [row for row in rows if float(row.get("duration_ms") or 0.0) > 0]
    if len(steps) < 8:
        return {}
    duration = np.array([float(row["duration_ms"] or 0.0) for row in steps])  # each > 0, as kept above
    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2))
    out = {}
    for name in PREDICTION_COLUMNS:
        values = np.array([float(row.get(f"{name}_ms") or 0.0) for row in steps])
        if values.sum() <= 0:
            continue
        se = bootstrap_standard_error(np.column_stack([values, duration]), rate_statistic)
        out[name] = (float(values.sum() / duration.sum()), z * se if math.isfinite(se) else math.inf)
    return out


def round_maker(
    scenario: ScenarioSpec,
    context: int,
    requests: list[RequestSpec],
    add_prompts: Callable[[list[RequestSpec]], None],
    stopper: Stopper,
    on_more: Callable[[int], None] | None = None,
) -> Callable[[int], list[RequestSpec] | None]:
    """After each round: the stopper's look, then the next round's requests (the scenario's measured requests drawn
    again with the seed moved on by the rounds done, numbered after the last), or None to stop. `requests` grows."""

    def next_round(done: int) -> list[RequestSpec] | None:
        if not stopper(done):
            return None
        again = scenario.with_overrides(seed=scenario.seed + done)
        first = max(request.index for request in requests) + 1
        drawn = [request for request in generate_requests(again, context) if not request.warmup]
        batch = [dataclasses.replace(request, index=first + number) for number, request in enumerate(drawn)]
        add_prompts(batch)
        requests.extend(batch)
        if on_more is not None:
            on_more(sum(not request.warmup for request in requests))
        return batch

    return next_round
