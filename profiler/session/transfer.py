"""What a host-side (C) sampler would add on a GPU: the copy of each step's logits to the host, timed on this device."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...engine.device import is_cuda

if TYPE_CHECKING:
    from ..collectors.spans import StepRow


def d2h_copy_ns(device: str, rows: int, vocab: int, *, repeats: int = 7) -> float | None:
    """Median ns to copy a float32 [rows, vocab] tensor from `device` to the host (None on the CPU: no copy)."""
    if not is_cuda(device) or rows < 1 or vocab < 1:
        return None
    import torch

    logits = torch.randn(rows, vocab, device=device)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter_ns()
        logits.cpu()  # waits for the copy, as the engine's d2h span does
        times.append(time.perf_counter_ns() - started)
    return float(statistics.median(times[1:]))  # the first copy pays for the pinned staging buffer


def sampler_copy_share(
    device: str,
    steps: Sequence[StepRow],
    vocab: int,
    wall_ns: int,
    probe: Callable[[str, int, int], float | None] = d2h_copy_ns,
) -> float | None:
    """The share of the run's wall time the copies to the host would have taken had the sampler been the C
    twin: one copy per step, of the step's batch (the median batch: an upper bound on the rows sampled,
    since a prefill chunk that does not end its prompt samples nothing), priced by `probe`."""
    sampled = [int(step.get("batch_size") or 0) for step in steps]
    sampled = [rows for rows in sampled if rows > 0]
    if not sampled or wall_ns <= 0:
        return None
    per_copy = probe(device, int(statistics.median(sampled)), vocab)
    return None if per_copy is None else per_copy * len(sampled) / wall_ns
