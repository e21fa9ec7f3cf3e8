"""`infer-prof report DIR`: the terminal summary again, and every report file regenerated from a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import app


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `infer-prof run`.")],
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Print every table of the summary, not one screen.")
    ] = False,
) -> None:
    """Regenerate report.html, report.pdf, trace.json and speedscope.json from a run directory."""
    from rich.console import Console

    from ..reports.run.generate import generate_reports
    from ..reports.run.terminal import render_summary

    render_summary(run_dir, Console(), verbose=verbose)
    files = generate_reports(run_dir)
    for name in files.values():
        typer.echo(str(Path(run_dir) / name))
