"""The fake server's engine loop, for the in-process probe's tests: a step that schedules, runs a "model" and samples, each a function an engine table can name."""

from __future__ import annotations

import os
import time

SCHEDULE_S = 0.001  # busy Python
MODEL_S = 0.004  # asleep, as a model's kernels would be off the interpreter
SAMPLE_S = 0.001  # busy Python
IDLE_S = 0.002  # between steps


def busy(seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        sum(index * index for index in range(50))


class Batch:
    """What a schedule returns: its size in tokens, which the engine table names as the step's size."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens


class Loop:
    def __init__(self) -> None:
        self.steps = 0

    def schedule(self) -> Batch:
        busy(SCHEDULE_S)
        self.steps += 1
        return Batch(4 if self.steps // 8 % 2 else 8)  # the batch changes every eight steps

    def model(self) -> None:
        time.sleep(MODEL_S)

    def sample(self) -> None:
        busy(SAMPLE_S)

    def step(self) -> None:
        self.schedule()
        self.model()
        self.sample()


def run_until_orphaned() -> None:
    """Step until the parent process is gone."""
    parent, loop = os.getppid(), Loop()
    while os.getppid() == parent:
        loop.step()
        time.sleep(IDLE_S)


# The engine table the probe tests give infer-prof (INFER_PROF_ENGINE_TABLES), as TOML.
TABLE = """
name = "fake-loop"
probes = [
  ["step", "fake_engine_loop", "Loop.step"],
  ["scheduler", "fake_engine_loop", "Loop.schedule"],
  ["model", "fake_engine_loop", "Loop.model"],
  ["sampler", "fake_engine_loop", "Loop.sample"],
]
step_size = ["fake_engine_loop", "Loop.schedule", "tokens"]
"""
