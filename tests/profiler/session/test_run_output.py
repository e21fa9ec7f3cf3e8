"""RunOutput keeps what the run's tables read from a finished request, in one array."""

from __future__ import annotations

from infer_prof.engine.sequence import RequestOutput
from infer_prof.profiler.session.drive import RunOutput


def _output(**changes) -> RequestOutput:  # type: ignore[no-untyped-def]
    fields = dict(
        request_id=7,
        prompt="hi",
        prompt_token_ids=[1, 2, 3],
        token_ids=[4, 5],
        text="ab",
        finish_reason="length",
        error=None,
        arrival_ns=10**15,
        scheduled_ns=10**15 + 5,
        first_token_ns=10**15 + 9,
        token_ns=[10**15 + 9, 10**15 + 20],
        finish_ns=10**15 + 21,
        num_preemptions=1,
    )
    fields.update(changes)
    return RequestOutput(**fields)


def test_counts_and_times_survive_the_compaction() -> None:
    original = _output()
    kept = RunOutput.of(original)
    assert (kept.request_id, kept.finish_reason, kept.error, kept.num_preemptions) == (7, "length", None, 1)
    assert (
        (kept.prompt_tokens, kept.output_tokens) == (3, 2) == (original.prompt_tokens, original.output_tokens)
    )
    assert (kept.arrival_ns, kept.scheduled_ns, kept.first_token_ns, kept.finish_ns) == (
        original.arrival_ns,
        original.scheduled_ns,
        original.first_token_ns,
        original.finish_ns,
    )
    assert list(kept.token_ns) == original.token_ns and kept.ok and kept.result() is kept


def test_times_that_never_happened_stay_none() -> None:
    kept = RunOutput.of(
        _output(scheduled_ns=None, first_token_ns=None, token_ids=[], token_ns=[], finish_reason="abort")
    )
    assert kept.scheduled_ns is None and kept.first_token_ns is None and list(kept.token_ns) == []
    assert not kept.ok and kept.output_tokens == 0
