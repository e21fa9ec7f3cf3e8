"""Measures SmolLM2 load time, batch-1 decode latency and 16-sequence decode throughput in one run.

Usage: python benchmarks/bench_model.py [--model smollm2-135m] [--rounds 3] [--steps 32] [--threads 2]
       python benchmarks/bench_model.py --against-llama-cpp [--llama-python PATH] [--rounds 3]

Batch 1 and batch 16 are measured in alternating rounds so that noise from other processes on the
machine hits both alike; each round prints its own ratio, and the summary gives medians.

--against-llama-cpp loads the model in float32, int8 and q4_1 and, each round, times batch-1 and batch-16
decode of each and llama.cpp's batch-1 decode of the same GGUF (llama-cpp-python, `--threads` threads),
then prints per-round ratios and their median and min-max: int8 and q4_1 vs llama.cpp at batch 1
(ms/token), their batch-16 tokens/s vs llama.cpp's single stream, and float32 vs each at batch 1 and 16.
llama.cpp
runs in this interpreter when it imports llama_cpp, else under `--llama-python` (a Python that has
llama-cpp-python; it needs no torch); with neither, the llama.cpp rows say they were skipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.engine.loader import LoadedModel, load_model
from infer_prof.engine.model_runner import build_model_input

BLOCK_SIZE = 16
PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain recursion to a child.",
    "List three prime numbers.",
]


def decode_ms_per_step(
    loaded: LoadedModel,
    batch: int,
    steps: int,
    warmup: int = 3,
    warmup_s: float = 0.0,
    on_step: Callable[[], None] | None = None,
) -> float:
    """Prefill `batch` chat prompts, then time `steps` decode steps of the whole batch after a warm-up of
    `warmup` steps and at least `warmup_s` seconds; `on_step` runs before each step, untimed (the engine's
    thread governor, for one)."""
    model, tokenizer = loaded.model, loaded.tokenizer
    prompts = [tokenizer.encode_chat(PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    most_warmup = warmup + (64 if warmup_s else 0)  # the KV cache's room for a timed warm-up
    blocks_per_seq = -(-(max(map(len, prompts)) + steps + most_warmup + 1) // BLOCK_SIZE)
    model.allocate_kv_cache(batch * blocks_per_seq, BLOCK_SIZE)
    tables = np.arange(batch * blocks_per_seq, dtype=np.int32).reshape(batch, blocks_per_seq)
    logits = model.forward(build_model_input(prompts, [0] * batch, [True] * batch, tables, BLOCK_SIZE))
    positions = [len(p) for p in prompts]
    next_ids = logits.argmax(-1).tolist()
    times: list[float] = []
    warm_until = time.perf_counter() + warmup_s
    step = 0
    while len(times) < steps:
        if on_step is not None:
            on_step()
        start = time.perf_counter()
        inp = build_model_input([[t] for t in next_ids], positions, [True] * batch, tables, BLOCK_SIZE)
        next_ids = model.forward(inp).argmax(-1).tolist()
        elapsed = time.perf_counter() - start
        if step >= most_warmup or (step >= warmup and start >= warm_until):
            times.append(elapsed)
        step += 1
        positions = [p + 1 for p in positions]
    return statistics.median(times) * 1e3


# Runs in whichever Python has llama_cpp: batch-1 greedy decode of one chat prompt, median ms per token.
LLAMA_CPP_DECODE = """
import json, statistics, sys, time
import numpy as np
from llama_cpp import Llama
path, threads, steps, prompt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
llm = Llama(model_path=path, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
for token in tokens:  # one at a time: a native build crashed evaluating a batch of tokens on an AMX CPU
    llm.eval([token])
token, times = int(np.argmax(llm.scores[llm.n_tokens - 1])), []
for step in range(steps + 3):
    start = time.perf_counter()
    llm.eval([token])
    token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    if step >= 3:
        times.append(time.perf_counter() - start)
print(json.dumps({"ms_per_token": statistics.median(times) * 1e3, "version": __import__("llama_cpp").__version__}))
"""


def llama_cpp_python(requested: str | None) -> str | None:
    """The interpreter to run llama.cpp under: this one when it has llama_cpp, else `requested`."""
    try:
        import llama_cpp  # noqa: F401

        return sys.executable
    except ImportError:
        return requested


def llama_cpp_ms_per_token(
    python: str, gguf: Path, threads: int, steps: int, prompt: str
) -> tuple[float, str]:
    done = subprocess.run(
        [python, "-c", LLAMA_CPP_DECODE, str(gguf), str(threads), str(steps), prompt],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"llama.cpp under {python} failed:\n{done.stderr[-1500:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["ms_per_token"], out["version"]


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}x (min {min(values):.2f}, max {max(values):.2f})"


def load(model: str, dtype: str) -> LoadedModel:
    """The model in `dtype`, on the native kernels the engine gives that dtype (q4_1's)."""
    from infer_prof.native_paths.kernels import model_kernels

    return load_model(model, dtype=dtype, kernels=model_kernels(dtype))


def against_llama_cpp(args: argparse.Namespace) -> None:
    """float32, int8 and q4_1 of our engine and llama.cpp's batch-1 decode, interleaved per round."""
    from infer_prof.engine.loader import find_smollm2

    float_model, int8_model = load(args.model, "float32"), load(args.model, "int8")
    q4_model = load(args.model, "q4_1")
    print(
        f"model: {float_model.source}; int8 linears on torch's {int8_model.model.quantized_engine!r} engine"
    )
    python = llama_cpp_python(args.llama_python)
    gguf = find_smollm2(lambda message: None)[0] if args.model == "smollm2-135m" else Path(args.model)
    if python is None:
        print("llama.cpp: SKIPPED - llama_cpp does not import here and no --llama-python was given")
    elif not gguf.is_file():
        print(f"llama.cpp: SKIPPED - {args.model} is not a GGUF file llama.cpp can read")
        python = None
    prompt = float_model.tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPTS[1]}], add_generation_prompt=True
    )
    rows: dict[str, list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        figures = {
            "q4_1 b1": decode_ms_per_step(q4_model, 1, args.steps),
            "int8 b1": decode_ms_per_step(int8_model, 1, args.steps),
            "fp32 b1": decode_ms_per_step(float_model, 1, args.steps),
            "q4_1 b16": decode_ms_per_step(q4_model, args.batch, args.steps),
            "int8 b16": decode_ms_per_step(int8_model, args.batch, args.steps),
            "fp32 b16": decode_ms_per_step(float_model, args.batch, args.steps),
        }
        if python is not None:
            figures["llama.cpp b1"], version = llama_cpp_ms_per_token(
                python, gguf, args.threads, args.steps, prompt
            )
        for key, value in figures.items():
            rows.setdefault(key, []).append(value)
        print(
            f"round {round_no}: " + ", ".join(f"{k} {v:.1f} ms/step" for k, v in figures.items()), flush=True
        )
    b = args.batch
    print(
        f"\nmedian of {args.rounds} rounds ({args.steps} timed decode steps each, median step; "
        f"{torch.get_num_threads()} torch threads, {args.threads} llama.cpp threads):"
    )
    for key, values in rows.items():
        tokens = b if "b16" in key else 1
        print(
            f"  {key:13} {statistics.median(values):7.1f} ms/step = {tokens * 1e3 / statistics.median(values):6.1f} tok/s"
        )

    def ratios(top: list[float], bottom: list[float]) -> str:  # one figure per round, then spread()
        return spread([t / u for t, u in zip(top, bottom)])

    for ours in ("int8", "q4_1"):
        print(f"  fp32 / {ours} time, batch 1:  {ratios(rows['fp32 b1'], rows[f'{ours} b1'])}")
        print(f"  fp32 / {ours} time, batch {b}: {ratios(rows['fp32 b16'], rows[f'{ours} b16'])}")
    print(f"  int8 / q4_1 time, batch 1:  {ratios(rows['int8 b1'], rows['q4_1 b1'])}")
    print(f"  int8 / q4_1 time, batch {b}: {ratios(rows['int8 b16'], rows['q4_1 b16'])}")
    if "llama.cpp b1" in rows:
        llama = rows["llama.cpp b1"]
        print(f"  llama.cpp {version} Q4_1 ({gguf.name}):")
        for ours in ("int8", "q4_1"):
            print(f"  {ours} / llama.cpp ms per token, batch 1: {ratios(rows[f'{ours} b1'], llama)}")
            # tokens/s of our batch over llama.cpp's single stream = b * llama.cpp's ms / our step's ms
            print(
                f"  {ours} batch-{b} tok/s / llama.cpp single stream tok/s: "
                f"{ratios([b * value for value in llama], rows[f'{ours} b16'])}"
            )
    else:
        print("  llama.cpp: SKIPPED (no llama_cpp): the ratios against llama.cpp were not measured")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--against-llama-cpp", action="store_true", help="float32, int8 and llama.cpp side by side"
    )
    parser.add_argument(
        "--llama-python", default=None, help="a Python with llama-cpp-python, if this one lacks it"
    )
    parser.add_argument(
        "--int8-engine", default=None, help="torch quantized engine for int8: x86, fbgemm or onednn"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.int8_engine:
        from infer_prof.engine import quantize

        quantize.DEFAULT_ENGINE = args.int8_engine
    if args.against_llama_cpp:
        against_llama_cpp(args)
        return

    start = time.perf_counter()
    loaded = load(args.model, args.dtype)
    load_s = time.perf_counter() - start
    print(f"model: {loaded.source}")
    print(f"load: {load_s:.2f} s wall (open GGUF, dequantize, fuse weights, build tokenizer)")
    print(f"torch threads: {torch.get_num_threads()}, dtype: {args.dtype}")

    single, batched, ratios = [], [], []
    for round_no in range(1, args.rounds + 1):
        ms1 = decode_ms_per_step(loaded, 1, args.steps)
        msb = decode_ms_per_step(loaded, args.batch, args.steps)
        ratio = (args.batch * 1e3 / msb) / (1e3 / ms1)
        single.append(ms1)
        batched.append(msb)
        ratios.append(ratio)
        print(
            f"round {round_no}: batch 1 {ms1:.1f} ms/token ({1e3 / ms1:.1f} tok/s); batch {args.batch} "
            f"{msb:.1f} ms/step ({args.batch * 1e3 / msb:.1f} tok/s aggregate); ratio {ratio:.2f}x"
        )
    print(
        f"median of {args.rounds} rounds, {args.steps} timed decode steps each after 3 warm-up steps "
        "(median step time; prompt prefill excluded):"
    )
    print(f"  batch-1 decode: {statistics.median(single):.1f} ms/token")
    print(
        f"  batch-{args.batch} decode: {statistics.median(batched):.1f} ms/step = "
        f"{args.batch * 1e3 / statistics.median(batched):.1f} tokens/s aggregate"
    )
    print(f"  aggregate throughput ratio batch-{args.batch} / batch-1: {statistics.median(ratios):.2f}x")
    print(
        f"best round (least disturbed by other processes): batch-1 {min(single):.1f} ms/token, "
        f"batch-{args.batch} {min(batched):.1f} ms/step"
    )


if __name__ == "__main__":
    main()
