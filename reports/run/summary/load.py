"""The load's figures: the one-line load summary, the SLO lines, and the latency and throughput tables."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import latency
from ...format import fmt_ms, fmt_number
from ...rundata import LATENCY_LABELS
from ...slo import SloCheck, describe_breaches, slo_targets
from .reads import metric_stat
from .table import Table


def load_line(result: RunResult) -> str:
    """The load in one line: requests, throughput, typical latencies, failures."""
    metrics = result.metrics or {}
    completed, failed = metrics.get("completed"), metrics.get("failed")
    parts = [
        f"{fmt_number(completed)} requests in {fmt_number(metrics.get('duration_s'), 's')}",
        f"{fmt_number(metrics.get('output_token_throughput'), 'tok/s')} out",
        f"TTFT p50 {fmt_ms(metric_stat(metrics, 'ttft_ms', 'p50'))}",
        f"TPOT p50 {fmt_ms(metric_stat(metrics, 'tpot_ms', 'p50'))}",
    ]
    if isinstance(failed, (int, float)) and failed:
        parts.append(f"{fmt_number(failed)} failed")
    return "Load: " + ", ".join(parts) + "."


def slo_lines(result: RunResult, check: SloCheck | None = None) -> list[str]:
    """One line per latency target that measured requests broke (counted with `check` when given, else its p99
    against the target); one line saying they were all met; nothing when the scenario set no target."""
    targets = check.targets if check is not None else slo_targets(result)
    if not targets:
        return []
    lines = []
    for name, target in targets.items():
        label = LATENCY_LABELS.get(name, name)
        stats = latency(result.metrics or {}, name)
        p99 = stats.get("p99")
        spread = f" (p50 {fmt_ms(stats.get('p50'))}, p99 {fmt_ms(p99)})"
        if check is not None and check.breaches.get(name):
            lines.append(f"SLO breached: {label} {describe_breaches(check, name)}{spread}.")
        elif check is None and isinstance(p99, (int, float)) and p99 > target:
            lines.append(f"SLO breached: {label} p99 {fmt_ms(p99)} is over its {_target_ms(target)} target.")
    if not lines:
        met = ", ".join(
            f"{LATENCY_LABELS.get(name, name)} {_target_ms(target)}" for name, target in targets.items()
        )
        lines.append(f"SLOs met by every measured request ({met}).")
    return lines


def _target_ms(value: float) -> str:
    return f"{value:,.0f} ms" if abs(value) >= 1 else f"{value:g} ms"


def latency_table(result: RunResult) -> Table:
    table = Table(
        "Serving latency (measured requests, warm-up excluded)", ["metric", "mean", "p50", "p90", "p99"]
    )
    for name, label in LATENCY_LABELS.items():
        stats = latency(result.metrics, name)
        table.rows.append(
            [
                label,
                fmt_ms(stats.get("mean")),
                fmt_ms(stats.get("p50")),
                fmt_ms(stats.get("p90")),
                fmt_ms(stats.get("p99")),
            ]
        )
    return table


def throughput_table(result: RunResult) -> Table:
    metrics = result.metrics
    table = Table("Throughput", ["metric", "value"])
    table.rows = [
        ["request throughput", fmt_number(metrics.get("request_throughput"), "req/s")],
        ["output token throughput", fmt_number(metrics.get("output_token_throughput"), "tok/s")],
        ["total token throughput", fmt_number(metrics.get("total_token_throughput"), "tok/s")],
        ["goodput (within SLO)", fmt_number(metrics.get("goodput"), "req/s")],
        [
            "completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(metrics.get('failed'))}",
        ],
        ["duration", fmt_number(metrics.get("duration_s"), "s")],
    ]
    return table
