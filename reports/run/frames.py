"""The top-frames table: the hottest Python functions and native symbols of the engine thread, per component."""

from __future__ import annotations

from collections import Counter, defaultdict

from ..format import fmt_pct
from ..stacks import SampledStack, StackFrame, ThreadGroup, python_only, shown_component
from .summary import Table

NO_COMPONENT = "(no component)"
MODEL_WHOLE = "model (whole)"  # the forward's rows without native stacks, named as in the time-split table


def top_frames_table(group: ThreadGroup | None, *, per_kind: int = 4, min_share: float = 0.01) -> Table:
    """Per component (its share of the thread's samples), the top Python functions and native symbols.

    self: samples whose innermost frame of that kind is this one (for Python, the innermost Python
    frame: its own code and any native code it called directly); total: samples with the frame
    anywhere on the stack. Both are shares of the thread's samples. Components under `min_share`
    are left out.
    """
    table = Table(
        "Top frames of the engine thread (py-spy samples)",
        ["component", "kind", "function", "where", "self", "total"],
    )
    if group is None or not group.samples:
        table.note = "no py-spy samples of the engine thread in this run"
        return table
    thread_samples = group.samples
    no_native = python_only([group])
    by_component: dict[str, list[SampledStack]] = defaultdict(list)
    for stack in group.stacks:
        component = shown_component(stack.component, no_native) or NO_COMPONENT
        by_component[MODEL_WHOLE if component == "model" else component].append(stack)
    ranked = sorted(by_component.items(), key=lambda item: -sum(stack.count for stack in item[1]))
    for component, stacks in ranked:
        share = sum(stack.count for stack in stacks) / thread_samples
        if share < min_share:
            continue
        table.sections.append(len(table.rows))
        first = True
        for kind, python in (("python", True), ("native", False)):
            for frame, self_count, total in hottest(stacks, python=python)[:per_kind]:
                label = f"{component} ({fmt_pct(share, 0)})" if first else ""
                table.rows.append(
                    [
                        label,
                        kind,
                        frame.function,
                        frame.where,
                        fmt_pct(self_count / thread_samples),
                        fmt_pct(total / thread_samples),
                    ]
                )
                first = False
    notes = []
    if no_native:
        notes.append(
            "no native stacks in this run (py-spy without --native): a Python frame's self time is its line "
            "or the native code it calls; --profile deep tells them apart"
        )
    if not any(stack.category != "unclassified" for stack in group.stacks):
        notes.append("this run has no sample_labels.csv: stacks are not split by component")
    table.note = "; ".join(notes) or None
    return table


def hottest(stacks: list[SampledStack], *, python: bool) -> list[tuple[StackFrame, int, int]]:
    """(frame, self samples, total samples) of frames of one kind, hottest self first.

    Python frames are counted per function (its lines pooled; `where` names its hottest line); native
    frames per symbol, and unresolved addresses per library, since one address says little."""
    self_counts: Counter[tuple[str, str]] = Counter()
    totals: Counter[tuple[str, str]] = Counter()
    lines: dict[tuple[str, str], Counter[StackFrame]] = defaultdict(Counter)
    for stack in stacks:
        keys = []
        for frame in stack.frames:
            if frame.python == python:
                key = _key(frame)
                keys.append(key)
                lines[key][frame] += stack.count
        if not keys:
            continue
        self_counts[keys[-1]] += stack.count
        for key in set(keys):
            totals[key] += stack.count
    ordered = sorted(self_counts, key=lambda key: (-self_counts[key], -totals[key], key))
    return [(_shown(key, lines[key]), self_counts[key], totals[key]) for key in ordered]


def _key(frame: StackFrame) -> tuple[str, str]:
    if not frame.python and frame.function.startswith("0x"):
        return ("(unresolved address)", frame.file or "")
    return (frame.function, frame.file or "")


def _shown(key: tuple[str, str], lines: Counter[StackFrame]) -> StackFrame:
    hottest_line = lines.most_common(1)[0][0]
    return StackFrame(key[0], key[1] or None, hottest_line.line if key[0] == hottest_line.function else None)
