"""The verdict: the bottleneck, the field's rule of thumb on interpreter share, and Amdahl predictions per native path.

Rule of thumb, as the field states it (interpreter share of a step, i.e. of the engine's busy time,
idle excluded):
    <= 1%  "stay in Python"          (a rewrite cannot pay for its cost)
    >= 30% "a native rewrite pays"   (Python is the step's bottleneck)
    else   "targeted native paths"   (the band between: measure further, rewrite selectively, the
                                      biggest control components first)
The share comes with a 95% interval: the spans' (the steps' noise and the kernel windows' spread:
profiler.analysis.share_interval), the Wilson interval of the engine thread's interpreter samples among
its busy samples (profiler.stats) when native stack samples resolve interpreter time, or both intersected
(verdict_interval). When the interval straddles 1% or 30% the verdict says that this run cannot tell yet
which side it is on, and what holds the interval open.
Prediction per native-capable component c (scheduler, sampler, kv_alloc, prepare), Amdahl's law:
    predicted_gain = share(c) x (1 - 1 / native_speedup(c))
share(c) is c's share of busy step time (spans), native_speedup(c) the C twin's speedup over the Python
twin measured by replaying this run's own recorded work through both (profiler.replay; a caller's
microbenchmark figure only where there is no replay), with its 95% interval carried into
predicted_gain_low/high; predicted_gain is the fraction of step time saved. measured_gain (same unit) is
1 - native step time / Python step time from a verify run (see `measured_gain`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from ..rundir.components import CATEGORIES, CONTROL_PATHS, NATIVE_CAPABLE
from ..rundir.health import VOID_BUSY, void_reason
from ..rundir.schema import (
    Breakdown,
    CollectorStatus,
    ControlPath,
    GpuTime,
    GpuVerdict,
    Health,
    Interval,
    Prediction,
    ReplayComponent,
    Split,
    StepShare,
    Verdict,
)
from ..stats import wilson_interval

STAY_UP_TO = 0.01
REWRITE_FROM = 0.30
THRESHOLDS = (STAY_UP_TO, REWRITE_FROM)
RULE_STAY = "stay in Python"
RULE_TARGETED = "targeted native paths"
RULE_REWRITE = "a native rewrite pays"
# CONTROL_PATHS (components.py) is the per-token control flow; model_glue is the model's own Python around its
# kernels, which no twin replaces, so it is never "the largest control path".
CONTROL_COMPONENTS = (*CONTROL_PATHS, "queue", "model_glue")
DISAGREEMENT_NOTE_PP = 10.0
IDLE_NOTE = 0.30


class Speedup(TypedDict, total=False):
    """A C twin's speedup over the Python twin, with where it came from ("replay" or "microbenchmark")."""

    speedup: float
    low: float | None
    high: float | None
    source: str
    steps: int | None
    rows: int | None  # the sampler's replay: sequences over its steps (a speedup depends on the batch)
    lowered: int | None  # the sampler's replay: steps played at fewer torch threads, as the run had them
    python_priced: str | None  # the sampler's replay: "run" when the Python side is the run's own time


def rule_for(interpreter_share: float) -> str:
    if interpreter_share <= STAY_UP_TO:
        return RULE_STAY
    if interpreter_share >= REWRITE_FROM:
        return RULE_REWRITE
    return RULE_TARGETED


def amdahl_gain(share: float, native_speedup: float) -> float:
    """Fraction of total time saved when a part taking `share` of it runs `native_speedup` times faster."""
    if native_speedup <= 0:
        raise ValueError(f"native_speedup must be positive, got {native_speedup}")
    return share * (1.0 - 1.0 / native_speedup)


def measured_gain(python_step_ms: float, native_step_ms: float) -> float:
    """The verify run's gain in predicted_gain's unit: the fraction of step time the native run saved."""
    return 1.0 - native_step_ms / python_step_ms


def _largest(values: dict[str, float | None], names: Iterable[str] | None = None) -> tuple[str | None, float]:
    candidates = [
        (name, value)
        for name, value in values.items()
        if value is not None and (names is None or name in names)
    ]
    if not candidates:
        return None, 0.0
    return max(candidates, key=lambda item: item[1])


def interpreter_interval(breakdown: Breakdown, *, confidence: float = 0.95) -> Interval | None:
    """The interpreter share of busy time with its Wilson interval (95% unless asked), from the engine thread's
    native samples ({share, low, high, samples, method}); None without native samples to count."""
    samples = breakdown.get("methods", {}).get("samples") or {}
    total = samples.get("samples") or 0
    categories = samples.get("categories") or {}
    interpreter = categories.get("interpreter")
    if samples.get("resolution") != "native" or not total or interpreter is None:
        return None
    busy = round((1.0 - (categories.get("idle") or 0.0)) * total)
    hits = min(busy, round(interpreter * total))
    interval = wilson_interval(hits, busy, confidence=confidence)
    return {
        "share": interval.point,
        "low": interval.low,
        "high": interval.high,
        "samples": busy,
        "method": f"Wilson {_level(confidence)} interval of interpreter samples among the engine thread's busy samples",
        "confidence": confidence,
    }


def _level(confidence: float) -> str:
    return f"{100 * confidence:.4g}%"  # 95%, 97.5%, 99.96%: a spent level never rounds to 100%


def spans_confidence(breakdown: Breakdown, confidence: float = 0.95) -> float:
    """The level to make the spans' interval at: `confidence`, or its half miss rate where native samples give a
    second interval to intersect with (verdict_interval), so the intersection still covers at `confidence`."""
    if interpreter_interval(breakdown) is None:
        return confidence
    return 1 - (1 - confidence) / 2


def verdict_interval(
    breakdown: Breakdown, spans_interval: Interval | None, *, confidence: float = 0.95
) -> Interval | None:
    """The verdict's interval for the interpreter share: the spans' (steps and kernel windows, made by the caller at
    spans_confidence(): profiler.analysis.share_interval) and the native samples' Wilson interval where both exist,
    each at half the miss rate (Bonferroni) and intersected, so the result still covers at `confidence`; should
    the two not overlap, the methods disagree and their hull is kept. One alone is used as it is."""
    if spans_interval is None:
        return interpreter_interval(breakdown, confidence=confidence)
    half = 1 - (1 - confidence) / 2
    samples = interpreter_interval(breakdown, confidence=half)
    spans_low, spans_high = spans_interval.get("low"), spans_interval.get("high")
    if samples is None or spans_low is None or spans_high is None:
        return spans_interval
    samples_low, samples_high = samples.get("low") or 0.0, samples.get("high") or 1.0
    low, high = max(spans_low, samples_low), min(spans_high, samples_high)
    how = "intersected"
    if low > high:
        low, high = min(spans_low, samples_low), max(spans_high, samples_high)
        how = "which disagree, so their hull is kept"
    return {
        **spans_interval,
        "low": low,
        "high": high,
        "confidence": confidence,
        "method": (
            f"{_level(confidence)}: the spans' interval ({spans_interval.get('method')}) and the native samples' "
            f"Wilson interval over {samples['samples']:,} busy samples, each at {_level(half)}, {how}"
        ),
    }


def straddled(interval: Interval | None) -> list[float]:
    """The rule's thresholds that lie inside the interval: the run cannot tell which side it is on."""
    if not interval:
        return []
    low, high = interval["low"], interval["high"]
    if low is None or high is None:  # never written so; the interval's fields are nullable in the schema
        return []
    return [threshold for threshold in THRESHOLDS if low <= threshold <= high]


def _pick_split(breakdown: Breakdown) -> tuple[str | None, Split | None]:
    methods = breakdown.get("methods", {})
    spans = methods.get("spans")
    if spans:
        return "spans", spans
    samples = methods.get("samples")
    if samples and samples.get("resolution") == "native":
        return "samples", samples
    return None, None


def _component_for(category: str, split: Split) -> str | None:
    components = split["components"]
    if category == "kernel":
        return "model_kernels" if components.get("model_kernels") else _largest(components)[0]
    if category == "lock" and split.get("lock_by_component"):
        return _largest(split["lock_by_component"])[0]
    if category == "allocation" and split.get("allocation_by_component"):
        return _largest(split["allocation_by_component"])[0]
    if category == "idle":
        return "queue"
    name, value = _largest(components, CONTROL_COMPONENTS)
    return name if value > 0 else None


def blind_spots(breakdown: Breakdown, collectors: dict[str, CollectorStatus]) -> list[str]:
    """What this run could not see, as sentences, from the collectors' statuses and the breakdown."""
    spots = []

    def status(name: str) -> tuple[str | None, str]:
        entry = collectors.get(name) or {}
        return entry.get("status"), entry.get("reason") or "not configured"

    sampling_status, sampling_reason = status("sampling")
    samples = breakdown.get("methods", {}).get("samples")
    if sampling_status != "ok":
        spots.append(
            f"No stack samples ({sampling_reason}): nothing cross-checks the spans, and torch dispatch "
            "cost and GIL waits are unseen."
        )
    elif samples is None:
        spots.append("py-spy ran but saw no engine thread samples: nothing cross-checks the spans.")
    elif samples.get("resolution") == "python":
        spots.append(
            "py-spy ran without --native: samples cannot tell a Python line from the native code it calls, "
            "and GIL waits are unseen (use --profile deep for native stacks)."
        )
    kernels_status, kernels_reason = status("kernels")
    if kernels_status != "ok":
        spots.append(
            f"torch.profiler did not run ({kernels_reason}): the kernel share of each span is estimated "
            "(see the breakdown notes), not measured."
        )
    gpu_status, gpu_reason = status("gpu")
    if gpu_status != "ok":
        spots.append(f"No GPU utilization ({gpu_reason}).")
    spans_status, spans_reason = status("spans")
    if spans_status != "ok":
        spots.append(f"No spans ({spans_reason}): components and lock waits are not measured exactly.")
    elif breakdown.get("methods", {}).get("spans") and not (
        samples and samples.get("resolution") == "native"
    ):
        # With native samples every lock wait is counted there; without them an untraced lock hides.
        spots.append(
            "Spans see only locks taken through the tracer: a wait on any other lock counts as its span's "
            "time, and without native stacks the samples miss a bare lock.acquire() too (--profile deep)."
        )
    gc_status, gc_reason = status("gc")
    if gc_status != "ok":
        spots.append(f"GC pauses were not timed ({gc_reason}).")
    return spots


def diagnose(
    breakdown: Breakdown,
    *,
    native_speedups: dict[str, float] | None,
    measured_gains: dict[str, float] | None,
    collectors: dict[str, CollectorStatus],
    added_costs: dict[str, float] | None = None,
    replayed: dict[str, ReplayComponent] | None = None,
    twins_on: Iterable[str] = (),
    health: Health | None = None,
    spans_interval: Interval | None = None,
    confidence: float = 0.95,
) -> Verdict:
    """The result's `verdict` section (shape in profiler/rundir/results.py) from a breakdown and the collectors section.

    replayed: per component, the speedup measured by replaying this run's work through both twins
    (profiler.replay.replay: speedup, low, high, steps); it takes precedence over `native_speedups`
    (a microbenchmark's, given by the caller), and its interval carries into the predicted gain.

    added_costs: per component, work its native twin would add that the Python twin does not do, as a share
    of wall time (on a GPU the C sampler needs the logits copied to the host: see profiler.session.transfer);
    the prediction subtracts it from the Amdahl gain.

    twins_on: components whose C twin ran (profiler.rundir.twins.twins_on): their prediction is empty
    (`twin_on`: true) and the largest control path is chosen among the rest.

    spans_interval: the interpreter share's interval from the steps and kernel windows
    (profiler.analysis.share_interval), made at `confidence` (higher than 95% at a later look of a run that
    stops when resolved: profiler.stats.spent_confidence); see verdict_interval for how it joins the samples'.

    health: the run's health section (profiler.analysis.health); on a busy machine each prediction is marked
    `void` with the reason: the shares it rests on were measured under contention and its speedup replayed
    after the load, on a machine that may be busy differently (which of them moves was not isolated)."""
    twins_on = sorted(set(twins_on))
    source, split = _pick_split(breakdown)
    spots = blind_spots(breakdown, collectors)
    if split is None:
        return _no_verdict(spots)
    figures = _verdict_figures(breakdown, source, split, spans_interval, confidence)
    reasons = [
        *_rule_words(figures),
        _interval_words(figures.interval, figures.straddles, from_samples=spans_interval is None),
        *_run_notes(breakdown, figures.idle),
    ]
    speedups = _speedups(native_speedups, replayed)
    share_intervals = breakdown.get("share_intervals") or {}
    predictions = _predictions(
        split, figures.busy, speedups, measured_gains, reasons, added_costs, twins_on, share_intervals
    )
    if twins_on:
        reasons.append(f"C twins on in this run: {', '.join(twins_on)}; nothing is predicted for them.")
    machine_busy = void_reason(health) if (health or {}).get("void") == VOID_BUSY else None
    if machine_busy:
        _mark_void(predictions, machine_busy)
        reasons.append(_void_words(machine_busy))
    return _verdict_section(figures, split, twins_on, reasons, predictions, spots)


@dataclass(frozen=True)
class _VerdictFigures:
    """The figures a verdict rests on: shares of the engine thread's time, the rule, and the share's interval."""

    source: str | None  # "spans" or "samples": the split the figures come from
    idle: float
    busy: float
    interpreter_share: float  # of busy time
    rule: str
    category: str | None  # the largest category, its share of wall time, and the component mostly in it
    share: float
    component: str | None
    interval: Interval | None
    straddles: list[float]  # the rule's thresholds inside the interval


def _verdict_figures(
    breakdown: Breakdown,
    source: str | None,
    split: Split,
    spans_interval: Interval | None,
    confidence: float,
) -> _VerdictFigures:
    """The split's shares of busy time, its largest category, and the interpreter share's interval."""
    categories = split["categories"]
    idle = categories.get("idle") or 0.0
    busy = max(0.0, 1.0 - idle)
    interpreter_share = _busy_share(categories.get("interpreter"), busy)
    category, share = _largest({name: categories.get(name) for name in CATEGORIES})
    interval = verdict_interval(breakdown, spans_interval, confidence=confidence)
    return _VerdictFigures(
        source=source,
        idle=idle,
        busy=busy,
        interpreter_share=interpreter_share,
        rule=rule_for(interpreter_share),
        category=category,
        share=share,
        component=_component_for(category, split) if category else None,
        interval=interval,
        straddles=straddled(interval),
    )


def _busy_share(value: float | None, busy: float) -> float:
    """A share of the engine thread's wall time as a share of its busy time (0 when it was never busy)."""
    return (value or 0.0) / busy if busy > 0 else 0.0


def _no_verdict(spots: list[str]) -> Verdict:
    """The verdict section of a run with neither spans nor native samples: its blind spots, and no answer."""
    return {
        "category": None,
        "component": None,
        "share": None,
        "interpreter_share": None,
        "rule": None,
        "reasons": ["Neither spans nor native stack samples are available: no verdict."],
        "predictions": {},
        "blind_spots": spots,
        "source": None,
    }


def _verdict_section(
    figures: _VerdictFigures,
    split: Split,
    twins_on: list[str],
    reasons: list[str],
    predictions: dict[str, Prediction],
    spots: list[str],
) -> Verdict:
    """The verdict section from its figures, sentences and predictions."""
    return {
        "twins_on": twins_on,
        "largest_control_path": largest_control_path(split, twins_on),
        "category": figures.category,
        "component": figures.component,
        "share": figures.share,
        "interpreter_share": figures.interpreter_share,
        "interpreter_interval": figures.interval,
        "straddles": figures.straddles,
        "rule": figures.rule,
        "reasons": reasons,
        "predictions": predictions,
        "blind_spots": spots,
        "source": figures.source,
    }


def _rule_words(figures: _VerdictFigures) -> list[str]:
    """The rule of thumb applied to the interpreter share, and the largest category, as sentences."""
    return [
        (
            f"Interpreter (Python) time is {figures.interpreter_share:.1%} of the engine's busy time "
            f"({figures.source}); at about {STAY_UP_TO:.0%} or below the rule is '{RULE_STAY}', from "
            f"{REWRITE_FROM:.0%} '{RULE_REWRITE}', and between them '{RULE_TARGETED}' (measure further, "
            f"rewrite selectively), so: {figures.rule}."
        ),
        (
            f"The largest category is {figures.category} at {figures.share:.1%} of the engine thread's wall time"
            + (f", mostly in {figures.component}." if figures.component else ".")
        ),
    ]


def _interval_words(interval: Interval | None, unsure: list[float], *, from_samples: bool) -> str:
    """The interpreter share's interval as a sentence: its bounds, and whether it clears the rule's thresholds
    (from_samples: the interval is the native samples' alone, not the spans')."""
    if not interval or interval.get("low") is None or interval.get("high") is None:
        return (
            "No interval for the interpreter share: too few steps to resample, and no native stack samples "
            "(--profile deep) to count."
        )
    evidence = (
        f"from {interval['samples']:,} busy engine-thread samples"
        if from_samples
        else f"({interval.get('method')})"
    )
    words = (
        f"Its {_level(interval.get('confidence') or 0.95)} interval {evidence} is "
        f"[{interval['low']:.1%}, {interval['high']:.1%}]"
    )
    if from_samples:
        words += f" (samples: {interval['share']:.1%})"
    if not unsure:
        return words + "; it clears the rule's thresholds."
    words += (
        f"; it straddles the {' and '.join(f'{t:.0%}' for t in unsure)} threshold"
        f"{'s' if len(unsure) > 1 else ''}: this run cannot tell yet which side of the rule it is on"
    )
    if interval.get("widest"):
        words += f" (held open by the {interval['widest']})"
    return words + ", so run longer (`--until resolved`) before acting on it."


def _run_notes(breakdown: Breakdown, idle: float) -> list[str]:
    """Sentences on what else shaped the shares: a long wait for work, torch dispatch, and where the methods
    disagree beyond their noise."""
    notes = []
    if idle >= IDLE_NOTE:
        notes.append(
            f"The engine thread waited for work {idle:.1%} of the time: the offered load, not the engine, "
            "limits throughput; the shares of busy time above are what a faster engine would change."
        )
    dispatch = breakdown.get("methods", {}).get("samples", {}) or {}
    if dispatch.get("dispatch"):
        notes.append(
            f"Python-to-torch dispatch (argument parsing, dispatcher, tensor creation) is "
            f"{dispatch['dispatch']:.1%} of engine samples; it is counted as interpreter."
        )
    # Older results lack `beyond_noise`: then every large gap is said, as before.
    noisy_free = breakdown.get("beyond_noise")
    for name, points in sorted(breakdown.get("disagreement", {}).items()):
        if (
            points is not None
            and abs(points) >= DISAGREEMENT_NOTE_PP
            and (noisy_free is None or name in noisy_free)
        ):
            notes.append(
                f"Spans and samples disagree on {name} by {points:+.1f} percentage points; "
                "trust the spans for components and the samples for what native code does."
            )
    return notes


def _mark_void(predictions: dict[str, Prediction], why: str) -> None:
    """Marks every prediction that has a gain void, with the reason (a busy machine)."""
    for prediction in predictions.values():
        if prediction.get("predicted_gain") is not None:
            prediction["void"] = why


def _void_words(why: str) -> str:
    """The sentence that says the predictions are void, and why."""
    return (
        f"The predictions are void: {why}; under contention a prediction built from the run's "
        "shares and a speedup replayed after the load moved while the in-run measurement held "
        '(docs/measurements.md, "Run health"). Re-run on a quieter machine.'
    )


def largest_control_path(split: Split, twins_on: Iterable[str] = ()) -> ControlPath | None:
    """{name, share} of the largest control path still in Python (not model_glue, not a twin that was on)."""
    skip = set(twins_on)
    name, share = _largest(
        split.get("components") or {}, [path for path in CONTROL_PATHS if path not in skip]
    )
    return {"name": name, "share": share} if name and share > 0 else None


def _speedups(
    native_speedups: dict[str, float] | None, replayed: dict[str, ReplayComponent] | None
) -> dict[str, Speedup]:
    """Per component: {speedup, low, high, source, steps}, the replay's where it has one."""
    chosen: dict[str, Speedup] = {
        name: {"speedup": value, "low": None, "high": None, "source": "microbenchmark", "steps": None}
        for name, value in (native_speedups or {}).items()
        if value
    }
    for name, entry in (replayed or {}).items():
        speedup = entry.get("speedup")
        if speedup:
            chosen[name] = {
                "speedup": speedup,
                "low": entry.get("low"),
                "high": entry.get("high"),
                "source": "replay",
                "steps": entry.get("steps"),
                "rows": entry.get("rows"),
                "lowered": _lowered_calls(entry),
                "python_priced": entry.get("python_priced"),
            }
    return chosen


def _lowered_calls(entry: ReplayComponent) -> int | None:
    """How many replayed calls ran at fewer torch threads than the replay's own count (a governor's)."""
    own, counts = entry.get("torch_threads_own"), entry.get("torch_threads")
    if not own or not counts:
        return None
    return sum(calls for threads, calls in counts.items() if int(threads) < own) or None


def _predictions(
    split: Split,
    busy: float,
    speedups: dict[str, Speedup],
    measured_gains: dict[str, float] | None,
    reasons: list[str],
    added_costs: dict[str, float] | None = None,
    twins_on: Iterable[str] = (),
    share_intervals: dict[str, StepShare] | None = None,
) -> dict[str, Prediction]:
    """Per native-capable component: its share of busy time, speedup (with its interval when replayed) and
    Amdahl gain (reasons get a line each), less any work the native twin adds (`added_costs`, shares of wall time).

    The gain's interval joins the speedup's with the share's (`share_intervals`, from resampling the run's
    steps: profiler.analysis.step_shares): a path near its Amdahl limit (a 50x twin) owes its spread to its share."""
    predictions: dict[str, Prediction] = {}
    for name in NATIVE_CAPABLE:
        share = _busy_share(split["components"].get(name), busy)
        if name in twins_on:
            # Its C twin already ran: the share is native time, and a speedup over itself predicts nothing.
            predictions[name] = _twin_on_prediction(share)
            continue
        found: Speedup = speedups.get(name) or {}
        added = _busy_share((added_costs or {}).get(name), busy)
        share_interval = (share_intervals or {}).get(name)
        measured = (measured_gains or {}).get(name)
        predictions[name] = _prediction(share, found, added, share_interval, measured)
        reasons.extend(_prediction_words(name, predictions[name], found))
    return predictions


def _twin_on_prediction(share: float) -> Prediction:
    """The empty prediction of a component whose C twin ran: its share, and nothing predicted."""
    return {
        "share": share,
        "native_speedup": None,
        "native_speedup_low": None,
        "native_speedup_high": None,
        "speedup_source": None,
        "predicted_gain": None,
        "predicted_gain_low": None,
        "predicted_gain_high": None,
        "measured_gain": None,
        "twin_on": True,
    }


def _prediction(
    share: float,
    found: Speedup,
    added: float,
    share_interval: StepShare | None,
    measured: float | None,
) -> Prediction:
    """One component's Amdahl gain at its speedup, less the work its twin adds, with the interval that the
    speedup's and the share's intervals give (shares of busy time)."""
    speedup, low, high = found.get("speedup"), found.get("low"), found.get("high")

    def gain_at(factor: float | None, at_share: float = share) -> float | None:
        return amdahl_gain(at_share, factor) - added if factor else None

    share_low, share_high = _share_bounds(share, share_interval)
    # No interval is made up: a microbenchmark's speedup has none, and without the share's neither has the gain.
    bounded = bool(low and high) or share_interval is not None
    prediction: Prediction = {
        "share": share,
        "native_speedup": speedup,
        "native_speedup_low": low,
        "native_speedup_high": high,
        "speedup_source": found.get("source"),
        "predicted_gain": gain_at(speedup),
        "predicted_gain_low": gain_at(low or speedup, share_low) if bounded else None,
        "predicted_gain_high": gain_at(high or speedup, share_high) if bounded else None,
        "measured_gain": measured,
        "share_low": share_low,
        "share_high": share_high,
    }
    if added:
        prediction["added_cost"] = added
    return prediction


def _prediction_words(name: str, prediction: Prediction, found: Speedup) -> list[str]:
    """A prediction as sentences: the gain its speedup gives, and the verify run's measured gain beside it."""
    gain, measured = prediction.get("predicted_gain"), prediction.get("measured_gain")
    if gain is None:
        return []
    added = prediction.get("added_cost")
    extra = f", less {added:.1%} for the copy of the logits to the host it needs" if added else ""
    words = [
        f"A native {name} ({found.get('speedup'):.1f}x faster, {_speedup_origin(name, found)}) takes "
        f"{prediction['share']:.1%} of step time and would save about {gain:.1%} of it (Amdahl{extra})."
    ]
    if measured is not None:
        words.append(
            f"The verify run with a native {name} measured {measured:.1%} against {gain:.1%} predicted."
        )
    return words


def _speedup_origin(name: str, found: Speedup) -> str:
    """Where a speedup was measured, in words: the replay of this run's steps (its batch and threads, its
    interval) or a microbenchmark."""
    if found.get("source") != "replay":
        return "in its microbenchmark, not on this run's work"
    where = f"replaying {found['steps']:,} of this run's {name} steps"
    rows, steps, lowered = found.get("rows"), found.get("steps"), found.get("lowered")
    if rows and steps:
        # On mixed settings a C sampler's lead over Python's moves with the batch (docs/measurements.md,
        # "The sampler's replayed speedup against the bench"), so the batch says which speedup this is.
        where += f" of {rows / steps:.1f} sequences on average"
    if found.get("python_priced") == "run":
        where += ", the Python twin's time a row as the run measured it"
    elif lowered:
        some = "all" if lowered == steps else f"{lowered}"
        where += f" ({some} at the fewer torch threads the engine had then)"
    low, high = found.get("low"), found.get("high")
    return where + (f", 95% interval {low:.1f}-{high:.1f}x" if low and high else "")


def _share_bounds(share: float, interval: StepShare | None) -> tuple[float, float]:
    """The share's 95% bounds: its step-time interval's relative width applied to the share of busy time."""
    if not interval or not interval.get("share"):
        return share, share
    return share * interval["low"] / interval["share"], share * interval["high"] / interval["share"]


def gpu_verdict(gpu_time: GpuTime) -> GpuVerdict:
    """The verdict on a GPU, in the field's words: how much of the run the GPU waited for the host, the
    1% / 30% rule applied to that share, and which host work it waited on (largest first)."""
    share = gpu_time.get("idle_host_share")
    by_component = sorted((gpu_time.get("idle_host_by_component") or {}).items(), key=lambda item: -item[1])
    if not isinstance(share, (int, float)):
        return {
            "idle_host_share": None,
            "rule": None,
            "waited_on": [],
            "sentence": "The GPU's idle time was not measured.",
        }
    rule = rule_for(share)
    sentence = f"The GPU waits for the host {share:.1%} of the time ({rule})"
    if by_component and share > 0:
        name, part = by_component[0]
        sentence += f"; of that, {part:.0%} is the {name.replace('_', ' ')}"
        if len(by_component) > 1:
            second, second_part = by_component[1]
            sentence += f" and {second_part:.0%} the {second.replace('_', ' ')}"
    no_work = gpu_time.get("idle_no_work_share")
    if isinstance(no_work, (int, float)) and no_work > 0:
        sentence += f"; it had no work {no_work:.1%} of the time"
    return {
        "idle_host_share": share,
        "rule": rule,
        "waited_on": [[name, part] for name, part in by_component],
        "sentence": sentence + ".",
    }
