"""The per-node sampling agents without a cluster: the agent itself run here against a live Python process (real py-spy,
stopped mid-chunk), and the driver's side against a fake Ray whose nodes fail each way a node can: not placed, no
free CPU, no py-spy, lost mid-run (its earlier chunks kept), each named while the rest are sampled."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from infer_prof.profiler.collectors.sampling import find_py_spy, py_spy_command
from infer_prof.profiler.session.target import ray_agent
from infer_prof.profiler.session.target.ray_agents import (
    DIED,
    DONE,
    NO_CPU,
    NO_PY_SPY,
    NOT_PLACED,
    NodeAgents,
    agent_cpus,
)
from infer_prof.profiler.session.target.ray_processes import RayProcess

BUSY = "import time\ndef spin_for_the_agent():\n    while True:\n        sum(i * i for i in range(500))\nspin_for_the_agent()\n"
NEEDS_PY_SPY = pytest.mark.skipif(find_py_spy() is None, reason="py-spy is not installed")


@pytest.fixture
def busy_pid() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", BUSY])
    time.sleep(0.3)  # its interpreter up before py-spy attaches
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def agent_command(native: bool = False) -> list[str]:
    command = py_spy_command(
        "py-spy", 0, ray_agent.OUTPUT_SLOT, rate=50, native_stacks=native, idle=True, gil=False, duration_s=30
    )
    command[command.index("0")] = ray_agent.PID_SLOT
    return command


@NEEDS_PY_SPY
def test_the_agent_samples_a_live_process_and_hands_over_its_chunk_when_stopped(busy_pid: int) -> None:
    agent = ray_agent.NodeAgent(agent_command())
    hello = agent.hello()
    assert hello["py_spy"] and hello["agent_pid"] > 0
    agent.start([busy_pid, 999_999_999])  # one pid that is no process: left alone, not waited for
    time.sleep(1.5)
    assert agent.collect() == []  # the 30 s chunk is still running
    chunks = agent.stop()
    ours = [chunk for chunk in chunks if chunk["pid"] == busy_pid]
    assert len(ours) == 1 and ours[0]["error"] is None and not ours[0]["native"]
    assert "spin_for_the_agent" in ours[0]["raw_text"]
    assert ours[0]["started_ns"] < ours[0]["ended_ns"]
    assert agent.folder is not None and not agent.folder.exists()  # nothing left on the node


def test_a_node_without_py_spy_says_where_it_looked(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(ray_agent.shutil, "which", lambda name: None)
    monkeypatch.setattr(ray_agent.sys, "executable", str(tmp_path / "bin" / "python"))
    path, where = ray_agent.find_py_spy()
    assert path is None and "py-spy is not on PATH nor beside this node's Python" in where
    assert "pip install py-spy" in where


def test_py_spy_s_failure_is_one_line_with_the_ptrace_hint() -> None:
    log = "Error: Failed to attach\nCaused by:\n0: Operation not permitted (os error 1)\n"
    line = ray_agent.failure_line(log, 7)
    assert line.startswith("py-spy could not attach to pid 7: Failed to attach (Operation not permitted")
    assert "ptrace" in line and "\n" not in line


def test_the_agents_cpu_can_be_set_and_is_checked() -> None:
    assert agent_cpus({}) == 0.1 and agent_cpus({"INFER_PROF_RAY_AGENT_CPUS": "0"}) == 0.0
    from infer_prof.errors import OptionError

    with pytest.raises(OptionError, match="INFER_PROF_RAY_AGENT_CPUS=lots"):
        agent_cpus({"INFER_PROF_RAY_AGENT_CPUS": "lots"})


# -- the driver's side, against a fake Ray ------------------------------------------------------------------


class Ref:
    def __init__(self, call: Callable[[], Any], pending: bool = False) -> None:
        self.call, self.pending = call, pending


class Method:
    def __init__(self, call: Callable[..., Any], pending: bool = False) -> None:
        self.call, self.pending = call, pending

    def remote(self, *args: Any) -> Ref:
        return Ref(lambda: self.call(*args), self.pending)


class Handle:
    """An agent on a fake node: the real NodeAgent where the node works, else the way it fails."""

    def __init__(self, node: str, how: str, command: list[str], clock: Callable[[], int]) -> None:
        self.killed = False
        agent = ray_agent.NodeAgent(command)
        self.agent = agent
        pending = how == "pending"
        polls = {"count": 0}

        def hello() -> dict[str, Any]:
            facts = agent.hello()
            return (
                {**facts, "py_spy": None, "py_spy_where": "py-spy is not on PATH"}
                if how == "no py-spy"
                else facts
            )

        def collect() -> list[dict[str, Any]]:
            polls["count"] += 1
            if how == "dies" and polls["count"] > 1:
                raise RuntimeError("The actor died unexpectedly before finishing this task (node lost)")
            if how == "dies":  # one chunk of samples got through before the node went
                return [
                    {
                        "pid": 11,
                        "chunk": 1,
                        "native": False,
                        "started_ns": 0,
                        "ended_ns": 1_000,
                        "raw_text": "MainThread (11);loop (engine.py:3) 5\n",
                        "samples": 5,
                        "errors": 0,
                        "error": None,
                    }
                ]
            return agent.collect()

        self.hello = Method(hello, pending)
        self.clock = Method(lambda: clock() + 5_000_000)  # this node's clock runs 5 ms ahead of the driver's
        self.start = Method(agent.start)
        self.collect = Method(collect)
        self.stop = Method(agent.stop if how != "dies" else collect)


class FakeRay:
    def __init__(self, nodes: dict[str, str], clock: Callable[[], int]) -> None:
        self.nodes, self.clock, self.handles = nodes, clock, {}

    def remote(self, cls: type) -> Any:
        fake = self

        class Options:
            def options(self, *, scheduling_strategy: Any, **_: Any) -> Any:
                node = scheduling_strategy.node_id
                assert scheduling_strategy.soft is False  # pinned: never run elsewhere

                class Creator:
                    def remote(self, command: list[str]) -> Handle:
                        fake.handles[node] = Handle(node, fake.nodes[node], command, fake.clock)
                        return fake.handles[node]

                return Creator()

        return Options()

    def wait(self, refs: list[Ref], *, num_returns: int, timeout: float) -> tuple[list[Ref], list[Ref]]:
        return [ref for ref in refs if not ref.pending], [ref for ref in refs if ref.pending]

    def get(self, ref: Ref, timeout: float | None = None) -> Any:
        return ref.call()

    def kill(self, handle: Handle, no_restart: bool = True) -> None:
        handle.killed = True


def process(node: str, pid: int) -> RayProcess:
    return RayProcess(
        node, f"10.0.0.{ord(node[0])}", pid, "RayWorkerWrapper", "a", "01", "model worker", "class"
    )


@NEEDS_PY_SPY
def test_every_node_s_outcome_is_named_and_the_working_one_is_sampled(busy_pid: int) -> None:
    ticks = iter(range(10**9, 10**12, 100_000))  # the driver's clock: 100 us a reading
    hows = {"ok": "ok", "pending": "pending", "full": "ok", "bare": "no py-spy", "dies": "dies"}
    ids = {name: f"{index + 1:02x}" * 28 for index, name in enumerate(hows)}  # Ray's node ids: 56 hex digits
    ray = FakeRay({ids[name]: how for name, how in hows.items()}, clock=lambda: next(ticks))
    pids = {"ok": busy_pid, "pending": 2, "full": 3, "bare": 4, "dies": 11}
    agents = NodeAgents(
        ray,
        [process(ids[name], pid) for name, pid in pids.items()],
        rate_hz=50,
        native_stacks=False,
        cpus=0.5,
        place_timeout_s=0.1,
        poll_s=0.2,
        clock=lambda: next(ticks),
        free_cpus=lambda: (
            {ids["full"]: 0.25} | {ids[name]: 1.0 for name in ("ok", "pending", "bare", "dies")}
        ),
    )
    agents.start()
    time.sleep(1.0)
    agents.stop()
    by_node = {name: entry for name in hows for entry in agents.section() if entry["node_id"] == ids[name]}
    assert {name: entry["agent"] for name, entry in by_node.items()} == {
        "ok": DONE,
        "pending": NOT_PLACED,
        "full": NO_CPU,
        "bare": NO_PY_SPY,
        "dies": DIED,
    }
    assert "within 0.1 s" in by_node["pending"]["reason"]
    assert "has 0.25 CPU free and its sampling agent asks 0.5" in by_node["full"]["reason"]
    assert "INFER_PROF_RAY_AGENT_CPUS=0" in by_node["full"]["reason"]
    assert "py-spy is not on PATH" in by_node["bare"]["reason"]
    assert "the 1 chunk(s) of samples it sent before are kept" in by_node["dies"]["reason"]
    assert by_node["dies"]["died_after_s"] is not None
    # the clock: 5 ms ahead, known to half a round trip of the fake's 100 us readings
    assert by_node["ok"]["clock_offset_ms"] == pytest.approx(5.0, abs=by_node["ok"]["clock_uncertainty_ms"])
    assert by_node["ok"]["clock_uncertainty_ms"] == pytest.approx(0.1)
    assert all(handle.killed for handle in ray.handles.values())  # no agent is left on any node
    every = agents.results()
    results = {(name, pid): every[(ids[name], pid)] for name, pid in pids.items()}
    sampled = results[("ok", busy_pid)]
    assert sampled["status"] == "ok" and "spin_for_the_agent" in sampled["raw_text"]
    assert sampled["window_driver_ns"][0] < sampled["window_driver_ns"][1]
    lost = results[("dies", 11)]
    assert lost["status"] == "ok" and lost["partial"] and lost["samples"] == 5  # its chunk, kept
    for node, pid in (("pending", 2), ("full", 3), ("bare", 4)):
        assert results[(node, pid)]["status"] == "skipped" and results[(node, pid)]["reason"]
    for handle in ray.handles.values():  # the lost node's agent, here on this machine, cleans up after itself
        handle.agent.stop()
        assert handle.agent.folder is None or not handle.agent.folder.exists()
