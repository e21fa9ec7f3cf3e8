"""The time split of a server's processes from py-spy samples (any Python server) and, for `infer-prof serve`, its spans.

Our server's engine thread is named; in any other server each thread's role comes from what its
samples do (profiler.analysis.roles: never its name, threads keyed by id), the engine thread is the
engine-loop thread with the most work, and the verdict is the foreign one (profiler.analysis.foreign).

For a server of several processes, call process_split() once per process's py-spy output and pass the
list to foreign_breakdown() and server_verdict().
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from ....engine.engine import ENGINE_THREAD_NAME as ENGINE_THREAD
from ...analysis.breakdown import build_breakdown
from ...analysis.classify import parse_raw
from ...analysis.foreign import foreign_breakdown, foreign_verdict
from ...analysis.roles import process_roles
from ...rundir.schema import Breakdown, CollectorStatus, ForeignProcess, Gil, SampledThread, Verdict
from ...serve.profiling import API_THREAD_NAME

if TYPE_CHECKING:
    from ...collectors.registry import CollectorResults
    from ...collectors.sampling import SamplingResult


def process_split(raw_text: str, pid: int | None) -> ForeignProcess:
    """One process's threads, roles and splits (roles.ProcessRoles.as_dict) from its py-spy raw output."""
    return process_roles(parse_raw(raw_text or ""), pid=pid).as_dict()


def is_ours(sampling: SamplingResult | None, window: dict[str, Any] | None) -> bool:
    """Whether the samples are of `infer-prof serve` (its spans window, or its named engine thread)."""
    return window is not None or ENGINE_THREAD in ((sampling or {}).get("threads") or {})


def thread_table(sampling: SamplingResult, pid: int | None = None) -> dict[str, SampledThread]:
    """Each sampled thread's split, keyed "name (thread id)": shares of its own samples by category and
    component, its waits by kind, its role (and why), and its GIL waits (native stacks only)."""
    process = process_split(sampling.get("raw_text") or "", pid)
    return thread_rows(process)


def thread_rows(process: ForeignProcess) -> dict[str, SampledThread]:
    rows: dict[str, SampledThread] = {}
    for thread in process["threads"]:
        if not thread["samples"]:
            continue
        label = f"{thread['name'] or 'thread'} ({thread['thread_id']})"
        # analysis.roles's row: SampledThread's fields and the thread's counts, which the table leaves out
        rows[label] = cast(SampledThread, {key: value for key, value in thread.items() if key != "counts"})
    return rows


def server_breakdown(
    sampling: SamplingResult | None,
    window: dict[str, Any] | None,  # our server's profile window, as its HTTP answer holds it
    wall_ns: int,
    native_components: list[str],
    *,
    pid: int | None = None,
) -> tuple[Breakdown | None, str, list[str]]:
    """(breakdown, engine thread label, notes) from what was measured; breakdown None when nothing was."""
    sampled = sampling is not None and sampling.get("status") == "ok"
    if not is_ours(sampling, window):
        if not sampled:
            return None, ENGINE_THREAD, []
        assert sampling is not None
        breakdown = foreign_breakdown([process_split(sampling.get("raw_text") or "", pid)], wall_ns)
        process = breakdown["processes"][0]
        pool = [
            thread
            for thread in process["threads"]
            if thread["thread_id"] in (process.get("engine_threads") or [])
        ]
        # A pool that takes turns running the loop is named whole (foreign.loop_counts counts it as one loop).
        label = (
            " + ".join(f"{thread['name'] or 'thread'} ({thread['thread_id']})" for thread in pool)
            if pool
            else ENGINE_THREAD
        )
        return breakdown, label, []
    results: CollectorResults = {}
    if window is not None:
        results.update(window["collector_results"])
        wall_ns = window.get("wall_ns") or wall_ns
    if sampled and sampling is not None:
        results["sampling"] = sampling
    if not results:
        return None, ENGINE_THREAD, []
    breakdown = build_breakdown(
        results, engine_thread_name=ENGINE_THREAD, wall_ns=wall_ns, native_components=native_components
    )
    return breakdown, ENGINE_THREAD, []


NO_SPANS = "No spans: another engine is not traced, so components come from sampled frames, not timed calls."
# With --probe: the named calls are timed, the rest still comes from samples.
PROBE_SPANS = (
    "Spans only where the probe is: the engine table's named calls are timed, everything else "
    "comes from sampled frames."
)


def server_verdict(
    breakdown: Breakdown,
    collectors: dict[str, CollectorStatus],
    *,
    probed: bool = False,
    confidence: float = 0.95,
) -> Verdict:
    """The verdict: the foreign one when the breakdown holds processes (another engine), else diagnose()'s;
    `probed`: the in-process probe timed the engine's named calls (--probe); `confidence`: the foreign interval's
    level (higher after several looks of a run that went on until resolved)."""
    if breakdown.get("processes") is not None:
        spots = []
        sampling = collectors.get("sampling") or {}
        if sampling.get("status") not in (None, "ok"):
            spots.append(f"No stack samples ({sampling.get('reason')}).")
        spots.append(PROBE_SPANS if probed else NO_SPANS)
        return foreign_verdict(breakdown["processes"], blind_spots=spots, confidence=confidence)
    from ...analysis.diagnose import diagnose

    return diagnose(breakdown, native_speedups=None, measured_gains=None, collectors=collectors)


def gil_section(
    window: dict[str, Any] | None, threads: dict[str, SampledThread], engine_thread: str
) -> Gil | None:
    """GIL contention between the API layer and the engine thread, by each method that can see it.

    samples (native stacks): the share of each thread's samples waiting to take the GIL; spans: wall
    minus CPU time inside pure-Python spans (api, scheduler, kv_alloc, detokenizer on the engine
    thread; api and tokenize on the event loop), an upper bound on GIL waits (it includes waiting for
    a core on a busy machine). threads: thread_table()'s rows; engine_thread: a row's label or a thread name.
    """
    section: Gil = {}
    samples = {label: gil for label, row in threads.items() if (gil := row.get("gil_wait")) is not None}
    if samples:
        section["samples"] = {
            "engine_thread": _gil_of(threads, engine_thread, role="engine loop"),
            "api_thread": _gil_of(threads, API_THREAD_NAME, role="api"),
            "by_thread": samples,
        }
    if window is not None:
        spans = window["collector_results"].get("spans") or {}
        wall = window.get("wall_ns") or 0
        section["spans_off_cpu"] = {
            "engine_thread": _off_cpu(
                spans, ENGINE_THREAD, ("api", "scheduler", "kv_alloc", "detokenizer", "queue"), wall
            ),
            "api_thread": _off_cpu(spans, API_THREAD_NAME, ("api", "tokenizer"), wall),
        }
    return section or None


def _gil_of(threads: dict[str, SampledThread], wanted: str, role: str) -> float | None:
    """The GIL share of the row labelled or named `wanted`, else of the busiest row with `role`."""
    for label, row in threads.items():
        if label == wanted or row.get("name") == wanted:
            return row.get("gil_wait")
    candidates = [row for row in threads.values() if row.get("role") == role]
    best = max(candidates, key=lambda row: row.get("work_share") or 0.0, default=None)
    return best.get("gil_wait") if best else None


def foreign_processes(samplings: Iterable[tuple[int | None, SamplingResult]]) -> list[ForeignProcess]:
    """process_split() of each (pid, sampling result) whose sampling worked."""
    return [
        process_split(sampling.get("raw_text") or "", pid)
        for pid, sampling in samplings
        if sampling and sampling.get("status") == "ok"
    ]


def _off_cpu(
    spans: dict[str, Any], thread: str, names: tuple[str, ...], wall_ns: int
) -> dict[str, float] | None:
    data = (spans.get("threads") or {}).get(thread)
    if data is None or not wall_ns:
        return None
    chosen = [entry for name, entry in data["spans"].items() if name in names]
    self_ns = sum(entry["self_ns"] for entry in chosen)
    cpu_ns = sum(entry["cpu_ns"] for entry in chosen)
    # cpu_ns covers children too (a span's CPU clock runs across them); these spans have none but
    # lock waits, which are off-CPU themselves, so self time vs CPU time is the comparison.
    return {
        "span_share": self_ns / wall_ns,
        "off_cpu_share": max(0.0, self_ns - cpu_ns) / wall_ns,
        "off_cpu_fraction_of_spans": max(0.0, self_ns - cpu_ns) / self_ns if self_ns else 0.0,
    }
