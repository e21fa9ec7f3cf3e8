"""py-spy sample counts of several threads added into one thread's: the one pooling breakdown and foreign use.

A thread's counts are profiler.collectors.sampling.summarize_stacks's shape (samples, native_samples,
dispatch and the categories, components, lock_components and gil_components tables), to which a foreign
server's threads (profiler.analysis.roles.ThreadSplit.counts) add work, gil, waits and by_category. A key
a thread lacks counts 0; every key is in the pool, so a reader of the pool never asks whether it is there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

Total = Literal["samples", "work", "gil", "native_samples", "dispatch"]
Table = Literal["categories", "components", "waits", "by_category", "lock_components", "gil_components"]
TOTALS: tuple[Total, ...] = ("samples", "work", "gil", "native_samples", "dispatch")
TABLES: tuple[Table, ...] = (
    "categories",
    "components",
    "waits",
    "by_category",
    "lock_components",
    "gil_components",
)


class SampleCounts(TypedDict):
    """Sample counts pooled over threads: the input of breakdown.samples_split. Counts are floats since a pool
    that takes turns running one loop keeps a fraction of its idle samples (foreign.loop_counts)."""

    samples: float
    work: float  # samples that are not waits (roles.ThreadSplit.work); 0 where the threads did not say
    gil: float  # GIL waits, counted as work
    native_samples: float
    dispatch: float
    categories: dict[str, float]
    components: dict[str, float]
    waits: dict[str, float]  # wait kind -> samples (idle, queueing, worker, client, lock)
    by_category: dict[str, float]  # "category/component" -> samples
    lock_components: dict[str, float]
    gil_components: dict[str, float]


def sum_counts(threads: Iterable[Mapping[str, Any]]) -> SampleCounts:
    """The threads' counts added up, as one thread's (all zero for no thread)."""
    out: SampleCounts = {
        "samples": 0,
        "work": 0,
        "gil": 0,
        "native_samples": 0,
        "dispatch": 0,
        "categories": {},
        "components": {},
        "waits": {},
        "by_category": {},
        "lock_components": {},
        "gil_components": {},
    }
    for counts in threads:
        for total in TOTALS:
            out[total] += counts.get(total) or 0
        for table in TABLES:
            into = out[table]
            for name, value in (counts.get(table) or {}).items():
                into[name] = into.get(name, 0) + value
    return out


def pool_counts(threads: Iterable[Mapping[str, Any]]) -> SampleCounts | None:
    """The threads' counts added up, or None where they hold no sample."""
    out = sum_counts(threads)
    return out if out["samples"] else None
