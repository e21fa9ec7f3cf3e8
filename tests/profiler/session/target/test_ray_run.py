"""`run --target --ray-address` on a real two-node Ray cluster on this host (ray.cluster_utils): the fake server's model
workers are Ray actors, one per node, found through Ray's state, sampled on their own node by a pinned agent, and read
by the verdict beside the API server; the same server profiled without Ray sees the API server alone. A node removed
during the load is named, its earlier samples kept, and no agent or py-spy is left on any node. Launched with the probe,
the server hands the probe's environment to its workers (runtime_env), and the worker on the other node sends its probe
records back through that node's agent, on the driver's clock; a node whose agent cannot send them is named."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.session.target import ray_agents, target_record
from infer_prof.profiler.session.target.inject import prepare_probe
from infer_prof.profiler.session.target.launch import launched_server
from infer_prof.profiler.session.target.probe import probe
from infer_prof.profiler.session.target.ray_cluster import chosen_address
from infer_prof.profiler.session.target.target_plan import plan_target
from infer_prof.profiler.session.target.target_session import run_target_session
from infer_prof.scenarios.spec import load_scenario
from tests.engine.conftest import SMOLLM2_MISSING
from tests.profiler.session.target import fake_ray_engine
from tests.profiler.session.target.conftest import free_port, wait_for
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


class FailingProbeFiles:
    """An agent's handle whose probe_files call fails as it is sent (everything else is the agent's own)."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def __getattr__(self, name: str) -> Any:
        if name == "probe_files":
            raise RuntimeError("the node's object store is full: the probe's files could not be sent")
        return getattr(self.agent, name)


@pytest.mark.slow
def test_the_probe_in_a_worker_on_another_node_sends_its_records_on_the_driver_s_clock(
    cluster: Any,
    tmp_path: Path,
    tokenizer: Any,
    tables: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head, other = cluster.head_node.node_id, next(iter(cluster.worker_nodes)).node_id
    seen: list[tuple[dict[Any, Any], tuple[int, int]]] = []
    analyse = target_record.analyse_probe

    def analyse_and_keep(probes: Any, found: Any, window: Any, **kwargs: Any) -> Any:
        seen.append((found, window))
        return analyse(probes, found, window, **kwargs)

    monkeypatch.setattr(target_record, "analyse_probe", analyse_and_keep)
    fetch = ray_agents.NodeAgents._fetch_probes

    def fetch_with_the_head_failing(self: Any) -> None:
        node = self.nodes[head]  # the driver's own node (Ray connects a driver to the head on its host)
        agent, node.agent = node.agent, FailingProbeFiles(node.agent)
        try:
            fetch(self)
        finally:
            node.agent = agent

    monkeypatch.setattr(ray_agents.NodeAgents, "_fetch_probes", fetch_with_the_head_failing)
    out, port = tmp_path / "probed", free_port()
    out.mkdir()
    (tmp_path / "probed.toml").write_text(STEADY)
    setup = prepare_probe(out)
    command = " ".join(
        [
            sys.executable,
            str(FAKE_SERVER),
            "--port",
            str(port),
            "--ray-address",
            cluster.address,
            "--nodes",
            f"{head},{other}",
        ]
    )
    url = f"http://127.0.0.1:{port}"
    with launched_server(command, url, out / "server.log", timeout_s=120, env=setup.env()) as server:
        assert server is not None
        plan = plan_target(probe(url), None, "default", launched=server.pid)
        run_target_session(
            plan,
            load_scenario(str(tmp_path / "probed.toml")),
            out,
            tokenizer=tokenizer,
            profile="default",
            probe=setup,
            launched=server,
            ray_address=chosen_address(cluster.address, environ={}),
        )
    result = read_run(out).result
    section = result.target["ray"]
    assert section["driver_node"] == head
    worker = next(
        row for row in result.target["processes"] if row.get("placed_by") == "ray" and row["node_id"] == other
    )
    # The worker on the other node loaded the probe (its runtime_env), timed its steps, and its node's agent sent them.
    probed = [entry for entry in result.target["probe"]["processes"] if entry.get("node_id") == other]
    assert [(entry["pid"], entry["key"]) for entry in probed] == [
        (worker["pid"], f"{other[:8]}:{worker['pid']}")
    ]
    assert probed[0]["role"] == worker["role"] == "model worker rank 1"
    # a step a token of each of the 24 requests, inside the load's window
    assert probed[0]["components"]["model"]["calls"] >= 24 * 8 * 0.9
    assert "fake_ray_engine:RayWorkerWrapper.execute_model" in probed[0]["patched"]
    # Its records, moved onto the driver's clock, lie inside the load's window (the warm-up's steps before it).
    found, (start_ns, end_ns) = seen[-1]
    key = f"{other[:8]}:{worker['pid']}"
    records = next(entry["records"] for name, entry in found.items() if str(name) == key)
    nodes = {entry["node_id"]: entry for entry in section["nodes"]}
    assert nodes[other]["probe_processes"] >= 1 and nodes[other]["probe_clock_uncertainty_ms"] is not None
    bound_ns = nodes[other]["probe_clock_uncertainty_ms"] * 1e6  # one host, one clock: the method's own error
    inside = (records[:, 2] >= start_ns - bound_ns) & (records[:, 3] <= end_ns + bound_ns)
    assert inside.sum() >= 0.9 * len(records) and records[:, 3].max() <= end_ns + bound_ns
    # The head's agent could not send its files: named, and the run went on (its worker's files were read here).
    assert "could not be read or sent" in nodes[head]["probe_reason"]
    assert any(head[:8] in line and "could not be read or sent" in line for line in section["lines"])
    head_worker = next(
        row for row in result.target["processes"] if row.get("placed_by") == "ray" and row["node_id"] == head
    )
    assert head_worker["pid"] in result.target["probe"]["loaded_in"]
    assert wait_for(lambda: not agents_left(), timeout_s=20), agents_left()
