"""`run --target/--launch --until resolved`: the load in whole rounds of the scenario, and between rounds a look at the server's samples so far.

A round is the scenario's measured requests, drawn again with the seed moved on by the rounds done (the first round
has the warm-up too). After each round the stopper (profiler.session.until) asks samples_judge: py-spy is restarted
on every sampled process to read what it has (it writes its samples only when it stops), the foreign verdict is
made from them at the look's spent confidence, and with --probe the probe's bound on the loop's own work is joined
to it, at the same level; with --what-if, each delayed component's sensitivity so far must be precise too (its half
interval within 20% of it); the run goes on while either is not and time is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....errors import OptionError
from ....scenarios.loadgen import RequestSpec
from ....scenarios.spec import ScenarioSpec
from ...analysis.foreign import foreign_verdict, with_probe_bound
from ...analysis.probe_slowdown import analyse_slowdowns
from ...analysis.probe_spans import analyse_probe
from ...analysis.sensitivity import PRECISION, precise
from ..until import THRESHOLDS, Estimate, Judge, Look, Stopper, round_maker
from .client import HttpLoad
from .inject import ProbeSetup, read_probe
from .server_split import foreign_processes
from .watch import TreeSampler

LOOK_RESAMPLES = (
    500  # a look's bootstrap of a slowdown's pairs: enough for a go-on-or-stop, quick beside a round
)
SAMPLES_WIDTHS = (
    f"the engine loop's interpreter share interval (py-spy's samples; with --probe, joined to the probe's bound on "
    f"the loop's own work) clear of {', '.join(f'{t:.0%}' for t in THRESHOLDS)}; with --what-if, each slowdown's "
    f"sensitivity known to ±{PRECISION:.0%}"
)


@dataclass(frozen=True, slots=True)
class SampledShare:
    """The engine loop's interpreter share so far and its interval (until.Estimate)."""

    share: float
    low: float
    high: float


@dataclass
class Rounds:
    """The rounds driven so far: each round's load, in order."""

    loads: list[HttpLoad] = field(default_factory=list)

    def window_ns(self) -> tuple[int, int]:
        """From the first round's measured start to now (perf_counter_ns, the load's clock)."""
        start = self.loads[0].start_ns if self.loads else time.perf_counter_ns()
        return start, time.perf_counter_ns()


@dataclass(frozen=True, slots=True)
class Until:
    """`--until resolved` against a server: the time cap, what a look reads (the tree's samplers, the probe), the
    server's context (the next rounds' prompts fit it), and the progress bar's hooks."""

    max_time_s: float
    tree: TreeSampler
    probe: ProbeSetup | None
    context: int
    on_look: Callable[[Look], None] | None = None
    on_more: Callable[[int], None] | None = None


def drive_load(
    drive: Callable[[Sequence[RequestSpec]], HttpLoad],
    scenario: ScenarioSpec,
    requests: list[RequestSpec],
    add_prompts: Callable[[list[RequestSpec]], None],
    until: Until | None,
) -> tuple[HttpLoad, Stopper | None]:
    """The whole load: the scenario once, or (`until`) in rounds with a look between them; the stopper that looked."""
    if until is None:
        return drive(requests), None
    rounds = Rounds()
    judge = samples_judge(until.tree, until.probe, rounds)
    stopper = Stopper(until.max_time_s, judge, widths=SAMPLES_WIDTHS, on_look=until.on_look)
    stopper.start()
    more = round_maker(scenario, until.context, requests, add_prompts, stopper, until.on_more)
    return drive_rounds(drive, requests, more, rounds), stopper


def drive_rounds(
    drive: Callable[[Sequence[RequestSpec]], HttpLoad],
    requests: Sequence[RequestSpec],
    next_round: Callable[[int], list[RequestSpec] | None],
    rounds: Rounds | None = None,
) -> HttpLoad:
    """Drive `requests`, then each batch next_round(rounds done) gives, until it gives None or a round stops early
    (Ctrl-C, the server gone): one HttpLoad over them all."""
    rounds = rounds if rounds is not None else Rounds()
    rounds.loads.append(drive(requests))
    while not rounds.loads[-1].stopped_early:
        batch = next_round(len(rounds.loads))
        if batch is None:
            break
        rounds.loads.append(drive(batch))
    return merged_load(rounds.loads)


def merged_load(loads: Sequence[HttpLoad]) -> HttpLoad:
    """The rounds as one load: every record, from the first round's measured start to the last round's end (the
    looks between rounds inside it), the CPU the client spent summed, the peaks the largest."""
    first, last = loads[0], loads[-1]
    if len(loads) == 1:
        return first
    dropped: dict[str, str] = {}
    for load in loads:
        dropped.update(load.dropped_fields)
    return HttpLoad(
        records=[record for load in loads for record in load.records],
        start_ns=first.start_ns,
        end_ns=last.end_ns,
        warmup_ns=first.warmup_ns,
        stopped_early=any(load.stopped_early for load in loads),
        peak_in_flight=max(load.peak_in_flight for load in loads),
        client_cpu_s=sum(load.client_cpu_s for load in loads),
        loop_cpu_s=sum(load.loop_cpu_s for load in loads),
        threads=max(load.threads for load in loads),
        dropped_fields=dropped,
    )


def samples_judge(tree: TreeSampler, probe: ProbeSetup | None, rounds: Rounds) -> Judge:
    """The look on a server: its engine loop's interpreter share from py-spy's samples so far, at the look's
    confidence, its upper end lowered by the probe's bound on the loop's own work where --probe timed it."""

    def judge(confidence: float) -> tuple[Estimate | None, list[str]]:
        sampled = [
            (pid, result) for pid, result in tree.results_so_far().items() if result.get("status") == "ok"
        ]
        if not sampled:
            return None, ["the interpreter share (no samples of the server's processes yet)"]
        verdict = foreign_verdict(foreign_processes(sampled), confidence=confidence)
        window = rounds.window_ns()
        found = (
            read_probe(probe) if probe is not None else {}
        )  # read once: the bound and the slowdowns share it
        if probe is not None:
            section = analyse_probe(probe.probes, found, window, confidence=confidence)
            with_probe_bound(verdict, section, confidence=confidence)
        interval = verdict.get("interpreter_interval") or {}
        share, low, high = interval.get("share"), interval.get("low"), interval.get("high")
        if share is None or low is None or high is None:
            return None, ["the interpreter share (no busy engine loop in the samples yet)"]
        straddled = verdict.get("straddles") or []
        held = (
            [
                f"the interpreter share (straddles {' and '.join(f'{t:.0%}' for t in straddled)}; "
                f"{interval.get('samples') or 0:,} busy samples)"
            ]
            if straddled
            else []
        )
        if probe is not None and probe.what_if is not None:
            held += slowdowns_held(probe, found, window, roles(tree))
        return SampledShare(share, low, high), held

    return judge


def roles(tree: TreeSampler) -> dict[int, str]:
    """pid -> role of every process the tree sampler has seen (the API server's output processing is beside the loop)."""
    return {watched.info.pid: watched.info.role for watched in tree.processes()}


def slowdowns_held(
    probe: ProbeSetup, found: dict[int, dict[str, Any]], window_ns: tuple[int, int], roles: dict[int, str]
) -> list[str]:
    """With --what-if: each delayed component whose sensitivity so far is not yet precise (its prediction not known
    to ±20%) in the probe's records `found` (read_probe), as a look's reason to go on; a component never delayed
    holds nothing (more load would not help)."""
    section = analyse_slowdowns(probe.probes, found, window_ns, roles=roles, resamples=LOOK_RESAMPLES)
    if section is None:
        return ["the slowdowns (no turns in the probe's records yet)"]
    held = []
    for name, entry in (section.get("components") or {}).items():
        value, low, high = entry.get("sensitivity"), entry.get("low"), entry.get("high")
        if entry.get("accuracy") is None or precise(value, low, high):
            continue
        if value is None or low is None or high is None:
            held.append(f"the slowdown of {name} ({entry.get('note') or 'no sensitivity yet'})")
        else:
            held.append(
                f"the slowdown of {name} (sensitivity {value:.2f} [{low:.2f}, {high:.2f}], {entry.get('pairs')} pairs: "
                f"not yet within ±{PRECISION:.0%})"
            )
    return held


def check_until_target(pid: int | None, ours: bool, profile: str) -> None:
    """--until resolved against a server: OptionError where a look would have nothing to read (before any load)."""
    if ours:
        raise OptionError(
            "--until resolved against `infer-prof serve`: its verdict rests on the server's spans, read once at the "
            "end; run the built-in engine itself with `infer-prof run --until resolved` (no --target)"
        )
    if pid is None or profile == "off":
        raise OptionError(
            "--until resolved looks at py-spy's samples of the server's processes after each round: run infer-prof "
            "on the server's machine (or use --launch), with a profile other than off"
        )
