"""The request stream: seeded, shaped by the scenario, and resolved against the model's context."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from infer_prof.scenarios.loadgen import generate_requests, prompt_text_for
from infer_prof.scenarios.prompts import WORDS, synthetic_text, words_for_tokens
from infer_prof.scenarios.spec import ScenarioError, load_scenario


def test_same_seed_same_stream_different_seed_different_stream() -> None:
    spec = load_scenario("mixed-priority")
    first, again = generate_requests(spec, 8192), generate_requests(spec, 8192)
    other = generate_requests(spec.with_overrides(seed=1), 8192)
    assert first == again
    assert [r.arrival_s for r in first] != [r.arrival_s for r in other]
    assert [r.sampling["seed"] for r in first] != [r.sampling["seed"] for r in other]
    assert [r.prompt_tokens for r in first] != [r.prompt_tokens for r in other]


def test_chat_stream_shape() -> None:
    spec = load_scenario("chat")
    requests = generate_requests(spec, 8192)
    assert len(requests) == spec.num_requests + spec.warmup_requests
    assert [r.index for r in requests] == list(range(len(requests)))
    warmups = [r for r in requests if r.warmup]
    assert len(warmups) == spec.warmup_requests and all(r.arrival_s == 0 for r in warmups)
    measured = [r.arrival_s for r in requests if not r.warmup]
    assert measured[0] == 0 and measured == sorted(measured)
    assert all(r.chat and r.prompt_text is None for r in requests)
    for request in requests:
        assert 16 <= request.prompt_tokens <= 160 and 16 <= request.max_tokens <= 128
        assert request.sampling == {
            "ignore_eos": True,
            "temperature": 0.7,
            "top_p": 0.9,
            "seed": request.sampling["seed"],
            "max_tokens": request.max_tokens,
        }
    assert len({r.sampling["seed"] for r in requests}) == len(requests)


def test_sampling_mix_shares_priorities_and_lengths() -> None:
    spec = load_scenario("mixed-priority").with_overrides(num_requests=4000)
    requests = generate_requests(spec, 8192)
    by_priority = Counter(r.priority for r in requests)
    assert by_priority[0] / len(requests) == pytest.approx(0.2, abs=0.02)
    batch = [r for r in requests if r.priority == 1]
    assert all(r.sampling["temperature"] == 0.0 and 64 <= r.prompt_tokens <= 320 for r in batch)
    interactive = [r for r in requests if r.priority == 0]
    assert all(r.sampling["top_p"] == 0.9 and r.prompt_tokens <= 160 for r in interactive)


def test_closed_loop_and_all_at_once_have_zero_arrivals() -> None:
    assert {r.arrival_s for r in generate_requests(load_scenario("concurrency-30"), 8192)} == {0.0}
    assert {r.arrival_s for r in generate_requests(load_scenario("batch-docs"), 8192)} == {0.0}


def test_duration_only_open_loop_draws_arrivals_within_it(tmp_path: Path) -> None:
    spec = dataclasses.replace(load_scenario("chat"), num_requests=None, duration_s=100.0)
    requests = [r for r in generate_requests(spec, 8192) if not r.warmup]
    assert max(r.arrival_s for r in requests) < 100.0
    assert len(requests) == pytest.approx(200, rel=0.25)


def test_long_context_fits_every_context() -> None:
    spec = load_scenario("long-context")
    for context in (256, 2048, 8192):
        for request in generate_requests(spec, context):
            assert request.prompt_tokens >= 0.8 * context - 1
            assert request.prompt_tokens + request.max_tokens <= context


def test_context_too_small_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="exceed the model context of 100"):
        generate_requests(load_scenario("edge"), 100)


def test_prompt_file_lines_are_drawn_and_capped_to_fit(tmp_path: Path) -> None:
    (tmp_path / "prompts.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    (tmp_path / "s.toml").write_text(
        'description = "file prompts"\nnum_requests = 30\nprompt_file = "prompts.txt"\n'
        'output_tokens = { dist = "fixed", value = 8 }\n[load]\nmode = "closed-loop"\nclients = 2\n',
        encoding="utf-8",
    )
    requests = generate_requests(load_scenario(str(tmp_path / "s.toml")), 512)
    assert {r.prompt_text for r in requests} == {"alpha", "beta", "gamma"}
    assert all(r.prompt_tokens == 504 for r in requests)
    assert prompt_text_for(requests[0]) == requests[0].prompt_text


def test_synthetic_prompts_are_generous_and_seeded() -> None:
    request = generate_requests(load_scenario("chat"), 8192)[0]
    text = prompt_text_for(request)
    assert text == prompt_text_for(request)
    assert len(text.split()) == words_for_tokens(request.prompt_tokens) >= request.prompt_tokens
    words = synthetic_text(40, np.random.default_rng(0)).lower().replace(".", "").split()
    assert len(words) == 40 and set(words) <= set(WORDS)


def test_scenarios_import_neither_engine_nor_profiler() -> None:
    code = (
        "import sys, infer_prof.scenarios.loadgen, infer_prof.scenarios.spec; "
        "names = {m.removeprefix('infer_prof.').split('.')[0] for m in sys.modules}; "
        "print(sorted(names & {'engine', 'profiler', 'torch', 'reports'}))"
    )
    root = Path(__file__).resolve().parents[2]
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "[]"
