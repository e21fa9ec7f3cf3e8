"""`infer-prof golden` shows its progress: counts of finished requests per run, and bars on the terminal."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

native = pytest.importorskip("infer_prof.native_paths.loader")
if native.extension() is None:  # pragma: no cover - the suite builds the extension
    pytest.skip("native extension not built", allow_module_level=True)


def test_counts_rise_to_the_total_in_each_run():
    from infer_prof.engine.loader import load_model
    from infer_prof.profiler.checks.golden import SHADOW_PHASE, end_to_end_phase, run_golden

    seen: list[tuple[str, int, int]] = []
    report = run_golden(
        load_model("synthetic:tiny"),
        requests=10,
        max_tokens=6,
        max_batch=4,
        combinations=("all", "core,sampler"),
        counts=lambda *count: seen.append(count),
    )
    assert report.exit_code == 0
    phases = [SHADOW_PHASE, end_to_end_phase("all"), end_to_end_phase("core,sampler")]
    assert [phase for phase, *_ in seen] == sorted((phase for phase, *_ in seen), key=phases.index)
    for phase in phases:
        finished = [done for name, done, total in seen if name == phase]
        assert {total for name, _, total in seen if name == phase} == {10}
        assert finished == sorted(set(finished)), "counts only go up, each reported once"
        assert finished[-1] == 10


def test_report_finished_follows_handles_as_they_finish():
    from infer_prof.profiler.checks.golden import _report_finished

    class Handle:
        def __init__(self) -> None:
            self.event = threading.Event()

        def done(self) -> bool:
            return self.event.is_set()

        def result(self, timeout: float | None = None) -> None:
            if not self.event.wait(timeout):
                raise TimeoutError

    handles = [Handle() for _ in range(3)]
    handles[1].event.set()  # finished out of order: counted at once
    reports: list[int] = []

    def finish_the_rest() -> None:
        handles[0].event.set()
        handles[2].event.set()

    threading.Timer(0.05, finish_the_rest).start()
    _report_finished(handles, reports.append, poll_s=0.01)
    assert reports[0] == 1 and reports[-1] == 3 and reports == sorted(set(reports))


def test_the_command_draws_a_bar_per_run():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "infer_prof.cli",
            "golden",
            "-m",
            "synthetic:tiny",
            "-r",
            "5",
            "-n",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    for line in ("shadow run", "end to end, --native all", "end to end, --native core,sampler"):
        assert any(text.startswith(line) and "5/5" in text for text in result.stderr.splitlines()), (
            result.stderr
        )
    assert "PASS" in result.stdout
