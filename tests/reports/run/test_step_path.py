"""The foreign step's picture: lanes per process from a probe section shaped like vLLM's (a loop that waits on its
model worker, the worker's components inside the wait, the API server's beside the step), drawn as an SVG."""

from __future__ import annotations

from typing import cast

from infer_prof.profiler.rundir.schema import Probe
from infer_prof.reports.run import charts
from infer_prof.reports.run.step_path import WAIT_COLOUR, step_lanes


def _probe() -> Probe:
    share = {"share": 0.1, "low": 0.05, "high": 0.15}
    return cast(
        Probe,
        {
            "steps": {
                "pid": 10,
                "with_probes_on": 120,
                "mean_ms": 172.7,
                "components": {
                    "worker": {"ms_per_step": 150.0, "where": "engine loop", **share},
                    "model": {"ms_per_step": 113.5, "where": "other process", **share},
                    "sampler": {"ms_per_step": 30.0, "where": "other process", **share},
                    "scheduler": {"ms_per_step": 12.0, "where": "engine loop", **share},
                    "detokenizer": {"ms_per_step": 6.0, "where": "other process", **share},
                },
            },
            "processes": [
                {"pid": 10, "role": "engine core", "components": {"worker": {"ms": 1500.0}}},
                {
                    "pid": 20,
                    "role": "model worker",
                    "components": {"model": {"ms": 1135.0}, "sampler": {"ms": 300.0}},
                },
                {"pid": 30, "role": "API server", "components": {"detokenizer": {"ms": 60.0}}},
            ],
            "what_if": {
                "components": {
                    "sampler": {"sensitivity": 0.98, "low": 0.9, "high": 1.06},
                    "detokenizer": {"sensitivity": 0.02, "low": -0.05, "high": 0.08},
                }
            },
        },
    )


def test_a_step_is_drawn_as_one_lane_per_process_in_its_order() -> None:
    loop, worker, api = step_lanes(_probe())
    assert loop.title == "engine loop, pid 10 (engine core)"
    # The loop's own work first, then whatever no probe named, then the wait on the worker to the step's end.
    assert [segment.label for segment in loop.segments] == [
        "scheduler",
        "other loop code",
        "waiting on the worker",
    ]
    wait = loop.segments[-1]
    assert wait.colour == WAIT_COLOUR and wait.start_ms + wait.ms == 172.7
    # The worker's components lie inside the wait, from its start; the API server's beside the step, from 0.
    assert worker.title.startswith("model worker, inside the loop's wait, pid 20") and not worker.beside
    assert [(segment.label, segment.start_ms) for segment in worker.segments] == [
        ("model", wait.start_ms),
        ("sampler", wait.start_ms + 113.5),
    ]
    assert worker.segments[1].note == "s=0.98 [0.90, 1.06]"
    assert api.beside and api.title.startswith("API server, beside the step, pid 30")
    assert [(segment.label, segment.start_ms, segment.note) for segment in api.segments] == [
        ("detokenizer", 0.0, "s=0.02 [-0.05, 0.08]")
    ]


def test_the_picture_is_an_svg_naming_each_process() -> None:
    from infer_prof.reports.run.step_path import draw_step_path

    svg = charts.draw_with(draw_step_path, _probe(), width=10, height=3, label="a step")
    assert svg.startswith("<svg") and "pid 20" in svg and "beside the step" in svg


def test_no_steps_no_lanes() -> None:
    assert step_lanes(cast(Probe, {"steps": {"components": {}, "mean_ms": None}})) == []
