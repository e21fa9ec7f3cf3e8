"""`run --what-if` on the built-in engine: the slowdown run beside the main run, result.json's `what_if` section, and each slowdown-predicted gain paired with the gain --verify measured.

The slowdown run (profiler.checks.slowdown) goes in what-if/ under the main run. Its sensitivities meet
the main run's own figures: each component's share of busy time and the C twin's replayed speedup, the
two that Amdahl's prediction multiplies; the slowdown-predicted gain is sensitivity x share x (1 - 1/k).
On the built-in engine every component runs in turn on the engine thread, so a sensitivity near 1 says
Amdahl's bound holds; near 0 it says the share would buy nothing. With --verify the twin measures the
truth, and each pair goes to the prediction ledger (profiler.ledger) as a "slowdown" record.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from ..analysis.probe_slowdown import sensitivity_figures
from ..analysis.sensitivity import precise, predicted_gain
from ..ledger.verify_pairs import finite_number, unresolvable
from ..rundir.atomic import write_json_atomic, write_text_atomic
from ..rundir.health import void_reason
from .delay import gil_release
from .run_hook import RunAgain
from .slowdown import (
    BLOCK_STEPS,
    LEVELS,
    MAX_LEVEL,
    ROUND_COLUMN,
    ComponentSlowdown,
    SlowdownExperiment,
    analyse,
    call_accuracy,
    check_components,
    label_steps,
    level_scale,
)

if TYPE_CHECKING:
    from ..rundir.results import RunResult
    from ..rundir.schema import (
        EngineSlowdown,
        EngineWhatIf,
        MeasuredBeside,
        Prediction,
        SlowdownGain,
        WhatIfRound,
    )
    from ..session.options import EngineOptions
    from ..session.session import SessionOutcome

WHAT_IF_DIR = "what-if"
TURNS_FILE = "turns.csv"  # the slowdown run's step -> (turn, component, level, ms added)
# --what-if-rounds' default, the most runs of the slowdown: each adds the scenario's steps again (a mixed scenario of
# ~150 steps gives ~20 pairs a run), and the rounds stop as soon as every sensitivity is precise, so a scenario that
# resolves at once pays nothing.
DEFAULT_ROUNDS = 3
AGREEMENT_BAND = (
    0.2  # a slowdown prediction holds when measured / predicted lies within 1 +- this (as --verify's)
)
METHOD = (
    "slowdown: every call of a named component is followed by a busy delay of `level` x that call's own time (a "
    f"component's levels scaled up, at most to {MAX_LEVEL:g}x, until the top one adds about a quarter of the step: `scales`), "
    "with the GIL released for the share of its own time the main run measured inside torch's ops (`released`), in "
    "turns of block_steps steps (off, on, on, off per component and level; ABBA); sensitivity = the slope, through "
    "0, of added step time on added delay over each delayed turn against its nearest off turns, each pair weighted "
    "by 1 / its steps, 95% bootstrap interval over the pairs; rounds: runs of the scenario, pooled, until every "
    "sensitivity's half interval is within 20% of it (of 0.5 nearer 0) or max_rounds ran; "
    "predicted gain = sensitivity x the main run's share x (1 - 1/k), k the C twin's replayed speedup"
)


class SlowdownPair(TypedDict):
    """A slowdown-predicted gain beside the gain --verify measured (pair_with_verify)."""

    component: str
    predicted: SlowdownGain
    measured: MeasuredBeside


def run_what_if(
    outcome: SessionOutcome,
    options: EngineOptions,
    components: Sequence[str],
    run_again: RunAgain,
    *,
    levels: Sequence[float] = LEVELS,
    block_steps: int = BLOCK_STEPS,
    rounds: int = DEFAULT_ROUNDS,
) -> EngineWhatIf:
    """Run the scenario again with the components delayed in turns, in up to `rounds` runs until every delayed
    component's sensitivity is precise; put the `what_if` section in the main run's result.json (rewritten) and
    return it."""
    if rounds < 1:
        raise ValueError(f"rounds={rounds}: the slowdown needs at least one run")
    # Each component's levels scaled by its share in the main run, so that even a small one's delay stands out.
    scales = {
        name: level_scale(_share_of(outcome.result, name), levels) for name in check_components(components)
    }
    # Each delay releases the GIL for the share of the component's own time it spends inside torch's ops.
    released = {name: released_share(outcome.result, name) for name in scales}
    steps: list[pd.DataFrame] = []
    calls: dict[str, list[tuple[int, int]]] = {name: [] for name in scales}
    done: list[WhatIfRound] = []
    run_void: str | None = None
    found: list[ComponentSlowdown] = []
    for number in range(rounds):
        experiment = SlowdownExperiment(
            components, levels=levels, scales=scales, released=released, block_steps=block_steps
        )
        name = round_dir(number)
        label = "what-if: slowdowns in turns" + (
            f" (round {number + 1} of at most {rounds})" if rounds > 1 else ""
        )
        run = run_again(frozenset(options.native), Path(outcome.run_dir) / name, label, experiment)
        labelled = label_steps(experiment.labels(), run.steps)
        if len(labelled):
            columns = [
                "step",
                "block",
                "what_if_component",
                "what_if_level",
                "what_if_added_ms",
                "what_if_calls",
            ]
            write_text_atomic(
                Path(outcome.run_dir) / name / TURNS_FILE, labelled[columns].to_csv(index=False)
            )
        steps.append(labelled.assign(**{ROUND_COLUMN: number}))
        for component, made in experiment.calls.items():
            calls[component].extend(made)
        void = "its run was interrupted" if run.interrupted else void_reason(run.result.health)
        done.append({"run_dir": name, "steps": len(labelled), "void": void})
        if void and run_void is None:
            run_void = void if rounds == 1 else f"round {number + 1}: {void}"
        found = analyse(pd.concat(steps, ignore_index=True), experiment.components)
        if run.interrupted or not any(_another_round_helps(item) for item in found):
            break
    found = [
        dataclasses.replace(item, median_error=median_error, within_5pct=within_5pct)
        for item in found
        for median_error, within_5pct in [call_accuracy(calls[item.component])]
    ]
    section = what_if_section(
        found,
        outcome.result,
        levels=levels,
        block_steps=block_steps,
        steps=sum(entry["steps"] for entry in done),
        run_void=run_void,
    )
    section["scales"] = {name: float(scale) for name, scale in scales.items()}
    section["released"] = released
    section["gil_release"] = gil_release()
    section["run_dir"] = WHAT_IF_DIR
    section["rounds"] = done
    section["max_rounds"] = rounds
    outcome.result.what_if = section
    write_json_atomic(Path(outcome.run_dir) / "result.json", outcome.result.to_dict())
    return section


def round_dir(number: int) -> str:
    """The run directory (under the main run's) of the slowdown's round `number` (0-based): what-if, what-if-2, ..."""
    return WHAT_IF_DIR if number == 0 else f"{WHAT_IF_DIR}-{number + 1}"


def _another_round_helps(item: ComponentSlowdown) -> bool:
    """A delayed component whose sensitivity is missing or not yet precise (a component never called stays so)."""
    found = item.sensitivity
    return item.calls > 0 and (found is None or not precise(found.value, found.low, found.high))


def what_if_section(
    found: Sequence[ComponentSlowdown],
    result: RunResult,
    *,
    levels: Sequence[float],
    block_steps: int,
    steps: int,
    run_void: str | None = None,
) -> EngineWhatIf:
    """result.json's `what_if`: per component its sensitivity, curve, the delay's accuracy, and the gain it predicts."""
    return {
        "method": METHOD,
        "levels": [float(level) for level in levels],
        "block_steps": block_steps,
        "steps": steps,
        "void": run_void,
        "components": {item.component: component_entry(item, result) for item in found},
    }


def component_entry(item: ComponentSlowdown, result: RunResult) -> EngineSlowdown:
    """One component's `what_if` entry; the share and speedup are the main run's (its verdict's prediction)."""
    prediction: Prediction = ((result.verdict or {}).get("predictions") or {}).get(item.component) or {}
    share = _share_of(result, item.component)
    speedup = finite_number(prediction.get("native_speedup"))
    entry: EngineSlowdown = {
        "share": share,
        "share_off": item.share_off,
        "speedup": speedup,
        "speedup_source": prediction.get("speedup_source"),
        "amdahl_gain": finite_number(prediction.get("predicted_gain")),
        "accuracy": {
            "calls": item.calls,
            "requested_ms": item.requested_ms,
            "added_ms": item.added_ms,
            "ratio": item.accuracy,
            "median_error": item.median_error,
            "within_5pct": item.within_5pct,
        },
        "void": item.void,  # this component's own; the run's is the section's
        **sensitivity_figures(item.sensitivity),
    }
    sensitivity = item.sensitivity
    if sensitivity is not None and share is not None and 0.0 <= share <= 1.0:
        if speedup is not None and speedup > 0:
            gain = predicted_gain(sensitivity, share, speedup)
            added = (
                finite_number(prediction.get("added_cost")) or 0.0
            )  # what the C twin adds, as the Amdahl prediction
            entry["gain"] = {
                "speedup": speedup,
                "gain": gain.gain - added,
                "low": None if gain.low is None else gain.low - added,
                "high": None if gain.high is None else gain.high - added,
            }
        # With no twin to say how much faster, the most a faster component could give: its cost taken away.
        free = predicted_gain(sensitivity, share, math.inf)
        entry["gain_if_free"] = {"gain": free.gain, "low": free.low, "high": free.high}
    return entry


def _share_of(result: RunResult, component: str) -> float | None:
    """The component's share of the step in the main run: its prediction's, else its share of busy time."""
    prediction = ((result.verdict or {}).get("predictions") or {}).get(component) or {}
    share = finite_number(prediction.get("share"))
    return share if share is not None else busy_share(result, component)


def released_share(result: RunResult, component: str) -> float:
    """The share of a component's span time the main run measured inside torch's ops, kernels and their per-op
    fee (torch's bindings release the GIL there); 0 where nothing was measured (no torch calls, no kernel windows)."""
    spans = ((result.breakdown or {}).get("methods") or {}).get("spans") or {}
    parts = [
        (spans.get("kernel_fraction_by_span") or {}).get(component),
        (spans.get("fee_fraction_by_span") or {}).get(component),
    ]
    share = sum(part for part in parts if isinstance(part, (int, float)) and math.isfinite(part))
    return min(1.0, max(0.0, share))


def busy_share(result: RunResult, component: str) -> float | None:
    """A component's span time over the engine thread's busy time (wall minus idle), for one the verdict does not predict."""
    spans = ((result.breakdown or {}).get("methods") or {}).get("spans") or {}
    busy = 1.0 - ((spans.get("categories") or {}).get("idle") or 0.0)
    part = (spans.get("components") or {}).get(component)
    return part / busy if isinstance(part, (int, float)) and busy > 0 else None


def pair_with_verify(
    outcome: SessionOutcome, ledger: Path | None = None, *, append: Callable[..., Path] | None = None
) -> list[SlowdownPair]:
    """Put --verify's measured gain beside each slowdown-predicted one (result.json rewritten) and append each pair
    to the prediction ledger; returns the pairs. A ledger that cannot be written never fails the run."""
    result = outcome.result
    section: EngineWhatIf | None = getattr(result, "what_if", None)
    verify = (result.verdict or {}).get("verify") or {}
    if not section:
        return []
    pairs: list[SlowdownPair] = []
    for component, entry in (section.get("components") or {}).items():
        measured_entry = (verify.get("components") or {}).get(component)
        gain = entry.get("gain")
        measured = finite_number(measured_entry.get("measured_gain")) if measured_entry else None
        if not measured_entry or not gain or measured is None:
            continue
        beside: MeasuredBeside = {
            "gain": measured,
            "low": finite_number(measured_entry.get("measured_low")),
            "high": finite_number(measured_entry.get("measured_high")),
            "agreement": measured / gain["gain"] if gain["gain"] else None,
            "within_band": abs(measured / gain["gain"] - 1.0) <= AGREEMENT_BAND if gain["gain"] else None,
            "void": measured_entry.get("void")
            or unresolvable(measured_entry, gain["gain"], (verify or {}).get("python_spread")),
        }
        entry["measured"] = beside
        pairs.append({"component": component, "predicted": gain, "measured": beside})
    if pairs:
        section["ledger"] = _append_ledger(outcome, section, ledger, append)
        write_json_atomic(Path(outcome.run_dir) / "result.json", result.to_dict())
    return pairs


def _append_ledger(
    outcome: SessionOutcome,
    section: EngineWhatIf,
    ledger: Path | None,
    append: Callable[..., Path] | None,
) -> str:
    from ...errors import InferProfError
    from ..ledger.records import LedgerRecord, health_text, now_utc
    from ..ledger.store import append_record, ledger_path

    result = outcome.result
    config = result.config or {}
    when = now_utc()
    target = ledger_path(Path(outcome.run_dir), ledger)
    main_void = void_reason(result.health)
    count = 0
    try:
        for component, entry in (section.get("components") or {}).items():
            measured, gain = entry.get("measured"), entry.get("gain")
            if not measured or not gain:
                continue
            void = (
                measured.get("void")
                or entry.get("void")
                or (f"the slowdown run: {section['void']}" if section.get("void") else None)
                or (f"the main run: {main_void}" if main_void else None)
            )
            record = LedgerRecord(
                kind="slowdown",
                scenario=str(config.get("scenario") or ""),
                model=str(config.get("model") or ""),
                dtype=str(config.get("dtype") or ""),
                component=component,
                predicted=float(gain["gain"]),
                predicted_low=gain.get("low"),
                predicted_high=gain.get("high"),
                measured=float(measured["gain"]),
                measured_low=measured.get("low"),
                measured_high=measured.get("high"),
                health=health_text(void),
                commit=(result.environment or {}).get("git_revision"),
                run_dir=str(outcome.run_dir),
                recorded_at=when,
                method=(
                    f"slowdown: sensitivity {entry['sensitivity']:.2f} x share {entry['share']:.1%} x (1 - 1/"
                    f"{gain['speedup']:.1f}); measured: the C twin on (--verify)"
                ),
            )
            (append or append_record)(record, target)
            count += 1
    except InferProfError as exc:
        return f"not recorded: {exc}"
    return f"{count} pair(s) appended to {target}"
