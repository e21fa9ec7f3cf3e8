"""`infer-prof run`: the product's main command, a face over profiler.session with progress, summary and reports."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from profiler.cli.app import app
from profiler.cli.options import dim_printer, engine_options
from profiler.cli.progress import ctrl_c_stops, session_progress
from profiler.session.options import EngineOptions, OptionError

INTERRUPTED_EXIT_CODE = 130  # the shell's convention for SIGINT; the partial result is still written


@app.command()
@engine_options(without=("policy",))
def run(
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="A built-in scenario name (see `infer-prof scenarios list`) or a path to a TOML file.")] = "chat",
    requests: Annotated[Optional[int], typer.Option("--requests", "-r", help="Override the scenario's request count.")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="Stop submitting after this many seconds.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory (default runs/<timestamp>-<scenario>).")] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write report.html, report.pdf and trace files.")] = True,
    profile: Annotated[str, typer.Option("--profile", help="Collectors: default (cheap, always-on), deep (native stacks sampled under SCHED_FIFO + torch.profiler windows that split kernel from torch's per-op fee; slow, for short runs), off.")] = "default",
    verify: Annotated[bool, typer.Option("--verify", help="Also run with each predicted native path on and report predicted vs measured gain.")] = False,
    policy: Annotated[Optional[str], typer.Option("--policy", help="Scheduling policy: fcfs or priority (default: priority when the scenario has priority classes, else fcfs).")] = None,
    target: Annotated[Optional[str], typer.Option("--target", help="Send the scenario over HTTP to this OpenAI-compatible server (e.g. http://127.0.0.1:8000) instead of running the built-in engine; --model then only names the tokenizer prompts are sized with.")] = None,
    pid: Annotated[Optional[int], typer.Option("--pid", help="With --target: the server's process id, for py-spy to sample (automatic for a local infer-prof serve).")] = None,
    target_model: Annotated[Optional[str], typer.Option("--target-model", help="With --target: the model id to request (default: the first in /v1/models).")] = None,
    *,
    options: EngineOptions,
) -> None:
    """Run the engine under a load scenario, measure where the time goes, and write a run directory."""
    options = dataclasses.replace(options, policy=policy or "fcfs")
    if target is not None or pid is not None or target_model is not None:
        if target is None:
            raise OptionError("--pid and --target-model go with --target URL: give the server's URL too")
        if verify:
            raise OptionError("--verify switches the built-in engine's C twins on: it cannot run against --target")
        raise typer.Exit(run_target_command(options, target=target, pid=pid, target_model=target_model,
                                            scenario=scenario, requests=requests, duration=duration, out=out,
                                            report=report, profile=profile))  # fmt: skip
    code = run_command(options, scenario=scenario, requests=requests, duration=duration, out=out,
                       report=report, profile=profile, verify=verify, policy_given=policy is not None)  # fmt: skip
    raise typer.Exit(code)


def run_profiled(
    options: EngineOptions, *, scenario, loaded, out: Path, profile: str, console: Console,  # type: ignore[no-untyped-def]
    stop_event: threading.Event, native_speedups=None, label: str = "requests",  # type: ignore[no-untyped-def]
):  # type: ignore[no-untyped-def]
    """One session with a progress bar (requests done / total, output tokens/s)."""
    from profiler.session.session import run_session

    with session_progress(console, label) as hooks:
        return run_session(options, scenario, out, loaded=loaded, profile=profile, stop_event=stop_event,
                           hooks=hooks, native_speedups=native_speedups)  # fmt: skip


def run_command(
    options: EngineOptions, *, scenario: str, requests: int | None, duration: float | None, out: Path | None,
    report: bool, profile: str, verify: bool, policy_given: bool = True,
) -> int:  # fmt: skip
    from profiler.session.builder import load_for_options
    from profiler.session.session import default_run_dir
    from scenarios.spec import load_scenario

    console = Console(stderr=True)
    if requests is not None and requests < 1:
        raise OptionError(f"--requests={requests} must be at least 1")
    if duration is not None and duration <= 0:
        raise OptionError(f"--duration={duration} must be positive")
    spec = load_scenario(scenario).with_overrides(num_requests=requests, duration_s=duration, seed=None)
    if not policy_given and len({request_class.priority for request_class in spec.classes()}) > 1:
        options = dataclasses.replace(options, policy="priority")
        console.print("[dim]the scenario has priority classes: using --policy priority[/dim]")
    out_dir = out or default_run_dir(spec.name)
    if (out_dir / "result.json").exists():
        raise OptionError(f"--out {out_dir} already holds a run; choose another directory or remove it")
    loaded = load_for_options(options, progress=dim_printer(console))
    spec.validate_against_context(loaded.config.context_length)
    console.print(f"model [bold]{options.model}[/bold] ({loaded.source}); scenario [bold]{spec.name}[/bold]: {spec.description}")

    native_speedups = _native_speedups(console) if profile != "off" else None
    stop_event = threading.Event()
    with ctrl_c_stops(stop_event, console):
        outcome = run_profiled(options, scenario=spec, loaded=loaded, out=out_dir, profile=profile, console=console,
                               stop_event=stop_event, native_speedups=native_speedups)  # fmt: skip
        if verify and not outcome.interrupted and profile != "off":
            _verify(outcome, options, spec, loaded, console, stop_event, native_speedups, profile)
    _write_reports(outcome, report, console)
    return INTERRUPTED_EXIT_CODE if outcome.interrupted else 0


def run_target_command(
    options: EngineOptions, *, target: str, pid: int | None, target_model: str | None, scenario: str,
    requests: int | None, duration: float | None, out: Path | None, report: bool, profile: str,
) -> int:  # fmt: skip
    """`run --target`: probe the server and check every input before sending anything, then drive it."""
    from profiler.session.session import default_run_dir
    from profiler.session.target.probe import probe
    from profiler.session.target.session import plan_target, prompt_tokenizer, run_target_session
    from scenarios.spec import load_scenario

    console = Console(stderr=True)
    if requests is not None and requests < 1:
        raise OptionError(f"--requests={requests} must be at least 1")
    if duration is not None and duration <= 0:
        raise OptionError(f"--duration={duration} must be positive")
    spec = load_scenario(scenario).with_overrides(num_requests=requests, duration_s=duration, seed=None)
    out_dir = out or default_run_dir(spec.name)
    if (out_dir / "result.json").exists():
        raise OptionError(f"--out {out_dir} already holds a run; choose another directory or remove it")
    plan = plan_target(probe(target, target_model), pid, profile)
    server = plan.server
    console.print(f"target [bold]{server.url}[/bold]: {server.name or 'unknown server'} {server.version or ''}, "
                  f"model [bold]{server.model}[/bold]; scenario [bold]{spec.name}[/bold]: {spec.description}")  # fmt: skip
    console.print(f"[dim]server split: {'py-spy on pid ' + str(plan.pid) + ' (' + str(plan.pid_source) + ')' if plan.pid else 'no py-spy'}"
                  f"{', spans from the server' if server.ours and profile != 'off' else ''}"
                  f"{'; ' + plan.split_unavailable if plan.split_unavailable else ''}[/dim]")  # fmt: skip
    tokenizer = prompt_tokenizer(options.model)
    stop_event = threading.Event()
    with ctrl_c_stops(stop_event, console), session_progress(console) as hooks:
        outcome = run_target_session(plan, spec, out_dir, tokenizer=tokenizer, profile=profile, stop_event=stop_event,
                                     hooks=hooks, prompt_model=options.model)  # fmt: skip
    _write_reports(outcome, report, console)
    return INTERRUPTED_EXIT_CODE if outcome.interrupted else 0


def _verify(outcome, options, spec, loaded, console, stop_event, native_speedups, profile) -> None:  # type: ignore[no-untyped-def]
    from profiler.checks.verify import verify_predictions

    def run_again(native: frozenset[str], out_dir: Path, label: str):  # type: ignore[no-untyped-def]
        return run_profiled(dataclasses.replace(options, native=native), scenario=spec, loaded=loaded, out=out_dir,
                            profile=profile, console=console, stop_event=stop_event,
                            native_speedups=native_speedups, label=label)  # fmt: skip

    section = verify_predictions(outcome, options, stop_event=stop_event, native_speedups=native_speedups,
                                 run_again=run_again)  # fmt: skip
    if section is None:
        console.print("[yellow]--verify: the main run has no spans split or no tokens; nothing to compare[/yellow]")
    else:
        render_verify(section, console)


def _write_reports(outcome, report: bool, console: Console) -> None:  # type: ignore[no-untyped-def]
    from reports import generate_reports, render_summary

    render_summary(outcome.run_dir, Console())
    if report:
        with console.status("writing reports"):
            files = generate_reports(outcome.run_dir)
        console.print("reports: " + ", ".join(str(outcome.run_dir / name) for name in files.values()))
    console.print(f"run directory: [bold]{outcome.run_dir}[/bold]" + (" [yellow](partial)[/yellow]" if outcome.interrupted else ""))


def render_verify(section: dict[str, Any], console: Console) -> None:
    """The --verify table: per component its share, speedup, predicted and measured gains."""
    from rich.table import Table

    def pct(value: float | None) -> str:
        return f"{value:.1%}" if value is not None else "-"

    table = Table("component", "share", "native speedup", "predicted gain", "measured gain", "measured/predicted",
                  title="--verify: predicted vs measured end-to-end gain (busy time per token)")  # fmt: skip
    for name, entry in section["components"].items():
        speedup = f"{entry['native_speedup']:.1f}x ({entry['speedup_source']})" if entry["native_speedup"] else "-"
        agreement = f"{entry['agreement']:.2f}" if entry["agreement"] is not None else "-"
        table.add_row(name, pct(entry["share"]), speedup, pct(entry["predicted_gain"]), pct(entry["measured_gain"]), agreement)
    for name, reason in section["skipped"].items():
        table.add_row(name, "-", "-", "-", "-", f"skipped: {reason}")
    console.print(table)
    spread = section.get("python_spread")
    if spread is not None:
        console.print(f"the two Python runs differ by {spread:.1%} in busy time per token: gains below that are noise")


def _native_speedups(console: Console) -> dict[str, float] | None:
    """Measured per-step speedups of each C twin over its Python twin (a few seconds), for the predictions."""
    from profiler.session.runner import measured_native_speedups

    with console.status("measuring native speedups (microbenchmark)"):
        return measured_native_speedups()
