"""The built-in engine's interpreter share with an interval that carries every input's noise: the steps' and the kernel windows'.

The spans give each span's exact self time in every step; what part of it is kernel comes from a few
torch.profiler windows (profiler.collectors.kernels), each one step or a few, whose kernel fraction
moves a lot from one window to the next (a step's batch and phase change it). So the share
interpreter = busy - kernel - ... has two independent sources of noise, and the interval holds both:

    steps:   the interpreter part of each step's time, resampled in runs of neighbouring steps (a
             moving-block bootstrap: profiler.stats), gives the share's standard error from the steps;
    windows: per window w, the kernel time it implies for the whole run, g_w = sum over spans s of
             a_s x k_s,w (a_s: span s's share of step time, k_s,w: its kernel fraction in window w; a
             span a window did not time takes the run's estimate), gives a Student-t standard error
             sd(g) / sqrt(windows) with windows - 1 degrees of freedom (both spans of one window move
             together, so they are resampled together).

The interval is point +- t x sqrt(se_steps^2 + se_windows^2), t at the fewer freedoms of the two (the
steps': their blocks less one; profiler.stats.combined_interval). With one window, the kernel fraction of a span it timed is
not resolved at all: the interval then runs from that span all kernel to all Python. Without windows,
native samples' model kernel fraction gives a binomial error; an assumed fraction (no window, no
samples) leaves the model span's share open on the high side. `widest` names the input that holds
the interval open, so a run that must go on can say what it waits for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..rundir.schema import Breakdown, Interval
from ..stats import (
    block_length,
    bootstrap_standard_error,
    combined_interval,
    rate_statistic,
)
from .breakdown import StepsRow, kernel_fractions, step_index

if TYPE_CHECKING:
    from ..collectors.kernels import KernelResult, KernelWindow, SpanTime

# Spans whose kernel fraction is below this take no part in the windows' term: nothing moves there.
KERNEL_FLOOR = 0.005
MIN_STEPS = 8  # fewer steps: no interval (a block bootstrap needs several blocks)
WIDEST_STEPS, WIDEST_WINDOWS, WIDEST_UNRESOLVED = "steps", "kernel windows", "kernel windows (too few)"


@dataclass(frozen=True, slots=True)
class ShareInterval:
    """The interpreter share of busy time, its interval, and what the interval rests on."""

    share: float
    low: float
    high: float
    confidence: float
    steps: int
    windows: int
    se_steps: float
    se_windows: float
    widest: str  # which input holds the interval open: WIDEST_STEPS, WIDEST_WINDOWS or WIDEST_UNRESOLVED
    method: str

    def record(self) -> Interval:
        """The verdict's `interpreter_interval` (profiler.rundir.schema.Interval)."""
        return {
            "share": self.share,
            "low": self.low,
            "high": self.high,
            "samples": self.steps,
            "method": self.method,
            "confidence": self.confidence,
            "windows": self.windows,
            "widest": self.widest,
        }


def _window_kernel_shares(
    rows: Sequence[StepsRow],
    windows: Sequence[KernelWindow],
    shares: Mapping[str, float],
    fractions: Mapping[str, float],
) -> np.ndarray:
    """g_w per window: the run's kernel share of step time were every span's fraction the window's own."""
    column_of = {span: f"{span}_ms" for span in shares}
    by_step = {step_index(row): row for row in rows}
    out = []
    for window in windows:
        first, count = int(window["first_step"]), int(window["steps"])
        timed = window.get("by_span") or {}
        total, seen = 0.0, False
        for span, share in shares.items():
            self_ns = sum(
                float(by_step.get(step, {}).get(column_of[span]) or 0.0) * 1e6
                for step in range(first, first + count)
            )
            entry = timed.get(span)
            if entry is not None and self_ns > 0:
                fee = min(entry.get("fee_ns", 0.0), entry["aten_self_ns"])
                fraction = min(
                    1.0, max(0.0, (entry["aten_self_ns"] - fee + entry.get("runtime_ns", 0.0)) / self_ns)
                )
                seen = True
            else:
                fraction = fractions[span]
            total += share * fraction
        if seen:
            out.append(total)
    return np.asarray(out, dtype=float)


def interpreter_share_interval(
    rows: Sequence[StepsRow],
    *,
    point: float,
    kernel_fractions: Mapping[str, float | None],
    kernel_source: str,
    windows: Sequence[KernelWindow] = (),
    model_samples: int | None = None,
    native: Sequence[str] = (),
    confidence: float = 0.95,
    seed: int = 0,
) -> ShareInterval | None:
    """The interval around `point` (the breakdown's interpreter share of busy time), from the steps table's rows
    ({step, duration_ms, <span>_ms...}), the kernel fraction per span the breakdown used and where it came from
    ("profiler windows", "native samples", "assumed": profiler.analysis.breakdown), the windows'
    own splits (the kernels collector's `windows`), and, for "native samples", how many engine samples fell in
    the model span. None with too few steps to resample."""
    steps = [row for row in rows if float(row.get("duration_ms") or 0.0) > 0]
    if len(steps) < MIN_STEPS:
        return None
    duration = np.array([float(row["duration_ms"] or 0.0) for row in steps])
    fractions = {
        span: float(value)
        for span, value in kernel_fractions.items()
        if value is not None and span not in native and any(f"{span}_ms" in row for row in steps[:1])
    }
    spans = {span: np.array([float(row.get(f"{span}_ms") or 0.0) for row in steps]) for span in fractions}
    kernel_ms = sum((spans[span] * fractions[span] for span in spans), np.zeros_like(duration))
    # The steps' term: the interpreter-side time of each step over its length, resampled in blocks.
    se_steps = bootstrap_standard_error(
        np.column_stack([duration - kernel_ms, duration]), rate_statistic, seed=seed
    )
    if not math.isfinite(se_steps):
        return None
    shares = {span: float(spans[span].sum() / duration.sum()) for span in spans}
    moving = {span: share for span, share in shares.items() if fractions[span] >= KERNEL_FLOOR}
    # The steps' error is estimated from about n / block independent blocks: that many freedoms, less one.
    errors, freedoms = [se_steps], [max(1.0, len(steps) // block_length(len(steps)) - 1.0)]
    term = _kernel_term(kernel_source, steps, windows, fractions, shares, moving, model_samples)
    if term.freedoms is not None:
        errors.append(term.se)
        freedoms.append(term.freedoms)
    se_windows, count, open_low, open_high = term.se, term.windows, term.open_low, term.open_high
    interval = combined_interval(point, errors, freedoms, confidence=confidence)
    low, high = max(0.0, interval.low - open_low), min(1.0, interval.high + open_high)
    if open_low or open_high:
        widest = WIDEST_UNRESOLVED
    else:
        widest = WIDEST_WINDOWS if se_windows > se_steps else WIDEST_STEPS
    return ShareInterval(
        share=point,
        low=low,
        high=high,
        confidence=confidence,
        steps=len(steps),
        windows=count,
        se_steps=se_steps,
        se_windows=se_windows,
        widest=widest,
        method=_method(kernel_source, len(steps), count, confidence, open_low or open_high),
    )


@dataclass(frozen=True, slots=True)
class KernelTerm:
    """The kernel fraction's part of the interval: a standard error with its freedoms, or how far a fraction it
    cannot resolve leaves the interval open on each side."""

    se: float = 0.0
    freedoms: float | None = None  # None: no error term (nothing measured, or left open instead)
    windows: int = 0  # kernel windows whose own split entered the term
    open_low: float = 0.0
    open_high: float = 0.0


def _kernel_term(
    source: str,
    steps: Sequence[StepsRow],
    windows: Sequence[KernelWindow],
    fractions: Mapping[str, float],
    shares: Mapping[str, float],
    moving: Mapping[str, float],
    model_samples: int | None,
) -> KernelTerm:
    """The kernel term from where the kernel fractions came: the windows' spread (Student t, or the fraction left open
    with one window), the native samples' binomial error on the model span, or an assumed model span left open high."""
    if source == "profiler windows" and moving:
        g = _window_kernel_shares(steps, windows, moving, fractions)
        count = len(g)
        if count >= 2:
            return KernelTerm(se=float(g.std(ddof=1) / math.sqrt(count)), freedoms=count - 1, windows=count)
        return KernelTerm(
            windows=count,
            open_low=sum(share * (1.0 - fractions[span]) for span, share in moving.items()),
            open_high=sum(share * fractions[span] for span, share in moving.items()),
        )
    if source == "native samples" and "model" in shares and model_samples:
        k = fractions["model"]
        se = shares["model"] * math.sqrt(max(k * (1 - k), 0.25 / model_samples) / model_samples)
        return KernelTerm(se=se, freedoms=math.inf)
    if source == "assumed" and "model" in shares:
        # Every model span counted as kernel: the glue could be any part of it.
        return KernelTerm(open_high=shares["model"])
    return KernelTerm()


def _method(source: str, steps: int, windows: int, confidence: float, unresolved: float) -> str:
    level = f"{100 * confidence:.4g}%"
    if source == "profiler windows":
        kernel = (
            f"the kernel fraction's spread over {windows} torch.profiler windows (Student t)"
            if not unresolved
            else f"{windows} torch.profiler window{'s' if windows != 1 else ''}: the kernel fraction unresolved, "
            "so the interval runs from its spans all kernel to all Python"
        )
    elif source == "native samples":
        kernel = "the model span's kernel fraction from native samples (binomial)"
    else:
        kernel = "no kernel measurement: the model span's glue could be any part of it"
    return f"{level} interval from {steps:,} steps (moving-block bootstrap) and {kernel}"


def breakdown_share_interval(
    breakdown: Breakdown,
    rows: Sequence[StepsRow],
    kernels: KernelResult | None,
    *,
    point: float | None,
    native: Sequence[str] = (),
    confidence: float = 0.95,
) -> ShareInterval | None:
    """interpreter_share_interval over a built-in run's breakdown (its spans split), steps and kernels result."""
    spans = (breakdown.get("methods") or {}).get("spans") or {}
    if point is None or not spans.get("kernel_fraction_by_span"):
        return None
    samples = (breakdown.get("methods") or {}).get("samples") or {}
    components = samples.get("components") or {}
    model_share = (components.get("model_kernels") or 0.0) + (components.get("model_glue") or 0.0)
    return interpreter_share_interval(
        rows,
        point=point,
        kernel_fractions=spans["kernel_fraction_by_span"],
        kernel_source=spans.get("kernel_source") or "",
        windows=(kernels or {}).get("windows") or [],
        model_samples=round(model_share * (samples.get("samples") or 0)) or None,
        native=native,
        confidence=confidence,
    )


SPLIT_TIMES: tuple[Literal["aten_self_ns", "fee_ns", "runtime_ns"], ...] = (
    "aten_self_ns",
    "fee_ns",
    "runtime_ns",
)
# Before the first window, the model span's kernel fraction is all that is known to be unknown.
UNTIMED_KERNEL_SPANS = ("model",)


def _breakdown_fractions(steps: Sequence[StepsRow], windows: Sequence[KernelWindow]) -> dict[str, float]:
    """The breakdown's kernel fraction per span (profiler.analysis.breakdown.kernel_fractions) over these windows."""
    if not windows:
        return {}
    pooled: dict[str, SpanTime] = {}  # each span's windows' split summed (ops and device time not counted)
    for window in windows:
        for span, entry in (window.get("by_span") or {}).items():
            into = pooled.setdefault(
                span, {"aten_self_ns": 0.0, "fee_ns": 0.0, "runtime_ns": 0.0, "ops": 0, "device_ns": 0.0}
            )
            for key in SPLIT_TIMES:
                into[key] += float(entry.get(key) or 0.0)
    kernels: KernelResult = {"status": "ok", "by_span": pooled, "windows": list(windows)}
    found = kernel_fractions(list(steps), kernels, None, [])
    return dict(found.kernel) or _window_mean_fractions(steps, windows)


def _window_mean_fractions(rows: Sequence[StepsRow], windows: Sequence[KernelWindow]) -> dict[str, float]:
    """Each span's kernel fraction as the mean over the windows that timed it (the running estimate's)."""
    by_step = {step_index(row): row for row in rows}
    found: dict[str, list[float]] = {}
    for window in windows:
        first, count = int(window["first_step"]), int(window["steps"])
        for span, entry in (window.get("by_span") or {}).items():
            self_ns = sum(
                float(by_step.get(step, {}).get(f"{span}_ms") or 0.0) * 1e6
                for step in range(first, first + count)
            )
            if self_ns > 0:
                fee = min(entry.get("fee_ns", 0.0), entry["aten_self_ns"])
                kernel = (entry["aten_self_ns"] - fee + entry.get("runtime_ns", 0.0)) / self_ns
                found.setdefault(span, []).append(min(1.0, max(0.0, kernel)))
    return {span: float(np.mean(values)) for span, values in found.items()}


def running_share(
    rows: Sequence[StepsRow],
    windows: Sequence[KernelWindow],
    *,
    confidence: float = 0.95,
    native: Sequence[str] = (),
) -> ShareInterval | None:
    """The interpreter share of step time so far, from the steps recorded and the windows closed, with its interval:
    the cheap estimate a run that goes on until resolved looks at after each round. Its kernel fractions are the
    breakdown's (each window applied to the steps nearest it), so the point is the verdict's but for lock waits,
    GC pauses and the windows' own pauses between steps, a point or less."""
    steps = [row for row in rows if float(row.get("duration_ms") or 0.0) > 0]
    if len(steps) < MIN_STEPS:
        return None
    fractions = _breakdown_fractions(steps, windows)
    if not fractions:
        fractions = {span: 0.5 for span in UNTIMED_KERNEL_SPANS if f"{span}_ms" in steps[0]}
    fractions = {span: k for span, k in fractions.items() if span not in native}
    duration = sum(float(row["duration_ms"] or 0.0) for row in steps)
    kernel = sum(float(row.get(f"{span}_ms") or 0.0) * k for row in steps for span, k in fractions.items())
    return interpreter_share_interval(
        steps,
        point=max(0.0, 1.0 - kernel / duration),
        kernel_fractions=fractions,
        kernel_source="profiler windows",
        windows=windows,
        native=native,
        confidence=confidence,
    )
