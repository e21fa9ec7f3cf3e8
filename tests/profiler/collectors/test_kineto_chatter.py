"""torch.profiler's "USDT:" start/stop lines stay off stderr; everything else written meanwhile still gets there."""

from __future__ import annotations

import os
import threading

import pytest
import torch
import torch.profiler as torch_profiler

from infer_prof.profiler.collectors.kineto_chatter import quietly_profiling, without_kineto_chatter


def test_only_the_chatter_is_dropped(capfd: pytest.CaptureFixture[str]) -> None:
    with without_kineto_chatter():
        os.write(2, b"USDT:2026-11-30 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a warning the user must see\n")
        worker = threading.Thread(target=lambda: os.write(2, b"from another thread\n"))
        worker.start()
        worker.join()
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "a warning the user must see\nfrom another thread\nafter\n"


def _profile() -> torch_profiler.profile:
    return torch_profiler.profile(activities=[torch_profiler.ProfilerActivity.CPU])


def test_a_profiler_window_leaves_no_chatter(capfd: pytest.CaptureFixture[str]) -> None:
    with _profile():
        torch.ones(4) @ torch.ones(4)
    if "USDT:" not in capfd.readouterr().err:
        pytest.skip("this torch build does not write USDT lines")
    with quietly_profiling(_profile()) as profile:
        torch.ones(4) @ torch.ones(4)
    assert "USDT:" not in capfd.readouterr().err
    assert any(event.name == "aten::dot" for event in profile.events())  # still a working profile
