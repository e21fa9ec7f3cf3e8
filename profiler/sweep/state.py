"""A sweep directory's state: started fresh or resumed (only from the same sweep), and the runs left."""

from __future__ import annotations

from pathlib import Path

from ...errors import SweepError
from ..rundir.sweepdir import (
    RunnerInfo,
    SweepManifest,
    SweepSettings,
    is_sweep_dir,
    now,
    read_manifest,
    run_dir_of,
    write_manifest,
)
from .grid import Cell, CellKey
from .spec import SweepSpec
from .table import finished_result


def open_sweep_dir(
    spec: SweepSpec, cells: list[Cell], out_dir: Path, *, resume: bool, runner: RunnerInfo
) -> SweepManifest:
    """The manifest of a new sweep directory, or of the one being resumed; refuses to mix two sweeps."""
    manifest = check_sweep_dir(spec, cells, out_dir, resume=resume)
    manifest["repeats"] = spec.repeats
    manifest["runner"] = runner
    manifest["runs_total"] = len(cells) * spec.repeats
    manifest["complete"] = False
    write_manifest(out_dir, manifest)
    return manifest


def check_sweep_dir(spec: SweepSpec, cells: list[Cell], out_dir: Path, *, resume: bool) -> SweepManifest:
    """SweepError unless `out_dir` can take this sweep (new, or the same sweep to resume); writes nothing, so the
    CLI calls it before it prints a line."""
    keys = [CellKey(cell.id, cell.values).to_json() for cell in cells]
    if is_sweep_dir(out_dir):
        if not resume:
            raise SweepError(
                f"--out {out_dir} already holds a sweep; pass --resume to finish it, or choose another directory"
            )
        manifest = read_manifest(out_dir)
        if manifest.get("settings") != _json_round_trip(spec.settings()) or manifest["cells"] != keys:
            raise SweepError(
                f"--resume: {out_dir} was started from a different sweep (its axes or settings differ from "
                f"{spec.source}); resume it with the file it was started from, or choose another --out"
            )
    else:
        if resume:
            raise SweepError(
                f"--resume: {out_dir} holds no sweep to resume; run without --resume to start one there"
            )
        if out_dir.exists() and any(out_dir.iterdir()):
            raise SweepError(
                f"--out {out_dir} exists and is not a sweep directory; choose a new or empty directory"
            )
        manifest = {
            "name": spec.name,
            "description": spec.description,
            "source": spec.source,
            "file_text": spec.text,
            "settings": _json_round_trip(spec.settings()),
            "axes": spec.settings()["axes"],
            "map": {"x": spec.map_x, "y": spec.map_y},
            "cells": keys,
            "started_at": now(),
        }
    return manifest


def _json_round_trip(settings: SweepSettings) -> SweepSettings:
    """The settings as sweep.json holds them (tuples as lists), to compare with a manifest read back."""
    import json

    round_trip: SweepSettings = json.loads(json.dumps(settings))
    return round_trip


def is_finished(out_dir: Path, cell: CellKey, repeat: int) -> bool:
    return finished_result(run_dir_of(out_dir, cell.id, repeat)) is not None


def pending(order: list[tuple[Cell, int]], out_dir: Path) -> list[tuple[Cell, int]]:
    """The runs of `order` without a finished run directory (a killed or interrupted one is run again)."""
    return [(cell, repeat) for cell, repeat in order if not is_finished(out_dir, cell, repeat)]
