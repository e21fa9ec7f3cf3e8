"""The request timeline: a Gantt chart of requests (queued, prefill, decode) over the run, and how many
requests were in each state at each moment, with preemptions marked.

From requests.csv: queued is arrival -> scheduled, prefill scheduled -> first token, decode first
token -> finish. A preempted request is recomputed, so its prefill and decode are drawn as its first
schedule and last token saw them, and the preemption itself is marked where steps.csv counted one.
More than MAX_ROWS requests are sampled evenly in arrival order (preempted ones first kept), and the
chart says so; the state counts below always cover every request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from ...profiler.rundir.results import RunData
from ...profiler.rundir.samples import flag
from .charts import Target

MAX_ROWS = 240
STATE_COLOURS = {"queued": "#BBBBBB", "prefill": "#E69F00", "decode": "#0072B2"}
PREEMPTION_COLOUR = "#c0392b"


@dataclass
class RequestTimeline:
    """Per shown request its state times (seconds since the run started), plus the counts over time."""

    rows: pd.DataFrame  # arrival, scheduled, first, finish (s; NaN when never reached), preemptions, ok
    total: int  # requests in the run
    states: pd.DataFrame  # t_s, queued, prefill, decode: requests in each state at t_s
    preemptions_s: np.ndarray  # times of the steps that preempted
    end_s: float

    @property
    def sampled(self) -> bool:
        return len(self.rows) < self.total


def request_timeline(
    run: RunData, start_ns: int, max_rows: int = MAX_ROWS, bins: int = 300
) -> RequestTimeline | None:
    """The timeline of a run's requests, or None when it recorded none with an arrival time."""
    requests = run.requests
    if requests.empty or "arrival_ns" not in requests:
        return None
    times = pd.DataFrame(
        {
            name: (pd.to_numeric(requests.get(column), errors="coerce") - start_ns) / 1e9
            for name, column in (
                ("arrival", "arrival_ns"),
                ("scheduled", "scheduled_ns"),
                ("first", "first_token_ns"),
                ("finish", "finish_ns"),
            )
        }
    )
    times["preemptions"] = (
        pd.to_numeric(requests.get("num_preemptions", 0), errors="coerce").fillna(0).astype(int)
    )
    times["ok"] = flag(requests["ok"], True) if "ok" in requests else True
    times = times.dropna(subset=["arrival"]).sort_values("arrival", kind="stable").reset_index(drop=True)
    if times.empty:
        return None
    end_s = _end_s(run, start_ns, times)
    # A request still open at the end (aborted) lasts until the run ended.
    times["finish"] = times["finish"].fillna(end_s)
    steps = run.steps
    preempted_at = np.empty(0)
    if not steps.empty and "preemptions" in steps and "start_ns" in steps:
        hit = pd.to_numeric(steps["preemptions"], errors="coerce").fillna(0) > 0
        preempted_at = (steps.loc[hit, "start_ns"].to_numpy(dtype=float) - start_ns) / 1e9
    return RequestTimeline(
        rows=_sample(times, max_rows),
        total=len(times),
        states=_states(times, end_s, bins),
        preemptions_s=preempted_at,
        end_s=end_s,
    )


def _end_s(run: RunData, start_ns: int, times: pd.DataFrame) -> float:
    ends = [times[["arrival", "scheduled", "first", "finish"]].max().max()]
    if not run.steps.empty and "end_ns" in run.steps:
        ends.append((float(run.steps["end_ns"].max()) - start_ns) / 1e9)
    return float(np.nanmax(ends))


def _sample(times: pd.DataFrame, max_rows: int) -> pd.DataFrame:
    """Every request when they fit; else the preempted ones (up to a third) and an even spread of the rest."""
    if len(times) <= max_rows:
        return times
    preempted = times.index[times["preemptions"] > 0][: max_rows // 3]
    rest = times.index.difference(preempted)
    spread = rest[np.linspace(0, len(rest) - 1, max_rows - len(preempted)).round().astype(int)]
    return times.loc[sorted(set(preempted) | set(spread))]


def _states(times: pd.DataFrame, end_s: float, bins: int) -> pd.DataFrame:
    """Requests queued, in prefill and in decode at each of `bins` instants across the run."""
    t = np.linspace(0.0, max(end_s, 1e-9), bins)
    arrival, finish = times["arrival"].to_numpy(), times["finish"].to_numpy()
    scheduled = times["scheduled"].fillna(times["finish"]).to_numpy()
    first = times["first"].fillna(times["finish"]).to_numpy()

    def within(low: np.ndarray, high: np.ndarray) -> np.ndarray:
        return ((low[None, :] <= t[:, None]) & (t[:, None] < high[None, :])).sum(axis=1)

    return pd.DataFrame(
        {
            "t_s": t,
            "queued": within(arrival, scheduled),
            "prefill": within(scheduled, first),
            "decode": within(first, finish),
        }
    )


def draw_request_timeline(target: Target, timeline: RequestTimeline) -> None:
    """Gantt rows of the (shown) requests above the state counts of all of them, one time axis."""
    gantt_ax, states_ax = target.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    _draw_gantt(gantt_ax, timeline)
    _draw_state_counts(states_ax, timeline)
    _legend_above(target, gantt_ax, states_ax)


def _draw_gantt(ax: Axes, timeline: RequestTimeline) -> None:
    """A bar per shown request, queued then prefill then decode, its preemptions and failures marked."""
    rows = timeline.rows.reset_index(drop=True)
    y = np.arange(len(rows))
    scheduled = rows["scheduled"].fillna(rows["finish"])
    first = rows["first"].fillna(rows["finish"])
    for state, left, right in (
        ("queued", rows["arrival"], scheduled),
        ("prefill", scheduled, first),
        ("decode", first, rows["finish"]),
    ):
        width = (right - left).clip(lower=0)
        ax.barh(y, width, left=left, height=0.82, color=STATE_COLOURS[state], linewidth=0, label=state)
    _mark_requests(ax, rows, y)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_ylabel("requests, by arrival")
    shown = (
        f"every request ({timeline.total:,})"
        if not timeline.sampled
        else (f"{len(rows):,} of {timeline.total:,} requests (evenly by arrival, preempted ones kept)")
    )
    ax.set_title(f"Requests over the run: {shown}")
    ax.grid(axis="y", visible=False)


def _mark_requests(ax: Axes, rows: pd.DataFrame, y: np.ndarray) -> None:
    """A cross at the end of each preempted request, a tick at the end of each failed one."""
    preempted = rows["preemptions"] > 0
    if preempted.any():
        ax.scatter(
            rows.loc[preempted, "finish"],
            y[preempted],
            marker="x",
            s=14,
            color=PREEMPTION_COLOUR,
            linewidths=1,
            zorder=3,
            label="preempted (recomputed)",
        )
    failed = ~rows["ok"].astype(bool)
    if failed.any():
        ax.scatter(
            rows.loc[failed, "finish"],
            y[failed],
            marker="|",
            s=30,
            color="#1d2330",
            zorder=3,
            label="failed or aborted",
        )


def _draw_state_counts(ax: Axes, timeline: RequestTimeline) -> None:
    """How many of all the requests were queued, in prefill and in decode over time, preempting steps marked."""
    states = timeline.states
    ax.stackplot(
        states["t_s"],
        states["queued"],
        states["prefill"],
        states["decode"],
        colors=[STATE_COLOURS[name] for name in ("queued", "prefill", "decode")],
        labels=["queued", "prefill", "decode"],
        linewidth=0,
    )
    if timeline.preemptions_s.size:
        ax.plot(
            timeline.preemptions_s,
            np.zeros_like(timeline.preemptions_s),
            "|",
            color=PREEMPTION_COLOUR,
            markersize=10,
            clip_on=False,
            label=f"preemption ({timeline.preemptions_s.size:,} steps)",
        )
    ax.set_ylabel("requests")
    ax.set_xlabel("seconds since the run started")
    ax.set_xlim(0, timeline.end_s)


def _legend_above(target: Target, gantt_ax: Axes, states_ax: Axes) -> None:
    """One legend above both panels (the step timeline's sits above it too, so their time axes line up)."""
    handles, labels = gantt_ax.get_legend_handles_labels()
    extra = [
        (h, label)
        for h, label in zip(*states_ax.get_legend_handles_labels())
        if label.startswith("preemption")
    ]
    handles += [h for h, _ in extra]
    labels += [label for _, label in extra]
    target.legend(handles, labels, loc="outside upper center", ncol=len(labels), fontsize=8)
