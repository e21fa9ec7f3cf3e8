"""Collectors of one profiled run: spans, GC pauses, py-spy samples, torch.profiler kernels, NVML."""

from infer_prof.profiler.collectors.base import FAILED, OK, SKIPPED, Collector
from infer_prof.profiler.collectors.registry import (
    PROFILES,
    ProfileError,
    collectors_section,
    default_collectors,
    find_tracer,
    results,
    start_all,
    stop_all,
)
from infer_prof.profiler.collectors.spans import RecordingTracer, SpanCollector

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
