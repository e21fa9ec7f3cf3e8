"""`--until resolved --what-if` against a server: a look goes on while a delayed component's sensitivity is not yet
precise, and a component never delayed holds nothing (the section a look reads is fixed here; the real one from two
processes that load the probe: tests/profiler/analysis/test_probe_slowdown.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infer_prof.profiler.analysis.sensitivity import precise
from infer_prof.profiler.session.target import rounds
from infer_prof.profiler.session.target.inject import ProbeSetup, WhatIf


def _entry(
    value: float | None, low: float | None, high: float | None, delayed: bool = True
) -> dict[str, Any]:
    return {
        "sensitivity": value,
        "low": low,
        "high": high,
        "pairs": 12,
        "accuracy": {"calls": 40} if delayed else None,
        "note": None if value is not None else "no delay-on turn has an off turn beside it",
    }


def _held(monkeypatch: pytest.MonkeyPatch, section: dict[str, Any] | None) -> list[str]:
    seen: dict[str, Any] = {}

    def analyse(probes: object, found: object, window: object, *, roles: object, resamples: int) -> object:
        seen.update(roles=roles, window=window, found=found)
        return section

    monkeypatch.setattr(rounds, "analyse_slowdowns", analyse)
    setup = ProbeSetup(Path("."), [], WhatIf(("sampler",)))
    records = {7: {"records": []}}
    held = rounds.slowdowns_held(setup, records, (1, 2), {7: "api_server"})
    assert seen == {"roles": {7: "api_server"}, "window": (1, 2), "found": records}
    return held


def test_only_a_delayed_component_not_yet_known_to_20_percent_holds_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    section = {
        "components": {
            "sampler": _entry(1.01, 0.92, 1.09),  # half width 0.085: precise
            "scheduler": _entry(0.79, 0.53, 0.97),  # half width 0.22 > 0.2 x 0.79
            "detokenizer": _entry(-0.05, -0.08, 0.06),  # near 0, half width 0.07 <= 0.2 x 0.5: precise
            "kv_alloc": _entry(None, None, None, delayed=False),  # never delayed: more load would not help
            "prepare": _entry(None, None, None),  # delayed, no pair yet
        }
    }
    held = _held(monkeypatch, section)
    assert held == [
        "the slowdown of scheduler (sensitivity 0.79 [0.53, 0.97], 12 pairs: not yet within ±20%)",
        "the slowdown of prepare (no delay-on turn has an off turn beside it)",
    ]


def test_no_turns_yet_holds_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _held(monkeypatch, None) == ["the slowdowns (no turns in the probe's records yet)"]


@pytest.mark.parametrize(
    ("value", "low", "high", "expected"),
    [
        (1.0, 0.8, 1.2, True),
        (1.0, 0.79, 1.2, False),
        (0.0, -0.1, 0.1, True),
        (0.0, -0.11, 0.1, False),
        (1.0, None, 1.2, False),
        (float("nan"), 0.0, 0.1, False),
    ],
)
def test_precise_is_a_half_interval_within_a_fifth_of_the_value_or_of_a_half(
    value: float, low: float | None, high: float | None, expected: bool
) -> None:
    assert precise(value, low, high) is expected


def test_roles_come_from_every_process_the_tree_has_seen() -> None:
    tree = SimpleNamespace(
        processes=lambda: [
            SimpleNamespace(info=SimpleNamespace(pid=3, role="api_server")),
            SimpleNamespace(info=SimpleNamespace(pid=4, role="engine_core")),
        ]
    )
    assert rounds.roles(tree) == {3: "api_server", 4: "engine_core"}  # type: ignore[arg-type]
