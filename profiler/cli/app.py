"""The `infer-prof` command line: a thin Typer face over the library, with exit codes that mean something.

Exit codes: 0 success; 1 the command's check failed (golden found a logic error, a budget's error
assertion failed, selftest named a case wrongly); 2 bad input (file, flag, scenario, model), printed
as one line on stderr, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="infer-prof",
    help=(
        "Is your inference engine slow because of Python, and would rewriting parts of it in C pay off?\n\n"
        "infer-prof runs a built-in engine on a real model under load, splits wall time into interpreter, "
        "lock, allocation and kernel time per component, names the bottleneck and measures native rewrites.\n\n"
        "Start with:  infer-prof run            (default model smollm2-135m, scenario chat, about a minute)"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
scenarios_app = typer.Typer(help="List and show the built-in load scenarios.", no_args_is_help=True)
bench_app = typer.Typer(help="Microbenchmarks that compare two implementations in one run.", no_args_is_help=True)
budget_app = typer.Typer(help="Performance budgets for CI: check a run against a budget file.", no_args_is_help=True)
models_app = typer.Typer(help="List the models infer-prof knows by name.", no_args_is_help=True)
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(bench_app, name="bench")
app.add_typer(budget_app, name="budget")
app.add_typer(models_app, name="models")

# ---- shared engine options (every command that builds an engine takes these) ----------------------
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="smollm2-135m (default, real weights), a PATH.gguf, or synthetic:<tiny|small|base|large>.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weights and activations: float32 or bfloat16.")]
NativeOpt = Annotated[str, typer.Option("--native", help="C twins to switch on: none, all, or a comma list of sampler,kv,scheduler.")]
KvBlocksOpt = Annotated[Optional[int], typer.Option("--kv-blocks", help="KV pool size in blocks (or use --kv-memory).")]
KvMemoryOpt = Annotated[Optional[str], typer.Option("--kv-memory", help="KV pool size as memory, e.g. 256MiB (default: sized for --max-batch full contexts, at most 256MiB).")]
BlockSizeOpt = Annotated[int, typer.Option("--block-size", help="Token slots per KV block.")]
MaxBatchOpt = Annotated[int, typer.Option("--max-batch", help="Most sequences running at once.")]
MaxTokensBudgetOpt = Annotated[int, typer.Option("--max-batched-tokens", help="Token budget per engine step (prefill chunks + decodes).")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="Scheduling policy: fcfs or priority.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for weights of synthetic models, sampling and load.")]
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="torch intra-op threads (default: torch's choice).")]


def _engine_options(model, dtype, native, kv_blocks, kv_memory, block_size, max_batch, max_batched_tokens, policy, seed, threads):  # type: ignore[no-untyped-def]
    from native_paths.toggles import parse_native
    from profiler.session.options import EngineOptions, parse_size

    return EngineOptions(
        model=model, dtype=dtype, native=parse_native(native), kv_blocks=kv_blocks,
        kv_memory_bytes=parse_size(kv_memory) if kv_memory else None, block_size=block_size,
        max_batch=max_batch, max_batched_tokens=max_batched_tokens, policy=policy, seed=seed, threads=threads,
    )  # fmt: skip


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Every exception a user can cause, from every package (each keeps its own small hierarchy)."""
    from errors import InferProfError
    from profiler.rundir.results import ResultError
    from scenarios.spec import ScenarioError

    types: list[type[BaseException]] = [InferProfError, ResultError, ScenarioError]
    try:
        from profiler.budget.spec import BudgetError

        types.append(BudgetError)
    except ImportError:
        pass
    return tuple(types)


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"infer-prof: error: {message}", err=True)
    return typer.Exit(code)


# ---- commands ----------------------------------------------------------------------------------------


@app.command()
def generate(
    prompts: Annotated[list[str], typer.Argument(help="One or more prompts; all are served together (continuous batching).")],
    max_tokens: Annotated[int, typer.Option("--max-tokens", "-n", help="Most tokens to generate per prompt.")] = 64,
    temperature: Annotated[float, typer.Option("--temperature", "-t", help="0 = greedy.")] = 0.0,
    top_k: Annotated[int, typer.Option("--top-k", help="0 = off.")] = 0,
    top_p: Annotated[float, typer.Option("--top-p", help="1 = off.")] = 1.0,
    min_p: Annotated[float, typer.Option("--min-p", help="0 = off.")] = 0.0,
    repetition_penalty: Annotated[float, typer.Option("--repetition-penalty", help="1 = off.")] = 1.0,
    chat: Annotated[bool, typer.Option("--chat/--no-chat", help="Apply the model's chat template (default on).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per prompt, then one {\"engine\": ...} line.")] = False,
    model: ModelOpt = "smollm2-135m", dtype: DtypeOpt = "float32", native: NativeOpt = "none",
    kv_blocks: KvBlocksOpt = None, kv_memory: KvMemoryOpt = None, block_size: BlockSizeOpt = 16,
    max_batch: MaxBatchOpt = 32, max_batched_tokens: MaxTokensBudgetOpt = 512, policy: PolicyOpt = "fcfs",
    seed: SeedOpt = 0, threads: ThreadsOpt = None,
) -> None:
    """Generate text for PROMPTS (streams a single prompt to the terminal; --json for token ids and timings)."""
    from engine.types import SamplingParams
    from profiler.cli.generate import run_generate

    options = _engine_options(model, dtype, native, kv_blocks, kv_memory, block_size, max_batch, max_batched_tokens, policy, seed, threads)
    params = SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                            repetition_penalty=repetition_penalty, max_tokens=max_tokens, seed=seed)  # fmt: skip
    run_generate(options, prompts, params, chat=chat, as_json=as_json)


@app.command()
def run(
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="A built-in scenario name (see `infer-prof scenarios list`) or a path to a TOML file.")] = "chat",
    requests: Annotated[Optional[int], typer.Option("--requests", "-r", help="Override the scenario's request count.")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="Stop submitting after this many seconds.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory (default runs/<timestamp>-<scenario>).")] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write report.html, report.pdf and trace files.")] = True,
    profile: Annotated[str, typer.Option("--profile", help="Collectors: default (cheap, always-on), deep (native stacks sampled under SCHED_FIFO + torch.profiler windows that split kernel from torch's per-op fee; slow, for short runs), off.")] = "default",
    verify: Annotated[bool, typer.Option("--verify", help="Also run with each predicted native path on and report predicted vs measured gain.")] = False,
    model: ModelOpt = "smollm2-135m", dtype: DtypeOpt = "float32", native: NativeOpt = "none",
    kv_blocks: KvBlocksOpt = None, kv_memory: KvMemoryOpt = None, block_size: BlockSizeOpt = 16,
    max_batch: MaxBatchOpt = 32, max_batched_tokens: MaxTokensBudgetOpt = 512,
    policy: Annotated[Optional[str], typer.Option("--policy", help="Scheduling policy: fcfs or priority (default: priority when the scenario has priority classes, else fcfs).")] = None,
    seed: SeedOpt = 0, threads: ThreadsOpt = None,
) -> None:
    """Run the engine under a load scenario, measure where the time goes, and write a run directory."""
    from profiler.cli.run import run_command

    options = _engine_options(model, dtype, native, kv_blocks, kv_memory, block_size, max_batch, max_batched_tokens, policy or "fcfs", seed, threads)
    code = run_command(options, scenario=scenario, requests=requests, duration=duration, out=out,
                       report=report, profile=profile, verify=verify, policy_given=policy is not None)  # fmt: skip
    raise typer.Exit(code)


@app.command()
def golden(
    requests: Annotated[int, typer.Option("--requests", "-r", help="Requests in the seeded workload.")] = 200,
    max_tokens: Annotated[int, typer.Option("--max-tokens", "-n", help="Tokens generated per request.")] = 64,
    kv_blocks: Annotated[Optional[int], typer.Option("--kv-blocks", help="KV pool (default: a third of what the batch needs, so preemption happens).")] = None,
    max_batch: MaxBatchOpt = 32,
    model: ModelOpt = "smollm2-135m", dtype: DtypeOpt = "float32", seed: SeedOpt = 0, threads: ThreadsOpt = None,
) -> None:
    """Run one seeded workload with the Python twins and the C twins and compare token by token (exit 1 on a logic error)."""
    from rich.console import Console

    from profiler.checks.golden import render_golden, run_golden
    from profiler.session.options import OptionError

    if requests < 1 or max_tokens < 1:
        raise OptionError("--requests and --max-tokens must be at least 1")
    options = _engine_options(model, dtype, "none", None, None, 16, max_batch, 512, "fcfs", seed, threads)
    err = Console(stderr=True)
    from profiler.session.builder import load_for_options

    loaded = load_for_options(options, progress=lambda message: err.print(f"[dim]{message}[/dim]"))
    report = run_golden(loaded, requests=requests, seed=seed, max_tokens=max_tokens, max_batch=max_batch,
                        kv_blocks=kv_blocks, progress=lambda message: err.print(f"[dim]{message}[/dim]"))  # fmt: skip
    render_golden(report, Console())
    raise typer.Exit(report.exit_code)


@bench_app.command("native")
def bench_native(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of rows instead of a table.")] = False,
    repeats: Annotated[int, typer.Option("--repeats", help="Interleaved repeats per row (medians are reported).")] = 5,
) -> None:
    """Per-step time of each Python/C twin pair at batch 1, 32 and 256 (vocab 49,152), with the speedup."""
    from profiler.cli.bench import bench_native_command

    raise typer.Exit(bench_native_command(as_json=as_json, repeats=repeats))


@app.command()
def doctor() -> None:
    """Print what this installation can do: native paths built, py-spy, GPU, default model."""
    from profiler.cli.doctor import run_doctor

    raise typer.Exit(run_doctor())


@scenarios_app.command("list")
def scenarios_list() -> None:
    """List the built-in scenarios with the situation each models."""
    from rich.console import Console
    from rich.table import Table

    from scenarios.spec import list_scenarios

    table = Table("name", "load", "requests", "description")
    for spec in list_scenarios():
        rows = dict(_describe(spec))
        table.add_row(spec.name, rows.get("load", ""), rows.get("requests", ""), spec.description)
    Console().print(table)


@scenarios_app.command("show")
def scenarios_show(name: Annotated[str, typer.Argument(help="Built-in name or TOML path.")]) -> None:
    """Show every setting of one scenario."""
    from rich.console import Console
    from rich.table import Table

    from scenarios.spec import load_scenario

    spec = load_scenario(name)
    table = Table("setting", "value", title=f"scenario {spec.name}: {spec.description}")
    for key, value in _describe(spec):
        table.add_row(key, value)
    Console().print(table)


def _describe(spec):  # type: ignore[no-untyped-def]
    from scenarios.spec import describe

    return [(str(k), str(v)) for k, v in describe(spec)]


@models_app.command("list")
def models_list() -> None:
    """List the model names --model accepts (besides a PATH.gguf)."""
    from engine.models import list_models

    for name, description in list_models():
        typer.echo(f"{name:24s} {description}")


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="A run directory written by `infer-prof run`.")]) -> None:
    """Regenerate report.html, report.pdf, trace.json and speedscope.json from a run directory."""
    from rich.console import Console

    from reports import generate_reports
    from reports.run.terminal import render_summary

    render_summary(run_dir, Console())
    files = generate_reports(run_dir)
    for name in files.values():
        typer.echo(str(Path(run_dir) / name))


@app.command()
def compare(
    before: Annotated[Optional[list[Path]], typer.Argument(help="BEFORE and AFTER run directories (omit with --repeat).", show_default=False)] = None,
    repeat: Annotated[Optional[int], typer.Option("--repeat", help="Run both configurations N times each, interleaved (A B B A ...), instead of reading run directories.")] = None,
    before_native: Annotated[str, typer.Option("--before-native", help="With --repeat: the BEFORE configuration's --native.")] = "none",
    after_native: Annotated[str, typer.Option("--after-native", help="With --repeat: the AFTER configuration's --native.")] = "all",
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="With --repeat: the scenario both configurations run.")] = "chat",
    requests: Annotated[Optional[int], typer.Option("--requests", "-r", help="With --repeat: override the scenario's request count.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Where compare.html, compare.pdf and compare.json go.")] = None,
    model: ModelOpt = "smollm2-135m", dtype: DtypeOpt = "float32",
    kv_blocks: KvBlocksOpt = None, kv_memory: KvMemoryOpt = None, block_size: BlockSizeOpt = 16,
    max_batch: MaxBatchOpt = 32, max_batched_tokens: MaxTokensBudgetOpt = 512, policy: PolicyOpt = "fcfs",
    seed: SeedOpt = 0, threads: ThreadsOpt = None,
) -> None:
    """Before/after comparison: per metric the ratio, its confidence interval and a verdict."""
    from profiler.cli.compare import compare_command

    options = _engine_options(model, dtype, "none", kv_blocks, kv_memory, block_size, max_batch, max_batched_tokens, policy, seed, threads)
    raise typer.Exit(compare_command(before or [], repeat=repeat, options=options, before_native=before_native,
                                     after_native=after_native, scenario=scenario, requests=requests, out=out))  # fmt: skip


@budget_app.command("check")
def budget_check(
    budget_file: Annotated[Path, typer.Argument(help="A budget TOML file (see docs/budgets.md).")],
    run: Annotated[Optional[list[Path]], typer.Option("--run", help="Check these run directories instead of running the budget's scenario.")] = None,
    baseline: Annotated[Optional[list[Path]], typer.Option("--baseline", help="Baseline run directories (or a folder of them) for ratio assertions.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write a JUnit XML file for CI dashboards.")] = None,
    bmf: Annotated[Optional[Path], typer.Option("--bmf", help="Also write Bencher Metric Format JSON.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where runs made by this check go.")] = Path("runs/budget"),
) -> None:
    """Check runs against a budget: exit 0 pass (warnings allowed), 1 an error assertion failed, 2 bad input."""
    from profiler.cli.budget import budget_check_command

    raise typer.Exit(budget_check_command(budget_file, runs=run or [], baselines=baseline or [], junit=junit, bmf=bmf, out=out))


@budget_app.command("baseline")
def budget_baseline(
    budget_file: Annotated[Path, typer.Argument(help="The budget TOML whose scenario (and [baseline] settings) to record.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the baseline runs (pass it to `budget check --baseline`).")] = Path("runs/baseline"),
) -> None:
    """Record baseline runs for later `budget check --baseline DIR`."""
    from profiler.cli.budget import budget_baseline_command

    raise typer.Exit(budget_baseline_command(budget_file, out=out))


@app.command()
def selftest(
    quick: Annotated[bool, typer.Option("--quick/--full", help="Short versions of each planted case (the test suite uses --quick).")] = False,
    only: Annotated[Optional[str], typer.Option("--only", help="Comma list of case names to run.")] = None,
) -> None:
    """Run planted bottlenecks whose answer is known by construction; exit 1 if any verdict is wrong."""
    from profiler.checks.selftest import run_selftest

    raise typer.Exit(run_selftest(quick=quick, only=only))


def main() -> None:
    """Console-script entry: run the app, turning user errors into one line and exit code 2."""
    try:
        errors = _user_error_types()
    except Exception:  # a broken install should still show its real error below
        errors = ()
    try:
        # Without standalone mode click returns a command's typer.Exit code instead of exiting: pass it on.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except errors as exc:  # type: ignore[misc]
        typer.echo(f"infer-prof: error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("infer-prof: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            typer.echo("infer-prof: aborted", err=True)
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
