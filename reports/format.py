"""Number formatting shared by every report, so the terminal, HTML and PDF print the same figures."""

from __future__ import annotations

import math
from collections.abc import Mapping

NOT_RECORDED = "–"
# What the formatters take: a measured figure or None (not measured). Typed, not Any, so that a figure read
# from a result.json section by a key its schema type lacks (an `object`) is a type error at the reader.
Figure = float | None


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Figure) -> float | None:
    """The figure as a float, None when it was not measured (None or NaN)."""
    return None if value is None or _missing(value) else float(value)


def fmt_ms(value: Figure) -> str:
    """Milliseconds with precision that suits their size (0.042 ms, 3.21 ms, 1,234 ms)."""
    number = _number(value)
    if number is None:
        return NOT_RECORDED
    if abs(number) >= 100:
        return f"{number:,.0f} ms"
    if abs(number) >= 1:
        return f"{number:.2f} ms"
    return f"{number:.3f} ms"


def fmt_pct(value: Figure, digits: int = 1) -> str:
    """A fraction as a percentage."""
    number = _number(value)
    return NOT_RECORDED if number is None else f"{number * 100:.{digits}f}%"


def fmt_pp(value: Figure, digits: int = 1) -> str:
    """Percentage points, signed; a value that rounds to zero prints without a sign."""
    number = _number(value)
    if number is None:
        return NOT_RECORDED
    text = f"{number:+.{digits}f}"
    return f"{text[1:] if float(text) == 0 else text} pp"


def fmt_gain(value: Figure) -> str:
    """An end-to-end gain fraction (0.05 -> +5.0%)."""
    number = _number(value)
    return NOT_RECORDED if number is None else f"{number * 100:+.1f}%"


def fmt_number(value: Figure | str, unit: str = "") -> str:
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


def fmt_ratio(value: Figure) -> str:
    number = _number(value)
    return NOT_RECORDED if number is None else f"{number:.3f}x"


def flatten(section: Mapping[str, object] | None, prefix: str = "") -> list[tuple[str, str]]:
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
