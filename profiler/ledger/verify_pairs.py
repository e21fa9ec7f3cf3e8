"""`run --verify`'s predicted/measured pairs turned into ledger records and appended, one a component."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ...errors import InferProfError
from ..rundir.health import void_reason
from .records import LedgerRecord, health_text, now_utc
from .store import append_record, ledger_path

if TYPE_CHECKING:
    from ..rundir.results import RunResult
    from ..rundir.schema import Config, Health, Prediction, VerifyComponent


def verify_records(
    run_dir: Path,
    result: RunResult,
    components: Mapping[str, VerifyComponent],
    *,
    recorded_at: str | None = None,
    spread: float | None = None,
) -> list[LedgerRecord]:
    """One "verify" record per component of --verify's section with both a predicted and a measured gain.

    `result` is the main run's, with its verdict before --verify rewrote it: the predictions' intervals come
    from there when the pair's prediction is that one (same gain). A pair is void when its own drift guard
    voided it, when the main run or any run it was measured in was void by its health, or when its measurement
    cannot check the prediction (unresolvable; `spread`: how far --verify's Python runs differed)."""
    config: Config = result.config or {}
    predictions: Mapping[str, Prediction] = (result.verdict or {}).get("predictions") or {}
    main_void = void_reason(result.health)
    when = recorded_at or now_utc()
    records = []
    for component, entry in components.items():
        predicted, measured = (
            finite_number(entry.get("predicted_gain")),
            finite_number(entry.get("measured_gain")),
        )
        if predicted is None or measured is None:
            continue
        low, high = _predicted_interval(predictions.get(component) or {}, predicted)
        records.append(
            LedgerRecord(
                kind="verify",
                scenario=str(config.get("scenario") or ""),
                model=str(config.get("model") or ""),
                dtype=str(config.get("dtype") or ""),
                component=component,
                predicted=predicted,
                predicted_low=low,
                predicted_high=high,
                measured=measured,
                measured_low=finite_number(entry.get("measured_low")),
                measured_high=finite_number(entry.get("measured_high")),
                health=health_text(
                    entry.get("void")
                    or _runs_void(run_dir, entry, main_void)
                    or unresolvable(entry, predicted, spread)
                ),
                commit=(result.environment or {}).get("git_revision"),
                run_dir=str(run_dir),
                recorded_at=when,
                method=_method(entry),
            )
        )
    return records


def append_verify_pairs(
    run_dir: Path,
    result: RunResult,
    components: Mapping[str, VerifyComponent],
    path: Path | None = None,
    *,
    spread: float | None = None,
) -> str:
    """Append --verify's pairs to the ledger (`path`, else ledger_path(run_dir)); one sentence saying where they
    went, or why they did not. A ledger that cannot be written never fails the run that measured the pairs."""
    records = verify_records(run_dir, result, components, spread=spread)
    if not records:
        return "no pair to record"
    target = ledger_path(run_dir, path)
    try:
        for record in records:
            append_record(record, target)
    except InferProfError as exc:
        return f"not recorded: {exc}"
    return f"{len(records)} pair(s) appended to {target}"


def unresolvable(entry: VerifyComponent, predicted: float, spread: float | None) -> str | None:
    """Why a pair's measurement cannot check its prediction, None when it can: an in-run gain whose interval is
    wider than the ±20% band around the prediction (inrun_entry's `resolves`), or a gain measured between whole
    runs, which has no interval of its own, for a prediction smaller than the Python runs' spread. Such a pair
    scores the machine's noise, not the prediction (an example: docs/measurements.md)."""
    if entry.get("resolves") is False:
        half = finite_number(entry.get("half_width"))
        width = f" (±{half:.1%})" if half is not None else ""
        return (
            f"unresolvable: the measured gain's interval{width} is wider than ±20% of the prediction "
            f"({predicted:+.1%})"
        )
    no_interval = (
        finite_number(entry.get("measured_low")) is None or finite_number(entry.get("measured_high")) is None
    )
    if no_interval and spread is not None and abs(predicted) < spread:
        return (
            f"unresolvable: the predicted gain {predicted:+.1%} is smaller than the {spread:.1%} by which "
            "--verify's Python runs differ"
        )
    return None


def _predicted_interval(prediction: Prediction, predicted: float) -> tuple[float | None, float | None]:
    """The verdict's interval of this prediction, when the pair's predicted gain is the verdict's (a prediction
    made with the verify run's own span speedup has no interval)."""
    gain = finite_number(prediction.get("predicted_gain"))
    if gain is None or not math.isclose(gain, predicted, rel_tol=1e-9, abs_tol=1e-12):
        return None, None
    low, high = (
        finite_number(prediction.get("predicted_gain_low")),
        finite_number(prediction.get("predicted_gain_high")),
    )
    return (low, high) if low is not None and high is not None else (None, None)


def _runs_void(run_dir: Path, entry: VerifyComponent, main_void: str | None) -> str | None:
    """Why the pair's runs are void by their health: the main run's, else the first void run it was measured in
    (its C-twin run or switched runs, and its Python neighbours)."""
    if main_void:
        return f"the main run: {main_void}"
    own: list[str | None] = [*(entry.get("run_dirs") or [])] or [entry.get("run_dir")]
    measured_in = [*own, *(entry.get("python_neighbours") or [])]
    for relative in measured_in:
        if not relative or relative == ".":
            continue
        reason = void_reason(_health(run_dir / str(relative)))
        if reason:
            return f"its run {relative}: {reason}"
    return None


def _health(run_dir: Path) -> Health | None:
    """A run directory's health section as its file has it (read, not checked), None when it cannot be read
    (a pair is not voided by a missing file)."""
    try:
        data = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    health = data.get("health") if isinstance(data, dict) else None
    # The file's JSON, taken as the schema's Health unchecked: void_reason reads it with .get() throughout.
    return cast("Health", health) if isinstance(health, dict) else None


def _method(entry: VerifyComponent) -> str:
    """How the pair was obtained, in a few words: the Amdahl prediction's share and speedup, and how it was measured."""
    share, speedup = finite_number(entry.get("share")), finite_number(entry.get("native_speedup"))
    parts = [f"Amdahl: share {share:.1%}" if share is not None else "Amdahl"]
    if speedup is not None:
        parts.append(f"{entry.get('speedup_source') or 'given'} speedup {speedup:.1f}x")
    measured = (
        "twins in turns in one run" if entry.get("method") == "in-run" else "whole runs, twin on vs off"
    )
    return ", ".join(parts) + f"; measured: {measured}"


def finite_number(value: object) -> float | None:
    """A finite number read from result.json as a float (numpy's too), else None (bools, text, NaN, missing)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
