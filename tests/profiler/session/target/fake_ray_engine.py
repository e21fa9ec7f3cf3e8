"""The fake Ray engine's model worker: an actor class named as vLLM's (RayWorkerWrapper) whose step is busy Python, so py-spy on its node sees it work."""

from __future__ import annotations

import os
import time

STEP_S = 0.004  # busy Python per step
# The engine table the Ray tests give infer-prof (INFER_PROF_ENGINE_TABLES), as TOML: the worker's step is a
# model worker's work, the server's wait on its workers (Ray's get, whose caller says why) the engine waiting on
# them; Ray's own loop in a worker waiting for its next call is idle. With --probe, the probe times the worker's step
# inside each worker (the server's own loop runs in __main__, which the probe's import hook never sees: no step probe).
TABLE = """
name = "fake-ray"
detect = ["fake_ray_(engine|server)\\\\.py$"]
components = [["model", "fake_ray_engine\\\\.py$", "execute_model"]]
roles = [
  ["model worker", "fake_ray_engine\\\\.py$", "execute_model"],
  ["engine loop", "fake_ray_server\\\\.py$", "engine_step"],
]
waits = [["worker", "fake_ray_server\\\\.py$", "engine_step"]]
wait_frames = [["idle", "(^|/)ray/_private/(worker|client_mode_hook|auto_init_hook)\\\\.py$", ""]]
probes = [["model", "fake_ray_engine", "RayWorkerWrapper.execute_model"]]
"""


class RayWorkerWrapper:
    """One rank of the fake engine: each step burns STEP_S of Python and returns a token."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def where(self) -> tuple[int, int]:
        return self.rank, os.getpid()

    def execute_model(self) -> str:
        deadline = time.perf_counter() + STEP_S
        while time.perf_counter() < deadline:
            sum(index * index for index in range(200))
        return "x"
