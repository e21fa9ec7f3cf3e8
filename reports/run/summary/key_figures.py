"""The handful of figures shown as tiles beside the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import Metrics
from ...format import NOT_RECORDED, fmt_number, fmt_pct
from ...slo import SloCheck, describe_breaches
from .reads import metric_stat


@dataclass
class KeyFigure:
    """One tile next to the verdict: a figure, a line under it, and whether it needs the reader's eye."""

    label: str
    value: str
    detail: str | None = None
    alarm: bool = False


def key_figures(result: RunResult, slo: SloCheck | None = None) -> list[KeyFigure]:
    """The handful of numbers a reader wants next to the verdict; with `slo`, breaches and goodput."""
    metrics = result.metrics
    slo = slo or SloCheck(targets={})
    figures = [
        KeyFigure("Output tokens/s", fmt_number(metrics.get("output_token_throughput"))),
        KeyFigure("Requests/s", fmt_number(metrics.get("request_throughput"))),
    ]
    for name, label in (("ttft_ms", "TTFT p50 / p99"), ("tpot_ms", "TPOT p50 / p99")):
        detail = describe_breaches(slo, name)
        figures.append(
            KeyFigure(
                label,
                _pair_ms(metrics, name),
                f"SLO: {detail}" if detail else None,
                alarm=bool(slo.breaches.get(name)),
            )
        )
    if slo.targets:
        good = slo.good_fraction
        figures.append(
            KeyFigure(
                "Goodput",
                fmt_number(metrics.get("goodput"), "req/s"),
                f"{fmt_pct(good)} of requests within every SLO" if good is not None else None,
                alarm=good is not None and good < 1.0,
            )
        )
    if result.verdict:
        figures.append(KeyFigure("Interpreter share", fmt_pct(result.verdict.get("interpreter_share"))))
    failed = metrics.get("failed")
    figures.append(
        KeyFigure(
            "Completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(failed)}",
            alarm=isinstance(failed, (int, float)) and failed > 0,
        )
    )
    return figures


def _pair_ms(metrics: Metrics, name: str) -> str:
    # "22.3 / 29.6 ms": one unit for the pair keeps a figure card on one line.
    low, high = metric_stat(metrics, name, "p50"), metric_stat(metrics, name, "p99")
    if low is None or high is None:
        return NOT_RECORDED
    return f"{_short(low)} / {_short(high)} ms"


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
