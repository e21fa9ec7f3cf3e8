"""Serving metrics on hand-built timelines whose TTFT, TPOT, ITL, queue time and goodput are known."""

from __future__ import annotations

import pytest

from infer_prof.profiler.analysis.metrics import (
    LATENCY_KEYS,
    RequestTiming,
    compute_metrics,
    engine_timeline_summary,
)

MS = 1_000_000  # nanoseconds


def timing(
    request_id: int,
    arrival: float,
    scheduled: float | None,
    tokens: list[float],
    prompt: int,
    ok: bool = True,
    warmup: bool = False,
) -> RequestTiming:
    """A request whose times are given in milliseconds; it finishes at its last token."""
    token_ns = [round(t * MS) for t in tokens]
    return RequestTiming(
        request_id=request_id,
        arrival_ns=round(arrival * MS),
        scheduled_ns=None if scheduled is None else round(scheduled * MS),
        first_token_ns=token_ns[0] if token_ns else None,
        token_ns=token_ns,
        finish_ns=token_ns[-1] if token_ns else None,
        prompt_tokens=prompt,
        output_tokens=len(tokens),
        ok=ok,
        warmup=warmup,
    )


# A: TTFT 100, E2E 300, TPOT 200/3, ITL 50 70 80, queue 10.
# B: one token: TTFT 50, E2E 50, no TPOT (0 for SLOs), no ITL, queue 0.
# C: TTFT 400, E2E 500, TPOT 100, ITL 100, queue 100.
# D failed, W warmup (huge numbers that would show up if it were counted).
TIMELINE = [
    timing(1, 0, 10, [100, 150, 220, 300], prompt=10),
    timing(2, 1000, 1000, [1050], prompt=20),
    timing(3, 500, 600, [900, 1000], prompt=5),
    timing(4, 200, None, [], prompt=7, ok=False),
    timing(5, 0, 5000, [9000, 9900], prompt=999, warmup=True),
]


def test_counts_throughput_and_latencies() -> None:
    metrics = compute_metrics(TIMELINE, duration_s=2.0, slos={})
    assert set(metrics) == {
        "completed",
        "failed",
        "request_throughput",
        "output_token_throughput",
        "total_token_throughput",
        "goodput",
        *LATENCY_KEYS,
        "duration_s",
    }
    assert (metrics["completed"], metrics["failed"]) == (3, 1)
    assert metrics["request_throughput"] == pytest.approx(1.5)
    assert metrics["output_token_throughput"] == pytest.approx(7 / 2)
    assert metrics["total_token_throughput"] == pytest.approx((35 + 7) / 2)
    assert metrics["goodput"] == pytest.approx(1.5)  # no SLO: every completed request is good
    ttft = metrics["ttft_ms"]
    assert ttft["mean"] == pytest.approx(550 / 3)
    assert ttft["p50"] == pytest.approx(100)
    assert ttft["p90"] == pytest.approx(100 + 0.8 * 300)  # linear interpolation in [50, 100, 400]
    assert ttft["p99"] == pytest.approx(100 + 0.98 * 300)
    assert metrics["tpot_ms"]["mean"] == pytest.approx((200 / 3 + 100) / 2)
    assert metrics["itl_ms"]["mean"] == pytest.approx(75) and metrics["itl_ms"]["p50"] == pytest.approx(75)
    assert metrics["e2e_ms"]["mean"] == pytest.approx(850 / 3)
    assert metrics["queue_ms"]["mean"] == pytest.approx(110 / 3)


@pytest.mark.parametrize(
    ("slos", "good"),
    [
        ({"ttft_ms": 150, "tpot_ms": 80}, 2),  # A and B (B's single token counts as TPOT 0)
        ({"ttft_ms": 150, "tpot_ms": 60}, 1),  # only B
        ({"e2e_ms": 500}, 3),  # the limit itself is met (<=)
        ({"e2e_ms": 100}, 1),
        ({"ttft_ms": 10}, 0),
    ],
)
def test_goodput_counts_requests_meeting_every_slo(slos: dict[str, float], good: int) -> None:
    assert compute_metrics(TIMELINE, duration_s=2.0, slos=slos)["goodput"] == pytest.approx(good / 2)


def test_window_defaults_to_first_arrival_through_last_finish() -> None:
    metrics = compute_metrics(TIMELINE, duration_s=None, slos={})
    assert metrics["duration_s"] == pytest.approx(1.05)
    assert metrics["request_throughput"] == pytest.approx(3 / 1.05)


def test_empty_and_all_failed_runs_are_none_safe() -> None:
    for timings in ([], [timing(1, 0, None, [], prompt=3, ok=False)]):
        metrics = compute_metrics(timings, duration_s=None, slos={"ttft_ms": 1})
        assert metrics["completed"] == 0 and metrics["goodput"] == 0.0
        assert all(
            metrics[key] == {"mean": None, "p50": None, "p90": None, "p99": None} for key in LATENCY_KEYS
        )


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown SLO"):
        compute_metrics(TIMELINE, duration_s=1.0, slos={"itl_ms": 5})
    with pytest.raises(ValueError, match="ok=True"):
        RequestTiming(request_id=1, arrival_ns=0, scheduled_ns=0, first_token_ns=None, finish_ns=None)
    with pytest.raises(ValueError, match="before arrival"):
        RequestTiming(request_id=1, arrival_ns=10, scheduled_ns=10, first_token_ns=5, finish_ns=20)


def test_engine_timeline_summary() -> None:
    def step(batch: int, kv: float, fragmentation: int, preemptions: int, start_ms: int, end_ms: int) -> dict:
        return {
            "batch_size": batch,
            "kv_utilization": kv,
            "fragmentation_slots": fragmentation,
            "preemptions": preemptions,
            "start_ns": start_ms * MS,
            "end_ns": end_ms * MS,
        }

    summary = engine_timeline_summary(
        [step(2, 0.5, 3, 0, 0, 10), step(4, 0.75, 1, 1, 10, 40), step(1, 0.25, 0, 2, 100, 110)]
    )
    assert summary["steps"] == 3 and summary["preemptions"] == 3
    assert summary["batch_size"]["mean"] == pytest.approx(7 / 3) and summary["batch_size"]["max"] == 4
    assert summary["batch_size"]["time_weighted_mean"] == pytest.approx((20 + 120 + 10) / 50)
    assert summary["busy_s"] == pytest.approx(0.05) and summary["span_s"] == pytest.approx(0.11)
    assert summary["busy_fraction"] == pytest.approx(0.05 / 0.11)
    assert summary["kv_utilization"] == {"mean": pytest.approx(0.5), "max": 0.75}
    assert summary["fragmentation_slots"] == {"mean": pytest.approx(4 / 3), "max": 3}

    empty = engine_timeline_summary([])
    assert (
        empty["steps"] == 0 and empty["batch_size"]["mean"] is None and empty["kv_utilization"]["max"] is None
    )
    with pytest.raises(ValueError, match="lack"):
        engine_timeline_summary([{"batch_size": 1}])
