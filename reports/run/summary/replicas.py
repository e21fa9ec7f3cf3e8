"""The replicas behind a router (`run --target` of one): a row per replica with its engine loop's split, and the line that says whether they did equal work."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Interval, TargetReplica
from ...format import fmt_pct
from .table import Table


def _with_interval(interval: Interval | None) -> str:
    if not interval or interval.get("share") is None:
        return "-"
    return (
        f"{fmt_pct(interval.get('share'))} [{fmt_pct(interval.get('low'))}, {fmt_pct(interval.get('high'))}]"
    )


def _cpu(entry: TargetReplica, total: float) -> str:
    seconds = entry.get("cpu_s")
    if seconds is None:
        return "-"
    return f"{seconds:.2f} s ({seconds / total:.0%})" if total > 0 else f"{seconds:.2f} s"


def replicas_table(result: RunResult) -> Table | None:
    """A row per replica (where it listens, the process whose loop was read, its CPU over the load and share of the
    replicas', the loop's busy share and interpreter share with their 95% intervals); None without replicas."""
    section = (result.target or {}).get("replicas")
    if not section or not section.get("replicas"):
        return None
    entries = section.get("replicas") or []
    total = sum(entry.get("cpu_s") or 0.0 for entry in entries)
    table = Table(
        f"Replicas behind the router (found by {section.get('source')}; all on this host)",
        ["replica", "pid", "CPU (share)", "loop busy [95%]", "interpreter [95%]", "rule"],
        left_columns=(0,),
    )
    for entry in entries:
        busy = entry.get("busy")
        samples = f" of {busy.get('samples')}" if busy and busy.get("samples") else ""
        table.rows.append(
            [
                str(entry.get("name")),
                str(entry.get("engine_pid") or entry.get("root") or "-"),
                _cpu(entry, total),
                _with_interval(busy) + samples,
                _with_interval(entry.get("interpreter")),
                str(entry.get("rule") or entry.get("reason") or "-"),
            ]
        )
    return table


def replica_lines(result: RunResult) -> list[str]:
    """What the run says of the replicas: the balance, and any replica it could not split."""
    return [str(line) for line in ((result.target or {}).get("replicas") or {}).get("lines") or []]
