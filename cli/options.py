"""The engine options every engine-building command shares, added to a command by @engine_options from profiler.session.options.OPTIONS."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..profiler.session.options import (
    OPTION,
    OPTIONS,
    EngineOptions,
    Option,
    OptionError,
    options_from_values,
)


def _parameter(option: Option) -> inspect.Parameter:
    """The Typer parameter of one engine option, from its entry in OPTIONS."""
    kind = Optional[option.kind] if option.default is None else option.kind
    declarations = [option.flag, option.short] if option.short else [option.flag]
    annotation = Annotated[kind, typer.Option(*declarations, help=option.help)]  # type: ignore[valid-type]
    return inspect.Parameter(
        option.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=option.default
    )


def _own_hints(command: Callable[..., Any]) -> dict[str, Any]:
    """The command's own annotations, evaluated (modules use `from __future__ import annotations`); the
    `options` parameter is the decorator's to fill, so its annotation is never looked at."""
    own = {
        name: hint
        for name, hint in inspect.get_annotations(command).items()
        if name not in ("options", "return")
    }

    def probe() -> None: ...

    probe.__annotations__ = own
    return typing.get_type_hints(probe, globalns=command.__globals__, include_extras=True)


def engine_options(*, without: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command that takes `options: EngineOptions`: its CLI signature gains the shared engine
    options (all but `without`, which keep their defaults) and it receives them parsed and validated as
    one EngineOptions (OptionError names the flag at fault)."""
    unknown = set(without) - set(OPTION)
    if unknown:
        raise ValueError(f"not engine options: {sorted(unknown)}")
    shared = [_parameter(option) for option in OPTIONS if option.name not in without]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = _own_hints(command)
        own = [
            parameter.replace(annotation=hints[name])
            for name, parameter in inspect.signature(command).parameters.items()
            if name != "options"
        ]

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            chosen = {parameter.name: values.pop(parameter.name) for parameter in shared}
            return command(options=parse_engine_options(**chosen), **values)

        wrapper.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
        del wrapper.__wrapped__  # typer must read the signature above, not the command's own
        wrapper.__annotations__ = {**hints, **{parameter.name: parameter.annotation for parameter in shared}}
        return wrapper

    return decorate


def parse_engine_options(**values: Any) -> EngineOptions:
    """The shared options (defaults for any not given) as one validated EngineOptions."""
    return options_from_values(values)


def output_path(value: str | None, option: str) -> Path | None:
    """A path option given as text: an empty one is refused (a Path would silently read it as '.')."""
    if value is None:
        return None
    if not value.strip():
        raise OptionError(f"{option} is empty: give a path")
    return Path(value)


def dim_printer(console):
    """A progress callback that prints each message dimmed on `console`."""
    return lambda message: console.print(f"[dim]{message}[/dim]")
