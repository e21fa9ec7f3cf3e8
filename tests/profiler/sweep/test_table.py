"""The merged tables of a sweep, read back from run directories whose shares and busy times are known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from infer_prof.errors import SweepError
from infer_prof.profiler.rundir.sweepdir import CELL_COLUMNS, RUN_COLUMNS, read_sweep, run_dir_of
from infer_prof.profiler.sweep.run import write_tables
from tests.support.sweep_dirs import CLIENTS, MODELS, PYTHON_BUSY_US, SHARES, expected_gain, make_sweep_dir


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sweep_dir(tmp_path_factory.mktemp("sweeps") / "map")


def test_the_tables_have_one_column_per_axis_named_as_in_the_file(sweep_dir: Path) -> None:
    data = read_sweep(sweep_dir)
    axes = ["model", "clients", "native", "scenario"]
    assert list(data.runs.columns) == [*axes, *RUN_COLUMNS]
    assert list(data.cells.columns) == [*axes, *CELL_COLUMNS]
    assert len(data.runs) == 48 and len(data.cells) == 24
    # CSV beside each Parquet file, with the same rows.
    assert len(pd.read_csv(sweep_dir / "runs.csv")) == 48 and len(pd.read_csv(sweep_dir / "cells.csv")) == 24
    assert data.manifest["complete"] is True and data.manifest["runs_finished"] == 48


def test_cells_average_their_repeats_with_a_standard_error(sweep_dir: Path) -> None:
    cells = read_sweep(sweep_dir).cells
    python = cells[cells["twins"] == "none"].set_index(["model", "clients"])
    for model in MODELS:
        for position, clients in enumerate(CLIENTS):
            row = python.loc[(model, clients)]
            share = SHARES[model][position]
            assert row["interpreter_share"] == pytest.approx(share)
            # Repeats at share x 1.01 and share x 0.99: standard error of the mean = 0.01 x share.
            assert row["interpreter_share_se"] == pytest.approx(0.01 * share)
            assert row["interpreter_share_min"] == pytest.approx(0.99 * share)
            expected = (
                "a native rewrite pays"
                if share >= 0.30
                else ("stay in Python" if share <= 0.01 else "targeted native paths")
            )
            assert row["verdict"] == expected
            assert row["busy_us_per_token"] == pytest.approx(PYTHON_BUSY_US)


def test_native_cells_are_paired_with_their_python_cells(sweep_dir: Path) -> None:
    cells = read_sweep(sweep_dir).cells
    native = cells[cells["twins"] != "none"]
    assert set(native["twins"]) == {"kv_alloc,prepare,sampler,scheduler"}
    by_id = cells.set_index("cell")
    for _, row in native.iterrows():
        baseline = by_id.loc[row["baseline_cell"]]
        assert (baseline["model"], baseline["clients"], baseline["native"]) == (
            row["model"],
            row["clients"],
            "none",
        )
        assert row["measured_gain"] == pytest.approx(expected_gain(row["model"], row["clients"]))
        share = SHARES[row["model"]][CLIENTS.index(row["clients"])]
        assert row["predicted_gain"] == pytest.approx(0.8 * share)
        assert row["measured_gain_se"] == pytest.approx(0.9 * share * 0.01)
    assert cells[cells["twins"] == "none"]["measured_gain"].isna().all()


def test_unfinished_and_partial_runs_are_left_out(tmp_path: Path) -> None:
    path = make_sweep_dir(tmp_path / "part", skip=5)
    data = read_sweep(path)
    assert len(data.runs) == 43 and data.manifest["complete"] is False
    # A partial run (Ctrl-C) does not count either: its cell is run again on resume.
    first = data.runs.iloc[0]
    result_path = path / first["run_dir"] / "result.json"
    result = json.loads(result_path.read_text())
    result["partial"] = True
    result_path.write_text(json.dumps(result))
    assert len(write_tables(path).runs) == 42
    # A cell with one finished repeat has no noise estimate, not a zero one.
    cells = read_sweep(path).cells.set_index("cell")
    assert cells.loc[first["cell"], "repeats"] == 1 and math.isnan(
        cells.loc[first["cell"], "interpreter_share_se"]
    )


def test_a_directory_that_is_not_a_sweep_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="no sweep.json"):
        read_sweep(tmp_path)
    (tmp_path / "sweep.json").write_text("{not json")
    with pytest.raises(SweepError, match="not valid JSON"):
        read_sweep(tmp_path)


def test_run_directories_are_where_the_contract_says(sweep_dir: Path) -> None:
    runs = read_sweep(sweep_dir).runs
    for _, row in runs.iterrows():
        assert sweep_dir / row["run_dir"] == run_dir_of(sweep_dir, row["cell"], int(row["repeat"]))
        assert row["host"] == "fabricated"


def test_a_sweep_written_before_the_yardstick_was_renamed_reads_its_column_under_the_new_name(
    sweep_dir: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for name in ("runs", "cells"):
        frame = pd.read_csv(sweep_dir / f"{name}.csv")
        frame.rename(columns={"yardstick_us_per_token": "control_us_per_token"}).to_csv(old / f"{name}.csv")
    (old / "sweep.json").write_text((sweep_dir / "sweep.json").read_text())
    runs = read_sweep(old).runs
    assert "control_us_per_token" not in runs.columns
    assert (
        runs["yardstick_us_per_token"].tolist()
        == read_sweep(sweep_dir).runs["yardstick_us_per_token"].tolist()
    )
