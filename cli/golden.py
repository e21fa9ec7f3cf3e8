"""`infer-prof golden`: one seeded workload through the Python and the C twins, compared token by token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import OptionError
from .app import app
from .options import dim_printer, engine_options

if TYPE_CHECKING:  # the CLI's help and usage errors load none of these (tests/cli/test_imports.py)
    from rich.console import Console

    from ..profiler.checks.golden import Divergence, GoldenReport
    from ..profiler.session.options import EngineOptions
    from .progress import ProgressTask


@app.command()
@engine_options(without=("native", "kv_blocks", "kv_memory", "block_size", "max_batched_tokens", "policy"))
def golden(
    requests: Annotated[int, typer.Option("--requests", "-r", help="Requests in the seeded workload.")] = 200,
    max_tokens: Annotated[int, typer.Option("--max-tokens", "-n", help="Tokens generated per request.")] = 64,
    kv_blocks: Annotated[
        Optional[int],
        typer.Option(
            "--kv-blocks", help="KV pool (default: a third of what the batch needs, so preemption happens)."
        ),
    ] = None,
    combination: Annotated[
        Optional[list[str]],
        typer.Option(
            "--combination",
            help="A --native selection to run end to end (repeatable; default: all, and core,sampler).",
        ),
    ] = None,
    every_combination: Annotated[
        bool,
        typer.Option(
            "--every-combination",
            help="Run every native selection end to end: each subset of the four twins, core, core,sampler.",
        ),
    ] = False,
    *,
    options: EngineOptions,
) -> None:
    """Run one seeded workload with the Python twins and the C twins and compare token by token (exit 1 on a logic error)."""
    from rich.console import Console

    from ..profiler.checks.golden import run_golden
    from ..profiler.session.builder import load_for_options
    from .generate import check_fits_context

    _check_sizes(requests, max_tokens, kv_blocks)
    check_fits_context(max_tokens, options)
    combinations = _combinations(combination, every_combination)
    err = Console(stderr=True)
    loaded = load_for_options(options, progress=dim_printer(err))
    err.print(
        f"[dim]golden: {requests} requests x {max_tokens} tokens, run {1 + len(combinations)} times "
        f"(shadow, then end to end with --native {'; '.join(combinations)})[/dim]"
    )
    with golden_progress(err) as counts:
        report = run_golden(
            loaded,
            requests=requests,
            seed=options.seed,
            max_tokens=max_tokens,
            max_batch=options.max_batch,
            kv_blocks=kv_blocks,
            combinations=combinations,
            counts=counts,
        )
    render_golden(report, Console())
    raise typer.Exit(report.exit_code)


def _check_sizes(requests: int, max_tokens: int, kv_blocks: int | None) -> None:
    from ..profiler.session.options import MAX_KV_BLOCKS

    for option, value, most in (
        ("--requests", requests, 100_000),
        ("--max-tokens", max_tokens, 65_536),
        ("--kv-blocks", kv_blocks, MAX_KV_BLOCKS),
    ):
        if value is not None and not 1 <= value <= most:
            raise OptionError(f"{option}={value} is impossible: use 1 to {most:,}")


def _combinations(combination: list[str] | None, every_combination: bool) -> list[str]:
    """The native selections to run end to end, each checked before anything runs."""
    from ..native_paths.toggles import every_combination as all_selections
    from ..native_paths.toggles import parse_native
    from ..profiler.checks.golden import DEFAULT_COMBINATIONS

    if every_combination and combination:
        raise OptionError("--every-combination already runs every selection: drop --combination")
    if every_combination:
        return [",".join(sorted(selection)) for selection in all_selections()]
    combinations = list(combination or DEFAULT_COMBINATIONS)
    for selection in combinations:
        if not parse_native(selection):  # raises InvalidNativeSelection for a bad one
            raise OptionError(f"--combination {selection!r} switches no C twin on: name at least one")
    return combinations


@contextmanager
def golden_progress(console: Console) -> Iterator[Callable[[str, int, int], None]]:
    """One bar (or its plain lines) per run of the workload: requests finished / total, rate, ETA; fed by
    run_golden's counts."""
    from .progress import Reporter

    with Reporter(console) as reporter:
        tasks: dict[str, ProgressTask] = {}

        def counts(phase: str, finished: int, total: int) -> None:
            if phase not in tasks:
                for earlier in tasks.values():
                    earlier.finish()
                tasks[phase] = reporter.task(phase, total=total)
            tasks[phase].update(finished, total)

        yield counts
        for task in tasks.values():
            task.finish()


def render_golden(report: GoldenReport, console) -> None:
    verdict = "[green]PASS[/green]" if report.exit_code == 0 else "[red]FAIL[/red]"
    console.print(
        f"{verdict}: {report.requests} requests, {report.tokens} tokens, {report.steps} steps, "
        f"{report.preemptions} preemptions; {len(report.logic_errors)} logic error(s), "
        f"{len(report.near_ties)} near-tie(s); end to end {len(report.end_to_end_mismatches)} request(s) differ "
        f"({len(report.unexplained_end_to_end)} unexplained)"
    )
    for selection, unexplained in report.combinations.items():
        state = (
            "[green]same tokens[/green]"
            if not unexplained
            else f"[red]{len(unexplained)} request(s) differ unexplained[/red]"
        )
        console.print(f"  --native {selection}: {state}")
    if report.preemptions == 0:
        console.print("[yellow]note: no preemption happened; lower --kv-blocks to exercise it[/yellow]")
    for divergence in report.divergences[:1] + report.logic_errors[:3]:
        _render_divergence(divergence, console)
    if report.unexplained_end_to_end:
        console.print(
            f"requests that differ end to end with no near-tie to explain them: {report.unexplained_end_to_end[:10]}"
        )


def _render_divergence(d: Divergence, console) -> None:
    if d.component != "sampler" or d.explanation is None:
        console.print(
            f"first {d.component} difference at step {d.step}: python {d.python!r} vs native {d.native!r}"
        )
        return
    e = d.explanation
    console.print(
        f"first divergence: step {d.step}, request {d.request}, output position {d.position}: "
        f"python picked {d.python}, native picked {d.native} -> [bold]{e.kind}[/bold] at {e.stage}"
    )
    for token, info in e.candidates.items():
        p = "-" if info["p"] is None else f"{info['p']:.6g}"
        console.print(f"  token {token}: logit {info['logit']:.9g}, p {p}, kept {info['kept']}")
    draw = "-" if e.draw is None else f"{e.draw:.17g}"
    console.print(f"  random draw u = {draw}; margin {e.margin:.3g}; {e.detail}")
