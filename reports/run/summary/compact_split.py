"""The short summary's time split: categories and components side by side, one column per method."""

from __future__ import annotations

from collections.abc import Sequence

from ....profiler.rundir.results import CATEGORIES, COMPONENTS, RunResult
from ....profiler.rundir.schema import Split
from ...format import fmt_pct
from .reads import Group, split_shares, summed_components
from .table import Table

# Components under this share of the busy step are folded into one line of the short summary's split.
SPLIT_COMPONENT_MIN = 0.005


Line = tuple[str, Sequence[float | None]]  # a name and its share by each method present


def compact_split(result: RunResult) -> Table | None:
    """Categories and components side by side, one column per method that measured them; None without a split."""
    breakdown = result.breakdown or {}
    methods = breakdown.get("methods") or {}
    present: list[tuple[str, Split]] = [
        (name, split)
        for name, split in (("spans", methods.get("spans")), ("samples", methods.get("samples")))
        if split
    ]
    if not present:
        return None
    categories = [
        (name, _shares(present, "categories", name))
        for name in CATEGORIES
        if _shown(_shares(present, "categories", name))
    ]
    components = _component_lines(present)
    columns = [name for name, _ in present]
    table = Table(
        f"{_thread_title(result)} ({'; '.join(METHOD_WORDS[name] for name in columns)})",
        ["category", *columns, "component", *columns],
        left_columns=(len(columns) + 1,),
    )
    blank: Line = ("", [None] * len(columns))
    for index in range(max(len(categories), len(components))):
        left = categories[index] if index < len(categories) else blank
        right = components[index] if index < len(components) else blank
        row = []
        for label, figures in (left, right):
            row += [label, *[_cell(value, label) for value in figures]]
        table.rows.append(row)
    notes = []
    if any(name == "samples" and split.get("resolution") == "python" for name, split in present):
        notes.append("samples: a Python line and the native code it calls count as one")
    if (methods.get("spans") or {}).get("kernel_source") == "assumed":
        notes.append("the spans' kernel share is assumed: no profiler window ran")
    table.note = "; ".join(notes) or None
    return table


def _shares(present: list[tuple[str, Split]], group: Group, name: str) -> list[float | None]:
    """The name's share by each method present."""
    return [split_shares(split, group).get(name) for _, split in present]


def _shown(values: Sequence[float | None]) -> bool:
    return any(isinstance(value, (int, float)) and value >= 0.0005 for value in values)


def _component_lines(present: list[tuple[str, Split]]) -> list[Line]:
    """The components worth a line (SPLIT_COMPONENT_MIN), the model whole where Python-only samples see it so, and
    the rest folded into one line."""
    components: list[Line] = []
    folded = [0.0] * len(present)
    names = list(COMPONENTS) + (
        ["model"]
        if any(
            (split.get("components") or {}).get("model") is not None
            and not (split.get("components") or {}).get("model_kernels")
            for _, split in present
        )
        else []
    )
    for name in names:
        values = _shares(present, "components", name)
        if name == "model":  # python-only samples: the forward pass whole; spans give it as glue + kernels
            values = [
                value if value is not None else summed_components(split, ("model_glue", "model_kernels"))
                for value, (_, split) in zip(values, present)
            ]
        if any(isinstance(value, (int, float)) and value >= SPLIT_COMPONENT_MIN for value in values):
            components.append((name if name != "model" else "model (whole)", values))
        else:
            folded = [total + (value or 0.0) for total, value in zip(folded, values)]
    if any(value >= 0.0005 for value in folded):
        components.append(("the rest", folded))
    return components


METHOD_WORDS = {"spans": "spans: timed in-process", "samples": "samples: py-spy stacks"}


def _thread_title(result: RunResult) -> str:
    """Whose time the split is: the engine thread, or a foreign server's thread that stood in for it."""
    thread = ((result.target or {}).get("split") or {}).get("engine_thread")
    return (
        f"Time of the server's thread {thread}"
        if thread and thread != "infer-prof-engine"
        else "Engine thread's time"
    )


def _cell(value: float | None, name: str) -> str:
    return "" if not name else fmt_pct(value)
