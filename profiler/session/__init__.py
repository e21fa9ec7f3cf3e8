"""Build the engine, drive a scenario's load through it and record the run: the profiler's sessions.

Public surface (imported lazily, so `import profiler.session` pulls in neither torch nor pandas):

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
    "EngineOptions": "profiler.session.options",
    "parse_size": "profiler.session.options",
    "load_for_options": "profiler.session.builder",
    "build_engine": "profiler.session.builder",
    "BuiltEngine": "profiler.session.builder",
    "run_session": "profiler.session.session",
    "SessionHooks": "profiler.session.session",
    "SessionOutcome": "profiler.session.session",
    "default_run_dir": "profiler.session.session",
    "run_once": "profiler.session.runner",
    "ModelCache": "profiler.session.runner",
    "run_counting": "profiler.session.counting",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'profiler.session' has no attribute {name!r}")
