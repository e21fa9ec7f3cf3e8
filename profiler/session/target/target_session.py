"""One `run --target` session: a scenario sent over HTTP, the server's process tree sampled (and, if it is ours, traced), one run directory.

prepare  probe the server, size the prompts, find the server's process tree on this machine (from --pid,
         any process of it; from the process listening on the target's port; from a --launch'ed command;
         or from the pid a local `infer-prof serve` reports)
drive    open the server's profile window (ours), start py-spy on every Python process of the tree (and on
         each child that appears later), run the load from one asyncio loop, stop them all
record   client-side serving metrics (the same definitions as in-process), each process's role and split, the
         server's split (spans from our server, samples of the process that runs the engine loop), the
         `target` block -> RunResult
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from ....errors import TargetError
from ....scenarios.loadgen import RequestSpec, generate_requests
from ....scenarios.spec import ScenarioSpec
from ...analysis.foreign import (
    foreign_breakdown,
    queueing_reason,
    with_probe_bound,
    with_slowdowns,
)
from ...analysis.metrics import (
    RequestTiming,
    compute_metrics,
    engine_timeline_summary,
    latency_summary,
)
from ...analysis.probe_slowdown import analyse_slowdowns
from ...analysis.probe_spans import analyse_probe, probe_bounds, probe_sentences
from ...collectors.registry import DEEP_RATE_HZ, DEFAULT_RATE_HZ, PROFILES
from ...collectors.sampling import SamplingCollector
from ...rundir.environment import describe_environment
from ...rundir.results import REQUEST_COLUMNS, STEP_COLUMNS, RunResult, write_run
from ...rundir.schema import (
    Breakdown,
    CollectorStatus,
    Config,
    EngineFigures,
    Environment,
    Metrics,
    Probe,
    ProbeWhatIf,
    SampledThread,
    Target,
)
from ..options import OptionError
from ..record import write_samples
from ..session import SessionHooks, SessionOutcome, prepare_prompts
from ..until import Stopper
from .client import HttpLoad, HttpRecord, drive_http, http_outcome
from .inject import ProbeSetup, read_probe
from .liveness import Liveness
from .probe import ServerInfo
from .processes import primary_pid, process_table, write_process_samples
from .remote import RemoteWindow
from .rounds import SAMPLES_WIDTHS, Rounds, check_until_target, drive_rounds, round_maker, samples_judge
from .sample_rate import SampleRate, decide_rate
from .server_split import (
    foreign_processes,
    gil_section,
    server_breakdown,
    server_verdict,
    thread_table,
)
from .tree import ServerTree, find_server_tree, pids_listening
from .watch import TreeSampler

if TYPE_CHECKING:
    from ....engine.tokenizer import Tokenizer
    from .launch import LaunchedServer
    from .ray_cluster import RayAddress
    from .ray_run import RayRun
    from .replicas import ReplicaTarget, ReplicaWatch

CLIENT_BUSY_FRACTION = 0.8  # of one core: above it the client may be what limits the load
CLIENT_LAG_MS = 50.0  # p99 lateness of sends against the schedule that says the same
DEFAULT_CONTEXT = 2048  # when the server does not report max_model_len


@dataclass
class TargetPlan:
    """What the session will do, decided before any load is sent."""

    server: ServerInfo
    pid: int | None  # the root of the process tree sampled
    pid_source: str | None  # "--pid", "port N", "--launch" or "infer-prof serve"
    split_unavailable: str | None  # why no split can be measured, known up front
    tree: ServerTree | None = None


def target_port(url: str) -> int:
    """The TCP port of a target URL (80 or 443 when it names none)."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def plan_target(
    server: ServerInfo, pid: int | None, profile: str, *, launched: int | None = None
) -> TargetPlan:
    """Which process tree to sample: the --launch'ed command's, the tree holding --pid, our server's, or the one
    listening on the target's port. OptionError for a --pid that is no process here; TargetError for a --pid that
    is not Python or not the server's."""
    if profile not in PROFILES:
        raise OptionError(f"--profile={profile!r}: use one of {', '.join(PROFILES)}")
    if pid is not None and (pid <= 0 or not os.path.exists(f"/proc/{pid}")):
        raise OptionError(f"--pid {pid}: no such process on this machine; give the pid of the server process")
    port = target_port(server.url) if server.local else None
    if launched is not None:
        tree = ServerTree(launched, "--launch", port, [])
    elif pid is not None:
        tree = find_server_tree(pid, port)
    elif server.pid is not None:
        tree = ServerTree(server.pid, "infer-prof serve", port, [server.pid])
    elif port is not None and profile != "off":
        try:
            tree = find_server_tree(None, port)
        except (
            TargetError
        ) as error:  # a server in a container or behind a proxy: measure the client side only
            return TargetPlan(
                server, None, None, None if server.ours else f"{error} (py-spy has no process to attach to)"
            )
    else:
        reason = (
            "the server is not on this machine: py-spy has no process to attach to (run infer-prof where the "
            "server runs, or use --launch)"
        )
        return TargetPlan(
            server, None, None, "--profile off" if profile == "off" else None if server.ours else reason
        )
    return TargetPlan(server, tree.root, tree.source, "--profile off" if profile == "off" else None, tree)


def check_prompt_model(model: str) -> None:
    """--model names a tokenizer infer-prof has (ModelNotFoundError if not), checked by name and path alone, before
    a server starts or a request is sent: loading the tokenizer itself takes seconds, and is done after."""
    from ....engine.catalog import DEFAULT_MODEL, SYNTHETIC_PREFIX, SYNTHETIC_SHAPES, list_models
    from ....errors import ModelNotFoundError

    if model == DEFAULT_MODEL or (
        model.startswith(SYNTHETIC_PREFIX) and model[len(SYNTHETIC_PREFIX) :] in SYNTHETIC_SHAPES
    ):
        return
    path = Path(model).expanduser()
    if model.endswith(".gguf") or path.exists():
        if not path.exists():
            raise ModelNotFoundError(f"model file {model!r} does not exist: check the path")
        if not path.is_file():
            raise ModelNotFoundError(f"model path {model!r} is not a file: give the path of a .gguf file")
        return
    names = ", ".join(name for name, _ in list_models())
    raise ModelNotFoundError(f"unknown model {model!r}: valid names are {names}")


@functools.cache  # tokenizers are immutable; reading one from a GGUF takes seconds
def prompt_tokenizer(model: str):
    """The tokenizer prompts are sized with: the --model GGUF's, else SmolLM2's (synthetic models use it too).
    ModelNotFoundError for a name no model has (a typo would otherwise size prompts with SmolLM2's silently)."""
    from ....engine.loader import describe_model, find_smollm2
    from ....engine.tokenizer import Tokenizer

    describe_model(model)
    if model.endswith(".gguf") or Path(model).expanduser().is_file():
        return Tokenizer.from_gguf(Path(model).expanduser())
    path, _where = find_smollm2(lambda message: None)
    return Tokenizer.from_gguf(path)


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
    server = plan.server
    context = int((server.info or {}).get("engine", {}).get("max_model_len") or DEFAULT_CONTEXT)
    requests = generate_requests(scenario, context)
    prompts = prepare_prompts(requests, tokenizer)
    window = RemoteWindow(server.url) if server.ours and profile != "off" else None
    rate = sample_rate or decide_rate(plan.pid, foreign=not server.ours, profile=profile)
    ray_run = ray_sampling(plan, ray_address, profile, rate.rate_hz)
    tree = tree_sampler(plan, profile, rate.rate_hz)
    replica_watch = replica_sampling(plan, replicas or [], profile, rate.rate_hz)  # --replica, else found
    done = _Progress(hooks)
    window_open = window.start() if window else False
    if tree is not None:
        tree.start()
    if replica_watch is not None:
        replica_watch.start()
    if hooks.on_start:
        hooks.on_start(sum(not request.warmup for request in requests))
    interrupted = False
    liveness = server_liveness(plan, launched, stop_event)
    if liveness is not None:
        liveness.start()

    def drive(batch: Sequence[RequestSpec]) -> HttpLoad:
        return asyncio.run(
            drive_http(
                server.url,
                server.model,
                batch,
                prompts,
                mode=scenario.mode,
                clients=scenario.clients,
                duration_s=scenario.duration_s,
                stop_event=liveness.load_stop if liveness is not None else stop_event,
                on_done=done,
            )
        )

    stopper = None
    try:
        if until_max_time_s is None or tree is None:
            load = drive(requests)
        else:
            rounds = Rounds()
            stopper = Stopper(
                until_max_time_s,
                samples_judge(tree, probe, rounds),
                widths=SAMPLES_WIDTHS,
                on_look=hooks.on_look,
            )
            stopper.start()
            more = round_maker(
                scenario,
                context,
                requests,
                lambda batch: prompts.update(prepare_prompts(batch, tokenizer)),
                stopper,
                hooks.on_more,
            )
            load = drive_rounds(drive, requests, more, rounds)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if liveness is not None:
            liveness.stop()
        if tree is not None:
            tree.stop()
        if replica_watch is not None:
            replica_watch.stop()
        if ray_run is not None:
            ray_run.stop()
        window_data = window.stop() if window and window_open else None
    death = liveness.death if liveness is not None else None
    interrupted = interrupted or stop_event.is_set() or (load.stopped_early and death is None)
    result, requests_df, steps_df, collector_results = record_target(
        plan,
        scenario,
        load,
        window,
        window_data,
        tree,
        profile=profile,
        prompt_model=prompt_model,
        probe=probe,
        ray_run=ray_run,
        stopper=stopper,
    )
    result.partial = interrupted or death is not None
    result.partial_reason = "interrupted (Ctrl-C): in-flight requests were cancelled" if interrupted else None
    if death is not None and result.target is not None:
        result.target["death"] = death
        result.partial_reason = result.partial_reason or (
            "the server died during the load: what was measured before is kept, the rest was not sent"
        )
    if result.target is not None and tree is not None:
        wall_s = (load.end_ns - load.start_ns) / 1e9
        result.target["sampling_rate"] = rate.section(collector_results.get("processes"), wall_s)
    if replica_watch is not None:
        from .replicas import record_replicas

        record_replicas(result, replica_watch, collector_results.get("processes") or {}, out_dir)
    write_run(out_dir, result, requests_df, steps_df)
    write_process_samples(out_dir, collector_results.get("processes") or {})
    if ray_run is not None:
        from .ray_table import write_ray_samples

        write_ray_samples(out_dir, ray_run.actors.processes, ray_run.results())
    write_samples(out_dir, collector_results, result)
    return SessionOutcome(
        out_dir,
        result,
        requests_df,
        steps_df,
        interrupted=interrupted,
        extras={"collector_results": collector_results},
    )


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


def record_target(
    plan: TargetPlan,
    scenario: ScenarioSpec,
    load: HttpLoad,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
    tree: TreeSampler | None,
    *,
    profile: str,
    prompt_model: str,
    probe: ProbeSetup | None = None,
    ray_run: RayRun | None = None,
    stopper: Stopper | None = None,
) -> tuple[RunResult, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The run's result, requests.csv, steps.csv and collector results (`processes`: each pid's sampling); after a
    run that went on until resolved (`stopper`), the verdict's intervals at its last look's confidence."""
    confidence = stopper.confidence if stopper is not None else 0.95
    timings, rows = _request_tables(load.records)
    measured_end = max(
        [row["finish_ns"] for row in rows if not row["warmup"] and row["finish_ns"]] or [load.end_ns]
    )
    duration_s = max(1e-9, (measured_end - load.start_ns) / 1e9)
    metrics = compute_metrics(timings, duration_s=duration_s, slos=scenario.slo.as_dict())
    metrics["slo"] = scenario.slo.as_dict()
    lags = [
        (r.send_ns - r.scheduled_ns) / 1e6
        for r in load.records
        if not r.request.warmup and r.send_ns is not None and r.scheduled_ns is not None
    ]
    metrics["loadgen_schedule_lag_ms"] = {
        "mean": float(np.mean(lags)) if lags else None,
        "p99": float(np.percentile(lags, 99)) if lags else None,
        "max": float(max(lags)) if lags else None,
    }

    watched = tree.processes() if tree is not None else []
    results = {w.info.pid: w.collector.result() for w in watched if w.collector is not None}
    primary = primary_pid(watched, results, prefer=plan.server.pid if plan.server.ours else None)
    sampling = results.get(primary) if primary is not None else _unsampled(plan, watched, results)
    processes = (
        process_table(watched, results, primary, load.end_ns - load.start_ns) if tree is not None else None
    )
    collectors: dict[str, CollectorStatus] = (
        {"sampling": {"status": sampling["status"], "reason": sampling["reason"]}} if sampling else {}
    )
    if window is not None:
        ok = window_data is not None
        for name in ("spans", "gc"):
            collectors[name] = {"status": "ok" if ok else "failed", "reason": None if ok else window.error}
    steps = window_data["steps"] if window_data else []
    native = list((plan.server.info or {}).get("native") or [])
    breakdown, engine_thread, _notes = server_breakdown(
        sampling, window_data, load.end_ns - load.start_ns, native, pid=primary
    )
    sampled = [(pid, result) for pid, result in results.items() if result.get("status") == "ok"]
    if ray_run is not None:  # the processes Ray placed, sampled on their nodes: read beside the tree's
        sampled += ray_run.sampled()
        processes = ray_run.rows(processes, load.end_ns - load.start_ns)
    if window_data is None and not plan.server.ours and len(sampled) > 1:
        # Another engine of several processes: the verdict reads the whole tree (the engine loop's process, the
        # model worker it waits on, the API server beside them), not the primary process alone.
        breakdown = foreign_breakdown(foreign_processes(sampled), load.end_ns - load.start_ns)
    threads = thread_table(sampling, primary) if sampling and sampling.get("status") == "ok" else {}
    probe_section = _probe_section(probe, load, processes, confidence) if probe is not None else None
    probed = bool(probe_section and probe_section["loaded_in"])
    if probe is not None:
        collectors["probe"] = {"status": "ok" if probed else "failed", "reason": None if probed else NO_PROBE}
    verdict = (
        server_verdict(breakdown, collectors, probed=probed, confidence=confidence)
        if breakdown is not None
        else None
    )
    if verdict is not None and stopper is not None:
        verdict["stopping"] = stopper.record()
    if verdict is not None:
        queued = queueing_reason(verdict, cast(Metrics, metrics))
        if queued:
            verdict["reasons"] = [*verdict.get("reasons", []), queued]
            verdict.setdefault("foreign", {})["queueing"] = queued
        if probe_section is not None:
            engine = (verdict.get("foreign") or {}).get("engine") or "the engine"
            probe_section["lines"] = (
                probe_sentences(probe_section, engine) if probed else [f"In-process probe: {NO_PROBE}."]
            )
            what_if = probe_section.get("what_if")
            verdict["reasons"] = [
                *verdict.get("reasons", []),
                *probe_section["lines"],
                *(what_if or {}).get("lines", []),
                *probe_bounds(probe_section, engine),
            ]
            if what_if is not None:
                with_slowdowns(verdict, what_if)
            if probed:  # the loop's own work, timed by the probe, bounds its interpreter share from above
                with_probe_bound(verdict, probe_section, confidence=confidence)
    target = _target_block(
        plan,
        load,
        breakdown,
        sampling,
        window,
        window_data,
        threads,
        engine_thread,
        duration_s,
        processes,
        primary,
    )
    if probe_section is not None:
        target["probe"] = probe_section
    if ray_run is not None:
        target["ray"] = ray_run.section(processes)
    elif processes:  # a tree that runs Ray: say what --ray-address would add
        from .ray_run import ray_hint

        if (hint := ray_hint(processes)) is not None:
            target["ray"] = hint
    # describe_environment, compute_metrics and engine_timeline_summary build their sections as plain dicts.
    result = RunResult(
        config=_config(plan, scenario, profile, list(collectors), prompt_model),
        environment=cast(Environment, describe_environment()),
        scenario=scenario.to_dict(),
        metrics=cast(Metrics, metrics),
        engine=cast(
            EngineFigures,
            {
                **(engine_timeline_summary(steps) if steps else {}),
                **({"steps": len(steps)} if steps else {}),
            },
        ),
        collectors=collectors,
        breakdown=breakdown,
        verdict=verdict,
        target=target,
    )
    collector_results: dict[str, Any] = {"sampling": sampling} if sampling else {}
    collector_results["processes"] = results
    steps_df = pd.DataFrame(steps) if steps else pd.DataFrame(columns=list(STEP_COLUMNS))
    return result, pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)), steps_df, collector_results


NO_PROBE = (
    "no process of the server loaded the probe: does the command reset PYTHONPATH, or run Python with -S "
    "or -I? (the probe is a sitecustomize on the PYTHONPATH it is given)"
)
PROBE_FLUSH_S = 0.6  # the probe writes its spans every 0.25 s
NO_TURNS = (
    "Slowdowns (--what-if): no process of the server took the experiments' turns (no step probe ran, or the "
    "probe could not write its switch), so nothing was delayed or measured."
)


def _probe_section(
    probe: ProbeSetup, load: HttpLoad, processes: list[dict[str, Any]] | None, confidence: float = 0.95
) -> Probe:
    """The probe's spans (read once its last flush is in), analysed over the load; the loop's own work with its
    interval at `confidence`."""
    time.sleep(PROBE_FLUSH_S)
    table = {int(entry["pid"]): entry for entry in processes or []}
    found = read_probe(probe)
    section = analyse_probe(
        probe.probes,
        found,
        (load.start_ns, load.end_ns),
        roles={pid: str(entry.get("role")) for pid, entry in table.items()},
        sampled=table,
        confidence=confidence,
    )
    section["lines"] = []
    if probe.what_if is not None:
        what_if = analyse_slowdowns(
            probe.probes,
            found,
            (load.start_ns, load.end_ns),
            roles={pid: str(entry.get("role")) for pid, entry in table.items()},
        )
        no_turns: ProbeWhatIf = {"components": {}, "lines": [NO_TURNS]}
        section["what_if"] = what_if if what_if is not None else no_turns
    return section


def _unsampled(
    plan: TargetPlan, watched: list[Any], results: dict[int, dict[str, Any]]
) -> dict[str, Any] | None:
    """What stands for the sampling result when no process could be sampled: the first failure, or why none
    of the tree's processes was Python."""
    if plan.pid is None:
        return None
    failed = [result for result in results.values() if result.get("status") != "ok"]
    if failed:
        return failed[0]
    reason = (
        f"no Python process in the tree of pid {plan.pid} ({', '.join(w.info.title for w in watched) or 'gone'}): "
        "py-spy samples Python only"
    )
    return {"status": "skipped", "reason": reason}


def _request_tables(records: list[HttpRecord]) -> tuple[list[RequestTiming], list[dict[str, Any]]]:
    timings, rows = [], []
    for index, record in enumerate(records):
        if record.send_ns is None:
            continue  # never sent (stopped before its turn)
        ok = record.ok
        first = (
            record.first_token_ns if record.first_token_ns is not None else (record.finish_ns if ok else None)
        )
        output_tokens = (
            record.completion_tokens if record.completion_tokens is not None else len(record.token_ns)
        )
        prompt_tokens = (
            record.prompt_tokens if record.prompt_tokens is not None else record.request.prompt_tokens
        )
        timings.append(
            RequestTiming(
                request_id=index,
                arrival_ns=record.send_ns,
                scheduled_ns=None,
                first_token_ns=first,
                token_ns=list(record.token_ns),
                finish_ns=record.finish_ns,
                prompt_tokens=prompt_tokens,
                output_tokens=output_tokens,
                ok=ok,
                warmup=record.request.warmup,
            )
        )
        ttft = (first - record.send_ns) / 1e6 if first is not None else None
        e2e = (record.finish_ns - record.send_ns) / 1e6 if record.finish_ns is not None else None
        rows.append(
            {
                "request_id": index,
                "index": record.request.index,
                "priority": record.request.priority,
                "warmup": record.request.warmup,
                "ok": ok,
                "finish_reason": record.finish_reason or ("error" if not ok else None),
                "error": record.error,
                "prompt_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "arrival_ns": record.send_ns,
                "scheduled_ns": None,
                "first_token_ns": first,
                "finish_ns": record.finish_ns,
                "ttft_ms": ttft,
                "e2e_ms": e2e,
                "tpot_ms": (e2e - ttft) / (output_tokens - 1)
                if ttft is not None and e2e is not None and output_tokens > 1
                else None,
                "queue_ms": None,
                "num_preemptions": None,
                "token_ns": " ".join(str(t) for t in record.token_ns),
            }
        )
    return timings, rows


def _config(
    plan: TargetPlan, scenario: ScenarioSpec, profile: str, collectors: list[str], prompt_model: str
) -> Config:
    info = plan.server.info or {}
    return {
        "model": plan.server.model,
        "model_source": f"{plan.server.name or 'server'} at {plan.server.url}",
        "dtype": (info.get("options") or {}).get("dtype"),
        "native": info.get("native", []),
        "native_requested": [],
        "scenario": scenario.name,
        "seed": scenario.seed,
        "requests": scenario.num_requests,
        "duration_s": scenario.duration_s,
        "profile": profile,
        "collectors": collectors,
        "engine": info.get("engine", {}),
        "injections": [],
        "verify": False,
        "target": plan.server.url,
        "prompt_tokenizer": prompt_model,
    }


def _target_block(
    plan: TargetPlan,
    load: HttpLoad,
    breakdown: Breakdown | None,
    sampling: dict[str, Any] | None,
    window: RemoteWindow | None,
    window_data: dict[str, Any] | None,
    threads: dict[str, SampledThread],
    engine_thread: str,
    duration_s: float,
    processes: list[dict[str, Any]] | None,
    primary: int | None,
) -> Target:
    methods = [name for name, split in ((breakdown or {}).get("methods") or {}).items() if split]
    reason = plan.split_unavailable
    if not methods and reason is None:
        reasons = [sampling.get("reason")] if sampling and sampling.get("status") != "ok" else []
        if window is not None and window_data is None:
            reasons.append(window.error)
        reason = "; ".join(filter(None, reasons)) or "nothing measured the server's time"
    wall_s = (load.end_ns - load.start_ns) / 1e9
    lags = [
        (r.send_ns - r.scheduled_ns) / 1e6
        for r in load.records
        if not r.request.warmup and r.send_ns is not None and r.scheduled_ns is not None
    ]
    lag = latency_summary(lags)
    busy = load.client_cpu_s / wall_s if wall_s > 0 else 0.0
    bottleneck = busy >= CLIENT_BUSY_FRACTION or (lag["p99"] or 0.0) > CLIENT_LAG_MS
    http = http_outcome(load.records, dropped=load.dropped_fields)
    return {
        "url": plan.server.url,
        "ours": plan.server.ours,
        # Most requests failing is the run's first fact: the summary leads with the headline.
        "failed_share": http["failed_share"],
        "headline": http["headline"],
        "server": {
            "name": plan.server.name,
            "version": plan.server.version,
            "model": plan.server.model,
            "source": plan.server.source,
        },
        "pid": primary if primary is not None else plan.pid,
        "pid_source": plan.pid_source,
        "tree": {
            "root": plan.pid,
            "source": plan.pid_source,
            "note": plan.tree.note if plan.tree else None,
            "listeners": plan.tree.listeners if plan.tree else [],
        }
        if plan.pid is not None
        else None,
        "processes": processes,
        "split": {
            "available": bool(methods),
            "methods": methods,
            "reason": None if methods else reason,
            "engine_thread": engine_thread if methods else None,
        },
        "threads": threads,
        "gil": gil_section(window_data, threads, engine_thread),
        "client": {
            "cpu_s": load.client_cpu_s,
            "loop_cpu_s": load.loop_cpu_s,
            "wall_s": wall_s,
            "cpu_fraction_of_one_core": busy,
            "python_threads": load.threads,
            "peak_in_flight": load.peak_in_flight,
            "schedule_lag_ms": lag,
            "bottleneck": bottleneck,
            "note": (
                f"the client used {busy:.0%} of one core and sent its requests {lag['p99'] or 0:.1f} ms late at p99: "
                + ("it may have limited the load" if bottleneck else "it was not the bottleneck")
            ),
        },
        "http": {**http, "measured_s": duration_s},
    }
