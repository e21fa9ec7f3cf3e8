"""The probe's files of Ray-placed workers on other nodes, without a cluster: the agent finds them by each process's own
environment (a /proc of its own), hands them over with its node's perf_counter, the driver moves every time column onto
its clock and merges them keyed by (node, pid); a node whose agent cannot send them is named."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from infer_prof.profiler.analysis.clock_offsets import ClockRound
from infer_prof.profiler.analysis.probe_spans import analyse_probe
from infer_prof.profiler.session.target import inject, ray_agent, ray_agents
from infer_prof.profiler.session.target.ray_agents import DONE, NodeAgents, NodeRun
from infer_prof.profiler.session.target.ray_probe import NodePid, clock_line, merge_found, node_entries
from infer_prof.profiler.session.target.ray_processes import RayProcess
from infer_prof.profiler.session.target.ray_run import RayRun, probe_folder

DRIVER, OTHER = "aa" * 28, "bb" * 28
# The other node booted 7000 s before the driver: its perf_counter reads that far ahead.
AHEAD_NS = 7_000_000_000_000


def fake_proc(root: Path, processes: dict[int, tuple[int, str | None]]) -> Path:
    """A /proc holding `processes`: pid -> (ppid, the probe folder its environment names, or None)."""
    proc = root / "proc"
    for pid, (ppid, folder) in processes.items():
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "stat").write_text(f"{pid} (python3) S {ppid} 1 1 0\n")
        env = [b"PATH=/usr/bin"] + ([f"{ray_agent.PROBE_DIR_ENV}={folder}".encode()] if folder else [])
        (proc / str(pid) / "environ").write_bytes(b"\0".join(env) + b"\0")
    return proc


def probe_folder_with(folder: Path, pid: int, spans: list[list[int]], **more: list[list[int]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "probes.json").write_text('{"probes": []}')
    (folder / f"probe-{pid}.json").write_text(
        json.dumps({"pid": pid, "clock": "perf_counter_ns", "patched": []})
    )
    (folder / f"spans-{pid}.tsv").write_text("".join("\t".join(map(str, row)) + "\n" for row in spans))
    for stem, rows in more.items():
        (folder / f"{stem}-{pid}.tsv").write_text("".join("\t".join(map(str, row)) + "\n" for row in rows))


def test_the_agent_reads_the_files_of_its_pids_and_their_children_from_the_folder_their_environment_names(
    tmp_path: Path,
) -> None:
    assert ray_agent.PROBE_DIR_ENV == inject.PROBE_DIR_ENV  # the agent imports nothing of infer-prof
    named = tmp_path / "node-probe"
    for pid in (40, 41, 99):
        probe_folder_with(named, pid, [[1, 0, 10, 20, 1]])
    proc = fake_proc(tmp_path, {40: (1, str(named)), 41: (40, str(named)), 99: (1, str(named))})
    answer = ray_agent.read_probe_files([40], [str(tmp_path / "not-on-this-node")], 1 << 20, proc)
    assert answer["pids"] == [40, 41]  # the worker and its child, not another process of the node
    assert sorted(answer["files"]) == [40, 41] and answer["folders"] == [str(named)]
    assert (
        set(answer["files"][40]) == {"probe", "spans"} and answer["files"][40]["spans"] == "1\t0\t10\t20\t1\n"
    )
    cut = ray_agent.read_probe_files([40], [], 90, proc)  # less than both processes' files
    assert any("cut at 90 bytes" in note for note in cut["notes"])
    assert all(one["spans"].endswith("\n") for one in cut["files"].values() if "spans" in one)
    assert sum(len(text) for one in cut["files"].values() for text in one.values()) <= 90


def test_the_driver_finds_the_probe_folder_its_server_was_started_with(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "probe"
    probe_folder_with(folder, 1, [])
    proc = fake_proc(tmp_path, {10: (1, None), 11: (10, str(folder)), 12: (10, str(tmp_path / "elsewhere"))})
    assert probe_folder([10, 12, 11], proc) == str(folder)  # a folder without probes.json is no probe's
    assert probe_folder([10], proc) is None


def rounds(
    offset_ns: int, at_ns: int, trips_ns: tuple[int, ...] = (400_000, 100_000, 300_000)
) -> list[ClockRound]:
    """Rounds against a node whose clock reads `offset_ns` ahead of ours, the node answering mid-trip."""
    return [ClockRound(at_ns, at_ns + trip // 2 + offset_ns, at_ns + trip) for trip in trips_ns]


def test_records_move_onto_the_driver_s_clock_by_the_offset_measured_at_start_and_stop() -> None:
    # the offset moves 2 ms between start (driver 1 s) and stop (driver 11 s): the monotonic clocks' rates differ
    line = clock_line(rounds(AHEAD_NS, 1_000_000_000), rounds(AHEAD_NS + 2_000_000, 11_000_000_000))
    assert line.uncertainty_ns == 50_000 and line.drift_ns == 2_000_000
    at = np.array([1_000_000_000, 6_000_000_000, 11_000_000_000, 20_000_000_000]) + AHEAD_NS
    # the offsets hold at the shortest rounds' middles (driver 1.00005 s and 11.00005 s): halfway between, half the
    # drift; past the stop, the stop's offset
    np.testing.assert_array_equal(
        line.to_driver(at), [1_000_000_000, 5_999_000_010, 10_998_000_010, 19_998_000_000]
    )
    files = {
        321: {
            "probe": json.dumps({"pid": 321, "patched": []}),
            "spans": f"7\t0\t{AHEAD_NS + 2_000_000_000}\t{AHEAD_NS + 2_004_000_000}\t1\n",
            "sizes": f"{AHEAD_NS + 2_004_000_000}\t16\n",
            "turns": f"{AHEAD_NS + 1_999_000_000}\t49\n",
            "delays": "\t".join(str(AHEAD_NS + 2_000_000_000 + i) for i in range(6)) + "\t500\t97\n",
        },
        322: {"sizes": "5\t1\n"},  # neither status nor spans: no process of the probe's
    }
    found = node_entries(files, line, OTHER)
    assert list(found) == [NodePid(OTHER, 321)]
    entry = found[NodePid(OTHER, 321)]
    # 2 s on the driver's clock is a tenth of the way from start to stop: a tenth of the drift (0.2 ms) less
    np.testing.assert_array_equal(entry["records"], [[7, 0, 1_999_800_010, 2_003_799_210, 1]])
    assert entry["sizes"].tolist() == [[2_003_799_210, 16]]
    assert entry["turns"].tolist() == [[1_998_800_210, 49]]
    assert entry["delays"][0, 2:6].tolist() == [1_999_800_012 + i for i in range(4)]
    assert entry["delays"][0, 6:].tolist() == [500, 97]
    thread_and_index = [AHEAD_NS + 2_000_000_000, AHEAD_NS + 2_000_000_001]
    assert entry["delays"][0, :2].tolist() == thread_and_index  # not times: left as they are
    assert entry["status"]["pid"] == 321


def test_a_pid_on_another_node_is_another_process() -> None:
    here, there, again = 1234, NodePid(OTHER, 1234), NodePid(OTHER, 1234)
    assert there != here and here != there and there == again and hash(there) == hash(again)
    assert len({here, there, again, NodePid(DRIVER, 1234)}) == 3
    assert [int(pid) for pid in sorted([NodePid(OTHER, 5), 9, 3])] == [3, 5, 9]  # sorted as the number it is
    assert json.dumps({"pid": there}) == '{"pid": 1234}' and str(there) == f"{OTHER[:8]}:1234"
    copied = copy.deepcopy({"steps": {"pid": there}})["steps"]["pid"]  # as the result is copied when written
    assert copied == there and copied.node_id == OTHER and pickle.loads(pickle.dumps(there)) == there


def test_merge_keeps_both_machines_pid_and_moves_a_shared_host_node_s_processes_to_their_node() -> None:
    def entry(start: int) -> dict[str, Any]:
        return {"status": {"pid": 1}, "records": np.array([[1, 0, start, start + 10, 1]], dtype=np.int64)}

    local = {100: entry(1), 200: entry(2), 300: entry(3)}
    sent = {
        OTHER: {NodePid(OTHER, 100): entry(50), NodePid(OTHER, 200): entry(60)},
        DRIVER: {NodePid(DRIVER, 100): entry(99), NodePid(DRIVER, 400): entry(40)},
    }
    merged = merge_found(local, sent, driver_node=DRIVER, shared_host={})
    # the driver's own node: its local read, not the copy its agent sent; a file found elsewhere only by its agent
    assert merged[100]["records"][0, 2] == 1 and merged[400]["records"][0, 2] == 40
    assert merged[NodePid(OTHER, 100)]["records"][0, 2] == 50 and len(merged) == 6
    shared = merge_found(local, {}, driver_node=DRIVER, shared_host={OTHER: [300], DRIVER: [100]})
    # one host: the file of the node's process read here is the node's
    assert sorted(map(str, shared)) == ["100", "200", f"{OTHER[:8]}:300"]


def run_with(nodes: dict[str, NodeRun]) -> RayRun:
    agents = SimpleNamespace(nodes=nodes)
    return RayRun(None, None, False, "", None, agents, DRIVER, "10.0.0.1")  # type: ignore[arg-type]


def test_the_probe_section_reads_a_worker_of_each_node_with_its_node_and_role() -> None:
    worker = NodeRun(OTHER, "10.0.0.2", [100], status=DONE, hostname="other")
    worker.perf_start, worker.perf_stop = rounds(AHEAD_NS, 0), rounds(AHEAD_NS, 10_000_000_000)
    worker.probe = {
        "files": {100: {"probe": "{}", "spans": f"1\t0\t{AHEAD_NS + 3_000_000}\t{AHEAD_NS + 7_000_000}\t1\n"}}
    }
    run = run_with({OTHER: worker})
    local = {
        100: {
            "status": {"patched": []},
            "records": np.array([[1, 0, 1_000_000, 2_000_000, 1]], dtype=np.int64),
        }
    }
    found = run.probe_found(local)
    rows = [
        {"pid": 100, "node_id": DRIVER, "placed_by": "process tree", "role": "API server"},
        {"pid": 100, "node_id": OTHER, "placed_by": "ray", "role": "model worker rank 1"},
    ]
    table = {run.probe_key(row): row for row in rows}
    probes = [{"component": "model", "module": "m", "function": "f"}]
    section = analyse_probe(
        probes, found, (0, 10_000_000), roles={k: r["role"] for k, r in table.items()}, sampled=table
    )
    run.name_probe_processes(section["processes"])  # type: ignore[arg-type]
    by_key = {entry.get("key", str(entry["pid"])): entry for entry in section["processes"]}
    assert (
        by_key[f"{OTHER[:8]}:100"]["role"] == "model worker rank 1" and by_key["100"]["role"] == "API server"
    )
    other = by_key[f"{OTHER[:8]}:100"]
    assert (
        other["node_id"] == OTHER and type(other["pid"]) is int and other["components"]["model"]["calls"] == 1
    )
    assert other["components"]["model"]["ms"] == pytest.approx(4.0)  # inside the window once aligned


class Ref:
    def __init__(self, call: Callable[[], Any]) -> None:
        self.call = call


class Handle:
    """An agent that answers at once: its clock `ahead_ns` ahead of the driver's, its probe files, or a failure."""

    def __init__(
        self, ahead_ns: int, files: dict[int, dict[str, str]] | None, clock: Callable[[], int]
    ) -> None:
        def method(call: Callable[..., Any]) -> Any:
            return SimpleNamespace(remote=lambda *args: Ref(lambda: call(*args)))

        def probe_files(pids: list[int], folders: list[str], max_bytes: int) -> dict[str, Any]:
            if files is None:
                raise RuntimeError("ObjectStoreFullError: the node's object store has no room\nmore")
            return {
                "hostname": "h",
                "pids": pids,
                "folders": folders,
                "looked_in": folders,
                "files": files,
                "notes": [],
            }

        self.hello = method(lambda: {"hostname": "h", "py_spy": "/bin/py-spy", "py_spy_where": "on PATH"})
        self.clock = method(lambda: clock() + ahead_ns)
        self.perf_clock = method(lambda: clock() + ahead_ns)
        self.start = self.collect = self.stop = method(lambda *args: [])
        self.probe_files = method(probe_files)


class FakeRay:
    def __init__(self, handles: dict[str, Handle]) -> None:
        self.handles = handles

    def remote(self, cls: type) -> Any:
        fake = self

        def options(*, scheduling_strategy: Any, **_: Any) -> Any:
            return SimpleNamespace(remote=lambda command: fake.handles[scheduling_strategy.node_id])

        return SimpleNamespace(options=options)

    def wait(self, refs: list[Ref], *, num_returns: int, timeout: float) -> tuple[list[Ref], list[Ref]]:
        return refs, []

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        return ref.call()

    def kill(self, handle: Handle, no_restart: bool = True) -> None:
        pass


def test_each_node_sends_its_probe_files_or_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_agents, "PROBE_FLUSH_S", 0.0)
    ticks = iter(range(10**9, 10**12, 100_000))
    clock = lambda: next(ticks)  # noqa: E731
    ids = {name: f"{index + 1:02x}" * 28 for index, name in enumerate(("sends", "full", "bare"))}
    spans = {7: {"probe": "{}", "spans": "1\t0\t5\t6\t1\n"}}
    ray = FakeRay(
        {
            ids["sends"]: Handle(AHEAD_NS, spans, clock),
            ids["full"]: Handle(0, None, clock),
            ids["bare"]: Handle(0, {}, clock),
        }
    )
    processes = [
        RayProcess(ids[name], "10.0.0.9", 7, "RayWorkerWrapper", "a", "01", "model worker", "class")
        for name in ids
    ]
    agents = NodeAgents(
        ray,
        processes,
        rate_hz=50,
        native_stacks=False,
        cpus=0,
        poll_s=0.05,
        clock=clock,
        perf_clock=clock,
        free_cpus=lambda: None,
        probe_folder="/run/probe",
    )
    agents.start()
    agents.stop()
    entries = {entry["node_id"]: entry for entry in agents.section()}
    sends, full, bare = (entries[ids[name]] for name in ("sends", "full", "bare"))
    assert sends["probe_processes"] == 1 and sends["probe_reason"] is None
    assert sends["probe_clock_uncertainty_ms"] == pytest.approx(0.1)
    assert sends["probe_clock_drift_ms"] == pytest.approx(0.0)
    assert full["probe_processes"] == 0
    assert full["probe_reason"] == (
        f"the probe's files on node {ids['full'][:8]} (10.0.0.9) could not be read or sent: "
        "ObjectStoreFullError: the node's object store has no room"
    )
    assert "no probe files" in bare["probe_reason"] and "runtime_env env_vars" in bare["probe_reason"]
    run = run_with(agents.nodes)
    run.agents = agents
    lines = run.probe_lines(agents.section())
    assert any("could not be read or sent" in line for line in lines)
    assert any(f"1 process(es) on {ids['sends'][:8]}" in line and "+- 0.100 ms" in line for line in lines)
    found = run.probe_found({})
    assert list(found) == [NodePid(ids["sends"], 7)]
