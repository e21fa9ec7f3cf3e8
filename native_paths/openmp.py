"""Hands the C kernels the OpenMP runtime torch loaded, so that they run on torch's threads (csrc/parallel.c)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from .loader import require

_bound: dict[str, str] = {}


def loaded_libgomp(maps: Path = Path("/proc/self/maps"), prefer: str = "") -> str | None:
    """The path of a libgomp this process has loaded, the first one under `prefer` (torch's folder) if any;
    None with no /proc or no libgomp (another OpenMP runtime, or none)."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return None
    found = [line.split()[-1] for line in lines if "/libgomp" in line and ".so" in line]
    preferred = [path for path in found if prefer and path.startswith(prefer)]
    return next(iter(preferred + found), None)


def bind() -> str:
    """Hand GOMP_parallel and friends of torch's libgomp to the C library, once a process; says what the
    kernels run on: torch's OpenMP threads, or one thread where there is no libgomp to hand."""
    if "threads" in _bound:
        return _bound["threads"]
    ffi, lib = require()
    torch.get_num_threads()  # makes sure torch has loaded its OpenMP runtime
    # Another library may have loaded a libgomp of its own: torch's is the one whose threads it runs.
    path = loaded_libgomp(prefer=str(Path(torch.__file__).resolve().parent))
    if path is None:
        lib.np_set_openmp(ffi.NULL, ffi.NULL, ffi.NULL)
        _bound["threads"] = "one thread (no libgomp loaded)"
        return _bound["threads"]
    # Opening a library that is already loaded returns the same instance: torch's pool, not a new one.
    gomp = ctypes.CDLL(path)

    def address(symbol: str) -> Any:
        return ffi.cast("void *", ctypes.cast(getattr(gomp, symbol), ctypes.c_void_p).value)

    lib.np_set_openmp(address("GOMP_parallel"), address("omp_get_thread_num"), address("omp_get_num_threads"))
    _bound["threads"] = f"torch's OpenMP threads ({path})"
    return _bound["threads"]
