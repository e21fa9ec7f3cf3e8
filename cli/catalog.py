"""`infer-prof scenarios list|show` and `infer-prof models list`: what the tool can run, by name."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import models_app, scenarios_app


@scenarios_app.command("list")
def scenarios_list() -> None:
    """List the built-in scenarios with the situation each models."""
    from rich.console import Console
    from rich.table import Table

    from ..scenarios.spec import list_scenarios

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

    from ..scenarios.spec import load_scenario

    spec = load_scenario(name)
    table = Table("setting", "value", title=f"scenario {spec.name}: {spec.description}")
    for key, value in _describe(spec):
        table.add_row(key, value)
    Console().print(table)


def _describe(spec):
    from ..scenarios.spec import describe

    return [(str(k), str(v)) for k, v in describe(spec)]


@models_app.command("list")
def models_list() -> None:
    """List the model names --model accepts (besides a PATH.gguf)."""
    from ..engine.catalog import list_models

    for name, description in list_models():
        typer.echo(f"{name:24s} {description}")
