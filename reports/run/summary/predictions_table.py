"""The long form's table of predicted native gains per component, with the measured gains of --verify."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Prediction, VerifyComponent
from ...format import NOT_RECORDED, fmt_gain, fmt_pct, fmt_pp
from ...rundata import why_not_measured
from .reads import interval_text
from .table import Table
from .verify_notes import noise_warning, verify_noise, within_noise


def predictions_table(result: RunResult) -> Table:
    """Amdahl predictions per component, and the measured gain when a verify run switched the twin on."""
    table = Table(
        "Predicted native gains (end to end)",
        ["component", "share", "native speedup", "predicted", "measured", "gap"],
    )
    predictions = (result.verdict or {}).get("predictions") or {}
    if not predictions:
        table.note = f"no predictions ({why_not_measured(result, 'verdict')})"
    else:
        table.note = noise_warning(result)
    noise = verify_noise(result)
    verified = ((result.verdict or {}).get("verify") or {}).get("components") or {}
    table.rows += [
        _prediction_row(component, prediction, noise, verified.get(component))
        for component, prediction in predictions.items()
    ]
    if any(prediction.get("speedup_source") == "replay" for prediction in predictions.values()):
        table.note = " ".join(filter(None, [table.note, _replay_note(result)]))
    return table


def _prediction_row(
    component: str, prediction: Prediction, noise: float | None, verified: VerifyComponent | None
) -> list[str]:
    """One component's row: its twin on, its prediction void, or its prediction beside the measured gain."""
    if prediction.get("twin_on"):  # its C twin ran: nothing to predict (profiler.analysis.diagnose)
        return [
            component,
            fmt_pct(prediction.get("share")),
            "C twin on",
            "nothing to predict",
            NOT_RECORDED,
            NOT_RECORDED,
        ]
    predicted, measured = prediction.get("predicted_gain"), prediction.get("measured_gain")
    void = prediction.get("void")
    if void:  # a busy machine's prediction (profiler.analysis.diagnose): no figure to act on
        return [
            component,
            fmt_pct(prediction.get("share")),
            _speedup_text(prediction),
            f"void: {void}",
            _measured_text(measured, noise, verified),
            NOT_RECORDED,
        ]
    gap = (
        fmt_pp((measured - predicted) * 100)
        if predicted is not None and measured is not None
        else NOT_RECORDED
    )
    return [
        component,
        fmt_pct(prediction.get("share")),
        _speedup_text(prediction),
        fmt_gain(predicted)
        + interval_text(
            prediction.get("predicted_gain_low"),
            prediction.get("predicted_gain_high"),
            lambda value: f"{value * 100:.1f}",
        ),
        _measured_text(measured, noise, verified),
        gap,
    ]


def _replay_note(result: RunResult) -> str:
    """Where the speedups came from when the replay measured them."""
    replay = result.replay or {}
    return (
        f"Speedups: both twins replaying this run's own work ({replay.get('steps_recorded', 0):,} of "
        f"{replay.get('steps_in_run', 0):,} steps recorded), median with its 95% interval."
    )


def _speedup_text(prediction: Prediction) -> str:
    speedup = prediction.get("native_speedup")
    if speedup is None:
        return NOT_RECORDED
    text = f"{speedup:.1f}x" + interval_text(
        prediction.get("native_speedup_low"),
        prediction.get("native_speedup_high"),
        lambda value: f"{value:.1f}",
    )
    return text if prediction.get("speedup_source") == "replay" else f"{text} (microbenchmark)"


def _measured_text(
    measured: float | None, noise: float | None, verified: VerifyComponent | None = None
) -> str:
    if measured is None:
        return "not measured"
    if (
        verified and verified.get("method") == "in-run"
    ):  # at the same steps, its interval from units of blocks
        low, high = verified.get("measured_low"), verified.get("measured_high")
        return fmt_gain(measured) + interval_text(low, high, lambda value: f"{value * 100:.1f}") + " in-run"
    return fmt_gain(measured) + (" (within noise)" if within_noise(measured, noise) else "")
