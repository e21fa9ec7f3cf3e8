"""The replicas behind a router (`run --target`): named with --replica, or found as the local servers the router's processes are connected to; each one's process tree sampled for the load.

A router (vLLM's router, LiteLLM, nginx, a Ray Serve proxy) holds client connections to its replicas; on this
machine each such connection ends at a port some process listens on, so the router's established TCP sockets
(/proc/net/tcp against its processes' open files, replica_links) name its replicas without asking the router
anything. They are read as sampling starts and again every POLL_S for the first FAST_S of the load, since a
router may open its connections only with its first requests, then every SLOW_POLL_S; a port counts as a replica
when it answers GET /v1/models.
Replicas on other machines are not found this way: py-spy samples this machine's processes (replicas that are
Ray actors are found and sampled on their nodes by --ray-address, ray_run, and balanced there by actor class).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from ....errors import OptionError, TargetError
from ...inputs.addresses import parse_http_url
from ...rundir.results import RunResult
from .replica_links import local_ports_reached, read_sockets, socket_inodes
from .replica_section import ReplicaSamples
from .tree import PROC, all_pids, find_server_tree, tree_pids
from .watch import TreeSampler

if TYPE_CHECKING:
    from ...collectors.sampling import SamplingResult

POLL_S = 0.2  # how often the router's connections are read for a replica not yet found, for the first FAST_S
FAST_S = 5.0  # routers connect with their first requests; after that a slower read catches a late one
SLOW_POLL_S = 2.0  # a read of /proc/net/tcp makes the kernel walk its whole table (docs/measurements.md)
ANSWER_TIMEOUT_S = (
    3.0  # a candidate port's GET /v1/models: milliseconds for a replica here, seconds on a busy machine
)
ANSWER_TRIES = 3  # polls a candidate that did not answer is asked again in
BY_CONNECTIONS = "the router's connections"
STOP_WAIT_S = 1.0  # how long stop() waits for a read of the connections in progress


@dataclass(frozen=True, slots=True)
class ReplicaTarget:
    """A replica named with --replica, checked: its base URL, port, and the process tree listening there."""

    url: str
    netloc: str
    port: int
    root: int
    listeners: tuple[int, ...]


def check_replicas(urls: list[str], target: str) -> list[ReplicaTarget]:
    """Each --replica URL checked before the load: its form, on this machine, answering as an OpenAI-compatible
    server, a process here listening on its port. OptionError or TargetError (one line, exit 2) otherwise."""
    from .probe import is_local, probe

    checked: list[ReplicaTarget] = []
    router = parse_http_url(target).base
    for url in urls:
        address = parse_http_url(url, "--replica")
        flag = f"--replica {address.base}"
        if address.base == router:
            raise OptionError(f"{flag} is the --target itself: name the servers the router sends requests to")
        if any(replica.url == address.base for replica in checked):
            raise OptionError(f"{flag} is given twice: name each replica once")
        if not is_local(address.base):
            raise TargetError(
                f"{flag}: not on this machine, and py-spy samples this machine's processes; run infer-prof where "
                "the replicas run (replicas that are Ray actors on other nodes: --ray-address)"
            )
        try:
            probe(address.base)
            tree = find_server_tree(None, address.port)
        except TargetError as error:
            raise TargetError(f"{flag}: {_without_flag(str(error))}") from None
        checked.append(
            ReplicaTarget(address.base, address.netloc, address.port, tree.root, tuple(tree.listeners))
        )
    return checked


def _without_flag(message: str) -> str:
    """A probe's error without the `--target URL: ` it starts with (the replica's flag is said instead)."""
    head, sep, rest = message.partition(": ")
    return rest if sep and head.startswith("--target ") else message


def http_base(ip: str, port: int) -> str:
    """http://IP:PORT, an IPv6 address in brackets."""
    return f"http://[{ip}]:{port}" if ":" in ip else f"http://{ip}:{port}"


def answers_models(url: str) -> bool:
    """Whether URL answers GET /v1/models with 200 within ANSWER_TIMEOUT_S (a replica, not a database, a metrics
    port or Ray's control store)."""
    try:
        response = httpx.get(f"{url}/v1/models", timeout=ANSWER_TIMEOUT_S)
    except (httpx.HTTPError, OSError):
        return False
    return response.status_code == 200


def cpu_ticks(pids: list[int], proc: Path = PROC) -> dict[int, int]:
    """The user and system CPU time each process has used so far (those still there), in clock ticks."""
    ticks = {}
    for pid in pids:
        try:
            fields = (proc / str(pid) / "stat").read_text().rpartition(")")[2].split()
            ticks[pid] = int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return ticks


MakeSampler = Callable[[int, int], TreeSampler]  # (root pid, port) -> a sampler of that tree, not started


class ReplicaWatch:
    """The router's replicas sampled between start() and stop(): the given ones from the start, else those its
    connections lead to, each from when it was found; samples() after stop()."""

    def __init__(
        self,
        router_root: int | None,
        target_port: int,
        given: list[ReplicaTarget],
        make_sampler: MakeSampler,
        *,
        poll_s: float = POLL_S,
        proc: Path = PROC,
        answers: Callable[[str], bool] = answers_models,
    ) -> None:
        self.router_root, self.target_port, self.given = router_root, target_port, given
        self.make_sampler, self.poll_s, self.proc, self.answers = make_sampler, poll_s, proc, answers
        self.source = "--replica" if given else BY_CONNECTIONS
        self._found: dict[int, ReplicaSamples] = {}  # port -> the replica
        self._samplers: dict[int, TreeSampler] = {}
        self._checked: set[int] = {target_port}  # ports already judged (a replica, or not one)
        self._asked: dict[int, int] = {}  # port -> times it was asked and did not answer
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.router_pids: list[int] = []
        self._cpu_start: dict[int, int] = {}  # every process's CPU ticks as the watch starts
        self._starting: list[threading.Thread] = []

    def start(self) -> None:
        self._started = time.perf_counter()
        # A replica found later is charged its CPU from here all the same: every process's CPU is read now.
        self._cpu_start = cpu_ticks(all_pids(self.proc), self.proc)
        self.router_pids = tree_pids(self.router_root, self.proc) if self.router_root is not None else []
        for replica in self.given:
            self._add(
                replica.url, replica.netloc, replica.port, replica.root, "--replica", 0.0, replica.listeners
            )
        if not self.given and self.router_root is not None:
            self._poll()
            self._thread = threading.Thread(target=self._watch, name="infer-prof-replica-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        with self._lock:  # no replica is added after this: _add looks under the same lock
            self._stop.set()
            starting = list(self._starting)
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)  # a candidate slow to answer is left to its timeout
        for thread in starting:
            thread.join()
        with self._lock:
            for port, sampler in self._samplers.items():
                replica = self._found[port]
                replica.pids = sorted(sampler.pids())
                sampler.stop()
            for replica in self._found.values():
                if replica.with_router and replica.root is not None:
                    replica.pids = tree_pids(replica.root, self.proc)
                if replica.root is not None:  # the CPU its processes used since the watch started
                    now = cpu_ticks(tree_pids(replica.root, self.proc), self.proc)
                    used = sum(ticks - self._cpu_start.get(pid, 0) for pid, ticks in now.items())
                    replica.cpu_s = used / os.sysconf("SC_CLK_TCK")

    def samples(self, router_results: dict[int, SamplingResult]) -> list[ReplicaSamples]:
        """Each replica with its processes' sampling results (after stop()): its own samplers', or the router's
        for a replica inside the router's tree."""
        with self._lock:
            replicas = sorted(self._found.values(), key=lambda replica: replica.name)
            for port, replica in self._found.items():
                sampler = self._samplers.get(port)
                if sampler is not None:
                    replica.results = {
                        watched.info.pid: watched.collector.result()
                        for watched in sampler.processes()
                        if watched.collector is not None
                    }
                elif replica.with_router:
                    replica.results = {
                        pid: router_results[pid] for pid in replica.pids if pid in router_results
                    }
        return replicas

    def _watch(self) -> None:
        while not self._stop.wait(
            self.poll_s if time.perf_counter() - self._started < FAST_S else max(self.poll_s, SLOW_POLL_S)
        ):
            self._poll()

    def _poll(self) -> None:
        pids = tree_pids(self.router_root, self.proc) if self.router_root is not None else []
        if not pids:
            return
        reached = local_ports_reached(
            read_sockets(self.proc), socket_inodes(pids, self.proc), exclude=self._checked
        )
        for port, ip in sorted(reached.items()):
            url = http_base(ip, port)
            if not self.answers(url):
                self._asked[port] = self._asked.get(port, 0) + 1
                if self._asked[port] >= ANSWER_TRIES:
                    self._checked.add(port)  # not an OpenAI-compatible server (or not one that answers)
                continue
            self._checked.add(port)
            try:
                tree = find_server_tree(None, port, proc=self.proc)
            except TargetError:
                continue  # its listener is another user's, or gone
            found_s = time.perf_counter() - self._started
            netloc = url.removeprefix("http://")
            self._add(url, netloc, port, tree.root, BY_CONNECTIONS, found_s, tree.listeners)

    def _add(
        self,
        url: str,
        netloc: str,
        port: int,
        root: int,
        found_by: str,
        found_s: float,
        listeners: list[int] | tuple[int, ...] = (),
    ) -> None:
        router = set(self.router_pids)
        if router and (
            router & set(tree_pids(root, self.proc))
        ):  # its tree holds the router: its own subtree only
            root = next(iter(listeners), root)
        with_router = root in router
        replica = ReplicaSamples(url, netloc, found_by, round(found_s, 3), root, [], with_router)
        sampler = None if with_router else self.make_sampler(root, port)  # made, not started: no py-spy yet
        with self._lock:
            if self._stop.is_set():
                return
            self._found[port] = replica
            if sampler is not None:  # py-spy takes a while to attach: the watch goes on meanwhile
                self._samplers[port] = sampler
                starting = threading.Thread(
                    target=sampler.start, name="infer-prof-replica-start", daemon=True
                )
                starting.start()
                self._starting.append(starting)


def record_replicas(
    result: RunResult, watch: ReplicaWatch, router_results: dict[int, SamplingResult], out_dir: Path
) -> None:
    """target.replicas (when a replica was named or found) and each replica process's samples-<pid>.txt."""
    from .processes import write_process_samples
    from .replica_section import replicas_section

    replicas = watch.samples(router_results)
    if not replicas or result.target is None:
        return
    metrics = result.metrics or {}
    result.target["replicas"] = replicas_section(
        replicas,
        router=result.target.get("url") or "the target",
        router_pids=watch.router_pids,
        source=watch.source,
        requests=int(metrics.get("completed") or 0) + int(metrics.get("failed") or 0),
    )
    for replica in replicas:
        if not replica.with_router:
            write_process_samples(out_dir, replica.results)
