"""`infer-prof generate`: serve a handful of prompts together and print text, or token ids and timings."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from ..profiler.session.options import EngineOptions, OptionError
from .app import app
from .options import dim_printer, engine_options

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from ..engine.types import SamplingParams


@app.command()
@engine_options()
def generate(
    prompts: Annotated[
        list[str], typer.Argument(help="One or more prompts; all are served together (continuous batching).")
    ],
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", "-n", help="Most tokens to generate per prompt.")
    ] = 64,
    temperature: Annotated[float, typer.Option("--temperature", "-t", help="0 = greedy.")] = 0.0,
    top_k: Annotated[int, typer.Option("--top-k", help="0 = off.")] = 0,
    top_p: Annotated[float, typer.Option("--top-p", help="1 = off.")] = 1.0,
    min_p: Annotated[float, typer.Option("--min-p", help="0 = off.")] = 0.0,
    repetition_penalty: Annotated[float, typer.Option("--repetition-penalty", help="1 = off.")] = 1.0,
    chat: Annotated[
        bool, typer.Option("--chat/--no-chat", help="Apply the model's chat template (default on).")
    ] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object per prompt, then one {"engine": ...} line.')
    ] = False,
    *,
    options: EngineOptions,
) -> None:
    """Generate text for PROMPTS (streams a single prompt to the terminal; --json for token ids and timings)."""
    from ..engine.types import SamplingParams

    params = SamplingParams(
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repetition_penalty=repetition_penalty,
        max_tokens=max_tokens,
        seed=options.seed,
    )
    check_prompts(prompts)
    raise typer.Exit(run_generate(options, prompts, params, chat=chat, as_json=as_json))


def check_prompts(prompts: Sequence[str]) -> None:
    """Every prompt is non-empty text that UTF-8 can carry (a terminal may pass bytes of another encoding)."""
    for number, prompt in enumerate(prompts, start=1):
        if not prompt:
            raise OptionError(f"PROMPT #{number} is empty: give some text")
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise OptionError(
                f"PROMPT #{number} is not UTF-8 text (a byte this terminal could not decode at position "
                f"{exc.start}); pass the prompt in UTF-8"
            ) from None


def check_fits_context(max_tokens: int, options: EngineOptions, option: str = "--max-tokens") -> None:
    """check_max_tokens before the model loads, from its shape (a model not on this machine yet is checked later)."""
    from ..engine.loader import describe_model
    from ..profiler.session.builder import engine_config

    described = describe_model(options.model)
    if described is not None:
        check_max_tokens(
            max_tokens,
            engine_config(options).resolve_max_model_len(described.context_length),
            options.model,
            option,
        )


def check_max_tokens(max_tokens: int, context: int, model: str, option: str = "--max-tokens") -> None:
    """-n beyond the model's context is a typo (-n 1000000000 would otherwise run until the context is full)."""
    if max_tokens >= context:
        raise OptionError(
            f"{option} {max_tokens:,} does not fit {model}'s context of {context:,} tokens (the "
            f"prompt included): use at most {context - 1:,}"
        )


def run_generate(
    options: EngineOptions, prompts: Sequence[str], params: SamplingParams, *, chat: bool, as_json: bool
) -> int:
    """Serve the prompts and print them; 0 when every request finished, 1 when any failed (each is named)."""
    from rich.console import Console

    from ..profiler.session.builder import build_engine, engine_config, load_for_options
    from ..profiler.session.preflight import check_prompts_fit

    err = Console(stderr=True)
    check_fits_context(params.max_tokens, options)
    check_prompts_fit(prompts, options, engine_config(options), chat=chat)  # before the model is built
    loaded = load_for_options(options, progress=dim_printer(err))
    built = build_engine(loaded, options)
    engine = built.engine
    check_max_tokens(
        params.max_tokens, engine.max_model_len, options.model
    )  # a model that was not on this machine
    stream_one = len(prompts) == 1 and not as_json
    with engine:
        handles = [
            engine.submit(prompt, params, chat=chat, on_token=_printer() if stream_one and i == 0 else None)
            for i, prompt in enumerate(prompts)
        ]
        outputs = [handle.result() for handle in handles]
    stats = engine.stats()
    if as_json:
        for output in outputs:
            print(json.dumps(_output_json(output)), flush=True)
        engine_line = {
            **stats,
            "blocks_free_at_end": stats["blocks_free"],
            "native": sorted(built.native_active),
        }
        print(json.dumps({"engine": engine_line}), flush=True)
        return 1 if any(output.finish_reason == "error" for output in outputs) else 0
    if stream_one:
        sys.stdout.write("\n")
    else:
        for output in outputs:
            print(f"--- {output.prompt!r}")
            print(output.text)
    failed = [output for output in outputs if output.finish_reason == "error"]
    for output in failed:
        err.print(f"[red]request {output.request_id} failed:[/red] {output.error}")
    return 1 if failed else 0


def _printer():
    def on_token(delta: str) -> None:
        sys.stdout.write(delta)
        sys.stdout.flush()

    return on_token


def _output_json(output) -> dict:
    ms = 1e-6
    first = output.first_token_ns
    ttft = (first - output.arrival_ns) * ms if first else None
    e2e = (output.finish_ns - output.arrival_ns) * ms if output.finish_ns else None
    n = len(output.token_ids)
    tpot = (e2e - ttft) / (n - 1) if (ttft is not None and e2e is not None and n > 1) else None
    return {
        "request_id": output.request_id,
        "prompt": output.prompt,
        "prompt_token_ids": list(output.prompt_token_ids),
        "token_ids": list(output.token_ids),
        "text": output.text,
        "finish_reason": output.finish_reason,
        "error": output.error,
        "num_preemptions": output.num_preemptions,
        "timings": {
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "e2e_ms": e2e,
            "output_tokens": n,
            "tokens_per_s": (n / (e2e / 1000)) if e2e else None,
        },
    }
