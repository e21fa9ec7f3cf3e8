"""The verdict for an engine infer-prof did not write, from the roles and splits of its processes (profiler.analysis.roles).

The field's 1% / 30% rule is about the engine loop's own time: host control work against the model's
time, per step. The loop's busy time B is every sample of its engine threads that is not a wait for
work (idle); inside it:

    interpreter   Python the loop runs (its scheduler, output handling, glue), the rule's share
    kernel        native model work in the loop's own thread (llama.cpp, transformers run the model there)
    waiting       the loop waiting on its model worker (vLLM's EngineCore for its Worker process): model
                  time from the loop's view, on the step's critical path
    lock          contention (the GIL among it), never a wait for work

A wait for work is idle, never lock; a request waiting behind another for the engine is queueing
(llama-cpp-python's server takes one lock per request), and the verdict says which it saw. The API
server's share of its event loop and its GIL waits are reported beside the loop. Where the model runs
in another process, the step's critical path is: loop work, then waiting on the worker (inside which
the worker's own kernel / Python split is shown when its process was sampled), then back.

Predicted gains: no C twin exists for a foreign engine, so each component gets the Amdahl bound at an
infinite speedup, its share of the loop's busy time ("if the scheduler cost nothing the step would be
X% shorter"), with the Wilson 95% interval of that share (profiler.stats): a bound only. A slowdown run
(`--what-if`, profiler.analysis.probe_slowdown) measures a component's sensitivity instead, and
with_slowdowns() relabels its line: slowdown-measured, with the sensitivity and the gain it predicts.
With Python-only stacks (py-spy without --native) the interpreter share is bounded, not measured: from
the samples whose innermost Python frame is control code (lower) to every Python-innermost sample (upper).

The figures are counted in foreign_figures (one typed record, LoopFigures), worded in foreign_words; this
module builds the result's sections from them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rundir.schema import (
    AmdahlBound,
    ApiThread,
    Breakdown,
    CriticalPath,
    ForeignProcess,
    ForeignVerdict,
    Interval,
    Metrics,
    Probe,
    ProbeWhatIf,
    SampledThread,
    Verdict,
)
from ..stats import wilson_interval
from .breakdown import samples_split
from .diagnose import rule_for, straddled
from .foreign_figures import (
    ApiFigures,
    LoopFigures,
    engine_process,
    engine_threads,
    loop_counts,
    loop_figures,
)
from .foreign_words import (
    AMDAHL_NOTE,
    BOUND_ONLY,
    PYTHON_ONLY_SPOT,
    api_sentence,
    bound_only,
    component_words,
    confidence_words,
    idle_loop_reason,
    interval_method,
    no_loop_reason,
    slowdown_measured,
    verdict_reasons,
)
from .sample_counts import pool_counts


def foreign_breakdown(processes: Sequence[ForeignProcess], wall_ns: int) -> Breakdown:
    """A `breakdown` section from processes (ProcessRoles.as_dict): the engine process's engine threads as the
    samples split, every other thread pooled as client_threads, and the processes themselves."""
    notes: list[str] = []
    chosen = engine_process(processes)
    engine_counts = other_counts = None
    if chosen is not None:
        others = [
            thread["counts"]
            for process in processes
            for thread in process["threads"]
            if not (process is chosen and thread["thread_id"] in chosen["engine_threads"])
        ]
        engine_counts, other_counts = loop_counts(engine_threads(chosen)), pool_counts(others)
        if not engine_counts["samples"]:
            engine_counts = None
        names = ", ".join(f"{thread['name']} ({thread['thread_id']})" for thread in engine_threads(chosen))
        notes.append(
            f"engine thread{'s' if len(chosen['engine_threads']) > 1 else ''} of pid {chosen['pid']}: {names}, "
            f"chosen by what {'they do' if len(chosen['engine_threads']) > 1 else 'it does'} (its role: "
            f"{chosen['role']}), not by name"
        )
    for process in processes:
        notes.extend(process.get("notes") or [])
    return {
        "wall_s": wall_ns / 1e9,
        "methods": {"spans": None, "samples": samples_split(engine_counts)},
        "disagreement": {},
        "component_disagreement": {},
        "beyond_noise": [],
        "components_beyond_noise": [],
        "client_threads": samples_split(other_counts),
        "notes": notes,
        "processes": list(processes),
    }


def foreign_verdict(
    processes: Sequence[ForeignProcess], *, blind_spots: list[str] | None = None, confidence: float = 0.95
) -> Verdict:
    """The result's `verdict` section for a foreign engine (same keys as diagnose(), plus `foreign`); the interpreter
    share's interval at `confidence`."""
    spots = list(blind_spots or [])
    chosen = engine_process(processes)
    if chosen is None:
        return _no_verdict(processes, spots, no_loop_reason(processes))
    figures = loop_figures(processes, chosen, confidence=confidence)
    if figures is None:
        return _no_verdict(processes, spots, idle_loop_reason(chosen["role"], chosen["pid"]))
    interval: Interval = {
        "share": figures.share,
        "low": figures.low,
        "high": figures.high,
        "samples": int(figures.busy),  # whole samples (a pool taking turns keeps whole ones)
        "method": interval_method(figures),
        "confidence": figures.confidence,
    }
    unsure = straddled(interval)
    rule = rule_for(figures.share)
    reasons = verdict_reasons(figures, rule, unsure)
    if not figures.native:
        spots.append(PYTHON_ONLY_SPOT)
    return {
        "category": figures.bottleneck,
        "component": figures.bottleneck_component,
        "share": figures.bottleneck_samples / figures.samples,
        "interpreter_share": figures.share,
        "interpreter_interval": interval,
        "straddles": unsure,
        "rule": rule,
        "reasons": reasons,
        "predictions": {},
        "blind_spots": spots,
        "source": "samples",
        "foreign": _foreign_section(figures, processes),
    }


def _no_verdict(processes: Sequence[ForeignProcess], spots: list[str], reason: str) -> Verdict:
    """The verdict section when there is nothing to judge: every figure null, the reason, the processes."""
    return {
        "category": None,
        "component": None,
        "share": None,
        "interpreter_share": None,
        "interpreter_interval": None,
        "straddles": [],
        "rule": None,
        "predictions": {},
        "blind_spots": spots,
        "source": None,
        "reasons": [reason],
        "foreign": {"processes": _process_rows(processes)},
    }


def _foreign_section(figures: LoopFigures, processes: Sequence[ForeignProcess]) -> ForeignVerdict:
    """The verdict's `foreign` section: the loop's shares, the critical path, waits, the API server, the bounds."""
    busy = figures.busy
    return {
        "engine": figures.engine,
        "engine_pid": figures.pid,
        "engine_threads": figures.engine_threads,
        "loop": {
            "samples": figures.samples,
            "busy": busy,
            "idle": figures.idle / figures.samples,
            "interpreter": figures.interpreter / busy,
            "kernel": figures.kernel / busy,
            "waiting_on_worker": figures.on_worker / busy,
            "lock": figures.lock / busy,
            "gil": figures.gil / busy if figures.native else None,
        },
        "critical_path": _critical_path(figures),
        "waits": figures.waits.shares(),
        "api": _api_section(figures.api),
        "amdahl": _amdahl_section(figures),
        "amdahl_note": AMDAHL_NOTE,
        "processes": _process_rows(processes),
    }


def _critical_path(figures: LoopFigures) -> CriticalPath | None:
    """The step of a loop that waits on its model worker: its own work, the wait, and the worker's split."""
    busy, on_worker, worker = figures.busy, figures.on_worker, figures.worker
    if not on_worker:
        return None
    return {
        "loop_work": (busy - on_worker) / busy,
        "waiting_on_worker": on_worker / busy,
        "worker": None
        if worker is None
        else {
            "pid": worker.pid,
            "busy_samples": worker.busy,
            # Python-only stacks cannot tell a kernel from the Python line that called it.
            "kernel": worker.kernel / worker.busy if worker.native else None,
            "interpreter": worker.interpreter / worker.busy if worker.native else None,
            "components": worker.components,
        },
    }


def _api_section(api: ApiFigures | None) -> ApiThread | None:
    """The API server's event loop as the section holds it, with its sentence."""
    if api is None:
        return None
    return {
        "pid": api.pid,
        "thread_id": api.thread_id,
        "work_share": api.work_share,
        "gil_wait": api.gil_wait,
        "components": api.components,
        "sentence": api_sentence(api),
    }


def _amdahl_section(figures: LoopFigures) -> dict[str, AmdahlBound]:
    """Each component's Amdahl bound, where it runs, and how it was obtained (a bound only, until with_slowdowns)."""
    return {
        name: {
            "bound": bound.bound,
            "low": bound.low,
            "high": bound.high,
            "samples": bound.samples,
            "where": f"model worker pid {bound.worker_pid}" if bound.in_worker else "engine loop",
            "method": BOUND_ONLY,
        }
        for name, bound in figures.bounds.items()
    }


def with_slowdowns(verdict: Verdict, what_if: ProbeWhatIf | None) -> None:
    """Mark each of the foreign verdict's predictions with how it was obtained: a component a slowdown run measured
    gets its sensitivity and predicted gain in place of "bound only"; every other keeps its Amdahl bound."""
    foreign = verdict.get("foreign") or {}
    amdahl = foreign.get("amdahl") or {}
    engine = foreign.get("engine") or "this engine"
    measured = {
        name: entry
        for name, entry in ((what_if or {}).get("components") or {}).items()
        if entry.get("sensitivity") is not None
    }
    tail = bound_only(engine)
    reasons = list(verdict.get("reasons") or [])
    for name, bound in amdahl.items():
        entry = measured.get(name.removeprefix("worker:"))
        bound["method"] = BOUND_ONLY if entry is None else slowdown_measured(entry).removesuffix(".")
        if entry is None:
            continue
        start = f"If {component_words(name)} cost nothing,"
        reasons = [
            reason.replace(tail, slowdown_measured(entry)) if reason.startswith(start) else reason
            for reason in reasons
        ]
    verdict["reasons"] = reasons


def _process_rows(processes: Sequence[ForeignProcess]) -> list[ForeignProcess]:
    """One row per process: pid, role, engine, engine thread, and each thread's role and split (counts left out)."""
    return [
        {
            "pid": process["pid"],
            "role": process["role"],
            "role_words": process.get("role_words"),
            "engine": process.get("engine"),
            "engine_thread": process.get("engine_thread"),
            "resolution": process.get("resolution"),
            "threads": [_without_counts(thread) for thread in process["threads"]],
        }
        for process in processes
    ]


def _without_counts(thread: SampledThread) -> SampledThread:
    """analysis.roles's thread row, less its counts (the verdict's rows show the shares alone)."""
    row = thread.copy()
    row.pop("counts", None)
    return row


# A first token that took this many times a later token's time, while the loop was busy, waited for its turn.
QUEUED_TTFT_OVER_TPOT = 20.0
BUSY_LOOP = (
    0.8  # the loop's busy share of its samples above which waits for work cannot explain a slow first token
)


def queueing_reason(verdict: Verdict, metrics: Metrics) -> str | None:
    """What the client saw that samples cannot: with the loop busy and the first token many tokens' time late,
    requests queued behind one another (on a lock or an event loop), rather than the loop waiting for work."""
    loop = ((verdict.get("foreign") or {}).get("loop")) or {}
    ttft = (metrics.get("ttft_ms") or {}).get("p50")
    tpot = (metrics.get("tpot_ms") or {}).get("p50")
    idle = loop.get("idle")
    if not (
        isinstance(ttft, (int, float)) and isinstance(tpot, (int, float)) and tpot > 0 and idle is not None
    ):
        return None
    if 1 - idle < BUSY_LOOP or ttft < QUEUED_TTFT_OVER_TPOT * tpot:
        return None
    return (
        f"Requests queued behind one another: the engine loop was busy {1 - idle:.0%} of its samples, and a "
        f"request's first token took {ttft:,.0f} ms (p50), {ttft / tpot:,.0f}x the {tpot:.1f} ms of each later "
        "token; what waits here is the requests, not the loop."
    )


def with_probe_bound(verdict: Verdict, probe: Probe | None, *, confidence: float = 0.95) -> None:
    """Where the probe timed the engine loop's own work (probe_spans.loop_work_ms: its steps' exclusive time and its
    calls that are not waits), that share of step time bounds the loop's interpreter share from above: the verdict's
    interval keeps the samples' lower end and takes the lower of the two upper ends. Each method then stands at half
    the miss rate (at 95%: the samples' Wilson interval at 97.5%, the probe's bound one-sided at 97.5%, which is
    the upper end of its two-sided 95% interval), so the joined interval still covers at `confidence`; where the bound lies below the samples' lower end the methods disagree, the
    samples' interval stays, and the reasons say so. The straddled thresholds and the rule follow the new interval."""
    interval = verdict.get("interpreter_interval") or {}
    work = ((probe or {}).get("steps") or {}).get("loop_work") or {}
    bound, steps = work.get("high"), ((probe or {}).get("steps") or {}).get("with_probes_on")
    given_low, given_high = interval.get("low"), interval.get("high")
    if bound is None or given_low is None or given_high is None:
        return
    samples, share = interval.get("samples") or 0, interval.get("share") or 0.0
    low, high = float(given_low), float(given_high)
    if samples and (interval.get("method") or "").startswith("Wilson"):
        wider = wilson_interval(round(share * samples), samples, confidence=1 - (1 - confidence) / 2)
        low, high = wider.low, wider.high
    said = (
        f"The probe timed the loop's own work at {work.get('ms_per_step', 0.0):.2f} ms a step, {work.get('share', 0.0):.1%} "
        f"of step time (at most {bound:.1%}, {confidence_words(confidence)} bootstrap interval over {steps or 0:,} steps): an upper bound on its "
        "interpreter time"
    )
    reasons = list(verdict.get("reasons") or [])
    if bound < low:
        reasons.append(
            f"{said}, below the samples' interval: the two methods disagree; the samples' interval stays."
        )
        verdict["reasons"] = reasons
        return
    joined_high = min(high, bound)
    point = min(share, joined_high)  # the samples' point, where the bound lies below it, is held to the bound
    joined: Interval = {
        **interval,
        "share": point,
        "low": low,
        "high": joined_high,
        "method": (
            f"{interval.get('method')}, at {confidence_words(1 - (1 - confidence) / 2)}, its upper end lowered to the "
            f"probe's bound on the loop's own work (one-sided {confidence_words(1 - (1 - confidence) / 2)}): together "
            f"{confidence_words(confidence)}"
        ),
    }
    verdict["interpreter_interval"] = joined
    unsure = straddled(joined)
    verdict["straddles"] = unsure
    verdict["interpreter_share"] = point
    verdict["rule"] = rule_for(point)
    settled = (
        f"; with it the interval is [{low:.1%}, {joined_high:.1%}], which clears the rule's thresholds: {rule_for(point)}."
        if not unsure
        else f"; with it the interval is [{low:.1%}, {joined_high:.1%}], still straddling "
        f"{' and '.join(f'{t:.0%}' for t in unsure)}."
    )
    reasons.append(said + settled)
    verdict["reasons"] = reasons
