"""The short summary's lines of native gains: each worth-while path, how it was obtained, the rest folded."""

from __future__ import annotations

from collections.abc import Collection

from ....profiler.rundir.results import RunResult
from ...format import fmt_gain, fmt_pct
from .reads import interval_text

# A prediction for a component under this share of the step is folded into one line: it cannot pay.
PREDICTION_SHARE_MIN = 0.001


def prediction_lines(result: RunResult) -> list[str]:
    """A line per native path worth one (at least PREDICTION_SHARE_MIN of the step), the rest folded into one."""
    predictions = (result.verdict or {}).get("predictions") or {}
    if not predictions:
        return []
    twins_on = [name for name, entry in predictions.items() if entry.get("twin_on")]
    worth = {
        name: entry
        for name, entry in predictions.items()
        if name not in twins_on
        and isinstance(entry.get("share"), (int, float))
        and entry["share"] >= PREDICTION_SHARE_MIN
    }
    ranked = sorted(worth, key=lambda name: -(worth[name].get("predicted_gain") or 0.0))
    unmeasured = "C speedup not measured" + (
        " (a stopped run is not replayed)" if result.partial and result.replay is None else ""
    )
    lines = ["Native gains if a path were C (Amdahl's law, end to end):"]
    for name in ranked:
        entry = worth[name]
        gain = fmt_gain(entry.get("predicted_gain")) + interval_text(
            entry.get("predicted_gain_low"),
            entry.get("predicted_gain_high"),
            lambda value: f"{value * 100:.1f}",
        )
        measured = entry.get("measured_gain")
        speedup = entry.get("native_speedup")
        faster = f"C {speedup:.1f}x faster" if isinstance(speedup, (int, float)) else unmeasured
        lines.append(
            f"  {name}: {fmt_pct(entry['share'])} of the step, {faster} -> {gain}; "
            + "; ".join(obtained(name, measured, result))
        )
    lines += slowdown_lines(result, skip=ranked)
    rest = [name for name in predictions if name not in worth and name not in twins_on]
    if rest:
        lines.append(
            f"  {', '.join(rest)}: under {fmt_pct(PREDICTION_SHARE_MIN)} of the step each, nothing to gain."
        )
    if twins_on:  # a C twin that ran is native code already (profiler.analysis.diagnose): no prediction
        lines.append(f"  {', '.join(twins_on)}: C twin on in this run, nothing to predict.")
    return lines


def obtained(name: str, measured: float | None, result: RunResult) -> list[str]:
    """How a prediction was obtained: verified (twin on), slowdown-measured (the run's --what-if), or a bound only."""
    how = [f"verified {fmt_gain(measured)} (twin on)"] if measured is not None else []
    slowdown = ((result.what_if or {}).get("components") or {}).get(name) or {}
    sensitivity = slowdown.get("sensitivity")
    if isinstance(sensitivity, (int, float)):
        interval = interval_text(slowdown.get("low"), slowdown.get("high"), lambda value: f"{value:.2f}")
        gain = (slowdown.get("gain") or {}).get("gain")
        run_void = (result.what_if or {}).get("void")
        rounds = len((result.what_if or {}).get("rounds") or [])
        runs = f", {rounds} runs" if rounds > 1 else ""  # the rounds it took to resolve
        if slowdown.get("void"):  # measured, but too noisy to act on
            how.append(f"slowdown unresolved (sensitivity {sensitivity:.2f}{interval}{runs})")
        else:
            how.append(
                f"slowdown-measured (sensitivity {sensitivity:.2f}{interval}{runs}"
                + ("" if slowdown.get("linear", True) else ", levels disagree: a curve")
                + (f") -> {fmt_gain(gain)}" if isinstance(gain, (int, float)) else ")")
                + (f", its run void: {run_void}" if run_void else "")
            )
    return how or [
        "bound only"
    ]  # the heading names Amdahl; a line that wraps would push the summary off a screen


def slowdown_lines(result: RunResult, skip: Collection[str] = ()) -> list[str]:
    """A line per --what-if component with no prediction line of its own: its sensitivity and the most it could give."""
    lines = []
    for name, slowdown in ((result.what_if or {}).get("components") or {}).items():
        if name in skip:
            continue
        sensitivity = slowdown.get("sensitivity")
        if not isinstance(sensitivity, (int, float)):
            lines.append(
                f"  {name}: slowdown gave no sensitivity ({slowdown.get('void') or 'no reason recorded'})"
            )
            continue
        free = slowdown.get("gain_if_free") or {}
        lines.append(
            f"  {name}: {fmt_pct(slowdown.get('share'))} of the step; "
            + "; ".join(obtained(name, None, result))
            + f"; if it cost nothing -> {fmt_gain(free.get('gain'))} (Amdahl's bound: {fmt_gain(slowdown.get('share'))})"
        )
    return lines
