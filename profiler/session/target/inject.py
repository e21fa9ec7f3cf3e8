"""`run --launch CMD --probe`: put the span probe on the launched server's path, have the engine's steps switch it on and off in ABBA turns, and read its spans back.

The probe is profiler/inject/sitecustomize.py, copied into the run directory's probe/ folder, which goes
first on the server's PYTHONPATH; every Python process of the server (and each one it spawns, which
inherits the environment) imports it at start-up. It times the functions the engine tables name
(engine_tables.EngineTable.probes, the user's tables first) and writes spans-PID.tsv and probe-PID.json
into that folder. The folder's `switch` byte switches the component probes (not the step probe) on
and off, and the step probe itself writes it before each step (1, 0, 0, 1, ...): neighbouring steps
then pair on with off, the in-run A/B of the probe's own cost, as --verify pairs the sampler's twins.
Blocks of wall time (2 s each) were tried first: vLLM's step time moved with its batch from one block
to the next by tens of percent, so the A/B could not resolve its 1% allowance.

With `--what-if COMPONENT,...` (a slowdown run) probes.json also names the experiments: every call of a
named component adds a busy delay of a fraction of its own duration, at each level in turn, and the steps
turn the switch through delay and no delay instead of on and off (profiler.analysis.probe_slowdown reads
the response). The levels are scaled to each component's share, as the built-in engine's are
(profiler.checks.slowdown.level_scale): the run's first MEASURE_STEPS steps go undelayed while every process
tallies its components' calls and the stepping process its steps (after the first SKIP_STEPS, a server's
start-up), and each process then multiplies its
component's levels until the top one adds about TARGET_ADDED_SHARE of the step (at most MAX_LEVEL); the
scales and what they came from are in each process's probe-PID.json. The switch starts at b"." (no step yet:
probes on, nothing tallied), so calls before the load's first step do not count.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np

from ....errors import TargetError
from ...analysis.engine_tables import EngineTable, all_tables
from ...checks.slowdown import LEVELS, MAX_LEVEL, TARGET_ADDED_SHARE

PROBE_DIR_ENV = "INFER_PROF_PROBE_DIR"
# The delay levels of a slowdown run, as fractions of each call's own duration: two, so a curve shows.
WHAT_IF_LEVELS = LEVELS  # as the built-in engine's
# Components that run beside the engine loop (vLLM's API server) act on it through queues, a few steps late:
# their turns last this many steps, so a turn's response holds its own delay's effect.
BESIDE_THE_LOOP = ("api", "tokenizer", "detokenizer")
BESIDE_TURN_STEPS = 8
MAX_EXPERIMENTS = 26  # the probe's switch bytes, a to z: one per (component, level)
# Undelayed steps at the start that measure each component's share for its levels' scale: a few dozen steps
# hold enough calls for a share good to a few tens of percent, and the scale needs no more.
MEASURE_STEPS = 64
# Of those, the first are left out of the share: a server's first steps pay for its start (llama.cpp's first
# eval pages its weights in from the mapped file), and one such step would outweigh the rest.
SKIP_STEPS = 16
SWITCH_BEFORE_STEPS = b"."  # sitecustomize's _IDLE: probes on, nothing delayed or tallied
SOURCE = Path(__file__).resolve().parents[2] / "inject" / "sitecustomize.py"


class SlowdownScale(TypedDict):
    """probes.json's what_if.scale: the undelayed steps that measure each component's share, and the levels' aim."""

    measure_steps: int
    skip_steps: int
    target_share: float
    max_level: float


class SlowdownConfig(TypedDict):
    """probes.json's what_if: the delayed components, their levels, steps a turn (and the scale, unless fixed)."""

    components: list[str]
    levels: list[float]
    turn_steps: int
    scale: NotRequired[SlowdownScale]


class ProbeConfig(TypedDict):
    """probes.json, as the probe (profiler/inject/sitecustomize.py, stdlib only) reads it."""

    probes: list[dict[str, str]]  # probe_rows: component, module, function, engine (and size)
    switch: Literal["step"]  # the steps turn the switch
    what_if: NotRequired[SlowdownConfig]


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A slowdown run: the components whose calls are delayed, the levels (fractions of a call), steps a turn, and
    the undelayed steps that measure each component's share before its levels are scaled (0: fixed levels)."""

    components: tuple[str, ...]
    levels: tuple[float, ...] = WHAT_IF_LEVELS
    turn_steps: int | None = None  # None: BESIDE_TURN_STEPS when a component runs beside the loop, else 1
    measure_steps: int = MEASURE_STEPS

    def steps_a_turn(self) -> int:
        if self.turn_steps is not None:
            return self.turn_steps
        return BESIDE_TURN_STEPS if set(self.components) & set(BESIDE_THE_LOOP) else 1

    def steps_measured(self) -> int:
        """measure_steps rounded up to whole turns, so the turns that follow keep their blocks."""
        turn = self.steps_a_turn()
        return -(-max(0, self.measure_steps) // turn) * turn

    def as_json(self) -> SlowdownConfig:
        doc: SlowdownConfig = {
            "components": list(self.components),
            "levels": list(self.levels),
            "turn_steps": self.steps_a_turn(),
        }
        if self.steps_measured():
            doc["scale"] = {
                "measure_steps": self.steps_measured(),
                "skip_steps": min(SKIP_STEPS, self.steps_measured() // 2),
                "target_share": TARGET_ADDED_SHARE,
                "max_level": MAX_LEVEL,
            }
        return doc


def check_what_if(what_if: WhatIf, rows: list[dict[str, str]]) -> None:
    """TargetError unless each component is one the probes time (not the step itself), levels and all."""
    timed = sorted({row["component"] for row in rows} - {"step"})
    for name in what_if.components:
        if name not in timed:
            raise TargetError(
                f"--what-if {name}: the engine tables time no such component; use one of {', '.join(timed)}"
            )
    if not what_if.levels or not all(0 < level <= MAX_LEVEL for level in what_if.levels):
        raise TargetError(
            f"--what-if levels {what_if.levels}: give fractions of a call above 0, up to {MAX_LEVEL:g}"
        )
    if len(what_if.components) * len(what_if.levels) > MAX_EXPERIMENTS:
        raise TargetError(
            f"--what-if: {len(what_if.components)} components x {len(what_if.levels)} levels is more than the "
            f"probe's {MAX_EXPERIMENTS} experiments; name fewer components"
        )


@dataclass
class ProbeSetup:
    """The probe's folder in the run directory and the probes it was given."""

    folder: Path
    probes: list[dict[str, str]]
    what_if: WhatIf | None = None

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the launched command's environment gains: our folder first on PYTHONPATH, and where to write."""
        given = os.environ if base is None else base
        path = os.pathsep.join(filter(None, [str(self.folder), given.get("PYTHONPATH", "")]))
        return {"PYTHONPATH": path, PROBE_DIR_ENV: str(self.folder)}


def probe_rows(tables: tuple[EngineTable, ...] | None = None) -> list[dict[str, str]]:
    """Every table's probes, the user's first; one row per (module, function), with "size" where the table
    counts its steps' work through that function."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for table in all_tables() if tables is None else tables:
        for component, module, function in table.probes:
            row = {"component": component, "module": module, "function": function, "engine": table.name}
            if table.step_size is not None and table.step_size[:2] == (module, function):
                row["size"] = table.step_size[2]  # the probe keeps this attribute of what each call returns
            rows.setdefault((module, function), row)
    return list(rows.values())


def prepare_probe(
    run_dir: Path, tables: tuple[EngineTable, ...] | None = None, what_if: WhatIf | None = None
) -> ProbeSetup:
    """The probe's folder: its code, probes.json (switched by the steps; with the slowdown experiments of
    `what_if`), and the switch (on until a step turns it; a scaled slowdown's says no step has run yet)."""
    folder = run_dir / "probe"
    folder.mkdir(exist_ok=True)
    shutil.copyfile(SOURCE, folder / "sitecustomize.py")
    rows = probe_rows(tables)
    doc: ProbeConfig = {"probes": rows, "switch": "step"}
    if what_if is not None:
        check_what_if(what_if, rows)
        doc["what_if"] = what_if.as_json()
    (folder / "probes.json").write_text(json.dumps(doc, indent=1))
    scaled = what_if is not None and what_if.steps_measured() > 0
    (folder / "switch").write_bytes(SWITCH_BEFORE_STEPS if scaled else b"1")
    return ProbeSetup(folder, rows, what_if)


def read_probe(setup: ProbeSetup) -> dict[int, dict[str, Any]]:
    """pid -> {"records": (N, 5) int64, "sizes": (M, 2) int64, "status": its probe-PID.json} for every process
    that loaded the probe (sizes: at_ns, size from the probes that count a step's work); a slowdown run's
    processes also hold "delays" (N, 8) and "turns" (M, 2): the sitecustomize's delays- and turns-PID.tsv."""
    found: dict[int, dict[str, Any]] = {}
    for status_path in setup.folder.glob("probe-*.json"):
        pid = _pid(status_path.stem)
        if pid is None:
            continue
        try:
            status = json.loads(status_path.read_text())
        except (OSError, ValueError):
            status = {"errors": [f"{status_path.name} could not be read"]}
        found.setdefault(pid, {"records": np.zeros((0, 5), dtype=np.int64)})["status"] = status
    for spans_path in setup.folder.glob("spans-*.tsv"):
        pid = _pid(spans_path.stem)
        if pid is None:
            continue
        found.setdefault(pid, {"status": {}})["records"] = _records(spans_path, 5)
    for stem, columns in (("sizes", 2), ("delays", 8), ("turns", 2)):
        for path in setup.folder.glob(f"{stem}-*.tsv"):
            pid = _pid(path.stem)
            if pid is not None and pid in found:
                found[pid][stem] = _records(path, columns)
    return found


def _pid(stem: str) -> int | None:
    tail = stem.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _records(path: Path, columns: int) -> np.ndarray:
    with open(path) as handle:
        return records_of(handle, columns)


def records_of(lines: Iterable[str], columns: int) -> np.ndarray:
    """A probe file's tab-separated integer lines of `columns` fields as an (N, columns) int64 array."""
    rows = []
    for line in lines:
        fields = line.split("\t")
        if len(fields) == columns:
            try:
                rows.append([int(value) for value in fields])
            except ValueError:
                continue  # a line cut short when the process was killed mid-write
    return np.asarray(rows, dtype=np.int64).reshape(-1, columns)
