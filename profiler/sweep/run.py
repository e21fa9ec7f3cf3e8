"""A whole sweep: check every cell, open (or resume) its directory, run what is left here or on Ray, and
write the merged tables, also when it is stopped."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ...errors import OptionError
from ..inputs.addresses import parse_ray_address
from ..rundir.sweepdir import (
    CELLS_TABLE,
    RUNS_TABLE,
    RunnerInfo,
    read_manifest,
    write_manifest,
    write_table,
)
from .grid import Cell, CellKey, build_cells, check_contexts, run_order
from .hooks import SweepHooks
from .spec import SweepSpec
from .state import open_sweep_dir, pending
from .table import cells_table, runs_table

# CPUs a Ray cell reserves unless told, and so its torch threads; a local run uses as many threads, so that the two
# runners measure one cell alike (torch's thread count moves the interpreter share).
DEFAULT_CELL_CPUS = 1


@dataclass
class RayTarget:
    """Where and how big each cell's Ray task is."""

    address: str = "auto"
    cell_cpus: int = DEFAULT_CELL_CPUS
    cell_gpus: float = 0.0

    def __post_init__(self) -> None:
        parse_ray_address(self.address)  # its form; connect() tries it, briefly, before Ray does
        if self.cell_cpus < 1:
            raise OptionError(f"--cell-cpus {self.cell_cpus} must be at least 1")
        if self.cell_gpus < 0:
            raise OptionError(f"--cell-gpus {self.cell_gpus:g} must be 0 or more")


@dataclass
class SweepOutcome:
    """What a sweep left: its directory, how many of its runs are finished, and the two tables."""

    path: Path
    runs_total: int
    runs_finished: int
    runs_this_time: int
    interrupted: bool
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def complete(self) -> bool:
        return self.runs_finished == self.runs_total


def prepare_cells(spec: SweepSpec) -> list[Cell]:
    """Every cell built and checked (options, scenario, model, context): a bad cell fails before any runs."""
    cells = build_cells(spec)
    check_contexts(spec, cells)
    return cells


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    *,
    resume: bool = False,
    ray: RayTarget | None = None,
    hooks: SweepHooks | None = None,
    stop_event: threading.Event | None = None,
) -> SweepOutcome:
    """Run every cell x repeat not yet finished in `out_dir`, locally one at a time or as Ray tasks."""
    hooks = hooks or SweepHooks()
    stop_event = stop_event or threading.Event()
    cells = prepare_cells(spec)
    runner: RunnerInfo = (
        {"kind": "ray", "address": ray.address, "cell_cpus": ray.cell_cpus, "cell_gpus": ray.cell_gpus}
        if ray
        else {"kind": "local"}
    )
    open_sweep_dir(spec, cells, out_dir, resume=resume, runner=runner)
    order = run_order(cells, spec.repeats)
    todo = pending(order, out_dir)
    done_before = len(order) - len(todo)
    if resume:
        hooks.say(f"resume: {done_before} of {len(order)} runs finished before; {len(todo)} to run")
    hooks.plan(len(order), done_before)
    try:
        if ray is None:
            from .local import run_local

            # The same torch threads as a Ray cell of the default size (--cell-cpus 1): local and Ray runs of one
            # cell at different thread counts read very different interpreter shares (docs/measurements.md).
            local = [
                (
                    replace(
                        cell, options=replace(cell.options, threads=cell.options.threads or DEFAULT_CELL_CPUS)
                    ),
                    repeat,
                )
                for cell, repeat in todo
            ]
            run_local(local, out_dir, hooks=hooks, stop_event=stop_event)
        elif todo:
            from .ray_cells import run_on_ray

            run_on_ray(
                todo,
                out_dir,
                address=ray.address,
                cell_cpus=ray.cell_cpus,
                cell_gpus=ray.cell_gpus,
                hooks=hooks,
                stop_event=stop_event,
            )
    finally:
        # Also on a second Ctrl-C: what finished is in the tables, and a resume picks up the rest.
        outcome = write_tables(out_dir)
    outcome.runs_this_time = outcome.runs_finished - done_before
    outcome.interrupted = stop_event.is_set() and not outcome.complete
    return outcome


def write_tables(out_dir: Path) -> SweepOutcome:
    """Rebuild runs and cells tables from the run directories there (also what `sweep report` does)."""
    manifest = read_manifest(out_dir)
    keys = [CellKey.from_json(entry) for entry in manifest["cells"]]
    runs = runs_table(keys, int(manifest["repeats"]), out_dir)
    cells = cells_table(keys, runs)
    write_table(out_dir, RUNS_TABLE, runs)
    write_table(out_dir, CELLS_TABLE, cells)
    total = len(keys) * int(manifest["repeats"])
    write_manifest(out_dir, {**manifest, "runs_finished": len(runs), "complete": len(runs) == total})
    return SweepOutcome(out_dir, total, len(runs), 0, False, runs, cells)
