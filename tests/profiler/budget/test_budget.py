"""Budget files, budget checks (absolute, in-run ratio, noise-aware baseline) and their JUnit/BMF outputs."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from infer_prof.cli.budget import render_budget_report
from infer_prof.profiler.budget.check import (
    COUNTING_PROFILE,
    check_budget,
    check_budget_with_runner,
    expand_run_dirs,
    record_runs,
)
from infer_prof.profiler.budget.output import bmf_document, write_bmf, write_junit
from infer_prof.profiler.budget.spec import ALIASES, BudgetError, load_budget, parse_budget
from infer_prof.profiler.rundir.results import read_result
from tests.support.run_dirs import make_run_dir

ROOT = Path(__file__).resolve().parents[3]


def write_budget(tmp_path: Path, text: str, name: str = "budget.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def patch_result(run_dir: Path, **sections: dict[str, Any]) -> Path:
    """Merge keys into sections of a fabricated run's result.json (e.g. counters, config)."""
    path = run_dir / "result.json"
    data = json.loads(path.read_text())
    for section, values in sections.items():
        data[section] = {**(data.get(section) or {}), **values}
    path.write_text(json.dumps(data))
    return run_dir


def rendered(report) -> str:  # type: ignore[no-untyped-def]
    buffer = StringIO()
    render_budget_report(report, Console(file=buffer, width=240, color_system=None))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("runs")
    return {
        "run": make_run_dir(base / "run", seed=1),
        "baseline": make_run_dir(base / "baseline", seed=100),
        "slow": make_run_dir(base / "slow", seed=1, throughput_scale=0.8),
    }


# ---- the file format ------------------------------------------------------------------------------


def test_load_budget_reads_run_options_and_resolves_metrics(tmp_path: Path) -> None:
    path = write_budget(
        tmp_path,
        """
scenario = "chat"
model = "synthetic:tiny"
requests = 64
repeats = 3
native = ["sampler"]
[baseline]
native = []

[[budget]]
metric = "metrics.ttft_ms.p99"
max = 800
[[budget]]
metric = "interpreter_share"
max = 0.30
level = "warn"
aggregate = "max"
[[budget]]
name = "throughput vs baseline"
metric = "throughput"
min_ratio = 0.95
[[budget]]
metric = "native_speedup.sampler"
min = 10
[[budget]]
name = "sampler native vs python"
ratio = ["sampler_share", "scheduler_share"]
max = 5
[[budget]]
metric = "python_calls_per_token"
max = 500
""",
    )
    budget = load_budget(path)
    assert (budget.scenario, budget.model, budget.requests, budget.repeats) == (
        "chat",
        "synthetic:tiny",
        64,
        3,
    )
    assert budget.run_overrides() == {
        "scenario": "chat",
        "model": "synthetic:tiny",
        "requests": 64,
        "native": ["sampler"],
    }
    assert budget.baseline == {"native": []}
    ttft, share, throughput, speedup, ratio, calls = budget.assertions
    assert (
        ttft.paths == ("metrics.ttft_ms.p99",)
        and ttft.max == 800
        and ttft.level == "error"
        and ttft.line == 10
    )
    assert share.paths == ("breakdown.methods.spans.categories.interpreter",) and share.aggregate == "max"
    assert throughput.name == "throughput vs baseline" and throughput.needs_baseline
    assert speedup.paths == ("verdict.predictions.sampler.native_speedup",)
    assert ratio.is_ratio and ratio.paths[1] == "breakdown.methods.spans.components.scheduler"
    assert calls.is_counter and calls.paths == ("counters.python_calls_per_token",)
    assert budget.needs_counters and budget.needs_timed_runs


def test_a_budgets_threads_reach_its_runs_and_its_baseline(tmp_path: Path) -> None:
    """threads fixes torch's thread count (the governor otherwise moves it with the load); a baseline may set its own."""
    text = 'scenario = "chat"\nthreads = 1\n[baseline]\nthreads = 2\n[[budget]]\nmetric = "throughput"\nmin_ratio = 1\n'
    budget = load_budget(write_budget(tmp_path, text))
    assert budget.threads == 1 and budget.run_overrides() == {"scenario": "chat", "threads": 1}
    assert budget.baseline == {"threads": 2}
    assert load_budget(write_budget(tmp_path, text.replace("threads = 1\n", ""))).run_overrides() == {
        "scenario": "chat"
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[budget]]\nmetric = "throughput"\nmin = = 3\n', r"not valid TOML.*line 3"),
        (
            'scenaro = "chat"\n[[budget]]\nmetric = "throughput"\nmin = 1\n',
            r"budget.toml:1: unknown key 'scenaro'.*did you mean 'scenario'.*allowed keys: name",
        ),
        (
            '[[budget]]\nmetric = "throughput"\nmin = 1\n\n[[budget]]\nmetric = "p99_ttft_ms"\nmaximum = 3\n',
            r"budget.toml:7: unknown key 'maximum' in \[\[budget\]\] #2.*allowed keys",
        ),
        (
            '[[budget]]\nmetric = "throughput"\nmin = 1\nlevel = "fatal"\n',
            r"budget.toml:4: .*level = 'fatal' is unknown; use one of error, warn",
        ),
        (
            '[[budget]]\nmetric = "p99_ttft"\nmax = 1\n',
            r"budget.toml:1: .*metric 'p99_ttft' is unknown; did you mean p99_ttft_ms",
        ),
        (
            '[[budget]]\nmetric = "metrix.ttft_ms.p99"\nmax = 1\n',
            r"metric 'metrix.ttft_ms.p99' is unknown.*metrics\.",
        ),
        ("[[budget]]\nmax = 1\n", r"budget.toml:1: \[\[budget\]\] #1 has no `metric`"),
        ('[[budget]]\nmetric = "throughput"\n', r"has no bound; add min, max, min_ratio or max_ratio"),
        ('[[budget]]\nmetric = "throughput"\nmin = 5\nmax = 1\n', r"min = 5 is above max = 1"),
        ('[[budget]]\nratio = ["throughput"]\nmin = 1\n', r"`ratio` must be two metric names"),
        (
            '[[budget]]\nmetric = "throughput"\nmin = "fast"\n',
            r"budget.toml:3: .*`min` must be a finite number",
        ),
        (
            'repeats = 0\n[[budget]]\nmetric = "throughput"\nmin = 1\n',
            r"budget.toml:1: repeats = 0; use an integer in \[1, 100\]",
        ),
        ('scenario = "chat"\n', r"no \[\[budget\]\] entries"),
        (
            'threads = 0\n[[budget]]\nmetric = "throughput"\nmin = 1\n',
            r"budget.toml:1: threads = 0; use an integer in \[1, 1024\] \(torch's threads",
        ),
        (
            '[baseline]\nnative = []\nmodle = "x"\n[[budget]]\nmetric = "throughput"\nmin_ratio = 1\n',
            r"budget.toml:3: unknown key 'modle' in \[baseline\]",
        ),
    ],
)
def test_malformed_budgets_name_the_line_or_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(BudgetError, match=expected) as error:
        load_budget(write_budget(tmp_path, text))
    assert error.value.exit_code == 2


def test_missing_budget_file_is_a_budget_error(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match="cannot read"):
        load_budget(tmp_path / "nope.toml")


def test_every_alias_is_documented() -> None:
    docs = (ROOT / "docs" / "budgets.md").read_text(encoding="utf-8")
    missing = [alias for alias in ALIASES if f"`{alias}`" not in docs]
    assert not missing, f"document these aliases in docs/budgets.md: {missing}"


def test_the_projects_own_ci_budget_loads() -> None:
    budget = load_budget(ROOT / "budgets" / "ci.toml")
    assert budget.scenario and budget.assertions
    assert any(a.is_counter for a in budget.assertions)
    assert all(not a.needs_baseline for a in budget.assertions)  # CI has no recorded baseline


# ---- absolute and in-run checks -------------------------------------------------------------------


def test_a_passing_budget_exits_0(runs: dict[str, Path]) -> None:
    result = read_result(runs["run"])
    budget = parse_budget(f"""
[[budget]]
metric = "p99_ttft_ms"
max = {result.get("metrics.ttft_ms.p99") * 1.5}
[[budget]]
metric = "throughput"
min = {result.get("metrics.output_token_throughput") * 0.5}
[[budget]]
metric = "native_speedup.sampler"
min = 10
[[budget]]
ratio = ["native_speedup.sampler", "native_speedup.kv_alloc"]
min = 2
[[budget]]
metric = "python_calls_per_token"
max = 1000
""")
    report = check_budget(budget, [runs["run"]])
    assert report.exit_code == 0, rendered(report)
    assert [r.status for r in report.results] == ["PASS"] * 5
    assert report.results[3].measured == pytest.approx(14.0 / 6.0)
    assert "budget passed" in rendered(report)


def test_an_impossible_error_assertion_exits_1_and_names_value_and_bound(runs: dict[str, Path]) -> None:
    budget = parse_budget('[[budget]]\nname = "ttft stays tiny"\nmetric = "p99_ttft_ms"\nmax = 0.001\n')
    report = check_budget(budget, [runs["run"]])
    measured = read_result(runs["run"]).get("metrics.ttft_ms.p99")
    assert report.exit_code == 1
    (failed,) = report.failed_errors
    assert failed.name == "ttft stays tiny" and failed.measured == pytest.approx(measured)
    assert failed.bound == "<= 0.001" and "above max 0.001" in failed.reason
    text = rendered(report)
    assert "FAIL" in text and "ttft stays tiny" in text and f"{measured:.4g}" in text and "<= 0.001" in text
    assert "exit 1" in text


def test_a_warn_failure_exits_0_and_says_so(runs: dict[str, Path]) -> None:
    budget = parse_budget('[[budget]]\nmetric = "interpreter_share"\nmax = 0.0001\nlevel = "warn"\n')
    report = check_budget(budget, [runs["run"]])
    assert report.exit_code == 0 and len(report.failed_warnings) == 1
    assert report.results[0].status == "WARN"
    assert "passed with warnings" in rendered(report) and "WARN" in rendered(report)


def test_a_metric_missing_from_the_result_exits_2_with_suggestions(runs: dict[str, Path]) -> None:
    budget = parse_budget('[[budget]]\nmetric = "metrics.ttft_ms.p95"\nmax = 1\n')
    with pytest.raises(
        BudgetError, match=r"metrics.ttft_ms.p95 is not in .*did you mean metrics.ttft_ms.p9"
    ) as error:
        check_budget(budget, [runs["run"]])
    assert error.value.exit_code == 2
    with pytest.raises(
        BudgetError, match="native_speedup.tokenizer .*verdict.predictions.tokenizer.native_speedup"
    ):
        check_budget(
            parse_budget('[[budget]]\nmetric = "native_speedup.tokenizer"\nmin = 1\n'), [runs["run"]]
        )


def test_aggregation_over_repeats(tmp_path: Path) -> None:
    dirs = [
        patch_result(make_run_dir(tmp_path / f"r{i}", seed=i), counters={"torch_ops_per_step": value})
        for i, value in enumerate((10, 30, 20))
    ]
    for aggregate, expected in (("median", 20), ("mean", 20), ("min", 10), ("max", 30)):
        budget = parse_budget(
            f'[[budget]]\nmetric = "torch_ops_per_step"\nmax = 100\naggregate = "{aggregate}"\n'
        )
        (result,) = check_budget(budget, dirs).results
        assert result.measured == expected and result.values == [10, 30, 20]
    assert len(expand_run_dirs([tmp_path])) == 3  # a folder of runs stands for its runs


# ---- against a baseline ---------------------------------------------------------------------------

BASELINE_BUDGET = """
alpha = 0.01
[[budget]]
metric = "throughput"
min_ratio = 0.95
[[budget]]
metric = "p50_ttft_ms"
max_ratio = 1.05
[[budget]]
metric = "p50_tpot_ms"
max_ratio = 1.05
[[budget]]
metric = "metrics.itl_ms.p50"
max_ratio = 1.05
[[budget]]
metric = "metrics.e2e_ms.mean"
max_ratio = 1.05
"""


def test_same_distribution_runs_raise_no_false_alarm(tmp_path: Path, runs: dict[str, Path]) -> None:
    budget = parse_budget(BASELINE_BUDGET)
    for seed in range(10):
        candidate = make_run_dir(tmp_path / f"same-{seed}", seed=seed)
        report = check_budget(budget, [candidate], [runs["baseline"]])
        assert report.exit_code == 0, rendered(report)


def test_a_run_20_percent_slower_fails_the_baseline_budget(runs: dict[str, Path]) -> None:
    report = check_budget(
        parse_budget(BASELINE_BUDGET), [runs["slow"]], [runs["baseline"]], drift_guard=False
    )
    assert report.exit_code == 1
    throughput = report.results[0]
    assert not throughput.passed and throughput.ratio == pytest.approx(0.8, abs=0.05)
    assert throughput.test == "bootstrap" and throughput.interval[1] < 1.0  # type: ignore[index]
    assert "significant" in throughput.reason
    # TTFT hangs on queueing, so its single-run interval is wide; engine-speed metrics all catch it.
    failed = {r.name for r in report.failed_errors}
    assert {"throughput", "p50_tpot_ms", "metrics.itl_ms.p50", "metrics.e2e_ms.mean"} <= failed


def test_ratio_beyond_threshold_but_within_noise_is_not_a_regression(tmp_path: Path) -> None:
    # Per-run values that overlap: 5 vs 5 repeats let Mann-Whitney judge; the medians differ by 10%.
    def run(name: str, value: float) -> Path:
        return patch_result(
            make_run_dir(tmp_path / name, seed=len(name)), counters={}, metrics={"goodput": value}
        )

    baseline = [run(f"b{i}", v) for i, v in enumerate((10.0, 12.0, 9.0, 11.0, 13.0))]
    noisy = [run(f"c{i}", v) for i, v in enumerate((9.0, 11.5, 8.0, 10.0, 12.5))]
    budget = parse_budget('[[budget]]\nmetric = "goodput"\nmin_ratio = 0.95\n')
    (result,) = check_budget(budget, noisy, baseline).results
    assert result.ratio < 0.95 and result.passed and result.test == "mann-whitney"
    assert "within noise" in result.reason
    slower = [run(f"s{i}", v * 0.5) for i, v in enumerate((10.0, 12.0, 9.0, 11.0, 13.0))]
    (result,) = check_budget(budget, slower, baseline).results
    assert not result.passed and result.p_value < 0.01


def test_repeats_slower_by_20_percent_fail_via_mann_whitney(tmp_path: Path) -> None:
    baseline = [make_run_dir(tmp_path / f"b{i}", seed=60 + i) for i in range(5)]
    same = [make_run_dir(tmp_path / f"c{i}", seed=160 + i) for i in range(5)]
    slow = [make_run_dir(tmp_path / f"s{i}", seed=160 + i, throughput_scale=0.8) for i in range(5)]
    budget = parse_budget(BASELINE_BUDGET)
    assert check_budget(budget, same, baseline).exit_code == 0
    report = check_budget(budget, slow, baseline, drift_guard=False)  # the fixture slows the model too
    assert report.exit_code == 1 and report.results[0].test == "mann-whitney"
    # With the guard, the same slowdown reads as the machine changing: void, failed, never "significant".
    guarded = check_budget(budget, slow, baseline)
    assert (
        guarded.exit_code == 1 and guarded.results[0].test == "void" and "void" in guarded.results[0].reason
    )
    assert "significant" not in guarded.results[0].reason


def test_counters_against_a_baseline_are_exact(tmp_path: Path, runs: dict[str, Path]) -> None:
    candidate = patch_result(make_run_dir(tmp_path / "c", seed=1), counters={"python_calls_per_token": 431.0})
    baseline = patch_result(make_run_dir(tmp_path / "b", seed=2), counters={"python_calls_per_token": 400.0})
    budget = parse_budget('[[budget]]\nmetric = "python_calls_per_token"\nmax_ratio = 1.05\n')
    (result,) = check_budget(budget, [candidate], [baseline]).results
    assert not result.passed and result.test == "exact" and result.ratio == pytest.approx(1.0775)


def test_a_ratio_bound_without_a_baseline_is_skipped(runs: dict[str, Path]) -> None:
    report = check_budget(
        parse_budget('[[budget]]\nmetric = "throughput"\nmin_ratio = 0.95\n'), [runs["run"]]
    )
    assert report.exit_code == 0 and report.results[0].status == "SKIP"
    assert "no baseline" in report.results[0].reason


# ---- running the budget's own scenario ------------------------------------------------------------


def test_check_with_runner_interleaves_baseline_and_reads_counters_from_the_counting_run(
    tmp_path: Path,
) -> None:
    budget = parse_budget("""
scenario = "chat"
model = "synthetic:tiny"
repeats = 3
[baseline]
native = []
[[budget]]
metric = "throughput"
min_ratio = 0.5
[[budget]]
metric = "python_calls_per_token"
max = 500
""")
    calls: list[dict[str, Any]] = []

    def run_fn(overrides: dict[str, Any]) -> Path:
        calls.append(overrides)
        path = make_run_dir(tmp_path / f"run-{len(calls)}", seed=len(calls))
        counting = overrides.get("profile") == COUNTING_PROFILE
        # A counting run's timings are distorted: make it slow, so using it for throughput would fail.
        patch_result(
            path,
            config={"profile": overrides.get("profile", "default")},
            counters={"python_calls_per_token": 321.0} if counting else {},
            metrics={"output_token_throughput": 1e-6} if counting else {},
        )
        return path

    report = check_budget_with_runner(budget, run_fn)
    roles = ["B" if "native" in c else "C" for c in calls]
    assert roles == ["B", "C", "C", "B", "B", "C", "C", "B"]  # ABBA timed runs, then a counting run each
    assert [c.get("profile") for c in calls[-2:]] == [COUNTING_PROFILE, COUNTING_PROFILE]
    assert all(c["scenario"] == "chat" and c["model"] == "synthetic:tiny" for c in calls)
    assert report.exit_code == 0, rendered(report)
    assert report.results[1].measured == 321.0 and len(report.results[0].values) == 3
    assert len(record_runs(budget, run_fn)) == 4  # what `budget baseline` records: 3 timed + 1 counting


def test_runner_needs_a_scenario() -> None:
    with pytest.raises(BudgetError, match="no scenario"):
        check_budget_with_runner(
            parse_budget('[[budget]]\nmetric = "throughput"\nmin = 1\n'), lambda o: Path(".")
        )


# ---- outputs --------------------------------------------------------------------------------------

MIXED_BUDGET = """
name = "mixed"
[[budget]]
name = "fast enough"
metric = "throughput"
min = 0.0001
[[budget]]
name = "impossible"
metric = "p99_ttft_ms"
max = 0.001
[[budget]]
name = "soft"
metric = "interpreter_share"
max = 0.0001
level = "warn"
[[budget]]
name = "vs baseline"
metric = "throughput"
min_ratio = 0.9
"""


def test_junit_is_valid_xml_with_the_right_counts(tmp_path: Path, runs: dict[str, Path]) -> None:
    report = check_budget(parse_budget(MIXED_BUDGET), [runs["run"]])
    path = write_junit(report, tmp_path / "out" / "budget.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    for element in (root, suite):
        assert element.get("tests") == "4" and element.get("failures") == "1"
        assert element.get("errors") == "0" and element.get("skipped") == "2"
        assert float(element.get("time")) >= 0  # type: ignore[arg-type]
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"fast enough", "impossible", "soft", "vs baseline"}
    assert all(case.get("classname") and case.get("time") is not None for case in cases.values())
    failure = cases["impossible"].find("failure")
    assert failure is not None and failure.get("type") and "<= 0.001" in failure.get("message", "")
    assert cases["soft"].find("skipped") is not None and "warning" in cases["soft"].find("skipped").get(
        "message"
    )
    assert cases["fast enough"].find("failure") is None and cases["fast enough"].find("skipped") is None
    assert "measured:" in cases["fast enough"].findtext("system-out", "")


def test_bmf_from_a_report_and_from_runs(tmp_path: Path, runs: dict[str, Path]) -> None:
    repeats = [make_run_dir(tmp_path / f"r{i}", seed=i) for i in range(3)]
    report = check_budget(parse_budget(MIXED_BUDGET), repeats)
    document = json.loads(write_bmf(report, tmp_path / "bmf.json").read_text())
    (benchmark,) = document
    assert benchmark == "infer-prof/chat-poisson/synthetic:tiny"
    measures = document[benchmark]
    assert set(measures) == {"throughput", "p99-ttft-ms", "interpreter-share"}
    throughput = measures["throughput"]
    assert throughput["lower_value"] <= throughput["value"] <= throughput["upper_value"]
    for measure in measures.values():
        assert all(isinstance(value, float) for value in measure.values())
        assert set(measure) <= {"value", "lower_value", "upper_value"}
    assert all(re.fullmatch(r"[a-z0-9-]{1,64}", slug) for slug in measures)

    from_runs = bmf_document([runs["run"]])
    (measures,) = from_runs.values()
    assert {"throughput", "p99-ttft-ms", "python-calls-per-token"} <= set(measures)
    assert set(measures["throughput"]) == {"value"}  # one run: no range
