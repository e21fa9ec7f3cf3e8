"""A sweep as Ray tasks on a local Ray (two CPUs): the same cells and tables as a local sweep, run directories
collected back to the driver, each task sized by --cell-cpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray

from infer_prof.errors import OptionError
from infer_prof.profiler.rundir.sweepdir import RUN_COLUMNS, read_sweep, run_dir_of
from infer_prof.profiler.sweep.grid import build_cells
from infer_prof.profiler.sweep.ray_cells import pack, unpack
from infer_prof.profiler.sweep.run import RayTarget, run_sweep
from infer_prof.profiler.sweep.spec import load_sweep

TINY = """description = "the tiny model at one and two clients, Python and C twins, on Ray"
repeats = 1
requests = 3
[axes]
model = ["synthetic:tiny"]
clients = [1, 2]
native = ["none", "all"]
scenario = ["concurrency-30"]
output_tokens = [4]
"""


@pytest.fixture(scope="module")
def local_ray():  # type: ignore[no-untyped-def]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_a_sweep_on_ray_collects_every_cell_back_to_the_driver(tmp_path: Path, local_ray) -> None:  # type: ignore[no-untyped-def]
    sweep_file = tmp_path / "tiny.toml"
    sweep_file.write_text(TINY)
    spec = load_sweep(sweep_file)
    out = tmp_path / "sweep"
    with pytest.raises(OptionError, match="the Ray cluster has 2 CPU"):
        run_sweep(spec, tmp_path / "too-big", ray=RayTarget("auto", cell_cpus=3))
    outcome = run_sweep(spec, out, ray=RayTarget("auto", cell_cpus=1))
    assert outcome.complete and outcome.runs_this_time == 4
    data = read_sweep(out)
    assert list(data.runs.columns) == [*spec.axes, *RUN_COLUMNS]
    assert list(data.cells["cell"]) == [cell.id for cell in build_cells(spec)]
    assert data.manifest["runner"] == {"kind": "ray", "address": "auto", "cell_cpus": 1, "cell_gpus": 0.0}
    for cell in build_cells(spec):
        run_dir = run_dir_of(out, cell.id, 1)
        result = json.loads((run_dir / "result.json").read_text())
        assert result["metrics"]["completed"] == 3 and result["partial"] is False
        assert result["environment"]["torch_threads"] == 1  # torch held to the task's one CPU
        # py-spy inside a Ray worker hears its stop signal (Ray workers block SIGINT; the task unblocks it).
        assert result["collectors"]["sampling"]["status"] == "ok", result["collectors"]["sampling"]
        assert json.loads((run_dir / "sweep-cell.json").read_text())["runner"] == "ray"
    native = data.cells[data.cells["twins"] != "none"]
    assert native["measured_gain"].notna().all()


def test_a_run_directory_travels_whole_and_replaces_what_was_there(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "nested").mkdir(parents=True)
    (source / "result.json").write_text('{"a": 1}')
    (source / "nested" / "steps.csv").write_text("step\n0\n")
    target = tmp_path / "sweep" / "cells" / "000" / "r1"
    target.mkdir(parents=True)
    (target / "steps.csv").write_text("half-written")
    unpack(pack(source), target)
    assert sorted(path.relative_to(target).as_posix() for path in target.rglob("*")) == [
        "nested",
        "nested/steps.csv",
        "result.json",
    ]
    assert not list(target.parent.glob(".r1.incoming-*"))


@pytest.mark.parametrize("filters", ["with tarfile's filters", "without them (Python before 3.11.4)"])
def test_an_archive_with_a_link_or_a_path_outside_is_refused_whole(
    tmp_path: Path, filters: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import tarfile

    from infer_prof.errors import InferProfError

    if filters.startswith("without"):
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    # (An absolute member name is no case here: the "data" filter strips its slash and keeps it inside.)
    cases = (
        ("../escaped.txt", tarfile.REGTYPE),
        ("link", tarfile.SYMTYPE),
        ("sub/../../up.txt", tarfile.REGTYPE),
    )
    for case, (name, kind) in enumerate(cases):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            member = tarfile.TarInfo("./result.json")
            archive.addfile(member, io.BytesIO(b""))
            member = tarfile.TarInfo(name)
            member.type = kind
            member.linkname = "/etc/passwd" if kind == tarfile.SYMTYPE else ""
            archive.addfile(member, io.BytesIO(b""))
        target = tmp_path / f"case{case}" / "r1"
        with pytest.raises((InferProfError, tarfile.TarError)):
            unpack(buffer.getvalue(), target)
        assert not target.exists() and not list(target.parent.glob(".r1.incoming-*"))
        assert not {"escaped.txt", "up.txt"} & {path.name for path in tmp_path.rglob("*")}
    source = tmp_path / "plain"
    source.mkdir()
    (source / "result.json").write_text("{}")
    unpack(pack(source), tmp_path / "back" / "r1")
    assert (tmp_path / "back" / "r1" / "result.json").read_text() == "{}"
