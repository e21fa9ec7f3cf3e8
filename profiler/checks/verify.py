"""`infer-prof run --verify`: re-run the scenario with each native-capable component's C twin and record measured gains.

What is compared, and why this unit
-----------------------------------
diagnose predicts, per component c, predicted_gain = share(c) x (1 - 1 / native_speedup(c)), where
share(c) is c's time over the engine thread's busy time (wall time minus idle). The measured gain is
the same quantity taken from two runs of the same workload:

    measured_gain = 1 - busy_per_token(native c) / busy_per_token(Python)
    busy_per_token = engine-thread busy time (spans: wall x (1 - idle)) / tokens generated

Busy time, not wall time: in an open-loop scenario arrivals are fixed in time, so a faster engine
only waits longer and the wall time barely moves; per generated token, because a closed loop or a
faster engine may cut the same work into a different number of steps. Both runs cover warm-up and
measured requests alike (the collectors' window), so numerator and denominator count the same tokens.

native_speedup(c) is the main run's replay of its own recorded work through both twins
(profiler.replay); without one, a microbenchmark's when the run was given one; otherwise the verify
run measures it directly: c's span time per token, Python run over native run. With that
speedup the prediction and the measurement differ only by whether everything except c kept its cost
per token, which is exactly Amdahl's assumption.

That assumption fails in an open loop: a faster engine runs fewer requests at once, and the model's
cost per token rises with the smaller batches. So each twin also gets mix_matched_gain, its step
time against the Python runs' at the Python runs' own mix of steps (see mix_matched_gain), which is
the quantity Amdahl predicts. The runs are interleaved (P N1 P N2 P ...): each native run's reference
is its two Python neighbours.

The sampler is measured inside one run instead (profiler.checks.twin_switch): its twins take turns in
ABBA blocks of one step, and both gains come with 95% intervals over units of 8 neighbouring steps
(profiler.checks.inrun_gain); the measured gain is the one at the same steps. Whole runs
differ here by more than most sampler gains (docs/measurements.md); the other twins hold the batch's structure
(queues, block tables) and cannot change hands mid-run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from ..analysis.diagnose import NATIVE_CAPABLE, amdahl_gain, diagnose, measured_gain, straddled
from ..ledger.verify_pairs import append_verify_pairs
from ..rundir.atomic import write_json_atomic, write_text_atomic
from ..rundir.results import read_run
from ..rundir.yardstick import drift_void, yardstick
from ..session.options import EngineOptions
from ..session.session import SessionOutcome
from .inrun_gain import InRunGain, inrun_gain, label_steps
from .run_hook import RunAgain
from .twin_switch import SamplerSwitch

if TYPE_CHECKING:
    from ..rundir.results import RunData, RunResult
    from ..rundir.schema import Prediction, Split, Verdict, Verify, VerifyComponent

VERIFY_DIR = "verify"
TURNS_FILE = "turns.csv"  # the switched sampler run's step -> (block, C twin served)
AGREEMENT_BAND = 0.2  # a prediction holds when measured / predicted lies within 1 +- this
INTERRUPTED = "its verify run was interrupted: a partial run is not comparable"


def _per_token_ns(result: RunResult, fraction: Callable[[Split], float]) -> float | None:
    """fraction(spans split) of the engine thread's wall time, per generated token (ns), or None."""
    breakdown = result.breakdown or {}
    spans = (breakdown.get("methods") or {}).get("spans")
    tokens = (result.engine or {}).get("tokens_generated") or 0
    if not spans or tokens <= 0:
        return None
    return fraction(spans) * breakdown["wall_s"] * 1e9 / tokens


def busy_ns_per_token(result: RunResult) -> float | None:
    """Engine-thread busy time (wall minus idle) per generated token (ns) from a RunResult's spans split."""
    return _per_token_ns(result, lambda spans: 1.0 - (spans["categories"].get("idle") or 0.0))


def component_ns_per_token(result: RunResult, component: str) -> float | None:
    """A component's span time (self + its lock waits and GC pauses) per generated token (ns)."""
    return _per_token_ns(result, lambda spans: spans["components"].get(component) or 0.0)


def _mean(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def compare_component(
    python_results: list[RunResult],
    native_result: RunResult,
    component: str,
    share: float,
    given_speedup: float | None,
    given_source: str | None = None,
) -> VerifyComponent:
    """Predicted vs measured gain of one component: its Python runs (averaged) against its native run; the
    prediction's speedup is the one given (the main run's replay, or a microbenchmark's), else the spans'."""
    python_busy = _mean([busy_ns_per_token(result) for result in python_results])
    native_busy = busy_ns_per_token(native_result)
    python_part = _mean([component_ns_per_token(result, component) for result in python_results])
    native_part = component_ns_per_token(native_result, component)
    span_speedup = python_part / native_part if python_part and native_part else None
    speedup, source = (
        (given_speedup, given_source or "microbenchmark")
        if given_speedup
        else (span_speedup, "verify-run spans")
    )
    predicted = amdahl_gain(share, speedup) if speedup else None
    measured = measured_gain(python_busy, native_busy) if python_busy and native_busy else None
    return {
        "share": share,
        "native_speedup": speedup,
        "speedup_source": source,
        "span_speedup": span_speedup,
        "python_busy_us_per_token": python_busy / 1e3 if python_busy else None,
        "native_busy_us_per_token": native_busy / 1e3 if native_busy else None,
        "python_component_us_per_token": python_part / 1e3 if python_part is not None else None,
        "native_component_us_per_token": native_part / 1e3 if native_part is not None else None,
        "predicted_gain": predicted,
        "measured_gain": measured,
        # measured / predicted: 1.0 is a perfect prediction; the target is within 0.8-1.2.
        "agreement": _agreement(measured, predicted),
    }


def _agreement(measured: float | None, predicted: float | None) -> float | None:
    return measured / predicted if predicted and measured is not None else None


def python_spread(python_results: list[RunResult]) -> float | None:
    """How far the Python runs' busy time per token differ (max/min - 1): the noise floor of measured gains."""
    values = [value for value in (busy_ns_per_token(result) for result in python_results) if value]
    return max(values) / min(values) - 1.0 if len(values) > 1 else None


def mix_matched_gain(
    python_steps: list[pd.DataFrame], native_steps: pd.DataFrame
) -> tuple[float | None, float]:
    """(gain, coverage): 1 - the native run's step time over the Python runs', both taken at the Python
    runs' own mix of steps, and the share of Python steps whose kind the native run also had.

    Why: in an open-loop scenario a faster control path finishes requests sooner, so fewer run at once
    and the model's cost per token rises with the smaller batches (measured on SmolLM2 `chat`: the busy
    time per token fell by far less than the sampler's own span saved; docs/measurements.md, "Figures moved
    out of code comments"). Amdahl's prediction is for the same steps made faster, so this
    weighs each kind of step (batch size, with or without prefill) by how often the Python runs had
    it: direct standardization to one mix."""
    python = (
        pd.concat([frame for frame in python_steps if len(frame)], ignore_index=True)
        if python_steps
        else None
    )
    if python is None or not len(python) or not len(native_steps):
        return None, 0.0

    def by_kind(frame: pd.DataFrame) -> pd.DataFrame:
        kinds = frame.assign(prefill=frame["prefill_tokens"] > 0)
        return kinds.groupby(["batch_size", "prefill"])["duration_ms"].agg(["mean", "count"])

    both = by_kind(python).merge(
        by_kind(native_steps), left_index=True, right_index=True, suffixes=("_python", "_native")
    )
    if not len(both):
        return None, 0.0
    weights = both["count_python"]
    python_ms = float((weights * both["mean_python"]).sum())
    native_ms = float((weights * both["mean_native"]).sum())
    coverage = float(weights.sum()) / len(python)
    return (1.0 - native_ms / python_ms if python_ms > 0 else None), coverage


SWITCHED_IN_RUN = (
    "sampler",
)  # twins whose state can change hands between steps (profiler.checks.twin_switch)


class IntervalResolution(TypedDict):
    """Whether a measured interval can judge a prediction: its half-width, the band's, and the answer (None: no
    interval or no prediction)."""

    half_width: float | None
    band: float | None
    resolves: bool | None


def resolution(predicted: float | None, low: float | None, high: float | None) -> IntervalResolution:
    """Whether a measured interval is narrow enough to tell a prediction that holds (within AGREEMENT_BAND of
    `predicted`) from one that does not: its half-width, the band's, and `resolves`.

    No run length is promised: on SmolLM2 `concurrency-30` the half-width stopped narrowing by the
    square-root rule past a thousand requests, the model span's noise setting it there (the half-widths
    by run length: docs/measurements.md, "Figures moved out of code comments"). The twin's own part
    (own_gain) is judged apart: its interval is far narrower."""
    if predicted is None or low is None or high is None or predicted == 0:
        return {"half_width": None, "band": None, "resolves": None}
    # Plain floats and bools: a numpy bool is not `False` to an `is` test, nor JSON to the standard library.
    half, band = float(high - low) / 2, AGREEMENT_BAND * abs(float(predicted))
    return {"half_width": half, "band": band, "resolves": half <= band}


def inrun_entry(
    prediction: Prediction,
    gain: InRunGain,
    switches: int,
    own: str | None = None,
    *,
    block_steps: int | None = None,
    unit_blocks: int | None = None,
) -> VerifyComponent:
    """The verify section's entry of a twin measured in one switched run: its gain at the same steps with the
    interval (the measured gain), whether that interval can judge the prediction, the noisier gain at
    each side's own mix of steps (busy_gain), and the part of the gain in the twin's `own` phase with its
    interval (own_gain): the saving Amdahl's prediction is about, judged apart from the other phases' noise."""
    predicted = prediction.get("predicted_gain")
    own_gain = gain.parts.get(own) if own is not None else None
    # The other side of the check: a prediction whose own interval is wider than the band cannot be checked to
    # it by any run. With a C twin not much faster than the Python one, a few percent of either twin's time a
    # row is many percent of the gain.
    checkable = resolution(
        predicted, prediction.get("predicted_gain_low"), prediction.get("predicted_gain_high")
    )
    return {
        "method": "in-run",
        "share": prediction["share"],
        "native_speedup": prediction.get("native_speedup"),
        "speedup_source": prediction.get("speedup_source") or "none",
        "predicted_gain": predicted,
        "measured_gain": gain.mix_gain,
        "measured_low": gain.mix_low,
        "measured_high": gain.mix_high,
        "agreement": _agreement(gain.mix_gain, predicted),
        "predicted_within": _within(predicted, gain.mix_low, gain.mix_high),  # inside the measured interval
        **resolution(predicted, gain.mix_low, gain.mix_high),
        "predicted_half_width": checkable["half_width"],
        "prediction_resolves": checkable["resolves"],
        "busy_gain": gain.gain,
        "busy_low": gain.low,
        "busy_high": gain.high,
        "mix_coverage": gain.mix_coverage,
        "parts": gain.parts,  # phase -> its part of measured_gain: the twin's own, and any effect on the others
        "own_gain": own_gain,
        "own_low": gain.own_low,
        "own_high": gain.own_high,
        "own_agreement": _agreement(own_gain, predicted),
        "own_within": _within(predicted, gain.own_low, gain.own_high),
        "pairs": gain.pairs,
        "units": gain.units,
        "unit_blocks": unit_blocks,
        "block_steps": block_steps,  # what the intervals resampled
        "steps": gain.steps,
        "switches": switches,
        "batch_size_mean": {"python": gain.batch_python, "native": gain.batch_native},
        "void": None,  # neighbouring blocks share the machine's drift: the twins' turns cancel it
    }


def _within(value: float | None, low: float | None, high: float | None) -> bool | None:
    return low <= value <= high if value is not None and low is not None and high is not None else None


def verify_predictions(
    outcome: SessionOutcome,
    options: EngineOptions,
    *,
    stop_event: threading.Event,
    native_speedups: dict[str, float] | None,
    run_again: RunAgain,
    ledger: Path | None = None,
) -> Verify | None:
    """Run again per native-capable component with its C twin on (`run_again`, a face's session with its
    progress display); rewrite result.json with the measured gains and return the verdict's `verify`
    section, or None when the main run has nothing to compare. Each predicted/measured pair is appended to
    the prediction ledger (`ledger`, else profiler.ledger's default beside the run directory)."""
    from ...native_paths.loader import available

    result = outcome.result
    predictions = (result.verdict or {}).get("predictions") or {}
    if busy_ns_per_token(result) is None:
        return None
    twins = available()
    skipped: dict[str, str] = {}
    details: dict[str, VerifyComponent] = {}
    runs = _InterleavedRuns.after(outcome)
    for component in NATIVE_CAPABLE:
        if component not in predictions:
            continue
        why = _skip_reason(component, options, twins, stop_event)
        if why is None and component in SWITCHED_IN_RUN:
            entry = _switched_run(outcome, options, predictions[component], run_again)
            if isinstance(entry, str):
                why = entry
            else:
                details[component] = entry
        elif why is None:
            why = runs.add(component, options, run_again, stop_event)
        if why is not None:
            skipped[component] = why
    details.update(_compare_native_runs(runs, predictions))
    return _record(outcome, native_speedups, details, skipped, runs.python_results, ledger)


def _skip_reason(
    component: str, options: EngineOptions, twins: dict[str, bool | str], stop_event: threading.Event
) -> str | None:
    """Why a component gets no verify run (its twin already native, not built, or a stop), or None."""
    if component in options.native:
        return "already native in the main run"
    if "core" in options.native and component in ("scheduler", "kv_alloc", "prepare"):
        return "already native in the main run (in the fused core)"
    if twins.get(component) is not True:
        return f"C twin not available ({twins.get('reason') or 'not built'})"
    if stop_event.is_set():
        return "stopped (Ctrl-C) before its verify run"
    return None


@dataclass
class _InterleavedRuns:
    """The verify runs of whole runs, interleaved: each C-twin run sits between two Python runs (P N1 P N2 P ...),
    and its reference is the mean of those two neighbours, so a machine drifting steadily through the sequence
    moves the reference as much as the native run: the drift cancels, as in ABBA, one native run per twin."""

    outcome: SessionOutcome
    python_results: list[RunResult]  # the main run first
    python_dirs: list[Path]
    native_runs: dict[str, SessionOutcome] = field(default_factory=dict)
    neighbours: dict[str, list[int]] = field(default_factory=dict)  # component -> indices into python_results

    @classmethod
    def after(cls, outcome: SessionOutcome) -> _InterleavedRuns:
        """The series, its first Python run the main run."""
        return cls(outcome, [outcome.result], [Path(outcome.run_dir)])

    def add(
        self, component: str, options: EngineOptions, run_again: RunAgain, stop_event: threading.Event
    ) -> str | None:
        """Run `component` with its C twin, then the Python twins again as its second neighbour (unless
        stopped); why the component cannot be compared, or None."""
        run = run_again(
            frozenset(options.native | {component}),
            _verify_dir(self.outcome, f"native-{component}"),
            f"verify: native {component}",
            None,
        )
        if run.interrupted:
            return INTERRUPTED
        if component not in run.result.config.get("native", []):
            return "the C twin fell back to Python in the verify run"
        self.native_runs[component] = run
        self.neighbours[component] = [len(self.python_results) - 1]
        if stop_event.is_set():
            return None
        after = run_again(
            frozenset(options.native),
            _verify_dir(self.outcome, f"python-after-{component}"),
            f"verify: Python after {component}",
            None,
        )
        if not after.interrupted:
            self.python_results.append(after.result)
            self.python_dirs.append(Path(after.run_dir))
            self.neighbours[component].append(len(self.python_results) - 1)
        return None


def _compare_native_runs(
    runs: _InterleavedRuns, predictions: dict[str, Prediction]
) -> dict[str, VerifyComponent]:
    """Each native run against its Python neighbours: predicted and measured gains, and the drift guard."""
    python_data = [read_run(path) for path in runs.python_dirs]  # each run directory read once
    python_controls = _controls(python_data)
    return {
        component: _compare_native_run(
            runs, component, run, predictions[component], python_data, python_controls
        )
        for component, run in runs.native_runs.items()
    }


def _compare_native_run(
    runs: _InterleavedRuns,
    component: str,
    run: SessionOutcome,
    prediction: Prediction,
    python_data: list[RunData],
    python_controls: list[float],
) -> VerifyComponent:
    """One native run against its Python neighbours: the busy-time gain, the gain at the Python runs' mix of
    steps, the batch sizes, and void where the machine drifted between them."""
    outcome = runs.outcome
    around = [runs.python_results[index] for index in runs.neighbours[component]]
    around_data = [python_data[index] for index in runs.neighbours[component]]
    native_data = read_run(Path(run.run_dir))
    entry = compare_component(
        around,
        run.result,
        component,
        prediction["share"],
        prediction.get("native_speedup"),
        prediction.get("speedup_source"),
    )
    entry["run_dir"] = _relative(outcome, Path(run.run_dir))
    entry["python_neighbours"] = [
        _relative(outcome, runs.python_dirs[index]) for index in runs.neighbours[component]
    ]
    gain, coverage = mix_matched_gain([data.steps for data in around_data], native_data.steps)
    entry["mix_matched_gain"], entry["mix_coverage"] = gain, coverage
    entry["mix_agreement"] = _agreement(gain, entry["predicted_gain"])
    entry["batch_size_mean"] = {
        "python": _mean([(result.engine or {}).get("batch_size", {}).get("mean") for result in around]),
        "native": (run.result.engine or {}).get("batch_size", {}).get("mean"),
    }
    # The drift guard: the model span's time per token cannot move with a control-path twin; if it did,
    # the machine changed between the runs and the measured gain is the machine's, not the twin's. The
    # noise it allows is the spread of all the Python runs' yardsticks.
    entry["void"] = drift_void(
        _controls(around_data), _controls([native_data]), noise=_spread(python_controls)
    )
    return entry


# Why more than one: a short scenario's switched run on a small model has a few hundred steps, and the model
# span's noise under a busy neighbour left most such runs unresolved (docs/measurements.md). Each run added
# narrows the interval by about sqrt(runs / (runs - 1)); a run that resolves stops the series.
MAX_SWITCHED_RUNS = 3


def _switched_run(
    outcome: SessionOutcome, options: EngineOptions, prediction: Prediction, run_again: RunAgain
) -> VerifyComponent | str:
    """Runs with the sampler's twins taking turns, pooled: its verify entry, or why there is none. A run whose
    interval cannot judge the prediction (resolution) is followed by another, up to MAX_SWITCHED_RUNS, and the
    gain is taken over all their steps (each run's blocks kept apart in the resampled units)."""
    pooled: pd.DataFrame | None = None  # every usable run's labelled steps, each run's blocks numbered apart
    run_dirs: list[str] = []
    switches = 0
    gain: InRunGain | None = None
    for attempt in range(MAX_SWITCHED_RUNS):
        switch = SamplerSwitch()
        taken = _labelled_switched_run(outcome, options, run_again, switch, attempt)
        if isinstance(taken, str):
            if pooled is None:
                return taken
            break  # the runs so far stand; this one is left out
        run, labelled = taken
        pooled = labelled if pooled is None else _pooled_with(pooled, labelled, switch.unit_blocks)
        run_dirs.append(_relative(outcome, Path(run.run_dir)))
        switches += switch.switches
        gain = inrun_gain(pooled, own="sampler", unit_blocks=switch.unit_blocks)
        if gain is None:
            return f"its run was too short for the twins to take turns ({switches} switches)"
        if resolution(prediction.get("predicted_gain"), gain.mix_low, gain.mix_high)["resolves"] is not False:
            break
    assert gain is not None and pooled is not None  # the loop returned unless a run was labelled
    entry = inrun_entry(
        prediction,
        gain,
        switches,
        own="sampler",
        block_steps=switch.block_steps,
        unit_blocks=switch.unit_blocks,
    )
    entry["run_dir"] = run_dirs[0]
    entry["run_dirs"] = run_dirs  # every switched run pooled, in order
    entry["turns"] = f"{entry['run_dir']}/{TURNS_FILE}"  # the first run's; every pooled run's below
    entry["turns_files"] = [f"{run_dir}/{TURNS_FILE}" for run_dir in run_dirs]
    entry["switch_ms"] = _switch_ms(pooled)
    return entry


def _labelled_switched_run(
    outcome: SessionOutcome, options: EngineOptions, run_again: RunAgain, switch: SamplerSwitch, attempt: int
) -> tuple[SessionOutcome, pd.DataFrame] | str:
    """One run with the sampler's twins taking turns through `switch` (the `attempt`th, from 0): the run and its
    steps labelled with the twin that served each, written beside its steps.csv; or why it cannot be measured."""
    label = "verify: sampler twins in turns" + (
        f", run {attempt + 1} of up to {MAX_SWITCHED_RUNS}" if attempt else ""
    )
    name = "switched-sampler" + (f"-{attempt + 1}" if attempt else "")
    run = run_again(frozenset(options.native), _verify_dir(outcome, name), label, switch)
    problem = _unusable(outcome, run)
    if problem is not None:
        return problem
    labelled = label_steps(switch.calls, run.steps, switch.switch_ns)
    if switch.switches < 2 or not len(labelled):
        return (
            f"its run was too short for the twins to take turns ({switch.switches} switch(es) in "
            f"{len(switch.calls)} sampler calls, {switch.block_steps} a block)"
        )
    # Which twin served each step, beside the run's steps.csv: the figures can be taken again from the files.
    write_text_atomic(
        Path(run.run_dir) / TURNS_FILE,
        labelled[["step", "block", "native", "switch_ms"]].to_csv(index=False),
    )
    return run, labelled


def _pooled_with(pooled: pd.DataFrame, labelled: pd.DataFrame, unit_blocks: int) -> pd.DataFrame:
    """`labelled` added to the runs pooled so far, its blocks starting a fresh unit, so that no resampled unit
    holds steps of two runs."""
    offset = _next_unit(pooled, unit_blocks)
    return pd.concat([pooled, labelled.assign(block=labelled["block"] + offset)], ignore_index=True)


def _switch_ms(pooled: pd.DataFrame) -> dict[str, float]:
    """What a switch took, per twin taking over, taken out of its step (label_steps): mean ms a switch."""
    switched = pooled[pooled["switch_ms"] > 0]
    return {
        twin: round(float(rows["switch_ms"].mean()), 4)
        for twin, rows in (
            ("python", switched[~switched["native"]]),
            ("native", switched[switched["native"]]),
        )
        if len(rows)
    }


def _unusable(outcome: SessionOutcome, run: SessionOutcome) -> str | None:
    """Why a switched run cannot be measured (interrupted, or more failed requests than the main run had)."""
    if run.interrupted:
        return INTERRUPTED
    failed = (run.result.metrics or {}).get("failed") or 0
    if failed > ((outcome.result.metrics or {}).get("failed") or 0):
        return f"{failed} request(s) failed in its run (see {_relative(outcome, Path(run.run_dir))}/requests.csv)"
    return None


def _next_unit(labelled: pd.DataFrame, unit_blocks: int) -> int:
    """The first block number past `labelled`'s that starts a unit of `unit_blocks` blocks."""
    last = int(labelled["block"].max()) + 1
    return -(-last // unit_blocks) * unit_blocks


def _spread(values: list[float]) -> float:
    """max / min - 1 of the Python runs' yardsticks: how far the machine moved between them."""
    return max(values) / min(values) - 1.0 if len(values) > 1 else 0.0


def _controls(runs: list[RunData]) -> list[float]:
    """The yardstick (profiler.rundir.yardstick) of each run (RunData) that has one."""
    figures = [yardstick(run) for run in runs]
    return [figure.value for figure in figures if figure is not None]


def _verify_dir(outcome: SessionOutcome, name: str) -> Path:
    return Path(outcome.run_dir) / VERIFY_DIR / name


def _relative(outcome: SessionOutcome, run_dir: Path) -> str:
    """A run directory as result.json names it: "." for the main run, else its path under it."""
    relative = run_dir.relative_to(outcome.run_dir)
    return str(relative) if relative.parts else "."


def _record(
    outcome: SessionOutcome,
    native_speedups: dict[str, float] | None,
    details: dict[str, VerifyComponent],
    skipped: dict[str, str],
    python_results: list[RunResult],
    ledger: Path | None = None,
) -> Verify:
    """The verdict again with the measured gains, and its `verify` section (returned); result.json rewritten."""
    result = outcome.result
    # The ledger keeps score across runs; it reads the predictions' intervals from the verdict before this one.
    ledger_note = append_verify_pairs(
        Path(outcome.run_dir), result, details, ledger, spread=python_spread(python_results)
    )
    speedups = dict(native_speedups or {})
    speedups.update(
        {name: speedup for name, entry in details.items() if (speedup := entry["native_speedup"])}
    )
    measured = {
        name: measured_gain
        for name, entry in details.items()
        if (measured_gain := entry["measured_gain"]) is not None and not entry.get("void")
    }
    verdict = _verdict_again(result, speedups, measured)
    spread = python_spread(python_results)
    section: Verify = {
        "method": "measured_gain = 1 - busy time per generated token (native run) / (Python run); busy = engine "
        "thread wall time minus idle (spans). native_speedup: the main run's replay of its own work through both "
        "twins (else a microbenchmark's when given, else the component's span time per token, Python run / "
        "native run).",
        "python_runs": len(python_results),
        "python_spread": spread,
        "components": details,
        "skipped": skipped,
        "ledger": ledger_note,
    }
    verdict["verify"] = section
    _mark_noise(verdict, details, spread, python_runs=len(python_results), measured=bool(measured))
    result.verdict = verdict
    result.config["verify"] = True
    write_json_atomic(Path(outcome.run_dir) / "result.json", result.to_dict())
    return section


def _verdict_again(result: RunResult, speedups: dict[str, float], measured: dict[str, float]) -> Verdict:
    """The verdict made again with the measured speedups and gains; it keeps what the run's own rested on: its
    interval (made at the run's confidence, the samples' side already joined in) and its health, which voids
    predictions measured on a busy machine."""
    before = result.verdict or {}
    interval = before.get("interpreter_interval")
    verdict = diagnose(
        result.breakdown or {},
        native_speedups=speedups or None,
        measured_gains=measured or None,
        collectors=result.collectors,
        replayed=(result.replay or {}).get("components"),
        health=result.health,
        spans_interval=interval,
        confidence=(interval or {}).get("confidence") or 0.95,
    )
    if interval is not None:  # as the run made it (joining the samples again would only restate it)
        verdict["interpreter_interval"] = interval
        verdict["straddles"] = straddled(interval)
    if "stopping" in before:  # how a run that went on until resolved ended
        verdict["stopping"] = before["stopping"]
    return verdict


def _mark_noise(
    verdict: Verdict,
    details: dict[str, VerifyComponent],
    spread: float | None,
    *,
    python_runs: int,
    measured: bool,
) -> None:
    """The noise floor (`spread`: the Python runs' own) marked on the gains it qualifies, and the void runs and
    the floor itself among the verdict's blind spots."""
    # The noise floor travels with the gains it qualifies, not only on the terminal that printed it.
    for prediction in (verdict.get("predictions") or {}).values():
        gain = prediction.get("measured_gain")
        prediction["within_noise"] = None if gain is None or spread is None else abs(gain) < spread
    for name, entry in details.items():
        if entry.get("void"):
            verdict.setdefault("blind_spots", []).append(f"--verify's {name} run is {entry['void']}")
    if spread is not None and measured:
        verdict.setdefault("blind_spots", []).append(
            f"--verify's {python_runs} Python runs differ by {spread:.1%} in busy time per token: "
            "measured gains smaller than that are noise, not the C twins' effect."
        )
