"""Preflight's scenario check: sampling values the scenario file allows but the engine's domain refuses are named
with the file and the table they came from, before anything loads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infer_prof.errors import ScenarioError
from infer_prof.profiler.session.options import EngineOptions
from infer_prof.profiler.session.preflight import Preflight, check_scenario
from infer_prof.scenarios.sampling import RequestClass, SamplingSettings
from infer_prof.scenarios.spec import ScenarioSpec, load_scenario

SCENARIO = """
description = "two short requests"
seed = 0
num_requests = 2
output_tokens = { dist = "fixed", value = 4 }
prompt_tokens = { dist = "fixed", value = 8 }

[load]
mode = "closed-loop"
clients = 1

[sampling]
top_k = %d
"""


def _spec(tmp_path: Path, top_k: int) -> ScenarioSpec:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO % top_k)
    return load_scenario(str(path))


def test_sampling_in_the_engines_domain_passes(tmp_path: Path) -> None:
    check_scenario(_spec(tmp_path, 40), Preflight(None), EngineOptions(device="cpu"))


def test_a_count_beyond_the_engines_32_bits_is_named_with_its_file_and_table(tmp_path: Path) -> None:
    spec = _spec(tmp_path, 2**31)
    with pytest.raises(ScenarioError, match=r"s\.toml: sampling: sampling parameter top_k=2147483648"):
        check_scenario(spec, Preflight(None), EngineOptions(device="cpu"))
    mixed = replace(
        _spec(tmp_path, 1),
        sampling_mix=(RequestClass(1.0), RequestClass(1.0, sampling=SamplingSettings(top_k=2**31))),
    )
    with pytest.raises(ScenarioError, match=r"sampling_mix\[1\]: sampling parameter top_k"):
        check_scenario(mixed, Preflight(None), EngineOptions(device="cpu"))
