"""Run directories for the report tests, written with tests.support.run_dirs.make_run_dir (shared with budget tests)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.run_dirs import make_run_dir


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete run: breakdown, verdict with measured gains, py-spy samples."""
    return make_run_dir(tmp_path_factory.mktemp("runs") / "full", seed=11, n_requests=90, n_steps=300)


@pytest.fixture
def run_copy(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of run_dir for a test that writes into it (a trace, a profile): the shared one stays as made,
    so what another test sees does not depend on the order the tests ran in."""
    return Path(shutil.copytree(run_dir, tmp_path / "run"))


@pytest.fixture(scope="session")
def bare_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run recorded with --profile off: no breakdown, no verdict, no samples."""
    return make_run_dir(
        tmp_path_factory.mktemp("runs") / "bare",
        seed=12,
        n_requests=40,
        n_steps=120,
        with_breakdown=False,
        with_samples=False,
    )


@pytest.fixture(scope="session")
def reported_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with every report generated once (the browser and PDF tests look at these files)."""
    from infer_prof.reports.run.generate import generate_reports

    path = make_run_dir(tmp_path_factory.mktemp("runs") / "reported", seed=13, n_requests=120, n_steps=400)
    generate_reports(path)
    return path
