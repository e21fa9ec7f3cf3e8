"""A Ray-backed server's processes on every node of its cluster: read from Ray's state, each named by its actor class.

Ray places an engine's workers as actors, children of each node's raylet rather than of the server, so the
tree under the listener never holds them. Ray's state API (ray.util.state, served by the dashboard) lists
nodes, actors and drivers; a cluster started without the dashboard (Ray's minimal install) answers the same
questions from its control store's tables (ray._private.state), and the result says which one answered.
The server's actors are those of the jobs whose driver is a process of its tree on this machine (vLLM's
engine core calls ray.init); a server with no driver in the tree gets every live actor but ours, said so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...rundir.schema import TargetProcess

STATE_API, GCS_TABLES = "ray.util.state", "Ray's control-store tables (no dashboard)"
STATE_TIMEOUT_S = 5  # a state API that does not answer by then is taken as absent (no dashboard)
LIST_LIMIT = 10_000

# An actor's role by its class name, first match wins: (pattern, role). vLLM's Ray executor wraps each model
# worker (one per rank of tensor x pipeline parallel) in RayWorkerWrapper.
CLASS_ROLES: tuple[tuple[str, str], ...] = (
    (r"^RayWorkerWrapper$", "model worker"),
    (r"^ServeReplica", "Serve replica"),
    (r"^(ServeController|ProxyActor|HTTPProxyActor)$", "Serve control (idle helper)"),
)
MODEL_WORKER = "model worker"


@dataclass(frozen=True, slots=True)
class RayNode:
    node_id: str
    ip: str
    head: bool
    alive: bool


@dataclass(frozen=True, slots=True)
class RayActor:
    actor_id: str
    class_name: str
    job_id: str
    node_id: str
    pid: int
    state: str


@dataclass(frozen=True, slots=True)
class RayDriver:
    """A job's driver: the process that called ray.init (vLLM: its engine core)."""

    job_id: str
    ip: str
    pid: int
    alive: bool


@dataclass(slots=True)
class ClusterView:
    """What Ray says its cluster holds, and which of its interfaces said it."""

    nodes: list[RayNode]
    actors: list[RayActor]
    drivers: list[RayDriver]
    source: str


@dataclass(slots=True)
class RayProcess:
    """A process Ray placed for the server, keyed by (node_id, pid)."""

    node_id: str
    node_ip: str
    pid: int
    actor_class: str
    actor_id: str
    job_id: str
    role: str
    role_source: str
    rank: int | None = None

    @property
    def key(self) -> str:
        """The process's name across machines: the node's first 8 hex digits and the pid."""
        return f"{self.node_id[:8]}:{self.pid}"

    def tags(self) -> TargetProcess:
        """What a process table row takes from Ray beside a tree row's keys: where it was placed and by whom."""
        return {
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "actor_class": self.actor_class,
            "actor_id": self.actor_id,
            "job_id": self.job_id,
            "rank": self.rank,
            "key": self.key,
        }


@dataclass(slots=True)
class ServerActors:
    """The server's Ray-placed processes and how they were told from the rest of the cluster."""

    processes: list[RayProcess]
    jobs: list[str]
    notes: list[str] = field(default_factory=list)


def _hex(value: Any) -> str:
    return value.hex() if isinstance(value, bytes) else str(value or "")


def from_state_api(
    nodes: Iterable[Mapping[str, Any]],
    actors: Iterable[Mapping[str, Any]],
    workers: Iterable[Mapping[str, Any]],
) -> ClusterView:
    """ray.util.state's list_nodes, list_actors and list_workers (as dicts) as one view."""
    return ClusterView(
        nodes=[
            RayNode(
                str(node["node_id"]),
                str(node.get("node_ip") or ""),
                bool(node.get("is_head_node")),
                node.get("state") == "ALIVE",
            )
            for node in nodes
        ],
        actors=[
            RayActor(
                str(actor["actor_id"]),
                str(actor.get("class_name") or "?"),
                str(actor.get("job_id") or ""),
                str(actor.get("node_id") or ""),
                int(actor.get("pid") or 0),
                str(actor.get("state") or ""),
            )
            for actor in actors
        ],
        drivers=[
            RayDriver(
                str(worker.get("job_id") or ""),
                str(worker.get("ip") or ""),
                int(worker.get("pid") or 0),
                bool(worker.get("is_alive")),
            )
            for worker in workers
            if worker.get("worker_type") == "DRIVER"
        ],
        source=STATE_API,
    )


def from_gcs(
    nodes: Iterable[Mapping[str, Any]],
    actors: Mapping[str, Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
) -> ClusterView:
    """ray.nodes(), ray._private.state.actors() and its job_table() as one view."""
    return ClusterView(
        nodes=[
            RayNode(
                _hex(node.get("NodeID")),
                str(node.get("NodeManagerAddress") or ""),
                bool(node.get("IsHeadNode") or "node:__internal_head__" in (node.get("Resources") or {})),
                bool(node.get("Alive")),
            )
            for node in nodes
        ],
        actors=[
            RayActor(
                _hex(actor.get("ActorID") or actor_id),
                str(actor.get("ActorClassName") or "?"),
                _hex(actor.get("JobID")),
                _hex((actor.get("Address") or {}).get("NodeID")),
                int(actor.get("Pid") or 0),
                str(actor.get("State") or ""),
            )
            for actor_id, actor in actors.items()
        ],
        drivers=[
            RayDriver(
                _hex(job.get("JobID")),
                str(job.get("DriverIPAddress") or ""),
                int(job.get("DriverPid") or 0),
                not job.get("IsDead"),
            )
            for job in jobs
        ],
        source=GCS_TABLES,
    )


def read_cluster(ray: Any) -> ClusterView:
    """The cluster as Ray's state API lists it, else from its control-store tables (a joined driver reads both)."""
    try:
        from ray.util import state

        def listed(call: Any) -> list[dict[str, Any]]:
            return [
                item if isinstance(item, dict) else asdict(item)
                for item in call(limit=LIST_LIMIT, timeout=STATE_TIMEOUT_S, raise_on_missing_output=False)
            ]

        return from_state_api(listed(state.list_nodes), listed(state.list_actors), listed(state.list_workers))
    except (
        Exception
    ):  # no dashboard (Ray's minimal install), or one that does not answer: the tables say it too
        from ray._private import state as tables

        return from_gcs(ray.nodes(), tables.actors(), tables.state.job_table())


def role_of(class_name: str) -> tuple[str, str]:
    """(role, why) for an actor of this class."""
    for pattern, role in CLASS_ROLES:
        if re.search(pattern, class_name):
            return role, f"Ray actor class {class_name}"
    return f"Ray actor ({class_name})", f"Ray actor class {class_name}: no rule names it"


def server_actors(
    view: ClusterView, tree_pids: Iterable[int], *, local_ips: Iterable[str], own_job: str | None
) -> ServerActors:
    """The live actors of the jobs whose driver is a process of the server's tree on this machine (the tree's
    pids read on a node whose IP is this machine's), named by role; model workers ranked in vLLM's order."""
    tree, here = set(tree_pids), set(local_ips)
    nodes = {node.node_id: node for node in view.nodes}
    jobs = sorted(
        {
            driver.job_id
            for driver in view.drivers
            if driver.alive and driver.pid in tree and (not here or driver.ip in here)
        }
    )
    live = [actor for actor in view.actors if actor.state == "ALIVE" and actor.pid > 0]
    notes = []
    if jobs:
        chosen = [actor for actor in live if actor.job_id in jobs]
    else:
        chosen = [actor for actor in live if actor.job_id != own_job]
        notes.append(
            "no process of the server's tree is a Ray driver here: every live actor of the cluster is listed "
            f"({len(chosen)}, of jobs {', '.join(sorted({actor.job_id for actor in chosen})) or 'none'}), "
            "whichever server placed it"
        )
    processes = []
    for actor in chosen:
        role, why = role_of(actor.class_name)
        node = nodes.get(actor.node_id)
        processes.append(
            RayProcess(
                node_id=actor.node_id,
                node_ip=node.ip if node else "",
                pid=actor.pid,
                actor_class=actor.class_name,
                actor_id=actor.actor_id,
                job_id=actor.job_id,
                role=role,
                role_source=why,
            )
        )
    drivers_ip = next((driver.ip for driver in view.drivers if driver.job_id in jobs), "")
    rank_workers(processes, drivers_ip, heads={node.node_id for node in view.nodes if node.head})
    return ServerActors(processes, jobs, notes)


def rank_workers(processes: list[RayProcess], driver_ip: str, heads: Collection[str] = ()) -> None:
    """Number the model workers as vLLM's Ray executor does: the driver's node first, then nodes holding fewer
    workers, by IP; workers of one node by pid (the order they were started in). Where several nodes share the
    driver's IP (one host), the head among them holds the driver (Ray connects a driver to the head on its host)
    and so vLLM's first bundle, rank 0. The state API does not say a worker's rank, so this one is inferred, and
    says so."""
    workers = [process for process in processes if process.role == MODEL_WORKER]
    per_ip = Counter(process.node_ip for process in workers)
    workers.sort(
        key=lambda process: (
            process.node_ip != driver_ip,
            process.node_ip == driver_ip and process.node_id not in heads,
            per_ip[process.node_ip],
            process.node_ip,
            process.pid,
        )
    )
    for rank, process in enumerate(workers):
        process.rank = rank
        process.role = f"{MODEL_WORKER} rank {rank}"
        process.role_source += " (rank inferred in vLLM's order: driver's node first, then by IP, then pid)"
