"""`run --launch CMD --probe`: put the span probe on the launched server's path, switch it on and off in ABBA blocks during the load, and read its spans back.

The probe is profiler/inject/sitecustomize.py, copied into the run directory's probe/ folder, which goes
first on the server's PYTHONPATH; every Python process of the server (and each one it spawns, which
inherits the environment) imports it at start-up. It times the functions the engine tables name
(engine_tables.EngineTable.probes, the user's tables first) and writes spans-PID.tsv and probe-PID.json
into that folder. The folder's `control` byte switches the component probes (not the step probe) on
and off: the in-run A/B of the probe's own cost.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from profiler.analysis.engine_tables import EngineTable, all_tables

PROBE_DIR_ENV = "INFER_PROF_PROBE_DIR"
SOURCE = Path(__file__).resolve().parents[2] / "inject" / "sitecustomize.py"
BLOCK_S = 2.0  # one A/B block: many steps of a CPU server (tens to hundreds of ms each), short against the load's drift
ABBA = (1, 0, 0, 1)


@dataclass
class ProbeSetup:
    """The probe's folder in the run directory and the probes it was given."""

    folder: Path
    probes: list[dict[str, str]]
    switches: list[tuple[int, int]] = field(default_factory=list)  # (perf_counter_ns, state) as set

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """What the launched command's environment gains: our folder first on PYTHONPATH, and where to write."""
        given = os.environ if base is None else base
        path = os.pathsep.join(filter(None, [str(self.folder), given.get("PYTHONPATH", "")]))
        return {"PYTHONPATH": path, PROBE_DIR_ENV: str(self.folder)}

    def set(self, state: int) -> None:
        # Written in place: the probe maps this byte, and a replaced file would leave it reading the old one.
        with open(self.folder / "control", "r+b") as handle:
            handle.write(b"1" if state else b"0")
        self.switches.append((time.perf_counter_ns(), state))


def probe_rows(tables: tuple[EngineTable, ...] | None = None) -> list[dict[str, str]]:
    """Every table's probes, the user's first; one row per (module, function)."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for table in all_tables() if tables is None else tables:
        for component, module, function in table.probes:
            rows.setdefault((module, function), {"component": component, "module": module, "function": function,
                                                 "engine": table.name})  # fmt: skip
    return list(rows.values())


def prepare_probe(run_dir: Path, tables: tuple[EngineTable, ...] | None = None) -> ProbeSetup:
    """The probe's folder: its code, probes.json, and the switch (on)."""
    folder = run_dir / "probe"
    folder.mkdir(exist_ok=True)
    shutil.copyfile(SOURCE, folder / "sitecustomize.py")
    rows = probe_rows(tables)
    (folder / "probes.json").write_text(json.dumps({"probes": rows}, indent=1))
    (folder / "control").write_bytes(b"1")
    return ProbeSetup(folder, rows)


class ProbeSwitch:
    """Takes turns with the component probes on and off, BLOCK_S each, in ABBA order, until stopped (then on)."""

    def __init__(self, setup: ProbeSetup, block_s: float | None = None) -> None:
        self.setup, self.block_s = setup, BLOCK_S if block_s is None else block_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infer-prof-probe-switch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.setup.set(1)

    def _run(self) -> None:
        turn = 0
        while not self._stop.is_set():
            self.setup.set(ABBA[turn % len(ABBA)])
            turn += 1
            self._stop.wait(self.block_s)


def read_probe(setup: ProbeSetup) -> dict[int, dict[str, Any]]:
    """pid -> {"records": (N, 5) int64, "status": its probe-PID.json} for every process that loaded the probe."""
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
        found.setdefault(pid, {"status": {}})["records"] = _records(spans_path)
    return found


def _pid(stem: str) -> int | None:
    tail = stem.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _records(path: Path) -> np.ndarray:
    rows = []
    with open(path) as handle:
        for line in handle:
            fields = line.split("\t")
            if len(fields) == 5:
                try:
                    rows.append([int(value) for value in fields])
                except ValueError:
                    continue  # a line cut short when the process was killed mid-write
    return np.asarray(rows, dtype=np.int64).reshape(-1, 5)
