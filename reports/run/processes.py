"""The process table of a `run --target` run: one row per process of the server's tree, its role, its samples and its split."""

from __future__ import annotations

from collections.abc import Mapping

from ...profiler.rundir.results import RunResult
from ...profiler.rundir.schema import ProcessSplit
from ..format import fmt_pct
from .summary import Table


def processes_table(result: RunResult) -> Table | None:
    """One row per process (parents first, late children marked), or None when the run sampled no process tree."""
    processes = (result.target or {}).get("processes")
    if not processes:
        return None
    table = Table(
        "Server processes (py-spy on each Python process; * the one the verdict reads)",
        ["pid", "role", "samples", "split", "named from"],
        text=True,
    )
    for entry in processes:
        pid = f"{entry.get('key') or entry['pid']}{' *' if entry.get('primary') else ''}"  # node:pid with Ray
        role = entry.get("role") or "unknown"
        if entry.get("late"):
            role += f" (appeared at {entry.get('first_seen_s', 0):.1f} s)"
        if entry.get("exited"):
            role += " (exited)"
        if entry.get("sampled"):
            samples = f"{entry.get('samples', 0)} ({entry.get('busy_samples', 0)} busy)"
            split = split_text(entry.get("split"))
        else:
            samples, split = "-", f"not sampled: {entry.get('not_sampled') or 'no reason recorded'}"
        table.rows.append([pid, role, samples, split, str(entry.get("role_source") or "not recorded")])
    return table


def split_text(split: ProcessSplit | None) -> str:
    """The busiest thread's split in a few words: its top categories, then its top components."""
    thread = split.get("engine_thread") if split else None
    if not split or not thread:
        return "no thread had samples"
    categories = _top(split.get("categories") or {})
    if split.get("resolution") == "python" and split.get("python_leaf") is not None:
        categories = ", ".join(filter(None, [categories, f"Python leaf {fmt_pct(split['python_leaf'])}"]))
    components = _top(
        {name: share for name, share in (split.get("components") or {}).items() if name != "none"}
    )
    return f"{thread}: {categories or 'nothing classified'}" + (f" | {components}" if components else "")


def _top(shares: Mapping[str, float | None], count: int = 3) -> str:
    numbers = {name: share for name, share in shares.items() if isinstance(share, (int, float)) and share > 0}
    ordered = sorted(numbers.items(), key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} {fmt_pct(share)}" for name, share in ordered)
