"""The GPU's timeline of a run split into busy, idle waiting for the host, and idle with no work, by component.

Inputs are host-clock intervals in ns. The device timer (collectors.device_time) times each span of
device work with a pair of CUDA events; `device_intervals` places those durations on the host clock.
That is sound because every engine step ends synchronously (the sampled ids come back to the host),
so the stream is empty when a step's first event is recorded and each event pair starts no earlier
than the host recorded it and no earlier than the previous pair ended.

Idle time (no device work queued) is then:
  waiting for the host  inside a step, or between steps while a request is in flight: the control
                        path (scheduler, sampler, input preparation, Python glue...) had not issued
                        the next work yet; attributed to the engine span running at that moment;
  no work               outside every step with no request in flight: nothing to do.
Inside a span of device work the event pair counts the whole span as busy (an upper bound); gaps
between kernels there are only seen by the torch.profiler windows (collectors.kernels'
gpu_idle_fraction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict

Interval = tuple[int, int]

BETWEEN_STEPS = "between_steps"  # the engine loop outside a step while requests are in flight
STEP_OTHER = "step_other"  # inside a step but outside every component span


def device_intervals(pairs: Iterable[tuple[int, int]]) -> list[Interval]:
    """Host-clock intervals of device work from (host ns the start event was recorded, device ns elapsed)
    pairs in recording order: each starts when recorded or when the previous one ended, if later."""
    intervals: list[Interval] = []
    free_at = None
    for recorded_ns, elapsed_ns in pairs:
        start = recorded_ns if free_at is None else max(recorded_ns, free_at)
        end = start + max(0, elapsed_ns)
        intervals.append((start, end))
        free_at = end
    return intervals


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time (empty ones dropped)."""
    merged: list[list[int]] = []
    for start, end in sorted(interval for interval in intervals if interval[1] > interval[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Time in both of two sorted, disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Time in `a` and not in `b` (both sorted and disjoint)."""
    out, j = [], 0
    for start, end in a:
        cursor = start
        while j < len(b) and b[j][1] <= cursor:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return out


def total(intervals: Iterable[Interval]) -> int:
    return sum(end - start for start, end in intervals)


class IdleSplit(TypedDict):
    """The device's time in a window: busy, idle while the host worked, idle with no work, and their shares."""

    window_ns: int
    device_busy_ns: int
    idle_host_ns: int
    idle_no_work_ns: int
    busy_share: float | None
    idle_host_share: float | None
    idle_no_work_share: float | None
    idle_host_by_component: dict[str, float]  # who the host-bound idle waited on; sums to 1 when there is any


def gpu_idle_split(
    *,
    window: Interval,
    device: Iterable[Interval],
    steps: Iterable[Interval],
    in_flight: Iterable[Interval],
    spans: Mapping[str, Iterable[Interval]],
) -> IdleSplit:
    """Busy, host-bound idle and no-work idle time of the device in `window`, and who the host-bound idle
    waited on. `spans` maps a component to the engine thread's intervals in it (they do not overlap).

    Shares are of the window's wall time; `idle_host_by_component` splits the host-bound idle time
    (it sums to 1 when there is any)."""
    whole = [window] if window[1] > window[0] else []
    busy = intersect(union(device), whole)
    idle = subtract(whole, busy)
    stepping = intersect(union(steps), whole)
    in_step_idle = intersect(idle, stepping)
    outside_idle = subtract(idle, stepping)
    between = intersect(outside_idle, union(in_flight))
    no_work = subtract(outside_idle, between)

    by_component: dict[str, int] = {}
    left = in_step_idle
    for component, intervals in spans.items():
        part = intersect(left, union(intervals))
        if part:
            by_component[component] = by_component.get(component, 0) + total(part)
            left = subtract(left, part)  # overlapping inputs must not be counted twice
    by_component[STEP_OTHER] = total(left)
    by_component[BETWEEN_STEPS] = total(between)
    wall, host = total(whole), total(in_step_idle) + total(between)

    def share(ns: int) -> float | None:
        return ns / wall if wall else None

    return {
        "window_ns": wall,
        "device_busy_ns": total(busy),
        "idle_host_ns": host,
        "idle_no_work_ns": total(no_work),
        "busy_share": share(total(busy)),
        "idle_host_share": share(host),
        "idle_no_work_share": share(total(no_work)),
        "idle_host_by_component": {name: ns / host for name, ns in by_component.items() if ns}
        if host
        else {},
    }
