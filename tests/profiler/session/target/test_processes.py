"""The process table: which process the verdict reads, each process's split from its own samples, and the report's
one row per process."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from infer_prof.profiler.analysis.classify import parse_raw
from infer_prof.profiler.collectors.sampling import summarize_stacks
from infer_prof.profiler.session.target.processes import primary_pid, process_table
from infer_prof.profiler.session.target.tree import ProcessInfo
from infer_prof.profiler.session.target.watch import WatchedProcess
from infer_prof.reports.run.processes import processes_table

BUSY = "thread (1): MainThread;step (engine.py:10);work (engine.py:20) 9\n"
IDLE = "thread (2): Thread-1;Thread.run (threading.py:982);BaseSelector.select (selectors.py:468) 30\n"


def sampling(raw: str) -> dict[str, Any]:
    stacks = parse_raw(raw)
    return {
        "status": "ok",
        "reason": None,
        "raw_text": raw,
        "native_stacks": False,
        "engine_thread_id": None,
        "samples": sum(stack.count for stack in stacks),
        "threads": summarize_stacks(stacks),
    }


def watched(pid: int, role: str, *, python: bool = True, late: bool = False) -> WatchedProcess:
    info = ProcessInfo(
        pid=pid,
        ppid=1,
        title=f"p{pid}",
        cmdline=f"python p{pid}",
        python=python,
        role=role,
        role_source="a test",
    )
    return WatchedProcess(
        info,
        first_seen_s=1.5 if late else 0.0,
        late=late,
        not_sampled=None if python else "not a Python process",
    )


def test_the_engine_core_is_read_before_a_busier_api_server_and_helpers_come_last() -> None:
    api, engine, helper = watched(1, "API server"), watched(2, "engine core"), watched(3, "idle helper (x)")
    results = {1: sampling(BUSY * 5), 2: sampling(BUSY), 3: sampling(BUSY * 9)}
    assert primary_pid([api, engine, helper], results) == 2
    assert primary_pid([api, helper], results) == 1  # a helper never stands for the server, however busy
    assert (
        primary_pid([api, engine], results, prefer=1) == 1
    )  # our own server: its pid, which holds the spans
    assert primary_pid([api], {1: {"status": "skipped", "reason": "no ptrace"}}) is None


def test_each_process_has_its_own_split_and_the_report_one_row() -> None:
    shell, api, late = (
        watched(10, "shell", python=False),
        watched(11, "API server"),
        watched(12, "model worker", late=True),
    )
    results = {11: sampling(BUSY + IDLE), 12: sampling(BUSY)}
    table = process_table([shell, api, late], results, primary=12, wall_ns=10**9)
    by_pid = {entry["pid"]: entry for entry in table}
    assert not by_pid[10]["sampled"] and by_pid[10]["not_sampled"] == "not a Python process"
    assert (
        by_pid[11]["samples"] == 39
        and by_pid[11]["busy_samples"] == 9
        and by_pid[11]["samples_file"] == "samples-11.txt"
    )
    assert (
        by_pid[11]["split"]["engine_thread"] == "MainThread (1)"
    )  # the busy thread, not the idle one with more samples
    assert set(by_pid[11]["split"]["threads"]) == {"MainThread (1)", "Thread-1 (2)"} and by_pid[12]["primary"]
    rows = processes_table(SimpleNamespace(target={"processes": table})).rows  # type: ignore[arg-type]
    assert [row[0] for row in rows] == ["10", "11", "12 *"]
    assert (
        rows[0][3] == "not sampled: not a Python process" and rows[2][1] == "model worker (appeared at 1.5 s)"
    )
    assert rows[1][2] == "39 (9 busy)" and rows[1][3].startswith("MainThread (1): ")
    assert processes_table(SimpleNamespace(target={"processes": None})) is None  # type: ignore[arg-type]
