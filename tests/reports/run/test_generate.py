"""generate_reports writes every file and returns names relative to the run directory."""

from __future__ import annotations

import ast
from pathlib import Path

from infer_prof import reports
from infer_prof.reports.run.generate import generate_reports
from tests.support.run_dirs import make_run_dir

REPORTS_PACKAGE = Path(reports.__file__).parent


def test_writes_everything_and_returns_relative_names(tmp_path):
    path = make_run_dir(tmp_path / "run", seed=21, n_requests=30, n_steps=80)
    written = generate_reports(path)
    assert written == {
        "trace": Path("trace.json"),
        "speedscope": Path("speedscope.json"),
        "report_html": Path("report.html"),
        "report_pdf": Path("report.pdf"),
    }
    for name in written.values():
        assert not name.is_absolute() and (path / name).stat().st_size > 0
    assert not list(path.glob(".*.tmp")), "atomic writes leave no temp files behind"


def test_switches(tmp_path):
    path = make_run_dir(tmp_path / "run", seed=22, n_requests=20, n_steps=40)
    assert set(generate_reports(path, html=False, pdf=False)) == {"trace", "speedscope"}
    assert set(generate_reports(path, traces=False, pdf=False)) == {"report_html"}


def test_reports_never_import_engine_or_native_paths():
    for source in REPORTS_PACKAGE.glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            for name in names:
                assert name.split(".")[0] not in ("engine", "native_paths"), f"{source.name} imports {name}"


def test_a_run_that_recorded_nothing_still_gets_reports(tmp_path):
    import pandas as pd

    from infer_prof.profiler.rundir.results import REQUEST_COLUMNS, STEP_COLUMNS, RunResult, write_run

    result = RunResult(
        config={"model": "m", "scenario": "s"},
        environment={},
        scenario={},
        metrics={"completed": 0, "failed": 3},
        partial=True,
        partial_reason="engine crashed at step 0",
    )
    write_run(
        tmp_path,
        result,
        pd.DataFrame(columns=list(REQUEST_COLUMNS)),
        pd.DataFrame(columns=list(STEP_COLUMNS)),
    )
    written = generate_reports(tmp_path)
    assert all((tmp_path / name).stat().st_size > 0 for name in written.values())
    assert "engine crashed at step 0" in (tmp_path / "report.html").read_text(encoding="utf-8")
