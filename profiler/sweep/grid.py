"""The grid of a sweep: one cell per combination of axis values, each an EngineOptions and a ScenarioSpec
checked before any work starts, and the order their repeats run in."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypedDict

from ...engine.loader import DEFAULT_MODEL, SYNTHETIC_PREFIX, SYNTHETIC_PRESETS
from ...errors import InferProfError, ModelNotFoundError, SweepError
from ...scenarios.lengths import LengthDist
from ...scenarios.sampling import RequestClass
from ...scenarios.spec import ScenarioSpec, load_scenario
from ..rundir.sweepdir import AxisValue, CellEntry
from ..session.options import EngineOptions, options_from_values
from .spec import RUN_AXES, SCENARIO_AXES, SweepSpec, json_value

DEFAULT_SCENARIO = "chat"  # what `infer-prof run` runs without --scenario
NATIVE_AXIS = "native"


class ScenarioChanges(TypedDict, total=False):
    """What a cell's axes change in its scenario (ScenarioSpec.with_overrides' fields)."""

    mode: str
    clients: int | None
    rate: float | None
    burstiness: float
    warmup_requests: int
    chat: bool
    output_tokens: LengthDist
    prompt_tokens: LengthDist
    sampling_mix: tuple[RequestClass, ...]


@dataclass(frozen=True)
class CellKey:
    """What names a cell in a sweep directory: its folder and its axis values as written."""

    id: str  # also its folder under cells/: "003-synthetic-tiny-16-all"
    values: tuple[tuple[str, AxisValue], ...]  # (axis, value) in the file's order

    def value(self, axis: str) -> AxisValue:
        return dict(self.values)[axis]

    def native(self) -> str:
        """The native axis' value: text, as the --native option takes it (KeyError without that axis)."""
        return _word(self.value(NATIVE_AXIS))

    def label(self) -> str:
        return " ".join(f"{axis}={_text(value)}" for axis, value in self.values)

    def to_json(self) -> CellEntry:
        return {"id": self.id, "values": {axis: json_value(value) for axis, value in self.values}}

    @classmethod
    def from_json(cls, entry: CellEntry) -> CellKey:
        values = entry["values"]
        return cls(
            entry["id"],
            tuple(
                (axis, math.inf if axis == "rate" and value == "inf" else value)
                for axis, value in values.items()
            ),
        )


@dataclass(frozen=True)
class Cell(CellKey):
    """One configuration of the sweep, with what a run of it builds and loads."""

    index: int = 0
    options: EngineOptions = field(default_factory=EngineOptions)
    scenario: ScenarioSpec | None = None
    profile: str = "default"


def build_cells(spec: SweepSpec) -> list[Cell]:
    """Every cell, the native axis varying fastest: a cell's Python and native runs are neighbours."""
    names = list(spec.axes)
    order = [name for name in names if name != NATIVE_AXIS] + [name for name in names if name == NATIVE_AXIS]
    scenarios: dict[str, ScenarioSpec] = {}
    cells: list[Cell] = []
    for index, combination in enumerate(itertools.product(*(spec.axes[name] for name in order))):
        chosen = dict(zip(order, combination))
        values = tuple((name, chosen[name]) for name in names)
        options, scenario, profile = _configure(spec, dict(values), scenarios)
        cells.append(
            Cell(
                id=_cell_id(index, values, spec.axes),
                values=values,
                index=index,
                options=options,
                scenario=scenario,
                profile=profile,
            )
        )
    return cells


def run_order(cells: list[Cell], repeats: int) -> list[tuple[Cell, int]]:
    """(cell, repeat) pairs: each repeat visits every cell, every other one backwards, so that slow drift of a
    shared machine hits every cell alike instead of making the last cells look slow."""
    order: list[tuple[Cell, int]] = []
    for repeat in range(1, repeats + 1):
        visit = cells if repeat % 2 == 1 else list(reversed(cells))
        order.extend((cell, repeat) for cell in visit)
    return order


def _configure(
    spec: SweepSpec, values: dict[str, AxisValue], scenarios: dict[str, ScenarioSpec]
) -> tuple[EngineOptions, ScenarioSpec, str]:
    """One cell's engine options, scenario and profile; errors name the sweep file and the cell."""
    where = " ".join(f"{axis}={_text(value)}" for axis, value in values.items())
    try:
        scenario = _scenario(spec, values, scenarios)
        options = _options(spec, values, scenario)
        _check_model(options.model)
    except SweepError:
        raise
    except InferProfError as err:
        raise SweepError(f"{spec.source}: axes: the cell {where}: {err}") from None
    return options, scenario, _word(values.get("profile", spec.profile))


def _options(spec: SweepSpec, values: dict[str, AxisValue], scenario: ScenarioSpec) -> EngineOptions:
    engine = {
        name: value for name, value in values.items() if name not in RUN_AXES and name not in SCENARIO_AXES
    }
    engine.setdefault("seed", spec.seed)
    if "model" in engine:
        engine["model"] = _path_or_name(spec, _word(engine["model"]), ".gguf")
    if "policy" not in engine and len({request_class.priority for request_class in scenario.classes()}) > 1:
        engine["policy"] = "priority"  # as `infer-prof run` picks for a scenario with priority classes
    return options_from_values(engine)


def _scenario(spec: SweepSpec, values: dict[str, AxisValue], cache: dict[str, ScenarioSpec]) -> ScenarioSpec:
    name = _path_or_name(spec, _word(values.get("scenario", DEFAULT_SCENARIO)), ".toml")
    if name not in cache:
        cache[name] = load_scenario(name)
    base = cache[name]
    changes = _load_changes(spec, base, values)
    if "warmup_requests" in values:
        changes["warmup_requests"] = _whole(values["warmup_requests"])
    if "chat" in values:
        changes["chat"] = _flag(values["chat"])
    lengths: tuple[Literal["output_tokens", "prompt_tokens"], ...] = ("output_tokens", "prompt_tokens")
    for key in lengths:
        if key in values:
            changes[key] = LengthDist(dist="fixed", value=_whole(values[key]))
            # A class's own lengths would win over the scenario's: the axis fixes every request's.
            changes["sampling_mix"] = tuple(
                replace(request_class, output_tokens=None)
                if key == "output_tokens"
                else replace(request_class, prompt_tokens=None)
                for request_class in changes.get("sampling_mix", base.sampling_mix)
            )
    seed = _whole(values.get("seed", spec.seed))
    return base.with_overrides(num_requests=spec.requests, duration_s=spec.seconds, seed=seed, **changes)


def _load_changes(spec: SweepSpec, base: ScenarioSpec, values: dict[str, AxisValue]) -> ScenarioChanges:
    """clients makes the load a closed loop, rate an open one; burstiness shapes an open loop's arrivals."""
    if "clients" in values:
        return {"mode": "closed-loop", "clients": _whole(values["clients"]), "rate": None}
    changes: ScenarioChanges = {}
    if "rate" in values:
        changes = {"mode": "open-loop", "rate": float(_number(values["rate"])), "clients": None}
    if "burstiness" in values:
        if changes.get("mode", base.mode) != "open-loop":
            raise spec.fail(
                "axes.burstiness",
                f"scenario {base.name} is a closed loop, which has no arrival process",
                "an open-loop scenario, or a rate axis",
            )
        changes["burstiness"] = _number(values["burstiness"])
    return changes


# A cell's values were checked against their keys' kinds by profiler.sweep.spec: these only tell the checker.
def _word(value: AxisValue) -> str:
    assert isinstance(value, str), value
    return value


def _whole(value: AxisValue) -> int:
    assert isinstance(value, int), value
    return value


def _number(value: AxisValue) -> float:
    assert isinstance(value, (int, float)), value
    return value


def _flag(value: AxisValue) -> bool:
    assert isinstance(value, bool), value
    return value


def _path_or_name(spec: SweepSpec, value: str, suffix: str) -> str:
    """A value ending in `suffix` is a path relative to the sweep file; anything else is a name."""
    if not value.endswith(suffix):
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (spec.folder / path).resolve())


def _check_model(model: str) -> None:
    """The model exists, without loading it: a cell must not fail on a typo after hours of others."""
    if model == DEFAULT_MODEL:
        return
    if model.startswith(SYNTHETIC_PREFIX):
        if model[len(SYNTHETIC_PREFIX) :] not in SYNTHETIC_PRESETS:
            raise ModelNotFoundError(
                f"unknown synthetic preset {model!r}; allowed: "
                + ", ".join(SYNTHETIC_PREFIX + name for name in SYNTHETIC_PRESETS)
            )
        return
    if not Path(model).is_file():
        raise ModelNotFoundError(
            f"model {model!r} is neither {DEFAULT_MODEL}, a synthetic: preset nor an existing .gguf file"
        )


def context_length(model: str) -> int | None:
    """The model's context length when known without loading weights (synthetic presets, GGUF headers)."""
    if model.startswith(SYNTHETIC_PREFIX):
        return SYNTHETIC_PRESETS[model[len(SYNTHETIC_PREFIX) :]].context_length
    if model.endswith(".gguf"):
        from ...engine.gguf_loader import open_gguf, read_config

        return read_config(open_gguf(model)).context_length
    return None


def check_contexts(spec: SweepSpec, cells: list[Cell]) -> None:
    """Every cell's longest prompt and output fit its model's context (where the context is known now)."""
    contexts: dict[str, int | None] = {}
    for cell in cells:
        model = cell.options.model
        if model not in contexts:
            try:
                contexts[model] = context_length(model)
            except InferProfError as err:
                raise SweepError(f"{spec.source}: axes.model: {err}") from None
        context = contexts[model]
        if context is not None and cell.scenario is not None:  # build_cells gives every cell its scenario
            try:
                cell.scenario.validate_against_context(context)
            except InferProfError as err:
                raise SweepError(f"{spec.source}: axes: the cell {cell.label()}: {err}") from None


def _cell_id(
    index: int, values: tuple[tuple[str, AxisValue], ...], axes: dict[str, tuple[AxisValue, ...]]
) -> str:
    # Axes with one value are the same in every cell: they would only lengthen every name.
    slug = "-".join(_slug(value) for axis, value in values if len(axes[axis]) > 1)
    return f"{index:03d}-{slug[:60].strip('-')}" if slug else f"{index:03d}"


def _slug(value: object) -> str:
    text = Path(value).stem if isinstance(value, str) and value.endswith((".toml", ".gguf")) else _text(value)
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def _text(value: object) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
