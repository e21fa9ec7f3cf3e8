"""int8 weights: the packed linear and embedding against float32, a quantized model tracking float32's
logits and greedy choices, and --dtype validation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from infer_prof.engine.llama import LlamaModel, resolve_dtype
from infer_prof.engine.loader import synthetic_weights
from infer_prof.engine.model_runner import build_model_input
from infer_prof.engine.quantize import (
    REDUCE_RANGE,
    Int8Embedding,
    Int8Linear,
    _has_vnni,
    preferred_engine,
    quantize_rows,
)
from infer_prof.engine.types import ModelConfig
from infer_prof.errors import OptionError, UnsupportedModelError
from infer_prof.profiler.session.options import EngineOptions

ROOT = Path(__file__).resolve().parents[2]
ENGINE = preferred_engine()
needs_int8 = pytest.mark.skipif(ENGINE is None, reason="this torch build has no quantized engine")
CONFIG = ModelConfig(
    "test", vocab_size=300, dim=64, n_layers=3, n_heads=8, n_kv_heads=2, hidden_dim=96, context_length=512
)


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm())


def test_rows_round_trip_within_half_a_step() -> None:
    weight = torch.randn(40, 32, generator=torch.Generator().manual_seed(0))
    weight[3] = 0  # an all-zero row must not divide by zero
    q, scales = quantize_rows(weight)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    error = (q.float() * scales[:, None] - weight).abs()
    assert bool((error <= scales[:, None] / 2 + 1e-6).all())


@needs_int8
def test_smoothing_rescues_an_outlier_channel() -> None:
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(48, 64, generator=generator) * 0.1
    x = torch.randn(8, 64, generator=generator)
    x[:, 5] *= 300  # one channel hundreds of times larger, as in a Llama's activations
    want = x @ weight.t()
    plain = relative_error(Int8Linear.from_float(weight, ENGINE)(x), want)
    smoothed = relative_error(Int8Linear.from_float(weight, ENGINE, act_max=x.abs().amax(0))(x), want)
    assert smoothed < 0.05
    assert smoothed < plain / 2


def test_embedding_rows_match_float() -> None:
    weight = torch.randn(100, 16, generator=torch.Generator().manual_seed(2))
    ids = torch.tensor([0, 7, 7, 99])
    got = Int8Embedding.from_float(weight)(ids)
    assert got.dtype == torch.float32 and got.shape == (4, 16)
    assert relative_error(got, weight[ids]) < 0.01


def all_logits(model: LlamaModel, ids: list[int]) -> torch.Tensor:
    blocks = -(-len(ids) // 16)
    model.allocate_kv_cache(blocks, 16)
    inp = build_model_input([ids], [0], [True], np.arange(blocks, dtype=np.int32).reshape(1, -1), 16)
    inp.sample_indices = torch.arange(len(ids))
    return model.forward(inp)


@needs_int8
def test_int8_model_tracks_float32() -> None:
    weights = synthetic_weights(CONFIG, seed=3)
    reference = LlamaModel(CONFIG, weights)
    quantized = LlamaModel(CONFIG, weights, dtype="int8", calibration_tokens=list(range(1, 200, 3)))
    assert quantized.weight_format == "int8" and quantized.quantized_engine == ENGINE
    assert isinstance(quantized.layers[0].down, Int8Linear) and isinstance(quantized.head, Int8Linear)
    ids = [
        int(t)
        for t in torch.randint(0, CONFIG.vocab_size, (120,), generator=torch.Generator().manual_seed(4))
    ]
    want, got = all_logits(reference, ids), all_logits(quantized, ids)
    assert relative_error(got, want) < 0.1
    assert float((got.argmax(-1) == want.argmax(-1)).float().mean()) >= 0.9


@needs_int8
def test_int8_decode_steps_match_a_prefill() -> None:
    """The paged decode path of the int8 model gives the logits its own prefill gives for the same token."""
    model = LlamaModel(CONFIG, synthetic_weights(CONFIG, seed=5), dtype="int8")
    ids = [5, 17, 42, 8, 99, 23]
    full = all_logits(model, ids)
    model.allocate_kv_cache(1, 16)
    table = np.zeros((1, 1), dtype=np.int32)
    model.forward(build_model_input([ids[:-1]], [0], [True], table, 16))
    step = model.forward(build_model_input([[ids[-1]]], [len(ids) - 1], [True], table, 16))
    # The activations' scale is per call (the prefill's six tokens against the decode step's one); 7-bit
    # activations (REDUCE_RANGE, a CPU without VNNI) take steps twice as coarse as 8-bit ones.
    assert relative_error(step[0], full[-1]) < (0.1 if REDUCE_RANGE else 0.05)


def test_activations_are_reduced_to_7_bits_without_vnni(tmp_path: Path) -> None:
    """fbgemm's kernels without AVX-512 VNNI saturate 16-bit sums of 8-bit activations: only VNNI gets 8 bits."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512_vnni amx_tile\n")
    assert _has_vnni(str(cpuinfo))
    cpuinfo.write_text("processor : 0\nflags : fpu sse avx2 avx_vnni\n")
    assert not _has_vnni(str(cpuinfo))
    assert not _has_vnni(str(tmp_path / "absent"))  # unknown: the safe side


def test_bad_dtypes_are_refused() -> None:
    with pytest.raises(UnsupportedModelError, match="float32, bfloat16, int8 or q4_1"):
        resolve_dtype("int4")
    with pytest.raises(OptionError, match="int8"):
        EngineOptions(model="synthetic:tiny", dtype="int4")
    assert EngineOptions(model="synthetic:tiny", dtype="int8").dtype == "int8"


def test_cli_refuses_a_bad_dtype_in_one_line() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "infer_prof.cli",
            "generate",
            "-m",
            "synthetic:tiny",
            "--dtype",
            "int4",
            "-n",
            "2",
            "hi",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--dtype='int4'" in done.stderr
