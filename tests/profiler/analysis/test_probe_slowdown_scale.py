"""Slowdown levels scaled to a component's share on the probe path: a sampler of a few % of a step gets its levels
multiplied until the top one adds about a quarter of the step, and its sensitivity then resolves near 1; a tiny
one's scale stops at the ceiling; the sitecustomize's scale is the built-in engine's level_scale; the analysis
reads the scaled levels and says them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from infer_prof.profiler.analysis.engine_tables import load_table
from infer_prof.profiler.analysis.probe_slowdown import analyse_slowdowns
from infer_prof.profiler.checks.slowdown import MAX_LEVEL, TARGET_ADDED_SHARE, level_scale
from infer_prof.profiler.inject import sitecustomize
from infer_prof.profiler.session.target.inject import WhatIf, prepare_probe, read_probe

# One loop: the model's work, then a short sampler inside the step (serial); both busy, as a CPU engine's are (a
# model asleep would hand the core to others, and its wake-up, late by as much as they hold it, is the step's noise).
MODULE = """
import time


def busy(seconds):
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class Loop:
    def __init__(self, model_s, sample_s):
        self.model_s, self.sample_s = model_s, sample_s

    def model(self):
        busy(self.model_s)

    def sample(self):
        busy(self.sample_s)

    def step(self):
        self.model()
        self.sample()


def run(steps, model_s, sample_s):
    loop = Loop(model_s, sample_s)
    for _ in range(steps):
        loop.step()
"""
TABLE = """
name = "smallloop"
probes = [
  ["step", "smallloop", "Loop.step"],
  ["model", "smallloop", "Loop.model"],
  ["sampler", "smallloop", "Loop.sample"],
]
"""


def _run(tmp_path: Path, what_if: WhatIf, steps: int, model_s: float, sample_s: float) -> dict[int, Any]:
    """The loop run for `steps` steps in a fresh interpreter that loads the probe; what its probe wrote."""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "smallloop.py").write_text(textwrap.dedent(MODULE))
    (tmp_path / "smallloop.toml").write_text(TABLE)
    setup = prepare_probe(tmp_path, (load_table(tmp_path / "smallloop.toml"),), what_if)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PYTHONPATH=os.pathsep.join([str(setup.folder), str(tmp_path / "modules")]),
        INFER_PROF_PROBE_DIR=str(setup.folder),
    )
    script = f"import smallloop; smallloop.run({steps}, {model_s}, {sample_s})"
    subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, check=True, timeout=120)
    found = read_probe(setup)
    found["probes"] = setup.probes  # type: ignore[assignment]
    return found


@pytest.mark.slow
def test_a_sampler_of_a_few_percent_gets_scaled_levels_and_resolves_near_one(tmp_path: Path) -> None:
    """A 0.1 ms sampler after a 2 ms model: about 5% of the step, so 0.5x/1x would add 2-5%, inside the step's
    noise; scaled about 5x, the top level adds about a quarter of the step and the sensitivity resolves.
    On a machine busier than its cores, another process's time slice (milliseconds) lands in a step of two and
    outweighs the delay: the run would be void by its own health, so the test does not judge it."""
    if os.getloadavg()[0] > len(os.sched_getaffinity(0)):
        pytest.skip("the machine's load is above its cores: preemptions of milliseconds swamp a 2 ms step")
    found = _run(tmp_path, WhatIf(("sampler",)), 2000, 0.002, 0.0001)
    probes = found.pop("probes")
    ((pid, process),) = found.items()
    scale = process["status"]["what_if"]["scales"]["sampler"]
    # The 64 measuring steps and the cycle's first, undelayed turn, less the first 16 (a server's start-up).
    assert 0.02 <= scale["share"] <= 0.08 and scale["steps"] == 65 - 16 and scale["skipped"] == 16
    assert not scale["capped"]
    assert scale["scale"] == pytest.approx(level_scale(scale["share"], (0.5, 1.0)))
    assert 3.0 <= scale["scale"] < MAX_LEVEL
    # Each delayed call asked for its level x the scale x its own duration.
    delays = process["delays"]
    asked = delays[:, 6] / (delays[:, 3] - delays[:, 2])
    assert set(np.round(asked / scale["scale"], 2).tolist()) <= {0.5, 1.0}

    section = analyse_slowdowns(probes, found, (0, 2**62))
    assert section is not None
    print("\n".join(section["lines"]))
    serial = section["components"]["sampler"]
    assert section["scales"] == {"sampler": scale["scale"]} and section["measure_steps"] == 64
    assert serial["path"] == "step" and serial["scale"] is not None and serial["scale"]["pid"] == pid
    assert [level["level"] for level in serial["levels"]] == pytest.approx(
        [0.5 * scale["scale"], 1.0 * scale["scale"]]
    )
    # Near 1 with its interval (a 1x delay of a 5% sampler could not tell 1 from 0: its interval spans both).
    assert 0.5 <= serial["low"] <= serial["sensitivity"] <= serial["high"] <= 1.5
    accuracy = serial["accuracy"]
    assert accuracy is not None and accuracy["median_error"] <= 0.05
    assert f"levels scaled {scale['scale']:.3g}x" in section["lines"][0]


def test_a_tiny_components_scale_stops_at_the_ceiling(tmp_path: Path) -> None:
    """A 5 us sampler after a 4 ms model (about 0.2% of the step): its levels would need over 100x; the scale
    stops where the top level is MAX_LEVEL x its call, and says so."""
    found = _run(tmp_path, WhatIf(("sampler",)), 120, 0.004, 0.000005)
    probes = found.pop("probes")
    ((_pid, process),) = found.items()
    scale = process["status"]["what_if"]["scales"]["sampler"]
    assert scale["share"] < 0.25 / MAX_LEVEL and scale["capped"] is True
    assert scale["scale"] == MAX_LEVEL == level_scale(scale["share"], (0.5, 1.0))
    delays = process["delays"]
    assert len(delays) == (120 - 64) // 2  # after the 64 measuring steps, 1 a a 1 b b 1: half delayed
    asked = delays[:, 6] / (delays[:, 3] - delays[:, 2])
    assert asked.max() == pytest.approx(MAX_LEVEL, rel=0.01)  # the top level: MAX_LEVEL x its call, no more
    section = analyse_slowdowns(probes, found, (0, 2**62), resamples=200)
    assert section is not None
    entry = section["components"]["sampler"]
    assert entry["scale"] is not None and entry["scale"]["capped"]
    assert f"capped, so that no level passes {MAX_LEVEL:g}x" in section["lines"][0]


def test_fixed_levels_are_left_alone(tmp_path: Path) -> None:
    """measure_steps=0: the levels as asked, no measuring steps, the switch on from the start (b"1")."""
    found = _run(tmp_path, WhatIf(("sampler",), measure_steps=0), 40, 0.0005, 0.00001)
    found.pop("probes")
    ((_pid, process),) = found.items()
    assert "scales" not in process["status"]["what_if"]
    assert len(process["delays"]) == 20  # 1 a a 1 b b 1 from the first step
    asked = process["delays"][:, 6] / (process["delays"][:, 3] - process["delays"][:, 2])
    assert asked.max() <= 1.0 + 1e-6
    assert (tmp_path / "probe" / "switch").read_bytes() != b"."


@pytest.mark.parametrize(
    ("own_ns", "step_ns", "why"),
    [
        (40_000, 1_000_000, None),
        (1_000, 1_000_000, None),
        (500_000, 1_000_000, None),
        (0, 1_000_000, "no call"),
    ],
)
def test_the_sitecustomizes_scale_is_the_built_in_engines(
    tmp_path: Path, own_ns: int, step_ns: int, why: str | None
) -> None:
    """The probe's scale (stdlib only, inside the server) and profiler.checks.slowdown.level_scale are twins."""
    settings = sitecustomize._WhatIf(
        {
            "components": ["sampler"],
            "levels": [0.5, 1.0],
            "scale": {"measure_steps": 64, "target_share": TARGET_ADDED_SHARE, "max_level": MAX_LEVEL},
        }
    )
    (tmp_path / sitecustomize.MEASURED).write_text(json.dumps({"pid": 1, "steps": 64, "step_ns": step_ns}))
    told: list[bool] = []
    scale = sitecustomize._Scale(
        "sampler", settings.fractions("sampler"), settings, str(tmp_path), lambda: told.append(True)
    )
    table = scale.table
    if own_ns:
        scale.tally(5_000, own_ns)
    scale.decide()
    assert told == [True] and scale.done
    share = own_ns / step_ns if own_ns else None
    assert scale.scale == pytest.approx(level_scale(share, (0.5, 1.0)))
    assert table[ord("a")] == pytest.approx(0.5 * scale.scale) and table[ord("b")] == pytest.approx(
        scale.scale
    )
    assert table[ord("1")] == 0.0
    assert (scale.why is None) if why is None else why in str(scale.why)


def test_no_tally_leaves_the_levels_unscaled_and_says_why(tmp_path: Path) -> None:
    settings = sitecustomize._WhatIf(
        {
            "components": ["sampler"],
            "levels": [1.0],
            "scale": {"measure_steps": 8, "target_share": 0.25, "max_level": 10},
        }
    )
    scale = sitecustomize._Scale(
        "sampler", settings.fractions("sampler"), settings, str(tmp_path), lambda: None
    )
    scale.tally(5_000, 1_000)
    scale.decide()
    assert scale.scale == 1.0 and "no tally of the measuring steps" in str(scale.why)
    assert scale.status()["scale"] == 1.0 and scale.status()["share"] is None


def test_the_steps_take_the_measuring_turns_first() -> None:
    settings = sitecustomize._WhatIf(
        {
            "components": ["sampler"],
            "levels": [1.0],
            "scale": {"measure_steps": 3, "target_share": 0.25, "max_level": 10},
        }
    )
    order = settings.sequence([ord("S")])
    first = bytes(next(order) for _ in range(3 + 5 * 2))
    assert first == b"111" + b"1aa1S" + b"1aa1S"
    assert WhatIf(("sampler",), turn_steps=8, measure_steps=60).steps_measured() == 64  # whole turns
    assert WhatIf(("sampler",), measure_steps=0).steps_measured() == 0


def test_the_share_leaves_out_the_servers_first_steps_and_the_calls_in_them(tmp_path: Path) -> None:
    """The stepping process skips its first steps (a start-up step that pages weights in would outweigh the rest);
    a component's calls before the first step counted are left out with them."""
    steps = sitecustomize._StepTally(str(tmp_path), True, skip=2)
    for start, end in ((0, 100), (100, 60_000), (60_000, 61_000), (61_000, 62_000)):
        steps.add(start, end)
    steps.publish()
    measured = json.loads((tmp_path / sitecustomize.MEASURED).read_text())
    assert (measured["steps"], measured["skipped"], measured["step_ns"], measured["from_ns"]) == (
        2,
        2,
        2000,
        60_000,
    )
    settings = sitecustomize._WhatIf(
        {
            "components": ["sampler"],
            "levels": [1.0],
            "scale": {"measure_steps": 4, "target_share": 0.25, "max_level": 10},
        }
    )
    scale = sitecustomize._Scale(
        "sampler", settings.fractions("sampler"), settings, str(tmp_path), lambda: None
    )
    for start in (50, 10_000, 60_100, 61_100):  # two inside the skipped steps, two in the counted ones
        scale.tally(start, 100)
    scale.decide()
    assert (scale.own_ns, scale.calls) == (200, 2)
    assert scale.share == pytest.approx(0.1) and scale.scale == pytest.approx(2.5) and not scale.capped
    assert scale.status()["skipped"] == 2
