"""The engine's own figures (steps, preemptions, KV blocks, batch, torch threads) as a table."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ....profiler.rundir.schema import ThreadFigures
from ...format import fmt_number, fmt_pct
from .table import Table


def engine_table(result: RunResult) -> Table:
    engine = result.engine or {}
    table = Table("Engine", ["figure", "value"])
    for name in ("steps", "preemptions", "blocks_total", "blocks_free_at_end"):
        if name in engine:
            table.rows.append([name.replace("_", " "), fmt_number(engine[name])])
    for name in ("batch_size", "kv_utilization", "fragmentation_slots"):
        stats = engine.get(name)
        if isinstance(stats, dict):
            show = fmt_pct if name == "kv_utilization" else fmt_number
            table.rows.append(
                [
                    f"{name.replace('_', ' ')} mean / max",
                    f"{show(stats.get('mean'))} / {show(stats.get('max'))}",
                ]
            )
    threads = engine.get("threads")
    if isinstance(threads, dict) and threads.get("threads"):
        table.rows.append(["torch threads", threads_text(threads)])
    for name, value in (result.counters or {}).items():
        table.rows.append([name.replace("_", " "), fmt_number(value)])
    overhead = result.overhead or {}
    if overhead.get("throughput_ratio") is not None:
        table.rows.append(["profiling overhead (throughput ratio)", fmt_number(overhead["throughput_ratio"])])
    if not table.rows:
        table.note = "the run recorded no engine figures"
    return table


def threads_text(threads: ThreadFigures) -> str:
    """engine.thread_governor's record in words: '2', or '2, 1 for 3.2 s in 2 switches (other work wanted the cores)'."""
    text = fmt_number(threads.get("threads"))
    if threads.get("switches"):
        text += (
            f", 1 for {fmt_number(threads.get('one_thread_s'), 's')} in {fmt_number(threads['switches'])} "
            "switches (other work wanted the cores)"
        )
    return text
