"""The C kernel of engine.blockquant's linears (csrc/block_linear.c), run on torch's own OpenMP threads."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from infer_prof.engine.types import BlockKernel
from infer_prof.native_paths.loader import require, require_symbol

_bound: dict[str, Any] = {}
OP_NAME = "infer_prof::block_linear"
profiling = torch._C._autograd._profiler_enabled
BEST_VECTOR_LOOP = 2  # np_block_linear's `simd`: whatever this CPU has, up to AVX-512 VNNI


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


def _bind_openmp(ffi: Any, lib: Any) -> str:
    """Hand the kernel GOMP_parallel and friends of torch's libgomp, so its rows split over torch's
    threads (no second pool spinning against them); "one thread" where there is none to hand."""
    torch.get_num_threads()  # makes sure torch has loaded its OpenMP runtime
    # Another library may have loaded a libgomp of its own: torch's is the one whose threads it runs.
    path = loaded_libgomp(prefer=str(Path(torch.__file__).resolve().parent))
    if path is None:
        lib.np_block_set_openmp(ffi.NULL, ffi.NULL, ffi.NULL)
        return "one thread (no libgomp loaded)"
    # Opening a library that is already loaded returns the same instance: torch's pool, not a new one.
    gomp = ctypes.CDLL(path)

    def address(symbol: str) -> Any:
        return ffi.cast("void *", ctypes.cast(getattr(gomp, symbol), ctypes.c_void_p).value)

    lib.np_block_set_openmp(
        address("GOMP_parallel"), address("omp_get_thread_num"), address("omp_get_num_threads")
    )
    return f"torch's OpenMP threads ({path})"


def kernel() -> BlockKernel:
    """engine.blockquant's kernel in C; NativeUnavailableError when the extension is not built or predates it."""
    require_symbol("np_block_linear", "dtype q4_1")
    ffi, lib = require()
    if "threads" not in _bound:
        _bound["threads"] = _bind_openmp(ffi, lib)
    run, cast = lib.np_block_linear, ffi.cast

    def block_linear(packed: torch.Tensor, bits: int, out: int, width: int, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or not x.is_contiguous():
            x = x.float().contiguous()
        rows = x.shape[0]
        y = torch.empty(rows, out, dtype=torch.float32)
        call = (
            cast("uint8_t *", packed.data_ptr()),
            bits,
            out,
            width,
            cast("float *", x.data_ptr()),
            rows,
            cast("float *", y.data_ptr()),
            torch.get_num_threads(),
            BEST_VECTOR_LOOP,
        )
        if profiling():
            # Named as an op, so that torch.profiler (and the windows of profiler.collectors.kernels, which
            # count every `a::b` event) see the kernel's time as an op's, not as Python between ops. Only
            # under a profiler: an idle record_function costs about 8 us a call.
            with torch.profiler.record_function(OP_NAME):
                status = run(*call)
        else:
            status = run(*call)
        if status != 0:
            if status == lib.NP_ERR_NOMEM:
                raise MemoryError("the native block-quantized linear ran out of memory")
            raise ValueError(
                f"the native {bits}-bit linear refused a [{rows}, {width}] input for {out} outputs"
            )
        return y

    return block_linear


VECTOR_LOOPS = {0: "portable C", 1: "AVX2", 2: "AVX-512 VNNI"}


def describe() -> dict[str, str]:
    """What runs the kernel on this machine, for a run's result: its vector loop and its threads."""
    _, lib = require()
    return {
        "vector_loop": VECTOR_LOOPS.get(int(lib.np_block_simd()), "unknown"),
        "threads": _bound.get("threads", "not loaded"),
    }
