"""The `recorder` fixture: a test taking it runs once with the tracer's C span log and once with its Python twin."""

from __future__ import annotations

import pytest

from infer_prof.profiler.collectors.span_log import PYTHON_SPANS_VARIABLE, native


@pytest.fixture(params=["c", "python"])
def recorder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which span log RecordingTracer() makes in this test: "c" (skipped where it is not built) or "python"."""
    if request.param == "c":
        if native() is None:
            pytest.skip("the C span log is not built (pip install -e . with a C compiler builds it)")
        monkeypatch.delenv(PYTHON_SPANS_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(PYTHON_SPANS_VARIABLE, "1")
    return str(request.param)
