"""Describe the machine a run happened on: CPU, threads, torch, GPU and the git revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .schema import Environment, Gpu


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpu_info() -> Gpu | None:
    """The first NVIDIA GPU through NVML, or None when there is no GPU or no driver."""
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no device: all mean "no GPU here"
        return None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {
            "name": name.decode() if isinstance(name, bytes) else name,
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "memory_mib": int(memory.total // (1024 * 1024)),
        }
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def git_revision(start: Path | None = None) -> str | None:
    """The git revision of the working directory (or of infer-prof's checkout), when there is one."""
    for folder in (start or Path.cwd(), Path(__file__).resolve().parent.parent):
        try:
            out = subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=5,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0 and out.stdout.strip():
            dirty = subprocess.run(
                ["git", "status", "--porcelain"], cwd=folder, capture_output=True, text=True, timeout=5
            )
            return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    return None


def describe_environment() -> Environment:
    import torch

    try:
        version = metadata.version("infer-prof")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda_available": bool(torch.cuda.is_available()),
        "gpu": gpu_info(),
        "git_revision": git_revision(),
        "infer_prof_version": version,
    }
