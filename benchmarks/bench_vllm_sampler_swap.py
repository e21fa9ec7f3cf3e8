"""The sampler swap against vLLM's own sampler, in vLLM's Python: both draw from the same truncated softmax (chi-square of each against the exact probabilities), their time per call, and with --llm greedy tokens with and without the swap and seeded reproducibility.

    python benchmarks/bench_vllm_sampler_swap.py [--python ~/.cache/infer-prof/peers/vllm/bin/python] [--llm DIR]

It runs benchmarks/targets/vllm_sampler_swap_check.py in vLLM's Python (which has no scipy) and tests its
draws here with profiler.checks.sampler_distribution.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from infer_prof.native_paths import loader
from infer_prof.profiler.checks.sampler_distribution import chi_square, truncated_softmax

CHECK = Path(__file__).resolve().parent / "targets" / "vllm_sampler_swap_check.py"
PEER = Path.home() / ".cache" / "infer-prof" / "peers" / "vllm"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=str(PEER / "bin" / "python"))
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--llm", default=None, help=f"a model directory, e.g. {PEER / 'smollm2-hf'}")
    args = parser.parse_args()
    module = loader.extension()
    if module is None:
        print("the C extension is not built: python native_paths/build.py", file=sys.stderr)
        return 2
    command = [args.python, str(CHECK), "--library", str(module.__file__), "--draws", str(args.draws)]
    if args.llm:
        command += ["--llm", args.llm]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return 1
    found = json.loads(done.stdout.strip().splitlines()[-1])
    row = np.asarray(found["row"], dtype=np.float32).astype(np.float64)
    print(
        f"vLLM {found['vllm']} (torch {found['torch']}), {args.draws:,} draws a setting over one row of {len(row):,}"
    )
    for case in found["draws"]:
        k, p = case["top_k"] or 0, case["top_p"] or 1.0
        exact = truncated_softmax(row, k, float(torch.tensor(p, dtype=torch.float32)))
        for name in ("vllm", "swap"):
            test = chi_square(np.asarray(case[name]), exact)
            print(
                f"  top_k={case['top_k']} top_p={case['top_p']} {name:>4}: chi2={test.statistic:.1f} "
                f"dof={test.dof} p={test.p_value:.3f} outside the cut={test.outside}"
            )
    timing = found["timing_ms_batch16_top_p_0.9"]
    print(
        f"forward_cpu, 16 rows x 49,152, top-p 0.9: vLLM {timing['vllm']:.2f} ms, swap {timing['swap']:.2f} ms "
        f"({timing['vllm'] / timing['swap']:.1f}x)"
    )
    if "llm" in found:
        print("offline engine:", json.dumps(found["llm"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
