"""The time split's names are written once (profiler/rundir/components.py): the result, the verdict, the
recorded twins and a user's engine table all take them from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.analysis import diagnose
from infer_prof.profiler.analysis.engine_tables import load_table
from infer_prof.profiler.rundir import results, twins
from infer_prof.profiler.rundir.components import COMPONENTS, CONTROL_PATHS, NATIVE_CAPABLE


def _refusal(tmp_path: Path, table: str) -> list[str]:
    """The names a user's table is told to use, from the one line that refuses it."""
    path = tmp_path / "mine.toml"
    path.write_text(table)
    with pytest.raises(TargetError) as raised:
        load_table(path)
    return str(raised.value).split("use one of ", 1)[1].split(", ")


def test_a_users_component_rows_may_name_every_component_once_and_the_whole_model(tmp_path: Path) -> None:
    allowed = _refusal(tmp_path, 'components = [["nosuch", "mine\\\\.py$", ""]]\n')
    assert allowed == [*COMPONENTS, "model"]
    assert len(allowed) == len(set(allowed))


def test_a_users_probe_rows_may_name_the_control_paths(tmp_path: Path) -> None:
    allowed = _refusal(tmp_path, 'probes = [["nosuch", "mine.sched", "Scheduler.schedule"]]\n')
    assert allowed == ["step", *CONTROL_PATHS, "model", "worker", "api"]
    path = tmp_path / "ok.toml"
    path.write_text('probes = [["detokenizer", "mine.out", "Detok.step"]]\n')
    assert load_table(path).probes == (("detokenizer", "mine.out", "Detok.step"),)


def test_the_result_the_verdict_and_the_recorded_twins_read_the_same_names() -> None:
    assert results.COMPONENTS is COMPONENTS
    assert diagnose.NATIVE_CAPABLE == twins.ORDER == NATIVE_CAPABLE
    assert set(diagnose.CONTROL_COMPONENTS) - set(COMPONENTS) == set()
    # `core` is spelled out in the components' order, whatever order the run's config gave.
    assert twins.expand(["sampler", "core"]) == ["scheduler", "sampler", "kv_alloc", "prepare"]
