"""A foreign engine's step drawn across its processes, from the probe: the loop's own work, its wait on the model worker with the worker's components inside it, and the API server's work beside the step."""

from __future__ import annotations

from dataclasses import dataclass

from ...profiler.rundir.schema import Probe, ProbeProcess, ProbeShare
from .charts import COMPONENT_COLOURS, Target

WAIT_COLOUR = "#BBBBBB"  # the loop waiting on its worker: on the path, but not the loop's own work
OTHER_COLOUR = "#DDDDDD"  # a lane's time no probe named
BESIDE = ("api", "tokenizer", "detokenizer")  # components that run beside the loop in the API server


@dataclass(frozen=True, slots=True)
class Segment:
    """One bar of a lane: what it is, where it starts and how long it lasts (ms into a mean step)."""

    label: str
    start_ms: float
    ms: float
    colour: str
    note: str = ""  # the slowdown's sensitivity, where one measured it


@dataclass(frozen=True, slots=True)
class Lane:
    """One process's part of a mean step."""

    title: str
    segments: tuple[Segment, ...]
    beside: bool = False  # its work overlaps the step rather than lying on its path


def step_lanes(probe: Probe) -> list[Lane]:
    """The lanes of a mean step, or none when the probe timed no steps with components."""
    steps = probe.get("steps") or {}
    components, mean = steps.get("components") or {}, steps.get("mean_ms")
    if not components or not mean:
        return []
    processes = {entry["pid"]: entry for entry in probe.get("processes") or []}
    slowdowns = (probe.get("what_if") or {}).get("components") or {}
    loop_pid = steps.get("pid")

    def note(name: str) -> str:
        entry = slowdowns.get(name) or {}
        value, low, high = entry.get("sensitivity"), entry.get("low"), entry.get("high")
        if value is None:
            return ""
        return f"s={value:.2f}" + (
            f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        )

    def title(pid: int | None, words: str) -> str:
        role = (processes.get(pid) or {}).get("role") if pid is not None else None
        return f"{words}, pid {pid}" + (f" ({role})" if role and role != "None" else "")

    on_loop = {name: entry for name, entry in components.items() if entry.get("where") == "engine loop"}
    elsewhere = {name: entry for name, entry in components.items() if entry.get("where") != "engine loop"}
    wait = on_loop.pop("worker", None)
    loop_segments, at = [], 0.0
    for name, entry in on_loop.items():
        ms = float(entry["ms_per_step"])
        loop_segments.append(Segment(name, at, ms, COMPONENT_COLOURS.get(name, OTHER_COLOUR), note(name)))
        at += ms
    wait_ms = float(wait["ms_per_step"]) if wait else 0.0
    other = max(0.0, mean - at - wait_ms)
    if other > 0:
        loop_segments.append(Segment("other loop code", at, other, OTHER_COLOUR))
        at += other
    lanes = [Lane(title(loop_pid, "engine loop"), tuple(loop_segments))]
    if wait:
        lanes[0] = Lane(
            lanes[0].title, (*loop_segments, Segment("waiting on the worker", at, wait_ms, WAIT_COLOUR))
        )
    by_process = _owners(elsewhere, processes, loop_pid)
    for pid, names in by_process.items():
        beside = all(name in BESIDE for name in names)
        start = 0.0 if beside or not wait else at
        segments, offset = [], start
        for name in names:
            ms = float(elsewhere[name]["ms_per_step"])
            segments.append(Segment(name, offset, ms, COMPONENT_COLOURS.get(name, OTHER_COLOUR), note(name)))
            offset += ms
        words = "API server, beside the step" if beside else "model worker, inside the loop's wait"
        lanes.append(Lane(title(pid, words), tuple(segments), beside=beside))
    return lanes


def _owners(
    components: dict[str, ProbeShare], processes: dict[int, ProbeProcess], loop_pid: int | None
) -> dict[int | None, list[str]]:
    """Each component that ran outside the loop, under the process that spent the most of its time."""
    found: dict[int | None, list[str]] = {}
    for name in components:
        owners = [
            (float(((entry.get("components") or {}).get(name) or {}).get("ms") or 0.0), pid)
            for pid, entry in processes.items()
            if pid != loop_pid
        ]
        best = max(owners, default=(0.0, None))
        found.setdefault(best[1] if best[0] > 0 else None, []).append(name)
    return found


def draw_step_path(target: Target, probe: Probe) -> None:
    """One horizontal lane per process of a mean step, its bars in ms; the API server's lane is marked beside."""
    lanes = step_lanes(probe)
    ax = target.subplots()
    steps = probe.get("steps") or {}
    for position, lane in enumerate(lanes):
        for segment in lane.segments:
            ax.barh(
                position,
                segment.ms,
                left=segment.start_ms,
                color=segment.colour,
                alpha=0.55 if lane.beside else 1.0,
                hatch="//" if segment.colour == WAIT_COLOUR else None,
                edgecolor="white",
                linewidth=0.5,
            )
            width = segment.ms / max(1e-9, float(steps.get("mean_ms") or 1.0))
            words = segment.label + (f"\n{segment.note}" if segment.note and width >= 0.2 else "")
            if width >= 0.08:  # narrower bars cannot hold a label without colliding
                ax.text(
                    segment.start_ms + segment.ms / 2, position, words, ha="center", va="center", fontsize=7
                )
    ax.set_yticks(range(len(lanes)), [lane.title for lane in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("ms into a mean step")
    ax.axvline(float(steps.get("mean_ms") or 0.0), color="#555555", linewidth=0.8, linestyle="--")
    ax.set_title(
        f"A step across processes: mean of {steps.get('with_probes_on', 0):,} steps, "
        f"{float(steps.get('mean_ms') or 0.0):.1f} ms (dashed)",
        loc="left",
    )
    ax.grid(axis="y", visible=False)
