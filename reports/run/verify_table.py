"""The terminal table of `run --verify`: each twin's predicted and measured end-to-end gains, and their notes."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ...profiler.rundir.schema import Verify, VerifyComponent
from .summary.verify_notes import (
    interval_unit_text,
    own_part_text,
    runs_text,
    turns_text,
    unresolved_note,
)


def render_verify(section: Verify, console: Console) -> None:
    """The --verify table: per component its share, speedup, predicted and measured gains, then its notes."""
    console.print(_table(section))
    for name, entry in section["components"].items():
        if entry.get("method") == "in-run":
            _print_in_run(name, entry, console)
    spread = section.get("python_spread")
    if spread is not None:
        console.print(
            f"the {section.get('python_runs', 2)} Python runs differ by {spread:.1%} in busy time per token: "
            "gains below that are noise"
        )
    sources = {entry["speedup_source"] for entry in section["components"].values()}
    if sources:
        console.print(f"speedup from: {', '.join(sorted(sources))}; (x): measured / predicted")
    console.print(
        "same step mix: each kind of step (batch size, prefill or not) weighed as often as the Python "
        "runs had it; in an open loop a faster engine runs smaller batches, which the end-to-end "
        "figure includes and Amdahl's prediction does not"
    )
    if section.get("ledger"):
        console.print(f"prediction ledger: {section['ledger']}", soft_wrap=True)


def _table(section: Verify) -> Table:
    """One row per twin measured (its share, speedup, predicted and measured gains), one per twin skipped."""
    table = Table(
        "component",
        "share",
        "speedup",
        "predicted",
        "measured",
        "same step mix",
        "batch P / N",
        title="--verify: predicted vs measured end-to-end gain (busy time per token)",
    )
    for name, entry in section["components"].items():
        speedup = f"{entry['native_speedup']:.1f}x" if entry["native_speedup"] else "-"
        batches = entry.get("batch_size_mean") or {}
        batch = (
            f"{batches['python']:.1f} / {batches['native']:.1f}"
            if batches.get("python") is not None and batches.get("native") is not None
            else "-"
        )
        in_run = entry.get("method") == "in-run"  # measured at the same steps already (one switched run)
        table.add_row(
            name,
            _pct(entry["share"]),
            speedup,
            _pct(entry["predicted_gain"]),
            _with_ratio(
                entry["measured_gain"],
                entry["agreement"],
                entry.get("measured_low"),
                entry.get("measured_high"),
            ),
            "in-run" if in_run else _with_ratio(entry.get("mix_matched_gain"), entry.get("mix_agreement")),
            batch,
        )
    for name, reason in section["skipped"].items():
        table.add_row(name, "-", "-", "-", f"skipped: {reason}", "-", "-")
    return table


def _print_in_run(name: str, entry: VerifyComponent, console: Console) -> None:
    """How an in-run gain was measured, the step time it saved by phase, and why it cannot judge, if it cannot."""
    parts = {phase: part for phase, part in (entry.get("parts") or {}).items() if abs(part) >= 0.0005}
    where = ", ".join(
        f"{phase} {part * 100:+.1f}" + (own_part_text(entry) if phase == name else "")
        for phase, part in sorted(parts.items(), key=lambda kv: -abs(kv[1]))
    )
    console.print(
        f"{name}: its two twins took turns within {runs_text(entry)} ({turns_text(entry)}), measured at the "
        f"same kinds of step; \\[low, high]: 95% interval over {interval_unit_text(entry)}"
        + (f"; points of step time saved by phase: {where}" if where else "")
    )
    note = unresolved_note(name, entry)
    if note:
        console.print(f"[yellow]{note}[/yellow]")


def _pct(value: float | None) -> str:
    return f"{value:.1%}" if value is not None else "-"


def _with_ratio(
    gain: float | None, agreement: float | None, low: float | None = None, high: float | None = None
) -> str:
    """A gain with its interval when measured, and measured / predicted in brackets."""
    interval = f" [{low:.1%}, {high:.1%}]" if low is not None and high is not None else ""
    return _pct(gain) + interval + (f" ({agreement:.2f}x)" if agreement is not None else "")
