"""What a profile really costs: the same scenario with collectors off and on, interleaved ABBA, as a throughput ratio."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ...scenarios.spec import ScenarioSpec
from ..rundir.schema import Overhead
from ..session.options import EngineOptions
from .costs import ABResult, interleave_ab

if TYPE_CHECKING:
    from ...engine.loader import LoadedModel


def run_throughput(
    options: EngineOptions,
    spec: ScenarioSpec,
    loaded: LoadedModel,
    profile: str,
    sink: list[Overhead] | None = None,
) -> float:
    """Output tokens per second of one run (measured requests only, collectors' start/stop excluded)."""
    from ..session.session import run_session

    with tempfile.TemporaryDirectory(prefix="infer-prof-overhead-") as scratch:
        outcome = run_session(
            options,
            spec,
            Path(scratch),
            loaded=loaded,
            profile=profile,
            stop_event=threading.Event(),
            write=False,
        )
    if sink is not None and outcome.result.overhead is not None:
        sink.append(outcome.result.overhead)
    return float(outcome.result.metrics["output_token_throughput"])


def measure_overhead(
    options: EngineOptions,
    spec: ScenarioSpec,
    loaded: LoadedModel,
    *,
    profile: str = "default",
    pairs: int = 5,
    warmup: int = 1,
) -> tuple[ABResult, list[Overhead]]:
    """Interleaved A/B (A = profile "off", B = `profile`) of output-token throughput, ABBA order.

    Returns the A/B result (ratio = median over pairs of B/A; 0.98 means 2% slower) and the profiled
    runs' own `overhead` sections, whose estimate the A/B ratio checks.
    """
    estimates: list[Overhead] = []
    result = interleave_ab(
        lambda: run_throughput(options, spec, loaded, "off"),
        lambda: run_throughput(options, spec, loaded, profile, estimates),
        pairs=pairs,
        warmup=warmup,
    )
    return result, estimates[warmup:]
