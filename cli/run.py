"""`infer-prof run`: the product's main command, a face over profiler.session with progress, summary and reports."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import OptionError
from ..profiler.rundir.outdir import check_run_dir, claim_default_run_dir, claim_run_dir
from ..profiler.session.options import OPTIONS, EngineOptions
from .app import app
from .options import dim_printer, engine_options, output_path
from .progress import GracefulStop, session_progress, stop_on_signals
from .run_flags import (
    DurationFlag,
    LaunchFlag,
    LaunchTimeoutFlag,
    LedgerFlag,
    MaxTimeFlag,
    OutFlag,
    PidFlag,
    PolicyFlag,
    PortFlag,
    ProbeFlag,
    ProfileFlag,
    RayAddressFlag,
    ReplicaFlag,
    ReportFlag,
    RequestsFlag,
    ScenarioFlag,
    SwapFlag,
    TargetFlag,
    TargetModelFlag,
    UntilFlag,
    VerboseFlag,
    VerifyFlag,
    WhatIfFlag,
    WhatIfRoundsFlag,
)

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console

    from ..engine.loader import LoadedModel
    from ..profiler.analysis.engine_tables import EngineTable
    from ..profiler.checks.run_hook import RunAgain, RunHook
    from ..profiler.session.session import SessionOutcome
    from ..profiler.session.target.inject import ProbeSetup, WhatIf
    from ..profiler.session.target.ray_cluster import RayAddress
    from ..profiler.session.target.replicas import ReplicaTarget
    from ..profiler.session.target.sample_rate import SampleRate
    from ..profiler.session.target.swap import SwapPlan
    from ..profiler.session.target.target_plan import TargetPlan
    from ..scenarios.spec import ScenarioSpec

LAUNCH_TIMEOUT_S = 600.0  # vLLM's CPU build takes ~3 minutes to start on a 2-core machine
MAX_WHAT_IF_ROUNDS = 10  # each round is one more run of the scenario
INTERRUPTED_EXIT_CODE = 130  # the shell's convention for SIGINT; the partial result is still written


@app.command()
@engine_options(without=("policy",))
def run(
    scenario: ScenarioFlag = "chat",
    requests: RequestsFlag = None,
    duration: DurationFlag = None,
    out: OutFlag = None,
    report: ReportFlag = True,
    profile: ProfileFlag = "default",
    verify: VerifyFlag = False,
    ledger: LedgerFlag = None,
    what_if: WhatIfFlag = None,
    what_if_rounds: WhatIfRoundsFlag = None,
    policy: PolicyFlag = None,
    target: TargetFlag = None,
    pid: PidFlag = None,
    target_model: TargetModelFlag = None,
    verbose: VerboseFlag = False,
    launch: LaunchFlag = None,
    port: PortFlag = None,
    launch_timeout: LaunchTimeoutFlag = None,
    probe: ProbeFlag = False,
    swap: SwapFlag = None,
    ray_address: RayAddressFlag = None,
    replica: ReplicaFlag = None,
    until: UntilFlag = None,
    max_time: MaxTimeFlag = None,
    *,
    options: EngineOptions,
) -> None:
    """Run the engine under a load scenario, measure where the time goes, and write a run directory."""
    until_max_time_s = _checked_until(until, max_time, profile)
    options = dataclasses.replace(options, policy=policy or "fcfs")
    _check_launch_flags(launch, launch_timeout, probe, swap)
    _check_cluster_flags(ray_address, replica, target=target, launch=launch, port=port)
    if what_if_rounds is not None and what_if is None:
        raise OptionError(
            "--what-if-rounds sets how many runs --what-if's slowdown takes: add --what-if, or drop it"
        )
    if what_if_rounds is not None and not 1 <= what_if_rounds <= MAX_WHAT_IF_ROUNDS:
        raise OptionError(
            f"--what-if-rounds {what_if_rounds}: give 1 to {MAX_WHAT_IF_ROUNDS} runs of the slowdown (default 3)"
        )
    if any(flag is not None for flag in (target, launch, port, pid, target_model)):
        code = _run_on_server(
            options,
            target=target,
            launch=launch,
            port=port,
            pid=pid,
            target_model=target_model,
            policy_given=policy is not None,
            verify=verify,
            what_if=what_if,
            what_if_rounds=what_if_rounds,
            scenario=scenario,
            requests=requests,
            duration=duration,
            out=out,
            report=report,
            profile=profile,
            verbose=verbose,
            launch_timeout=launch_timeout,
            probe=probe,
            swap=swap,
            replicas=tuple(replica or ()),
            ray_address=ray_address,
            until_max_time_s=until_max_time_s,
        )
    else:
        code = run_command(
            options,
            scenario=scenario,
            requests=requests,
            duration=duration,
            out=output_path(out, "--out"),
            report=report,
            profile=profile,
            verify=verify,
            policy_given=policy is not None,
            verbose=verbose,
            ledger=output_path(ledger, "--ledger"),
            until_max_time_s=until_max_time_s,
            what_if=_checked_what_if(what_if, profile),
            what_if_rounds=what_if_rounds,
        )
    raise typer.Exit(code)


def _checked_until(until: str | None, max_time: float | None, profile: str) -> float | None:
    """--until resolved's seconds of load (None: one round), refused with --profile off, whose spans it reads."""
    from ..profiler.session.until import checked_until

    until_max_time_s = checked_until(until, max_time)
    if until_max_time_s is not None and profile == "off":
        raise OptionError(
            "--until resolved looks at the profile's spans after each round: drop --profile off"
        )
    return until_max_time_s


def _check_launch_flags(
    launch: str | None, launch_timeout: float | None, probe: bool, swap: str | None
) -> None:
    """The flags that go with --launch CMD, refused without it (before the prompts' tokenizer loads)."""
    if launch_timeout is not None and launch is None:
        raise OptionError("--launch-timeout goes with --launch CMD: give the server's command too")
    if launch_timeout is not None and not (launch_timeout > 0):
        raise OptionError(f"--launch-timeout={launch_timeout:g}: give a positive number of seconds")
    if probe and launch is None:
        raise OptionError("--probe goes with --launch CMD: the probe is loaded into the server as it starts")
    if swap is not None and not (launch is not None and probe):
        raise OptionError(f"--swap {swap} goes with --launch CMD --probe: the probe puts it into the server")


def _check_cluster_flags(
    ray_address: str | None,
    replica: list[str] | None,
    *,
    target: str | None,
    launch: str | None,
    port: int | None,
) -> None:
    """--ray-address and --replica read what stands behind a server: refused without one to read."""
    if ray_address is not None and target is None and launch is None and port is None:
        raise OptionError("--ray-address reads a server's Ray workers: give --target URL or --launch CMD too")
    if replica and target is None and launch is None and port is None:
        raise OptionError(
            "--replica names the servers behind a router: give the router with --target URL or --launch CMD"
        )


def _run_on_server(
    options: EngineOptions,
    *,
    target: str | None,
    launch: str | None,
    port: int | None,
    pid: int | None,
    target_model: str | None,
    policy_given: bool,
    verify: bool,
    what_if: str | None,
    what_if_rounds: int | None,
    scenario: str,
    requests: int | None,
    duration: float | None,
    out: str | None,
    report: bool,
    profile: str,
    verbose: bool,
    launch_timeout: float | None,
    probe: bool,
    swap: str | None,
    replicas: tuple[str, ...] = (),
    ray_address: str | None = None,
    until_max_time_s: float | None = None,
) -> int:
    """`run --target`, `--launch` or `--port`: the flags a server takes checked, then run_target_command."""
    if launch is not None or port is not None:
        from ..profiler.session.target.launch import target_url

        if launch is not None and pid is not None:
            raise OptionError("--launch samples the whole tree of the server it starts: drop --pid")
        target = target_url(target, port, launch)
    if target is None:
        raise OptionError("--pid and --target-model go with --target URL: give the server's URL too")
    if verify:
        raise OptionError(
            "--verify switches the built-in engine's C twins on: it cannot run against --target"
        )
    if what_if_rounds is not None:
        raise OptionError(
            "--what-if-rounds repeats the built-in engine's slowdown run; a server's slowdown runs in turns within its "
            "one run (give more --requests instead): drop --what-if-rounds"
        )
    if what_if is not None and not probe:
        raise OptionError(
            "--what-if against a server delays calls from inside it, through the probe: add --probe "
            "(with --launch CMD), or drop --what-if"
        )
    _refuse_engine_flags_with_target(options, policy_given=policy_given)
    if pid is not None and pid <= 0:
        raise OptionError(f"--pid={pid}: give the server's process id (a positive number), or leave it out")
    return run_target_command(
        options,
        target=target,
        pid=pid,
        target_model=target_model,
        scenario=scenario,
        requests=requests,
        duration=duration,
        out=output_path(out, "--out"),
        report=report,
        profile=profile,
        verbose=verbose,
        launch=launch,
        launch_timeout=LAUNCH_TIMEOUT_S if launch_timeout is None else launch_timeout,
        probe=probe,
        what_if=_names(what_if),
        swap=swap,
        replicas=replicas,
        ray_address=ray_address,
        until_max_time_s=until_max_time_s,
    )


def run_profiled(
    options: EngineOptions,
    *,
    scenario: ScenarioSpec,
    loaded: LoadedModel,
    out: Path,
    profile: str,
    console: Console,
    stop_event: threading.Event,
    label: str = "requests",
    replay: bool = True,
    switch: RunHook | None = None,
    until_max_time_s: float | None = None,
) -> SessionOutcome:
    """One session with a progress bar (requests done / total, output tokens/s); `replay`: time the C twins
    on the run's recorded work after it (the predictions' speedups; --verify's extra runs do not need it);
    `switch`: a RunHook installed for the run (--verify's twin switch, --what-if's slowdowns)."""
    from ..profiler.session.session import run_session

    with session_progress(console, label) as hooks:
        if switch is not None:
            hooks = dataclasses.replace(
                hooks, on_engine=switch.install, on_collectors=switch.start
            )  # its turns
        return run_session(
            options,
            scenario,
            out,
            loaded=loaded,
            profile=profile,
            stop_event=stop_event,
            hooks=hooks,
            replay=replay,
            until_max_time_s=until_max_time_s,
        )


def run_command(
    options: EngineOptions,
    *,
    scenario: str,
    requests: int | None,
    duration: float | None,
    out: Path | None,
    report: bool,
    profile: str,
    verify: bool,
    policy_given: bool = True,
    verbose: bool = False,
    ledger: Path | None = None,
    until_max_time_s: float | None = None,
    what_if: tuple[str, ...] = (),
    what_if_rounds: int | None = None,
) -> int:
    """Check every input, load the model, run the session (with --verify's extra runs), write the reports."""
    from rich.console import Console

    console = Console(stderr=True)
    planned, spec, options = _checked_inputs(
        options, scenario, requests, duration, out, profile, verify, policy_given, console
    )
    options = threads_for_experiments(options, verify or bool(what_if), console)
    if ledger is not None and not verify:
        raise OptionError("--ledger names where --verify's pairs go: add --verify, or drop --ledger")
    # The run directory is claimed before the model loads: a second run into it, or an unwritable default, is refused first.
    with stop_on_signals(console) as stop, _claimed_run_dir(out, spec.name) as run_dir:
        if verify:
            ledger = _checked_ledger(run_dir, ledger)
        loaded = _load(options, console)
        console.print(
            f"model [bold]{options.model}[/bold] ({loaded.source}); scenario [bold]{spec.name}[/bold]: {spec.description}"
        )
        _say_clipped_warmup(planned, spec, console)
        outcome = run_profiled(
            options,
            scenario=spec,
            loaded=loaded,
            out=run_dir,
            profile=profile,
            console=console,
            stop_event=stop.event,
            until_max_time_s=until_max_time_s,
        )
        # --what-if's and --verify's runs: the same load on the model already loaded
        run_again = _run_again(options, spec, loaded, console, stop.event, profile)
        if what_if and not outcome.interrupted:
            _what_if(outcome, options, run_again, what_if, what_if_rounds)
        if verify and not outcome.interrupted:
            _verify(outcome, options, run_again, console, stop.event, ledger)
            if what_if:
                from ..profiler.checks.what_if import pair_with_verify

                pair_with_verify(outcome, ledger)
        _write_reports(outcome, report, console, stop, verbose=verbose)
    return _exit_code(stop, outcome, console)


@contextmanager
def _claimed_run_dir(out: Path | None, scenario_name: str) -> Iterator[Path]:
    """The run directory, claimed for this run and released however it ends (kept if it holds a result)."""
    claim = claim_run_dir(out) if out is not None else claim_default_run_dir(scenario_name)
    try:
        yield claim.path
    finally:
        claim.release(keep=(claim.path / "result.json").exists())


def _say_clipped_warmup(planned: ScenarioSpec, spec: ScenarioSpec, console: Console) -> None:
    """--requests below the scenario's warm-up shrank the warm-up with it (ScenarioSpec.with_overrides): say so once
    the run starts, not among the checks, which end in one line when they refuse."""
    if spec.warmup_requests < planned.warmup_requests:
        console.print(
            f"[yellow]note: the warm-up shrinks with --requests, to {spec.warmup_requests} of the scenario's "
            f"{planned.warmup_requests} requests[/yellow]"
        )


def _exit_code(stop: GracefulStop, outcome: SessionOutcome, console: Console) -> int:
    """128 + the signal that stopped the run, 130 for a run cut short otherwise, 1 when no request completed
    (nothing was measured, whatever the files say), else 0."""
    if stop.exit_code is not None:
        return stop.exit_code
    death = (outcome.result.target or {}).get("death")
    if death:  # the server died during the load: its result is kept (marked partial), the run fails
        console.print(f"[red]infer-prof: {death.get('headline')}[/red]", soft_wrap=True)
        return 1
    if outcome.interrupted:
        return INTERRUPTED_EXIT_CODE
    if outcome.result.metrics.get("completed") == 0:
        console.print(
            f"[red]infer-prof: no request completed, so nothing was measured: {_first_failure(outcome)}[/red]",
            soft_wrap=True,
        )
        return 1
    return 0


def _first_failure(outcome: SessionOutcome) -> str:
    """Why the first measured request failed, from the run's requests table, on one line."""
    table = outcome.requests
    if "warmup" in table.columns:
        table = table[~table["warmup"].astype(bool)]
    reasons = [str(error) for error in table.get("error", []) if isinstance(error, str) and error.strip()]
    if not reasons:
        return f"{len(table)} requests, none finished (see {outcome.run_dir / 'requests.csv'})"
    return f"{len(reasons)} of {len(table)} failed, the first with: {' '.join(reasons[0].split())[:300]}"


def _checked_inputs(
    options: EngineOptions,
    scenario: str,
    requests: int | None,
    duration: float | None,
    out: Path | None,
    profile: str,
    verify: bool,
    policy_given: bool,
    console: Console,
) -> tuple[ScenarioSpec, ScenarioSpec, EngineOptions]:
    """Every flag, file and size checked before the model loads: the scenario as its file has it and with its
    overrides (parsed once), the output directory, the profile, the KV pool against memory and the requests."""
    from ..profiler.session.builder import engine_config
    from ..profiler.session.preflight import check_engine, check_engine_tables, check_scenario
    from ..scenarios.spec import load_scenario

    _check_load_flags(requests, duration, profile)
    if verify and profile == "off":
        raise OptionError("--verify compares profiled runs: drop --profile off, or drop --verify")
    if verify:
        from ..native_paths.loader import require, require_twins

        # --verify measures C twins against this run: a twin that cannot load would be a Python run called native.
        require_twins(options.native, f"--verify with --native {','.join(sorted(options.native))}")
        try:
            require()
        except OptionError as error:
            raise OptionError(f"--verify runs each C twin, and none can load: {error}") from None
    if out is not None:
        check_run_dir(out)
    planned = load_scenario(scenario)
    spec = planned.with_overrides(num_requests=requests, duration_s=duration, seed=None)
    if not policy_given and len({request_class.priority for request_class in spec.classes()}) > 1:
        options = dataclasses.replace(options, policy="priority")
        console.print("[dim]the scenario has priority classes: using --policy priority[/dim]")
    preflight = check_engine(options, engine_config(options))
    check_scenario(spec, preflight, options)
    check_engine_tables()
    for note in preflight.notes:
        console.print(f"[yellow]note: {note}[/yellow]")
    return planned, spec, options


def threads_for_experiments(options: EngineOptions, compares: bool, console: Console) -> EngineOptions:
    """--verify and --what-if compare runs (`compares`): torch's thread count fixed for all of them, unless
    the user chose the threading (--threads, an OpenMP wait policy), at the count the thread governor would take under the machine's load now (one beside a
    busy neighbour, else torch's). Left to the governor, the count moves with the load within a run, and runs
    beside a busy neighbour then differ by their time at one thread as much as by the twin or the delay
    (docs/measurements.md)."""
    from ..engine.threads import adaptive_threads

    if not compares or options.threads is not None or not adaptive_threads():
        return options  # nothing moves the count: the user chose the threading (or none is compared)
    import torch

    from ..engine.thread_governor import starting_threads

    threads = starting_threads(torch.get_num_threads())
    busy = " (other processes hold a core: the count the thread governor would take)" if threads == 1 else ""
    console.print(
        f"[dim]--verify/--what-if compare runs: torch's threads fixed at {threads}{busy} for all of them "
        "(--threads N sets another count)[/dim]"
    )
    return dataclasses.replace(options, threads=threads)


def _load(options: EngineOptions, console: Console) -> LoadedModel:
    from ..profiler.session.builder import load_for_options

    return load_for_options(options, progress=dim_printer(console), checked=True)


def _refuse_engine_flags_with_target(options: EngineOptions, *, policy_given: bool) -> None:
    """The built-in engine's sizing and twins mean nothing to a server profiled over HTTP: say so, not ignore them."""
    defaults = EngineOptions(model=options.model, seed=options.seed)
    sizing = [option for option in OPTIONS if option.name not in ("model", "seed", "policy")]
    given = [
        option.flag for option in sizing if getattr(options, option.field) != getattr(defaults, option.field)
    ]
    if policy_given:
        given.append("--policy")
    if given:
        raise OptionError(
            f"{', '.join(given)} size the built-in engine; with --target the server runs its own: "
            "set them where the server starts (e.g. `infer-prof serve`), or drop --target"
        )


def run_target_command(
    options: EngineOptions,
    *,
    target: str,
    pid: int | None,
    target_model: str | None,
    scenario: str,
    requests: int | None,
    duration: float | None,
    out: Path | None,
    report: bool,
    profile: str,
    verbose: bool = False,
    launch: str | None = None,
    launch_timeout: float = 600.0,
    probe: bool = False,
    what_if: tuple[str, ...] = (),
    swap: str | None = None,
    replicas: tuple[str, ...] = (),
    ray_address: str | None = None,
    until_max_time_s: float | None = None,
) -> int:
    """`run --target` (and `--launch`): check every input before sending anything, start the server if asked and
    wait for it, probe it, drive it (in rounds until resolved, with `until_max_time_s`), stop it; then the summary
    and reports."""
    from rich.console import Console

    console = Console(stderr=True)
    spec, tables, slowdowns, swap_plan = _checked_target_inputs(
        options, target, scenario, requests, duration, out, profile, launch, probe, what_if, swap
    )
    ray_cluster, replica_targets = _checked_cluster_and_replicas(ray_address, replicas, target)
    with stop_on_signals(console) as stop, _claimed_run_dir(out, spec.name) as run_dir:
        setup = _probe_setup(run_dir, tables, slowdowns, swap_plan) if probe else None
        outcome = _serve_and_drive(
            spec,
            run_dir,
            setup,
            stop,
            console,
            target=target,
            target_model=target_model,
            pid=pid,
            launch=launch,
            launch_timeout=launch_timeout,
            profile=profile,
            prompt_model=options.model,
            ray_cluster=ray_cluster,
            replicas=replica_targets,
            until_max_time_s=until_max_time_s,
        )
        _say_after_target(outcome, run_dir, setup if swap_plan is not None else None, console)
        _write_reports(outcome, report, console, stop, verbose=verbose)
    return _exit_code(stop, outcome, console)


def _checked_cluster_and_replicas(
    ray_address: str | None, replicas: tuple[str, ...], target: str
) -> tuple[RayAddress | None, list[ReplicaTarget]]:
    """The Ray cluster (--ray-address, else RAY_ADDRESS; None: off) and the --replica servers, each checked to
    answer before a server starts: a wrong or unreachable one is one line."""
    from ..profiler.session.target.ray_cluster import check_address, chosen_address

    ray_cluster = chosen_address(ray_address)
    if ray_cluster is not None:
        check_address(ray_cluster)
    from ..profiler.session.target.replicas import check_replicas

    # Each --replica answers, here, before the load.
    return ray_cluster, check_replicas(list(replicas), target)


def _probe_setup(
    run_dir: Path, tables: tuple[EngineTable, ...], slowdowns: WhatIf | None, swap_plan: SwapPlan | None
) -> ProbeSetup:
    """The in-process probe's files for the server to load (profiler.session.target.inject), with the swap's."""
    from ..profiler.session.target.inject import prepare_probe

    setup = prepare_probe(run_dir, tables, slowdowns)
    if swap_plan is not None:
        from ..profiler.session.target.swap import add_swap

        add_swap(setup, swap_plan)
    return setup


def _serve_and_drive(
    spec: ScenarioSpec,
    run_dir: Path,
    setup: ProbeSetup | None,
    stop: GracefulStop,
    console: Console,
    *,
    target: str,
    target_model: str | None,
    pid: int | None,
    launch: str | None,
    launch_timeout: float,
    profile: str,
    prompt_model: str,
    ray_cluster: RayAddress | None,
    replicas: list[ReplicaTarget],
    until_max_time_s: float | None,
) -> SessionOutcome:
    """Start the server if asked (`launch`) and wait for it, probe it, and drive it with the scenario; the
    launched server is stopped on the way out."""
    from ..profiler.session.target.launch import launched_server
    from ..profiler.session.target.probe import probe as probe_server
    from ..profiler.session.target.target_plan import plan_target, prompt_tokenizer
    from ..profiler.session.target.target_session import run_target_session

    with launched_server(
        launch,
        target,
        run_dir / "server.log",
        timeout_s=launch_timeout,
        stop_event=stop.event,
        say=lambda text: console.print(f"[dim]{text}[/dim]"),
        env=setup.env() if setup else None,
    ) as launched:
        plan = plan_target(
            probe_server(target, target_model), pid, profile, launched=launched.root if launched else None
        )
        _say_target(plan, spec, profile, probed=setup is not None, console=console)
        rate = _sampling_rate(plan, profile, console)
        tokenizer = prompt_tokenizer(prompt_model)
        with session_progress(console) as hooks:
            outcome = run_target_session(
                plan,
                spec,
                run_dir,
                tokenizer=tokenizer,
                profile=profile,
                stop_event=stop.event,
                hooks=hooks,
                prompt_model=prompt_model,
                probe=setup,
                launched=launched,
                ray_address=ray_cluster,
                replicas=replicas,
                sample_rate=rate,
                until_max_time_s=until_max_time_s,
            )
    return outcome


def _sampling_rate(plan: TargetPlan, profile: str, console: Console) -> SampleRate:
    """py-spy's rate for the tree, from a second's calibration on the quiet server (another engine's only), said
    when the tree is sampled."""
    from ..profiler.session.target.sample_rate import decide_rate

    rate = decide_rate(plan.pid, foreign=not plan.server.ours, profile=profile)
    if plan.pid is not None and profile != "off":
        console.print(f"sampling: {rate.words()}", style="dim", soft_wrap=True, markup=False)
    return rate


def _say_after_target(
    outcome: SessionOutcome, run_dir: Path, swapped: ProbeSetup | None, console: Console
) -> None:
    """Once the server is gone: what py-spy cost over the load, the swap's calls (`swapped`: the probe that
    swapped, None without a swap), and the Ray notes."""
    from ..profiler.session.target.sample_rate import cost_line

    target_section = outcome.result.target or {}
    spent = cost_line(
        target_section.get("sampling_rate"), (target_section.get("client") or {}).get("wall_s") or 0.0
    )
    if spent:  # what py-spy cost over the load, against its budget and the calibration
        console.print(spent, style="dim", soft_wrap=True, markup=False)
    if swapped is not None:  # read once the server is gone: its last calls are in
        from ..profiler.session.target.swap import report_swap

        for line in report_swap(run_dir, swapped):
            console.print(line, soft_wrap=True, markup=False)
    for line in (target_section.get("ray") or {}).get("lines") or []:
        console.print(line, style="yellow", soft_wrap=True, markup=False)


def _checked_target_inputs(
    options: EngineOptions,
    target: str,
    scenario: str,
    requests: int | None,
    duration: float | None,
    out: Path | None,
    profile: str,
    launch: str | None,
    probe: bool,
    what_if: tuple[str, ...],
    swap: str | None,
) -> tuple[ScenarioSpec, tuple[EngineTable, ...], WhatIf | None, SwapPlan | None]:
    """Every input of `run --target` checked before a server starts or a request is sent: the URL's form, the
    output directory, the scenario (parsed once), the engine tables, --what-if's components, --swap, --model."""
    from ..profiler.analysis.engine_tables import all_tables
    from ..profiler.inputs.addresses import parse_http_url
    from ..profiler.session.target.inject import WhatIf, check_what_if, probe_rows
    from ..profiler.session.target.target_plan import check_prompt_model
    from ..scenarios.spec import load_scenario

    _check_load_flags(requests, duration, profile)
    parse_http_url(target)  # the URL's form, before a server starts or a directory is made
    if out is not None:
        check_run_dir(out)
    spec = load_scenario(scenario).with_overrides(num_requests=requests, duration_s=duration, seed=None)
    tables = (
        all_tables()
    )  # a user table's mistake is refused before anything starts (the verdict reads them too)
    slowdowns = WhatIf(what_if) if what_if else None
    if slowdowns is not None:
        check_what_if(slowdowns, probe_rows(tables))  # a component no table times, before anything starts
    swap_plan = None
    if swap is not None:  # an engine the swap does not know is refused before the server starts
        from ..profiler.session.target.swap import check_swap

        swap_plan = check_swap(swap, launch, probe)
    check_prompt_model(options.model)  # a bad --model is refused before the server starts
    return spec, tables, slowdowns, swap_plan


def _say_target(
    plan: TargetPlan, spec: ScenarioSpec, profile: str, *, probed: bool, console: Console
) -> None:
    """The server that answered, the scenario, and what will split the server's time."""
    server = plan.server
    console.print(
        f"target [bold]{server.url}[/bold]: {server.name or 'unknown server'}{' ' + server.version if server.version else ''}, "
        f"model [bold]{server.model}[/bold]; scenario [bold]{spec.name}[/bold]: {spec.description}"
    )
    console.print(
        f"[dim]server split: {'py-spy on every Python process in the tree of pid ' + str(plan.pid) + ' (' + str(plan.pid_source) + ')' if plan.pid else 'no py-spy'}"
        f"{', spans from the server' if server.ours and profile != 'off' else ''}"
        f"{', the in-process probe in every process (switched on and off by turns)' if probed else ''}"
        f"{'; ' + plan.split_unavailable if plan.split_unavailable else ''}[/dim]"
    )


def _check_load_flags(requests: int | None, duration: float | None, profile: str) -> None:
    """The flags that size and profile a load, whatever it is sent to."""
    from ..profiler.collectors.registry import PROFILES
    from ..scenarios.spec import MAX_REQUESTS

    if requests is not None and not 1 <= requests <= MAX_REQUESTS:
        raise OptionError(
            f"--requests={requests} is impossible: use 1 to {MAX_REQUESTS:,} (split a longer load into runs)"
        )
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise OptionError(f"--duration={duration} is impossible: give a positive number of seconds")
    if profile not in PROFILES:
        raise OptionError(f"--profile={profile!r}: use one of {', '.join(PROFILES)}")


def _checked_ledger(run_dir: Path, given: Path | None) -> Path:
    """The ledger --verify will append to, checked before the model loads (profiler.ledger.store)."""
    from ..profiler.ledger.store import check_appendable, chosen_ledger

    path, source = chosen_ledger(run_dir, given)
    check_appendable(path, source=source)
    return path


def _names(listed: str | None) -> tuple[str, ...]:
    """A comma-separated option's names, blanks dropped."""
    return tuple(name.strip() for name in (listed or "").split(",") if name.strip())


def _checked_what_if(what_if: str | None, profile: str) -> tuple[str, ...]:
    """--what-if's components on the built-in engine, checked before work starts."""
    if what_if is None:
        return ()
    from ..profiler.checks.slowdown import check_components

    if profile == "off":
        raise OptionError(
            "--what-if delays calls through the profiler's tracer: drop --profile off, or drop --what-if"
        )
    return check_components(what_if.split(","))


def _run_again(
    options: EngineOptions,
    spec: ScenarioSpec,
    loaded: LoadedModel,
    console: Console,
    stop_event: threading.Event,
    profile: str,
) -> RunAgain:
    """Another profiled run of the same load with the model already loaded: --verify's and --what-if's runs."""

    def run_again(
        native: frozenset[str], out_dir: Path, label: str, switch: RunHook | None = None
    ) -> SessionOutcome:
        return run_profiled(
            dataclasses.replace(options, native=native),
            scenario=spec,
            loaded=loaded,
            out=out_dir,
            profile=profile,
            console=console,
            stop_event=stop_event,
            label=label,
            replay=False,
            switch=switch,
        )

    return run_again


def _what_if(
    outcome: SessionOutcome,
    options: EngineOptions,
    run_again: RunAgain,
    components: tuple[str, ...],
    rounds: int | None = None,
) -> None:
    """The slowdown runs in what-if/ (and what-if-N/) under the main run; their section goes into its result.json."""
    from ..profiler.checks.what_if import DEFAULT_ROUNDS, run_what_if

    run_what_if(outcome, options, components, run_again, rounds=DEFAULT_ROUNDS if rounds is None else rounds)


def _verify(
    outcome: SessionOutcome,
    options: EngineOptions,
    run_again: RunAgain,
    console: Console,
    stop_event: threading.Event,
    ledger: Path | None = None,
) -> None:
    """--verify's runs with each C twin on, the gains beside the predictions, and their table on the terminal."""
    from ..profiler.checks.verify import verify_predictions
    from ..reports.run.verify_table import render_verify

    section = verify_predictions(
        outcome, options, stop_event=stop_event, native_speedups=None, run_again=run_again, ledger=ledger
    )
    if section is None:
        console.print(
            "[yellow]--verify: the main run has no spans split or no tokens; nothing to compare[/yellow]"
        )
    else:
        render_verify(section, console)


def _write_reports(
    outcome: SessionOutcome, report: bool, console: Console, stop: GracefulStop, verbose: bool = False
) -> None:
    """The summary, then the report files one kind at a time; a stop signal between them ends the writing
    and marks the result partial (the measured run is whole; `infer-prof report DIR` writes what is missing)."""
    from rich.console import Console

    from ..profiler.rundir.results import mark_partial
    from ..reports.run.generate import generate_reports
    from ..reports.run.terminal import render_summary

    render_summary(outcome.run_dir, Console(), verbose=verbose, report=report)
    if report and not stop.event.is_set():
        files: dict[str, Path] = {}
        console.print("[dim]writing reports[/dim]")
        with console.status("writing reports"):
            for kind in REPORT_KINDS:
                if stop.event.is_set():
                    mark_partial(
                        outcome.run_dir,
                        f"stopped while writing reports; `infer-prof report {outcome.run_dir}` writes them",
                    )
                    break
                files.update(
                    generate_reports(outcome.run_dir, **{other: other == kind for other in REPORT_KINDS})
                )
        console.print("reports: " + ", ".join(str(outcome.run_dir / name) for name in files.values()))
    partial = outcome.interrupted or stop.event.is_set()
    console.print(
        f"run directory: [bold]{outcome.run_dir}[/bold]" + (" [yellow](partial)[/yellow]" if partial else "")
    )


# The kinds generate_reports writes, in its order: traces first, so that the HTML can link to them.
REPORT_KINDS = ("traces", "html", "pdf")
