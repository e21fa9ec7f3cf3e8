"""Which torch device the engine runs on: `auto`, `cpu` or `cuda[:N]` resolved against this machine, and its default dtype."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import OptionError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_SPEC = re.compile(r"^(auto|cpu|cuda)(?::(\d{1,4}))?$")


def cuda_device_count() -> int:
    """CUDA devices torch can use here (0 on a CPU-only build or without a driver)."""
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except (RuntimeError, AssertionError):  # a broken driver install: no usable device
        return 0


def resolve_device(spec: str, *, cuda_count: Callable[[], int] = cuda_device_count) -> str:
    """`spec` as the device the engine will use ("cpu" or "cuda:N"); OptionError (one line naming --device
    and the fix) for a malformed spec or a CUDA device this machine does not have."""
    match = _SPEC.match(spec.strip().lower()) if isinstance(spec, str) else None
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise OptionError(f"--device={spec!r} is not a device: use {DEVICE_CHOICES}")
    kind, index = match.group(1), int(match.group(2) or 0)
    if kind == "cpu":
        return "cpu"
    count = cuda_count()
    if kind == "auto":
        return "cuda:0" if count else "cpu"
    if count == 0:
        raise OptionError(
            f"--device={spec}: this machine has no CUDA device torch can use (a CPU-only torch build or no NVIDIA "
            "driver); use --device cpu, or auto to take a GPU when there is one"
        )
    if index >= count:
        raise OptionError(
            f"--device={spec}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
        )
    return f"cuda:{index}"


def is_cuda(device: str) -> bool:
    return device.startswith("cuda")


def device_index(device: str) -> int:
    """N of a resolved "cuda:N" (0 for "cpu")."""
    return int(device.partition(":")[2] or 0)


def default_dtype(device: str) -> str:
    """bfloat16 on a GPU (what serving engines run there), float32 on the CPU (the engine's default there)."""
    return "bfloat16" if is_cuda(device) else "float32"


def resolve_dtype_name(dtype: str, device: str) -> str:
    """`dtype` with "auto" replaced by the device's default."""
    return default_dtype(device) if dtype == "auto" else dtype


def avoid_attention_plan_builds() -> None:
    """Take cuDNN out of torch's attention backends (process-wide; torch offers no narrower switch).

    cuDNN's attention builds an execution plan for each new shape, and a serving step's shapes change
    with its batch and context lengths, so the steps that met a new shape were the slow ones
    (docs/measurements.md, "The GPU check on an H100"). Flash, memory-efficient and math attention need
    no plan.
    """
    import torch

    enable = getattr(torch.backends.cuda, "enable_cudnn_sdp", None)
    if enable is not None:  # torch builds before 2.3 have no cuDNN attention to avoid
        enable(False)
