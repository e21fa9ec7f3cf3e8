"""Shared test support: builds the C extension in place when it is missing, and pairs the twins of each component."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Examples per fuzz test: quick by default, raise it for a long sanitizer run (docs/native-dev.md).
FUZZ_EXAMPLES = int(os.environ.get("INFER_PROF_FUZZ_EXAMPLES", "200"))


def _ensure_built() -> dict[str, bool | str]:
    """Build native_paths._native once if a compiler exists and no build is there; report availability."""
    from infer_prof.native_paths import loader

    status = loader.available()
    if status["built"] or os.environ.get("INFER_PROF_NO_NATIVE_BUILD") == "1":
        return status
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        return status
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "native_paths" / "build.py")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        status["reason"] = f"building the extension failed: {completed.stderr.strip()[-400:]}"
        return status
    loader._module = None  # forget the failed import and try again
    loader._failure = None
    return loader.available()


NATIVE_STATUS = _ensure_built()
NATIVE_SKIP_REASON = f"native_paths._native is not available: {NATIVE_STATUS['reason']}"
requires_native = pytest.mark.skipif(not NATIVE_STATUS["built"], reason=NATIVE_SKIP_REASON)


def twin_params(python_factory: object, native_factory: object) -> list[object]:
    """pytest.param for each twin (the pyinstrument pattern); the native one skips when not built."""
    return [
        pytest.param(python_factory, id="python"),
        pytest.param(native_factory, id="native", marks=requires_native),
    ]
