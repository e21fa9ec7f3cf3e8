"""Sample a Ray-backed server's processes where they live: one short-lived agent actor per node, pinned there by node affinity, running py-spy on that node's pids for the load, its clock measured against ours.

Each node's outcome is named and the run goes on with the rest: an agent Ray cannot place (a node with no
CPU free for it: what to change is said), a node without py-spy, a node that dies during the load (the
chunks it sent before are kept). The agents are actors of infer-prof's own job, so they end with it.
With the probe's folder (a server launched with --probe), each agent also reads its node's perf_counter_ns in
rounds as it starts and after the load, and hands over the probe's files of its node's processes before it goes
(ray_probe.py aligns and merges them); a node whose files cannot be read or sent is named, the run goes on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...analysis.classify import parse_raw
from ...analysis.clock_offsets import ClockOffset, ClockRound, estimate_offset
from ...collectors.sampling import SamplingResult, py_spy_command, summarize_stacks
from ...rundir.schema import RayNodeEntry
from . import ray_agent
from .ray_probe import clock_line
from .ray_processes import RayProcess

AGENT_CPUS_VAR = "INFER_PROF_RAY_AGENT_CPUS"
AGENT_CPUS = 0.1  # reserved per agent, so Ray places it where a CPU is free; py-spy at a few Hz needs little
CLOCK_ROUNDS = 8
PLACE_TIMEOUT_S = 30.0  # an agent Ray has not started by then is named as not placed
POLL_S = 1.0  # how often finished chunks are fetched from each node
CALL_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = ray_agent.STOP_WAIT_S + 15.0  # the agent waits for py-spy to write, then answers
MISSED_POLLS = 3  # polls in a row without an answer: the node is taken as gone
CHUNK_S = 5  # seconds of py-spy per chunk: what a node that dies mid-run can lose
PROBE_FLUSH_S = 0.6  # the probe writes its records every 0.25 s: after the load, its last flush is in by then
# Of probe files a node sends (one Ray object): a file cut there keeps its whole lines, and the cut is named.
PROBE_MAX_BYTES = 256 * 1024 * 1024
PROBE_TIMEOUT_S = 60.0

# Node outcomes, as the result names them.
SAMPLING, NOT_PLACED, NO_CPU, NO_PY_SPY, DIED, DONE = (
    "sampling",
    "not placed",
    "no free CPU",
    "no py-spy",
    "died",
    "done",
)


@dataclass
class NodeRun:
    """One node's agent: its pids, what became of it, its clock against ours and the chunks it sent."""

    node_id: str
    node_ip: str
    pids: list[int]
    status: str = "pending"
    reason: str | None = None
    hostname: str | None = None
    clock: ClockOffset | None = None
    chunks: list[ray_agent.SpyChunk] = field(default_factory=list)
    died_after_s: float | None = None
    missed: int = 0
    agent: Any = None
    # its perf_counter_ns (the probe's clock) against ours, as it started and as the probe's files were fetched
    perf_start: list[ClockRound] = field(default_factory=list)
    perf_stop: list[ClockRound] = field(default_factory=list)
    probe: dict[str, Any] | None = None  # ray_agent.read_probe_files' answer
    probe_reason: str | None = None  # why its probe files are not here, or what was missing from them

    @property
    def name(self) -> str:
        return f"node {self.node_id[:8]} ({self.node_ip or 'no IP'})"


def agent_cpus(environ: Mapping[str, str] = os.environ) -> float:
    """The CPU each agent reserves: INFER_PROF_RAY_AGENT_CPUS, else AGENT_CPUS (0: placed even on a full node)."""
    text = environ.get(AGENT_CPUS_VAR, "").strip()
    if not text:
        return AGENT_CPUS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 64:
        from ....errors import OptionError

        raise OptionError(f"{AGENT_CPUS_VAR}={text}: give the CPUs each sampling agent reserves, 0 to 64")
    return value


def free_cpus_per_node() -> dict[str, float] | None:
    """Each node's free CPUs as Ray counts them (None where this Ray cannot say)."""
    try:
        from ray._private import state

        return {
            node: float(res.get("CPU", 0.0)) for node, res in state.available_resources_per_node().items()
        }
    except Exception:  # a Ray without this developer call: placement's timeout still names the node
        return None


def no_cpu_reason(node: NodeRun, free: float, wanted: float) -> str:
    return (
        f"{node.name} has {free:g} CPU free and its sampling agent asks {wanted:g}: free a CPU there (start the "
        f"node with a larger --num-cpus), or set {AGENT_CPUS_VAR}=0 to place agents without reserving one"
    )


class NodeAgents:
    """Between start() and stop(), one agent per node that holds a process of `processes`."""

    def __init__(
        self,
        ray: Any,
        processes: list[RayProcess],
        *,
        rate_hz: int,
        native_stacks: bool,
        cpus: float = AGENT_CPUS,
        place_timeout_s: float = PLACE_TIMEOUT_S,
        poll_s: float = POLL_S,
        chunk_s: int | None = None,
        clock: Callable[[], int] = time.time_ns,
        free_cpus: Callable[[], dict[str, float] | None] | None = None,
        probe_folder: str | None = None,
        perf_clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.ray, self.cpus, self.place_timeout_s, self.poll_s, self.clock = (
            ray,
            cpus,
            place_timeout_s,
            poll_s,
            clock,
        )
        self.rate_hz, self.native_stacks = rate_hz, native_stacks
        self.probe_folder, self.perf_clock = probe_folder, perf_clock
        self._free_cpus = free_cpus or free_cpus_per_node
        self.command = py_spy_command(
            "py-spy",
            0,
            ray_agent.OUTPUT_SLOT,
            rate=rate_hz,
            native_stacks=native_stacks,
            idle=True,
            gil=False,
            duration_s=chunk_s or CHUNK_S,
        )
        self.command[self.command.index("0")] = ray_agent.PID_SLOT
        self.nodes: dict[str, NodeRun] = {}
        for process in processes:
            node = self.nodes.setdefault(process.node_id, NodeRun(process.node_id, process.node_ip, []))
            node.pids.append(process.pid)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_ns = 0

    # -- start ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Place every agent (at most place_timeout_s), measure its clock, start its sampling."""
        self._started_ns = self.clock()
        free = self._free_cpus()
        from ray import cloudpickle
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        cloudpickle.register_pickle_by_value(ray_agent)  # sent whole: a node needs nothing of infer-prof
        remote = self.ray.remote(ray_agent.NodeAgent)

        hellos: dict[Any, NodeRun] = {}
        for node in self.nodes.values():
            if free is not None and self.cpus > 0 and free.get(node.node_id, 0.0) < self.cpus:
                node.status, node.reason = NO_CPU, no_cpu_reason(node, free.get(node.node_id, 0.0), self.cpus)
                continue
            node.agent = remote.options(
                num_cpus=self.cpus,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
                max_restarts=0,
            ).remote(self.command)
            hellos[node.agent.hello.remote()] = node
        ready, pending = (
            self.ray.wait(list(hellos), num_returns=len(hellos), timeout=self.place_timeout_s)
            if hellos
            else ([], [])
        )
        for ref in pending:
            node = hellos[ref]
            node.status = NOT_PLACED
            node.reason = (
                f"Ray did not start the sampling agent on {node.name} within {self.place_timeout_s:g} s (it is "
                "pending: the node is full, gone, or cannot start a worker); its processes are listed, not sampled"
            )
            self._kill(node)
        for ref in ready:
            self._begin(hellos[ref], ref)
        self._thread = threading.Thread(target=self._poll, name="infer-prof-ray-agents", daemon=True)
        self._thread.start()

    def _begin(self, node: NodeRun, hello_ref: Any) -> None:
        try:
            hello = self.ray.get(hello_ref, timeout=CALL_TIMEOUT_S)
            node.hostname = hello.get("hostname")
            if not hello.get("py_spy"):
                node.status, node.reason = (
                    NO_PY_SPY,
                    f"{node.name} cannot run py-spy: {hello.get('py_spy_where')}",
                )
                self._kill(node)
                return
            rounds = []
            for _ in range(CLOCK_ROUNDS):
                sent = self.clock()
                remote_ns = self.ray.get(node.agent.clock.remote(), timeout=CALL_TIMEOUT_S)
                rounds.append(ClockRound(sent, int(remote_ns), self.clock()))
            node.clock = estimate_offset(rounds)
            if self.probe_folder is not None:
                node.perf_start = self._perf_rounds(node)
            self.ray.get(node.agent.start.remote(node.pids), timeout=CALL_TIMEOUT_S)
        except Exception as error:  # the actor died as it started (its node went, its worker failed to start)
            node.status = NOT_PLACED
            node.reason = f"the sampling agent on {node.name} failed to start: {_first_line(error)}"
            self._kill(node)
            return
        node.status = SAMPLING

    # -- during the load --------------------------------------------------------------------------------------

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            for node in self.nodes.values():
                if node.status == SAMPLING:
                    self._collect(node, "collect", CALL_TIMEOUT_S)

    def _collect(self, node: NodeRun, call: str, timeout_s: float) -> None:
        from ray.exceptions import GetTimeoutError

        try:
            chunks = self.ray.get(getattr(node.agent, call).remote(), timeout=timeout_s)
        except GetTimeoutError:
            node.missed += 1
            if node.missed >= MISSED_POLLS or call == "stop":
                self._died(node, f"its agent stopped answering ({node.missed} calls of {timeout_s:g} s)")
            return
        except Exception as error:  # RayActorError and kin: the agent's process or its node is gone
            self._died(node, _first_line(error))
            return
        node.missed = 0
        node.chunks.extend(chunks)

    def _died(self, node: NodeRun, why: str) -> None:
        node.status, node.died_after_s = DIED, (self.clock() - self._started_ns) / 1e9
        kept = sum(1 for chunk in node.chunks if not chunk.get("error"))
        node.reason = (
            f"{node.name} was lost {node.died_after_s:.1f} s into the run ({why}); the {kept} chunk(s) of samples "
            "it sent before are kept"
        )

    # -- stop -------------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """End every agent's sampling, fetch what is left (and the probe's files), and remove the agents."""
        began = time.monotonic()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            for node in self.nodes.values():
                if node.status == SAMPLING:
                    # a node that already missed a poll gets the short timeout: it is likely gone, not writing
                    self._collect(node, "stop", CALL_TIMEOUT_S if node.missed else STOP_TIMEOUT_S)
                    if node.status == SAMPLING:
                        node.status = DONE
            if self.probe_folder is not None:
                time.sleep(max(0.0, PROBE_FLUSH_S - (time.monotonic() - began)))
                self._fetch_probes()
        finally:
            for node in self.nodes.values():
                self._kill(node)

    def _perf_rounds(self, node: NodeRun) -> list[ClockRound]:
        """Rounds of the node's perf_counter_ns (the probe's clock) against ours."""
        rounds = []
        for _ in range(CLOCK_ROUNDS):
            sent = self.perf_clock()
            remote_ns = self.ray.get(node.agent.perf_clock.remote(), timeout=CALL_TIMEOUT_S)
            rounds.append(ClockRound(sent, int(remote_ns), self.perf_clock()))
        return rounds

    def _fetch_probes(self) -> None:
        """Each node's probe files and its clock once more; a node that cannot send them is named."""
        asked: dict[str, Any] = {}
        for node in self.nodes.values():
            if node.status != DONE:
                node.probe_reason = f"the probe's files on {node.name} were not read: its agent is not running ({node.status})"
                continue
            try:
                node.perf_stop = self._perf_rounds(node)
                folders = [self.probe_folder] if self.probe_folder else []
                asked[node.node_id] = node.agent.probe_files.remote(node.pids, folders, PROBE_MAX_BYTES)
            except Exception as error:
                node.probe_reason = (
                    f"the probe's files on {node.name} could not be read or sent: {_first_line(error)}"
                )
        for node_id, ref in asked.items():
            node = self.nodes[node_id]
            try:
                node.probe = self.ray.get(ref, timeout=PROBE_TIMEOUT_S)
            except Exception as error:  # GetTimeoutError, the agent or its node gone, an object too large
                node.probe_reason = (
                    f"the probe's files on {node.name} could not be read or sent: {_first_line(error)}"
                )
                continue
            assert node.probe is not None
            if not node.probe.get("files"):
                looked = (
                    ", ".join(node.probe.get("looked_in") or []) or "no folder (no process there names one)"
                )
                node.probe_reason = (
                    f"no probe files of {node.name}'s processes (pids {', '.join(map(str, node.probe.get('pids') or node.pids))}) "
                    f"in {looked}: were its workers started with the probe's PYTHONPATH and {ray_agent.PROBE_DIR_ENV} "
                    "(runtime_env env_vars), in a folder that node has?"
                )
            elif node.probe.get("notes"):
                node.probe_reason = f"the probe's files on {node.name}: {'; '.join(node.probe['notes'][:3])}"

    def _kill(self, node: NodeRun) -> None:
        if node.agent is not None:
            try:
                self.ray.kill(node.agent, no_restart=True)
            except Exception:  # already gone with its node
                pass
            node.agent = None

    # -- results ----------------------------------------------------------------------------------------------

    def results(self) -> dict[tuple[str, int], RaySamplingResult]:
        """Each process's sampling result, keyed (node_id, pid), in collectors.sampling's shape."""
        out: dict[tuple[str, int], RaySamplingResult] = {}
        for node in self.nodes.values():
            for pid in node.pids:
                out[(node.node_id, pid)] = sampling_result(node, pid, self.rate_hz)
        return out

    def section(self) -> list[RayNodeEntry]:
        """The nodes' entries of target.ray: outcome, clock offset with its uncertainty, chunks received."""
        entries: list[RayNodeEntry] = []
        for node in self.nodes.values():
            entry: RayNodeEntry = {
                "node_id": node.node_id,
                "node_ip": node.node_ip,
                "hostname": node.hostname,
                "pids": list(node.pids),
                "agent": node.status,
                "reason": node.reason,
                "clock_offset_ms": node.clock.offset_ns / 1e6 if node.clock else None,
                "clock_uncertainty_ms": node.clock.uncertainty_ns / 1e6 if node.clock else None,
                "clock_consistent": node.clock.consistent if node.clock else None,
                "chunks": sum(1 for chunk in node.chunks if not chunk.get("error")),
                "died_after_s": node.died_after_s,
            }
            if self.probe_folder is not None:
                entry.update(self._probe_entry(node))
            entries.append(entry)
        return entries

    def _probe_entry(self, node: NodeRun) -> RayNodeEntry:
        line = clock_line(node.perf_start, node.perf_stop) if node.perf_start else None
        drift = line.drift_ns if line is not None else None
        return {
            "probe_processes": len((node.probe or {}).get("files") or {}),
            "probe_reason": node.probe_reason,
            "probe_clock_uncertainty_ms": line.uncertainty_ns / 1e6 if line is not None else None,
            "probe_clock_drift_ms": drift / 1e6 if drift is not None else None,
        }


class RaySamplingResult(SamplingResult, total=False):
    """A Ray process's sampling result, made on the driver from the chunks its node's agent sent."""

    chunks: int
    window_driver_ns: list[int] | None  # first and last sample, on the driver's clock
    partial: bool  # its node died before the end


def sampling_result(node: NodeRun, pid: int, rate_hz: int) -> RaySamplingResult:
    """One process's chunks as one sampling result; its window read on the driver's clock through the offset."""
    chunks = [chunk for chunk in node.chunks if chunk["pid"] == pid]
    good = [chunk for chunk in chunks if not chunk.get("error")]
    if not good:
        errors = [chunk["error"] for chunk in chunks if chunk.get("error")]
        reason = errors[0] if errors else node.reason or f"{node.name}: its agent sent no samples"
        return {"status": "skipped", "reason": reason}
    raw_text = "".join(
        chunk["raw_text"] if chunk["raw_text"].endswith("\n") else chunk["raw_text"] + "\n" for chunk in good
    )
    stacks = parse_raw(raw_text)
    native = all(chunk["native"] for chunk in good)
    counted = [samples for chunk in good if (samples := chunk.get("samples")) is not None]
    offset = node.clock
    window = [min(chunk["started_ns"] for chunk in good), max(chunk["ended_ns"] for chunk in good)]
    return {
        "status": "ok",
        "reason": node.reason if node.status == DIED else None,
        "mode": "native" if native else "nonblocking",
        "rate_hz": rate_hz,
        "scheduling": None,
        "native_stacks": native,
        "samples": sum(counted) if len(counted) == len(good) else sum(stack.count for stack in stacks),
        "errors": sum(int(chunk.get("errors") or 0) for chunk in good),
        "raw_path": None,
        "raw_text": raw_text,
        "engine_thread_id": None,
        "threads": summarize_stacks(stacks),
        "overhead": {"py_spy_cpu_s": None, "py_spy_cpu_fraction": None, "failed_sample_fraction": None},
        "chunks": len(good),
        "window_driver_ns": [offset.to_driver_ns(edge) for edge in window] if offset else None,
        "partial": node.status == DIED,
    }


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)[:300]
