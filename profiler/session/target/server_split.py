"""The time split of a server process from py-spy samples (any Python server) and, for `infer-prof serve`, its spans.

The engine thread of our server is named; another engine's busiest thread stands in for it (the one
with the most non-idle samples), and each thread's own split is reported beside it, with the share
of its samples spent waiting for the GIL when the stacks are native.
"""

from __future__ import annotations

from typing import Any

from engine.engine import ENGINE_THREAD_NAME as ENGINE_THREAD
from profiler.analysis.breakdown import PROFILER_THREADS, build_breakdown
from profiler.analysis.classify import is_gil_wait, parse_raw
from profiler.serve.profiling import API_THREAD_NAME


def busiest_thread(threads: dict[str, Any]) -> str | None:
    """The thread with the most samples that are not idle."""
    scored = {name: data["samples"] - data["categories"].get("idle", 0) for name, data in threads.items()
              if name not in PROFILER_THREADS}  # fmt: skip
    return max(scored, key=lambda name: scored[name]) if scored else None


def gil_waits(raw_text: str) -> dict[str, int]:
    """Per thread name, how many samples were waiting to take the GIL (native stacks only)."""
    counts: dict[str, int] = {}
    for stack in parse_raw(raw_text):
        if stack.thread_name and is_gil_wait(stack.frames):
            counts[stack.thread_name] = counts.get(stack.thread_name, 0) + stack.count
    return counts


def thread_table(sampling: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each sampled thread's split: shares of its own samples by category and component, and GIL waits."""
    gil = gil_waits(sampling.get("raw_text") or "") if sampling.get("native_stacks") else {}
    table = {}
    for name, data in sorted(sampling.get("threads", {}).items(), key=lambda item: -item[1]["samples"]):
        total = data["samples"]
        if not total:
            continue
        table[name] = {
            "samples": total,
            "categories": {key: count / total for key, count in data["categories"].items()},
            "components": {key: count / total for key, count in data["components"].items()},
            "gil_wait": gil.get(name, 0) / total if sampling.get("native_stacks") else None,
        }
    return table


def server_breakdown(
    sampling: dict[str, Any] | None, window: dict[str, Any] | None, wall_ns: int, native_components: list[str],
) -> tuple[dict[str, Any] | None, str, list[str]]:  # fmt: skip
    """(breakdown, engine thread name, notes) from what was measured; breakdown None when nothing was."""
    results: dict[str, Any] = {}
    notes: list[str] = []
    if window is not None:
        results.update(window["collector_results"])
        wall_ns = window.get("wall_ns") or wall_ns
    if sampling is not None and sampling.get("status") == "ok":
        results["sampling"] = sampling
    if not results:
        return None, ENGINE_THREAD, notes
    engine_thread = ENGINE_THREAD
    threads = (sampling or {}).get("threads") or {}
    if window is None and threads and ENGINE_THREAD not in threads:
        engine_thread = busiest_thread(threads) or ENGINE_THREAD
        notes.append(f"no thread is named {ENGINE_THREAD!r} (not infer-prof serve): the busiest thread, "
                     f"{engine_thread!r}, stands in for the engine thread")  # fmt: skip
    breakdown = build_breakdown(results, engine_thread_name=engine_thread, wall_ns=wall_ns,
                                native_components=native_components)  # fmt: skip
    breakdown["notes"] = notes + breakdown["notes"]
    return breakdown, engine_thread, notes


def gil_section(window: dict[str, Any] | None, threads: dict[str, dict[str, Any]], engine_thread: str) -> dict[str, Any] | None:
    """GIL contention between the API layer and the engine thread, by each method that can see it.

    samples (native stacks): the share of each thread's samples waiting to take the GIL; spans: wall
    minus CPU time inside pure-Python spans (api, scheduler, kv_alloc, detokenize on the engine
    thread; api and tokenize on the event loop), an upper bound on GIL waits (it includes waiting for
    a core on a busy machine).
    """
    section: dict[str, Any] = {}
    samples = {name: row["gil_wait"] for name, row in threads.items() if row["gil_wait"] is not None}
    if samples:
        section["samples"] = {"engine_thread": samples.get(engine_thread), "api_thread": samples.get(API_THREAD_NAME),
                              "by_thread": samples}  # fmt: skip
    if window is not None:
        spans = window["collector_results"].get("spans") or {}
        wall = window.get("wall_ns") or 0
        section["spans_off_cpu"] = {
            "engine_thread": _off_cpu(spans, ENGINE_THREAD, ("api", "scheduler", "kv_alloc", "detokenize", "queue"), wall),
            "api_thread": _off_cpu(spans, API_THREAD_NAME, ("api", "tokenize"), wall),
        }  # fmt: skip
    return section or None


def _off_cpu(spans: dict[str, Any], thread: str, names: tuple[str, ...], wall_ns: int) -> dict[str, float] | None:
    data = (spans.get("threads") or {}).get(thread)
    if data is None or not wall_ns:
        return None
    chosen = [entry for name, entry in data["spans"].items() if name in names]
    self_ns = sum(entry["self_ns"] for entry in chosen)
    cpu_ns = sum(entry["cpu_ns"] for entry in chosen)
    # cpu_ns covers children too (a span's CPU clock runs across them); these spans have none but
    # lock waits, which are off-CPU themselves, so self time vs CPU time is the comparison.
    return {"span_share": self_ns / wall_ns, "off_cpu_share": max(0.0, self_ns - cpu_ns) / wall_ns,
            "off_cpu_fraction_of_spans": max(0.0, self_ns - cpu_ns) / self_ns if self_ns else 0.0}  # fmt: skip
