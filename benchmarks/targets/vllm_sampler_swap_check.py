"""Run in vLLM's own Python (benchmarks/bench_vllm_sampler_swap.py does): vLLM's TopKTopPSampler.forward_cpu and the swap's C sampler on the same logits, as JSON on stdout.

    PYTHON benchmarks/targets/vllm_sampler_swap_check.py --library native_paths/_native.abi3.so [--llm MODEL_DIR]

draws    per (top-k, top-p): the tokens each drew for one fixed row repeated over many rows (the caller tests
         both against the exact truncated softmax), and the row itself
timing   one batch at the real vocabulary, top-p 0.9: ms per call of each, medians of repeated calls
llm      with --llm: vLLM's offline engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, so the patch
         reaches its sampler), the swap patched in before the engine is made and switched by hand: 4 greedy
         prompts x 64 tokens with the swap switched out and in (the tokens, and the rows that reached it), and
         one seeded sampled request twice with the swap in
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SWAP_SOURCE = Path(__file__).resolve().parents[2] / "profiler" / "inject" / "vllm_sampler_swap.py"
VOCAB = 4_096  # the distribution rows: wide enough for real tails, small enough for many draws
REAL_VOCAB = 49_152  # SmolLM2's
SETTINGS = ((50, None), (None, 0.9), (20, 0.8))
PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three laws of thermodynamics are",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--llm", default=None, help="a model directory: also run the offline engine checks")
    args = parser.parse_args()
    if args.llm:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process, with the patch
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # as vllm_cpu.sh serves it (GiB of KV cache)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import vllm
    from vllm.platforms import current_platform
    from vllm.v1.sample.ops import topk_topp_sampler as module

    current_platform.import_kernels()  # vLLM's C++ ops (fused_gumbel_argmax), as its engine loads them

    spec = importlib.util.spec_from_file_location("vllm_sampler_swap", SWAP_SOURCE)
    assert spec is not None and spec.loader is not None
    swap_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(swap_module)
    original = module.TopKTopPSampler.forward_cpu
    switch = bytearray(b"S")
    swap = swap_module.Swap({"library": str(Path(args.library).resolve())}, tempfile.mkdtemp(), switch)
    swap.on_import(module)
    if not swap.swapped:
        print(json.dumps({"error": swap.why}))
        return 2
    swapped = module.TopKTopPSampler.forward_cpu
    sampler = module.TopKTopPSampler()
    out: dict[str, object] = {"vllm": vllm.__version__, "torch": torch.__version__}

    generator = torch.Generator().manual_seed(60)
    row = torch.randn(VOCAB, generator=generator) * 2.5
    out["row"] = row.tolist()
    draws = []
    batch = 1_000
    for k, p in SETTINGS:
        found: dict[str, object] = {"top_k": k, "top_p": p}
        for name, forward in (("vllm", original), ("swap", swapped)):
            torch.manual_seed(1)
            tokens: list[int] = []
            while len(tokens) < args.draws:
                logits = row.repeat(batch, 1)
                top_k = None if k is None else torch.full((batch,), k, dtype=torch.int32)
                top_p = None if p is None else torch.full((batch,), p, dtype=torch.float32)
                tokens.extend(forward(sampler, logits, {}, top_k, top_p)[0].tolist())
            found[name] = tokens[: args.draws]
        draws.append(found)
    out["draws"] = draws

    timing = {}
    logits = torch.randn(16, REAL_VOCAB, generator=generator) * 2.5
    top_p = torch.full((16,), 0.9, dtype=torch.float32)
    for name, forward in (("vllm", original), ("swap", swapped)):
        times = []
        for _ in range(30):
            copy = logits.clone()
            start = time.perf_counter()
            forward(sampler, copy, {}, None, top_p)
            times.append((time.perf_counter() - start) * 1e3)
        timing[name] = statistics.median(times)
    out["timing_ms_batch16_top_p_0.9"] = timing

    if args.llm:
        try:
            out["llm"] = engine_checks(args.llm, swap, switch, swap_module)
        except Exception as error:  # the draws above still count
            out["llm"] = {"error": f"{type(error).__name__}: {error}"}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


def engine_checks(model: str, swap: Any, switch: bytearray, swap_module: Any) -> dict[str, object]:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, dtype="float32", max_model_len=2048, seed=0)

    def tokens(params: SamplingParams) -> list[list[int]]:
        return [
            list(result.outputs[0].token_ids)
            for result in llm.generate(list(PROMPTS), params, use_tqdm=False)
        ]

    greedy = SamplingParams(temperature=0.0, max_tokens=64, ignore_eos=True)
    reached_before = sum(swap.rows)
    switch[0] = ord("1")
    without = tokens(greedy)
    switch[0] = ord("S")
    with_swap = tokens(greedy)
    reached = sum(swap.rows) - reached_before
    seeded = SamplingParams(temperature=0.8, top_p=0.9, seed=1234, max_tokens=32, ignore_eos=True)
    swapped_before = swap.rows[swap_module.SWAPPED]
    first, second = tokens(seeded), tokens(seeded)
    return {
        "greedy_identical": without == with_swap,
        "greedy_tokens": [len(t) for t in with_swap],
        "greedy_rows_that_reached_forward_cpu": reached,
        "seeded_identical": first == second,
        "seeded_rows_swapped": swap.rows[swap_module.SWAPPED] - swapped_before,
        "rows_by_path": dict(zip(swap_module.PATHS, swap.rows)),
    }


if __name__ == "__main__":
    sys.exit(main())
