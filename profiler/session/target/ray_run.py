"""One `run --target --ray-address` run's Ray side: join the cluster, find the server's actors, sample them on their nodes for the load, leave; then its rows of the process table and its `target.ray` section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....errors import TargetError
from ...analysis.replica_balance import ProcessLoad, balance
from ...rundir.schema import TargetRay
from .ray_agents import DIED, NodeAgents, agent_cpus
from .ray_cluster import RayAddress, join
from .ray_processes import ServerActors, read_cluster, server_actors
from .ray_table import ray_rows, tag_tree_rows
from .tree import PROC


@dataclass
class RayRun:
    """The cluster joined, the server's Ray-placed processes, and the agents sampling them."""

    address: RayAddress
    ray: Any
    joined: bool
    state_source: str
    actors: ServerActors
    agents: NodeAgents
    local_node: str
    local_ip: str
    stopped: bool = False
    _results: dict[tuple[str, int], dict[str, Any]] | None = None

    def stop(self) -> None:
        """Stop the agents and leave the cluster (our job's actors end with it): nothing of ours stays on a node."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.agents.stop()
        finally:
            if self.joined:
                self.ray.shutdown()

    def results(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Each Ray process's sampling result, keyed (node_id, pid): parsed once, after stop()."""
        if self._results is None or not self.stopped:
            self._results = self.agents.results()
        return self._results

    def sampled(self) -> list[tuple[int, dict[str, Any]]]:
        """(pid, sampling) of each Ray process sampled, for the verdict beside the tree's."""
        results = self.results()
        return [
            (process.pid, result)
            for process in self.actors.processes
            if (result := results.get((process.node_id, process.pid)) or {}).get("status") == "ok"
        ]

    def rows(self, tree_rows: list[dict[str, Any]] | None, wall_ns: int) -> list[dict[str, Any]]:
        """The process table: the tree's rows named by this node, then the Ray-placed processes'."""
        tree_rows = list(tree_rows or [])
        tag_tree_rows(tree_rows, self.local_node, self.local_ip)
        gone = {node.node_id for node in self.agents.nodes.values() if node.status == DIED}
        return tree_rows + ray_rows(self.actors.processes, self.results(), wall_ns, gone_nodes=gone)

    def section(self, rows: list[dict[str, Any]] | None = None) -> TargetRay:
        """target.ray: the nodes, their clocks and agents, and (given the process table's rows) the balance lines."""
        nodes = self.agents.section()
        hosts = {entry.get("hostname") for entry in nodes if entry.get("hostname")}
        lines = [reason for entry in nodes if (reason := entry.get("reason"))]
        lines += [
            f"Ray: {entry['node_id'][:8]}'s clock is {entry['clock_offset_ms']:+.3f} ms from this driver's, "
            f"+- {entry['clock_uncertainty_ms']:.3f} ms (half the shortest of its round trips)"
            for entry in nodes
            if entry.get("clock_offset_ms") is not None
        ]
        if len(nodes) > 1 and len(hosts) == 1:
            lines.append(
                f"Ray: the {len(nodes)} nodes share one host ({next(iter(hosts))}): one clock, so their offsets "
                "measure the method's error, not a difference between machines"
            )
        lines += self.balance_lines(rows or [])
        return {
            "address": self.address.text,
            "address_source": self.address.source,
            "state_source": self.state_source,
            "jobs": list(self.actors.jobs),
            "driver_node": self.local_node,
            "processes": len(self.actors.processes),
            "nodes": nodes,
            "same_host": len(nodes) > 1 and len(hosts) == 1,
            "notes": list(self.actors.notes),
            "lines": [*self.actors.notes, *lines],
        }

    def balance_lines(self, rows: list[dict[str, Any]]) -> list[str]:
        """Per actor class with two or more sampled processes (replicas, ranks): how much of its samples each one's
        engine thread worked (waits of every kind left out), and whether they are balanced (analysis.replica_balance)."""
        groups: dict[str, list[ProcessLoad]] = {}
        for row in rows:
            threads = (row.get("split") or {}).get("threads") or {}
            if row.get("placed_by") != "ray" or not threads or row.get("partial"):
                continue  # a process of a lost node was sampled over less of the load: not comparable
            thread = threads.get((row.get("split") or {}).get("engine_thread") or "") or max(
                threads.values(), key=lambda data: data["work_share"] * data["samples"]
            )
            load = ProcessLoad(
                f"{row['role']} ({row['key']})",
                round(thread["work_share"] * thread["samples"]),
                thread["samples"],
            )
            groups.setdefault(str(row["actor_class"]), []).append(load)
        found = (
            balance(f"Ray: {len(members)} {name} processes' engine threads", members)
            for name, members in groups.items()
        )
        return [one.line for one in found if one is not None]


def start_ray_run(address: RayAddress, tree_pids: list[int], *, rate_hz: int, native_stacks: bool) -> RayRun:
    """Join, read the cluster, pick the server's actors and start an agent on each node holding one."""
    ray, joined = join(address)
    try:
        try:
            view = read_cluster(ray)
        except Exception as error:
            raise TargetError(f"{address.flag}: could not read the cluster's actors ({error})") from None
        context = ray.get_runtime_context()
        local_node = context.get_node_id()
        local_ip = next((node.ip for node in view.nodes if node.node_id == local_node), "")
        actors = server_actors(view, tree_pids, local_ips={local_ip} - {""}, own_job=context.get_job_id())
        agents = NodeAgents(
            ray, actors.processes, rate_hz=rate_hz, native_stacks=native_stacks, cpus=agent_cpus()
        )
        run = RayRun(address, ray, joined, view.source, actors, agents, local_node, local_ip)
        agents.start()
    except BaseException:
        if joined:
            ray.shutdown()
        raise
    return run


def uses_ray(pid: int, proc: Path = PROC) -> bool:
    """Whether the process has Ray's core loaded (_raylet.so): a Ray driver or worker."""
    try:
        with open(proc / str(pid) / "maps", errors="replace") as maps:
            return any("_raylet" in line for line in maps)
    except OSError:
        return False


def ray_hint(rows: list[dict[str, Any]] | None, proc: Path = PROC) -> TargetRay | None:
    """Without --ray-address: a line naming the tree's processes that run Ray, whose workers the tree may not hold."""
    drivers = [row for row in rows or [] if row.get("python") and uses_ray(int(row["pid"]), proc)]
    if not drivers:
        return None
    named = ", ".join(f"pid {row['pid']} ({row.get('role') or 'unknown'})" for row in drivers)
    line = (
        f"Ray: {named} runs Ray: its workers may be Ray actors outside this tree, on this node or others; "
        "give --ray-address (or export RAY_ADDRESS) to sample them too"
    )
    return {"notes": [line], "lines": [line]}
