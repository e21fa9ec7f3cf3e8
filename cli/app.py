"""The Typer application and its command groups; each command lives in its own module of this package."""

from __future__ import annotations

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
bench_app = typer.Typer(
    help="Microbenchmarks that compare two implementations in one run.", no_args_is_help=True
)
budget_app = typer.Typer(
    help="Performance budgets for CI: check a run against a budget file.", no_args_is_help=True
)
models_app = typer.Typer(help="List the models infer-prof knows by name.", no_args_is_help=True)
app.add_typer(scenarios_app, name="scenarios")
app.add_typer(bench_app, name="bench")
app.add_typer(budget_app, name="budget")
app.add_typer(models_app, name="models")
