"""The process table's rows for processes Ray placed, keyed by (node, pid) beside the tree's, and their stacks on disk."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pandas as pd

from ...rundir.atomic import write_atomic, write_text_atomic
from ...rundir.schema import TargetProcess
from .processes import busy_samples, split_process
from .ray_processes import RayProcess

if TYPE_CHECKING:
    from .ray_agents import RaySamplingResult


def samples_name(process: RayProcess) -> str:
    """samples-<node>-<pid>.txt: a pid alone may name two processes on two machines."""
    return f"samples-{process.node_id[:8]}-{process.pid}.txt"


def ray_rows(
    processes: list[RayProcess],
    results: Mapping[tuple[str, int], RaySamplingResult],
    wall_ns: int,
    *,
    gone_nodes: Collection[str] = (),
) -> list[TargetProcess]:
    """target.processes entries for Ray-placed processes, in the tree rows' shape plus node_id, node_ip, key,
    placed_by, actor_class, actor_id, job_id and rank."""
    rows: list[TargetProcess] = []
    for process in processes:
        sampling: RaySamplingResult = results.get((process.node_id, process.pid)) or {}
        ok = sampling.get("status") == "ok"
        rows.append(
            {
                "pid": process.pid,
                "ppid": None,  # a raylet's child on its node: not the server's
                "title": process.actor_class,
                "cmdline": f"Ray actor {process.actor_class} {process.actor_id[:12]} of job {process.job_id}",
                "python": True,
                "listening": False,
                "role": process.role,
                "role_source": process.role_source,
                "late": False,
                "first_seen_s": 0.0,
                "exited": process.node_id in gone_nodes,
                "primary": False,
                "sampled": ok,
                "not_sampled": None if ok else sampling.get("reason") or "not sampled",
                "mode": sampling.get("mode") if ok else None,
                "samples": sampling.get("samples", 0) if ok else 0,
                "busy_samples": busy_samples(sampling) if ok else 0,
                "samples_file": samples_name(process) if ok and sampling.get("raw_text") else None,
                "split": split_process(sampling, wall_ns, process.pid) if ok else None,
                "partial": bool(sampling.get("partial")),
                "placed_by": "ray",
                **process.tags(),
            }
        )
    return rows


def tag_tree_rows(rows: list[TargetProcess], node_id: str, node_ip: str) -> None:
    """The tree's rows, read on this machine, named by the node infer-prof joined from it."""
    for row in rows:
        row.setdefault("node_id", node_id)
        row.setdefault("node_ip", node_ip)
        row.setdefault("key", f"{node_id[:8]}:{row['pid']}")
        row.setdefault("placed_by", "process tree")


def _write_csv(table: pd.DataFrame, handle: IO[str]) -> None:
    table.to_csv(handle, index=False)


def write_ray_samples(
    out_dir: Path, processes: list[RayProcess], results: Mapping[tuple[str, int], RaySamplingResult]
) -> None:
    """Each sampled Ray process's stacks and their labels, as processes.write_process_samples writes the tree's."""
    from ..record import sample_labels

    for process in processes:
        sampling: RaySamplingResult = results.get((process.node_id, process.pid)) or {}
        if sampling.get("status") == "ok" and sampling.get("raw_text"):
            name = samples_name(process)
            write_text_atomic(Path(out_dir) / name, sampling["raw_text"])
            labels = sample_labels(sampling["raw_text"], engine_thread_id=-1)
            label_name = name.replace("samples-", "sample_labels-", 1).replace(".txt", ".csv")
            write_atomic(Path(out_dir) / label_name, functools.partial(_write_csv, labels))
