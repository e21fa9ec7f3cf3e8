"""Number formatting shared by every report, so the terminal, HTML and PDF print the same figures."""

from __future__ import annotations

import math
from typing import Any

NOT_RECORDED = "–"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_ms(value: Any) -> str:
    """Milliseconds with precision that suits their size (0.042 ms, 3.21 ms, 1,234 ms)."""
    if _missing(value):
        return NOT_RECORDED
    value = float(value)
    if abs(value) >= 100:
        return f"{value:,.0f} ms"
    if abs(value) >= 1:
        return f"{value:.2f} ms"
    return f"{value:.3f} ms"


def fmt_pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage."""
    return NOT_RECORDED if _missing(value) else f"{float(value) * 100:.{digits}f}%"


def fmt_pp(value: Any, digits: int = 1) -> str:
    """Percentage points, signed; a value that rounds to zero prints without a sign."""
    if _missing(value):
        return NOT_RECORDED
    text = f"{float(value):+.{digits}f}"
    return f"{text[1:] if float(text) == 0 else text} pp"


def fmt_gain(value: Any) -> str:
    """An end-to-end gain fraction (0.05 -> +5.0%)."""
    return NOT_RECORDED if _missing(value) else f"{float(value) * 100:+.1f}%"


def fmt_number(value: Any, unit: str = "") -> str:
    """A plain figure with three significant digits or thousands separators."""
    if _missing(value):
        return NOT_RECORDED
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    suffix = f" {unit}" if unit else ""
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}{suffix}"
    if abs(value) >= 100:
        return f"{value:,.1f}{suffix}"
    return f"{value:.3g}{suffix}"


def fmt_ratio(value: Any) -> str:
    return NOT_RECORDED if _missing(value) else f"{float(value):.3f}x"


def flatten(section: dict[str, Any] | None, prefix: str = "") -> list[tuple[str, str]]:
    """Nested config/environment dicts as (dotted key, printable value) rows."""
    rows: list[tuple[str, str]] = []
    for key, value in (section or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            rows.append((name, ", ".join(str(item) for item in value) or "(none)"))
        else:
            rows.append((name, NOT_RECORDED if value is None else str(value)))
    return rows
