"""The Typer faces of infer-prof: one module per command; the only code that imports typer, Rich progress or reports."""

from profiler.cli.main import main

__all__ = ["main"]
