"""Parses `--native` and builds the engine's sampler, kv_alloc, scheduler and prepare, native where asked and possible."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

from ..errors import InvalidNativeSelection
from . import loader

if TYPE_CHECKING:  # engine.types imports torch, which --help and the quick commands must not load
    from ..engine.types import KVAllocator, Prepare, Sampler, Scheduler

    Twin = Sampler | KVAllocator | Scheduler | Prepare  # what make_twin gives for a name known at run time

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
    if CORE in usable:
        from .core import core_components

        scheduler, kv_alloc, prepare = core_components(
            num_blocks, block_size, max_batch, max_batched_tokens, policy
        )
        return Components(
            sampler=make_sampler("sampler" in usable),
            kv_alloc=kv_alloc,
            scheduler=scheduler,
            prepare=prepare,
            native=usable,
            fallbacks=fallbacks,
        )
    return Components(
        sampler=make_sampler("sampler" in usable),
        kv_alloc=make_kv_alloc("kv_alloc" in usable, num_blocks, block_size),
        scheduler=make_scheduler("scheduler" in usable, block_size, max_batch, max_batched_tokens, policy),
        prepare=make_prepare("prepare" in usable, block_size),
        native=usable,
        fallbacks=fallbacks,
    )


# The twins are imported in the makers below, not at module level: native_paths otherwise needs only engine's
# types, and these are the one place that chooses between the two implementations.


def make_sampler(native: bool) -> Sampler:
    """The sampler's C twin when `native` (the caller checked it loads), else its Python twin."""
    if native:
        from .sampler import NativeSampler

        return NativeSampler()
    from ..engine.sampler import PythonSampler

    return PythonSampler()


def make_kv_alloc(native: bool, num_blocks: int, block_size: int) -> KVAllocator:
    """The KV allocator's C twin when `native`, else its Python twin, for a pool of `num_blocks` blocks."""
    if native:
        from .kv_alloc import NativeKVAllocator

        return NativeKVAllocator(num_blocks, block_size)
    from ..engine.kv_alloc import PythonKVAllocator

    return PythonKVAllocator(num_blocks, block_size)


def make_scheduler(
    native: bool, block_size: int, max_batch: int, max_batched_tokens: int, policy: str = "fcfs"
) -> Scheduler:
    """The scheduler's C twin when `native`, else its Python twin."""
    if native:
        from .scheduler import NativeScheduler

        return NativeScheduler(block_size, max_batch, max_batched_tokens, policy)
    from ..engine.scheduler import PythonScheduler

    return PythonScheduler(block_size, max_batch, max_batched_tokens, policy)


def make_prepare(native: bool, block_size: int) -> Prepare:
    """Input preparation's C twin when `native`, else its Python twin."""
    if native:
        from .prepare import NativePrepare

        return NativePrepare(block_size)
    from ..engine.prepare import PythonPrepare

    return PythonPrepare(block_size)


@overload
def make_twin(
    name: Literal["sampler"],
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = ...,
) -> Sampler: ...


@overload
def make_twin(
    name: Literal["kv_alloc"],
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = ...,
) -> KVAllocator: ...


@overload
def make_twin(
    name: Literal["scheduler"],
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = ...,
) -> Scheduler: ...


@overload
def make_twin(
    name: Literal["prepare"],
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = ...,
) -> Prepare: ...


@overload
def make_twin(
    name: str,
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = ...,
) -> Twin: ...


def make_twin(
    name: str,
    native: bool,
    *,
    num_blocks: int,
    block_size: int,
    max_batch: int,
    max_batched_tokens: int,
    policy: str = "fcfs",
) -> Twin:
    """One component's C twin when `native` (the caller checked it loads), else its Python twin, sized for
    the pool."""
    if name == "sampler":
        return make_sampler(native)
    if name == "kv_alloc":
        return make_kv_alloc(native, num_blocks, block_size)
    if name == "scheduler":
        return make_scheduler(native, block_size, max_batch, max_batched_tokens, policy)
    if name == "prepare":
        return make_prepare(native, block_size)
    raise ValueError(f"no twin named {name!r}; the twins are {', '.join(COMPONENTS)}")


def every_combination() -> tuple[frozenset[str], ...]:
    """Every native selection but none: each subset of the four twins, then core, then core with sampler."""
    subsets = [
        frozenset(name for bit, name in enumerate(COMPONENTS) if mask >> bit & 1)
        for mask in range(1, 1 << len(COMPONENTS))
    ]
    return (*subsets, frozenset({CORE}), frozenset({CORE, "sampler"}))
