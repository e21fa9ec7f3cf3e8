"""Derived views of a run directory that several reports share: latency samples, phases, a binned timeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..profiler.rundir.results import PHASE_ORDER, STEP_COLUMNS, RunData, RunResult, read_run
from ..profiler.rundir.samples import measured_requests, token_gaps_ms
from ..profiler.rundir.schema import CollectorStatus
from .slo import SloCheck, check_slos, slo_targets
from .stacks import ThreadGroup, process_groups, read_stacks, thread_groups

LATENCY_NAMES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
LATENCY_LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "E2E", "queue_ms": "Queue"}


def load_run(source: RunData | str | Path) -> RunData:
    """Accept a loaded run or a run directory."""
    return source if isinstance(source, RunData) else read_run(source)


def latency_samples(requests: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-request TTFT/TPOT/E2E and per-token ITL samples in ms, from the measured requests."""
    measured = measured_requests(requests)
    samples = {}
    for name in ("ttft_ms", "tpot_ms", "e2e_ms"):
        column = measured[name] if name in measured else pd.Series(dtype=float)
        samples[name] = pd.to_numeric(column, errors="coerce").dropna().to_numpy(dtype=float)
    samples["itl_ms"] = token_gaps_ms(measured)
    return {name: samples[name] for name in LATENCY_NAMES}


def phase_columns(steps: pd.DataFrame) -> list[str]:
    """The per-step `<phase>_ms` span columns, in the order the engine runs them."""
    extra = [c for c in steps.columns if c.endswith("_ms") and c not in STEP_COLUMNS]
    known = [f"{name}_ms" for name in PHASE_ORDER if f"{name}_ms" in extra]
    return known + sorted(set(extra) - set(known))


def run_start_ns(run: RunData) -> int:
    """The earliest timestamp of the run (first arrival or first step), the zero of every timeline."""
    candidates = []
    if not run.steps.empty and "start_ns" in run.steps:
        candidates.append(int(run.steps["start_ns"].min()))
    if not run.requests.empty and "arrival_ns" in run.requests:
        arrivals = pd.to_numeric(run.requests["arrival_ns"], errors="coerce").dropna()
        if not arrivals.empty:
            candidates.append(int(arrivals.min()))
    return min(candidates) if candidates else 0


def binned_timeline(steps: pd.DataFrame, start_ns: int, max_points: int = 300) -> pd.DataFrame:
    """Steps averaged into at most `max_points` equal time bins (charts of thousands of steps stay light).

    Columns: t_s (bin centre, seconds since start), one per phase (mean ms per step), other_ms
    (step time outside any phase), batch_size, kv_utilization, steps (count in the bin).
    """
    if steps.empty or "start_ns" not in steps:
        return pd.DataFrame()
    phases = phase_columns(steps)
    t_s = (steps["start_ns"].to_numpy(dtype=np.int64) - start_ns) / 1e9
    frame = pd.DataFrame({"t_s": t_s})
    for column in phases:
        frame[column] = steps[column].to_numpy(dtype=float)
    if "duration_ms" in steps:
        frame["other_ms"] = np.clip(
            steps["duration_ms"].to_numpy(dtype=float) - frame[phases].sum(axis=1), 0, None
        )
    for column in ("batch_size", "kv_utilization"):
        if column in steps:
            frame[column] = steps[column].to_numpy(dtype=float)
    if len(frame) <= max_points:
        return frame.assign(steps=1)
    edges = np.linspace(t_s.min(), t_s.max(), max_points + 1)
    bins = np.clip(np.searchsorted(edges, t_s, side="right") - 1, 0, max_points - 1)
    grouped = frame.groupby(bins)
    binned = grouped.mean()
    binned["t_s"] = (edges[:-1] + edges[1:])[binned.index] / 2
    binned["steps"] = grouped.size()
    return binned.reset_index(drop=True)


def why_not_measured(result: RunResult, section: str) -> str:
    """A short reason a section is absent, from the config and the collectors' statuses."""
    if result.config.get("profile") == "off":
        return "profiling was off: --profile off"
    split = (result.target or {}).get("split") or {}
    if result.target is not None and not split.get("available"):
        return f"the server's split is unavailable: {split.get('reason') or 'no reason recorded'}"
    wanted = {"breakdown": ("spans",), "samples": ("py-spy",), "verdict": ("spans",)}.get(section, ())
    for name in wanted:
        status: CollectorStatus = result.collectors.get(name) or {}
        if status.get("status") in ("skipped", "failed"):
            return f"{name} {status['status']}: {status.get('reason') or 'no reason recorded'}"
    if result.partial:
        return f"the run is partial: {result.partial_reason or 'no reason recorded'}"
    return "the run recorded no such section"


@dataclass
class ReportData:
    """A run loaded once with the derived series every report draws from."""

    run: RunData
    timeline: pd.DataFrame
    latencies: dict[str, np.ndarray]
    slo: SloCheck
    threads: list[ThreadGroup]  # py-spy's stacks by thread group, the engine thread first (empty: none)
    start_ns: int = 0  # the zero of every timeline (run_start_ns)

    @property
    def engine_thread(self) -> ThreadGroup | None:
        return next((group for group in self.threads if group.engine), None)

    @property
    def result(self) -> RunResult:
        return self.run.result

    @property
    def path(self) -> Path:
        return self.run.path


def prepare(source: ReportData | RunData | str | Path, max_points: int = 300) -> ReportData:
    """Load a run (unless given) and derive its timeline and latency samples."""
    if isinstance(source, ReportData):
        return source
    run = load_run(source)
    timeline = binned_timeline(run.steps, run_start_ns(run), max_points)
    slo = check_slos(run.requests, slo_targets(run.result))
    stacks = read_stacks(run)
    return ReportData(
        run=run,
        timeline=timeline,
        latencies=latency_samples(run.requests),
        slo=slo,
        threads=[*(thread_groups(stacks) if stacks else []), *process_groups(run)],
        start_ns=run_start_ns(run),
    )
