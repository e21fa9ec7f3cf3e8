"""The engine options every engine-building command shares: declared once, added to a command by @engine_options."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from profiler.session.options import EngineOptions, OptionError

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="smollm2-135m (default, real weights), a PATH.gguf, or synthetic:<tiny|small|base|large>.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weights and activations: float32, bfloat16, int8 (8-bit weights, float32 activations; CPU only), or auto (bfloat16 on a GPU, float32 on the CPU).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="Where the model, its KV pool and activations live: auto (a CUDA GPU when there is one, else the CPU), cpu, cuda or cuda:N. The scheduler, KV allocator and input preparation run on the host either way.")]
NativeOpt = Annotated[str, typer.Option("--native", help="C twins to switch on: none, all (every twin, each its own call), a comma list of sampler,kv_alloc,scheduler,prepare, or core: scheduler, kv_alloc and prepare fused into one C call per step (core,sampler adds the C sampler).")]
KvBlocksOpt = Annotated[Optional[int], typer.Option("--kv-blocks", help="KV pool size in blocks (or use --kv-memory).")]
KvMemoryOpt = Annotated[Optional[str], typer.Option("--kv-memory", help="KV pool size as memory, e.g. 256MiB (default: sized for --max-batch full contexts, at most 256MiB).")]
BlockSizeOpt = Annotated[int, typer.Option("--block-size", help="Token slots per KV block.")]
MaxBatchOpt = Annotated[int, typer.Option("--max-batch", help="Most sequences running at once.")]
MaxTokensBudgetOpt = Annotated[int, typer.Option("--max-batched-tokens", help="Token budget per engine step (prefill chunks + decodes).")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="Scheduling policy: fcfs or priority.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for weights of synthetic models, sampling and load.")]
GraphsOpt = Annotated[str, typer.Option("--graphs", help="on: capture decode steps as CUDA graphs (padded batch buckets, one launch a step) and replay them; off: every step eager. Needs a GPU.")]
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="torch intra-op threads (default: torch's choice).")]

# name -> (Typer annotation, default): the order `--help` lists them in, after the command's own options.
ENGINE_PARAMETERS: dict[str, tuple[Any, Any]] = {
    "model": (ModelOpt, "smollm2-135m"),
    "dtype": (DtypeOpt, "auto"),
    "device": (DeviceOpt, "auto"),
    "native": (NativeOpt, "none"),
    "kv_blocks": (KvBlocksOpt, None),
    "kv_memory": (KvMemoryOpt, None),
    "block_size": (BlockSizeOpt, 16),
    "max_batch": (MaxBatchOpt, 32),
    "max_batched_tokens": (MaxTokensBudgetOpt, 512),
    "policy": (PolicyOpt, "fcfs"),
    "seed": (SeedOpt, 0),
    "threads": (ThreadsOpt, None),
    "graphs": (GraphsOpt, "off"),
}


def engine_options(*, without: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command that takes `options: EngineOptions`: its CLI signature gains the shared engine
    options (all but `without`, which keep their defaults) and it receives them parsed and validated as
    one EngineOptions (OptionError names the flag at fault)."""
    unknown = set(without) - set(ENGINE_PARAMETERS)
    if unknown:
        raise ValueError(f"not engine options: {sorted(unknown)}")
    shared = {name: spec for name, spec in ENGINE_PARAMETERS.items() if name not in without}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        # The command's own annotations, evaluated (modules use `from __future__ import annotations`); the
        # `options` parameter is the decorator's to fill, so its annotation is never looked at.
        hints = {name: eval(annotation, command.__globals__) if isinstance(annotation, str) else annotation  # noqa: S307
                 for name, annotation in inspect.get_annotations(command).items() if name not in ("options", "return")}  # fmt: skip
        own = [parameter.replace(annotation=hints[name]) for name, parameter in inspect.signature(command).parameters.items()
               if name != "options"]  # fmt: skip
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
                 for name, (annotation, default) in shared.items()]  # fmt: skip

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            chosen = {name: values.pop(name) for name in shared}
            return command(options=parse_engine_options(**chosen), **values)

        wrapper.__signature__ = inspect.Signature([*own, *added])  # type: ignore[attr-defined]
        del wrapper.__wrapped__  # typer must read the signature above, not the command's own
        wrapper.__annotations__ = {**hints, **{name: annotation for name, (annotation, _) in shared.items()}}
        return wrapper

    return decorate


def parse_engine_options(**values: Any) -> EngineOptions:
    """The shared options (defaults for any not given) as one validated EngineOptions."""
    from native_paths.toggles import parse_native
    from profiler.session.options import parse_size

    given = {name: values.get(name, default) for name, (_annotation, default) in ENGINE_PARAMETERS.items()}
    kv_memory = given.pop("kv_memory")
    return EngineOptions(
        **{**given, "native": parse_native(given["native"])},
        kv_memory_bytes=parse_size(kv_memory) if kv_memory is not None else None,
    )


def output_path(value: str | None, option: str) -> Path | None:
    """A path option given as text: an empty one is refused (a Path would silently read it as '.')."""
    if value is None:
        return None
    if not value.strip():
        raise OptionError(f"{option} is empty: give a path")
    return Path(value)


def dim_printer(console):  # type: ignore[no-untyped-def]
    """A progress callback that prints each message dimmed on `console`."""
    return lambda message: console.print(f"[dim]{message}[/dim]")
