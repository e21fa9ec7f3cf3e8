"""Python twin vs C twin of the sampler on flat rows, where top-p keeps most of the vocabulary.

    python benchmarks/bench_flat_rows.py            # 32 rows of 49,152, five cases, 7 repeats each

`infer-prof bench native` times rows shaped like a language model's (a few strong candidates):
top-p there keeps a handful of tokens. Logits drawn from N(0, std) instead make the nucleus tens of
thousands of tokens wide, the case a high temperature or an unsure model gives; the C twin must not
lose to the Python one there either. Each case times both twins on the same batch, interleaved, and
prints the medians, their ratio and the C twin's exact redos (its fast softmax sum too close to call).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.engine.sampler import PythonSampler
from infer_prof.engine.types import SamplingParams
from infer_prof.native_paths.sampler import NativeSampler

CASES = (  # name, std of the logits, sampling parameters (each row gets its own seed)
    ("N(0,1) top-p 0.9", 1.0, SamplingParams(temperature=1.0, top_p=0.9)),
    ("N(0,1) top-p 0.95", 1.0, SamplingParams(temperature=1.0, top_p=0.95)),
    ("N(0,3) top-p 0.9", 3.0, SamplingParams(temperature=1.0, top_p=0.9)),
    ("N(0,1) no top-p", 1.0, SamplingParams(temperature=1.0)),
    ("N(0,1) min-p 0.05", 1.0, SamplingParams(temperature=1.0, min_p=0.05)),
)
ROWS, VOCAB, REPEATS = 32, 49152, 7


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"{'case':<20} {'python ms':>10} {'C ms':>8} {'speedup':>8} {'exact redos':>12}")
    for name, std, params in CASES:
        logits = torch.from_numpy((rng.standard_normal((ROWS, VOCAB)) * std).astype(np.float32))
        twins = (PythonSampler(), NativeSampler())
        for sampler in twins:
            for row in range(ROWS):
                sampler.add(row, replace(params, seed=row), [])
        times: tuple[list[float], list[float]] = ([], [])
        for repeat in range(REPEATS):
            for which in (0, 1) if repeat % 2 == 0 else (1, 0):
                start = time.perf_counter()
                twins[which].sample(logits, list(range(ROWS)))
                times[which].append(time.perf_counter() - start)
        python_ms, native_ms = (statistics.median(t) * 1e3 for t in times)
        redos = twins[1].exact_passes
        print(
            f"{name:<20} {python_ms:>10.1f} {native_ms:>8.1f} {python_ms / native_ms:>7.2f}x {redos:>7}/{ROWS * REPEATS}"
        )


if __name__ == "__main__":
    main()
