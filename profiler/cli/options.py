"""The engine options every engine-building command shares, as Typer parameters, and their parsing."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from profiler.session.options import EngineOptions

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="smollm2-135m (default, real weights), a PATH.gguf, or synthetic:<tiny|small|base|large>.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weights and activations: float32 or bfloat16.")]
NativeOpt = Annotated[str, typer.Option("--native", help="C twins to switch on: none, all, or a comma list of sampler,kv_alloc,scheduler.")]
KvBlocksOpt = Annotated[Optional[int], typer.Option("--kv-blocks", help="KV pool size in blocks (or use --kv-memory).")]
KvMemoryOpt = Annotated[Optional[str], typer.Option("--kv-memory", help="KV pool size as memory, e.g. 256MiB (default: sized for --max-batch full contexts, at most 256MiB).")]
BlockSizeOpt = Annotated[int, typer.Option("--block-size", help="Token slots per KV block.")]
MaxBatchOpt = Annotated[int, typer.Option("--max-batch", help="Most sequences running at once.")]
MaxTokensBudgetOpt = Annotated[int, typer.Option("--max-batched-tokens", help="Token budget per engine step (prefill chunks + decodes).")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="Scheduling policy: fcfs or priority.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for weights of synthetic models, sampling and load.")]
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="torch intra-op threads (default: torch's choice).")]


def engine_options(
    model: str, dtype: str, native: str, kv_blocks: int | None, kv_memory: str | None, block_size: int,
    max_batch: int, max_batched_tokens: int, policy: str, seed: int, threads: int | None,
) -> EngineOptions:  # fmt: skip
    """The shared options as one validated EngineOptions (OptionError names the flag at fault)."""
    from native_paths.toggles import parse_native
    from profiler.session.options import parse_size

    return EngineOptions(
        model=model, dtype=dtype, native=parse_native(native), kv_blocks=kv_blocks,
        kv_memory_bytes=parse_size(kv_memory) if kv_memory else None, block_size=block_size,
        max_batch=max_batch, max_batched_tokens=max_batched_tokens, policy=policy, seed=seed, threads=threads,
    )  # fmt: skip


def dim_printer(console):  # type: ignore[no-untyped-def]
    """A progress callback that prints each message dimmed on `console`."""
    return lambda message: console.print(f"[dim]{message}[/dim]")
