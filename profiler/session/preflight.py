"""Checks a run's options, model and scenario against each other and against this machine before anything slow starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...engine.config import EngineConfig
from ...engine.llama import kv_bytes_per_block
from ...engine.loader import describe_model, model_tokenizer, parameter_count
from ...engine.types import ModelConfig, SamplingParams
from ...errors import EngineConfigError, InvalidSamplingParams, ScenarioError
from ...scenarios.requests import generate_requests
from ...scenarios.sampling import SamplingDict
from ...scenarios.spec import ScenarioSpec
from .machine import device_memory_bytes, gib
from .options import EngineOptions, OptionError, in_flag_terms

# A chat template wraps the user's text in a few tokens the scenario's prompt_tokens do not count.
CHAT_TEMPLATE_TOKENS = 16
ITEMSIZE = {
    "float32": 4,
    "bfloat16": 2,
    "int8": 4,
    "q4_1": 4,
}  # int8 and q4_1: a float32 KV cache, and float32 weights until packed


@dataclass
class Preflight:
    """What the checks found: the model's shape (None when it is not on this machine yet) and notes to show."""

    model: ModelConfig | None
    pool_blocks: int | None = None
    notes: list[str] = field(default_factory=list)


def check_engine(options: EngineOptions, engine_config: EngineConfig) -> Preflight:
    """The model exists and reads, and its weights plus the KV pool the options ask for fit in memory."""
    model = describe_model(options.model)
    if model is None:
        return Preflight(None)
    itemsize = ITEMSIZE[options.dtype]
    per_block = kv_bytes_per_block(model, options.block_size, itemsize)
    try:
        max_model_len = engine_config.resolve_max_model_len(model.context_length)
        blocks = engine_config.resolve_num_blocks(per_block, max_model_len)
    except EngineConfigError as error:
        raise in_flag_terms(error) from None
    pool, weights = blocks * per_block, parameter_count(model) * itemsize
    available = device_memory_bytes(options.device)
    if available is not None and pool + weights > available:
        where = "this machine has available" if options.device == "cpu" else f"{options.device} has free"
        raise EngineConfigError(
            f"the KV pool ({blocks:,} blocks of {options.block_size} tokens, {gib(pool)}) and the weights ({gib(weights)}) "
            f"need more memory than {where} ({gib(available)}): lower --kv-blocks, --kv-memory or --block-size"
        )
    return Preflight(model, blocks)


def check_engine_tables() -> None:
    """The user's engine tables read and valid: the verdict reads them after the run, too late to refuse one."""
    from ..analysis.engine_tables import all_tables

    all_tables()


def check_prompts_fit(
    prompts: Sequence[str], options: EngineOptions, engine_config: EngineConfig, *, chat: bool
) -> None:
    """Every prompt leaves the model's context room for a generated token, counted with the model's tokenizer
    before the model is built (a model not on this machine yet is checked by the engine later). A byte-level
    tokenizer gives at most one token a byte, so a prompt shorter than the context in bytes is not tokenized."""
    model = describe_model(options.model)
    if model is None:
        return
    context = engine_config.resolve_max_model_len(model.context_length)
    margin = CHAT_TEMPLATE_TOKENS if chat else 0
    long = [
        (number, prompt)
        for number, prompt in enumerate(prompts, 1)
        if len(prompt.encode()) + margin >= context
    ]
    if not long:
        return
    tokenizer = model_tokenizer(options.model, model.vocab_size)
    for number, prompt in long:
        tokens = len(tokenizer.encode_chat(prompt) if chat else tokenizer.encode(prompt))
        if tokens >= context:
            raise OptionError(
                f"PROMPT #{number} has {tokens:,} tokens and {options.model}'s context holds {context:,}, which must "
                "leave room for at least one generated token: shorten the prompt"
            )


def check_scenario(spec: ScenarioSpec, preflight: Preflight, options: EngineOptions) -> None:
    """The scenario's sampling values are in the engine's domain, its lengths fit the model's context, and
    at least one of its requests fits the KV pool (a request that cannot is refused by the engine and
    recorded as such; when none can, nothing would run)."""
    for index, request_class in enumerate(spec.classes()):
        # The scenario file's values as written: SamplingParams is what checks them.
        values: SamplingDict = {**request_class.sampling.over(spec.sampling).to_dict(), "max_tokens": 1}
        try:
            SamplingParams(**values)
        except InvalidSamplingParams as error:
            where = f"sampling_mix[{index}]" if spec.sampling_mix else "sampling"
            raise ScenarioError(f"{spec.source}: {where}: {error}") from None
    if preflight.model is None or preflight.pool_blocks is None:
        return
    spec.validate_against_context(preflight.model.context_length)
    capacity = preflight.pool_blocks * options.block_size
    needs = [
        request.prompt_tokens + request.max_tokens + (CHAT_TEMPLATE_TOKENS if request.chat else 0)
        for request in generate_requests(spec, preflight.model.context_length)
    ]
    too_big = sum(need > capacity for need in needs)
    if too_big == len(needs):
        smallest = min(needs)
        raise EngineConfigError(
            f"the KV pool holds {capacity:,} tokens ({preflight.pool_blocks:,} blocks x {options.block_size}) and every "
            f"request of scenario {spec.name} needs more (the smallest about {smallest:,}): give --kv-blocks "
            f"{-(-smallest // options.block_size)} or more, or more --kv-memory"
        )
    if too_big:
        preflight.notes.append(
            f"{too_big} of {len(needs)} requests may not fit the KV pool ({capacity:,} tokens); the engine refuses "
            "those and the run records them as rejected"
        )
