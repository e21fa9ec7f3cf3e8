"""The C kernel of engine.blockquant's linears (csrc/block_linear.c), run on torch's own OpenMP threads."""

from __future__ import annotations

from typing import TypedDict

import torch

from ..engine.types import BlockKernel
from . import openmp
from .as_op import call_as_op
from .loader import require, require_symbols

OP_NAME = "infer_prof::block_linear"
BEST_VECTOR_LOOP = 2  # np_block_linear's `simd`: whatever this CPU has, up to AVX-512 VNNI


def kernel() -> BlockKernel:
    """engine.blockquant's kernel in C; NativeUnavailableError when the extension is not built or predates it."""
    require_symbols("--dtype q4_1", "np_block_linear")
    ffi, lib = require()
    openmp.bind()
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
        status = call_as_op(OP_NAME, run, call)
        if status != 0:
            if status == lib.NP_ERR_NOMEM:
                raise MemoryError("the native block-quantized linear ran out of memory")
            raise ValueError(
                f"the native {bits}-bit linear refused a [{rows}, {width}] input for {out} outputs"
            )
        return y

    return block_linear


VECTOR_LOOPS = {0: "portable C", 1: "AVX2", 2: "AVX-512 VNNI"}


class KernelDescription(TypedDict):
    """What runs the kernels (describe): the vector loop, torch's OpenMP threads, how a decode step runs."""

    vector_loop: str
    threads: str
    decode_steps: str


def describe() -> KernelDescription:
    """What runs the kernels on this machine, for a run's result: the vector loop, the threads, the decode steps."""
    _, lib = require()
    return {
        "vector_loop": VECTOR_LOOPS.get(int(lib.np_block_simd()), "unknown"),
        "threads": openmp.bind(),
        "decode_steps": "every layer in one C call (native_paths.decode_layers)",
    }
