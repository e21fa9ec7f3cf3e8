"""What the int8 linear's call form costs: batch-1 and batch-16 decode with torch's __torch_function__ lookup on
the packed weights (the plain `torch.ops.quantized.linear_dynamic` call) against the call as shipped.

Usage: python benchmarks/bench_int8_call.py [--model smollm2-135m] [--rounds 6] [--steps 24]

One model, loaded once; each round times batch-1 and batch-16 decode with each call form, the order
alternating between rounds (ABBA), and prints the ratio shipped / lookup per round; the summary gives
the median and the range. The lookup form is the one engine/quantize.py used before: it is patched in
here for its rounds, nowhere else.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import decode_ms_per_step

from infer_prof.engine.loader import load_model
from infer_prof.engine.quantize import Int8Linear

SHIPPED = Int8Linear.__call__


def with_lookup(self: Int8Linear, x: torch.Tensor) -> torch.Tensor:
    """The call as it was: the op's argument parsing looks for __torch_function__ on the packed weights."""
    if self.inverse_smoothing is not None:
        x = x * self.inverse_smoothing
    return torch.ops.quantized.linear_dynamic(x, self.packed, False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model, dtype="int8")
    print(f"model: {loaded.source}; {torch.get_num_threads()} torch threads")
    forms = {"lookup": with_lookup, "shipped": SHIPPED}
    ratios: dict[int, list[float]] = {1: [], 16: []}
    for round_no in range(1, args.rounds + 1):
        order = list(forms) if round_no % 2 else list(reversed(forms))
        ms: dict[tuple[str, int], float] = {}
        for name in order:
            Int8Linear.__call__ = forms[name]  # type: ignore[method-assign]
            for batch in ratios:
                ms[name, batch] = decode_ms_per_step(loaded, batch, args.steps)
        Int8Linear.__call__ = SHIPPED  # type: ignore[method-assign]
        for batch in ratios:
            ratios[batch].append(ms["shipped", batch] / ms["lookup", batch])
        print(
            f"round {round_no}: "
            + ", ".join(f"{name} b{batch} {value:.2f} ms/step" for (name, batch), value in ms.items()),
            flush=True,
        )
    for batch, values in ratios.items():
        print(
            f"shipped / lookup time, batch {batch}: median {statistics.median(values):.3f} "
            f"(min {min(values):.3f}, max {max(values):.3f})"
        )


if __name__ == "__main__":
    main()
