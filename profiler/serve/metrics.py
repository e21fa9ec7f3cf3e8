"""The server's Prometheus metrics (prometheus-client): requests, tokens, TTFT/ITL/E2E histograms, KV use and queue depth."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from ...engine.sequence import RequestOutput

if TYPE_CHECKING:
    from ...engine.engine import Engine, EngineStats

PREFIX = "infer_prof"
disable_created_metrics()  # the `_created` timestamp series double the output and no dashboard reads them
# Seconds; CPU-sized: a first token takes tens of ms on a tiny model, seconds on a big one under load.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
E2E_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ServerMetrics:
    """One registry per server (tests start several); gauges read the engine when scraped."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            f"{PREFIX}_requests",
            "Requests answered, by endpoint and outcome (stop, length, abort, error, rejected).",
            ["endpoint", "outcome"],
            registry=registry,
        )
        self.prompt_tokens = Counter(
            f"{PREFIX}_prompt_tokens", "Prompt tokens of finished requests.", registry=registry
        )
        self.generation_tokens = Counter(
            f"{PREFIX}_generation_tokens", "Generated tokens of finished requests.", registry=registry
        )
        self.ttft = Histogram(
            f"{PREFIX}_time_to_first_token_seconds",
            "Arrival at the engine to the first token.",
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.itl = Histogram(
            f"{PREFIX}_inter_token_latency_seconds",
            "Gap between consecutive tokens of a request.",
            buckets=ITL_BUCKETS,
            registry=registry,
        )
        self.e2e = Histogram(
            f"{PREFIX}_e2e_request_latency_seconds",
            "Arrival at the engine to the last token.",
            buckets=E2E_BUCKETS,
            registry=registry,
        )
        _engine_gauges(registry, engine, model_name)

    def observe_finished(self, endpoint: str, output: RequestOutput) -> None:
        """Count one finished request and its latencies (from the engine's own timestamps)."""
        self.requests.labels(endpoint=endpoint, outcome=output.finish_reason).inc()
        self.prompt_tokens.inc(len(output.prompt_token_ids))
        self.generation_tokens.inc(len(output.token_ids))
        if output.first_token_ns is not None:
            self.ttft.observe((output.first_token_ns - output.arrival_ns) / 1e9)
        for earlier, later in zip(output.token_ns, output.token_ns[1:]):
            self.itl.observe((later - earlier) / 1e9)
        self.e2e.observe((output.finish_ns - output.arrival_ns) / 1e9)

    def observe_rejected(self, endpoint: str) -> None:
        self.requests.labels(endpoint=endpoint, outcome="rejected").inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text format body and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _engine_gauges(registry: CollectorRegistry, engine: Engine, model_name: str) -> None:
    """The model's info gauge and the gauges that read the engine when scraped: KV blocks, queue, unfinished."""
    info = Gauge(f"{PREFIX}_model_info", "The served model (value 1).", ["model"], registry=registry)
    info.labels(model=model_name).set(1)
    # Each gauge's help text and how it reads the engine's stats() when scraped.
    gauges: dict[str, tuple[str, Callable[[EngineStats], float]]] = {
        "kv_blocks_used": (
            "KV cache blocks in use.",
            lambda stats: stats["blocks_total"] - stats["blocks_free"],
        ),
        "kv_blocks_total": ("KV cache blocks in the pool.", lambda stats: stats["blocks_total"]),
        "kv_usage_ratio": (
            "KV cache blocks in use / pool size.",
            lambda stats: 1 - stats["blocks_free"] / max(1, stats["blocks_total"]),
        ),
        "requests_waiting": (
            "Requests the scheduler holds but has not started (the queue depth).",
            lambda stats: stats["waiting"],
        ),
        "requests_running": ("Requests the scheduler is running.", lambda stats: stats["running"]),
    }
    for name, (text, read) in gauges.items():

        def value(read: Callable[[EngineStats], float] = read) -> float:
            return float(read(engine.stats()))

        Gauge(f"{PREFIX}_{name}", text, registry=registry).set_function(value)
    Gauge(
        f"{PREFIX}_requests_unfinished",
        "Requests accepted and not finished (submitted, waiting or running).",
        registry=registry,
    ).set_function(lambda: float(engine.num_unfinished))
