"""`infer-prof doctor`: what this installation can measure and run, and what is missing."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from .app import app

Row = tuple[str, str, str]  # capability, status, detail


@app.command()
def doctor(
    torch: Annotated[
        bool, typer.Option("--torch", help="Also import torch (seconds) to report its threads and CUDA.")
    ] = False,
) -> None:
    """Print what this installation can do: native paths built, py-spy, GPU, default model."""
    raise typer.Exit(run_doctor(with_torch=torch))


def run_doctor(*, with_torch: bool = False) -> int:
    """Print one row per capability; always exits 0 (missing pieces are reported, not fatal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table("capability", "status", title="infer-prof doctor")
    table.add_column("detail", overflow="fold")  # a path is folded onto the next line, never cut
    for row in doctor_rows(with_torch=with_torch):
        table.add_row(*row)
    Console().print(table)
    return 0


def doctor_rows(*, with_torch: bool = False) -> list[Row]:
    """The rows `doctor` prints, in order; torch is imported only `with_torch` (it takes seconds)."""
    import platform

    from ..profiler.rundir.environment import gpu_info

    rows: list[Row] = [("python", "ok", platform.python_version()), torch_row(with_torch), *native_rows()]
    # The sampling collector's rule (collectors/sampling.py find_py_spy, which this must not import: torch):
    # on PATH, else next to this Python, as in a virtual environment run without activating it.
    beside = Path(sys.executable).parent / "py-spy"
    py_spy = shutil.which("py-spy") or (str(beside) if beside.is_file() else None)
    rows.append(
        (
            "py-spy",
            "ok" if py_spy else "missing",
            py_spy or "pip install py-spy (sampling collector is skipped without it)",
        )
    )
    rows.append(("realtime sampling", *_realtime_status()))
    gpu = gpu_info()
    rows.append(
        (
            "gpu (NVML)",
            "ok" if gpu else "none",
            f"{gpu['name']}, driver {gpu['driver']}"
            if gpu
            else "no NVIDIA GPU/driver: CPU kernels are measured instead",
        )
    )
    rows.append(("default model", *default_model_status()))
    return rows


def torch_row(with_torch: bool) -> Row:
    """torch's version from its package metadata; with_torch: imported, with its threads, CUDA and the import's time."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ("torch", "missing", "pip install torch (the engine runs on it)")
    if not with_torch:
        return (
            "torch",
            "ok",
            f"{version} (not imported; `doctor --torch` imports it to report threads and CUDA)",
        )
    started = time.perf_counter()
    import torch

    seconds = time.perf_counter() - started
    cuda = "CUDA available" if torch.cuda.is_available() else "no CUDA"
    return (
        "torch",
        "ok",
        f"{torch.__version__}, {torch.get_num_threads()} threads, {cuda}; import took {seconds:.1f} s",
    )


def native_rows() -> list[Row]:
    """The C twins' library (where it was loaded from, or why not) and one row per component."""
    from ..native_paths.loader import COMPONENT_SYMBOLS, available

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
    from ..profiler.session.machine import realtime_allowed

    if realtime_allowed():
        return ("ok", "deep mode's py-spy runs under SCHED_FIFO and samples when due")
    return (
        "no",
        "needs root or CAP_SYS_NICE: deep-mode samples land late on a busy machine and under-count kernels",
    )


def default_model_status() -> tuple[str, str]:
    """Whether the default model's GGUF is on this machine (installed package or the model cache)."""
    # A rename in engine.catalog must fail loudly here rather than print "unknown": the import is not guarded.
    from ..engine.catalog import cache_dir, local_gguf

    path = local_gguf()
    if path is None:
        return ("not local", f"downloaded with pip on first use into {cache_dir()}")
    return ("ok", str(path))
