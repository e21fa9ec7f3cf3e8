"""The selftest's planted bottlenecks (quick versions) are each named correctly; the injections behave as planted."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from rich.console import Console

from infer_prof.cli.selftest import render_selftest
from infer_prof.profiler.checks import selftest
from infer_prof.profiler.checks.injections import ContendedSampler, apply_injections, close_injections
from infer_prof.profiler.checks.selftest import CASES, CaseResult, run_case, run_selftest, select_cases
from infer_prof.profiler.rundir.results import read_result
from infer_prof.profiler.session.options import OptionError
from infer_prof.profiler.session.runner import ModelCache


@pytest.fixture(scope="module")
def models() -> ModelCache:
    return ModelCache()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_planted_bottleneck_is_named(case: selftest.Case, models: ModelCache, tmp_path: Path) -> None:
    result = run_case(case, quick=True, out_dir=tmp_path, models=models)
    assert result.error is None
    assert (result.category, result.component) == (case.expected, case.component), result
    assert result.share is not None and result.share > 0.3  # planted to dominate, not to scrape a plurality
    assert result.injections == sorted(case.injections or {})  # recorded in config.injections
    if case.name == "allocation":
        # GC pauses, triggered inside the sampler span, are allocation time of the sampler component.
        spans = read_result(tmp_path / case.name).breakdown["methods"]["spans"]
        by_component = spans["allocation_by_component"]
        assert max(by_component, key=by_component.get) == "sampler"
    if case.name == "untraced-lock":
        # Found by the samples alone: the spans, which see only traced locks, put the wait elsewhere and say so.
        spans = read_result(tmp_path / case.name).breakdown["methods"]["spans"]
        assert spans["locks_seen"] == "traced" and spans["categories"]["lock"] < result.share / 2


def test_select_cases_by_name_and_rejects_unknown_ones() -> None:
    assert [case.name for case in select_cases("idle, lock")] == ["idle", "lock"]
    assert len(select_cases(None)) == len(CASES)
    with pytest.raises(OptionError, match="unknown case 'nope'"):
        select_cases("lock,nope")


def test_a_misnamed_case_makes_the_exit_code_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def fake_run(case, *, quick, out_dir, models=None):  # type: ignore[no-untyped-def]
        category = "interpreter" if case.name == "lock" else case.expected
        return CaseResult(case, category, 0.5, case.component, 0.0, [])

    monkeypatch.setattr(selftest, "run_case", fake_run)
    quiet = Console(file=io.StringIO())
    for only, code in (("idle", 0), ("idle,lock", 1)):
        results = run_selftest(quick=True, only=only, out_dir=tmp_path)
        assert render_selftest(results, quick=True, out=quiet, err=quiet) == code


def test_selftest_out_keeps_each_cases_run_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from infer_prof.cli.main import app

    def fake_run(case, *, quick, out_dir, models=None):  # type: ignore[no-untyped-def]
        (out_dir / case.name).mkdir(parents=True)
        (out_dir / case.name / "result.json").write_text("{}")
        return CaseResult(case, case.expected, 0.5, case.component, 0.0, [])

    monkeypatch.setattr(selftest, "run_case", fake_run)
    kept = tmp_path / "kept"
    result = CliRunner().invoke(app, ["selftest", "--quick", "--only", "idle,lock", "--out", str(kept)])
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in kept.iterdir()) == ["idle", "lock"]


class _Sampler:
    def sample(self, logits, seq_ids):  # type: ignore[no-untyped-def]
        return [0] * len(seq_ids)


def test_injections_wrap_the_sampler_and_close_their_threads() -> None:
    with pytest.raises(ValueError, match="unknown injection"):
        apply_injections({"faster_sampler": True}, None, None, _Sampler())
    _, _, sampler = apply_injections(
        {"contended_lock": True, "allocation_heavy": 1000}, None, None, _Sampler()
    )
    assert sampler.sample(None, [1, 2]) == [0, 0]
    contended = sampler.inner
    assert isinstance(contended, ContendedSampler) and contended._hog.is_alive()
    close_injections({"sampler": sampler})
    contended._hog.join(timeout=2.0)
    assert not contended._hog.is_alive()
    assert not any(
        thread.name == "injected-lock-hog" and thread is contended._hog for thread in threading.enumerate()
    )


def test_a_samples_case_is_judged_where_its_largest_category_sits() -> None:
    """A busy machine can make the model's glue the largest component over all categories; the planted lock
    wait still sits in the sampler, and that is what the case asks."""
    from types import SimpleNamespace

    case = next(case for case in CASES if case.name == "untraced-lock")
    samples = {
        "categories": {"lock": 0.45, "interpreter": 0.30, "kernel": 0.25},
        "components": {"model_glue": 0.50, "sampler": 0.40, "model_kernels": 0.10},
        "lock_by_component": {"sampler": 0.38, "model_glue": 0.07},
    }
    result = SimpleNamespace(breakdown={"methods": {"samples": samples}})
    assert selftest._answer(case, result) == ("lock", 0.45, "sampler")
    # The glue's torch calls waiting to retake the GIL are lock samples too, but not the planted lock's.
    samples["lock_by_component"] = {"sampler": 0.20, "model_glue": 0.25}
    samples["gil_by_component"] = {"model_glue": 0.20, "sampler": 0.01}
    assert selftest._answer(case, result) == ("lock", 0.45, "sampler")
    samples["gil_by_component"] = {"model_glue": 0.01}
    assert selftest._answer(case, result) == ("lock", 0.45, "model_glue")
    samples["categories"] = {"lock": 0.2, "interpreter": 0.6}  # interpreter wins: judged over all components
    assert selftest._answer(case, result) == ("interpreter", 0.6, "model_glue")


def test_each_category_reads_its_own_by_component_entry_and_others_have_none() -> None:
    split = {"lock_by_component": {"sampler": 0.3}, "gil_by_component": {"sampler": 0.1}}
    assert selftest._by_component(split, "lock") == {"sampler": 0.3}
    assert selftest._by_component(split, "gil") == {"sampler": 0.1}
    assert selftest._by_component(split, "allocation") is None
    assert selftest._by_component(split, "interpreter") is None
