"""Block-quantized weights for the CPU decode path, in llama.cpp's numbers, packed four output rows at a time.

A weight row is cut into blocks of 32 (the last one padded with zeros). At 4 bits a block keeps a
float16 scale d and minimum m and a q in 0..15 per weight, w = d * q + m (llama.cpp's Q4_1); at 8 bits a
scale and a q in -127..127, w = d * q (Q8_0). A linear quantizes its activations per call to 8 bits per
block of 32 (scale dx, and dx * sum(qx)), so that a block's dot is
    dw * dx * sum(qw * qx) + mw * dx * sum(qx),
integer sums and two products. The C kernel (native_paths/csrc/block_linear.c) reads the packed bytes;
`block_linear_reference` here is its Python twin, the same sums in torch.

Packed layout, for each group of four output rows and each block: at 4 bits the four d (float16), the
four m (float16), then the four rows' 16 bytes of nibbles (weights 0-15 low, 16-31 high), 80 bytes; at
8 bits the four d, then the four rows' 32 signed bytes, 136 bytes. A group's weights are one read.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .types import BlockKernel

BLOCK = 32  # weights per block
GROUP = 4  # output rows packed together
BITS = (4, 8)


def _blocks(weight: torch.Tensor) -> torch.Tensor:
    """`weight` [out, in] zero-padded to whole groups and blocks, as float32 [rows, blocks, 32]."""
    out, width = weight.shape
    groups, blocks = -(-out // GROUP), -(-width // BLOCK)
    padded = torch.zeros(groups * GROUP, blocks * BLOCK, dtype=torch.float32)
    padded[:out, :width] = weight.float()
    return padded.view(groups * GROUP, blocks, BLOCK)


def _by_group(per_row: torch.Tensor) -> torch.Tensor:
    """[rows, blocks, ...] -> [groups, blocks, 4 * ...] bytes: each group's block of four rows together."""
    rows, blocks = per_row.shape[:2]
    grouped = per_row.view(rows // GROUP, GROUP, blocks, -1).transpose(1, 2).contiguous()
    return grouped.view(torch.uint8).view(rows // GROUP, blocks, -1)


def pack(weight: torch.Tensor, bits: int) -> torch.Tensor:
    """`weight` [out, in] as uint8 [groups, blocks, 80 or 136] (the layout in the module docstring).

    4 bits: each block's minimum is m and its range over 15 is d, q = the nearest level rounded half up,
    as llama.cpp's reference quantizer does. 8 bits: d = the block's largest |w| / 127, q = w / d
    rounded half to even. A matrix already on such a grid (a GGUF's Q4_1 or Q8_0 tensor) packs back
    to the same numbers."""
    cut = _blocks(weight)
    if bits == 4:
        low, high = cut.amin(-1), cut.amax(-1)
        d = (high - low) / 15
        inverse = torch.where(d > 0, 1 / d, torch.zeros_like(d))
        q = ((cut - low[..., None]) * inverse[..., None] + 0.5).floor().clamp(0, 15).to(torch.uint8)
        nibbles = q[..., : BLOCK // 2] | (q[..., BLOCK // 2 :] << 4)
        parts = [d.half().unsqueeze(-1), low.half().unsqueeze(-1), nibbles]
    elif bits == 8:
        largest = cut.abs().amax(-1)
        d = largest / 127
        inverse = torch.where(largest > 0, 127 / largest, torch.zeros_like(largest))
        q = torch.round(cut * inverse[..., None]).clamp(-127, 127).to(torch.int8)
        parts = [d.half().unsqueeze(-1), q]
    else:
        raise ValueError(f"block-quantized weights have {BITS} bits, not {bits}")
    return torch.cat([_by_group(part) for part in parts], dim=-1).contiguous()


def unpack(packed: torch.Tensor, bits: int, out: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q int32 [out, blocks, 32], d float32 [out, blocks], m float32 [out, blocks]) of a packed matrix."""
    groups, blocks, _ = packed.shape

    def by_row(start: int, width: int, dtype: torch.dtype) -> torch.Tensor:  # -> [out, blocks, n]
        field = packed[..., start : start + GROUP * width].contiguous().view(dtype)
        return field.view(groups, blocks, GROUP, -1).transpose(1, 2).reshape(groups * GROUP, blocks, -1)[:out]

    d = by_row(0, 2, torch.float16).float().squeeze(-1)
    if bits == 4:
        m = by_row(8, 2, torch.float16).float().squeeze(-1)
        nibbles = by_row(16, BLOCK // 2, torch.uint8)
        q = torch.cat([nibbles & 0x0F, nibbles >> 4], dim=-1).to(torch.int32)
    else:
        m = torch.zeros_like(d)
        q = by_row(8, BLOCK, torch.int8).to(torch.int32)
    return q, d, m


def dequantize(packed: torch.Tensor, bits: int, out: int, width: int) -> torch.Tensor:
    """The float32 [out, in] matrix a packed one stands for."""
    q, d, m = unpack(packed, bits, out)
    return (q.float() * d[..., None] + m[..., None]).reshape(out, -1)[:, :width]


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x float32 [rows, in] as (qx int32 [rows, blocks, 32], dx [rows, blocks], dx * sum(qx) [rows, blocks]):
    dx = the block's largest |x| / 127, qx = x * (127 / largest) rounded half to even."""
    cut = _blocks(x)[: x.shape[0]]
    largest = cut.abs().amax(-1)
    # A true division, as the C kernel's 127.0f / amax: torch computes `127.0 / tensor` as a reciprocal
    # times 127, which can differ in the last bit and so round a tie (x * inverse = n + 0.5) the other way.
    inverse = torch.where(largest > 0, torch.full_like(largest, 127.0) / largest, torch.zeros_like(largest))
    qx = torch.round(cut * inverse[..., None])
    dx = largest / 127.0
    return qx.to(torch.int32), dx, dx * qx.sum(-1)


def block_linear_reference(
    packed: torch.Tensor, bits: int, out: int, width: int, x: torch.Tensor
) -> torch.Tensor:
    """The Python twin of native_paths' np_block_linear: y [rows, out] from the same integer block sums."""
    q, dw, mw = unpack(packed, bits, out)
    qx, dx, sx = quantize_activations(x)
    # float64 holds these integer sums (at most 32 * 127 * 127 per block) exactly.
    sums = torch.einsum("obj,rbj->rob", q.double(), qx.double()).float()
    return (dw[None] * dx[:, None, :] * sums + mw[None] * sx[:, None, :]).sum(-1)


@dataclass(slots=True, eq=False)
class BlockLinear:
    """A [out, in] weight in 4 or 8 bits; called with float activations [rows, in], gives [rows, out]."""

    packed: torch.Tensor  # uint8 [groups, blocks, bytes per group and block]
    bits: int
    shape: torch.Size  # [out, in], as the float weight's, for callers that size inputs from it
    kernel: BlockKernel

    @classmethod
    def from_float(cls, weight: torch.Tensor, bits: int, kernel: BlockKernel | None = None) -> BlockLinear:
        """`kernel` None: the Python twin (exact but slow; the engine passes native_paths' C kernel)."""
        return cls(pack(weight, bits), bits, weight.shape, kernel or block_linear_reference)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel(self.packed, self.bits, self.shape[0], self.shape[1], x)
