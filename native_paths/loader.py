"""Loads the compiled C twins (`native_paths._native`) if they were built, and says what is available or why not."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from ..errors import NativeUnavailableError

# Point this at another build of the library (e.g. the sanitizer build, docs/native-dev.md).
LIBRARY_PATH_VARIABLE = "INFER_PROF_NATIVE_PATH"
MODULE_NAME = "infer_prof.native_paths._native"

# The C entry points each component needs; a library missing one is treated as not built.
COMPONENT_SYMBOLS = {
    "sampler": ("np_sampler_create", "np_sampler_step", "np_sampler_destroy"),
    "kv_alloc": ("np_kv_alloc_create", "np_kv_alloc_step", "np_kv_alloc_destroy"),
    "scheduler": ("np_scheduler_create", "np_scheduler_step", "np_scheduler_destroy"),
    "prepare": ("np_prepare_create", "np_prepare_step", "np_prepare_destroy"),
    "core": ("np_core_create", "np_core_step", "np_core_destroy"),
}

BUILD_HINT = "build it with `python native_paths/build.py` or `pip install -e .` (needs a C compiler)"


_module: ModuleType | None = None
_failure: str | None = None


def import_extension(module_name: str, variable: str) -> ModuleType:
    """The extension module `module_name`: the build the environment's `variable` names (e.g. a sanitizer build;
    loaded once, so that every user in the process shares it), else the package's own; ImportError when it cannot
    be loaded."""
    path = os.environ.get(variable)
    if not path:
        return importlib.import_module(module_name)
    loaded = sys.modules.get(module_name)
    if loaded is not None and getattr(loaded, "__file__", None) == path:
        return loaded
    if not os.path.isfile(path):
        raise ImportError(f"{variable}={path} is not a file")
    loader = importlib.machinery.ExtensionFileLoader(module_name, path)
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[module_name] = module
    return module


def extension() -> ModuleType | None:
    """The loaded extension module (with `.ffi` and `.lib`), or None when it is not available."""
    global _module, _failure
    if _module is None and _failure is None:
        try:
            _module = import_extension(MODULE_NAME, LIBRARY_PATH_VARIABLE)
        except ImportError as error:
            _failure = f"native_paths._native is not built or cannot be loaded ({error}); {BUILD_HINT}"
    return _module


def require() -> tuple[Any, Any]:
    """(ffi, lib) of the extension, or NativeUnavailableError saying why not."""
    module = extension()
    if module is None:
        raise NativeUnavailableError(_failure or f"native_paths._native is not built; {BUILD_HINT}")
    return module.ffi, module.lib


def available() -> dict[str, bool | str]:
    """Which C twins can be used: one bool per component ("sampler", "kv_alloc", "scheduler", "prepare",
    and "core", the fused scheduler + kv_alloc + prepare), plus
    "built" (bool), "path" (the library file) and "reason" (why not, or "" when all are there)."""
    module = extension()
    status: dict[str, bool | str] = {"built": module is not None, "path": "", "reason": ""}
    if module is None:
        for component in COMPONENT_SYMBOLS:
            status[component] = False
        status["reason"] = _failure or "not built"
        return status
    status["path"] = str(getattr(module, "__file__", ""))
    missing = []
    for component, symbols in COMPONENT_SYMBOLS.items():
        present = all(hasattr(module.lib, symbol) for symbol in symbols)
        status[component] = present
        if not present:
            missing.append(component)
    if missing:
        status["reason"] = (
            f"the library at {status['path']} lacks {', '.join(missing)}; rebuild it ({BUILD_HINT})"
        )
    return status


def require_twins(names: Iterable[str], flag: str) -> None:
    """NativeUnavailableError naming `flag` when a C twin in `names` cannot be used: a command that
    measures native twins must not run their Python stand-ins under a native label."""
    status = available()
    missing = sorted(name for name in names if status.get(name) is not True)
    if missing:
        raise NativeUnavailableError(
            f"{flag}: the C twin of {', '.join(missing)} cannot be loaded, so the Python twin would run in its "
            f"place: {status['reason'] or f'not built; {BUILD_HINT}'}"
        )


def require_symbols(flag: str, *symbols: str) -> None:
    """NativeUnavailableError naming `flag` when the library is not built or lacks one of the C entry points
    `symbols` (kernels with no Python stand-in fast enough to run in their place)."""
    module = extension()
    if module is None:
        raise NativeUnavailableError(f"{flag} needs the C library: {_failure or BUILD_HINT}")
    missing = [symbol for symbol in symbols if not hasattr(module.lib, symbol)]
    if missing:
        path = getattr(module, "__file__", "")
        raise NativeUnavailableError(
            f"{flag}: the library at {path} lacks {', '.join(missing)}; rebuild it ({BUILD_HINT})"
        )
