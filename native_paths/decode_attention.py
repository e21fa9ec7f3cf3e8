"""The C decode attention over the paged KV cache (csrc/decode_attention.c), run on torch's own OpenMP threads."""

from __future__ import annotations

import math

import torch

from ..engine.types import DecodeAttentionKernel
from . import openmp
from .as_op import call_as_op
from .loader import require, require_symbols

OP_NAME = "infer_prof::decode_attention"


def kernel(simd: int = 1) -> DecodeAttentionKernel:
    """engine.llama's decode attention in C (`simd` 0: its portable loop, for tests); NativeUnavailableError
    when the extension is not built or predates it."""
    require_symbols("--dtype q4_1", "np_decode_attention")
    ffi, lib = require()
    openmp.bind()
    run, cast = lib.np_decode_attention, ffi.cast

    def decode_attention(
        q: torch.Tensor, pool: torch.Tensor, tables: torch.Tensor, lens: torch.Tensor, n_kv_heads: int
    ) -> torch.Tensor:
        num_blocks, block_size, _, _, head_dim = pool.shape
        batch, width = q.shape
        if pool.dtype != torch.float32 or not pool.is_contiguous():
            raise ValueError("the native decode attention reads a contiguous float32 KV pool")
        q = q.float().contiguous()
        tables, lens = tables.to(torch.int64).contiguous(), lens.to(torch.int64).contiguous()
        out = torch.empty(batch, width, dtype=torch.float32)
        call = (
            cast("float *", q.data_ptr()),
            batch,
            width // head_dim,
            n_kv_heads,
            head_dim,
            cast("float *", pool.data_ptr()),
            num_blocks,
            block_size,
            cast("int64_t *", tables.data_ptr()),
            tables.shape[1],
            cast("int64_t *", lens.data_ptr()),
            1.0 / math.sqrt(head_dim),
            cast("float *", out.data_ptr()),
            torch.get_num_threads(),
            simd,
        )
        status = call_as_op(OP_NAME, run, call)
        if status != 0:
            raise ValueError(
                f"the native decode attention refused {batch} rows against a pool of {num_blocks} blocks "
                f"(a length past its table, or a block id outside the pool)"
            )
        return out

    return decode_attention
