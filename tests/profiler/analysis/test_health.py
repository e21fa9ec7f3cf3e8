"""The run's health: the probe reads /proc, the analysis names a starved engine thread or a saturated engine, and
budgets, compare and selftest treat such a run as void."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from infer_prof.errors import CompareError
from infer_prof.profiler.analysis.health import (
    CONTENDED_BELOW,
    SATURATED_DELIVERED_BELOW,
    health_section,
    latency_growth,
    offered_rate,
)
from infer_prof.profiler.collectors.health import (
    HealthProbe,
    our_running_threads,
    read_cpu_times,
    read_procs_running,
)
from infer_prof.profiler.rundir.health import VOID_BUSY, VOID_SATURATED, void_reason
from tests.support.run_dirs import make_run_dir

OPEN = {"load": {"mode": "open-loop", "rate": 2.0}}
CLOSED = {"load": {"mode": "closed-loop", "rate": None, "clients": 8}}


def _metrics(throughput: float, queue_ms: float = 1.0, e2e_ms: float = 100.0) -> dict:
    return {"request_throughput": throughput, "queue_ms": {"mean": queue_ms}, "e2e_ms": {"mean": e2e_ms}}


def _probe(cpu_s: float, wait_s: float, others: float = 0.0) -> dict:
    return {
        "wall_s": 10.0,
        "cpus": 2,
        "engine_cpu_s": cpu_s,
        "engine_wait_s": wait_s,
        "others_cores": others,
        "steal_fraction": 0.0,
        "others_runnable_mean": 1.5,
    }


def test_a_starved_engine_thread_is_named_first_with_its_figures():
    health = health_section(_probe(cpu_s=4.0, wait_s=6.0, others=1.8), _metrics(2.0), OPEN, offered_rps=2.0)
    assert health["contended"] and health["void"] == VOID_BUSY
    assert health["engine_thread"]["core_share"] == pytest.approx(0.4)
    assert health["lines"][0].startswith("The machine was busy: the engine thread got 40% of a core")
    assert "1.8 of 2 cores" in health["lines"][0]
    assert "40% of a core" in void_reason(health)


def test_a_quiet_run_has_no_line():
    health = health_section(_probe(cpu_s=9.5, wait_s=0.3), _metrics(1.95), OPEN, offered_rps=2.0)
    assert not health["contended"] and not health["saturated"]
    assert health["lines"] == [] and void_reason(health) is None


def test_an_idle_engine_thread_is_not_judged():
    # 0.1 s of demand in a long run: a few scheduler ticks say nothing about contention.
    health = health_section(_probe(cpu_s=0.05, wait_s=0.05), _metrics(0.5), OPEN, offered_rps=0.5)
    assert health["engine_thread"]["core_share"] is None and not health["contended"]


def test_an_open_loop_far_above_capacity_is_saturated():
    growth = latency_growth([100.0 * (index + 1) for index in range(30)])
    assert growth is not None and growth > 3
    health = health_section(
        _probe(cpu_s=9.9, wait_s=0.1),
        _metrics(0.08, queue_ms=10.0, e2e_ms=30_000.0),
        OPEN,
        offered_rps=2.0,
        growth=growth,
    )
    assert health["saturated"] and not health["contended"] and health["void"] == VOID_SATURATED
    assert health["load"]["delivered_ratio"] == pytest.approx(0.04)
    assert (
        "saturated" in health["lines"][0] and "0.08 req/s of the 2 req/s offered (4%)" in health["lines"][0]
    )


def test_keeping_up_is_not_saturated_even_with_a_growing_backlog_measure():
    # Delivered at the offered rate: latencies may vary, the engine kept up.
    health = health_section(_probe(cpu_s=9.9, wait_s=0.1), _metrics(1.9), OPEN, offered_rps=2.0, growth=3.0)
    assert health["load"]["delivered_ratio"] > SATURATED_DELIVERED_BELOW and not health["saturated"]
    # A short run's drain lowers the delivered rate somewhat; without a backlog that is not saturation.
    drained = health_section(_probe(cpu_s=9.9, wait_s=0.1), _metrics(1.4), OPEN, offered_rps=2.0, growth=1.1)
    assert not drained["saturated"]


def test_a_flat_latency_run_far_below_its_offered_rate_is_saturated():
    # Every request arrived before the first finished: latencies are flat, the rate tells.
    health = health_section(
        _probe(cpu_s=9.9, wait_s=0.1), _metrics(0.11), OPEN, offered_rps=1.73, growth=0.98
    )
    assert health["saturated"] and "(6%)" in health["lines"][0]


def test_a_queued_closed_loop_is_at_capacity_not_void():
    health = health_section(
        _probe(cpu_s=9.9, wait_s=0.1), _metrics(3.0, queue_ms=80.0, e2e_ms=100.0), CLOSED, offered_rps=None
    )
    assert health["at_capacity"] and not health["saturated"] and health["void"] is None


def test_offered_rate_is_the_measured_arrivals_span():
    assert offered_rate(OPEN, 11, 5.0) == pytest.approx(2.0)
    assert offered_rate(CLOSED, 11, 5.0) is None
    assert offered_rate({"load": {"mode": "open-loop", "rate": "inf"}}, 11, 0.0) is None


def test_latency_growth_needs_requests_and_is_flat_for_a_steady_engine():
    assert latency_growth([1.0] * 5) is None
    assert latency_growth([100.0, 120.0, 90.0] * 4) == pytest.approx(1.0, abs=0.35)


def test_proc_readers_parse_a_fake_proc(tmp_path: Path):
    (tmp_path / "stat").write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\nprocs_running 5\n")
    times = read_cpu_times(tmp_path)
    assert times == {"busy": 155, "idle": 810, "steal": 35, "total": 1000}
    assert read_procs_running(tmp_path) == 5
    task = tmp_path / "42" / "task"
    for tid, state in ((1, "R"), (2, "S"), (3, "R")):
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "stat").write_text(f"{tid} (a (weird) name) {state} 1 2 3\n")
    assert our_running_threads(tmp_path, pid=42) == 2


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_the_probe_sees_a_busy_thread_run():
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=spin, name="health-test-engine", daemon=True)
    thread.start()
    probe = HealthProbe("health-test-engine", interval_s=0.05).start()
    started = time.monotonic()
    # At least 0.6 s, and until the sampler has read three times: on a loaded machine the sampler waits for
    # the GIL behind the spinner at every /proc read, so a fixed window can end with fewer samples.
    while time.monotonic() - started < 0.6 or (probe.samples_taken < 3 and time.monotonic() - started < 20):
        stop.wait(0.05)
    probe.stop()
    stop.set()
    thread.join()
    figures = probe.result()
    if figures["engine_cpu_s"] is None:
        pytest.skip("this kernel keeps no per-thread schedstat")
    # The spinning thread ran or waited to run for (nearly) the whole window.
    assert figures["engine_cpu_s"] + figures["engine_wait_s"] > 0.3
    assert figures["others_runnable_samples"] >= 3


def _with_health(run_dir: Path, health: dict | None = None, **config) -> Path:
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    data["health"] = health
    data["config"].update(config)
    path.write_text(json.dumps(data))
    return run_dir


BUSY = health_section(_probe(cpu_s=3.0, wait_s=7.0, others=1.9), _metrics(2.0), OPEN, offered_rps=2.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("health")
    return {
        name: make_run_dir(root / name, seed=seed, n_requests=60, n_steps=200)
        for name, seed in (("a", 1), ("b", 2), ("busy", 3), ("other", 4))
    }


def test_compare_calls_a_busy_run_void(runs):
    from infer_prof.reports.compare.analysis import VOID, compare_runs
    from infer_prof.reports.compare.summary import headline

    _with_health(runs["busy"], BUSY)
    result = compare_runs([runs["a"]], [runs["busy"]], n_boot=100, drift_guard=False)
    assert result.void and "the machine was busy" in result.void
    assert headline(result).startswith("Void:") and "30% of a core" in headline(result)
    assert all(metric.verdict in (VOID, "not comparable") for metric in result.metrics)


def test_compare_refuses_unlike_runs_unless_allowed(runs):
    from infer_prof.reports.compare.analysis import compare_runs
    from infer_prof.reports.compare.summary import headline

    _with_health(runs["other"], None, scenario="concurrency-30")
    with pytest.raises(CompareError, match="scenario chat-poisson vs concurrency-30.*--allow-unlike"):
        compare_runs([runs["a"]], [runs["other"]], n_boot=100)
    result = compare_runs([runs["a"]], [runs["other"]], n_boot=100, allow_unlike=True, drift_guard=False)
    assert headline(result).startswith(
        "Unlike runs (scenario chat-poisson vs concurrency-30), compared on purpose."
    )


def test_compare_requests_per_second_is_the_runs_own_headline(runs):
    from infer_prof.profiler.rundir.results import read_result
    from infer_prof.reports.compare.analysis import compare_runs

    result = compare_runs([runs["a"]], [runs["b"]], n_boot=100, drift_guard=False)
    metric = result.metric("request_throughput")
    for value, run in ((metric.before, runs["a"]), (metric.after, runs["b"])):
        headline_value = read_result(run).metrics["request_throughput"]
        assert value == pytest.approx(headline_value, rel=0.05)


def test_compare_never_prints_nan_for_a_zero_goodput(runs, tmp_path):
    import io

    from rich.console import Console

    from infer_prof.reports.compare.analysis import compare_runs
    from infer_prof.reports.compare.summary import metrics_table
    from infer_prof.reports.compare.terminal import render_comparison

    zero = Path(tmp_path / "zero")
    make_run_dir(zero, seed=5, n_requests=60, n_steps=200)
    data = json.loads((zero / "result.json").read_text())
    data["metrics"]["goodput"] = 0.0
    (zero / "result.json").write_text(json.dumps(data))
    result = compare_runs([zero], [runs["b"]], n_boot=100, drift_guard=False)
    goodput = result.metric("goodput")
    assert goodput.ratio is None and goodput.why
    buffer = io.StringIO()
    render_comparison(result, Console(file=buffer, width=120))
    text = buffer.getvalue() + json.dumps([row for row in metrics_table(result).rows])
    assert not re.search(r"\bnan", text, re.IGNORECASE) and "n/a (0 before" in text


def test_a_budget_on_a_busy_run_is_void_not_a_pass(runs, tmp_path):
    from infer_prof.profiler.budget.check import check_budget
    from infer_prof.profiler.budget.spec import parse_budget

    budget = parse_budget('[[budget]]\nname = "tput"\nmetric = "metrics.request_throughput"\nmin = 0.0\n')
    report = check_budget(budget, [runs["busy"]])
    assert not report.results[0].passed and report.results[0].test == "void"
    assert "the machine was busy" in report.results[0].reason
    assert check_budget(budget, [runs["a"]]).results[0].passed


def test_selftest_says_void_when_the_machine_was_busy():
    from infer_prof.profiler.checks.selftest import CASES, CaseResult

    case = CASES[0]
    wrong_on_busy = CaseResult(case, "kernel", 0.5, "model_kernels", 1.0, [], busy=void_reason(BUSY))
    assert wrong_on_busy.void and VOID_BUSY in wrong_on_busy.void
    right_on_busy = CaseResult(case, case.expected, 0.5, case.component, 1.0, [], busy=void_reason(BUSY))
    assert right_on_busy.ok and right_on_busy.void is None
    assert CaseResult(case, "kernel", 0.5, "model_kernels", 1.0, []).void is None
    assert CONTENDED_BELOW < 1


def test_no_prediction_and_no_control_path_for_twins_that_were_on():
    from infer_prof.profiler.analysis.diagnose import diagnose
    from infer_prof.profiler.rundir.twins import expand, twins_sentence

    split = {
        "categories": {
            "interpreter": 0.5,
            "kernel": 0.4,
            "idle": 0.1,
            "lock": 0.0,
            "allocation": 0.0,
            "other": 0.0,
        },
        "components": {
            "sampler": 0.30,
            "scheduler": 0.05,
            "kv_alloc": 0.01,
            "prepare": 0.02,
            "model_glue": 0.40,
            "model_kernels": 0.1,
            "detokenizer": 0.03,
        },
    }
    breakdown = {"methods": {"spans": split, "samples": None}}
    speedups = {"sampler": 50.0, "scheduler": 5.0, "kv_alloc": 3.0, "prepare": 4.0}
    off = diagnose(breakdown, native_speedups=speedups, measured_gains=None, collectors={})
    assert off["predictions"]["sampler"]["predicted_gain"] > 0.25
    assert off["largest_control_path"]["name"] == "sampler"  # model_glue, larger, is no control path
    on = diagnose(
        breakdown,
        native_speedups=speedups,
        measured_gains=None,
        collectors={},
        twins_on=expand(["core", "sampler"]),
    )
    for name in ("sampler", "scheduler", "kv_alloc", "prepare"):
        assert on["predictions"][name]["predicted_gain"] is None and on["predictions"][name]["twin_on"]
    assert not any("A native" in reason for reason in on["reasons"])
    assert on["largest_control_path"]["name"] == "detokenizer"
    assert twins_sentence({"native": ["core", "sampler"]}).startswith(
        "C twins on in this run: scheduler, sampler, kv_alloc, prepare"
    )
    assert twins_sentence({"native": []}) is None


def test_predictions_on_a_busy_machine_are_void():
    from infer_prof.profiler.analysis.diagnose import diagnose

    split = {"categories": {"interpreter": 0.5, "kernel": 0.5, "idle": 0.0}, "components": {"sampler": 0.4}}
    verdict = diagnose(
        {"methods": {"spans": split}},
        native_speedups={"sampler": 20.0},
        measured_gains=None,
        collectors={},
        health=BUSY,
    )
    assert "the machine was busy" in verdict["predictions"]["sampler"]["void"]
    assert any(reason.startswith("The predictions are void") for reason in verdict["reasons"])
    quiet = diagnose(
        {"methods": {"spans": split}}, native_speedups={"sampler": 20.0}, measured_gains=None, collectors={}
    )
    assert "void" not in quiet["predictions"]["sampler"]
