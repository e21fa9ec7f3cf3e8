"""A ledger record with every field filled, any of them replaced."""

from __future__ import annotations

from typing import Any

import pytest

from infer_prof.profiler.ledger.records import LedgerRecord


def make_record(**changes: Any) -> LedgerRecord:
    fields: dict[str, Any] = {
        "kind": "verify",
        "scenario": "sampler-heavy",
        "model": "synthetic:tiny",
        "dtype": "float32",
        "component": "sampler",
        "predicted": 0.30,
        "predicted_low": 0.25,
        "predicted_high": 0.35,
        "measured": 0.28,
        "measured_low": 0.26,
        "measured_high": 0.30,
        "health": "ok",
        "commit": "0123456789ab",
        "run_dir": "runs/demo",
        "recorded_at": "2026-12-06T14:00:00+00:00",
        "method": "Amdahl: share 60.0%, replay speedup 2.0x",
    }
    fields.update(changes)
    return LedgerRecord(**fields)


@pytest.fixture(autouse=True)
def _no_ledger_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's INFER_PROF_LEDGER must not redirect what these tests write and read.
    monkeypatch.delenv("INFER_PROF_LEDGER", raising=False)
