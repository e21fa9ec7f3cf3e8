"""What --verify's measured gains rest on: their noise, their turns, and when they cannot judge."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import VerifyComponent
from ...format import fmt_pct


def verify_noise(result: RunResult) -> float | None:
    """How far --verify's Python runs differ in busy time per token (max/min - 1): the noise floor of
    its measured gains, or None when there was no verify run or only one Python run."""
    spread = ((result.verdict or {}).get("verify") or {}).get("python_spread")
    return float(spread) if isinstance(spread, (int, float)) and not isinstance(spread, bool) else None


def within_noise(measured: float | None, noise: float | None) -> bool:
    return measured is not None and noise is not None and abs(measured) < noise


def noise_warning(result: RunResult) -> str | None:
    """What a reader must know before reading --verify's measured gains as facts (None: no verify run)."""
    verify = (result.verdict or {}).get("verify")
    if not verify:
        return None
    noise = verify_noise(result)
    entries = (verify.get("components") or {}).values()
    in_run = [entry for entry in entries if entry.get("method") == "in-run"]
    # Said whatever else ran: an in-run prediction too wide to judge is void at that precision.
    unresolved = [f"{note}." for note in unresolved_notes(result)]
    if in_run and len(in_run) == len(entries):
        first = (
            f"--verify measured with the twins taking turns in {runs_text(in_run[0])} ({turns_text(in_run[0])}), at "
            "the same kinds of step: [low, high] is the measured gain's 95% interval over "
            f"{interval_unit_text(in_run[0])}."
        )
    elif noise is None:
        first = (
            "--verify ran the Python twins once: how much its measured gains move from run to run is unknown, so "
            "read them as one sample each."
        )
    else:
        first = (
            f"--verify's {verify.get('python_runs') or 2} Python runs differ by {fmt_pct(noise)} in busy time per "
            "token: a measured gain smaller than that (marked 'within noise') is noise, not the C twin's effect."
        )
    # Sentences joined; the last one's period is left to the caller (the HTML adds its own).
    return " ".join([first, *unresolved]).removesuffix(".")


def unresolved_notes(result: RunResult) -> list[str]:
    """unresolved_note() of every twin --verify measured in-run (empty without --verify)."""
    components = ((result.verdict or {}).get("verify") or {}).get("components") or {}
    return [
        note
        for name, entry in components.items()
        if entry.get("method") == "in-run" and (note := unresolved_note(name, entry))
    ]


def unresolved_note(name: str, entry: VerifyComponent) -> str | None:
    """Why an in-run measured gain cannot judge its prediction (profiler.checks.verify.resolution), and what its
    own phase's part says meanwhile; or why the prediction itself is too wide to be judged; None when neither."""
    predicted = entry.get("predicted_gain")
    if not predicted:
        return None
    void = _unjudgeable_prediction(name, entry, predicted)
    if entry.get("resolves") is not False:
        return void
    # When both are too wide, both reasons: a narrower measurement alone would still judge nothing.
    subject = f"{name}: its interval" if void is None else f"{void}. Its measured interval too"
    band = _written(entry.get("band"))
    note = (
        f"{subject} (±{_written(entry.get('half_width')) * 100:.1f} points) is wider than "
        f"±{band / abs(predicted):.0%} of its prediction (±{band * 100:.1f}), so "
        f"{_these_runs(entry)} cannot say whether the end-to-end prediction holds; more measured requests (-r) "
        "narrow it while the machine holds steady"
    )
    own, own_gain = own_part_text(entry), entry.get("own_gain")
    if own and own_gain is not None:  # own_part_text is "" without own_gain
        note += (
            f"; its own span saved {own_gain * 100:+.1f} points{own}, an interval the other spans' "
            "noise does not widen"
        )
    return note


def _written(figure: float | None) -> float:
    """A figure verify writes wherever resolves or prediction_resolves is False, which is when it is read here."""
    assert figure is not None
    return figure


def _runs_pooled(entry: VerifyComponent) -> int:
    """How many switched runs an in-run entry pooled (results before pooling: one)."""
    return len(entry.get("run_dirs") or []) or 1


def runs_text(entry: VerifyComponent) -> str:
    """'one run', or '3 runs, pooled ...' when fewer switched runs were too noisy to judge (verify)."""
    runs = _runs_pooled(entry)
    return "one run" if runs == 1 else f"{runs} runs, pooled because fewer could not judge the prediction"


def _unjudgeable_prediction(name: str, entry: VerifyComponent, predicted: float) -> str | None:
    """Why a prediction cannot be checked to the band however narrow the measurement (its own interval is wider)."""
    if entry.get("prediction_resolves") is not False:
        return None
    band = f"±{_written(entry.get('band')) / abs(predicted):.0%}"
    speedup = entry.get("native_speedup")
    faster = f" with a C twin only {speedup:.2f}x faster," if speedup else ""
    return (
        f"{name}: its prediction's own interval (±{_written(entry.get('predicted_half_width')) * 100:.1f} points) is wider than "
        f"{band} of it,{faster} so no run can check it to {band}: the prediction is void at that precision, "
        "and the measured gain is the figure to act on"
    )


def _these_runs(entry: VerifyComponent) -> str:
    runs = _runs_pooled(entry)
    return "this run" if runs == 1 else f"these {runs} runs"


def turns_text(entry: VerifyComponent) -> str:
    """'413 pairs of blocks of 1 step, 826 switches' for an in-run entry (results before block_steps: 'of steps')."""
    size = entry.get("block_steps")
    blocks = f"blocks of {size} step{'s' if size != 1 else ''}" if size else "blocks of steps"
    switches = f", {entry['switches']} switches" if entry.get("switches") is not None else ""
    taken = entry.get("switch_ms") or {}
    if taken:  # a switch's own time (the twin taking over registering the live sequences), taken out
        each = ", ".join(f"{TWIN_NAMES.get(twin, twin)} {ms:.2f} ms" for twin, ms in taken.items())
        switches += f", each switch's own time taken out ({each} a switch)"
    return f"{entry.get('pairs')} pairs of {blocks}{switches}"


TWIN_NAMES = {"python": "Python", "native": "C"}


def interval_unit_text(entry: VerifyComponent) -> str:
    """What an in-run entry's intervals resampled: 'units of 8 neighbouring steps', or 'the pairs' (older results)."""
    size, unit_blocks = entry.get("block_steps"), entry.get("unit_blocks")
    return f"units of {size * unit_blocks} neighbouring steps" if size and unit_blocks else "the pairs"


def own_part_text(entry: VerifyComponent) -> str:
    """' [low, high] (0.99x its prediction)' for an in-run entry's own-phase part (points of step time), or ''."""
    low, high, agreement = entry.get("own_low"), entry.get("own_high"), entry.get("own_agreement")
    if entry.get("own_gain") is None or low is None or high is None:
        return ""
    ratio = f" ({agreement:.2f}x its prediction)" if agreement is not None else ""
    return f" [{low * 100:.1f}, {high * 100:.1f}]{ratio}"
