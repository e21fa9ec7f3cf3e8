"""A run's SLO targets (metrics.slo) and how many measured requests broke each, as goodput counts them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..profiler.rundir.results import RunResult
from ..profiler.rundir.samples import measured_requests

# The latencies a scenario may set a target on (profiler/analysis/metrics.py SLO_KEYS).
SLO_NAMES = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass
class SloCheck:
    """Measured requests against the run's targets: per target how many broke it, and how many met all."""

    targets: dict[str, float]
    requests: int = 0
    breaches: dict[str, int] = field(default_factory=dict)
    met_all: int = 0

    @property
    def good_fraction(self) -> float | None:
        return self.met_all / self.requests if self.requests else None


def slo_targets(result: RunResult) -> dict[str, float]:
    """{latency name: target ms} the run's goodput was counted against (empty when it recorded none)."""
    recorded = (result.metrics or {}).get("slo") or {}
    targets = {}
    for name in SLO_NAMES:
        value = recorded.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
            targets[name] = float(value)
    return targets


def check_slos(requests: pd.DataFrame, targets: dict[str, float]) -> SloCheck:
    """Count breaches over the measured requests (finished ok, not warm-up), with goodput's rule: a
    one-token request has TPOT 0, so it cannot break a TPOT target."""
    check = SloCheck(targets=dict(targets))
    measured = measured_requests(requests)
    if measured.empty or not targets:
        check.requests = len(measured)
        check.met_all = len(measured)
        return check
    within = pd.Series(True, index=measured.index)
    for name, target in targets.items():
        values = pd.to_numeric(measured.get(name, pd.Series(np.nan, index=measured.index)), errors="coerce")
        observed = values.fillna(0.0) if name == "tpot_ms" else values
        broke = ~(observed <= target)  # a missing TTFT or E2E on a finished request breaks its target
        check.breaches[name] = int(broke.sum())
        within &= ~broke
    check.requests = len(measured)
    check.met_all = int(within.sum())
    return check


def describe_breaches(check: SloCheck, name: str) -> str | None:
    """`3 of 300 over 2,000 ms`, or None when the run has no target for `name`."""
    if name not in check.targets:
        return None
    return f"{check.breaches.get(name, 0):,} of {check.requests:,} over {_ms(check.targets[name])}"


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if abs(value) >= 100 else f"{value:g} ms"
