"""`infer-prof doctor`: what this installation can measure and run, and what is missing."""

from __future__ import annotations

import shutil

import typer
from rich.console import Console
from rich.table import Table

from profiler.cli.app import app

Row = tuple[str, str, str]  # capability, status, detail


@app.command()
def doctor() -> None:
    """Print what this installation can do: native paths built, py-spy, GPU, default model."""
    raise typer.Exit(run_doctor())


def run_doctor() -> int:
    """Print one row per capability; always exits 0 (missing pieces are reported, not fatal)."""
    table = Table("capability", "status", title="infer-prof doctor")
    table.add_column("detail", overflow="fold")  # a path is folded onto the next line, never cut
    for row in doctor_rows():
        table.add_row(*row)
    Console().print(table)
    return 0


def doctor_rows() -> list[Row]:
    """The rows `doctor` prints, in order."""
    from profiler.rundir.environment import describe_environment

    env = describe_environment()
    rows: list[Row] = [
        ("python", "ok", env["python"]),
        ("torch", "ok", f"{env['torch_version']}, {env['torch_threads']} threads"),
        *native_rows(),
    ]
    py_spy = shutil.which("py-spy")
    rows.append(("py-spy", "ok" if py_spy else "missing",
                 py_spy or "pip install py-spy (sampling collector is skipped without it)"))  # fmt: skip
    rows.append(("realtime sampling", *_realtime_status()))
    gpu = env["gpu"]
    rows.append(("gpu (NVML)", "ok" if gpu else "none",
                 f"{gpu['name']}, driver {gpu['driver']}" if gpu else "no NVIDIA GPU/driver: CPU kernels are measured instead"))  # fmt: skip
    rows.append(("default model", *default_model_status()))
    return rows


def native_rows() -> list[Row]:
    """The C twins' library (where it was loaded from, or why not) and one row per component."""
    from native_paths.loader import COMPONENT_SYMBOLS, available

    status = available()
    # available() also carries "built", "path" and "reason" beside the components: one row for the
    # library, then the components alone (each a bool), so a loaded library never reads "missing".
    reason = str(status.get("reason") or "")
    if status.get("built"):
        rows: list[Row] = [("native library", "built", str(status.get("path") or "loaded"))]
    else:
        rows = [("native library", "missing", f"{reason or 'not built'}; the Python twins run instead")]
    for component in COMPONENT_SYMBOLS:
        if status.get(component) is True:
            rows.append((f"native {component}", "built", "C twin loaded"))
        else:
            why = reason if status.get("built") else "the library is not built"
            rows.append((f"native {component}", "missing", f"{why}; the Python twin runs instead"))
    return rows


def _realtime_status() -> tuple[str, str]:
    """Whether deep mode's sampler may take SCHED_FIFO, which it needs to sample on time."""
    from profiler.collectors.sampling import realtime_allowed

    if realtime_allowed():
        return ("ok", "deep mode's py-spy runs under SCHED_FIFO and samples when due")
    return ("no", "needs root or CAP_SYS_NICE: deep-mode samples land late on a busy machine and under-count kernels")


def default_model_status() -> tuple[str, str]:
    """Whether the default model's GGUF is on this machine (installed package or the model cache)."""
    # engine.models keeps its lookup private (the engine's own tests use it too); a rename must fail
    # loudly here rather than print "unknown", so the import is not guarded.
    from engine.models import _local_smollm2, cache_dir

    path = _local_smollm2()
    if path is None:
        return ("not local", f"downloaded with pip on first use into {cache_dir()}")
    return ("ok", str(path))
