"""One `run --target` session: a scenario sent over HTTP, the server's process tree sampled (and, if it is ours, traced), one run directory.

prepare  target_plan.py: probe the server, size the prompts, find the server's process tree on this machine
drive    here: open the server's profile window (ours), start py-spy on every Python process of the tree (and on
         each child that appears later), run the load from one asyncio loop (in rounds until resolved:
         rounds.py), stop them all
record   target_record.py: the serving metrics, each process's split, the verdict, the `target` block
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ....scenarios.loadgen import RequestSpec, generate_requests
from ....scenarios.spec import ScenarioSpec
from ...collectors.registry import DEEP_RATE_HZ, DEFAULT_RATE_HZ, CollectorResults
from ...collectors.sampling import SamplingCollector, SamplingResult
from ...rundir.results import RunResult, write_run
from ...rundir.schema import ServerDeath
from ..record import write_samples
from ..session import SessionHooks, SessionOutcome, prepare_prompts
from .client import HttpLoad, HttpRecord, drive_http
from .inject import ProbeSetup
from .liveness import Liveness
from .processes import write_process_samples
from .remote import RemoteWindow
from .rounds import Until, check_until_target, drive_load
from .sample_rate import SampleRate, decide_rate
from .target_plan import TargetPlan, target_port
from .target_record import record_target
from .tree import ServerTree, pids_listening
from .watch import TreeSampler

if TYPE_CHECKING:
    from ....engine.tokenizer import Tokenizer
    from ..until import Stopper
    from .launch import LaunchedServer
    from .ray_cluster import RayAddress
    from .ray_run import RayRun
    from .replicas import ReplicaTarget, ReplicaWatch


DEFAULT_CONTEXT = 2048  # when the server does not report max_model_len


def run_target_session(
    plan: TargetPlan,
    scenario: ScenarioSpec,
    out_dir: Path,
    *,
    tokenizer: Tokenizer,
    profile: str,
    stop_event: threading.Event | None = None,
    hooks: SessionHooks | None = None,
    prompt_model: str = "",
    probe: ProbeSetup | None = None,
    launched: LaunchedServer | None = None,
    ray_address: RayAddress | None = None,
    sample_rate: SampleRate | None = None,
    until_max_time_s: float | None = None,
    replicas: list[ReplicaTarget] | None = None,
) -> SessionOutcome:
    """Drive the scenario against the server and write the run directory (result.json last). A server on this
    machine that dies during the load stops it: what was measured before is kept, the death in `target.death`.
    With `ray_address`, the server's Ray-placed processes are sampled on their own nodes too (ray_run). py-spy's rate
    is `sample_rate`, else decided here (sample_rate.decide_rate: calibrated for another engine's server).
    `until_max_time_s`: go on in whole rounds until the verdict's interval is resolved or this many seconds have
    passed (rounds.py); OptionError, before any load, where there is nothing to look at."""
    if until_max_time_s is not None:
        check_until_target(plan.pid, plan.server.ours, profile)
    hooks = hooks or SessionHooks()
    stop_event = stop_event or threading.Event()
    context = int((plan.server.info or {}).get("engine", {}).get("max_model_len") or DEFAULT_CONTEXT)
    requests = generate_requests(scenario, context)
    prompts = prepare_prompts(requests, tokenizer)
    rate = sample_rate or decide_rate(plan.pid, foreign=not plan.server.ours, profile=profile)
    watchers = _Watchers.of(plan, profile, rate.rate_hz, ray_address, replicas or [])
    watchers.start(plan, launched, stop_event)
    if hooks.on_start:
        hooks.on_start(sum(not request.warmup for request in requests))
    drive = _http_driver(plan, scenario, prompts, watchers.load_stop(stop_event), _Progress(hooks))
    try:
        until = _until(until_max_time_s, watchers, probe, context, hooks)
        load, stopper = drive_load(
            drive, scenario, requests, lambda batch: prompts.update(prepare_prompts(batch, tokenizer)), until
        )
    finally:
        watchers.stop()
    death = watchers.liveness.death if watchers.liveness is not None else None
    interrupted = stop_event.is_set() or (load.stopped_early and death is None)
    return _record_run(
        plan,
        scenario,
        out_dir,
        load,
        stopper,
        watchers,
        rate,
        profile=profile,
        prompt_model=prompt_model,
        probe=probe,
        interrupted=interrupted,
        death=death,
    )


def _until(
    max_time_s: float | None, watchers: _Watchers, probe: ProbeSetup | None, context: int, hooks: SessionHooks
) -> Until | None:
    """The rule that goes on in rounds until resolved (rounds.py); None unless asked for and the tree is sampled."""
    if max_time_s is None or watchers.tree is None:
        return None
    return Until(max_time_s, watchers.tree, probe, context, hooks.on_look, hooks.on_more)


def _record_run(
    plan: TargetPlan,
    scenario: ScenarioSpec,
    out_dir: Path,
    load: HttpLoad,
    stopper: Stopper | None,
    watchers: _Watchers,
    rate: SampleRate,
    *,
    profile: str,
    prompt_model: str,
    probe: ProbeSetup | None,
    interrupted: bool,
    death: ServerDeath | None,
) -> SessionOutcome:
    """The run's RunResult (record_target), how it ended, its sampling sections, then its run directory."""
    result, requests_df, steps_df, collector_results = record_target(
        plan,
        scenario,
        load,
        watchers.window,
        watchers.window_data,
        watchers.tree,
        profile=profile,
        prompt_model=prompt_model,
        probe=probe,
        ray_run=watchers.ray_run,
        stopper=stopper,
    )
    _say_how_it_ended(result, interrupted, death)
    processes = collector_results.get("processes") or {}
    _sampling_sections(result, watchers, rate, processes, load, out_dir)
    write_run(out_dir, result, requests_df, steps_df)
    _write_samples(out_dir, result, watchers, processes, collector_results)
    return SessionOutcome(
        out_dir,
        result,
        requests_df,
        steps_df,
        interrupted=interrupted,
        extras={"collector_results": collector_results},
    )


def _http_driver(
    plan: TargetPlan,
    scenario: ScenarioSpec,
    prompts: dict[int, str],
    load_stop: threading.Event,
    done: _Progress,
) -> Callable[[Sequence[RequestSpec]], HttpLoad]:
    """One round's load: the batch sent to the server from one asyncio loop, as the scenario sends it."""

    def drive(batch: Sequence[RequestSpec]) -> HttpLoad:
        return asyncio.run(
            drive_http(
                plan.server.url,
                plan.server.model,
                batch,
                prompts,
                mode=scenario.mode,
                clients=scenario.clients,
                duration_s=scenario.duration_s,
                stop_event=load_stop,
                on_done=done,
            )
        )

    return drive


def _sampling_sections(
    result: RunResult,
    watchers: _Watchers,
    rate: SampleRate,
    processes: dict[int, SamplingResult],
    load: HttpLoad,
    out_dir: Path,
) -> None:
    """The tree's `target.sampling_rate` (what py-spy's rate cost over the load) and the replicas' sections."""
    if result.target is not None and watchers.tree is not None:
        result.target["sampling_rate"] = rate.section(processes, (load.end_ns - load.start_ns) / 1e9)
    if watchers.replicas is not None:
        from .replicas import record_replicas

        record_replicas(result, watchers.replicas, processes, out_dir)


def _write_samples(
    out_dir: Path,
    result: RunResult,
    watchers: _Watchers,
    processes: dict[int, SamplingResult],
    collector_results: CollectorResults,
) -> None:
    """Each sampled process's samples, the Ray nodes' samples, and the collectors' sample files."""
    write_process_samples(out_dir, processes)
    if watchers.ray_run is not None:
        from .ray_table import write_ray_samples

        write_ray_samples(out_dir, watchers.ray_run.actors.processes, watchers.ray_run.results())
    write_samples(out_dir, collector_results, result)


def _say_how_it_ended(result: RunResult, interrupted: bool, death: ServerDeath | None) -> None:
    """A run stopped by Ctrl-C, or by the server's death, is partial, and says why."""
    result.partial = interrupted or death is not None
    result.partial_reason = "interrupted (Ctrl-C): in-flight requests were cancelled" if interrupted else None
    if death is not None and result.target is not None:
        result.target["death"] = death
        result.partial_reason = result.partial_reason or (
            "the server died during the load: what was measured before is kept, the rest was not sent"
        )


@dataclass
class _Watchers:
    """What measures the server while the load runs: our server's profile window, py-spy on its tree, its replicas,
    its Ray-placed processes (their agents start as they are made), and the watch on its life."""

    window: RemoteWindow | None
    tree: TreeSampler | None
    replicas: ReplicaWatch | None
    ray_run: RayRun | None
    liveness: Liveness | None = None
    window_open: bool = False
    window_data: dict[str, Any] | None = None

    @classmethod
    def of(
        cls,
        plan: TargetPlan,
        profile: str,
        rate_hz: int,
        ray_address: RayAddress | None,
        replicas: list[ReplicaTarget],
    ) -> _Watchers:
        window = RemoteWindow(plan.server.url) if plan.server.ours and profile != "off" else None
        return cls(
            window,
            tree_sampler(plan, profile, rate_hz),
            replica_sampling(plan, replicas, profile, rate_hz),  # --replica, else found
            ray_sampling(plan, ray_address, profile, rate_hz),
        )

    def start(self, plan: TargetPlan, launched: LaunchedServer | None, stop_event: threading.Event) -> None:
        """Open the window, start the samplers, and watch the server's processes for a death (liveness.py)."""
        self.window_open = self.window.start() if self.window else False
        if self.tree is not None:
            self.tree.start()
        if self.replicas is not None:
            self.replicas.start()
        self.liveness = server_liveness(plan, launched, stop_event)
        if self.liveness is not None:
            self.liveness.start()

    def stop(self) -> None:
        """Stop everything, whatever failed: the life watch first, so a server stopping after the load is no death."""
        if self.liveness is not None:
            self.liveness.stop()
        if self.tree is not None:
            self.tree.stop()
        if self.replicas is not None:
            self.replicas.stop()
        if self.ray_run is not None:
            self.ray_run.stop()
        self.window_data = self.window.stop() if self.window and self.window_open else None

    def load_stop(self, stop_event: threading.Event) -> threading.Event:
        """What stops the load: the life watch's event (set on the server's death or the outer stop), else the outer stop."""
        return self.liveness.load_stop if self.liveness is not None else stop_event


def server_liveness(
    plan: TargetPlan, launched: LaunchedServer | None, stop_event: threading.Event
) -> Liveness | None:
    """The watch on the server's processes during the load (None when none of them is on this machine)."""
    listeners = pids_listening(target_port(plan.server.url)) if plan.server.local else []
    root = launched.root if launched is not None else plan.pid or next(iter(listeners), None)
    if root is None:
        return None
    return Liveness(root, listeners, launched=launched, outer_stop=stop_event)


NATIVE_ATTACH_TRIES = 2  # of watch.ATTACH_TRIES


def replica_sampling(
    plan: TargetPlan, given: list[ReplicaTarget], profile: str, rate_hz: int
) -> ReplicaWatch | None:
    """The replicas behind a router (replicas.py: named with --replica, else found through the router's connections),
    each one's tree sampled as the router's is; None with --profile off or neither a tree here nor a --replica."""
    if profile == "off" or (plan.pid is None and not given):
        return None
    from .replicas import ReplicaWatch

    def make_sampler(root: int, port: int) -> TreeSampler:
        replica = dataclasses.replace(plan, pid=root, tree=ServerTree(root, f"port {port}", port, []))
        return cast(TreeSampler, tree_sampler(replica, profile, rate_hz))

    return ReplicaWatch(plan.pid, target_port(plan.server.url), given, make_sampler)


def ray_sampling(plan: TargetPlan, address: RayAddress | None, profile: str, rate_hz: int) -> RayRun | None:
    """The server's Ray-placed processes sampled on their nodes, at the tree's rate and stack mode; None without
    --ray-address (or RAY_ADDRESS) or with --profile off."""
    if address is None or profile == "off":
        return None
    from .ray_run import start_ray_run
    from .tree import tree_pids

    deep = profile == "deep"
    return start_ray_run(
        address,
        tree_pids(plan.pid) if plan.pid is not None else [],
        rate_hz=rate_hz,
        native_stacks=deep or not plan.server.ours,
    )


def tree_sampler(plan: TargetPlan, profile: str, rate_hz: int | None = None) -> TreeSampler | None:
    """One py-spy per Python process of the server's tree, at `rate_hz` (else the profile's rate); None without a tree.

    Another engine's samples need native stacks to tell Python from the C++ it calls (our own server has its
    spans), so those are sampled with --native at every profile; a process where py-spy cannot unwind is
    tried again without it."""
    if plan.pid is None or profile == "off":
        return None
    deep = profile == "deep"
    native_stacks = deep or not plan.server.ours
    native_tries: dict[int, int] = {}

    def make_collector(pid: int) -> SamplingCollector:
        # A process caught while it starts can refuse an attach that works a moment later: native stacks are
        # tried twice before the last try goes without them.
        native_tries[pid] = native_tries.get(pid, 0) + 1
        use_native = native_stacks and native_tries[pid] <= NATIVE_ATTACH_TRIES
        return SamplingCollector(
            pid=pid,
            rate=rate_hz or (DEEP_RATE_HZ if deep else DEFAULT_RATE_HZ),
            native_stacks=use_native,
            priority="realtime" if deep else "low",
        )

    return TreeSampler(plan.pid, make_collector, port=plan.tree.port if plan.tree else None)


class _Progress:
    def __init__(self, hooks: SessionHooks) -> None:
        self.hooks, self.requests, self.tokens = hooks, 0, 0

    def __call__(self, record: HttpRecord) -> None:
        if record.request.warmup:
            return
        self.requests += 1
        self.tokens += record.completion_tokens or len(record.token_ns)
        if self.hooks.on_request_done:
            self.hooks.on_request_done(self.requests, self.tokens)
