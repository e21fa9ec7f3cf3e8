"""Fabricates sweep directories with known answers (shares, busy time per token) for sweep table, report
and compare tests: the cells come from a real sweep file through profiler.sweep, each run directory from make_run_dir."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from infer_prof.profiler.rundir.sweepdir import run_dir_of
from infer_prof.profiler.sweep.grid import build_cells
from infer_prof.profiler.sweep.run import write_tables
from infer_prof.profiler.sweep.spec import load_sweep
from infer_prof.profiler.sweep.state import open_sweep_dir
from tests.support.run_dirs import make_run_dir

MODELS = ("synthetic:tiny", "synthetic:small", "synthetic:base")
CLIENTS = (1, 4, 16, 30)
# Python cells' interpreter share by (model, clients): falling with size, rising with load.
SHARES = {
    "synthetic:tiny": (0.20, 0.35, 0.50, 0.60),
    "synthetic:small": (0.02, 0.08, 0.25, 0.40),
    "synthetic:base": (0.004, 0.008, 0.02, 0.05),
}
TOKENS = 1000
PYTHON_BUSY_US = 2000.0  # busy time per token of every Python run


def sweep_file(folder: Path, *, repeats: int = 2, native: bool = True) -> Path:
    path = folder / "map.toml"
    axes = f"model = {json.dumps(list(MODELS))}\nclients = {list(CLIENTS)}\n"
    if native:
        axes += 'native = ["none", "all"]\n'
    path.write_text(
        f'description = "a fabricated crossover map"\nrepeats = {repeats}\nrequests = 8\n'
        f'[axes]\n{axes}scenario = ["concurrency-30"]\n[map]\nx = "clients"\ny = "model"\n'
    )
    return path


def make_sweep_dir(
    path: Path,
    *,
    repeats: int = 2,
    native: bool = True,
    share_shift: float = 0.0,
    wobble: float = 0.01,
    skip: int = 0,
) -> Path:
    """A sweep directory over MODELS x CLIENTS (x native none/all): Python cells have SHARES (+ share_shift,
    repeat r off by +-wobble), a native cell saves gain(share) = 0.9 x share of the busy time per token, and its
    prediction is 0.8 x share. `skip` leaves the last runs of the run order unfinished."""
    folder = path.parent / f".{path.name}-files"
    folder.mkdir(parents=True, exist_ok=True)
    spec = load_sweep(sweep_file(folder, repeats=repeats, native=native))
    cells = build_cells(spec)
    open_sweep_dir(spec, cells, path, resume=False, runner={"kind": "local"})
    template = make_run_dir(folder / "template", seed=5, n_requests=30, n_steps=60)
    order = [(cell, repeat) for repeat in range(1, repeats + 1) for cell in cells]
    for cell, repeat in order[: len(order) - skip]:
        values = dict(cell.values)
        share = SHARES[values["model"]][CLIENTS.index(values["clients"])] + share_shift
        share *= 1 + (wobble if repeat % 2 else -wobble)
        twins = sorted(cell.options.native)
        _write_run(template, run_dir_of(path, cell.id, repeat), share, twins, cell.to_json(), repeat)
    write_tables(path)
    return path


def expected_gain(model: str, clients: int, share_shift: float = 0.0) -> float:
    """The measured gain make_sweep_dir builds in (repeats' wobble cancels in the Python/native pairing)."""
    return 0.9 * (SHARES[model][CLIENTS.index(clients)] + share_shift)


def _write_run(
    template: Path, run_dir: Path, share: float, twins: list[str], key: dict[str, Any], repeat: int
) -> None:
    shutil.copytree(template, run_dir)
    data = json.loads((run_dir / "result.json").read_text())
    spans = data["breakdown"]["methods"]["spans"]
    idle = spans["categories"]["idle"]
    gain = 0.9 * share if twins else 0.0
    busy_ns = PYTHON_BUSY_US * 1e3 * (1 - gain)
    data["engine"]["tokens_generated"] = TOKENS
    data["breakdown"]["wall_s"] = busy_ns * TOKENS / ((1 - idle) * 1e9)
    data["config"]["native"] = twins
    verdict = data["verdict"]
    # A native cell's own share is what is left of Python: the twins took most of it.
    verdict["interpreter_share"] = share * 0.1 if twins else share
    for prediction in verdict["predictions"].values():
        prediction["predicted_gain"] = 0.8 * share / 3
    (run_dir / "result.json").write_text(json.dumps(data))
    (run_dir / "sweep-cell.json").write_text(json.dumps({**key, "repeat": repeat, "host": "fabricated"}))
