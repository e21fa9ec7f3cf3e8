"""Collectors of one profiled run: spans, GC pauses, py-spy samples, torch.profiler kernels, NVML."""

from .base import FAILED, OK, SKIPPED, Collector
from .registry import (
    PROFILES,
    ProfileError,
    collectors_section,
    default_collectors,
    find_tracer,
    results,
    start_all,
    stop_all,
)
from .spans import RecordingTracer, SpanCollector

__all__ = [
    "FAILED",
    "OK",
    "PROFILES",
    "SKIPPED",
    "Collector",
    "ProfileError",
    "RecordingTracer",
    "SpanCollector",
    "collectors_section",
    "default_collectors",
    "find_tracer",
    "results",
    "start_all",
    "stop_all",
]
