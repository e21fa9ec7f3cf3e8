"""A real sweep on the tiny synthetic model: every cell an ordinary run directory, stopped mid-way and resumed
without redoing finished runs, and a directory that holds another sweep refused."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from infer_prof.errors import SweepError
from infer_prof.profiler.rundir.results import read_run
from infer_prof.profiler.rundir.sweepdir import read_manifest, read_sweep, run_dir_of
from infer_prof.profiler.sweep.hooks import SweepHooks
from infer_prof.profiler.sweep.run import run_sweep
from infer_prof.profiler.sweep.spec import load_sweep

TINY = """description = "the tiny model at one and two clients, Python and C twins"
repeats = 1
requests = 3
[axes]
model = ["synthetic:tiny"]
clients = [1, 2]
native = ["none", "all"]
scenario = ["concurrency-30"]
output_tokens = [4]
"""


def tiny_sweep(folder: Path, text: str = TINY):  # type: ignore[no-untyped-def]
    path = folder / "tiny.toml"
    path.write_text(text)
    return load_sweep(path)


def created(run_dir: Path) -> tuple[str, int]:
    """What identifies one writing of a run: its timestamp and the file's modification time."""
    return json.loads((run_dir / "result.json").read_text())["created_at"], (
        run_dir / "result.json"
    ).stat().st_mtime_ns


def test_a_sweep_runs_every_cell_into_its_own_run_directory(tmp_path: Path) -> None:
    spec = tiny_sweep(tmp_path)
    seen: list[tuple[str, int, bool]] = []
    hooks = SweepHooks(on_run_done=lambda cell, repeat, finished: seen.append((cell.id, repeat, finished)))
    outcome = run_sweep(spec, tmp_path / "sweep", hooks=hooks)
    assert outcome.complete and not outcome.interrupted and outcome.runs_this_time == 4
    assert seen == [
        ("000-1-none", 1, True),
        ("001-1-all", 1, True),
        ("002-2-none", 1, True),
        ("003-2-all", 1, True),
    ]
    for cell_id, repeat, _ in seen:
        run = read_run(run_dir_of(tmp_path / "sweep", cell_id, repeat))  # an ordinary run directory
        assert run.result.metrics["completed"] == 3 and not run.result.partial
        assert run.result.scenario["load"]["clients"] == int(cell_id.split("-")[1])
        assert run.result.config["native"] == (
            [] if cell_id.endswith("none") else ["kv_alloc", "prepare", "sampler", "scheduler"]
        )
    data = read_sweep(tmp_path / "sweep")
    assert len(data.runs) == 4 and data.runs["interpreter_share"].notna().all()
    native = data.cells[data.cells["twins"] != "none"]
    assert native["measured_gain"].notna().all() and native["predicted_gain"].notna().all()
    assert list(native["baseline_cell"]) == ["000-1-none", "002-2-none"]


def test_a_stopped_sweep_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    spec = tiny_sweep(tmp_path)
    out = tmp_path / "sweep"
    stop = threading.Event()
    hooks = SweepHooks(on_run_done=lambda cell, repeat, finished: stop.set())  # stop after the first run
    first = run_sweep(spec, out, hooks=hooks, stop_event=stop)
    assert first.interrupted and (first.runs_finished, first.runs_total) == (1, 4)
    assert read_manifest(out)["complete"] is False and len(read_sweep(out).runs) == 1
    kept = created(run_dir_of(out, "000-1-none", 1))
    # What a killed run leaves: a run directory without result.json. The resume runs that cell again.
    leftover = run_dir_of(out, "001-1-all", 1)
    leftover.mkdir(parents=True)
    (leftover / "steps.csv").write_text("step\n0\n")

    with pytest.raises(SweepError, match="already holds a sweep; pass --resume"):
        run_sweep(spec, out)
    started: list[str] = []
    second = run_sweep(
        spec, out, resume=True, hooks=SweepHooks(on_run_start=lambda cell, repeat: started.append(cell.id))
    )
    assert second.complete and second.runs_this_time == 3
    assert started == ["001-1-all", "002-2-none", "003-2-all"]
    assert created(run_dir_of(out, "000-1-none", 1)) == kept
    assert (run_dir_of(out, "001-1-all", 1) / "result.json").is_file()
    # Resuming a finished sweep runs nothing.
    third = run_sweep(spec, out, resume=True)
    assert third.complete and third.runs_this_time == 0


def test_resume_refuses_another_sweep_and_a_directory_without_one(tmp_path: Path) -> None:
    spec = tiny_sweep(tmp_path)
    out = tmp_path / "sweep"
    with pytest.raises(SweepError, match="holds no sweep to resume"):
        run_sweep(spec, out, resume=True)
    stop = threading.Event()
    stop.set()  # the directory is opened, then nothing runs
    run_sweep(spec, out, stop_event=stop)
    (tmp_path / "other").mkdir()
    other = tiny_sweep(tmp_path / "other", TINY.replace("clients = [1, 2]", "clients = [1, 3]"))
    with pytest.raises(SweepError, match="was started from a different sweep"):
        run_sweep(other, out, resume=True)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(SweepError, match="exists and is not a sweep directory"):
        run_sweep(spec, tmp_path / "busy")


def test_a_threads_axis_sets_torch_threads_per_run(tmp_path: Path) -> None:
    text = TINY.replace('clients = [1, 2]\nnative = ["none", "all"]\n', "threads = [1, 2]\n").replace(
        "requests = 3", "requests = 1"
    )
    outcome = run_sweep(tiny_sweep(tmp_path, text), tmp_path / "sweep")
    assert outcome.complete
    # One model, loaded once for both cells: each run still gets its own thread count.
    assert list(read_sweep(tmp_path / "sweep").runs["torch_threads"]) == [1.0, 2.0]
