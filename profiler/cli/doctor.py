"""`infer-prof doctor`: what this installation can measure and run, and what is missing."""

from __future__ import annotations

import shutil

import typer
from rich.console import Console
from rich.table import Table

from profiler.cli.app import app


@app.command()
def doctor() -> None:
    """Print what this installation can do: native paths built, py-spy, GPU, default model."""
    raise typer.Exit(run_doctor())


def run_doctor() -> int:
    """Print one row per capability; always exits 0 (missing pieces are reported, not fatal)."""
    from native_paths.loader import available
    from profiler.rundir.environment import describe_environment

    console = Console()
    env = describe_environment()
    table = Table("capability", "status", "detail", title="infer-prof doctor")
    table.add_row("python", "ok", env["python"])
    table.add_row("torch", "ok", f"{env['torch_version']}, {env['torch_threads']} threads")
    for component, status in available().items():
        ok = status is True
        table.add_row(f"native {component}", "built" if ok else "missing", "C twin loaded" if ok else f"{status}; the Python twin runs instead")
    py_spy = shutil.which("py-spy")
    table.add_row("py-spy", "ok" if py_spy else "missing", py_spy or "pip install py-spy (sampling collector is skipped without it)")
    table.add_row("realtime sampling", *_realtime_status())
    gpu = env["gpu"]
    table.add_row("gpu (NVML)", "ok" if gpu else "none", f"{gpu['name']}, driver {gpu['driver']}" if gpu else "no NVIDIA GPU/driver: CPU kernels are measured instead")
    table.add_row("default model", *_default_model_status())
    console.print(table)
    return 0


def _realtime_status() -> tuple[str, str]:
    """Whether deep mode's sampler may take SCHED_FIFO, which it needs to sample on time."""
    from profiler.collectors.sampling import realtime_allowed

    if realtime_allowed():
        return ("ok", "deep mode's py-spy runs under SCHED_FIFO and samples when due")
    return ("no", "needs root or CAP_SYS_NICE: deep-mode samples land late on a busy machine and under-count kernels")


def _default_model_status() -> tuple[str, str]:
    try:
        from engine.models import find_local_smollm2
    except ImportError:
        return ("unknown", "engine.models has no local lookup")
    path = find_local_smollm2()
    if path is None:
        return ("not local", "downloaded with pip on first use into ~/.cache/infer-prof/models/")
    return ("ok", str(path))
