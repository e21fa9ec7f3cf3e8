"""Assemble an Engine from options: load the model, pick each component's twin (Python or C), inject the tracer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...engine.config import EngineConfig, pool_blocks_for
from ...engine.engine import Engine
from ...engine.trace import NULL_TRACER, Tracer
from ..rundir.schema import EngineSizes, OpenMP
from .options import EngineOptions

if TYPE_CHECKING:
    from ...engine.llama import LlamaModel
    from ...engine.loader import LoadedModel
    from ..checks.injections import Injections


@dataclass
class BuiltEngine:
    """An engine plus what was decided while building it (which native twins are really on)."""

    engine: Engine
    config: EngineConfig
    native_active: frozenset[str]
    warnings: list[str] = field(default_factory=list)
    # the components the engine was given (injections' wrappers included), by role: only looked through
    components: dict[str, object] = field(default_factory=dict)

    def engine_config_dict(self) -> EngineSizes:
        """result.json's `config.engine`: the engine's config with the pool size and context it resolved to."""
        config = self.config
        data: EngineSizes = {
            "block_size": config.block_size,
            "kv_blocks": self.engine.num_blocks,
            "kv_memory_bytes": config.kv_memory_bytes,
            "max_batch": config.max_batch,
            "max_batched_tokens": config.max_batched_tokens,
            "policy": config.policy,
            "seed": config.seed,
            "max_model_len": self.engine.max_model_len,
            "openmp": openmp_config(),
        }
        if getattr(self.engine.model, "weight_format", "") == "q4_1":
            from ...native_paths.block_linear import describe

            data["block_kernel"] = {**describe()}
        return data


def openmp_config() -> OpenMP:
    """How torch's OpenMP threads wait and how many there are, with who chose (engine.threads)."""
    import torch

    from ...engine.threads import wait_policy_decision

    return {**wait_policy_decision(), "threads": torch.get_num_threads()}


def load_for_options(
    options: EngineOptions, progress: Callable[[str], None] | None = None, *, checked: bool = False
) -> LoadedModel:
    """Load (or build, for synthetic:) the model the options name; torch threads are set first.

    Unless the caller already did (`checked`), the model's file and shape are checked first, and the
    weights and KV pool against this machine's memory (profiler.session.preflight), so that a bad model
    or an impossible size is refused before the slow load starts."""
    from ...engine.loader import load_model
    from ...engine.threads import pin_threads
    from ...native_paths.kernels import model_kernels
    from .preflight import check_engine

    if not checked:
        check_engine(options, engine_config(options))
    if options.threads:
        pin_threads(options.threads)
    return load_model(
        options.model,
        dtype=options.dtype,
        seed=options.seed,
        device=options.device,
        progress=progress,
        kernels=model_kernels(options.dtype),
    )


def _install_graphs(model: LlamaModel, options: EngineOptions, config: EngineConfig) -> None:
    """CUDA graphs on this build's model, or off: a cached model may have served a build with the other setting."""
    if not hasattr(model, "graphs"):
        return
    if options.graphs != "on":
        model.graphs = None
        return
    from ...engine.cuda_graphs import DecodeGraphs

    max_model_len = config.resolve_max_model_len(model.config.context_length)
    model.graphs = DecodeGraphs(
        model, max_batch=config.max_batch, max_blocks=-(-max_model_len // config.block_size)
    )


def engine_config(options: EngineOptions) -> EngineConfig:
    return options.engine_config()


def build_engine(
    loaded, options: EngineOptions, *, tracer: Tracer | None = None, injections: Injections | None = None
) -> BuiltEngine:
    """A fresh engine over an already loaded model; components per options.native, wrapped by any injections."""
    import warnings

    from ...native_paths.toggles import make_components

    config = engine_config(options)
    num_blocks = pool_blocks_for(config, loaded.model)
    _install_graphs(loaded.model, options, config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        components = make_components(
            options.native,
            num_blocks=num_blocks,
            block_size=config.block_size,
            max_batch=config.max_batch,
            max_batched_tokens=config.max_batched_tokens,
            policy=config.policy,
        )
    notes = [str(warning.message) for warning in caught]
    scheduler, kv_alloc, sampler = components.scheduler, components.kv_alloc, components.sampler
    if injections:
        from ..checks.injections import apply_injections

        scheduler, kv_alloc, sampler = apply_injections(injections, scheduler, kv_alloc, sampler, tracer)
    engine = Engine(
        loaded.model,
        loaded.tokenizer,
        scheduler=scheduler,
        kv_alloc=kv_alloc,
        sampler=sampler,
        config=config,
        prepare=components.prepare,
        tracer=tracer or NULL_TRACER,
    )
    return BuiltEngine(
        engine=engine,
        config=config,
        native_active=components.native,
        warnings=notes,
        components={
            "scheduler": scheduler,
            "kv_alloc": kv_alloc,
            "prepare": components.prepare,
            "sampler": sampler,
        },
    )
