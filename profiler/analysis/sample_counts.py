"""py-spy sample counts of several threads added into one thread's: the one pooling breakdown and foreign use.

A thread's counts are the result schema's SampleCounts: a foreign server's threads (profiler.analysis.roles.
ThreadSplit.counts) carry every key; our own sampler's (profiler.collectors.sampling.summarize_stacks) lack
work, gil, waits and by_category, which from_thread_counts fills with 0. A key a thread lacks counts 0 (a
file read back may be older); every key is in the pool, so a reader of the pool never asks whether it is there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from ..rundir.schema import SampleCounts

if TYPE_CHECKING:
    from ..collectors.sampling import ThreadCounts

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


def sum_counts(threads: Iterable[SampleCounts]) -> SampleCounts:
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


def pool_counts(threads: Iterable[SampleCounts]) -> SampleCounts | None:
    """The threads' counts added up, or None where they hold no sample."""
    out = sum_counts(threads)
    return out if out["samples"] else None


def from_thread_counts(counts: ThreadCounts) -> SampleCounts:
    """A thread's counts from our own process's sampler (collectors.sampling.summarize_stacks) in the pool's shape:
    it does not count work, GIL waits, waits or by_category, which count 0 as in a pool of foreign threads (as
    does any key a result read back lacks)."""
    return {
        "samples": counts.get("samples") or 0,
        "work": 0,
        "gil": 0,
        "native_samples": counts.get("native_samples") or 0,
        "dispatch": counts.get("dispatch") or 0,
        "categories": dict(counts.get("categories") or {}),
        "components": dict(counts.get("components") or {}),
        "waits": {},
        "by_category": {},
        "lock_components": dict(counts.get("lock_components") or {}),
        "gil_components": dict(counts.get("gil_components") or {}),
    }
