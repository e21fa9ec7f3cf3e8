"""--verify and --what-if fix torch's thread count for every run they compare, unless --threads chose one."""

from __future__ import annotations

import io

import torch
from rich.console import Console

from infer_prof.cli.run import threads_for_experiments
from infer_prof.profiler.session.options import EngineOptions


def _console() -> tuple[Console, io.StringIO]:
    text = io.StringIO()
    return Console(file=text, width=200), text


def test_a_comparing_run_fixes_the_count_the_engine_starts_with() -> None:
    console, text = _console()
    options = threads_for_experiments(EngineOptions(model="synthetic:tiny"), True, console)
    assert options.threads == torch.get_num_threads()
    assert f"torch's threads fixed at {torch.get_num_threads()}" in text.getvalue()


def test_a_plain_run_and_a_chosen_count_are_left_alone() -> None:
    console, text = _console()
    plain = EngineOptions(model="synthetic:tiny")
    assert threads_for_experiments(plain, False, console) is plain and plain.threads is None
    chosen = EngineOptions(model="synthetic:tiny", threads=1)
    assert threads_for_experiments(chosen, True, console) is chosen
    assert text.getvalue() == ""
