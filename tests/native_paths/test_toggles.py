"""--native parsing, the loader's report, and building components with a fallback to Python."""

from __future__ import annotations

import warnings

import pytest

from infer_prof.engine.kv_alloc import PythonKVAllocator
from infer_prof.engine.prepare import PythonPrepare
from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.scheduler import PythonScheduler
from infer_prof.errors import InferProfError
from infer_prof.native_paths import loader, toggles
from tests.native_paths.support import requires_native

SIZES = {"num_blocks": 16, "block_size": 4, "max_batch": 4, "max_batched_tokens": 32}


@pytest.mark.parametrize(
    "value, expected",
    [
        ("none", set()),
        ("all", {"sampler", "kv_alloc", "scheduler", "prepare"}),
        ("core", {"core"}),
        ("sampler, core", {"core", "sampler"}),
        ("prepare", {"prepare"}),
        ("sampler", {"sampler"}),
        (" Sampler , kv ", {"sampler", "kv_alloc"}),  # kv: the old spelling of kv_alloc
        ("kv,kv_alloc", {"kv_alloc"}),
        (["scheduler", "kv_alloc"], {"scheduler", "kv_alloc"}),
        (None, set()),
    ],
)
def test_parse_native(value: object, expected: set[str]) -> None:
    assert toggles.parse_native(value) == frozenset(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["", "gpu", "sampler,allocator", "none,kv", "all,sampler", ","])
def test_parse_native_names_the_allowed_values(value: str) -> None:
    with pytest.raises(
        toggles.InvalidNativeSelection, match="none, all, sampler, kv_alloc, scheduler, prepare, core"
    ) as caught:
        toggles.parse_native(value)
    assert isinstance(caught.value, InferProfError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("value", ["core,scheduler", "core,kv", "prepare,core", "all,core"])
def test_core_takes_only_the_sampler_beside_it(value: str) -> None:
    with pytest.raises(toggles.InvalidNativeSelection, match="core|stand alone"):
        toggles.parse_native(value)


def test_every_combination_is_each_subset_then_the_core() -> None:
    combinations = toggles.every_combination()
    assert len(combinations) == len(set(combinations)) == 2 ** len(toggles.COMPONENTS) - 1 + 2
    assert frozenset(toggles.COMPONENTS) in combinations and frozenset() not in combinations
    assert combinations[-2:] == (frozenset({"core"}), frozenset({"core", "sampler"}))


def test_available_reports_every_component() -> None:
    status = loader.available()
    assert {"built", "path", "reason", "sampler", "kv_alloc", "scheduler", "prepare", "core"} <= set(status)
    assert status["built"] or status["reason"]


def test_missing_extension_falls_back_to_python_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = {
        "built": False,
        "path": "",
        "reason": "no compiler here",
        "sampler": False,
        "kv_alloc": False,
        "scheduler": False,
        "prepare": False,
        "core": False,
    }
    monkeypatch.setattr(loader, "available", lambda: missing)
    with pytest.warns(toggles.NativeFallbackWarning, match="no compiler here"):
        parts = toggles.make_components("all", **SIZES)
    assert isinstance(parts.sampler, PythonSampler) and isinstance(parts.kv_alloc, PythonKVAllocator)
    assert isinstance(parts.scheduler, PythonScheduler)
    assert isinstance(parts.prepare, PythonPrepare)
    assert parts.native == frozenset() and parts.fallbacks == ("kv_alloc", "prepare", "sampler", "scheduler")
    with pytest.warns(toggles.NativeFallbackWarning, match="native core"):
        parts = toggles.make_components("core", **SIZES)
    assert isinstance(parts.scheduler, PythonScheduler) and isinstance(parts.prepare, PythonPrepare)


def test_python_everywhere_needs_no_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "available", lambda: pytest.fail("must not be asked"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parts = toggles.make_components("none", **SIZES)
    assert isinstance(parts.sampler, PythonSampler) and parts.native == frozenset()


@requires_native
def test_native_components_when_built() -> None:
    from infer_prof.native_paths.kv_alloc import NativeKVAllocator
    from infer_prof.native_paths.sampler import NativeSampler
    from infer_prof.native_paths.scheduler import NativeScheduler

    parts = toggles.make_components("sampler,scheduler", policy="priority", **SIZES)
    assert isinstance(parts.sampler, NativeSampler) and isinstance(parts.scheduler, NativeScheduler)
    assert isinstance(parts.kv_alloc, PythonKVAllocator) and not isinstance(parts.kv_alloc, NativeKVAllocator)
    assert parts.native == {"sampler", "scheduler"} and parts.scheduler.policy == "priority"
    assert isinstance(parts.prepare, PythonPrepare)


@requires_native
def test_the_core_is_three_faces_of_one_native_object() -> None:
    from infer_prof.native_paths.core import CoreKVAllocator, CorePrepare, CoreScheduler
    from infer_prof.native_paths.sampler import NativeSampler

    parts = toggles.make_components("core,sampler", **SIZES)
    assert isinstance(parts.scheduler, CoreScheduler) and isinstance(parts.kv_alloc, CoreKVAllocator)
    assert isinstance(parts.prepare, CorePrepare) and isinstance(parts.sampler, NativeSampler)
    assert parts.scheduler._core is parts.kv_alloc._core is parts.prepare._core
    assert parts.native == {"core", "sampler"}
    # One counted foreign call per step: the allocator and preparation faces make none.
    assert hasattr(parts.scheduler, "calls") and not hasattr(parts.kv_alloc, "calls")
    assert not hasattr(parts.prepare, "calls")


def test_a_missing_library_path_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(loader.LIBRARY_PATH_VARIABLE, "/nonexistent/_native.so")
    monkeypatch.setattr(loader, "_module", None)
    monkeypatch.setattr(loader, "_failure", None)
    status = loader.available()
    assert status["built"] is False and "/nonexistent/_native.so" in str(status["reason"])
    with pytest.raises(loader.NativeUnavailableError, match="build it with"):
        loader.require()
