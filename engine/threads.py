"""How torch's OpenMP threads wait between parallel regions: chosen before torch loads libgomp, unless the user chose."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import Any

# libgomp's default has a waiting thread spin ~300,000 iterations before it sleeps. When another process
# holds one of the cores, each of the ~300 parallel regions of a SmolLM2 decode step waits for the
# descheduled thread while its partner burns the other core: batch-1 TPOT went from ~80 ms to 1,202 ms
# with a busy neighbour. PASSIVE sleeps at once; docs/measurements.md has the figures that chose it
# (benchmarks/bench_contention.py).
DEFAULT_WAIT_POLICY = "PASSIVE"
WHY = (
    "libgomp's default spin-wait collapses decode when another process holds a core "
    "(PASSIVE's TPOT was 1-8% of the default's with 0-2 busy neighbours: benchmarks/bench_contention.py, docs/measurements.md)"
)
OPT_OUT = "INFER_PROF_OMP_POLICY"  # "off": leave libgomp's default (how the benchmark measures it)

_decision: dict[str, Any] = {}


def choose_wait_policy(
    environ: MutableMapping[str, str] | None = None, torch_loaded: bool | None = None
) -> dict[str, Any]:
    """Set OMP_WAIT_POLICY in `environ` (os.environ by default) unless it or GOMP_SPINCOUNT is already set
    or the opt-out says off; what was decided, as a record for the run's result. libgomp reads the variable
    once, when torch loads it, so `applied` is False when torch was loaded before this call."""
    env = os.environ if environ is None else environ
    loaded = ("torch" in sys.modules) if torch_loaded is None else torch_loaded
    record: dict[str, Any]
    if env.get(OPT_OUT, "").lower() == "off":
        record = {"wait_policy": env.get("OMP_WAIT_POLICY", "libgomp default"), "set_by": f"{OPT_OUT}=off"}
    elif "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        chosen = env.get("OMP_WAIT_POLICY") or f"GOMP_SPINCOUNT={env['GOMP_SPINCOUNT']}"
        record = {"wait_policy": chosen, "set_by": "user"}
    else:
        env["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
        record = {"wait_policy": DEFAULT_WAIT_POLICY, "set_by": "infer-prof", "why": WHY}
    record["applied"] = not loaded
    return record


def wait_policy_decision() -> dict[str, Any]:
    """The decision made when the engine package was first imported in this process."""
    if not _decision:
        _decision.update(choose_wait_policy())
    return dict(_decision)
