"""The process table of a sampled server tree: each process's role, samples and split, which one the verdict reads, and its raw samples on disk."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pandas as pd

from ...rundir.atomic import write_atomic, write_text_atomic
from ...rundir.schema import ProcessSplit, TargetProcess
from .server_split import server_breakdown, thread_table
from .watch import WatchedProcess

if TYPE_CHECKING:
    from ...collectors.sampling import SamplingResult

# Which process the run's verdict reads, best first: the one whose loop decides each step. vLLM's engine core
# runs the scheduler and the step loop; single-process servers run everything in one.
PRIMARY_ROLES = ("engine core", "API server + engine loop", "model worker", "unknown", "API server")


def split_process(sampling: SamplingResult, wall_ns: int, pid: int | None = None) -> ProcessSplit:
    """One process's split from its samples. The one call into server_split, so that the rules that pick a
    process's engine thread and read its samples can be replaced in one place."""
    breakdown, engine_thread, _notes = server_breakdown(sampling, None, wall_ns, [], pid=pid)
    samples = ((breakdown or {}).get("methods") or {}).get("samples") or {}
    return {
        "engine_thread": engine_thread if samples else None,
        "resolution": samples.get("resolution"),
        "categories": {name: share for name, share in (samples.get("categories") or {}).items() if share},
        "components": {name: share for name, share in (samples.get("components") or {}).items() if share},
        "python_leaf": samples.get("python_leaf"),
        "threads": thread_table(sampling, pid),
    }


def busy_samples(sampling: SamplingResult | None) -> int:
    """Samples that were not idle, over every thread of the process."""
    threads = (sampling or {}).get("threads") or {}
    return sum(data["samples"] - data["categories"].get("idle", 0) for data in threads.values())


def primary_pid(
    processes: list[WatchedProcess], results: Mapping[int, SamplingResult], prefer: int | None = None
) -> int | None:
    """The sampled process the run's verdict reads: `prefer` when it was sampled (our own server), else by role
    (PRIMARY_ROLES), and among one role the one with the most samples that are not idle."""
    sampled = [
        watched for watched in processes if (results.get(watched.info.pid) or {}).get("status") == "ok"
    ]
    if not sampled:
        return None
    if prefer is not None and any(watched.info.pid == prefer for watched in sampled):
        return prefer

    def rank(watched: WatchedProcess) -> tuple[int, int]:
        role = watched.info.role
        order = PRIMARY_ROLES.index(role) if role in PRIMARY_ROLES else len(PRIMARY_ROLES)  # helpers last
        return order, -busy_samples(results[watched.info.pid])

    return min(sampled, key=rank).info.pid


def process_table(
    processes: list[WatchedProcess], results: Mapping[int, SamplingResult], primary: int | None, wall_ns: int
) -> list[TargetProcess]:
    """target.processes: one entry per process seen, parents first, late children after."""
    table: list[TargetProcess] = []
    for watched in processes:
        info = watched.info
        sampling = results.get(info.pid)
        ok = (sampling or {}).get("status") == "ok"
        reason = watched.not_sampled or (None if ok else (sampling or {}).get("reason") or "not sampled")
        table.append(
            {
                **info.to_dict(),
                "late": watched.late,
                "first_seen_s": round(watched.first_seen_s, 3),
                "exited": watched.gone,
                "primary": info.pid == primary,
                "sampled": ok,
                "not_sampled": None if ok else reason,
                "mode": (sampling or {}).get("mode")
                if ok
                else None,  # "native" or "nonblocking" (Python frames only)
                "samples": (sampling or {}).get("samples", 0) if ok else 0,
                "busy_samples": busy_samples(sampling) if ok else 0,
                "samples_file": f"samples-{info.pid}.txt"
                if ok and (sampling or {}).get("raw_text")
                else None,
                "split": split_process(sampling, wall_ns, info.pid) if ok and sampling else None,
            }
        )
    return table


def _write_csv(table: pd.DataFrame, handle: IO[str]) -> None:
    table.to_csv(handle, index=False)


def write_process_samples(out_dir: Path, results: Mapping[int, SamplingResult]) -> None:
    """samples-<pid>.txt: each sampled process's py-spy stacks, beside the run's samples.txt (the primary's), and
    sample_labels-<pid>.csv, each stack's category and component (the report's flame graph per process)."""
    from ..record import sample_labels

    for pid, sampling in results.items():
        if sampling.get("status") == "ok" and sampling.get("raw_text"):
            write_text_atomic(Path(out_dir) / f"samples-{pid}.txt", sampling["raw_text"])
            labels = sample_labels(sampling["raw_text"], engine_thread_id=-1)  # no thread is our engine's
            write_atomic(Path(out_dir) / f"sample_labels-{pid}.csv", functools.partial(_write_csv, labels))
