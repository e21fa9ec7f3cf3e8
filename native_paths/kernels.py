"""The native kernels a model runs for a dtype: q4_1's block-quantized linears and the decode attention."""

from __future__ import annotations

from ..engine.types import ModelKernels


def model_kernels(dtype: str) -> ModelKernels | None:
    """The C kernels `dtype` runs on (NativeUnavailableError when they are not built); None for the dtypes
    that run on torch alone. q4_1 exists to decode fast on the CPU, so it also takes the C decode attention,
    and its all-decode steps run every layer in one C call."""
    if dtype != "q4_1":
        return None
    from . import block_linear, decode_attention, decode_layers

    return ModelKernels(
        block_linear=block_linear.kernel(),
        decode_attention=decode_attention.kernel(),
        decode_layers=decode_layers.kernel(),
    )
