"""The lines printed right after the verdict, each a rule of the result, most serious first."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ....profiler.rundir.results import RunResult
from ...format import fmt_number, fmt_pct
from .reads import engine_spans


@dataclass
class Headline:
    """One line right after the verdict: what a reader must know before reading any figure.

    level: "alarm" (the run or its figures are not what they seem), "warn" (read the verdict with care),
    "note" (context that changes how to act on it)."""

    text: str
    level: str = "warn"


HeadlineRule = Callable[[RunResult], "Headline | None"]


def headline_warnings(result: RunResult) -> list[Headline]:
    """The lines printed right after the verdict, in HEADLINE_RULES' order (most serious first).

    To add one, write a function RunResult -> Headline | None and put it in HEADLINE_RULES where it ranks."""
    return [line for rule in HEADLINE_RULES if (line := rule(result)) is not None]


def dead_server_log(result: RunResult) -> Headline | None:
    """A launched server that died during the load: the last lines of its log (the whole log is in the run
    directory, server.log)."""
    lines = ((result.target or {}).get("death") or {}).get("log_tail")
    if not lines:
        return None
    return Headline("The server's log ends (server.log): " + " | ".join(str(line) for line in lines), "alarm")


def partial_run(result: RunResult) -> Headline | None:
    if not result.partial:
        return None
    return Headline(f"Partial run: {result.partial_reason or 'no reason recorded'}.", "alarm")


def failed_collectors(result: RunResult) -> Headline | None:
    """Collectors that failed (not skipped): the figures they feed are missing or partial."""
    failed = [
        f"{name} ({status.get('reason') or 'no reason recorded'})"
        for name, status in (result.collectors or {}).items()
        if (status or {}).get("status") == "failed"
    ]
    return (
        Headline(f"Collector{'s' if len(failed) > 1 else ''} failed: {'; '.join(failed)}.")
        if failed
        else None
    )


def interval_straddles(result: RunResult) -> Headline | None:
    """The interpreter share's interval spans a threshold of the rule: the verdict could go either way."""
    verdict = result.verdict or {}
    interval, straddled = verdict.get("interpreter_interval") or {}, verdict.get("straddles") or []
    if not straddled or interval.get("low") is None:
        return None
    thresholds = " and ".join(f"{threshold:.0%}" for threshold in straddled)
    level = f"{100 * (interval.get('confidence') or 0.95):.4g}%"
    widest = f", held open by the {interval['widest']}" if interval.get("widest") else ""
    return Headline(
        f"The interpreter share's {level} interval [{fmt_pct(interval['low'])}, {fmt_pct(interval['high'])}] "
        f"straddles the {thresholds} threshold{widest}: this run cannot tell yet; run longer ("
        + ("a larger --max-time" if verdict.get("stopping") else "`--until resolved --max-time SECONDS`")
        + ") before acting on the verdict."
    )


def stopped_when(result: RunResult) -> Headline | None:
    """`--until resolved`: how many rounds the answer took, or the time cap and what held it up."""
    stopping = (result.verdict or {}).get("stopping") or {}
    if not stopping:
        return None
    rounds = f"{stopping.get('rounds', 0)} round{'s' if stopping.get('rounds') != 1 else ''}"
    elapsed = fmt_number(stopping.get("elapsed_s"), "s")
    if stopping.get("stopped_by") == "resolved":
        straddled = (result.verdict or {}).get("straddles") or []
        if (
            straddled
        ):  # the look's running estimate cleared; the breakdown's point, a point or so away, did not
            return Headline(
                f"Stopped after {rounds} ({elapsed} of load) when its running estimate cleared the thresholds, but "
                f"the verdict's interval straddles {' and '.join(f'{t:.0%}' for t in straddled)}: read it as "
                "unresolved (a longer run would settle it)."
            )
        return Headline(f"Resolved after {rounds} of the scenario ({elapsed} of load).", "note")
    held = "; ".join(stopping.get("held_by") or []) or "nothing recorded"
    return Headline(
        f"Stopped at the time cap after {rounds} ({elapsed} of {fmt_number(stopping.get('max_time_s'), 's')}), "
        f"not resolved: held up by {held}."
    )


# At or above this share of wall time waiting for work, the offered load limits the run (diagnose.IDLE_NOTE).
IDLE_HEADLINE = 0.30


def engine_waited(result: RunResult) -> Headline | None:
    idle = (engine_spans(result).get("categories") or {}).get("idle")
    if not isinstance(idle, (int, float)) or idle < IDLE_HEADLINE:
        return None
    return Headline(
        f"The engine thread waited for work {fmt_pct(idle)} of the time: the load, not the engine, "
        "limits throughput.",
        "note",
    )


# At or above this share of the run at one torch thread, the headline says the kernels ran on one thread.
ONE_THREAD_HEADLINE = 0.10


def threads_lowered(result: RunResult) -> Headline | None:
    """engine.thread_governor ran torch on one thread for much of the run: kernel times are one thread's."""
    threads = (result.engine or {}).get("threads") or {}
    # Of the engine thread's life (older runs: of the load), which holds the warm-up and the drain too.
    lifetime = threads.get("watched_s") or (result.metrics or {}).get("duration_s")
    lowered = threads.get("one_thread_s") or 0.0
    if not lifetime or lowered < ONE_THREAD_HEADLINE * lifetime:
        return None
    return Headline(
        f"torch ran on one thread for {fmt_number(lowered, 's')} of the engine's {fmt_number(lifetime, 's')}: "
        "other work wanted this machine's cores, so kernel times there are one thread's.",
        "note",
    )


HEADLINE_RULES: list[HeadlineRule] = [
    dead_server_log,
    partial_run,
    failed_collectors,
    interval_straddles,
    stopped_when,
    engine_waited,
    threads_lowered,
]
