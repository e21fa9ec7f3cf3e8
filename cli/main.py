"""The console-script entry: every command registered, user errors turned into one line and exit code 2."""

from __future__ import annotations

import sys

import typer

from ..errors import OUTPUT_ERRNOS, InferProfError, output_error
from . import ANNOUNCED_STOPS
from .app import app
from .help_format import install as install_help_format

# Each module registers its commands on `app`; this order is the order `infer-prof --help` lists them.
# isort: off
from . import run, serve, sweep, compare, report, budget, selftest  # noqa: F401
from . import golden, generate, bench, ledger  # noqa: F401
from . import doctor, catalog  # noqa: F401
# isort: on


def main() -> None:
    """Run the app; exit 0 success, 1 a check failed, 2 bad input (one line on stderr), 130 interrupted."""
    install_help_format()
    try:
        # Without standalone mode click returns a command's typer.Exit code instead of exiting: pass it on.
        code = app(standalone_mode=False)
        if code in (130, 143) and not ANNOUNCED_STOPS:  # click ends a Ctrl-C with 130 and no line of its own
            typer.echo("infer-prof: interrupted", err=True)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except InferProfError as exc:
        typer.echo(f"infer-prof: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("infer-prof: interrupted", err=True)
        sys.exit(130)
    except OSError as exc:
        # A write outside rundir.atomic (a library saving a file, a collector's log): still one line, exit 2.
        if exc.errno not in OUTPUT_ERRNOS:
            raise
        typer.echo(f"infer-prof: error: {output_error(exc, verb='use')}", err=True)
        sys.exit(2)
    except Exception as exc:
        usage = _usage_error(exc)
        if usage is None:
            raise
        sys.exit(usage)


def _usage_error(exc: Exception) -> int | None:
    """Click's usage errors (an unknown flag or command, a value of the wrong type) as one line with
    click's exit code (2); None for anything else. Typer 0.29+ raises errors of its own bundled copy of
    click, older ones those of click itself, so both families are recognised."""
    for family in _click_families():
        if isinstance(exc, family.UsageError):
            context = getattr(exc, "ctx", None)
            command = context.command_path if context is not None else "infer-prof"
            typer.echo(f"infer-prof: error: {exc.format_message()} (see `{command} --help`)", err=True)
            return exc.exit_code
        if isinstance(exc, family.ClickException):
            typer.echo(f"infer-prof: error: {exc.format_message()}", err=True)
            return exc.exit_code
        if isinstance(exc, getattr(family, "Abort", ())):
            typer.echo("infer-prof: aborted", err=True)
            return 130
    return None


def _click_families() -> list:
    families = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            families.append(__import__(name, fromlist=["ClickException"]))
        except ImportError:
            continue
    return families
