"""Run a scenario from code (budgets, compare --repeat, selftest): options in, a run directory out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .builder import load_for_options
from .options import EngineOptions

if TYPE_CHECKING:
    from ...engine.loader import LoadedModel
    from ..checks.injections import Injections
    from .session import SessionHooks


class ModelCache:
    """Loads each (model, dtype, seed, device) once per process: repeats must not pay the load again."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, str, int, str], LoadedModel] = {}

    def get(self, options: EngineOptions, progress: Callable[[str], None] | None = None) -> LoadedModel:
        key = (options.model, options.dtype, options.seed, options.device)
        if key not in self._loaded:
            self._loaded[key] = load_for_options(options, progress=progress)
        return self._loaded[key]


def run_once(
    options: EngineOptions,
    scenario: str,
    out_dir: Path,
    *,
    requests: int | None = None,
    duration_s: float | None = None,
    seed: int | None = None,
    profile: str = "default",
    models: ModelCache | None = None,
    native_speedups: dict[str, float] | None = None,
    injections: Injections | None = None,
    hooks: SessionHooks | None = None,  # e.g. a face's progress bar
) -> Path:
    """One run of `scenario` with `options`; profile "counters" makes a deterministic counting run."""
    from ...scenarios.spec import load_scenario

    spec = load_scenario(scenario).with_overrides(num_requests=requests, duration_s=duration_s, seed=seed)
    models = models or ModelCache()
    loaded = models.get(options)
    if profile == "counters":
        from .counting import run_counting

        return run_counting(options, spec, out_dir, loaded=loaded, native_speedups=native_speedups).run_dir
    from .session import run_session

    return run_session(
        options,
        spec,
        out_dir,
        loaded=loaded,
        profile=profile,
        hooks=hooks,
        native_speedups=native_speedups,
        injections=injections,
    ).run_dir


def options_with(options: EngineOptions, **changes: Any) -> EngineOptions:
    """A copy of options with some fields changed (validated again)."""
    return dataclasses.replace(options, **changes)
