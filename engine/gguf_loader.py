"""Reads a Llama GGUF file (metadata, dequantized weights) into a ModelConfig and LlamaWeights."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch

from ..errors import GGUFFormatError, ModelNotFoundError, UnsupportedModelError
from .llama import LayerWeights, LlamaWeights, resolve_dtype
from .types import ModelConfig

SUPPORTED_ARCHITECTURES = ("llama",)


def open_gguf(path: str | os.PathLike[str]) -> gguf.GGUFReader:
    """Open and index a GGUF file; every failure becomes a ModelNotFoundError or a GGUFFormatError."""
    file = Path(path)
    if not file.exists():
        raise ModelNotFoundError(f"model file {str(file)!r} does not exist: check the path")
    if not file.is_file():
        raise ModelNotFoundError(f"model path {str(file)!r} is not a file: give the path of a .gguf file")
    try:
        size = file.stat().st_size
        reader = gguf.GGUFReader(file)
    except OSError as exc:
        raise ModelNotFoundError(f"cannot read model file {str(file)!r}: {exc}") from exc
    except Exception as exc:  # gguf reports corruption as ValueError, IndexError, KeyError...
        raise GGUFFormatError(
            f"{str(file)!r} is not a readable GGUF file ({type(exc).__name__}: {exc}); "
            "re-download it or point to a valid .gguf file"
        ) from exc
    for tensor in reader.tensors:
        # The reader slices a memory map, so a truncated file yields short tensors rather than an error.
        if tensor.data_offset + tensor.n_bytes > size or tensor.data.nbytes != tensor.n_bytes:
            raise GGUFFormatError(
                f"{str(file)!r} is truncated: tensor {tensor.name!r} ends past the end of the file "
                f"({size} bytes); re-download the file"
            )
    return reader


def field_value(reader: gguf.GGUFReader, key: str, default: Any = None) -> Any:
    """A metadata value as a Python scalar, string or list; `default` when the key is absent."""
    field = reader.fields.get(key)
    if field is None:
        return default
    try:
        return field.contents()
    except Exception as exc:
        raise GGUFFormatError(f"GGUF metadata {key!r} is corrupt ({exc}); re-download the file") from exc


def read_config(reader: gguf.GGUFReader, name: str | None = None) -> ModelConfig:
    """The llama.* metadata as a ModelConfig; other architectures raise UnsupportedModelError."""
    arch = field_value(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise UnsupportedModelError(
            f"GGUF architecture {arch!r} is not supported: this engine runs {', '.join(SUPPORTED_ARCHITECTURES)}"
        )

    def required(key: str) -> Any:
        value = field_value(reader, f"{arch}.{key}")
        if value is None:
            raise GGUFFormatError(f"GGUF metadata {arch}.{key} is missing; the file is not a complete model")
        return value

    scaling = field_value(reader, f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", None) or any(t.name == "rope_freqs.weight" for t in reader.tensors):
        raise UnsupportedModelError(
            f"rope scaling ({scaling!r} / rope_freqs) is not supported by this engine"
        )
    tensors = _tensor_by_name(reader)
    try:
        n_heads = int(required("attention.head_count"))
        vocab = field_value(reader, f"{arch}.vocab_size")
        if vocab is None:  # older converters leave it out: the embedding's rows say it
            embedding = tensors.get("token_embd.weight")
            vocab = int(embedding.shape[1]) if embedding is not None else 0
        config = ModelConfig(
            name=name or str(field_value(reader, "general.name", arch)),
            vocab_size=int(vocab),
            dim=int(required("embedding_length")),
            n_layers=int(required("block_count")),
            n_heads=n_heads,
            n_kv_heads=int(field_value(reader, f"{arch}.attention.head_count_kv", n_heads)),
            hidden_dim=int(required("feed_forward_length")),
            context_length=int(required("context_length")),
            rope_theta=float(field_value(reader, f"{arch}.rope.freq_base", 10000.0)),
            norm_eps=float(field_value(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
            tie_embeddings="output.weight" not in tensors,
        )
    except (TypeError, ValueError) as exc:
        raise GGUFFormatError(f"GGUF {arch}.* metadata has a value of the wrong type ({exc})") from exc
    sizes = (
        config.vocab_size,
        config.dim,
        config.n_layers,
        config.n_heads,
        config.n_kv_heads,
        config.hidden_dim,
    )
    if min(sizes) < 1 or config.context_length < 1:
        raise GGUFFormatError(f"GGUF {arch}.* metadata gives impossible sizes: {config}")
    return config


def load_weights(reader: gguf.GGUFReader, config: ModelConfig, dtype: str = "float32") -> LlamaWeights:
    """Dequantize every tensor and fuse QKV and gate/up, keeping llama.cpp's Q/K row order.

    llama.cpp permutes Q and K rows so that rope rotates adjacent pairs; the model applies that
    interleaved-pair rope, so the rows are used as stored (no un-permutation needed).
    """
    torch_dtype = resolve_dtype(dtype)
    tensors = _tensor_by_name(reader)
    hd = config.head_dim

    def values(name: str, shape: tuple[int, ...]) -> np.ndarray:
        tensor = tensors.get(name)
        if tensor is None:
            raise GGUFFormatError(f"GGUF tensor {name!r} is missing; the file is not a complete Llama model")
        try:
            # A plain ndarray view: numpy's memmap subclass adds a Python hook to each of the
            # ~10^5 intermediate arrays that dequantize creates.
            array = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
        except NotImplementedError as exc:
            raise UnsupportedModelError(
                f"tensor {name!r} has type {tensor.tensor_type.name}, which cannot be dequantized here; "
                "use a GGUF with a common type (F32, F16, Q8_0, Q4_0, Q4_1, Q4_K...)"
            ) from exc
        except Exception as exc:
            raise GGUFFormatError(f"GGUF tensor {name!r} is corrupt ({exc}); re-download the file") from exc
        if array.size != math.prod(shape):
            raise GGUFFormatError(
                f"GGUF tensor {name!r} has {array.size} values, expected shape {shape} from the metadata"
            )
        # One sum carries any NaN or inf through, at a fraction of an elementwise isfinite's cost.
        if not math.isfinite(float(array.sum(dtype=np.float32))):
            raise GGUFFormatError(f"GGUF tensor {name!r} holds NaN or infinite values; the file is corrupt")
        # F32 tensors come back as read-only views of the file map: torch needs owned, writable memory.
        return np.array(array, dtype=np.float32, copy=not array.flags.writeable).reshape(shape)

    def matrix(*parts: tuple[str, tuple[int, ...]]) -> torch.Tensor:
        # Load-time work stays in numpy: single-threaded, so it does not fight other processes for
        # the OpenMP pool the way torch's parallel copies do on a busy machine.
        arrays = [values(name, shape) for name, shape in parts]
        fused = torch.from_numpy(arrays[0] if len(arrays) == 1 else np.concatenate(arrays))
        return fused if torch_dtype == torch.float32 else fused.to(torch_dtype)

    def vector(name: str) -> torch.Tensor:
        return torch.from_numpy(values(name, (config.dim,)))  # norms stay float32 in every dtype

    d, h = config.dim, config.hidden_dim
    layers = []
    for i in range(config.n_layers):
        p = f"blk.{i}."
        layers.append(
            LayerWeights(
                attn_norm=vector(p + "attn_norm.weight"),
                qkv=matrix(
                    (p + "attn_q.weight", (config.n_heads * hd, d)),
                    (p + "attn_k.weight", (config.n_kv_heads * hd, d)),
                    (p + "attn_v.weight", (config.n_kv_heads * hd, d)),
                ),
                attn_out=matrix((p + "attn_output.weight", (d, config.n_heads * hd))),
                ffn_norm=vector(p + "ffn_norm.weight"),
                gate_up=matrix((p + "ffn_gate.weight", (h, d)), (p + "ffn_up.weight", (h, d))),
                down=matrix((p + "ffn_down.weight", (d, h))),
            )
        )
    return LlamaWeights(
        token_embedding=matrix(("token_embd.weight", (config.vocab_size, d))),
        layers=layers,
        output_norm=vector("output_norm.weight"),
        output=None if config.tie_embeddings else matrix(("output.weight", (config.vocab_size, d))),
    )


def _tensor_by_name(reader: gguf.GGUFReader) -> dict[str, Any]:
    return {tensor.name: tensor for tensor in reader.tensors}
