"""What the run did not see and why: collectors that did not run, blind spots, the profile's limits."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from .table import Table
from .verdict import blind_spots


def collectors_table(result: RunResult) -> Table:
    table = Table("Collectors", ["collector", "status", "reason"])
    for name, status in (result.collectors or {}).items():
        status = status or {}
        table.rows.append([name, str(status.get("status", "unknown")), status.get("reason") or ""])
    if not table.rows:
        table.note = "the run recorded no collector statuses"
    return table


def skipped_collectors(result: RunResult) -> list[tuple[str, str, str]]:
    """(names, status, reason) of the collectors that did not run; one entry per shared status and reason."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, status in (result.collectors or {}).items():
        status = status or {}
        if status.get("status") != "ok":
            key = (str(status.get("status")), status.get("reason") or "no reason recorded")
            groups.setdefault(key, []).append(name)
    return [(", ".join(names), status, reason) for (status, reason), names in groups.items()]


def applicable_skipped_collectors(result: RunResult) -> list[tuple[str, str, str]]:
    """skipped_collectors without the ones this machine cannot run (those are not_applicable's one line)."""
    gpu_ok = machine_has_gpu(result)
    return [
        (names, status, reason)
        for names, status, reason in skipped_collectors(result)
        if gpu_ok or status != "skipped" or not set(names.split(", ")) <= set(GPU_COLLECTORS)
    ]


# Collectors that measure a GPU: skipped on a machine without one, which is no blind spot of the run.
GPU_COLLECTORS = ("gpu", "nvml", "device_time")


def machine_has_gpu(result: RunResult) -> bool:
    environment = result.environment or {}
    return bool(result.gpu_time or environment.get("gpu") or environment.get("cuda_available"))


def not_applicable(result: RunResult) -> str | None:
    """One line for what does not apply to this machine (GPU figures on a CPU run), or None."""
    if machine_has_gpu(result):
        return None
    skipped = [
        name
        for name in GPU_COLLECTORS
        if ((result.collectors or {}).get(name) or {}).get("status") == "skipped"
    ]
    if not skipped:
        return None
    return "No GPU on this machine: GPU figures do not apply."


def machine_spot(result: RunResult, spot: str) -> bool:
    return not machine_has_gpu(result) and spot.startswith("No GPU utilization")


# Blind spots every run of the default profile has (prefix -> a few words), said once as its limits.
PROFILE_LIMITS = {
    "py-spy ran without --native": "native frames",
    "Spans see only locks taken through the tracer": "untraced locks",
    "GC pauses were not timed": "GC pauses",
}


def _profile_limit(spot: str) -> str | None:
    return next((words for prefix, words in PROFILE_LIMITS.items() if spot.startswith(prefix)), None)


def reading_blind_spots(result: RunResult) -> list[str]:
    """The blind spots that change how to read this run: not the machine's, not the profile's standing limits."""
    return [
        spot
        for spot in blind_spots(result)
        if not machine_spot(result, spot) and _profile_limit(spot) is None
    ]


def profile_limits(result: RunResult) -> str | None:
    """The profile's standing limits as one line ('Not seen: native frames, ... (--profile deep)'), or None."""
    limits = [words for spot in blind_spots(result) if (words := _profile_limit(spot))]
    return f"Not seen by this profile: {', '.join(limits)} (--profile deep)." if limits else None
