"""A real py-spy attached to this test process, sampling a thread named like the engine's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import torch

from infer_prof.profiler.collectors.sampling import SamplingCollector, py_spy_command, realtime_allowed

ENGINE = "infer-prof-engine"


def _wait_for_work(condition: threading.Condition) -> None:
    with condition:
        condition.wait(timeout=0.004)


class BusyEngine:
    """A thread that alternates Python work, torch matmuls and short waits for work, like the engine loop."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.condition = threading.Condition()
        self.weights = torch.randn(256, 256)
        self.thread = threading.Thread(target=self._loop, name=ENGINE, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            _wait_for_work(self.condition)
            for _ in range(4):
                self.weights @ self.weights
            sorted(range(10000), key=lambda value: -value)


@pytest.fixture
def engine() -> Iterator[BusyEngine]:
    busy = BusyEngine()
    busy.thread.start()
    yield busy
    busy.stop.set()
    busy.thread.join(timeout=5)


def start_sampling(engine: BusyEngine, *, native: bool, priority: str = "low") -> SamplingCollector:
    collector = SamplingCollector(
        rate=100,
        native_stacks=native,
        engine_thread_id_getter=lambda: engine.thread.native_id,
        priority=priority,
    )
    collector.start()
    if collector.status == "skipped":
        pytest.skip(f"py-spy cannot attach here: {collector.reason}")
    return collector


def sample(engine: BusyEngine, *, native: bool, seconds: float, priority: str = "low") -> dict:  # type: ignore[type-arg]
    collector = start_sampling(engine, native=native, priority=priority)
    time.sleep(seconds)
    collector.stop()
    return collector.result()


def test_nonblocking_sampling_finds_the_engine_thread(engine: BusyEngine) -> None:
    result = sample(engine, native=False, seconds=1.0)
    assert result["status"] == "ok", result["reason"]
    assert result["mode"] == "nonblocking" and not result["native_stacks"]
    threads = result["threads"]
    assert ENGINE in threads, sorted(threads)
    engine_samples = threads[ENGINE]
    assert engine_samples["thread_ids"] == [engine.thread.native_id] == [result["engine_thread_id"]]
    assert engine_samples["samples"] >= 20 and engine_samples["native_samples"] == 0
    # Python-only stacks: the matmul and sort lines are "interpreter" (unresolved), the wait is idle.
    assert engine_samples["categories"].get("interpreter", 0) > 0
    assert set(engine_samples["categories"]) <= {"interpreter", "idle", "lock", "other"}
    assert result["overhead"]["failed_sample_fraction"] is not None


def test_native_sampling_resolves_kernels(engine: BusyEngine) -> None:
    result = sample(engine, native=True, seconds=1.5)
    assert result["status"] == "ok", result["reason"]
    engine_samples = result["threads"][ENGINE]
    assert engine_samples["native_samples"] == engine_samples["samples"] > 0
    categories = engine_samples["categories"]
    assert categories.get("kernel", 0) > 0, categories  # mkl sgemm / libgomp frames under the matmul


def test_realtime_sampling_reports_what_it_got_and_leaves_no_files(engine: BusyEngine) -> None:
    collector = start_sampling(engine, native=True, priority="realtime")
    assert collector.raw_path is not None
    folder = collector.raw_path.parent  # this collector's own temporary folder, not /tmp as a whole
    assert folder.name.startswith("infer-prof-pyspy-") and folder.is_dir()
    time.sleep(1.0)
    collector.stop()
    result = collector.result()
    assert result["status"] == "ok", result["reason"]
    # SCHED_FIFO where this process may grant it, else the normal priority, said so.
    assert result["scheduling"] == ("realtime" if realtime_allowed() else "normal")
    assert result["threads"][ENGINE]["categories"].get("kernel", 0) > 0
    assert result["raw_text"] and result["raw_path"] is None
    assert not folder.exists()  # py-spy's temporary folder is read back and removed


def test_unknown_priority_is_refused() -> None:
    with pytest.raises(ValueError, match="priority='urgent'"):
        SamplingCollector(priority="urgent")


def test_attach_failure_is_skipped_with_reason() -> None:
    collector = SamplingCollector(pid=2**22 + 12345)  # above pid_max: no such process
    collector.start()
    collector.stop()
    result = collector.result()
    assert result["status"] == "skipped"
    assert result["reason"].startswith(f"py-spy could not attach to pid {2**22 + 12345}")


def test_command_never_combines_native_with_nonblocking() -> None:
    native = py_spy_command("py-spy", 7, "out.txt", rate=97, native_stacks=True, idle=True, gil=False)
    cheap = py_spy_command(
        "py-spy", 7, "out.txt", rate=59, native_stacks=False, idle=False, gil=True, duration_s=3
    )
    assert "--native" in native and "--nonblocking" not in native and "--idle" in native
    assert "--nonblocking" in cheap and "--native" not in cheap and "--gil" in cheap
    assert cheap[cheap.index("--duration") + 1] == "3" and cheap[cheap.index("--rate") + 1] == "59"
    assert native[native.index("--format") + 1] == "raw" and "--threads" in native
