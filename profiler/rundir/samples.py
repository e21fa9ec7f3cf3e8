"""Samples picked out of a run directory's tables: the measured requests and their token gaps (reports and budgets alike)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

TRUE_TEXTS = ("true", "1", "1.0")


def parse_token_ns(cell: Any) -> list[int]:
    """requests.csv stores every token's timestamp as a space-separated string (one timestamp reads back as a
    number)."""
    if (
        isinstance(cell, (int, float, np.integer, np.floating))
        and not isinstance(cell, bool)
        and not math.isnan(cell)
    ):
        return [int(cell)]
    if not isinstance(cell, str) or not cell.strip():
        return []
    return [int(part) for part in cell.split()]


def flag(series: pd.Series, default: bool) -> pd.Series:
    """A boolean column as bools: CSV round trips give bools, or objects when a cell was empty (-> default)."""
    if series.dtype == bool:
        return series
    return series.map(lambda value: default if pd.isna(value) else str(value).strip().lower() in TRUE_TEXTS)


def measured_requests(requests: pd.DataFrame, *, by_arrival: bool = False) -> pd.DataFrame:
    """Requests that count toward latency: finished ok and not warm-up (as the metrics section counts);
    `by_arrival` puts them in arrival order, the time order a block bootstrap needs."""
    if requests.empty:
        return requests
    keep = pd.Series(True, index=requests.index)
    if "ok" in requests:
        keep &= flag(requests["ok"], True)
    if "warmup" in requests:
        keep &= ~flag(requests["warmup"], False)
    chosen = requests[keep]
    if by_arrival and "arrival_ns" in chosen:
        return chosen.sort_values("arrival_ns", kind="stable")
    return chosen


def token_gaps_ms(requests: pd.DataFrame, *, in_time_order: bool = False) -> np.ndarray:
    """Gaps between consecutive tokens of each request, pooled, in milliseconds: request by request, or
    ordered by when each gap's token arrived (`in_time_order`: the tokens of one step sit together)."""
    if "token_ns" not in requests or requests.empty:
        return np.empty(0)
    stamps = [np.asarray(parse_token_ns(cell), dtype=np.int64) for cell in requests["token_ns"]]
    gaps = [np.diff(times) for times in stamps if times.size > 1]
    if not gaps:
        return np.empty(0)
    pooled = np.concatenate(gaps) / 1e6
    if not in_time_order:
        return pooled
    arrivals = np.concatenate([times[1:] for times in stamps if times.size > 1])
    return pooled[np.argsort(arrivals, kind="stable")]
