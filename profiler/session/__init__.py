"""Build the engine, drive a scenario's load through it and record the run: the profiler's sessions.

Public surface (imported lazily, so `import infer_prof.profiler.session` pulls in neither torch nor pandas):

    EngineOptions, parse_size                  the shared engine options (session/options.py)
    load_for_options, build_engine             model and engine assembly (session/builder.py)
    run_session, SessionHooks, SessionOutcome  one profiled session (session/session.py)
    run_once, ModelCache                       a run from code, models loaded once (session/runner.py)
    run_counting                               the deterministic counting run (session/counting.py)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "EngineOptions": "infer_prof.profiler.session.options",
    "parse_size": "infer_prof.profiler.session.options",
    "load_for_options": "infer_prof.profiler.session.builder",
    "build_engine": "infer_prof.profiler.session.builder",
    "BuiltEngine": "infer_prof.profiler.session.builder",
    "run_session": "infer_prof.profiler.session.session",
    "SessionHooks": "infer_prof.profiler.session.session",
    "SessionOutcome": "infer_prof.profiler.session.session",
    "default_run_dir": "infer_prof.profiler.session.session",
    "run_once": "infer_prof.profiler.session.runner",
    "ModelCache": "infer_prof.profiler.session.runner",
    "run_counting": "infer_prof.profiler.session.counting",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'infer_prof.profiler.session' has no attribute {name!r}")
