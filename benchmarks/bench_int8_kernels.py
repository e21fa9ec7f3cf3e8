"""Per-linear time of SmolLM2's weight shapes: float32 oneDNN vs torch's int8 kernels, interleaved per call.

Usage: python benchmarks/bench_int8_kernels.py

Candidates: float32 and bfloat16 weights through oneDNN's linear (the engine's float path),
torch._weight_int8pack_mm (int8 weights, bfloat16 activations), and torch.ops.quantized.linear_dynamic
with weights prepacked under each quantized engine this torch has (fbgemm, onednn, x86). Every candidate
runs once per iteration in turn, so load from other processes hits them alike; medians in microseconds.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import infer_prof.engine  # noqa: F401, I001 - the engine's OpenMP wait policy, before torch loads
import torch

SHAPES = {
    "qkv": (960, 576),
    "attn_out": (576, 576),
    "gate_up": (3072, 576),
    "down": (576, 1536),
    "head": (49152, 576),
}


def main() -> None:
    torch.manual_seed(0)
    onednn = torch.ops.mkldnn._linear_pointwise
    engines = [
        name for name in ("fbgemm", "onednn", "x86") if name in torch.backends.quantized.supported_engines
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median us per call")
    for rows in (1, 16):
        for name, (n, k) in SHAPES.items():
            w, x = torch.randn(n, k) * 0.05, torch.randn(rows, k)
            scale = w.abs().amax(1) / 127
            wq = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
            wb, sb = w.bfloat16(), scale.bfloat16()
            calls: dict[str, Any] = {
                "fp32": lambda x=x, w=w: onednn(x, w, None, "none", [], ""),
                "bf16": lambda x=x, wb=wb: onednn(x.bfloat16(), wb, None, "none", [], ""),
                "int8pack_bf16": lambda x=x, wq=wq, sb=sb: torch._weight_int8pack_mm(x.bfloat16(), wq, sb),
            }
            for engine_name in engines:
                torch.backends.quantized.engine = engine_name
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    qw = torch._make_per_channel_quantized_tensor(
                        wq, scale.double(), torch.zeros(n, dtype=torch.long), 0
                    )
                    packed = torch.ops.quantized.linear_prepack(qw, None)
                calls[f"dyn_{engine_name}"] = lambda x=x, packed=packed: torch.ops.quantized.linear_dynamic(
                    x, packed, False
                )
            times: dict[str, list[float]] = {key: [] for key in calls}
            for call in calls.values():
                call()
            for _ in range(10 if name == "head" else 40):
                for key, call in calls.items():
                    start = time.perf_counter()
                    call()
                    times[key].append(time.perf_counter() - start)
            cells = "  ".join(f"{key} {statistics.median(v) * 1e6:8.0f}" for key, v in times.items())
            print(f"rows {rows:2} {name:8} {cells}", flush=True)


if __name__ == "__main__":
    main()
