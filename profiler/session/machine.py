"""What this machine can hold and run: its usable CPUs and the memory it has available now."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...engine.device import device_index, is_cuda


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), which is what torch threads can use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


REALTIME_PRIORITY = 10  # any SCHED_FIFO priority preempts normal threads; py-spy sleeps between samples


def realtime_allowed() -> bool:
    """Whether a child process of this one may take SCHED_FIFO (what the deep mode's sampler asks for)."""
    probe = f"import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({REALTIME_PRIORITY}))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """MemAvailable: memory the kernel can hand out without swapping; None where it cannot tell."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def device_memory_bytes(device: str) -> int | None:
    """Memory free for the engine's tensors on `device` ("cpu" or "cuda:N"): MemAvailable for the CPU, the
    GPU's free memory (cudaMemGetInfo) for a GPU; None where it cannot tell."""
    if not is_cuda(device):
        return available_memory_bytes()
    import torch

    try:
        free, _total = torch.cuda.mem_get_info(device_index(device))
    except (RuntimeError, ValueError, AssertionError):
        return None
    return int(free)


def gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"
