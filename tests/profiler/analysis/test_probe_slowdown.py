"""Slowdown experiments through the probe, in two real processes that load it (no server, no HTTP): a delay on the
loop's serial sampler comes back one for one in the step (sensitivity near 1), a delay on an output loop in another
process that overlaps the steps does not (near 0, with headroom), each asserted with its interval; the delays the
probe added per call are the ones it was asked for; and the turns, blocks and accuracy figures from fixed records."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from infer_prof.errors import TargetError
from infer_prof.profiler.analysis.engine_tables import load_table
from infer_prof.profiler.analysis.probe_slowdown import (
    _accuracy,
    analyse_slowdowns,
    group_turns,
    outermost_steps,
    sensitivity_figures,
)
from infer_prof.profiler.analysis.sensitivity import LevelSensitivity, Sensitivity
from infer_prof.profiler.rundir.schema import ProbeWhatIf
from infer_prof.profiler.session.target.inject import WhatIf, prepare_probe, read_probe

# The loop steps: the model (asleep, off the interpreter), then the sampler (busy Python, on the step's path). The
# output loop, in a process of its own, busies Python beside the steps as vLLM's API server's output processor does.
MODULE = """
import os
import time


def busy(seconds):
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class Loop:
    def __init__(self, model_s, sample_s):
        self.model_s, self.sample_s = model_s, sample_s

    def model(self):
        time.sleep(self.model_s)

    def sample(self):
        busy(self.sample_s)

    def step(self):
        self.model()
        self.sample()


class Output:
    def process(self, seconds):
        busy(seconds)


def own_core(cpu):
    # Pinned, and ahead of every other program on that core where allowed (nice -20 needs root): with the rest of
    # the machine busy, the output loop's delay would otherwise take CPU from the steps through the scheduler,
    # and the overlapped component would read a sensitivity well above 0 (rightly, on such a machine).
    os.sched_setaffinity(0, {cpu})
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
    except OSError:
        pass


def run_loop(seconds, cpu, model_s, sample_s):
    own_core(cpu)
    loop, end = Loop(model_s, sample_s), time.perf_counter() + seconds
    while time.perf_counter() < end:
        loop.step()


def run_output(seconds, cpu, busy_s, pause_s):
    own_core(cpu)
    output, end = Output(), time.perf_counter() + seconds
    while time.perf_counter() < end:
        output.process(busy_s)
        time.sleep(pause_s)
"""

TABLE = """
name = "slowloop"
probes = [
  ["step", "slowloop", "Loop.step"],
  ["model", "slowloop", "Loop.model"],
  ["sampler", "slowloop", "Loop.sample"],
  ["detokenizer", "slowloop", "Output.process"],
]
"""
RUN_S = 3.0


def _slowdown(
    tmp_path: Path, what_if: WhatIf, loop: tuple[float, float], output: tuple[float, float]
) -> ProbeWhatIf:
    """Run the loop (model, sample seconds) and the output loop (busy, pause seconds) with the probe, each on a core
    of its own: the output loop's delay then takes no CPU from the steps (on one core, or a machine whose every core
    is busy, it would, and the slowdown would rightly say so)."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "slowloop.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "slowloop.toml").write_text(TABLE)
    setup = prepare_probe(tmp_path, (load_table(tmp_path / "slowloop.toml"),), what_if)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(setup.folder), str(tmp_path / "modules")]),
        INFER_PROF_PROBE_DIR=str(setup.folder),
    )
    first, second = sorted(os.sched_getaffinity(0))[:2]
    calls = [
        f"run_output({RUN_S}, {first}, {output[0]}, {output[1]})",
        f"run_loop({RUN_S}, {second}, {loop[0]}, {loop[1]})",
    ]
    processes = [
        subprocess.Popen([sys.executable, "-c", f"import slowloop; slowloop.{call}"], env=env, cwd=tmp_path)
        for call in calls
    ]
    for process in processes:
        assert process.wait(timeout=60) == 0
    section = analyse_slowdowns(setup.probes, read_probe(setup), (0, 2**62))
    assert section is not None
    print("\n".join(section["lines"]))
    return section


TWO_CORES = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the two processes need a core each")


@pytest.mark.slow
@TWO_CORES
def test_a_serial_sampler_reads_about_one(tmp_path: Path) -> None:
    section = _slowdown(
        tmp_path, WhatIf(("sampler",), levels=(0.5, 1.0), turn_steps=1), (0.002, 0.002), (0.001, 0.003)
    )
    serial = section["components"]["sampler"]
    assert serial["path"] == "step" and serial["units"] == "steps"
    # Near 1: its interval inside [0.6, 1.4], on a machine whose other load moves the steps (near 0 is far outside).
    assert 0.6 <= serial["low"] <= serial["sensitivity"] <= serial["high"] <= 1.4
    assert [level["level"] for level in serial["levels"]] == [0.5, 1.0]
    # A 10x faster sampler saves its sensitivity x its share x 0.9 of the step.
    gain = serial["gain"]
    assert gain is not None and gain["low"] <= gain["gain"] <= gain["high"]
    assert gain["gain"] == pytest.approx(serial["sensitivity"] * serial["share"] * 0.9)
    assert serial["accuracy"]["calls"] > 50


@pytest.mark.slow
@TWO_CORES
def test_an_output_loop_overlapping_the_steps_in_another_process_reads_about_zero(tmp_path: Path) -> None:
    section = _slowdown(
        tmp_path, WhatIf(("detokenizer",), levels=(1.0, 2.0), turn_steps=4), (0.004, 0.0005), (0.003, 0.003)
    )
    overlapped = section["components"]["detokenizer"]
    assert overlapped["path"] == "beside"
    # Near 0: its interval inside [-0.5, 0.5], apart from the serial sampler's [0.6, 1.4] (3 s of steps on a machine
    # whose other load moves them: under three busy loops the interval's ends reached -0.36 and 0.34).
    assert -0.5 <= overlapped["low"] <= overlapped["sensitivity"] <= overlapped["high"] <= 0.5
    headroom = overlapped["headroom"]
    assert headroom is not None and headroom["measured_x"] is not None and headroom["extrapolated_x"] > 1.5
    assert overlapped["accuracy"]["calls"] > 20


ACCURACY = """
import slowloop

loop = slowloop.Loop(0.0, 0.0002)
for _ in range(2000):
    loop.step()
"""


@pytest.mark.slow
def test_the_delay_added_per_call_is_the_one_asked_for(tmp_path: Path) -> None:
    """Calls of 0.2 ms delayed by half and all of it: the median call's added time within 5% of the requested.
    (The median: a call whose thread is preempted mid-delay returns late, by as long as the preemption.)"""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "slowloop.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "slowloop.toml").write_text(TABLE)
    setup = prepare_probe(
        tmp_path, (load_table(tmp_path / "slowloop.toml"),), WhatIf(("sampler",), levels=(0.5, 1.0))
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(setup.folder), str(tmp_path / "modules")]),
        INFER_PROF_PROBE_DIR=str(setup.folder),
    )
    subprocess.run([sys.executable, "-c", ACCURACY], env=env, cwd=tmp_path, check=True, timeout=60)
    (delays,) = [entry["delays"] for entry in read_probe(setup).values() if "delays" in entry]
    accuracy = _accuracy(delays)
    # 1 a a 1 after the undelayed steps that measure the share: half the others delayed
    assert accuracy is not None and accuracy["calls"] == (2000 - WhatIf(("sampler",)).steps_measured()) // 2
    assert accuracy["median_error"] <= 0.05 and accuracy["within_5pct"] >= 0.5
    print(accuracy)


# Fixed records: one loop process whose steps took turns 1 a a 1 (two steps a turn) with a serial component's
# delays inside the delayed steps, so the analysis is checked without timing anything.
def _fixed_processes(pattern: str = "1aa1") -> tuple[list[dict[str, str]], dict[int, dict[str, object]]]:
    probes = [
        {"component": "step", "module": "m", "function": "Loop.step"},
        {"component": "sampler", "module": "m", "function": "Loop.sample"},
    ]
    records, delays, turns = [], [], []
    at, rng = 1_000_000, np.random.default_rng(3)
    order = [ord(c) for c in pattern] * (160 // len(pattern))
    for number, state in enumerate(order):
        for _ in range(2):
            turns.append((at - 10, state))
            sample = int(1_000_000 + rng.integers(0, 50_000))  # 1 ms, and a little noise
            sample //= (
                4 if state == ord("S") else 1
            )  # a swap's turn (--swap beside --what-if): a faster sampler
            delay = sample // 2 if state == ord("a") else 0
            model = 3_000_000
            records.append((7, 1, at + model, at + model + sample, 1))
            if delay:
                delays.append(
                    (
                        7,
                        1,
                        at + model,
                        at + model + sample,
                        at + model + sample + 100,
                        at + model + sample + 100 + delay,
                        delay,
                        state,
                    )
                )
            records.append((7, 0, at, at + model + sample + delay + 200, 1))
            at += model + sample + delay + 1_000_000
        del number
    status = {
        "what_if": {"experiments": [["sampler", 0.5]], "turn_steps": 2, "delayed": [1], "overshoot_ns": 50}
    }
    process = {
        "records": np.array(records, dtype=np.int64),
        "delays": np.array(delays, dtype=np.int64),
        "turns": np.array(turns, dtype=np.int64),
        "status": status,
    }
    return probes, {11: process}


def test_fixed_records_give_a_serial_sensitivity_of_one_and_exact_accuracy() -> None:
    probes, processes = _fixed_processes()
    section = analyse_slowdowns(probes, processes, (0, 2**62), resamples=500)
    assert section is not None and section["turn_steps"] == 2 and section["turns"] == 160
    entry = section["components"]["sampler"]
    assert entry["path"] == "step" and entry["units"] == "steps"
    assert entry["sensitivity"] == pytest.approx(1.0, abs=0.01)
    assert entry["low"] <= 1.0 <= entry["high"]
    assert entry["accuracy"] == {
        "calls": 160,
        "requested_ms": pytest.approx(entry["accuracy"]["added_ms"]),
        "added_ms": entry["accuracy"]["added_ms"],
        "ratio": 1.0,
        "median_error": 0.0,
        "within_5pct": 1.0,
    }
    assert entry["share"] == pytest.approx(1.025 / 4.0252, rel=0.02)
    assert entry["gain"]["gain"] == pytest.approx(entry["sensitivity"] * entry["share"] * 0.9)


def test_a_level_that_did_not_slow_the_response_counts_as_unmoved_even_when_its_interval_misses_zero() -> (
    None
):
    # Tightly paired turns give narrow intervals: a level whose response drifted a hair below zero, or rose by under
    # 5% of its delay, did not measurably slow the response; one that moved it by a third of its delay did.
    levels = (
        LevelSensitivity(1.0, -0.02, -0.03, -0.01, 36),
        LevelSensitivity(2.0, 0.03, 0.02, 0.04, 36),
        LevelSensitivity(4.0, 0.3, 0.2, 0.4, 36),
        LevelSensitivity(8.0, 0.5, None, None, 1),
    )
    figures = sensitivity_figures(Sensitivity("detokenizer", 0.2, 0.1, 0.3, levels, linear=False, pairs=109))
    assert [level["within_noise"] for level in figures["levels"]] == [True, True, False, False]


def test_a_swaps_turns_beside_the_slowdown_are_neither_delayed_nor_off() -> None:
    probes, processes = _fixed_processes("1aa11SS1")
    section = analyse_slowdowns(probes, processes, (0, 2**62), resamples=500)
    assert section is not None
    entry = section["components"]["sampler"]
    assert entry["sensitivity"] == pytest.approx(1.0, abs=0.01)
    assert entry["share"] == pytest.approx(1.025 / 4.0252, rel=0.02)  # the swap's faster turns are not in it


def test_turns_group_steps_by_the_turn_they_took() -> None:
    steps = np.array([[1, 0, 100, 110, 1], [1, 0, 120, 130, 1], [1, 0, 140, 150, 1], [1, 0, 160, 170, 1]])
    turns = np.array([[99, ord("1")], [119, ord("a")], [139, ord("a")], [159, ord("1")]])
    blocks = group_turns(steps, turns, 2)
    assert [(block.number, block.state, block.first, block.last) for block in blocks] == [
        (0, ord("1"), 0, 1),
        (1, ord("a"), 2, 3),
    ]
    assert (blocks[0].start_ns, blocks[0].end_ns) == (
        100,
        140,
    )  # a turn's slice runs to the next turn's start
    nested = np.array([[1, 0, 100, 200, 1], [1, 0, 110, 150, 1], [1, 0, 210, 220, 1]])
    assert outermost_steps(nested, [0])[:, 2].tolist() == [100, 210]


def test_what_if_names_a_component_the_probes_time(tmp_path: Path) -> None:
    (tmp_path / "slowloop.toml").write_text(TABLE)
    table = load_table(tmp_path / "slowloop.toml")
    with pytest.raises(TargetError, match="--what-if scheduler: the engine tables time no such component"):
        prepare_probe(tmp_path, (table,), WhatIf(("scheduler",)))
    with pytest.raises(TargetError, match="levels"):
        prepare_probe(tmp_path, (table,), WhatIf(("sampler",), levels=(0.0,)))
    setup = prepare_probe(tmp_path, (table,), WhatIf(("sampler", "detokenizer")))
    assert (
        setup.what_if is not None and setup.what_if.steps_a_turn() == 8
    )  # the detokenizer runs beside the loop
    assert WhatIf(("sampler",)).steps_a_turn() == 1


CORO_TABLE = """
name = "coro"
probes = [
  ["step", "coromod", "Loop.step"],
  ["api", "coromod", "handle"],
  ["sampler", "coromod", "Loop.sample"],
]
"""
CORO_MODULE = """
import asyncio


async def handle():
    return 1


class Loop:
    def sample(self):
        return sum(range(1000))

    def step(self):
        asyncio.run(handle())
        self.sample()
"""


def test_a_coroutine_named_by_what_if_is_timed_but_listed_as_not_delayed(tmp_path: Path) -> None:
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "coromod.py").write_text(CORO_MODULE)
    (tmp_path / "coro.toml").write_text(CORO_TABLE)
    setup = prepare_probe(tmp_path, (load_table(tmp_path / "coro.toml"),), WhatIf(("api", "sampler")))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(setup.folder), str(tmp_path / "modules")]),
        INFER_PROF_PROBE_DIR=str(setup.folder),
    )
    script = "import coromod\nloop = coromod.Loop()\nfor _ in range(300): loop.step()"
    subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, check=True, timeout=60)
    (found,) = read_probe(setup).values()
    what_if = found["status"]["what_if"]
    assert what_if["not_delayed"] == [{"index": 1, "function": "handle", "why": "a coroutine function"}]
    assert what_if["delayed"] == [2] and what_if["turn_steps"] == 8  # api runs beside the loop: longer turns
    section = analyse_slowdowns(setup.probes, read_probe(setup), (0, 2**62), resamples=200)
    assert section is not None
    assert "none was delayed" in section["components"]["api"]["note"]
    assert section["components"]["sampler"]["accuracy"]["calls"] > 0


NESTED_TABLE = """
name = "nested"
probes = [
  ["step", "nestmod", "Loop.step"],
  ["sampler", "nestmod", "Loop.sample_tokens"],
  ["sampler", "nestmod", "Loop._sample"],
]
"""
NESTED_MODULE = """
class Loop:
    def _sample(self):
        return sum(range(2000))

    def sample_tokens(self):
        return self._sample()

    def step(self):
        return self.sample_tokens()
"""


def test_a_component_named_twice_one_call_inside_the_other_is_delayed_once(tmp_path: Path) -> None:
    """vLLM's table names the sampler's sample_tokens and the _sample it calls: only the outer call is delayed,
    by its level x its own duration (delaying the inner one too would add its delay twice, inside the outer's)."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "nestmod.py").write_text(NESTED_MODULE)
    (tmp_path / "nested.toml").write_text(NESTED_TABLE)
    setup = prepare_probe(
        tmp_path, (load_table(tmp_path / "nested.toml"),), WhatIf(("sampler",), levels=(1.0,))
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(setup.folder), str(tmp_path / "modules")]),
        INFER_PROF_PROBE_DIR=str(setup.folder),
    )
    script = "import nestmod\nloop = nestmod.Loop()\nfor _ in range(200): loop.step()"
    subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, check=True, timeout=60)
    (found,) = read_probe(setup).values()
    assert sorted(found["status"]["what_if"]["delayed"]) == [1, 2]
    delays, records = found["delays"], found["records"]
    assert setup.what_if is not None
    # 1 a a 1 after the undelayed steps that measure the share: half the others, one delay each
    assert len(delays) == (200 - setup.what_if.steps_measured()) // 2
    assert set(delays[:, 1].tolist()) == {1}  # the outer call's probe index, never the inner's
    outer = records[records[:, 1] == 1]
    spans = {(int(row[2]), int(row[3])) for row in outer}
    assert all((int(row[2]), int(row[3])) in spans for row in delays)  # each delay sized by an outer call


def test_a_component_of_the_api_server_is_beside_the_loop_though_the_loop_always_waits_on_its_worker() -> (
    None
):
    """vLLM's CPU build: the loop waits on its worker nearly all of every step, so the API server's output
    processor's calls fall inside those waits; its process is named, so it is beside the loop (response: wall time
    per step), never on the step's path. Unnamed, the same calls would read as a worker's."""
    probes = [
        {"component": "step", "module": "m", "function": "Loop.step"},
        {"component": "worker", "module": "m", "function": "Executor.wait"},
        {"component": "detokenizer", "module": "m", "function": "Output.process"},
    ]
    loop_rows, api_rows, delays, turns = [], [], [], []
    at = 1_000_000
    for state in [ord(c) for c in "1aa1"] * 20:
        turns.append((at - 10, state))
        loop_rows.append((7, 0, at, at + 10_000_000, 1))
        loop_rows.append((7, 1, at + 100_000, at + 9_900_000, 1))  # the wait on the worker: most of the step
        start = at + 2_000_000
        api_rows.append((9, 2, start, start + 500_000, 1))
        if state == ord("a"):
            delays.append((9, 2, start, start + 500_000, start + 500_100, start + 750_100, 250_000, state))
        at += 10_500_000
    status = {"what_if": {"experiments": [["detokenizer", 0.5]], "turn_steps": 1, "delayed": [2]}}
    processes: dict[int, dict[str, object]] = {
        11: {
            "records": np.array(loop_rows, dtype=np.int64),
            "turns": np.array(turns, dtype=np.int64),
            "status": status,
        },
        12: {
            "records": np.array(api_rows, dtype=np.int64),
            "delays": np.array(delays, dtype=np.int64),
            "status": status,
        },
    }
    named = analyse_slowdowns(
        probes, processes, (0, 2**62), roles={11: "engine core", 12: "API server"}, resamples=200
    )
    assert named is not None and named["components"]["detokenizer"]["path"] == "beside"
    unnamed = analyse_slowdowns(
        probes, processes, (0, 2**62), roles={11: "engine core", 12: "None"}, resamples=200
    )
    assert unnamed is not None and unnamed["components"]["detokenizer"]["path"] == "step"
