"""--verify and --what-if fix torch's thread count for every run they compare, unless --threads chose one: the
count the thread governor would take under the machine's load at the start."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

from infer_prof.cli.run import threads_for_experiments
from infer_prof.engine import thread_governor
from infer_prof.engine.thread_governor import CpuReading, starting_threads
from infer_prof.profiler.session.options import EngineOptions


def _console() -> tuple[Console, io.StringIO]:
    text = io.StringIO()
    return Console(file=text, width=200), text


@pytest.mark.parametrize(
    ("picked", "words"), [(2, "fixed at 2 for all"), (1, "fixed at 1 (other processes hold")]
)
def test_a_comparing_run_fixes_the_count_the_governor_would_take(
    monkeypatch, picked: int, words: str
) -> None:  # type: ignore[no-untyped-def]
    from infer_prof.engine import threads

    monkeypatch.setattr(
        threads, "adaptive_threads", lambda: True
    )  # infer-prof chose the threading, as by default
    asked: list[int] = []
    monkeypatch.setattr(thread_governor, "starting_threads", lambda threads: asked.append(threads) or picked)
    console, text = _console()
    options = threads_for_experiments(EngineOptions(model="synthetic:tiny"), True, console)
    assert asked == [torch.get_num_threads()] and options.threads == picked
    assert words in text.getvalue()


def test_a_plain_run_and_a_chosen_count_are_left_alone() -> None:
    console, text = _console()
    plain = EngineOptions(model="synthetic:tiny")
    assert threads_for_experiments(plain, False, console) is plain and plain.threads is None
    chosen = EngineOptions(model="synthetic:tiny", threads=1)
    assert threads_for_experiments(chosen, True, console) is chosen
    assert text.getvalue() == ""


def test_a_user_chosen_wait_policy_is_left_alone(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With OMP_WAIT_POLICY set (or the opt-out) no governor runs, so the count cannot move and none is fixed."""
    from infer_prof.engine import threads

    monkeypatch.setattr(threads, "adaptive_threads", lambda: False)
    console, text = _console()
    plain = EngineOptions(model="synthetic:tiny")
    assert threads_for_experiments(plain, True, console) is plain and text.getvalue() == ""


def _reads(outside_cores: float, own_cores: float = 0.5):
    """Two readings half a second apart: others busy `outside_cores`, this process `own_cores`."""
    wall = int(thread_governor.WINDOW_S * 1e9)
    busy = int((outside_cores + own_cores) * wall)
    own = int(own_cores * wall)
    readings = iter([CpuReading(0, 0, 0, 0, 0), CpuReading(wall, busy, 0, 0, own)])
    return lambda: next(readings)


def test_the_starting_count_is_one_beside_a_busy_neighbour_and_all_on_a_quiet_machine() -> None:
    assert starting_threads(4, _reads(1.0), sleep=lambda _s: None) == 1  # a busy loop holds a core
    assert (
        starting_threads(4, _reads(0.05), sleep=lambda _s: None) == 4
    )  # this process's own work is not others'
    assert starting_threads(1, _reads(1.0), sleep=lambda _s: None) == 1


def test_a_machine_that_cannot_be_read_keeps_torchs_count() -> None:
    def unreadable() -> CpuReading:
        raise OSError("no /proc")

    assert starting_threads(2, unreadable, sleep=lambda _s: None) == 2
