"""How torch's OpenMP threads wait and how many run: chosen before torch loads libgomp, unless the user chose."""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from typing import TypedDict

# libgomp's default has a waiting thread spin ~300,000 iterations before it sleeps: the fastest on a quiet
# machine, where OMP_WAIT_POLICY=PASSIVE pays a wake-up in each of the ~300 parallel regions of a decode
# step. When another process holds one of the cores, every region waits for the descheduled thread while
# its partner burns the other core. So the spin stays, and the engine thread runs torch on one thread
# while other work wants the cores (engine.thread_governor). docs/measurements.md has the figures that
# chose this (benchmarks/bench_contention.py).
DEFAULT_WAIT_POLICY = "libgomp default (spin)"
WHY = (
    "spinning is fastest on a quiet machine; one thread while other work wants the cores keeps a busy "
    "neighbour from stalling every parallel region (benchmarks/bench_contention.py, docs/measurements.md)"
)
OPT_OUT = "INFER_PROF_OMP_POLICY"  # "off": libgomp's default and a fixed thread count (how the benchmark measures it)


class WaitPolicy(TypedDict, total=False):
    """Who chose how torch's threads wait and how many run (choose_wait_policy's record, pin_threads' changes)."""

    wait_policy: str
    set_by: str  # "infer-prof", "user", or the opt-out variable
    adaptive_threads: bool
    why: str  # infer-prof's choice only
    applied: bool
    threads_set_by: str  # "user" after pin_threads


_decision: WaitPolicy = {}


def choose_wait_policy(
    environ: MutableMapping[str, str] | None = None, torch_loaded: bool | None = None
) -> WaitPolicy:
    """Who decides how torch's threads wait and how many run, as a record for the run's result: the user
    (OMP_WAIT_POLICY or GOMP_SPINCOUNT set, or the opt-out off) or infer-prof (libgomp's spin, with the
    thread count adapted to contention). `applied` is False when torch was loaded before this call, since
    libgomp reads its variables once, when torch loads it. Nothing is written to the environment, so that
    programs started from here run as the user had them."""
    env = os.environ if environ is None else environ
    loaded = ("torch" in sys.modules) if torch_loaded is None else torch_loaded
    record: WaitPolicy
    if env.get(OPT_OUT, "").lower() == "off":
        record = {
            "wait_policy": env.get("OMP_WAIT_POLICY", "libgomp default"),
            "set_by": f"{OPT_OUT}=off",
            "adaptive_threads": False,
        }
    elif "OMP_WAIT_POLICY" in env or "GOMP_SPINCOUNT" in env:
        chosen = env.get("OMP_WAIT_POLICY") or f"GOMP_SPINCOUNT={env['GOMP_SPINCOUNT']}"
        record = {"wait_policy": chosen, "set_by": "user", "adaptive_threads": False}
    else:
        record = {
            "wait_policy": DEFAULT_WAIT_POLICY,
            "set_by": "infer-prof",
            "adaptive_threads": True,
            "why": WHY,
        }
    record["applied"] = not loaded
    return record


def pin_threads(threads: int) -> None:
    """The user chose the thread count (--threads): set it, and keep the engine from adapting it."""
    import torch

    wait_policy_decision()
    _decision["adaptive_threads"] = False
    _decision["threads_set_by"] = "user"
    torch.set_num_threads(threads)


def adaptive_threads() -> bool:
    """Whether the engine thread may lower torch to one thread under contention (engine.thread_governor)."""
    return bool(wait_policy_decision().get("adaptive_threads"))


def wait_policy_decision() -> WaitPolicy:
    """The decision made when the engine package was first imported in this process."""
    if not _decision:
        _decision.update(choose_wait_policy())
    return _decision.copy()
