"""`--help` that never cuts its own words: a word wider than typer's help column is folded onto the next line, not ended in "…"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def install() -> None:
    """Make typer's Rich help fold long words (a default such as `runs/<timestamp>-<scenario>`, a metavar such
    as `synthetic:<tiny|small|base|large>`) in every command's option and command tables.

    Rich's table columns end a word that does not fit in "…" unless the text says otherwise; typer builds
    those texts in two private helpers, wrapped here (a typer without them keeps its own rendering, and
    tests/cli/test_help.py then fails at 80 columns)."""
    from typer import rich_utils

    if getattr(rich_utils, "_infer_prof_folds", False):
        return
    for name in ("_get_parameter_help", "_make_command_help"):
        helper = getattr(rich_utils, name, None)
        if helper is not None:
            setattr(rich_utils, name, _folding(helper))
    rich_utils._infer_prof_folds = True  # type: ignore[attr-defined]


def _folding(helper: Callable[..., Any]) -> Callable[..., Any]:
    def folded(*args: Any, **kwargs: Any) -> Any:
        return _fold(helper(*args, **kwargs))

    return folded


def _fold(renderable: Any) -> Any:
    """Every Text in the renderable (a Text, or typer's Columns of help, default and "required") folds."""
    from rich.columns import Columns
    from rich.text import Text

    if isinstance(renderable, Text):
        renderable.overflow = "fold"
    elif isinstance(renderable, Columns):
        for item in renderable.renderables:
            _fold(item)
    return renderable
