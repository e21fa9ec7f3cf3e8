"""Run a sweep's cells as Ray tasks: each reserves its own CPUs (and GPUs) so cells do not share cores, runs
in a worker's scratch folder, and sends its run directory back to the driver as one archive."""

from __future__ import annotations

import io
import os
import shutil
import signal
import tarfile
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import InferProfError, OptionError, SweepError
from ..inputs.addresses import auto_ray_address, parse_ray_address, try_connect
from ..rundir.sweepdir import run_dir_of
from .grid import Cell
from .hooks import SweepHooks

WAIT_S = 0.5  # how often the driver looks at stop_event while cells run
_worker_models = None  # a worker process builds or loads each model once, whichever cells it is given


def run_on_ray(
    runs: list[tuple[Cell, int]],
    out_dir: Path,
    *,
    address: str,
    cell_cpus: int,
    cell_gpus: float,
    hooks: SweepHooks,
    stop_event: threading.Event,
) -> None:
    """Every (cell, repeat) as a Ray task, submitted in run order; each finished one is unpacked into its run
    directory as it arrives. stop_event cancels what has not finished (lost, never half-written)."""
    ray = _import_ray()
    started_here = connect(ray, address)
    try:
        _check_resources(ray, cell_cpus, cell_gpus)
        task = ray.remote(run_cell_task).options(num_cpus=cell_cpus, num_gpus=cell_gpus, max_retries=0)
        waiting = {task.remote(cell, repeat, cell_cpus): (cell, repeat) for cell, repeat in runs}
        hooks.say(
            f"ray: {len(waiting)} runs submitted, {cell_cpus} CPU(s)"
            + (f" and {cell_gpus:g} GPU(s)" if cell_gpus else "")
            + " each"
        )
        while waiting and not stop_event.is_set():
            done, _ = ray.wait(list(waiting), num_returns=1, timeout=WAIT_S)
            for ref in done:
                cell, repeat = waiting.pop(ref)
                archive, finished = _result(ray, ref)
                if finished:
                    unpack(archive, run_dir_of(out_dir, cell.id, repeat))
                hooks.run_done(cell, repeat, finished)
        for ref in waiting:
            ray.cancel(ref, force=True)
    finally:
        if started_here:
            ray.shutdown()


def run_cell_task(cell: Cell, repeat: int, cpus: int) -> tuple[bytes, bool]:
    """In a Ray worker: run the cell, torch limited to its reserved CPUs; return its run directory packed."""
    global _worker_models
    from ..session.runner import ModelCache
    from .cell import run_cell

    if _worker_models is None:
        _worker_models = ModelCache()
    cell = replace(cell, options=replace(cell.options, threads=cell.options.threads or cpus))
    # Ray workers block SIGINT, and a child inherits the mask: py-spy, which writes its samples on SIGINT,
    # would never hear it. Unblocked while the cell runs, restored after.
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        with tempfile.TemporaryDirectory(prefix="infer-prof-cell-") as scratch:
            run_dir = Path(scratch) / "run"
            finished = run_cell(
                cell, repeat, run_dir, models=_worker_models, stop_event=threading.Event(), runner="ray"
            )
            return pack(run_dir), finished
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def pack(run_dir: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(run_dir, arcname=".")
    return buffer.getvalue()


def unpack(archive: bytes, run_dir: Path) -> None:
    """Extract beside `run_dir`, then rename into place: a reader never sees half a run directory."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.incoming-", dir=run_dir.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as source:
            if hasattr(tarfile, "data_filter"):
                source.extractall(incoming, filter="data")
            else:  # Python 3.11.0-3.11.3 (Debian 12's python3 is 3.11.2) has no extraction filters
                source.extractall(incoming, members=_plain_members(source))
        if run_dir.exists():
            shutil.rmtree(run_dir)
        os.replace(incoming, run_dir)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def _plain_members(source: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's members when each is a file or folder inside it (what the "data" filter lets
    through of a run directory); SweepError otherwise, before anything is written."""
    members = source.getmembers()
    for member in members:
        if (
            not (member.isfile() or member.isdir())
            or member.name.startswith("/")
            or ".." in Path(member.name).parts
        ):
            raise SweepError(
                f"a run directory sent back holds {member.name!r}, which is not a plain file inside it"
            )
    return members


def try_cluster(address: str) -> None:
    """OptionError within seconds when nothing listens at the cluster's address (Ray itself retries a
    connection for minutes); "local" starts its own, and "auto" with no cluster recorded fails fast in Ray."""
    cluster = parse_ray_address(address) if address != "auto" else auto_ray_address()
    if cluster is not None:
        try_connect(
            cluster.host,
            cluster.port,
            f"--ray {address}: cannot join a Ray cluster",
            fix="start one with `ray start --head`, or use --ray local",
        )


def connect(ray: Any, address: str) -> bool:
    """Join the cluster at `address` ("auto": the one this machine belongs to; "local": start one here);
    True when this call started Ray (and so must shut it down). A Ray already initialised is used as it is."""
    if ray.is_initialized():
        return False
    try_cluster(address)
    settings: dict[str, bool] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    try:
        if address == "local":
            ray.init(**settings)
        else:
            ray.init(address=address, **settings)
    except (ConnectionError, RuntimeError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OptionError(
            f"--ray {address}: cannot join a Ray cluster ({first}); start one with `ray start --head`, "
            "or use --ray local"
        ) from None
    return True


def _check_resources(ray: Any, cell_cpus: int, cell_gpus: float) -> None:
    """A cell that asks for more than the cluster has would wait forever: refuse it before submitting."""
    resources = ray.cluster_resources()
    cpus, gpus = resources.get("CPU", 0), resources.get("GPU", 0)
    if cell_cpus > cpus:
        raise OptionError(
            f"--cell-cpus {cell_cpus}: the Ray cluster has {cpus:g} CPU(s); ask for at most {cpus:g}"
        )
    if cell_gpus > gpus:
        raise OptionError(
            f"--cell-gpus {cell_gpus:g}: the Ray cluster has {gpus:g} GPU(s); ask for at most {gpus:g}"
        )


def _result(ray: Any, ref: Any) -> tuple[bytes, bool]:
    """A task's archive; a user error raised in the worker (bad model file there) is raised here as itself."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, InferProfError):
            raise cause from None
        raise


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise OptionError(
            "--ray needs Ray, an optional extra: pip install -e '.[ray]' (or pip install ray)"
        ) from None
    return ray
