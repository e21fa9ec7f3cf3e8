"""`run --target --ray-address` on a real two-node Ray cluster on this host (ray.cluster_utils): the fake server's model
workers are Ray actors, one per node, found through Ray's state, sampled on their own node by a pinned agent, and read
by the verdict beside the API server; the same server profiled without Ray sees the API server alone. A node removed
during the load is named, its earlier samples kept, and no agent or py-spy is left on any node."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target import ray_agents
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.ray_cluster import chosen_address
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.scenarios.spec import load_scenario
from tests.engine.conftest import SMOLLM2_MISSING
from tests.profiler.session.target import fake_ray_engine
from tests.profiler.session.target.conftest import wait_for
from tests.profiler.session.target.test_run_tree import STEADY

ray = pytest.importorskip("ray")
FAKE_SERVER = Path(__file__).with_name("fake_ray_server.py")
LONGER = STEADY.replace("num_requests = 24", "num_requests = 60")  # 6 s of load: the node goes during it


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


class RayServer:
    def __init__(self, address: str, nodes: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), "--ray-address", address, "--nodes", ",".join(nodes)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on" in line, line
        self.url = line.split("listening on ")[1].strip()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def tokenizer() -> Any:
    from infer_prof.engine.loader import _local_smollm2
    from infer_prof.profiler.session.target.target_plan import prompt_tokenizer

    if _local_smollm2() is None:
        pytest.skip(SMOLLM2_MISSING)  # prompts are sized with SmolLM2's tokenizer
    return prompt_tokenizer("synthetic:tiny")


@pytest.fixture
def tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "fake-ray.toml").write_text(fake_ray_engine.TABLE)
    monkeypatch.setenv("INFER_PROF_ENGINE_TABLES", str(folder))


def profile(server: RayServer, out: Path, tokenizer: Any, address: str | None, scenario: str = STEADY) -> Any:
    scenario_file = out.parent / f"{out.name}.toml"
    scenario_file.write_text(scenario)
    out.mkdir()
    plan = plan_target(probe(server.url), None, "default")
    ray_address = chosen_address(address, environ={}) if address else None
    run_target_session(
        plan,
        load_scenario(str(scenario_file)),
        out,
        tokenizer=tokenizer,
        profile="default",
        ray_address=ray_address,
    )
    return read_run(out).result


def agents_left() -> list[str]:
    """Our agents (ray::NodeAgent) and the py-spy they start (writing under infer-prof-ray-agent-*) still running
    anywhere on this host: both nodes share it."""
    found = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "NodeAgent" in line or "infer-prof-ray-agent-" in line]


@pytest.mark.slow
def test_workers_on_two_nodes_are_found_sampled_where_they_live_and_read_by_the_verdict(
    cluster: Any,
    tmp_path: Path,
    tokenizer: Any,
    tables: None,
) -> None:
    nodes = [cluster.head_node.node_id, next(iter(cluster.worker_nodes)).node_id]
    server = RayServer(cluster.address, nodes)
    try:
        today = profile(server, tmp_path / "tree-only", tokenizer, None)
        with_ray = profile(server, tmp_path / "with-ray", tokenizer, cluster.address)
    finally:
        server.stop()
    # As today: the tree under the listener is the API server alone; its loop waits on workers it cannot see.
    assert [entry["role"] for entry in today.target["processes"]] == ["API server"]
    assert today.verdict["foreign"]["critical_path"]["worker"] is None
    assert "runs Ray" in today.target["ray"]["lines"][0]  # what --ray-address would add, said
    # With Ray: both workers, each on its node, named and sampled there.
    rows = with_ray.target["processes"]
    workers = sorted((row for row in rows if row.get("placed_by") == "ray"), key=lambda row: row["rank"])
    assert [row["role"] for row in workers] == ["model worker rank 0", "model worker rank 1"]
    assert {row["node_id"] for row in workers} == set(nodes)  # one host: one IP, so ranks follow pids
    for row in workers:
        assert row["sampled"] and row["busy_samples"] > 0, row
        assert "execute_model" in (tmp_path / "with-ray" / row["samples_file"]).read_text()
    api = next(row for row in rows if row.get("placed_by") == "process tree")
    assert api["role"] == "API server" and api["node_id"] in nodes  # the node infer-prof joined from
    section = with_ray.target["ray"]
    assert section["jobs"] and section["same_host"] and section["processes"] == 2
    for node in section["nodes"]:
        assert node["agent"] == "done" and node["chunks"] >= 1
        assert abs(node["clock_offset_ms"]) <= node["clock_uncertainty_ms"] + 1.0  # one host, one clock
    # The step's critical path reads across nodes: the loop here, waiting on a worker sampled on its own node.
    path = with_ray.verdict["foreign"]["critical_path"]
    assert path["worker"]["pid"] in {row["pid"] for row in workers} and path["waiting_on_worker"] > 0.5
    assert "balanced" in section["lines"][-1] and "RayWorkerWrapper" in section["lines"][-1]
    assert wait_for(lambda: not agents_left(), timeout_s=20), agents_left()


@pytest.mark.slow
def test_a_node_lost_during_the_load_is_named_and_its_earlier_samples_kept(
    cluster: Any,
    tmp_path: Path,
    tokenizer: Any,
    tables: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_agents, "CHUNK_S", 1)  # a chunk a second, so the node has sent one before it goes
    doomed = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    server = RayServer(cluster.address, [cluster.head_node.node_id, doomed.node_id])
    collect, removing = ray_agents.NodeAgents._collect, []

    def collect_then_lose_the_node(self: Any, node: Any, call: str, timeout_s: float) -> None:
        collect(self, node, call, timeout_s)
        if node.node_id == doomed.node_id and node.chunks and not removing:  # its first samples are in
            removing.append(
                threading.Thread(target=cluster.remove_node, args=(doomed,), kwargs={"allow_graceful": False})
            )
            removing[0].start()

    monkeypatch.setattr(ray_agents.NodeAgents, "_collect", collect_then_lose_the_node)
    try:
        result = profile(server, tmp_path / "lost", tokenizer, cluster.address, scenario=LONGER)
    finally:
        server.stop()
        for thread in removing:
            thread.join()
    nodes = {node["node_id"]: node for node in result.target["ray"]["nodes"]}
    lost = nodes[doomed.node_id]
    assert lost["agent"] == "died" and "was lost" in lost["reason"] and lost["chunks"] >= 1, lost
    row = next(
        row
        for row in result.target["processes"]
        if row.get("node_id") == doomed.node_id and row.get("placed_by") == "ray"
    )
    assert row["sampled"] and row["partial"] and row["exited"]
    assert nodes[cluster.head_node.node_id]["agent"] == "done"
    assert wait_for(lambda: not agents_left(), timeout_s=20), agents_left()
