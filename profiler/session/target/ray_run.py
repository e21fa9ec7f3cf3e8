"""One `run --target --ray-address` run's Ray side: join the cluster, find the server's actors, sample them on their nodes for the load (with the probe's files of a server started with the probe), leave; then its rows of the process table, the probe's processes of every node, and its `target.ray` section."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....errors import TargetError
from ...analysis.replica_balance import ProcessLoad, balance
from ...rundir.schema import ProbeProcess, RayNodeEntry, TargetProcess, TargetRay
from .ray_agent import probe_dir_of
from .ray_agents import DIED, NodeAgents, RaySamplingResult, agent_cpus
from .ray_cluster import RayAddress, join
from .ray_probe import NodePid, clock_line, merge_found, node_entries
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
    _results: dict[tuple[str, int], RaySamplingResult] | None = None

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

    def results(self) -> dict[tuple[str, int], RaySamplingResult]:
        """Each Ray process's sampling result, keyed (node_id, pid): parsed once, after stop()."""
        if self._results is None or not self.stopped:
            self._results = self.agents.results()
        return self._results

    def sampled(self) -> list[tuple[int, RaySamplingResult]]:
        """(pid, sampling) of each Ray process sampled, for the verdict beside the tree's."""
        results = self.results()
        return [
            (process.pid, result)
            for process in self.actors.processes
            if (result := results.get((process.node_id, process.pid)) or {}).get("status") == "ok"
        ]

    def rows(self, tree_rows: list[TargetProcess] | None, wall_ns: int) -> list[TargetProcess]:
        """The process table: the tree's rows named by this node, then the Ray-placed processes'."""
        tree_rows = list(tree_rows or [])
        tag_tree_rows(tree_rows, self.local_node, self.local_ip)
        gone = {node.node_id for node in self.agents.nodes.values() if node.status == DIED}
        return tree_rows + ray_rows(self.actors.processes, self.results(), wall_ns, gone_nodes=gone)

    def probe_key(self, row: TargetProcess) -> int:
        """A process table row's key in the probe's processes: its pid, a NodePid where Ray placed it elsewhere."""
        node = row.get("node_id")
        if row.get("placed_by") == "ray" and node and node != self.local_node:
            return NodePid(str(node), int(row["pid"]))
        return int(row["pid"])

    def probe_found(self, local: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """read_probe's processes (this machine's folder) with those each other node's agent sent, on our clock."""
        sent = {}
        for node in self.agents.nodes.values():
            if node.probe and node.probe.get("files") and node.perf_start:
                line = clock_line(node.perf_start, node.perf_stop)
                sent[node.node_id] = node_entries(node.probe["files"], line, node.node_id)
        here = os.uname().nodename
        shared = {
            node.node_id: list(node.pids)
            for node in self.agents.nodes.values()
            if node.node_ip == self.local_ip and node.hostname in (None, here)
        }
        return merge_found(local, sent, driver_node=self.local_node, shared_host=shared)

    def name_probe_processes(self, processes: list[ProbeProcess]) -> None:
        """The probe section's processes of other nodes named by node (node_id, key), their pids plain numbers."""
        for entry in processes:
            pid = entry.get("pid")
            if isinstance(pid, NodePid):
                entry["node_id"], entry["key"], entry["pid"] = pid.node_id, str(pid), int(pid)

    def section(self, rows: list[TargetProcess] | None = None) -> TargetRay:
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
        lines += self.probe_lines(nodes)
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

    def probe_lines(self, nodes: list[RayNodeEntry]) -> list[str]:
        """With the probe: each node's probe files that did not come, and the bound on the other nodes' alignment."""
        lines = []
        for entry in nodes:
            if "probe_processes" not in entry:
                continue
            ours = entry["node_id"] == self.local_node
            if entry.get("probe_reason"):
                lines.append(
                    f"Ray: {entry['probe_reason']}"
                    + (" (the driver's own node: its processes' files were read here)" if ours else "")
                )
            if not ours and entry["probe_processes"] and entry.get("probe_clock_uncertainty_ms") is not None:
                drift = entry.get("probe_clock_drift_ms")
                lines.append(
                    f"Ray: the probe's records of {entry['probe_processes']} process(es) on {entry['node_id'][:8]} "
                    f"are on this driver's clock to +- {entry['probe_clock_uncertainty_ms']:.3f} ms (its perf_counter "
                    "measured against ours as sampling started and after the load"
                    + (f"; the offset moved {drift:+.3f} ms between)" if drift is not None else ")")
                )
        return lines

    def balance_lines(self, rows: list[TargetProcess]) -> list[str]:
        """Per actor class with two or more sampled processes (replicas, ranks): how much of its samples each one's
        engine thread worked (waits of every kind left out), and whether they are balanced (analysis.replica_balance)."""
        groups: dict[str, list[ProcessLoad]] = {}
        for row in rows:
            split = row.get("split")
            threads = (split.get("threads") or {}) if split else {}
            if row.get("placed_by") != "ray" or not threads or row.get("partial"):
                continue  # a process of a lost node was sampled over less of the load: not comparable
            engine_thread = split.get("engine_thread") if split else None
            thread = threads.get(engine_thread or "") or max(
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
            ray,
            actors.processes,
            rate_hz=rate_hz,
            native_stacks=native_stacks,
            cpus=agent_cpus(),
            probe_folder=probe_folder(tree_pids),
        )
        run = RayRun(address, ray, joined, view.source, actors, agents, local_node, local_ip)
        agents.start()
    except BaseException:
        if joined:
            ray.shutdown()
        raise
    return run


def probe_folder(tree_pids: list[int], proc: Path = PROC) -> str | None:
    """The probe folder the server's processes here were started with (--launch --probe, or a server started with
    the probe's environment): where its Ray-placed workers' probes write too, if they were given it."""
    for pid in tree_pids:
        folder = probe_dir_of(pid, proc)
        if folder and (Path(folder) / "probes.json").is_file():
            return folder
    return None


def uses_ray(pid: int, proc: Path = PROC) -> bool:
    """Whether the process has Ray's core loaded (_raylet.so): a Ray driver or worker."""
    try:
        with open(proc / str(pid) / "maps", errors="replace") as maps:
            return any("_raylet" in line for line in maps)
    except OSError:
        return False


def ray_hint(rows: list[TargetProcess] | None, proc: Path = PROC) -> TargetRay | None:
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
