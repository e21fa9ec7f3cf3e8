"""GGUF loading: metadata, dequantization of each tensor type, tied heads, and every bad-input error."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from infer_prof.engine.gguf_loader import load_weights, open_gguf, read_config
from infer_prof.errors import GGUFFormatError, ModelNotFoundError, UnsupportedModelError
from tests.engine.conftest import tiny_vocab, write_tiny_gguf

Q = gguf.GGMLQuantizationType


def load(path: Path):  # type: ignore[no-untyped-def]
    reader = open_gguf(path)
    config = read_config(reader)
    return config, load_weights(reader, config)


def test_config_comes_from_llama_metadata(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    config, _ = load(tiny_gguf(n_layers=3, dim=48, n_heads=6, n_kv_heads=2, hidden=80))
    assert (config.n_layers, config.dim, config.n_heads, config.n_kv_heads, config.hidden_dim) == (
        3,
        48,
        6,
        2,
        80,
    )
    assert config.vocab_size == len(tiny_vocab()[0])
    assert config.context_length == 256 and config.rope_theta == 10000.0
    assert config.norm_eps == pytest.approx(1e-5)
    assert config.head_dim == 8


@pytest.mark.parametrize(
    ("tensor_type", "tolerance"),
    [(Q.F32, 0.0), (Q.F16, 1e-3), (Q.Q8_0, 0.01), (Q.Q4_1, 0.1), (Q.Q4_0, 0.15)],
)
def test_each_tensor_type_dequantizes_to_the_written_values(tmp_path: Path, tensor_type, tolerance) -> None:  # type: ignore[no-untyped-def]
    written = write_tiny_gguf(tmp_path / "m.gguf", tensor_type=tensor_type)
    config, weights = load(tmp_path / "m.gguf")
    hd = config.head_dim
    q_rows = config.n_heads * hd
    layer = weights.layers[1]
    expected = {
        "blk.1.attn_q.weight": layer.qkv[:q_rows],
        "blk.1.attn_k.weight": layer.qkv[q_rows : q_rows + config.n_kv_heads * hd],
        "blk.1.attn_v.weight": layer.qkv[q_rows + config.n_kv_heads * hd :],
        "blk.1.ffn_gate.weight": layer.gate_up[: config.hidden_dim],
        "blk.1.ffn_up.weight": layer.gate_up[config.hidden_dim :],
        "blk.1.ffn_down.weight": layer.down,
        "blk.1.attn_output.weight": layer.attn_out,
        "token_embd.weight": weights.token_embedding,
        "blk.1.ffn_norm.weight": layer.ffn_norm,
    }
    for name, loaded in expected.items():
        assert loaded.dtype == torch.float32
        error = (loaded - torch.from_numpy(written[name])).abs().max().item()
        assert error <= tolerance, name
    # F32 tensors come back from gguf as read-only views: the loader must hand out owned, writable memory.
    weights.layers[0].attn_norm.add_(0)


def test_tied_head_uses_the_embedding_and_an_output_tensor_is_kept(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    config, weights = load(tiny_gguf("tied.gguf"))
    assert config.tie_embeddings and weights.output is None
    config, weights = load(tiny_gguf("untied.gguf", tied=False))
    assert not config.tie_embeddings
    assert weights.output is not None and weights.output.shape == weights.token_embedding.shape
    assert not torch.equal(weights.output, weights.token_embedding)


def test_bfloat16_option(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    reader = open_gguf(tiny_gguf())
    weights = load_weights(reader, read_config(reader), dtype="bfloat16")
    assert weights.layers[0].qkv.dtype == torch.bfloat16
    assert weights.layers[0].attn_norm.dtype == torch.float32  # norms stay float32


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        open_gguf(tmp_path / "absent.gguf")
    with pytest.raises(ModelNotFoundError, match="not a file"):
        open_gguf(tmp_path)


@pytest.mark.parametrize("content", [b"", b"GGUF", b"not a gguf file at all" * 100, bytes(range(256)) * 64])
def test_not_gguf_is_a_format_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(GGUFFormatError, match="bad.gguf"):
        open_gguf(path)


def test_random_bytes_after_a_valid_magic(tmp_path: Path) -> None:
    path = tmp_path / "noise.gguf"
    rng = np.random.default_rng(1)
    path.write_bytes(b"GGUF" + np.uint32(3).tobytes() + rng.bytes(4000))
    with pytest.raises(GGUFFormatError):
        open_gguf(path)


@pytest.mark.parametrize("keep", [0.02, 0.1, 0.5, 0.9, 0.999])
def test_truncated_file_is_a_format_error(tiny_gguf, keep: float) -> None:  # type: ignore[no-untyped-def]
    path = tiny_gguf()
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(GGUFFormatError):
        open_gguf(path)


@pytest.mark.slow
def test_truncated_real_model_is_a_format_error(smollm2_path: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with open(smollm2_path, "rb") as src:
        cut.write_bytes(src.read(smollm2_path.stat().st_size - 1000))
    with pytest.raises(GGUFFormatError, match="truncated"):
        open_gguf(cut)


def test_other_architecture_is_unsupported(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    reader = open_gguf(tiny_gguf(arch="gpt2"))
    with pytest.raises(UnsupportedModelError, match="gpt2"):
        read_config(reader)


def test_missing_tensor_is_a_format_error(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    reader = open_gguf(tiny_gguf(skip_tensors=("blk.1.ffn_up.weight",)))
    with pytest.raises(GGUFFormatError, match="blk.1.ffn_up.weight"):
        load_weights(reader, read_config(reader))


def test_nan_in_tensor_data_is_a_format_error(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    path = tiny_gguf()
    reader = open_gguf(path)
    target = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    raw = bytearray(path.read_bytes())
    raw[target.data_offset : target.data_offset + 4] = np.float32(np.nan).tobytes()
    path.write_bytes(bytes(raw))
    reader = open_gguf(path)
    with pytest.raises(GGUFFormatError, match="ffn_down"):
        load_weights(reader, read_config(reader))


def test_unknown_dtype_is_refused(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    reader = open_gguf(tiny_gguf())
    with pytest.raises(UnsupportedModelError, match="float16x"):
        load_weights(reader, read_config(reader), dtype="float16x")


@pytest.mark.slow
def test_smollm2_metadata(smollm2) -> None:  # type: ignore[no-untyped-def]
    c = smollm2.config
    assert (c.vocab_size, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.hidden_dim) == (
        49152,
        576,
        30,
        9,
        3,
        1536,
    )
    assert c.rope_theta == 100000.0 and c.tie_embeddings
