"""Calls a C kernel named as a torch op while torch.profiler records, so its time counts as an op's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

profiling = torch._C._autograd._profiler_enabled


def call_as_op(name: str, function: Callable[..., int], args: tuple[Any, ...]) -> int:
    """`function(*args)`, inside `record_function(name)` when a profiler records: torch.profiler, and the
    windows of profiler.collectors.kernels (which count every `a::b` event), then see the kernel's time as
    an op's rather than as Python between ops. Only then: an idle record_function costs more than most C calls."""
    if profiling():
        with torch.profiler.record_function(name):
            return function(*args)
    return function(*args)
