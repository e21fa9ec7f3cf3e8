"""A run that asked for C twins the library could not load says so first, and no A/B command calls it native."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from infer_prof.errors import BudgetError, CompareError, NativeUnavailableError
from infer_prof.native_paths import loader
from infer_prof.profiler.rundir.native import missing_native
from infer_prof.profiler.rundir.results import read_result
from tests.support.run_dirs import make_run_dir

# How the suite makes the C library unloadable: point the loader at a file that is not there.
UNLOADABLE = {loader.LIBRARY_PATH_VARIABLE: "/nonexistent/_native.so"}


def _fallback_run(path: Path, requested: list[str]) -> Path:
    """A recorded run that asked for `requested` natively and ran every component in Python."""
    make_run_dir(path, seed=3, n_requests=30, n_steps=60)
    result_file = path / "result.json"
    data = json.loads(result_file.read_text())
    data["config"]["native_requested"], data["config"]["native"] = requested, []
    result_file.write_text(json.dumps(data))
    return path


@pytest.fixture
def unloadable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in UNLOADABLE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(loader, "_module", None)
    monkeypatch.setattr(loader, "_failure", None)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **UNLOADABLE}
    return subprocess.run(
        [sys.executable, "-m", "infer_prof.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr and lines[-1].startswith("infer-prof: error:"), result.stderr
    for needle in needles:
        assert needle in lines[-1], lines[-1]


def test_the_headline_names_the_twins_that_did_not_load(tmp_path: Path) -> None:
    from infer_prof.reports.run.html import render_html
    from infer_prof.reports.run.summary import headline
    from infer_prof.reports.run.terminal import render_summary
    from infer_prof.reports.rundata import prepare

    run = _fallback_run(tmp_path / "run", ["kv_alloc", "sampler"])
    result = read_result(run)
    assert missing_native(result.config) == ["kv_alloc", "sampler"]
    assert headline(result).startswith(
        "Native kv_alloc, sampler requested but not loaded: the Python twin ran"
    )
    console = Console(record=True, width=200)
    render_summary(result, console)
    assert (
        console.export_text().splitlines()[0].startswith("Native kv_alloc, sampler requested but not loaded")
    )
    assert "Native kv_alloc, sampler requested but not loaded" in render_html(prepare(run))


def test_a_run_that_got_its_twins_says_nothing_of_it(tmp_path: Path) -> None:
    from infer_prof.reports.run.summary import headline

    run = make_run_dir(tmp_path / "run", seed=3, n_requests=30, n_steps=60)
    assert "not loaded" not in headline(read_result(run))


def test_compare_and_budget_refuse_a_python_run_called_native(tmp_path: Path) -> None:
    from infer_prof.profiler.budget.check import check_budget
    from infer_prof.profiler.budget.spec import load_budget
    from infer_prof.reports.compare.analysis import compare_runs

    fallback = _fallback_run(tmp_path / "fallback", ["sampler"])
    good = make_run_dir(tmp_path / "good", seed=4, n_requests=30, n_steps=60)
    with pytest.raises(CompareError, match="asked for --native sampler but its C twin did not load"):
        compare_runs([good], [fallback])
    budget_file = tmp_path / "budget.toml"
    budget_file.write_text('[[budget]]\nmetric = "metrics.completed"\nmin = 1\nlevel = "error"\n')
    with pytest.raises(BudgetError, match="native_paths/build.py"):
        check_budget(load_budget(budget_file), [good], [fallback])
    _one_line_error(
        _cli("compare", str(good), str(fallback), "--out", str(tmp_path / "cmp")),
        "fallback",
        "--native sampler",
    )
    _one_line_error(_cli("budget", "check", str(budget_file), "--run", str(fallback)), "--native sampler")


def test_verify_refuses_when_the_library_cannot_load() -> None:
    _one_line_error(
        _cli("run", "-m", "synthetic:tiny", "--verify", "--native", "sampler"),
        "--verify",
        "sampler",
        "/nonexistent/_native.so",
    )
    _one_line_error(
        _cli("run", "-m", "synthetic:tiny", "--verify"), "--verify runs each C twin", "/nonexistent"
    )


def test_compare_repeat_refuses_before_its_first_run() -> None:
    _one_line_error(
        _cli("compare", "--repeat", "1", "-m", "synthetic:tiny", "--after-native", "sampler"),
        "--after-native sampler",
        "/nonexistent",
    )


def test_a_budget_run_with_unloadable_twins_is_refused_before_it_runs(
    tmp_path: Path, unloadable: None
) -> None:
    from infer_prof.cli.budget import make_run_fn

    run_fn = make_run_fn(tmp_path, Console(stderr=True))
    with pytest.raises(NativeUnavailableError, match="budget: the C twin of sampler cannot be loaded"):
        run_fn({"scenario": "chat", "model": "synthetic:tiny", "native": ["sampler"]})
    assert not any(tmp_path.iterdir())  # nothing ran


def test_a_run_whose_twins_fall_back_records_and_shows_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    completed = _cli(
        "run",
        "-m",
        "synthetic:tiny",
        "-s",
        "chat",
        "-r",
        "3",
        "--native",
        "sampler",
        "--profile",
        "off",
        "--no-report",
        "--out",
        str(out),
    )
    assert completed.returncode == 0, completed.stderr
    config = read_result(out).config
    assert config["native_requested"] == ["sampler"] and config["native"] == []
    # The terminal wraps the summary's lines where it likes (a busy machine's longer first sentence moved the
    # break into this one): read the words, not the lines.
    assert "Native sampler requested but not loaded" in " ".join(completed.stdout.split())
