"""Set-up work runs on a thread that exits, so no OpenMP pool is left on the caller's thread (engine.setup_thread)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from infer_prof.engine.setup_thread import run_on_setup_thread

REPO = Path(__file__).resolve().parents[2]


def test_returns_the_value_from_another_thread() -> None:
    caller = threading.get_ident()
    assert run_on_setup_thread(lambda: threading.get_ident()) != caller
    assert run_on_setup_thread(lambda: 41 + 1) == 42


def test_reraises_the_work_s_error_in_the_caller() -> None:
    def fail() -> None:
        raise ValueError("bad GGUF")

    with pytest.raises(ValueError, match="bad GGUF"):
        run_on_setup_thread(fail)


# In a fresh process with two torch threads: the OS threads left once set-up is over. A parallel op on the
# main thread itself leaves one OpenMP worker behind (the control case proves the probe can fail).
_PROBE = textwrap.dedent(
    """
    import os, sys, time
    import torch
    torch.set_num_threads(2)
    from infer_prof.engine import loader as models
    from infer_prof.engine.config import EngineConfig, python_components
    from infer_prof.engine.engine import Engine

    def settled_count(baseline):
        # Exiting pool workers take a moment to go; wait for the count to come back (or give up).
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(os.listdir("/proc/self/task")) > baseline:
            time.sleep(0.02)
        return len(os.listdir("/proc/self/task"))

    baseline = len(os.listdir("/proc/self/task"))
    case = sys.argv[1]
    if case == "control":
        models._load("synthetic:tiny", models._Build("float32", 0, "cpu", lambda message: None, None))
    else:
        loaded = models.load_model("synthetic:tiny")
        if case == "engine":
            config = EngineConfig(kv_blocks=4096)  # a cache big enough for a parallel fill
            scheduler, kv_alloc, sampler = python_components(config, loaded.model)
            Engine(loaded.model, loaded.tokenizer, scheduler=scheduler, kv_alloc=kv_alloc,
                   sampler=sampler, config=config)
    print(settled_count(baseline) - baseline)
    """
)


def _threads_left(case: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, case],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])


def test_loading_on_the_calling_thread_leaves_an_openmp_worker() -> None:
    assert _threads_left("control") >= 1


@pytest.mark.parametrize("case", ["load", "engine"])
def test_load_model_and_engine_set_up_leave_no_thread_behind(case: str) -> None:
    assert _threads_left(case) == 0
