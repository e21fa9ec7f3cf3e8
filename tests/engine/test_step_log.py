"""StepLog keeps step records as integers and gives back the same StepRecords."""

from __future__ import annotations

import pytest

from infer_prof.engine.sequence import StepLog, StepRecord


def _record(step: int, used: int, total: int = 40) -> StepRecord:
    return StepRecord(
        step=step,
        start_ns=1_700_000_000_000_000 + step,
        end_ns=1_700_000_000_500_000 + step,
        batch_size=step % 7,
        prefill_tokens=3 * step,
        decode_tokens=step,
        blocks_used=used,
        blocks_free=total - used,
        kv_utilization=used / total,
        fragmentation_slots=used * 16 - step,
        preemptions=step % 2,
        waiting=step,
        running=step % 5,
    )


def test_records_come_back_equal_by_index_slice_and_iteration() -> None:
    log = StepLog()
    records = [_record(step, used=(step * 7) % 41) for step in range(50)]
    for record in records:
        log.append(record)
    assert len(log) == 50
    assert list(log) == records  # kv_utilization is recomputed from the block counts, to the bit
    assert log[0] == records[0] and log[-1] == records[-1]
    assert log[10:13] == records[10:13] and log[45:] == records[45:]
    with pytest.raises(IndexError):
        log[50]
    with pytest.raises(IndexError):
        log[-51]


def test_an_empty_log_is_empty() -> None:
    log = StepLog()
    assert len(log) == 0 and list(log) == [] and log[0:5] == []
