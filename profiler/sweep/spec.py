"""The sweep file: TOML validated into a SweepSpec whose axes are `infer-prof run` options or scenario keys.

A sweep file, every key at the top level except the two tables:

    description = "..."        # required, one line: the question the sweep answers
    repeats = 2                # runs per cell, interleaved across cells (default 1)
    seed = 0                   # engine and scenario seed of every cell (an axis `seed` overrides it)
    requests = 24              # measured requests per cell; and/or
    seconds = 4                # stop submitting after this many seconds (default: the scenario's own)
    profile = "default"        # default or deep (an axis `profile` overrides it)
    [axes]                     # each key a non-empty list of values; one cell per combination
    model = ["synthetic:tiny", "synthetic:base"]   # run options: see RUN_AXES and engine_axes()
    clients = [1, 4, 16, 30]                       # scenario keys: see SCENARIO_AXES
    native = ["none", "all"]                       # "none" next to others: each cell's measured native gain
    [map]                      # optional: the crossover map's two axes (default: chosen from the axes)
    x = "clients"
    y = "model"

Paths among the values (a scenario `.toml`, a model `.gguf`) are relative to the sweep file. Errors
name the file, the key and what is allowed, like scenario files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from ...errors import SweepError, read_toml
from ...scenarios.spec import BUILTIN_DIR
from ..session.options import OPTIONS

if TYPE_CHECKING:  # sweepdir loads pandas, which `sweep list` must not (tests/cli/test_imports.py)
    from ..rundir.sweepdir import AxisValue, SweepSettings

SWEEPS_DIR = BUILTIN_DIR.parent / "sweeps"
# A sweep of more runs than this is a typo in an axis, not a plan: at ~1 minute a run it would take a day.
MAX_RUNS = 1000
TOP_KEYS = ("description", "repeats", "seed", "requests", "seconds", "profile", "axes", "map")
PROFILES = ("default", "deep")  # off and counters record no time split: nothing to map
# `infer-prof run` options that are not engine options, and their kinds.
RUN_AXES = {"scenario": "string", "profile": "string"}
# Scenario keys a sweep may override per cell. clients makes the load a closed loop, rate an open one;
# output_tokens and prompt_tokens fix every request's length (token count).
SCENARIO_AXES = {
    "clients": "integer",
    "rate": "rate",
    "burstiness": "number",
    "warmup_requests": "integer",
    "output_tokens": "integer",
    "prompt_tokens": "integer",
    "chat": "boolean",
}


def engine_axes() -> dict[str, str]:
    """Every engine option (named as `infer-prof run` spells them, from OPTIONS) and the kind of its values."""
    return {option.name: option.axis_kind for option in OPTIONS}


def axis_kinds() -> dict[str, str]:
    """Every axis a sweep file may name, with the kind of its values."""
    return {**engine_axes(), **RUN_AXES, **SCENARIO_AXES}


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep file; `source` is its path, named in every error."""

    name: str
    description: str
    axes: dict[str, tuple[AxisValue, ...]]  # in the file's order, values as written ("inf" rates as math.inf)
    repeats: int = 1
    seed: int = 0
    requests: int | None = None
    seconds: float | None = None
    profile: str = "default"
    map_x: str | None = None
    map_y: str | None = None
    source: str = "<memory>"
    text: str = ""  # the file as written, kept in the sweep directory

    @property
    def folder(self) -> Path:
        """Where relative paths among the values start."""
        return Path(self.source).parent

    def settings(self) -> SweepSettings:
        """What decides the cells and how each runs (repeats excepted): a resumed sweep must match it."""
        return {
            "axes": {name: [json_value(value) for value in values] for name, values in self.axes.items()},
            "seed": self.seed,
            "requests": self.requests,
            "seconds": self.seconds,
            "profile": self.profile,
        }

    def fail(self, key: str, problem: str, allowed: str) -> SweepError:
        return SweepError(f"{self.source}: {key}: {problem}; allowed: {allowed}")


def json_value(value: AxisValue) -> AxisValue:
    """An axis value as JSON holds it: an infinite rate as \"inf\", as the file writes it."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def builtin_sweeps() -> list[str]:
    return sorted(path.stem for path in SWEEPS_DIR.glob("*.toml"))


def load_sweep(name_or_path: str | Path) -> SweepSpec:
    """A built-in sweep by name (see builtin_sweeps) or a sweep TOML file by path, validated."""
    path = _locate(str(name_or_path))
    data, text = read_toml(path, SweepError, kind="sweep file with an [axes] table")
    return _Parser(path).sweep(data, text)


def _locate(name_or_path: str) -> Path:
    names = builtin_sweeps()
    if name_or_path in names:
        return SWEEPS_DIR / f"{name_or_path}.toml"
    path = Path(name_or_path)
    if path.is_file():
        return path
    raise SweepError(
        f"{name_or_path}: no such sweep file; allowed: a built-in sweep ({', '.join(names)}) or a path to a .toml file"
    )


class _Parser:
    """Checks the keys and value types of one sweep file; cells are checked whole in profiler.sweep.grid."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str, allowed: str) -> SweepError:
        return SweepError(f"{self.path}: {key}: {problem}; allowed: {allowed}")

    def sweep(self, data: dict[str, Any], text: str) -> SweepSpec:
        for key in data:
            if key not in TOP_KEYS:
                raise self.fail(key, "unknown key at the top level", f"keys {', '.join(TOP_KEYS)}")
        description = data.get("description")
        if (
            not isinstance(description, str)
            or not description.strip()
            or "\n" in description
            or len(description) > 500
        ):
            raise self.fail(
                "description",
                "missing, not one line or over 500 characters",
                "one line of text: the question the sweep answers",
            )
        axes = self.axes(data.get("axes"))
        profile = self.choice(data.get("profile", "default"), "profile", PROFILES)
        spec = SweepSpec(
            name=self.path.stem,
            description=description,
            axes=axes,
            repeats=self.count(data.get("repeats", 1), "repeats", "an integer >= 1 (runs per cell)"),
            seed=self.count(data.get("seed", 0), "seed", "an integer >= 0", minimum=0),
            requests=None
            if "requests" not in data
            else self.count(data["requests"], "requests", "an integer >= 1 (measured requests per cell)"),
            seconds=None if "seconds" not in data else self.seconds(data["seconds"]),
            profile=profile,
            source=str(self.path),
            text=text,
        )
        runs = math.prod(len(values) for values in axes.values()) * spec.repeats
        if runs > MAX_RUNS:
            raise self.fail(
                "axes", f"{runs:,} runs (cells x repeats)", f"at most {MAX_RUNS:,}: fewer values or repeats"
            )
        map_x, map_y = self.map(data.get("map", {}), axes)
        return replace(spec, map_x=map_x, map_y=map_y)

    def axes(self, table: object) -> dict[str, tuple[AxisValue, ...]]:
        kinds = axis_kinds()
        if not isinstance(table, dict) or not table:
            raise self.fail(
                "axes",
                "missing or empty",
                "an [axes] table: each key an option or scenario key, a list of values",
            )
        axes = {}
        for name, values in table.items():
            if name not in kinds:
                raise self.fail(
                    f"axes.{name}",
                    "unknown axis",
                    f"run options {', '.join([*engine_axes(), *RUN_AXES])}; scenario keys {', '.join(SCENARIO_AXES)}",
                )
            if not isinstance(values, list) or not values:
                raise self.fail(
                    f"axes.{name}",
                    f"{values!r} is not a non-empty list",
                    f"a list of {_KIND_WORDS[kinds[name]]}",
                )
            checked = tuple(self.value(value, f"axes.{name}", kinds[name]) for value in values)
            if len(set(checked)) != len(checked):
                raise self.fail(
                    f"axes.{name}",
                    f"{values!r} repeats a value",
                    "each value once (use repeats for more runs)",
                )
            axes[name] = checked
        if "clients" in axes and ({"rate", "burstiness"} & set(axes)):
            raise self.fail(
                "axes",
                "clients (a closed loop) and rate/burstiness (an open loop) together",
                "clients, or rate and burstiness",
            )
        if "profile" in axes:
            for value in axes["profile"]:
                self.choice(value, "axes.profile", PROFILES)
        return axes

    def value(self, value: object, key: str, kind: str) -> AxisValue:
        if kind == "rate":
            if value == "inf":
                return math.inf
            kind = "positive"
        if not _of_kind(value, kind):
            allowed = 'requests per second > 0, or "inf"' if key.endswith("rate") else _KIND_WORDS[kind]
            raise self.fail(key, f"{value!r} has the wrong type or is impossible", allowed)
        return value

    def count(self, value: object, key: str, allowed: str, minimum: int = 1) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(key, f"{value!r} is impossible", allowed)
        return value

    def seconds(self, value: object) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise self.fail("seconds", f"{value!r} is impossible", "seconds > 0 per cell")
        return float(value)

    def choice(self, value: object, key: str, allowed: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in allowed:
            why = " (it records no time split: nothing to map)" if value in ("off", "counters") else ""
            raise self.fail(key, f"{value!r} is not a sweep profile{why}", ", ".join(allowed))
        return value

    def map(self, table: object, axes: dict[str, tuple[AxisValue, ...]]) -> tuple[str | None, str | None]:
        if not isinstance(table, dict):
            raise self.fail("map", f"{table!r} is not a table", "a [map] table with x and y")
        for key in table:
            if key not in ("x", "y"):
                raise self.fail(f"map.{key}", "unknown key in [map]", "x, y")
        chosen = []
        for key in ("x", "y"):
            name = table.get(key)
            if name is not None and name not in axes:
                raise self.fail(f"map.{key}", f"{name!r} is not an axis of this sweep", ", ".join(axes))
            chosen.append(name)
        if chosen[0] is not None and chosen[0] == chosen[1]:
            raise self.fail("map", f"x and y are both {chosen[0]!r}", "two different axes")
        return chosen[0], chosen[1]


def _of_kind(value: object, kind: str) -> TypeGuard[AxisValue]:
    """Whether a sweep file's value is one of `kind` (see _KIND_WORDS)."""
    return {
        "string": isinstance(value, str) and bool(value.strip()),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
        "positive": isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0,
        "boolean": isinstance(value, bool),
    }[kind]


_KIND_WORDS = {
    "string": "non-empty strings",
    "integer": "integers",
    "number": "finite numbers",
    "positive": "numbers > 0",
    "boolean": "true or false",
}
