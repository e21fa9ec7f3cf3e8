"""Runs a q4_1 model's layers for a whole decode step in one C call (csrc/decode_layers.c) on torch's threads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

    def bind(config: ModelConfig, layers: Sequence[PackedLayer]) -> DecodeLayers:
        return _bound_step(ffi, lib, simd, config, layers)

    return bind


def _bound_step(
    ffi: Any, lib: Any, simd: int, config: ModelConfig, layers: Sequence[PackedLayer]
) -> DecodeLayers:
    """The decode step of `layers`, checked and laid out once as the C table it runs."""
    pool_shape = _checked_pool_shape(config, layers)
    table = _layer_table(ffi, layers)
    shape = _decode_shape(ffi, config, pool_shape)
    kept = tuple(layers)  # the C table points into these tensors: they live as long as the binding
    run, cast = lib.np_decode_layers, ffi.cast
    n_layers, dim, half = len(layers), config.dim, config.head_dim // 2

    def decode_layers(
        x: torch.Tensor, rope: torch.Tensor, slots: torch.Tensor, tables: torch.Tensor, lens: torch.Tensor
    ) -> None:
        batch = x.shape[0]
        slots, tables, lens = _checked_step(x, rope, slots, tables, lens, dim=dim, half=half)
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
        _raise_on_status(lib, call_as_op(OP_NAME, run, call), batch, kept)

    return decode_layers


def _checked_pool_shape(config: ModelConfig, layers: Sequence[PackedLayer]) -> tuple[int, int]:
    """The (blocks, block size) of the KV pool every layer shares, once each layer is checked."""
    if not layers or len(layers) != config.n_layers:
        raise ValueError(f"the native decode step needs all {config.n_layers} layers, got {len(layers)}")
    pool_shape = layers[0].pool.shape[:2]
    for layer in layers:
        _check_layer(config, layer)
        if layer.pool.shape[:2] != pool_shape:
            raise ValueError("the native decode step needs every layer's KV pool of one shape")
    return pool_shape[0], pool_shape[1]


def _layer_table(ffi: Any, layers: Sequence[PackedLayer]) -> Any:
    """The np_decode_layer[] table of the layers' tensors, as csrc/decode_layers.c reads it."""
    table = ffi.new("np_decode_layer[]", len(layers))
    cast = ffi.cast
    for entry, layer in zip(table, layers):
        entry.attn_norm = cast("float *", layer.attn_norm.data_ptr())
        entry.ffn_norm = cast("float *", layer.ffn_norm.data_ptr())
        entry.qkv = cast("uint8_t *", layer.qkv.data_ptr())
        entry.attn_out = cast("uint8_t *", layer.attn_out.data_ptr())
        entry.gate_up = cast("uint8_t *", layer.gate_up.data_ptr())
        entry.down = cast("uint8_t *", layer.down.data_ptr())
        entry.pool = cast("float *", layer.pool.data_ptr())
    return table


def _decode_shape(ffi: Any, config: ModelConfig, pool_shape: tuple[int, int]) -> Any:
    """The model's and the KV pool's sizes as the C step's np_decode_shape."""
    return ffi.new(
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


def _checked_step(
    x: torch.Tensor,
    rope: torch.Tensor,
    slots: torch.Tensor,
    tables: torch.Tensor,
    lens: torch.Tensor,
    *,
    dim: int,
    half: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's inputs checked before any write: (slots, tables, lens) as the contiguous int64 the C step
    reads."""
    batch = x.shape[0]
    if x.dtype != torch.float32 or not x.is_contiguous() or tuple(x.shape) != (batch, dim):
        raise ValueError(f"the native decode step updates a contiguous float32 [rows, {dim}] in place")
    if rope.dtype != torch.float32 or not rope.is_contiguous() or rope.numel() != batch * half * 2:
        raise ValueError(f"the native decode step reads float32 (cos, sin) pairs [{batch}, {half}, 2]")
    slots, lens = slots.to(torch.int64).contiguous(), lens.to(torch.int64).contiguous()
    tables = tables.to(torch.int64).contiguous()
    if slots.numel() != batch or lens.numel() != batch or tables.dim() != 2 or tables.shape[0] != batch:
        raise ValueError(f"the native decode step needs {batch} slots, lengths and table rows")
    return slots, tables, lens


def _raise_on_status(lib: Any, status: int, batch: int, layers: tuple[PackedLayer, ...]) -> None:
    """np_decode_layers' status as the error it means (0: done)."""
    if status == lib.NP_ERR_NOMEM:
        raise MemoryError("the native decode step ran out of memory")
    if status != 0:
        raise ValueError(
            f"the native decode step refused {batch} rows against {layers[0].pool.shape[0]} KV blocks "
            "(a slot, length or block id outside the pool)"
        )
