"""`infer-prof sweep` as a user meets it: one-line errors with exit 2 before any work, a sweep killed
mid-way and finished with --resume, `sweep report` and `compare` of two sweeps."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_user_error, cli
from tests.support.run_dirs import make_run_dir
from tests.support.sweep_dirs import make_sweep_dir

TINY = """description = "kill and resume: the tiny model at three loads"
repeats = 2
requests = 4
[axes]
model = ["synthetic:tiny"]
clients = [1, 2, 3]
scenario = ["concurrency-30"]
output_tokens = [6]
"""


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('description = "x"\n[axes]\nmodel = ["synthetic:tiny"\n', ["bad.toml", "malformed TOML"]),
        (
            'description = "x"\n[axes]\naccelerator = ["tpu"]\n',
            ["bad.toml", "axes.accelerator", "unknown axis", "allowed"],
        ),
    ],
)
def test_a_bad_sweep_file_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, text: str, needles: list[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    out = tmp_path / "sweep"
    assert_user_error(cli("sweep", str(bad), "--out", str(out)), *needles)
    assert not out.exists()


def test_a_bad_sweep_option_is_one_line_exit_2() -> None:
    assert_user_error(cli("sweep", "crossover-quick", "--resume"), "--resume needs --out")


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        ({"file": "no-such-sweep"}, ["no such sweep file", "crossover"]),
        ({"cell_cpus": 2}, ["--cell-cpus and --cell-gpus size Ray tasks"]),
        ({"ray": "local", "cell_cpus": 0}, ["--cell-cpus 0 must be at least 1"]),
    ],
)
def test_bad_sweep_options_are_refused_before_work(tmp_path: Path, options: dict, needles: list[str]) -> None:
    from infer_prof.cli.sweep import sweep_command
    from infer_prof.errors import InferProfError

    arguments = {
        "file": "crossover-quick",
        "out": tmp_path / "sweep",
        "resume": False,
        "ray": None,
        "cell_cpus": 1,
        "cell_gpus": 0.0,
        "report": False,
        **options,
    }
    with pytest.raises(InferProfError) as caught:
        sweep_command(arguments.pop("file"), **arguments)
    for needle in needles:
        assert needle in str(caught.value)
    assert not (tmp_path / "sweep").exists()


def test_sweep_list_shows_the_builtin_sweeps() -> None:
    result = cli("sweep", "list")
    assert result.returncode == 0, result.stderr
    assert "crossover " in result.stdout and "24 cells x 2 repeats" in result.stdout


def test_sweep_report_and_compare_of_two_sweeps(tmp_path: Path) -> None:
    sweep = make_sweep_dir(tmp_path / "before")
    result = cli("sweep", "report", str(sweep))
    assert result.returncode == 0, result.stderr
    assert "Look first at model=synthetic:tiny" in result.stdout and (sweep / "sweep.pdf").is_file()
    compared = cli("compare", str(sweep), str(sweep), "--out", str(tmp_path / "cmp"))
    assert compared.returncode == 0, compared.stderr
    assert "24 cells in both sweeps" in compared.stdout
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["kind"] == "sweeps"
    run = make_run_dir(tmp_path / "run", seed=3, n_requests=20, n_steps=40)
    assert_user_error(cli("compare", str(sweep), str(run)), "is not a sweep directory")
    assert_user_error(cli("sweep", "report", str(run)), "no sweep.json here")


@pytest.mark.slow
def test_a_killed_sweep_resumes_and_loses_at_most_the_run_in_flight(tmp_path: Path) -> None:
    sweep_file = tmp_path / "tiny.toml"
    sweep_file.write_text(TINY)
    out = tmp_path / "sweep"
    process = subprocess.Popen(
        [sys.executable, "-m", "infer_prof.cli", "sweep", str(sweep_file), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(list(out.glob("cells/*/r*/result.json"))) < 2:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # no cleanup at all: what `kill -9` or a lost machine leaves
    process.wait(timeout=30)
    finished = {path.parent: path.stat().st_mtime_ns for path in out.glob("cells/*/r*/result.json")}
    assert 2 <= len(finished) < 6, "the sweep finished before it could be killed"

    result = cli("sweep", str(sweep_file), "--out", str(out), "--resume", "--no-report")
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())  # Rich wraps long lines at the terminal's width
    assert f"resume: {len(finished)} of 6 runs finished before; {6 - len(finished)} to run" in said
    assert f"6 of 6 runs finished, {6 - len(finished)} this time" in said
    for run_dir, mtime in finished.items():
        assert (run_dir / "result.json").stat().st_mtime_ns == mtime, f"{run_dir} was run again"
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["complete"] is True and manifest["runs_finished"] == 6
