"""Spilled records come back exactly as they were written, and a run keeps at most a chunk of them in memory."""

from __future__ import annotations

import os
import threading
from array import array

import pytest

from infer_prof.engine.sequence import RequestOutput
from infer_prof.profiler.collectors import spans
from infer_prof.profiler.collectors.spans import RecordingTracer, RecordLog
from infer_prof.profiler.collectors.spill import SpillFile
from infer_prof.profiler.session.drive import RunOutput


def test_appended_bytes_read_back_at_their_offsets() -> None:
    file = SpillFile()
    first = file.append(array("q", [1, -2, 2**62]))
    second = file.append(b"abc")
    assert (first, second, file.size) == (0, 24, 27)
    assert list(file.read_array("q", first, 3)) == [1, -2, 2**62]
    assert file.read(second, 3) == b"abc"
    with pytest.raises(ValueError, match="never spilled"):
        file.read(second, 4)


def test_the_file_has_no_name_and_an_unwritten_one_refuses_reads() -> None:
    with pytest.raises(ValueError, match="nothing was ever spilled"):
        SpillFile().read(0, 1)
    file = SpillFile()
    file.append(b"x")
    assert file._file is not None
    fd = file._file.fileno()
    assert os.readlink(f"/proc/self/fd/{fd}").endswith("(deleted)") or "#" in os.readlink(
        f"/proc/self/fd/{fd}"
    )


def test_an_unwritable_directory_leaves_the_records_in_memory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = RecordLog(2, 3)
    log.names.extend(("a", "b"))
    log.values.extend((1, 2, 3))
    assert not log.spill(SpillFile(str(tmp_path / "missing")))
    assert list(log.records()) == [("a", "b", 1, 2, 3)] and len(log) == 1


def test_a_log_spilled_in_chunks_reads_back_in_order() -> None:
    file = SpillFile()
    log = RecordLog(2, 2, "d")
    expected = []
    for chunk in range(3):
        for i in range(5):
            names = (f"n{i % 3}", "outer" if chunk else "")
            log.names.extend(names)
            log.values.extend((chunk * 10.0 + i, 0.5))
            expected.append((*names, chunk * 10.0 + i, 0.5))
        if chunk < 2:
            assert log.spill(file) and log.names == [] and len(log.values) == 0
    assert len(log) == 15
    assert list(log.records()) == expected


def test_a_tracer_holds_at_most_a_chunk_of_spans_and_reports_them_all(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(spans, "SPILL_RECORDS", 10)
    tracer = RecordingTracer(cpu_clock=None)
    lock = threading.Lock()
    for _ in range(25):
        with tracer.span("step"), tracer.span("sampler"), tracer.lock(lock, "queue"):
            pass
    state = tracer.thread_states()[0]
    assert len(state.events.names) < 10 and state.events._chunks  # spilled, and only the tail held
    assert len(state.events) == 50 and len(state.locks) == 25
    names = [record[0] for record in state.events.records()]
    assert names == ["sampler", "step"] * 25
    steps = [record[-1] for record in state.events.records() if record[0] == "step"]
    assert steps == list(range(25))
    assert tracer.spill_file.size > 0


def test_run_output_token_times_spill_and_read_back() -> None:
    file = SpillFile()
    output = RequestOutput(
        request_id=3,
        prompt="hi",
        prompt_token_ids=[1],
        token_ids=[4, 5, 6],
        text="abc",
        finish_reason="stop",
        error=None,
        arrival_ns=100,
        scheduled_ns=110,
        first_token_ns=120,
        token_ns=[120, 130, 145],
        finish_ns=150,
        num_preemptions=0,
    )
    kept = RunOutput.of(output, file)
    assert file.size == 3 * 8 and len(kept._times) == 4  # the four request times, no token times
    assert list(kept.token_ns) == [120, 130, 145]
    assert (kept.arrival_ns, kept.scheduled_ns, kept.first_token_ns, kept.finish_ns) == (100, 110, 120, 150)
