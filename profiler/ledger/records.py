"""One line of the prediction ledger: a predicted gain, the gain measured against it, and what stood behind both."""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

KINDS = ("verify", "slowdown")  # an Amdahl prediction checked by --verify; a slowdown's checked by a twin
HEALTHY = "ok"
VOID_PREFIX = "void: "


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """A predicted end-to-end gain (a fraction of the step, 0.12 = 12%) and the one measured against it.

    kind: "verify" (Amdahl prediction vs the twin measured) or "slowdown" (slowdown-predicted vs the twin
    measured); health: "ok", or "void: <reason>" when the run's health or drift guard voided the pair;
    commit: the git revision of infer-prof that made it; recorded_at: ISO time, UTC; method: how the
    prediction was obtained."""

    kind: str
    scenario: str
    model: str
    dtype: str
    component: str
    predicted: float
    predicted_low: float | None
    predicted_high: float | None
    measured: float
    measured_low: float | None
    measured_high: float | None
    health: str
    commit: str | None
    run_dir: str
    recorded_at: str
    method: str = ""

    @property
    def void(self) -> bool:
        return self.health != HEALTHY

    @property
    def error(self) -> float:
        """measured - predicted, in the gains' own unit (fraction of the step)."""
        return self.measured - self.predicted

    @property
    def relative_error(self) -> float | None:
        """|measured - predicted| / |predicted|, None for a prediction of no gain."""
        return abs(self.error) / abs(self.predicted) if self.predicted else None

    @property
    def inside_predicted(self) -> bool | None:
        """Whether the measured gain fell inside the predicted interval; None without one."""
        if self.predicted_low is None or self.predicted_high is None:
            return None
        low, high = sorted((self.predicted_low, self.predicted_high))
        return low <= self.measured <= high


def now_utc() -> str:
    """The time a record is made, as the ledger writes it."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def health_text(void_reason: str | None) -> str:
    """A record's health from why its run is void (None: healthy), with the one "void: " prefix."""
    if not void_reason:
        return HEALTHY
    return void_reason if void_reason.startswith(VOID_PREFIX) else VOID_PREFIX + void_reason


def to_line(record: LedgerRecord) -> str:
    """The record as one JSON line (no newline): the ledger's storage format."""
    return json.dumps(asdict(record), allow_nan=False, separators=(", ", ": "))


_REQUIRED_TEXT = ("kind", "scenario", "model", "dtype", "component", "health", "run_dir", "recorded_at")
_REQUIRED_NUMBERS = ("predicted", "measured")
_OPTIONAL_NUMBERS = ("predicted_low", "predicted_high", "measured_low", "measured_high")


def from_line(line: str) -> LedgerRecord:
    """A record read back from one line; ValueError naming what is wrong with it (not JSON, a field missing or of
    the wrong type). Unknown fields are ignored, so a newer infer-prof's ledger still reads."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object but {type(data).__name__}")
    for name in _REQUIRED_TEXT:
        if not isinstance(data.get(name), str):
            raise ValueError(f"{name!r} is missing or not text")
    if data["kind"] not in KINDS:
        raise ValueError(f"kind {data['kind']!r} is not one of {', '.join(KINDS)}")
    for name in _REQUIRED_NUMBERS:
        if not _is_number(data.get(name)):
            raise ValueError(f"{name!r} is missing or not a finite number")
    for name in _OPTIONAL_NUMBERS:
        if data.get(name) is not None and not _is_number(data[name]):
            raise ValueError(f"{name!r} is not a finite number")
    for name in ("commit", "method"):
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ValueError(f"{name!r} is not text")
    known: dict[str, Any] = {field.name: data.get(field.name) for field in fields(LedgerRecord)}
    known["method"] = known["method"] or ""
    for name in (*_REQUIRED_NUMBERS, *_OPTIONAL_NUMBERS):
        if known[name] is not None:
            known[name] = float(known[name])
    return LedgerRecord(**known)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
