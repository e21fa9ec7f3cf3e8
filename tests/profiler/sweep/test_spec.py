"""Sweep files and their grid: every mistake named by file, key and allowed values before any run; cells
and their order as the sweep file says."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infer_prof.errors import InferProfError, SweepError
from infer_prof.profiler.sweep.grid import build_cells, check_contexts, run_order
from infer_prof.profiler.sweep.spec import builtin_sweeps, load_sweep

GOOD = """description = "a small map"
repeats = 2
requests = 6
seconds = 3
[axes]
model = ["synthetic:tiny", "synthetic:small"]
clients = [1, 4]
native = ["none", "all"]
scenario = ["concurrency-30"]
output_tokens = [8]
"""


def write(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_sweep_file_gives_every_combination_with_native_varying_fastest(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path, GOOD))
    cells = build_cells(spec)
    assert len(cells) == 8
    assert [cell.value("native") for cell in cells[:2]] == ["none", "all"]
    assert cells[0].options.native == frozenset() and cells[1].options.native == {
        "sampler",
        "kv_alloc",
        "scheduler",
        "prepare",
    }
    first = cells[0]
    assert first.options.model == "synthetic:tiny" and first.options.seed == 0
    # clients on a scenario: a closed loop of that many clients, the sweep's requests and seconds, fixed outputs.
    assert (first.scenario.mode, first.scenario.clients, first.scenario.rate) == ("closed-loop", 1, None)
    assert (first.scenario.num_requests, first.scenario.duration_s) == (6, 3.0)
    assert first.scenario.output_tokens.dist == "fixed" and first.scenario.output_tokens.value == 8
    assert all(request_class.output_tokens is None for request_class in first.scenario.sampling_mix)
    # Names carry only the axes that vary, and every cell has its own.
    assert first.id == "000-synthetic-tiny-1-none" and len({cell.id for cell in cells}) == 8
    assert (
        first.label() == "model=synthetic:tiny clients=1 native=none scenario=concurrency-30 output_tokens=8"
    )


def test_repeats_visit_every_cell_and_alternate_direction(tmp_path: Path) -> None:
    cells = build_cells(load_sweep(write(tmp_path, GOOD)))
    order = run_order(cells, 3)
    assert len(order) == 24 and len({(cell.id, repeat) for cell, repeat in order}) == 24
    assert [cell.index for cell, repeat in order if repeat == 1] == list(range(8))
    assert [cell.index for cell, repeat in order if repeat == 2] == list(reversed(range(8)))
    assert [repeat for _, repeat in order[:9]] == [1] * 8 + [2]


def test_rate_makes_an_open_loop_and_paths_are_relative_to_the_sweep_file(tmp_path: Path) -> None:
    scenario = (Path(__file__).parents[3] / "scenarios" / "builtin" / "edge.toml").read_text()
    (tmp_path / "scenarios").mkdir()
    write(tmp_path / "scenarios", scenario, "mine.toml")
    text = (
        'description = "open"\nrequests = 4\n[axes]\nscenario = ["scenarios/mine.toml"]\nrate = [1.5, "inf"]\n'
        "burstiness = [0.5]\n"
    )
    cells = build_cells(load_sweep(write(tmp_path, text)))
    assert [cell.scenario.rate for cell in cells] == [1.5, math.inf]
    assert {(cell.scenario.mode, cell.scenario.clients, cell.scenario.burstiness) for cell in cells} == {
        ("open-loop", None, 0.5)
    }
    assert cells[0].scenario.source == str((tmp_path / "scenarios" / "mine.toml").resolve())
    assert cells[1].id == "001-inf"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('description = "x"\n[axes\nmodel = 1', ["malformed TOML"]),
        (
            'description = "x"\n[axes]\naccelerator = ["tpu"]\n',
            ["axes.accelerator", "unknown axis", "model", "clients"],
        ),
        ('description = "x"\n[axes]\nclients = 4\n', ["axes.clients", "not a non-empty list"]),
        ('description = "x"\n[axes]\nclients = []\n', ["axes.clients", "not a non-empty list"]),
        ('description = "x"\n[axes]\nclients = [1, "two"]\n', ["axes.clients", "'two'", "integers"]),
        ('description = "x"\n[axes]\nclients = [1, 1]\n', ["axes.clients", "repeats a value"]),
        ('description = "x"\n[axes]\nrate = [0]\n', ["axes.rate", 'or "inf"']),
        ('description = "x"\n[axes]\nclients = [1]\nrate = [2.0]\n', ["clients (a closed loop) and rate"]),
        ('description = "x"\nrepeats = 0\n[axes]\nclients = [1]\n', ["repeats", "integer >= 1"]),
        ('description = "x"\nseconds = -1\n[axes]\nclients = [1]\n', ["seconds", "seconds > 0"]),
        (
            'description = "x"\nprofile = "off"\n[axes]\nclients = [1]\n',
            ["profile", "nothing to map", "default, deep"],
        ),
        (
            'description = "x"\ncolour = 1\n[axes]\nclients = [1]\n',
            ["colour", "unknown key at the top level"],
        ),
        ("[axes]\nclients = [1]\n", ["description", "missing"]),
        ('description = "x"\n', ["axes", "missing or empty"]),
        ('description = "x"\n[axes]\nclients = [1]\n[map]\nx = "model"\n', ["map.x", "'model'", "clients"]),
    ],
)
def test_a_malformed_sweep_file_names_file_key_and_allowed_values(
    tmp_path: Path, text: str, needles: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SweepError) as caught:
        load_sweep(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    ("axes", "needles"),
    [
        (
            'model = ["synthetic:huge"]',
            ["model=synthetic:huge", "unknown synthetic preset", "synthetic:tiny"],
        ),
        ('model = ["missing.gguf"]', ["neither smollm2-135m", "missing.gguf"]),
        ('native = ["sampler,gpu"]', ["native=sampler,gpu", "unknown component 'gpu'"]),
        ('scenario = ["nonesuch"]', ["unknown scenario 'nonesuch'"]),
        ("clients = [0]", ["clients=0", "load.clients"]),
        ("max_batch = [0]", ["--max-batch=0"]),
        ('kv_memory = ["lots"]', ["--kv-memory='lots'"]),
        ('scenario = ["concurrency-30"]\nburstiness = [0.5]', ["axes.burstiness", "closed loop"]),
    ],
)
def test_a_cell_that_cannot_run_is_refused_before_any_run(
    tmp_path: Path, axes: str, needles: list[str]
) -> None:
    path = write(tmp_path, f'description = "x"\nrequests = 2\n[axes]\n{axes}\n')
    with pytest.raises(SweepError) as caught:
        build_cells(load_sweep(path))
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message
    for needle in needles:
        assert needle in message


def test_a_cell_whose_requests_cannot_fit_the_context_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'description = "x"\nrequests = 2\n[axes]\nmodel = ["synthetic:tiny"]\noutput_tokens = [4000]\n',
    )
    spec = load_sweep(path)
    with pytest.raises(SweepError, match="exceed the model context of 2048"):
        check_contexts(spec, build_cells(spec))


def test_every_builtin_sweep_is_valid() -> None:
    assert {"crossover", "crossover-quick"} <= set(builtin_sweeps())
    for name in builtin_sweeps():
        spec = load_sweep(name)
        cells = build_cells(spec)
        check_contexts(spec, cells)
        assert spec.map_x in spec.axes and spec.map_y in spec.axes


def test_the_crossover_sweep_is_the_one_the_issue_asks_for() -> None:
    spec = load_sweep("crossover")
    assert spec.axes["model"] == ("synthetic:tiny", "synthetic:small", "synthetic:base")
    assert spec.axes["clients"] == (1, 4, 16, 30) and spec.repeats == 2
    assert spec.axes["native"] == ("none", "all")


def test_an_unknown_sweep_name_lists_the_builtins() -> None:
    with pytest.raises(InferProfError, match="crossover"):
        load_sweep("no-such-sweep")
