"""run_session end to end on synthetic:tiny: the documented result sections, the tables, partial runs, every scenario."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from infer_prof.engine.loader import LoadedModel
from infer_prof.profiler.rundir.results import (
    CATEGORIES,
    COMPONENTS,
    LATENCY_METRICS,
    SCHEMA_VERSION,
    read_result,
    read_run,
)
from infer_prof.profiler.session.builder import load_for_options
from infer_prof.profiler.session.options import EngineOptions
from infer_prof.profiler.session.session import SessionHooks, SessionOutcome, run_session
from infer_prof.scenarios.spec import builtin_names, load_scenario

TINY = EngineOptions(model="synthetic:tiny")
PHASE_COLUMNS = ("queue_ms", "scheduler_ms", "kv_alloc_ms", "model_ms", "sampler_ms", "detokenizer_ms")


@pytest.fixture(scope="module")
def tiny() -> LoadedModel:
    return load_for_options(TINY)


@pytest.fixture(scope="module")
def chat_run(tiny: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> SessionOutcome:
    out = tmp_path_factory.mktemp("chat") / "run"
    return run_session(TINY, load_scenario("chat").with_overrides(num_requests=6), out, loaded=tiny)


def test_result_json_has_the_documented_sections(chat_run: SessionOutcome) -> None:
    data = json.loads((chat_run.run_dir / "result.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and next(iter(data)) == "schema_version"
    for section in (
        "config",
        "environment",
        "scenario",
        "metrics",
        "engine",
        "breakdown",
        "verdict",
        "overhead",
        "collectors",
        "files",
    ):
        assert data[section], section
    config = data["config"]
    assert (
        config["model"] == "synthetic:tiny"
        and config["scenario"] == "chat"
        and config["profile"] == "default"
    )
    assert config["injections"] == [] and config["verify"] is False  # planted bottlenecks only when named
    assert data["scenario"]["name"] == "chat" and data["partial"] is False


def test_metrics_have_every_documented_key(chat_run: SessionOutcome) -> None:
    metrics = read_result(chat_run.run_dir).metrics
    for key in (
        "completed",
        "failed",
        "request_throughput",
        "output_token_throughput",
        "goodput",
        "duration_s",
    ):
        assert metrics[key] is not None, key
    assert metrics["completed"] == 6 and metrics["failed"] == 0
    for name in LATENCY_METRICS:
        assert set(metrics[name]) >= {"mean", "p50", "p90", "p99"}, name
        assert metrics[name]["p50"] is not None and metrics[name]["p50"] >= 0, name


def test_breakdown_verdict_and_overhead(chat_run: SessionOutcome) -> None:
    result = read_result(chat_run.run_dir)
    spans = result.breakdown["methods"]["spans"]
    assert set(spans["categories"]) == set(CATEGORIES) and set(spans["components"]) == set(COMPONENTS)
    assert sum(spans["categories"].values()) == pytest.approx(
        1.0, abs=1e-6
    )  # spans split all of the wall time
    verdict = result.verdict
    assert verdict["category"] in CATEGORIES and verdict["reasons"]
    assert isinstance(verdict["share"], float) and 0 < verdict["share"] <= 1
    assert "component" in verdict
    assert set(verdict["predictions"]) == {"scheduler", "sampler", "kv_alloc", "prepare"}
    assert {"share", "native_speedup", "predicted_gain", "measured_gain"} <= set(
        verdict["predictions"]["sampler"]
    )
    overhead = result.overhead
    assert 0 < overhead["throughput_ratio"] <= 1 and "spans" in overhead["collectors"]


def test_tables_match_the_result(chat_run: SessionOutcome) -> None:
    run = read_run(chat_run.run_dir)
    assert len(run.requests) == run.result.metrics["completed"] + run.result.scenario["warmup_requests"]
    assert len(run.requests[~run.requests["warmup"]]) == run.result.metrics["completed"]
    assert set(PHASE_COLUMNS) <= set(run.steps.columns)
    assert len(run.steps) == run.result.engine["steps"]
    trims = run.result.engine["heap_trims"]  # the cost of giving freed memory back travels with the run
    assert trims["interval_s"] > 0 and trims["trims"] >= 0 and trims["total_ms"] >= 0
    assert (run.steps["sampler_ms"] >= 0).all() and run.steps["model_ms"].sum() > 0


def test_a_stop_mid_run_writes_a_valid_partial_result(tiny: LoadedModel, tmp_path: Path) -> None:
    stop = threading.Event()
    # 40 requests at 2 req/s would take ~20 s: stop once two are done.
    hooks = SessionHooks(on_request_done=lambda done, tokens: stop.set() if done >= 2 else None)
    spec = load_scenario("chat").with_overrides(num_requests=40)
    outcome = run_session(TINY, spec, tmp_path / "run", loaded=tiny, stop_event=stop, hooks=hooks)
    result = read_result(tmp_path / "run")
    assert outcome.interrupted and result.partial and result.partial_reason
    assert 2 <= result.metrics["completed"] < 40
    assert result.verdict["category"] in CATEGORIES


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_scenario_runs_end_to_end(name: str, tiny: LoadedModel, tmp_path: Path) -> None:
    # Short versions: lengths given as fractions of the context (long-context) shrink with the tiny model.
    spec = load_scenario(name).with_overrides(num_requests=3)
    run_session(TINY, spec, tmp_path / name, loaded=tiny, profile="off" if name != "chat" else "default")
    result = read_result(tmp_path / name)
    assert result.metrics["completed"] == 3 and result.metrics["failed"] == 0 and not result.partial
    assert not pd.read_csv(tmp_path / name / "requests.csv").empty
