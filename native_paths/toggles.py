"""Parses `--native` and builds the engine's sampler, kv_alloc, scheduler and prepare, native where asked and possible."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infer_prof.errors import InvalidNativeSelection
from infer_prof.native_paths import loader

if TYPE_CHECKING:  # engine.types imports torch, which --help and the quick commands must not load
    from infer_prof.engine.types import KVAllocator, Prepare, Sampler, Scheduler

COMPONENTS = ("sampler", "kv_alloc", "scheduler", "prepare")
CORE = "core"  # scheduler + kv_alloc + prepare fused into one C call per step
FUSED = frozenset({"scheduler", "kv_alloc", "prepare"})
# Older spellings still accepted on the command line and in budget files.
ALIASES = {"kv": "kv_alloc"}
ALLOWED = ("none", "all", *COMPONENTS, CORE)


class NativeFallbackWarning(RuntimeWarning):
    """A native component was asked for but the extension is missing: the Python twin runs instead."""


def parse_native(value: str | Iterable[str] | None) -> frozenset[str]:
    """`"none"`, `"all"` (every twin, separately), `"core"` (optionally with sampler) or a comma list of
    sampler,kv_alloc,scheduler,prepare (kv is kv_alloc) -> the set of names to run natively."""
    if value is None:
        return frozenset()
    parts = value.split(",") if isinstance(value, str) else list(value)
    names = [str(part).strip().lower() for part in parts]
    names = [ALIASES.get(name, name) for name in names if name]
    hint = f"use one of {', '.join(ALLOWED)}, or a comma list of {','.join(COMPONENTS)} (or core,sampler)"
    if not names:
        raise InvalidNativeSelection(f"--native {value!r} is empty: {hint}")
    unknown = [name for name in names if name not in ALLOWED]
    if unknown:
        raise InvalidNativeSelection(f"--native {value!r}: unknown component {unknown[0]!r}; {hint}")
    if ("none" in names or "all" in names) and len(set(names)) > 1:
        raise InvalidNativeSelection(f"--native {value!r}: 'none' and 'all' stand alone; {hint}")
    if CORE in names and set(names) & FUSED:
        raise InvalidNativeSelection(
            f"--native {value!r}: 'core' already fuses scheduler, kv_alloc and prepare; add sampler at most"
        )
    if set(names) == {"none"}:
        return frozenset()
    if "all" in names:
        return frozenset(COMPONENTS)
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class Components:
    """The four components for one engine, and which of them really run natively."""

    sampler: Sampler
    kv_alloc: KVAllocator
    scheduler: Scheduler
    prepare: Prepare
    native: frozenset[str]  # names whose C twin is in use ("core" for the fused three)
    fallbacks: tuple[str, ...] = ()  # names asked for natively that fell back to Python


def make_components(
    native: str | Iterable[str] | None,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = "fcfs",
) -> Components:
    """Instances for `native` (parsed like --native); a component whose C twin is unavailable falls
    back to its Python twin with a NativeFallbackWarning saying why and how to build the extension."""
    wanted = native if isinstance(native, frozenset) else parse_native(native)
    if CORE in wanted:
        wanted -= FUSED  # the core is those three
    status = loader.available() if wanted else {}
    usable = frozenset(name for name in wanted if status.get(name) is True)
    fallbacks = tuple(sorted(wanted - usable))
    if fallbacks:
        warnings.warn(
            f"native {', '.join(fallbacks)} requested but not available ({status.get('reason') or 'not built'}); "
            "running the Python twin instead",
            NativeFallbackWarning,
            stacklevel=2,
        )
    sizes = {
        "num_blocks": num_blocks,
        "block_size": block_size,
        "max_batch": max_batch,
        "max_batched_tokens": max_batched_tokens,
        "policy": policy,
    }
    if CORE in usable:
        from infer_prof.native_paths.core import core_components

        scheduler, kv_alloc, prepare = core_components(
            num_blocks, block_size, max_batch, max_batched_tokens, policy
        )
        return Components(
            sampler=make_twin("sampler", "sampler" in usable, **sizes),
            kv_alloc=kv_alloc,
            scheduler=scheduler,
            prepare=prepare,
            native=usable,
            fallbacks=fallbacks,
        )
    return Components(
        **{name: make_twin(name, name in usable, **sizes) for name in COMPONENTS},
        native=usable,
        fallbacks=fallbacks,
    )


def make_twin(
    name: str,
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = "fcfs",
) -> Any:
    """One component's C twin when `native` (the caller checked it loads), else its Python twin, sized for
    the pool. The Python twins are imported here, not at module level: native_paths otherwise needs only
    engine's types, and this is the one place that chooses between the two implementations."""
    if name == "sampler":
        if native:
            from infer_prof.native_paths.sampler import NativeSampler as sampler_class
        else:
            from infer_prof.engine.sampler import PythonSampler as sampler_class  # type: ignore[assignment]
        return sampler_class()
    if name == "kv_alloc":
        if native:
            from infer_prof.native_paths.kv_alloc import NativeKVAllocator as kv_alloc_class
        else:
            from infer_prof.engine.kv_alloc import PythonKVAllocator as kv_alloc_class  # type: ignore[assignment]
        return kv_alloc_class(num_blocks, block_size)
    if name == "scheduler":
        if native:
            from infer_prof.native_paths.scheduler import NativeScheduler as scheduler_class
        else:
            from infer_prof.engine.scheduler import PythonScheduler as scheduler_class  # type: ignore[assignment]
        return scheduler_class(block_size, max_batch, max_batched_tokens, policy)
    if name == "prepare":
        if native:
            from infer_prof.native_paths.prepare import NativePrepare as prepare_class
        else:
            from infer_prof.engine.prepare import PythonPrepare as prepare_class  # type: ignore[assignment]
        return prepare_class(block_size)
    raise ValueError(f"no twin named {name!r}; the twins are {', '.join(COMPONENTS)}")


def every_combination() -> tuple[frozenset[str], ...]:
    """Every native selection but none: each subset of the four twins, then core, then core with sampler."""
    subsets = [
        frozenset(name for bit, name in enumerate(COMPONENTS) if mask >> bit & 1)
        for mask in range(1, 1 << len(COMPONENTS))
    ]
    return (*subsets, frozenset({CORE}), frozenset({CORE, "sampler"}))
