"""Scenario files: every built-in loads and validates, and each kind of bad input names its file and key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from infer_prof.scenarios.spec import (
    ScenarioError,
    ScenarioSpec,
    builtin_names,
    describe,
    list_scenarios,
    load_scenario,
)

BUILTINS = (
    "batch-docs",
    "burst",
    "chat",
    "concurrency-30",
    "edge",
    "long-context",
    "mixed-priority",
    "trickle",
)
SMOLLM2_CONTEXT = 8192

MINIMAL = """\
description = "a test scenario"
num_requests = 4
prompt_tokens = { dist = "fixed", value = 10 }
output_tokens = { dist = "fixed", value = 5 }
[load]
mode = "open-loop"
rate = 1.0
"""


def write(tmp_path: Path, text: str, name: str = "custom.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_builtins_are_the_promised_ones() -> None:
    assert tuple(builtin_names()) == BUILTINS
    assert [spec.name for spec in list_scenarios()] == list(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_loads_validates_and_describes_itself(name: str) -> None:
    spec = load_scenario(name)
    spec.validate_against_context(SMOLLM2_CONTEXT)
    assert spec.description and "\n" not in spec.description
    assert json.loads(json.dumps(spec.to_dict()))["name"] == name
    rows = dict(describe(spec))
    assert {"load", "requests", "prompt", "output", "sampling", "SLO", "seed"} <= set(rows)


BENCHMARK_SCENARIOS = sorted(
    (Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios").glob("*.toml")
)


@pytest.mark.parametrize("path", BENCHMARK_SCENARIOS, ids=[path.stem for path in BENCHMARK_SCENARIOS])
def test_every_benchmark_scenario_loads_and_fits_smollm2(path: Path) -> None:
    """docs/measurements.md runs these by path: a key renamed in the schema must not break them unseen."""
    spec = load_scenario(str(path))
    spec.validate_against_context(SMOLLM2_CONTEXT)
    assert spec.name == path.stem and spec.description and "\n" not in spec.description


def test_builtin_shapes_match_the_situations_they_model() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert specs["chat"].mode == "open-loop" and specs["chat"].burstiness == 1 and specs["chat"].chat
    assert math.isinf(specs["batch-docs"].rate)
    assert specs["burst"].burstiness < 1
    assert specs["edge"].mode == "closed-loop" and specs["edge"].clients == 1
    assert specs["concurrency-30"].clients == 30
    assert {request_class.priority for request_class in specs["mixed-priority"].sampling_mix} == {0, 1}
    assert specs["long-context"].prompt_tokens.relative  # lengths as fractions of the context


def test_long_context_resolves_against_the_model_context() -> None:
    spec = load_scenario("long-context")
    prompt, output = spec.resolved_lengths(spec.classes()[0], 8192)
    assert prompt.bounds() == (6553, 7372)
    assert prompt.bounds()[1] + output.bounds()[1] <= 8192
    spec.validate_against_context(256)  # fractions keep it valid for a tiny synthetic model too


def test_a_path_loads_and_defaults_apply(tmp_path: Path) -> None:
    spec = load_scenario(str(write(tmp_path, MINIMAL)))
    assert spec.name == "custom" and spec.warmup_requests == 0 and spec.seed == 0 and not spec.chat
    assert spec.burstiness == 1.0 and spec.slo.as_dict() == {}


def test_with_overrides_replaces_and_revalidates() -> None:
    spec = load_scenario("chat")
    changed = spec.with_overrides(num_requests=5, seed=7)
    assert (changed.num_requests, changed.seed, changed.duration_s) == (5, 7, None)
    assert spec.num_requests == 48  # frozen original untouched
    assert spec.with_overrides() == spec
    with pytest.raises(ScenarioError, match="num_requests"):
        spec.with_overrides(num_requests=-1)


def test_validate_against_context_names_the_keys_and_limit() -> None:
    with pytest.raises(ScenarioError, match=r"chat\.toml: prompt_tokens \+ output_tokens.*context of 200"):
        load_scenario("chat").validate_against_context(200)
    with pytest.raises(ScenarioError, match=r"sampling_mix\[1\]\.prompt_tokens"):
        load_scenario("mixed-priority").validate_against_context(300)


def test_prompt_file_is_relative_to_the_toml(tmp_path: Path) -> None:
    (tmp_path / "prompts.txt").write_text("# a comment\nhello there\n\nwhat is up\n", encoding="utf-8")
    text = MINIMAL.replace('prompt_tokens = { dist = "fixed", value = 10 }', 'prompt_file = "prompts.txt"')
    spec = load_scenario(str(write(tmp_path, text)))
    assert spec.prompt_file == str((tmp_path / "prompts.txt").resolve()) and spec.prompt_tokens is None


BAD_INPUTS = {
    "malformed TOML": (MINIMAL + "rate = = 2\n", r"custom\.toml: malformed TOML: .*line 8"),
    "unknown top key": (
        MINIMAL.replace("num_requests", "num_request"),
        r"custom\.toml: num_request: unknown key .*allowed: keys description, seed",
    ),
    "unknown load key": (
        MINIMAL + "clients = 3\n",
        r"load\.clients: unknown key in \[load\]; allowed: keys mode, rate, burstiness",
    ),
    "wrong type": (
        MINIMAL.replace("num_requests = 4", 'num_requests = "four"'),
        r"num_requests: 'four' has the wrong type \(str\); allowed: an integer",
    ),
    "negative rate": (
        MINIMAL.replace("rate = 1.0", "rate = -2.0"),
        r"load\.rate: -2\.0 is not a positive rate; allowed: ",
    ),
    "string rate": (MINIMAL.replace("rate = 1.0", 'rate = "fast"'), r"load\.rate: 'fast'.*\"inf\""),
    "unknown mode": (
        MINIMAL.replace('"open-loop"', '"open"'),
        r"load\.mode: unknown mode 'open'; allowed: open-loop, closed-loop",
    ),
    "unknown distribution": (
        MINIMAL.replace('dist = "fixed", value = 10', 'dist = "zipf", value = 10'),
        r"prompt_tokens\.dist: unknown distribution 'zipf'; allowed: fixed, uniform, normal, lognormal",
    ),
    "wrong distribution key": (
        MINIMAL.replace("value = 10", "mean = 10"),
        r"prompt_tokens\.mean: unknown key .*allowed: keys dist, value, min, max",
    ),
    "missing parameter": (
        MINIMAL.replace('{ dist = "fixed", value = 10 }', '{ dist = "uniform", low = 3 }'),
        r"prompt_tokens\.high: missing for dist='uniform'",
    ),
    "unbounded normal": (
        MINIMAL.replace('{ dist = "fixed", value = 10 }', '{ dist = "normal", mean = 9, std = 2 }'),
        r"prompt_tokens\.max: normal is unbounded and needs a max clamp",
    ),
    "low above high": (
        MINIMAL.replace('{ dist = "fixed", value = 10 }', '{ dist = "uniform", low = 9, high = 2 }'),
        r"prompt_tokens\.low: 9 > high 2; allowed: low <= high",
    ),
    "fraction out of range": (
        MINIMAL.replace("value = 10", "value_fraction = 1.5"),
        r"prompt_tokens\.value_fraction: 1\.5 is out of range; allowed: a fraction in \[0, 1\]",
    ),
    "bad sampling value": (
        MINIMAL + "[sampling]\ntop_p = 0\n",
        r"sampling\.top_p: 0 is impossible; allowed: a number in \(0, 1\]",
    ),
    "unknown sampling key": (
        MINIMAL + "[sampling]\ntemp = 0.5\n",
        r"sampling\.temp: unknown key .*allowed: keys temperature",
    ),
    "bad slo": (
        MINIMAL + "[slo]\nttft_ms = -1\n",
        r"slo\.ttft_ms: -1 is impossible; allowed: milliseconds > 0",
    ),
    "unknown slo": (
        MINIMAL + "[slo]\nitl_ms = 5\n",
        r"slo\.itl_ms: unknown key .*allowed: keys ttft_ms, tpot_ms, e2e_ms",
    ),
    "mix without weight": (
        MINIMAL + "[[sampling_mix]]\npriority = 1\n",
        r"sampling_mix\[0\]\.weight: missing",
    ),
    "bad mix priority": (
        MINIMAL + "[[sampling_mix]]\nweight = 1\npriority = 0.5\n",
        r"sampling_mix\[0\]\.priority: 0\.5 is not an integer",
    ),
    "missing prompt file": (
        'prompt_file = "nope.txt"\n' + MINIMAL,
        r"custom\.toml: prompt_file: .*nope\.txt: no such file; allowed: a text file",
    ),
    "closed loop without clients": (
        MINIMAL.replace('mode = "open-loop"\nrate = 1.0', 'mode = "closed-loop"'),
        r"load\.clients: missing on a closed-loop load; allowed: an integer in \[1, 1024\]",
    ),
    "no request count": (
        MINIMAL.replace("num_requests = 4", ""),
        r"num_requests: neither num_requests nor duration_s",
    ),
    "inf rate with only a duration": (
        MINIMAL.replace("num_requests = 4", "duration_s = 3").replace("1.0", '"inf"'),
        r"num_requests: missing with rate = \"inf\"",
    ),
    "missing description": (MINIMAL.replace('description = "a test scenario"', ""), r"description: missing"),
    "missing output": (
        MINIMAL.replace('output_tokens = { dist = "fixed", value = 5 }', ""),
        r"output_tokens: missing",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_a_one_line_scenario_error_naming_file_and_key(tmp_path: Path, case: str) -> None:
    text, pattern = BAD_INPUTS[case]
    with pytest.raises(ScenarioError, match=pattern) as caught:
        load_scenario(str(write(tmp_path, text)))
    message = str(caught.value)
    assert "\n" not in message and "custom.toml" in message
    assert "allowed" in message or "malformed TOML" in message


def test_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(
        ScenarioError, match=r"unknown scenario 'chatty'; allowed: a built-in \(batch-docs, burst, chat"
    ):
        load_scenario("chatty")


def test_missing_file_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"absent\.toml: no such scenario file"):
        load_scenario(str(tmp_path / "absent.toml"))


def test_spec_dataclass_validates_without_toml() -> None:
    spec = load_scenario("edge")
    with pytest.raises(ScenarioError, match=r"edge\.toml: load\.burstiness"):
        ScenarioSpec(
            **{
                **{name: getattr(spec, name) for name in spec.__dataclass_fields__},
                "mode": "open-loop",
                "rate": 1.0,
                "clients": None,
                "burstiness": 0.0,
            }
        )
