"""The process table with Ray-placed processes: keyed by (node, pid) beside the tree's rows, a lost node's processes marked, their stacks written under names two machines cannot share."""

from __future__ import annotations

from pathlib import Path

from infer_prof.profiler.analysis.classify import parse_raw
from infer_prof.profiler.collectors.sampling import summarize_stacks
from infer_prof.profiler.session.target.ray_processes import RayProcess
from infer_prof.profiler.session.target.ray_table import ray_rows, tag_tree_rows, write_ray_samples

HEAD, SECOND = "aa" * 28, "bb" * 28
RAW = "MainThread (300);work (worker.py:9);spin (worker.py:3) 12\nMainThread (300);wait (worker.py:20) 3\n"


def worker(node: str, pid: int, rank: int) -> RayProcess:
    return RayProcess(
        node,
        "10.0.0.2",
        pid,
        "RayWorkerWrapper",
        "ab" * 8,
        "01000000",
        f"model worker rank {rank}",
        "class",
        rank,
    )


def sampled(raw: str, **extra: object) -> dict[str, object]:
    return {
        "status": "ok",
        "reason": None,
        "mode": "nonblocking",
        "samples": 15,
        "raw_text": raw,
        "threads": summarize_stacks(parse_raw(raw)),
        **extra,
    }


def test_ray_rows_sit_beside_the_tree_s_keyed_by_node_and_pid() -> None:
    # one pid on two nodes: two processes, two rows
    processes = [worker(HEAD, 300, 0), worker(SECOND, 300, 1)]
    results = {(HEAD, 300): sampled(RAW), (SECOND, 300): {"status": "skipped", "reason": "node lost before"}}
    rows = ray_rows(processes, results, wall_ns=2_000_000_000, gone_nodes={SECOND})
    assert [row["key"] for row in rows] == [f"{HEAD[:8]}:300", f"{SECOND[:8]}:300"]
    head, second = rows
    assert head["sampled"] and head["samples"] == 15 and head["busy_samples"] > 0
    assert head["role"] == "model worker rank 0" and head["rank"] == 0 and head["placed_by"] == "ray"
    assert head["samples_file"] == f"samples-{HEAD[:8]}-300.txt" and head["split"]["threads"]
    assert not second["sampled"] and second["not_sampled"] == "node lost before" and second["exited"]
    tree = [{"pid": 42, "role": "API server"}]
    tag_tree_rows(tree, HEAD, "10.0.0.1")
    assert tree[0]["key"] == f"{HEAD[:8]}:42" and tree[0]["placed_by"] == "process tree"


def test_each_ray_process_s_stacks_are_written_under_its_node_and_pid(tmp_path: Path) -> None:
    processes = [worker(HEAD, 300, 0), worker(SECOND, 300, 1)]
    results = {(HEAD, 300): sampled(RAW), (SECOND, 300): sampled(RAW.replace("spin", "other"))}
    write_ray_samples(tmp_path, processes, results)
    assert (tmp_path / f"samples-{HEAD[:8]}-300.txt").read_text() == RAW
    assert "other" in (tmp_path / f"samples-{SECOND[:8]}-300.txt").read_text()
    assert (tmp_path / f"sample_labels-{SECOND[:8]}-300.csv").read_text().count("\n") >= 2


def test_without_ray_address_a_tree_process_that_runs_ray_is_named(tmp_path: Path) -> None:
    from infer_prof.profiler.session.target.ray_run import ray_hint

    for pid, maps in ((42, "7f00-7f01 r-xp 0 00:00 0 /venv/lib/ray/_raylet.so\n"), (43, "7f00 libc.so\n")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "maps").write_text(maps)
    rows = [
        {"pid": 42, "python": True, "role": "engine core"},
        {"pid": 43, "python": True, "role": "API server"},
    ]
    hint = ray_hint(rows, proc=tmp_path)
    assert hint is not None and hint["lines"][0].startswith("Ray: pid 42 (engine core) runs Ray")
    assert "--ray-address" in hint["lines"][0]
    assert ray_hint(rows[1:], proc=tmp_path) is None
