"""Runs a q4_1 model's layers for a whole decode step in one C call (csrc/decode_layers.c) on torch's threads."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..engine.types import DecodeLayers, DecodeLayersKernel, ModelConfig, PackedLayer
from . import openmp
from .as_op import call_as_op
from .block_linear import BEST_VECTOR_LOOP
from .loader import require, require_symbols

OP_NAME = "infer_prof::decode_layers"
# engine.blockquant's packing, as csrc/block_linear.c reads it: rows in groups of 4, columns in blocks of 32,
# 80 bytes a group's 4-bit block.
GROUP, BLOCK, Q4_BYTES = 4, 32, 80


def _check_matrix(name: str, packed: torch.Tensor, out: int, width: int) -> None:
    want = (-(-out // GROUP), -(-width // BLOCK), Q4_BYTES)
    if packed.dtype != torch.uint8 or tuple(packed.shape) != want or not packed.is_contiguous():
        raise ValueError(
            f"the native decode step needs {name} as a contiguous 4-bit packed [{out}, {width}] matrix "
            f"(uint8 {list(want)}), got {packed.dtype} {list(packed.shape)}"
        )


def _check_layer(config: ModelConfig, layer: PackedLayer) -> None:
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    _check_matrix("qkv", layer.qkv, q + 2 * kv, c.dim)
    _check_matrix("attn_out", layer.attn_out, c.dim, q)
    _check_matrix("gate_up", layer.gate_up, 2 * c.hidden_dim, c.dim)
    _check_matrix("down", layer.down, c.dim, c.hidden_dim)
    for name, norm in (("attn_norm", layer.attn_norm), ("ffn_norm", layer.ffn_norm)):
        if norm.dtype != torch.float32 or tuple(norm.shape) != (c.dim,) or not norm.is_contiguous():
            raise ValueError(f"the native decode step needs {name} as contiguous float32 [{c.dim}]")
    pool = layer.pool
    if (
        pool.dtype != torch.float32
        or not pool.is_contiguous()
        or pool.dim() != 5
        or tuple(pool.shape[2:]) != (2, c.n_kv_heads, c.head_dim)
    ):
        raise ValueError(
            f"the native decode step needs each KV pool as contiguous float32 [blocks, block_size, 2, "
            f"{c.n_kv_heads}, {c.head_dim}]"
        )


def kernel(simd: int = BEST_VECTOR_LOOP) -> DecodeLayersKernel:
    """The binder of a q4_1 model's layers to np_decode_layers (`simd` as np_block_linear's, lower for tests);
    NativeUnavailableError when the extension is not built or predates it."""
    require_symbols("--dtype q4_1", "np_decode_layers")
    ffi, lib = require()
    openmp.bind()
    run, cast = lib.np_decode_layers, ffi.cast

    def bind(config: ModelConfig, layers: Sequence[PackedLayer]) -> DecodeLayers:
        if not layers or len(layers) != config.n_layers:
            raise ValueError(f"the native decode step needs all {config.n_layers} layers, got {len(layers)}")
        pool_shape = layers[0].pool.shape[:2]
        for layer in layers:
            _check_layer(config, layer)
            if layer.pool.shape[:2] != pool_shape:
                raise ValueError("the native decode step needs every layer's KV pool of one shape")
        table = ffi.new("np_decode_layer[]", len(layers))
        for entry, layer in zip(table, layers):
            entry.attn_norm = cast("float *", layer.attn_norm.data_ptr())
            entry.ffn_norm = cast("float *", layer.ffn_norm.data_ptr())
            entry.qkv = cast("uint8_t *", layer.qkv.data_ptr())
            entry.attn_out = cast("uint8_t *", layer.attn_out.data_ptr())
            entry.gate_up = cast("uint8_t *", layer.gate_up.data_ptr())
            entry.down = cast("uint8_t *", layer.down.data_ptr())
            entry.pool = cast("float *", layer.pool.data_ptr())
        shape = ffi.new(
            "np_decode_shape *",
            {
                "dim": config.dim,
                "n_heads": config.n_heads,
                "n_kv": config.n_kv_heads,
                "head_dim": config.head_dim,
                "hidden": config.hidden_dim,
                "num_blocks": pool_shape[0],
                "block_size": pool_shape[1],
                "eps": config.norm_eps,
            },
        )
        kept = tuple(layers)  # the C table points into these tensors: they live as long as the binding
        n_layers, dim, half = len(layers), config.dim, config.head_dim // 2

        def decode_layers(
            x: torch.Tensor, rope: torch.Tensor, slots: torch.Tensor, tables: torch.Tensor, lens: torch.Tensor
        ) -> None:
            batch = x.shape[0]
            if x.dtype != torch.float32 or not x.is_contiguous() or tuple(x.shape) != (batch, dim):
                raise ValueError(
                    f"the native decode step updates a contiguous float32 [rows, {dim}] in place"
                )
            if rope.dtype != torch.float32 or not rope.is_contiguous() or rope.numel() != batch * half * 2:
                raise ValueError(
                    f"the native decode step reads float32 (cos, sin) pairs [{batch}, {half}, 2]"
                )
            slots, lens = slots.to(torch.int64).contiguous(), lens.to(torch.int64).contiguous()
            tables = tables.to(torch.int64).contiguous()
            if (
                slots.numel() != batch
                or lens.numel() != batch
                or tables.dim() != 2
                or tables.shape[0] != batch
            ):
                raise ValueError(f"the native decode step needs {batch} slots, lengths and table rows")
            call = (
                table,
                n_layers,
                shape,
                cast("float *", x.data_ptr()),
                batch,
                cast("float *", rope.data_ptr()),
                cast("int64_t *", slots.data_ptr()),
                cast("int64_t *", tables.data_ptr()),
                tables.shape[1],
                cast("int64_t *", lens.data_ptr()),
                torch.get_num_threads(),
                simd,
            )
            status = call_as_op(OP_NAME, run, call)
            if status == lib.NP_ERR_NOMEM:
                raise MemoryError("the native decode step ran out of memory")
            if status != 0:
                raise ValueError(
                    f"the native decode step refused {batch} rows against {kept[0].pool.shape[0]} KV blocks "
                    "(a slot, length or block id outside the pool)"
                )

        return decode_layers

    return bind
