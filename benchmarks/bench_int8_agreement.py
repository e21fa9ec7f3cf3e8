"""How closely --dtype int8 (or q4_1) tracks float32: top-1 agreement and logit error over greedy continuations.

Usage: python benchmarks/bench_int8_agreement.py [--model smollm2-135m] [--tokens 48] [--chat-prompts 8]
       [--dtype int8|q4_1] [--decode]

float32 greedily continues each prompt (the four of bench_model.py, which README's examples use, and the
first `--chat-prompts` of the `chat` scenario, chat-templated); then both models read prompt plus
continuation in one prefill, and at every continuation position the quantized model's top token is
compared with float32's (teacher forcing: one early disagreement does not shift the rest). `--decode`: the
quantized model reads the continuation one token a decode step instead, as generation runs it (q4_1's decode
steps run their layers in one C call, which its prefills do not). Also printed:
the relative L2 error of the logits, and whether float32's token is in the quantized model's top 5.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_model import PROMPTS, load

from infer_prof.engine.loader import LoadedModel
from infer_prof.engine.model_runner import build_model_input
from infer_prof.scenarios.requests import generate_requests, prompt_text_for
from infer_prof.scenarios.spec import load_scenario

BLOCK = 16


def logits_of(loaded: LoadedModel, ids: list[int]) -> torch.Tensor:
    """Logits at every position of `ids`, one prefill."""
    blocks = -(-len(ids) // BLOCK)
    loaded.model.allocate_kv_cache(blocks, BLOCK)
    inp = build_model_input([ids], [0], [True], np.arange(blocks, dtype=np.int32).reshape(1, -1), BLOCK)
    inp.sample_indices = torch.arange(len(ids))
    return loaded.model.forward(inp)


def decode_logits_of(loaded: LoadedModel, prompt_length: int, ids: list[int]) -> torch.Tensor:
    """Logits at positions prompt_length - 1 .. len(ids) - 2: a prefill of the prompt, then a decode step a token."""
    blocks = -(-len(ids) // BLOCK)
    loaded.model.allocate_kv_cache(blocks, BLOCK)
    table = np.arange(blocks, dtype=np.int32).reshape(1, -1)
    rows = [loaded.model.forward(build_model_input([ids[:prompt_length]], [0], [True], table, BLOCK))[-1]]
    for position in range(prompt_length, len(ids) - 1):
        step = build_model_input([[ids[position]]], [position], [True], table, BLOCK)
        rows.append(loaded.model.forward(step)[-1])
    return torch.stack(rows)


def greedy(loaded: LoadedModel, prompt: list[int], tokens: int) -> list[int]:
    """`prompt` and float32's greedy continuation of it (up to `tokens` tokens or a stop token)."""
    blocks = -(-(len(prompt) + tokens) // BLOCK)
    loaded.model.allocate_kv_cache(blocks, BLOCK)
    table = np.arange(blocks, dtype=np.int32).reshape(1, -1)
    logits = loaded.model.forward(build_model_input([prompt], [0], [True], table, BLOCK))
    ids = list(prompt)
    for _ in range(tokens):
        ids.append(int(logits[-1].argmax()))
        if ids[-1] in loaded.tokenizer.stop_token_ids or len(ids) == len(prompt) + tokens:
            break
        logits = loaded.model.forward(build_model_input([[ids[-1]]], [len(ids) - 1], [True], table, BLOCK))
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--chat-prompts", type=int, default=8)
    parser.add_argument("--dtype", default="int8", choices=["int8", "q4_1"])
    parser.add_argument("--decode", action="store_true", help="the quantized model reads in decode steps")
    args = parser.parse_args()
    reference, quantized = load(args.model, "float32"), load(args.model, args.dtype)
    engine = quantized.model.quantized_engine or "the C block kernel"
    print(f"model: {reference.source}; {args.dtype} linears on {engine}")
    chat = load_scenario("chat")
    requests = generate_requests(chat, reference.config.context_length)[: args.chat_prompts]
    prompts = [("readme", p) for p in PROMPTS] + [("chat", prompt_text_for(r)) for r in requests]
    totals: dict[str, list[int]] = {}
    for source, text in prompts:
        prompt = reference.tokenizer.encode_chat(text)
        ids = greedy(reference, prompt, args.tokens)
        rows = slice(len(prompt) - 1, len(ids) - 1)  # the positions that chose the continuation
        want = logits_of(reference, ids)[rows]
        got = (
            decode_logits_of(quantized, len(prompt), ids) if args.decode else logits_of(quantized, ids)[rows]
        )
        agree = int((want.argmax(-1) == got.argmax(-1)).sum())
        top5 = int((got.topk(5, -1).indices == want.argmax(-1, keepdim=True)).any(-1).sum())
        n = rows.stop - rows.start
        error = float((got - want).norm() / want.norm())
        for key in (source, "all"):
            counts = totals.setdefault(key, [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + agree, counts[1] + top5, counts[2] + n
        print(
            f"{source:6} {agree:3}/{n:3} top-1 agree, {top5:3}/{n:3} in top 5, logits rel. error {error:.3f}: "
            f"{text[:50]!r}"
        )
    for key, (agree, top5, n) in totals.items():
        print(
            f"{key:6} top-1 agreement {agree}/{n} = {agree / n:.1%}; "
            f"float32's token in {args.dtype}'s top 5: {top5 / n:.1%}"
        )


if __name__ == "__main__":
    main()
