"""A run that looks between rounds keeps every kernel window's split when the windows' events are dropped for memory."""

from __future__ import annotations

from infer_prof.profiler.collectors.kernels import KernelCollector


class FakeProfile:
    """A stopped torch.profiler: no events (each window then splits into nothing, which is enough here)."""

    def events(self) -> list:
        return []


def collector(windows: int) -> KernelCollector:
    kernels = KernelCollector(first_step=0, steps=1, every=10, max_windows=4, warm_up=False)
    kernels._windows = [(10 * n, 1, FakeProfile()) for n in range(windows)]
    return kernels


def test_split_windows_are_released_not_thinned_and_stay_in_the_result() -> None:
    kernels = collector(4)
    assert [w["first_step"] for w in kernels.windows_so_far()] == [0, 10, 20, 30]
    assert kernels._release_summarized() is True
    assert [first for first, _, _ in kernels._windows] == [30]  # the newest keeps its events
    assert kernels.every == 10  # the period did not double
    assert [w["first_step"] for w in kernels.windows_so_far()] == [0, 10, 20, 30]
    result = kernels._result()
    assert [w["first_step"] for w in result["windows"]] == [0, 10, 20, 30]
    assert result["profiled_steps"] == 4


def test_a_run_that_never_looked_thins_out_as_before() -> None:
    kernels = collector(4)
    assert kernels._release_summarized() is False
    kernels._thin_out()
    assert kernels.every == 20 and [first for first, _, _ in kernels._windows] == [0, 20]
