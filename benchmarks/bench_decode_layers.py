"""q4_1 decode steps with every layer in one C call against the same layers op by op, in one process.

    python benchmarks/bench_decode_layers.py [--model smollm2-135m] [--batches 1 16] [--rounds 5] [--steps 32]

Loads the model once in q4_1 on its C kernels. Each round times `--steps` decode steps op by op (engine.llama's
run_layers on the same C linears and attention: the one call's Python twin) and then in one call
(native_paths.decode_layers), at each batch size, and prints both medians and their ratio; the summary gives the
ratio's median and range over rounds. Only the layers differ: the embedding, the final norm and the head run alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import decode_ms_per_step, load, spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=32)
    args = parser.parse_args()
    loaded = load(args.model, "q4_1")
    model = loaded.model
    one_call = model._layers_kernel
    if one_call is None:
        raise SystemExit("this model runs no one-call decode layers: is the C library built?")
    ratios: dict[int, list[float]] = {batch: [] for batch in args.batches}
    for round_no in range(1, args.rounds + 1):
        for batch in args.batches:
            times = {}
            for name, kernel in (("op by op", None), ("one call", one_call)):
                model._layers_kernel, model._decode_layers = kernel, None
                times[name] = decode_ms_per_step(loaded, batch, args.steps)
            ratios[batch].append(times["op by op"] / times["one call"])
            print(
                f"round {round_no}, batch {batch:2}: op by op {times['op by op']:.2f} ms, "
                f"one call {times['one call']:.2f} ms, ratio {ratios[batch][-1]:.2f}x",
                flush=True,
            )
    model._layers_kernel = one_call
    for batch, values in ratios.items():
        print(f"batch {batch:2}: op-by-op time / one-call time, {spread(values)} over {len(values)} rounds")


if __name__ == "__main__":
    main()
