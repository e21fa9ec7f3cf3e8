"""The one reader of a run's tables (rundir/validate.py): a steps.csv missing a column, naming one twice, cut short in
a row or holding figures beyond any run is refused with one line naming the file; a one-token request's single
timestamp, which pandas reads back as a number, is kept."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from infer_prof.errors import ResultError
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.rundir.samples import parse_token_ns
from tests.support.run_dirs import make_run_dir


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run_dir(tmp_path_factory.mktemp("runs") / "good", seed=1, n_requests=8, n_steps=20)


def _damaged(good: Path, tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    import shutil

    run = tmp_path / "run"
    shutil.copytree(good, run)
    steps = pd.read_csv(run / "steps.csv")
    change(steps).to_csv(run / "steps.csv", index=False)
    return run


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: t.drop(columns=["step"]), "no column 'step'"),
        (lambda t: t.drop(columns=["batch_size"]), "no column 'batch_size'"),
        (lambda t: t.rename(columns={"batch_size": "step"}), "names column 'step' twice"),
        (
            lambda t: t.assign(kv_utilization=[None] + list(t.kv_utilization[1:])),
            "row 2 has no kv_utilization",
        ),
        (lambda t: t.assign(model_ms=1e308), "column model_ms is 1e+308"),
        (lambda t: t.assign(duration_ms=float("inf")), "column duration_ms is inf"),
        (lambda t: t.assign(start_ns=1e30), "column start_ns is 1e+30"),
    ],
)
def test_a_damaged_steps_table_is_one_result_error_naming_the_file(
    good: Path, tmp_path: Path, change, words: str
) -> None:  # type: ignore[no-untyped-def]
    run = _damaged(good, tmp_path, change)
    with pytest.raises(ResultError) as raised:
        read_run(run)
    message = str(raised.value)
    assert message.startswith(str(run / "steps.csv")) and words in message and "re-record the run" in message


def test_one_timestamp_per_request_reads_back(good: Path, tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(good, run)
    requests = pd.read_csv(run / "requests.csv")
    requests["token_ns"] = requests["first_token_ns"].astype("int64")  # one token each: a number, not text
    requests.to_csv(run / "requests.csv", index=False)
    data = read_run(run)
    first = data.requests["token_ns"].iloc[0]
    assert parse_token_ns(first) == [int(requests["first_token_ns"].iloc[0])]
