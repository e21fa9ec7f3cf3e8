"""`infer-prof run`: the product's main command, a face over profiler.session.session with progress, summary and reports."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from profiler.session.builder import load_for_options
from profiler.session.options import EngineOptions, OptionError
from profiler.session.session import SessionHooks, SessionOutcome, default_run_dir, run_session


@contextmanager
def ctrl_c_stops(stop_event: threading.Event, console: Console) -> Iterator[None]:
    """First Ctrl-C: stop submitting and record a partial run; a second one interrupts for real."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        if stop_event.is_set():
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        stop_event.set()
        console.print("[yellow]Ctrl-C: stopping the load; in-flight requests are aborted and a partial result is written (Ctrl-C again to quit now)[/yellow]")

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_profiled(
    options: EngineOptions, *, scenario, loaded, out: Path, profile: str, console: Console,  # type: ignore[no-untyped-def]
    stop_event: threading.Event, native_speedups=None, measured_gains=None, label: str = "requests", injections=None,  # type: ignore[no-untyped-def]
) -> SessionOutcome:
    """One session with a Rich progress bar (requests done / total, output tokens/s)."""
    import time

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console, transient=False,
    ) as progress:  # fmt: skip
        task = progress.add_task(label, total=None, rate="")
        started = [time.perf_counter()]

        def on_start(total: int) -> None:
            started[0] = time.perf_counter()
            progress.update(task, total=total)

        def on_done(requests_done: int, tokens: int) -> None:
            elapsed = max(1e-9, time.perf_counter() - started[0])
            progress.update(task, completed=requests_done, rate=f"{tokens / elapsed:6.1f} tok/s")

        hooks = SessionHooks(on_start=on_start, on_request_done=on_done)
        return run_session(options, scenario, out, loaded=loaded, profile=profile, stop_event=stop_event, hooks=hooks,
                           native_speedups=native_speedups, measured_gains=measured_gains, injections=injections)  # fmt: skip


def run_command(
    options: EngineOptions, *, scenario: str, requests: int | None, duration: float | None, out: Path | None,
    report: bool, profile: str, verify: bool, policy_given: bool = True,
) -> int:  # fmt: skip
    from scenarios.spec import load_scenario

    console = Console(stderr=True)
    if requests is not None and requests < 1:
        raise OptionError(f"--requests={requests} must be at least 1")
    if duration is not None and duration <= 0:
        raise OptionError(f"--duration={duration} must be positive")
    spec = load_scenario(scenario).with_overrides(num_requests=requests, duration_s=duration, seed=None)
    if not policy_given and len({request_class.priority for request_class in spec.classes()}) > 1:
        import dataclasses

        options = dataclasses.replace(options, policy="priority")
        console.print("[dim]the scenario has priority classes: using --policy priority[/dim]")
    out_dir = out or default_run_dir(spec.name)
    if (out_dir / "result.json").exists():
        raise OptionError(f"--out {out_dir} already holds a run; choose another directory or remove it")
    loaded = load_for_options(options, progress=lambda message: console.print(f"[dim]{message}[/dim]"))
    spec.validate_against_context(loaded.config.context_length)
    console.print(f"model [bold]{options.model}[/bold] ({loaded.source}); scenario [bold]{spec.name}[/bold]: {spec.description}")

    native_speedups = _native_speedups(console) if profile != "off" else None
    stop_event = threading.Event()
    with ctrl_c_stops(stop_event, console):
        outcome = run_profiled(options, scenario=spec, loaded=loaded, out=out_dir, profile=profile, console=console,
                               stop_event=stop_event, native_speedups=native_speedups)  # fmt: skip
        if verify and not outcome.interrupted and profile != "off":
            from profiler.checks.verify import verify_predictions

            outcome = verify_predictions(outcome, options, spec, loaded, console=console, stop_event=stop_event,
                                         native_speedups=native_speedups, run_profiled=run_profiled)  # fmt: skip

    from reports.run.terminal import render_summary

    render_summary(outcome.run_dir, Console())
    if report:
        from reports import generate_reports

        with console.status("writing reports"):
            files = generate_reports(outcome.run_dir)
        console.print("reports: " + ", ".join(str(outcome.run_dir / name) for name in files.values()))
    console.print(f"run directory: [bold]{outcome.run_dir}[/bold]" + (" [yellow](partial)[/yellow]" if outcome.interrupted else ""))
    return INTERRUPTED_EXIT_CODE if outcome.interrupted else 0


INTERRUPTED_EXIT_CODE = 130  # the shell's convention for SIGINT; the partial result is still written


def _native_speedups(console: Console) -> dict[str, float] | None:
    """Measured per-step speedups of each C twin over its Python twin (a few seconds), for the predictions."""
    from profiler.session.runner import measured_native_speedups

    with console.status("measuring native speedups (microbenchmark)"):
        return measured_native_speedups()
