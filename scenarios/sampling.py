"""Sampling settings of a scenario and the weighted request classes of a `[[sampling_mix]]`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TypedDict, TypeVar

from .lengths import LengthDist

# Allowed ranges, mirroring engine.types.SamplingParams (scenarios may not import the engine), so that a
# bad value is reported with its file and key when the scenario loads, not later by the engine.
T = TypeVar("T")

_RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "temperature": ("a number >= 0 (0 = greedy)", lambda v: v >= 0),
    "top_k": ("an integer >= 0 (0 = off)", lambda v: isinstance(v, int) and v >= 0),
    "top_p": ("a number in (0, 1] (1 = off)", lambda v: 0 < v <= 1),
    "min_p": ("a number in [0, 1] (0 = off)", lambda v: 0 <= v <= 1),
    "repetition_penalty": ("a number > 0 (1 = off)", lambda v: v > 0),
    "frequency_penalty": ("a number in [-2, 2] (0 = off)", lambda v: -2 <= v <= 2),
    "presence_penalty": ("a number in [-2, 2] (0 = off)", lambda v: -2 <= v <= 2),
}


class SamplingDict(TypedDict, total=False):
    """engine.types.SamplingParams' fields by name, only those set: what a request carries to the engine
    (SamplingParams(**sampling)) or into a server's JSON body (a generated request always sets seed and
    max_tokens)."""

    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repetition_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int
    max_tokens: int
    stop: tuple[str, ...]
    ignore_eos: bool


@dataclass(frozen=True, slots=True)
class SamplingSettings:
    """Sampling parameters a scenario sets; None means "not set here" (inherit, or the engine default)."""

    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    # Benchmark convention (vLLM's benchmark_serving): ignore EOS so that each request produces the
    # output length the scenario drew, not whatever length the model happens to stop at.
    ignore_eos: bool | None = None

    def __post_init__(self) -> None:
        for name, (allowed, check) in _RANGES.items():
            value = getattr(self, name)
            if value is None:
                continue
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (is_number and math.isfinite(value) and check(value)):
                raise ValueError(f"{name}: {value!r} is impossible; allowed: {allowed}")
        if self.ignore_eos is not None and not isinstance(self.ignore_eos, bool):
            raise ValueError(f"ignore_eos: {self.ignore_eos!r} is not a boolean; allowed: true, false")

    @staticmethod
    def keys() -> list[str]:
        return [field.name for field in fields(SamplingSettings)]

    def over(self, base: SamplingSettings) -> SamplingSettings:
        """These settings, with every unset one taken from `base`."""
        return SamplingSettings(
            temperature=_set_or(self.temperature, base.temperature),
            top_k=_set_or(self.top_k, base.top_k),
            top_p=_set_or(self.top_p, base.top_p),
            min_p=_set_or(self.min_p, base.min_p),
            repetition_penalty=_set_or(self.repetition_penalty, base.repetition_penalty),
            frequency_penalty=_set_or(self.frequency_penalty, base.frequency_penalty),
            presence_penalty=_set_or(self.presence_penalty, base.presence_penalty),
            ignore_eos=_set_or(self.ignore_eos, base.ignore_eos),
        )

    def to_dict(self) -> SamplingDict:
        """Only the parameters that are set, in field order."""
        settings: SamplingDict = {}
        if self.temperature is not None:
            settings["temperature"] = self.temperature
        if self.top_k is not None:
            settings["top_k"] = self.top_k
        if self.top_p is not None:
            settings["top_p"] = self.top_p
        if self.min_p is not None:
            settings["min_p"] = self.min_p
        if self.repetition_penalty is not None:
            settings["repetition_penalty"] = self.repetition_penalty
        if self.frequency_penalty is not None:
            settings["frequency_penalty"] = self.frequency_penalty
        if self.presence_penalty is not None:
            settings["presence_penalty"] = self.presence_penalty
        if self.ignore_eos is not None:
            settings["ignore_eos"] = self.ignore_eos
        return settings


def _set_or(value: T | None, base: T | None) -> T | None:
    return base if value is None else value


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One weighted entry of `[[sampling_mix]]`: a share of the requests with its own priority and settings.

    Its length distributions, when set, replace the scenario's for the requests of this class
    (an interactive class with short outputs next to a batch class with long ones).
    """

    weight: float
    name: str = ""
    priority: int = 0  # lower is served first (vLLM's convention)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    prompt_tokens: LengthDist | None = None
    output_tokens: LengthDist | None = None

    def __post_init__(self) -> None:
        weight_ok = isinstance(self.weight, (int, float)) and not isinstance(self.weight, bool)
        if not (weight_ok and math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"weight: {self.weight!r} is impossible; allowed: a number > 0")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            # ValueError like every other check here: the scenario parser turns it into a ScenarioError.
            raise ValueError(f"priority: {self.priority!r} is not an integer; allowed: an integer")

    def to_dict(self) -> dict[str, object]:
        table: dict[str, object] = {"name": self.name, "weight": self.weight, "priority": self.priority}
        table.update(self.sampling.to_dict())
        if self.prompt_tokens is not None:
            table["prompt_tokens"] = self.prompt_tokens.to_dict()
        if self.output_tokens is not None:
            table["output_tokens"] = self.output_tokens.to_dict()
        return table
