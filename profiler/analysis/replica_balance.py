"""Whether processes that do the same job (replicas, or the ranks of one model) were equally busy, from their py-spy samples.

Each process's busy share is the fraction of its own samples that were not waits, with a Wilson interval.
Processes sampled at one rate over one window are balanced when no two of those intervals are apart
(profiler.stats.proportions_differ): a difference inside them is sampling noise. The busiest and the idlest
are named either way, so an imbalance says which one to look at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..stats import Interval, proportions_differ, wilson_interval


@dataclass(frozen=True, slots=True)
class ProcessLoad:
    """One process of a group: its name in the table, busy samples and all samples."""

    name: str
    busy: int
    samples: int


@dataclass(frozen=True, slots=True)
class Balance:
    """A group's busy shares, whether they are balanced, and the line that says so."""

    shares: dict[str, Interval]
    balanced: bool
    busiest: str
    idlest: str
    line: str


def balance(group: str, loads: Sequence[ProcessLoad]) -> Balance | None:
    """The balance of two or more sampled processes of one job (None with fewer, or one without samples)."""
    loads = [load for load in loads if load.samples > 0]
    if len(loads) < 2:
        return None
    shares = {load.name: wilson_interval(load.busy, load.samples) for load in loads}
    busiest = max(loads, key=lambda load: shares[load.name].point).name
    idlest = min(loads, key=lambda load: shares[load.name].point).name
    apart = proportions_differ(shares[busiest], shares[idlest])
    listed = ", ".join(
        f"{name} {share.point:.0%} [{share.low:.0%}, {share.high:.0%}]" for name, share in shares.items()
    )
    verdict = (
        f"not balanced: {busiest} was busier than {idlest} beyond sampling noise"
        if apart
        else "balanced within sampling noise (their 95% intervals overlap)"
    )
    return Balance(shares, not apart, busiest, idlest, f"{group}: busy {listed}; {verdict}")
