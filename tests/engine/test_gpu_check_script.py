"""benchmarks/gpu_check.py, the prepared check for a GPU machine, fails loudly where it cannot check anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the script on a machine without CUDA")
def test_the_gpu_check_fails_without_cuda(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "check")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "FAILED: no CUDA device" in done.stdout
    assert not (tmp_path / "check").exists()  # nothing half-done is left behind


def test_the_gpu_check_refuses_zero_rounds() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "--requests and --rounds must be at least 1" in done.stderr
