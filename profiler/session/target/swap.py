"""`run --launch CMD --probe --swap sampler`: check the server's vLLM before it starts, put the swap beside the probe, and read what it did.

The swap itself is profiler/inject/vllm_sampler_swap.py, copied into the probe's folder; the probe loads it
(probes.json's "swap") and the steps switch it in and out by turns. Before anything starts, the server's own
Python (the launch command's interpreter, or the one its script's #! line names) runs that file with --check:
it reads vLLM's version and forward_cpu's parameters from the installed files, without importing vLLM, and an
engine the swap does not know stops the run there, on one line, with no server started.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from ....errors import OptionError, TargetError
from ...analysis.probe_swap import SwapResult, analyse_swap
from ...ledger.records import LedgerRecord, health_text, now_utc
from ...ledger.store import append_record, ledger_path
from ...ledger.verify_pairs import finite_number
from ...rundir.atomic import write_json_atomic
from ...rundir.health import void_reason
from ...rundir.schema import ResultFile
from .inject import ProbeSetup

SOURCE = Path(__file__).resolve().parents[2] / "inject" / "vllm_sampler_swap.py"
SWAPS = ("sampler",)
SYMBOL = "np_sampler_draw_rows"
CHECK_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class SwapPlan:
    """A swap checked against the server's Python: what to put into the probe's folder."""

    name: str
    python: str
    version: str
    library: str  # infer-prof's built extension, which the server's Python loads

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "file": SOURCE.name, "library": self.library, "version": self.version}


def check_swap(name: str, launch: str | None, probe: bool) -> SwapPlan:
    """The swap `name` for the server `launch` starts, or OptionError / TargetError (one line) before it starts."""
    if name not in SWAPS:
        raise OptionError(f"--swap {name}: the swaps are {', '.join(SWAPS)}")
    if launch is None or not probe:
        raise OptionError(f"--swap {name} goes with --launch CMD --probe: the probe puts it into the server")
    library = native_library()
    python, assigned = server_python(launch)
    found = installed_in(python, assigned)
    if found.get("problem"):
        raise TargetError(f"--swap {name}: {found['problem']}; no server was started")
    return SwapPlan(name, python, str(found.get("version")), library)


def native_library() -> str:
    """The built extension's file, which must hold np_sampler_draw_rows."""
    from ....native_paths import loader

    module = loader.extension()
    if module is None or not hasattr(module.lib, SYMBOL):
        raise OptionError(f"--swap sampler needs infer-prof's C sampler with {SYMBOL}: {loader.BUILD_HINT}")
    return str(Path(str(module.__file__)).resolve())


def server_python(launch: str) -> tuple[str, dict[str, str]]:
    """The Python the launch command runs (its program after `env` and VAR=value words, if that is a Python, else
    the interpreter on its #! line) and the variables the command sets; OptionError when it names no Python."""
    try:
        words = shlex.split(launch)
    except ValueError as error:
        raise OptionError(f"--launch: the command does not parse ({error})") from None
    index = 1 if words and os.path.basename(words[0]) == "env" else 0
    assigned: dict[str, str] = {}
    while index < len(words) and (words[index].startswith("-") and index > 0 or _assignment(words[index])):
        if _assignment(words[index]):
            key, _, value = words[index].partition("=")
            assigned[key] = value
        index += 1
    program = shutil.which(words[index]) if index < len(words) else None
    if program is not None and os.path.basename(program).startswith("python"):
        return program, assigned
    if program is not None:
        with open(program, "rb") as handle:
            first = handle.readline(400).decode(errors="replace")
        shebang = shlex.split(first[2:]) if first.startswith("#!") else []
        if shebang and os.path.basename(shebang[0]) == "env":
            shebang = shebang[1:]
        found = shutil.which(shebang[0]) if shebang else None
        if found is not None and os.path.basename(found).startswith("python"):
            return found, assigned
    raise OptionError(
        "--swap: cannot tell which Python the launched server runs; start it as `PYTHON -m vllm.entrypoints...` "
        "or `vllm serve ...` (a script whose #! line names its Python)"
    )


def _assignment(word: str) -> bool:
    name, equals, _value = word.partition("=")
    return bool(equals) and name.isidentifier()


def installed_in(python: str, assigned: dict[str, str] | None = None) -> dict[str, Any]:
    """vllm_sampler_swap.installed() as the server's Python sees it (with the variables its command sets)."""
    try:
        done = subprocess.run(
            [python, str(SOURCE), "--check"],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
            env={**os.environ, **(assigned or {})},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TargetError(f"--swap: the server's Python {python} could not be asked ({error})") from None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (ValueError, IndexError):
        found = None
    if not isinstance(found, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TargetError(f"--swap: the server's Python {python} could not read its vLLM ({tail})")
    return found


def add_swap(setup: ProbeSetup, plan: SwapPlan) -> None:
    """The swap's module beside the probe, and probes.json's "swap" naming it."""
    shutil.copyfile(SOURCE, setup.folder / SOURCE.name)
    path = setup.folder / "probes.json"
    doc = json.loads(path.read_text())
    doc["swap"] = plan.as_json()
    write_json_atomic(path, doc)


def read_swap(folder: Path) -> tuple[dict[int, np.ndarray], dict[int, dict[str, Any]]]:
    """pid -> swap-PID.tsv's rows (start_ns, end_ns, rows, path), and pid -> swap-PID.json."""
    calls: dict[int, np.ndarray] = {}
    statuses: dict[int, dict[str, Any]] = {}
    for path in folder.glob("swap-*.tsv"):
        pid = _pid(path.stem)
        if pid is not None:
            calls[pid] = _rows(path)
    for path in folder.glob("swap-*.json"):
        pid = _pid(path.stem)
        if pid is None:
            continue
        try:
            statuses[pid] = json.loads(path.read_text())
        except (OSError, ValueError):
            statuses[pid] = {"why": f"{path.name} could not be read"}
    return calls, statuses


def _pid(stem: str) -> int | None:
    tail = stem.rpartition("-")[2]
    return int(tail) if tail.isdigit() else None


def _rows(path: Path) -> np.ndarray:
    rows = []
    with open(path) as handle:
        for line in handle:
            fields = line.split("\t")
            if len(fields) == 4:
                try:
                    rows.append([int(value) for value in fields])
                except ValueError:
                    continue  # a line cut short when the process was killed mid-write
    return np.asarray(rows, dtype=np.int64).reshape(-1, 4)


def report_swap(run_dir: Path, setup: ProbeSetup) -> list[str]:
    """The swap run's A/B (profiler.analysis.probe_swap) written as swap.json in the run directory; its lines."""
    from .inject import read_probe

    calls, statuses = read_swap(setup.folder)
    result = analyse_swap(setup.probes, read_probe(setup), calls, statuses)
    written = _result_json(run_dir)
    beside = slowdown_beside(result, written)
    write_json_atomic(run_dir / "swap.json", {**dataclasses.asdict(result), "slowdown_predicted": beside})
    lines = list(result.lines)
    if beside is not None:
        lines.append(slowdown_line(beside, result))
    records = [
        record
        for record in (
            ledger_record(result, run_dir, written),
            slowdown_record(result, run_dir, written, beside),
        )
        if record is not None
    ]
    if not records:
        return lines
    path = ledger_path(run_dir)
    for record in records:
        path = append_record(record, path)
    return [*lines, f"  prediction ledger: {len(records)} predicted and measured pair(s) appended to {path}"]


def _result_json(run_dir: Path) -> ResultFile:
    try:
        found = json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return {}
    # The result.json this run has just written (RunResult.to_dict), read back: its sections' types are schema's.
    return cast(ResultFile, found) if isinstance(found, dict) else {}


class SlowdownBeside(TypedDict):
    """swap.json's `slowdown_predicted`: the slowdown's prediction for the swap's own speedup, with its inputs."""

    sensitivity: float
    sensitivity_low: float
    sensitivity_high: float
    share: float  # forward_cpu's share of a step without the swap
    speedup: float  # forward_cpu's speedup measured beside it
    gain: float
    low: float
    high: float


def slowdown_beside(result: SwapResult, written: ResultFile) -> SlowdownBeside | None:
    """The gain the same run's slowdown experiment on the sampler predicts for the swap's own speedup: its
    sensitivity x the swapped function's share of the step x (1 - 1/k), k the swapped function's speedup measured
    beside it, with the sensitivity's interval carried through; None without a resolved sampler slowdown."""
    slowdown = (((written.get("target") or {}).get("probe") or {}).get("what_if") or {}).get(
        "components"
    ) or {}
    entry = slowdown.get("sampler") or {}
    sensitivity, low, high = (
        finite_number(entry.get("sensitivity")),
        finite_number(entry.get("low")),
        finite_number(entry.get("high")),
    )
    speedup = result.forward_speedup.point if result.forward_speedup is not None else None
    share = result.forward_share
    if sensitivity is None or low is None or high is None or not speedup or share is None:
        return None
    saved = share * (1 - 1 / speedup)
    return {
        "sensitivity": sensitivity,
        "sensitivity_low": low,
        "sensitivity_high": high,
        "share": share,
        "speedup": speedup,
        "gain": sensitivity * saved,
        "low": low * saved,
        "high": high * saved,
    }


def slowdown_line(beside: SlowdownBeside, result: SwapResult) -> str:
    """One line: the slowdown-predicted gain beside the step gain the swap measured."""
    ratio = result.step_ms.ratio if result.step_ms is not None else None
    measured = (
        f"{1 - ratio.point:+.1%}"
        + (f" [{1 - ratio.high:+.1%}, {1 - ratio.low:+.1%}]" if ratio.low and ratio.high else "")
        if ratio is not None and ratio.point is not None
        else "not measured"
    )
    return (
        f"  slowdown-predicted for this swap: {beside['gain']:+.1%} [{beside['low']:+.1%}, {beside['high']:+.1%}] "
        f"of the step (sensitivity {beside['sensitivity']:.2f} [{beside['sensitivity_low']:.2f}, "
        f"{beside['sensitivity_high']:.2f}] x forward share {beside['share']:.1%} x (1 - 1/{beside['speedup']:.1f})); "
        f"measured with the swap in: {measured}"
    )


def ledger_record(
    result: SwapResult, run_dir: Path, written: ResultFile | None = None
) -> LedgerRecord | None:
    """The run's Amdahl prediction for the swapped sampler (a gain: the fraction of the step saved) beside the
    gain the A/B measured, for the prediction ledger; None when the run measured no step ratio."""
    if result.predicted_step_ratio is None:
        return None
    return _swap_record(
        result,
        run_dir,
        _result_json(run_dir) if written is None else written,
        kind="verify",
        predicted=(1 - result.predicted_step_ratio, None, None),
        method="Amdahl from the swap run's own forward_cpu share and speedup; measured by --swap's in-run A/B in the engine",
    )


def slowdown_record(
    result: SwapResult, run_dir: Path, written: ResultFile, beside: SlowdownBeside | None
) -> LedgerRecord | None:
    """The slowdown's prediction for the swap (slowdown_beside) beside the gain the A/B measured; None without one."""
    if beside is None:
        return None
    return _swap_record(
        result,
        run_dir,
        written,
        kind="slowdown",
        predicted=(beside["gain"], beside["low"], beside["high"]),
        method=(
            f"slowdown: sensitivity {beside['sensitivity']:.2f} x forward_cpu share {beside['share']:.1%} x (1 - 1/"
            f"{beside['speedup']:.1f}), k the swapped function's speedup in the same run; measured by --swap's "
            "in-run A/B in the engine"
        ),
    )


def _swap_record(
    result: SwapResult,
    run_dir: Path,
    written: ResultFile,
    *,
    kind: str,
    predicted: tuple[float, float | None, float | None],
    method: str,
) -> LedgerRecord | None:
    ratio = result.step_ms.ratio if result.step_ms is not None else None
    if ratio is None or ratio.point is None:
        return None
    scenario = (written.get("scenario") or {}).get("name") or "unknown"
    # config.model names a server run's model too (the server's, as target.server.model does).
    model = (written.get("config") or {}).get("model") or "unknown"
    return LedgerRecord(
        kind=kind,
        scenario=str(scenario),
        model=str(model),
        dtype="float32",
        component="sampler",
        predicted=predicted[0],
        predicted_low=predicted[1],
        predicted_high=predicted[2],
        measured=1 - ratio.point,
        measured_low=None if ratio.high is None else 1 - ratio.high,
        measured_high=None if ratio.low is None else 1 - ratio.low,
        health=health_text(void_reason(written.get("health"))),
        commit=None,
        run_dir=str(run_dir),
        recorded_at=now_utc(),
        method=method,
    )
