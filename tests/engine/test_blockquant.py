"""Block-quantized weights: packing round trips, the Python twin's sums against float32, and a q4_1 model
tracking float32's logits and greedy choices."""

from __future__ import annotations

import pytest
import torch

from infer_prof.engine.blockquant import (
    BlockLinear,
    block_linear_reference,
    dequantize,
    pack,
    quantize_activations,
)
from infer_prof.engine.llama import LlamaModel
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.quantize import Int8Embedding
from infer_prof.engine.types import ModelConfig
from infer_prof.errors import OptionError, UnsupportedModelError
from infer_prof.profiler.session.options import EngineOptions
from tests.engine.test_quantize import CONFIG, all_logits, relative_error


def on_q4_grid(out: int, width: int, seed: int) -> torch.Tensor:
    """A matrix whose every block of 32 is d * q + m with float16 d and m, as a GGUF's Q4_1 tensor is."""
    g = torch.Generator().manual_seed(seed)
    blocks = width // 32
    d = (torch.rand(out, blocks, 1, generator=g) * 0.1 + 0.01).half().float()
    m = (torch.randn(out, blocks, 1, generator=g) * 0.3).half().float()
    q = torch.randint(0, 16, (out, blocks, 32), generator=g)
    q[..., 0], q[..., 1] = 0, 15  # every block spans the whole range, as a quantizer's output does
    return (q * d + m).reshape(out, width)


def test_a_matrix_on_the_q4_grid_packs_back_to_the_same_numbers() -> None:
    weight = on_q4_grid(12, 96, seed=1)
    assert torch.equal(dequantize(pack(weight, 4), 4, 12, 96), weight)


def test_a_matrix_on_the_q8_grid_packs_back_to_the_same_numbers() -> None:
    g = torch.Generator().manual_seed(2)
    d = (torch.rand(8, 2, 1, generator=g) * 0.01 + 0.001).half().float()
    q = torch.randint(-127, 128, (8, 2, 32), generator=g)
    q[..., 0] = 127
    weight = (q * d).reshape(8, 64)
    assert torch.equal(dequantize(pack(weight, 8), 8, 8, 64), weight)


@pytest.mark.parametrize("bits, levels", [(4, 15), (8, 254)])
@pytest.mark.parametrize("out, width", [(7, 50), (4, 32), (1, 1), (13, 172)])
def test_any_shape_round_trips_within_half_a_step(bits: int, levels: int, out: int, width: int) -> None:
    """Rows past a group of four and columns past a block of 32 are padded, then dropped again."""
    weight = torch.randn(out, width, generator=torch.Generator().manual_seed(out * width))
    packed = pack(weight, bits)
    assert packed.dtype == torch.uint8 and packed.shape[:2] == (-(-out // 4), -(-width // 32))
    back = dequantize(packed, bits, out, width)
    assert back.shape == (out, width)
    # A block's step is its range over `levels`; float16 scales add a little on top of half of it.
    assert float((back - weight).abs().max()) <= 0.5 * float(weight.abs().max()) * 2 / levels * 1.05 + 1e-3


def test_activations_quantize_per_block_and_round_half_to_even() -> None:
    x = torch.zeros(1, 40)
    x[0, 0], x[0, 1], x[0, 2] = 127.0, 0.5, 1.5  # one block's scale is 1: halves go to the even neighbour
    x[0, 33] = -2.0  # the second, partial block: its own scale, padded with zeros
    qx, dx, scaled_sum = quantize_activations(x)
    assert qx.shape == (1, 2, 32)
    assert qx[0, 0, :3].tolist() == [127, 0, 2]
    assert qx[0, 1, :3].tolist() == [0, -127, 0] and int(qx[0, 1].abs().sum()) == 127
    assert dx[0].tolist() == pytest.approx([1.0, 2.0 / 127])
    assert scaled_sum[0].tolist() == pytest.approx([129.0, -2.0])


@pytest.mark.parametrize("bits", [4, 8])
def test_the_twin_matches_float_on_dequantized_weights(bits: int) -> None:
    """The only difference from a float matmul on the same weights is the activations' 8 bits."""
    g = torch.Generator().manual_seed(bits)
    weight, x = torch.randn(24, 100, generator=g), torch.randn(5, 100, generator=g)
    packed = pack(weight, bits)
    want = x @ dequantize(packed, bits, 24, 100).t()
    got = block_linear_reference(packed, bits, 24, 100, x)
    assert got.shape == (5, 24)
    assert relative_error(got, want) < 0.01


def test_zero_activations_give_zero_outputs() -> None:
    packed = pack(torch.randn(8, 64), 4)
    assert torch.equal(block_linear_reference(packed, 4, 8, 64, torch.zeros(2, 64)), torch.zeros(2, 8))


def test_a_q4_model_tracks_float32() -> None:
    weights = synthetic_weights(CONFIG, seed=3)
    reference, quantized = LlamaModel(CONFIG, weights), LlamaModel(CONFIG, weights, dtype="q4_1")
    assert quantized.weight_format == "q4_1" and quantized.dtype == torch.float32
    assert isinstance(quantized.layers[0].down, BlockLinear) and quantized.layers[0].down.bits == 4
    assert isinstance(quantized.head, BlockLinear) and quantized.head.bits == 8
    assert isinstance(quantized.embedding, Int8Embedding)
    ids = [
        int(t) for t in torch.randint(0, CONFIG.vocab_size, (60,), generator=torch.Generator().manual_seed(4))
    ]
    want, got = all_logits(reference, ids), all_logits(quantized, ids)
    # Random weights spread evenly over a block's range are 4 bits' worst case (a real model's are not).
    assert relative_error(got, want) < 0.2
    assert float((got.argmax(-1) == want.argmax(-1)).float().mean()) >= 0.8


def test_q4_is_refused_off_the_cpu_and_named_in_the_options() -> None:
    config = ModelConfig(
        "t", vocab_size=64, dim=32, n_layers=1, n_heads=2, n_kv_heads=1, hidden_dim=64, context_length=64
    )
    with pytest.raises(UnsupportedModelError, match="q4_1 runs on the CPU only"):
        LlamaModel(config, synthetic_weights(config), dtype="q4_1", device="meta")
    with pytest.raises(OptionError, match="q4_1"):
        EngineOptions(model="synthetic:tiny", dtype="int4")
