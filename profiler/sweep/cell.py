"""One run of one cell into its own ordinary run directory, on this machine or inside a Ray worker."""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

from ..rundir.atomic import write_json_atomic
from ..rundir.sweepdir import now
from ..session.runner import ModelCache
from ..session.session import SessionHooks, run_session
from .grid import Cell
from .table import CELL_FILE

WARMUP_REQUESTS = 2
# (model, dtype, seed, twins) this process has already run once: first-time work (torch's first calls at
# each shape, the C twins' library) lands in an unrecorded warm-up run, not in the first cell's figures.
_warm: set[tuple[str, str, int, str, frozenset[str]]] = set()


def run_cell(
    cell: Cell,
    repeat: int,
    run_dir: Path,
    *,
    models: ModelCache,
    stop_event: threading.Event,
    hooks: SessionHooks | None = None,
    runner: str = "local",
) -> bool:
    """Run the cell once into `run_dir` (what a killed run left there is removed first); True when it
    finished, False when stop_event cut it short (its result is then partial, and a resume runs it again)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    write_json_atomic(
        run_dir / CELL_FILE,
        {
            **cell.to_json(),
            "repeat": repeat,
            "host": socket.gethostname(),
            "runner": runner,
            "started_at": now(),
        },
    )
    loaded = models.get(cell.options)
    if cell.options.threads:
        from ...engine.threads import pin_threads

        # Models are cached by (model, dtype, seed): one loaded for another cell kept that cell's threads.
        pin_threads(cell.options.threads)
    assert cell.scenario is not None
    cell.scenario.validate_against_context(loaded.config.context_length)
    _warm_up(cell, loaded, stop_event)
    outcome = run_session(
        cell.options,
        cell.scenario,
        run_dir,
        loaded=loaded,
        profile=cell.profile,
        stop_event=stop_event,
        hooks=hooks,
    )
    return not outcome.interrupted


def _warm_up(cell: Cell, loaded, stop_event: threading.Event) -> None:
    """A short unprofiled, unwritten run the first time this process runs the cell's model with its twins."""
    key = (
        cell.options.model,
        cell.options.dtype,
        cell.options.seed,
        cell.options.device,
        cell.options.native,
    )
    if key in _warm or cell.scenario is None:
        return
    scenario = cell.scenario.with_overrides(num_requests=WARMUP_REQUESTS, warmup_requests=0)
    run_session(
        cell.options,
        scenario,
        Path("unused"),
        loaded=loaded,
        profile="off",
        stop_event=stop_event,
        write=False,
    )
    _warm.add(key)
