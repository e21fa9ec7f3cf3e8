"""A scenario as result.json keeps it (ScenarioSpec.to_dict): the types the run directory's schema reads it by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict


class ScenarioLoad(TypedDict, total=False):
    """How the requests arrive: the loop, its rate (requests/s; "inf": all at once), burstiness and clients."""

    mode: str  # "open-loop" or "closed-loop"
    rate: float | str | None
    burstiness: float
    clients: int | None


class ScenarioDict(TypedDict, total=False):
    """The scenario's settings, as the run used them (scenarios.spec.ScenarioSpec.to_dict)."""

    name: str
    description: str
    source: str  # the TOML it came from
    load: ScenarioLoad
    num_requests: int | None
    duration_s: float | None
    warmup_requests: int
    # The user-shaped tables below are read as tables of anything: each part names its own keys.
    prompt_tokens: Mapping[str, object] | None  # LengthDist.to_dict: {"dist": ..., "<param>": number}
    output_tokens: Mapping[str, object]
    prompt_file: str | None
    chat: bool
    sampling: Mapping[str, object]  # SamplingSettings.to_dict: only the parameters set
    sampling_mix: list[Mapping[str, object]]  # RequestClass.to_dict, one per class
    slo: dict[str, float]  # SLO.as_dict: only the objectives set
    seed: int
