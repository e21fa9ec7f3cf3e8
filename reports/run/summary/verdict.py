"""The verdict's headline sentence and its reasons and blind spots as the run recorded them."""

from __future__ import annotations

from ....profiler.rundir.components import CONTROL_PATHS as PER_TOKEN_CONTROL
from ....profiler.rundir.native import fallback_sentence
from ....profiler.rundir.results import RunResult
from ....profiler.rundir.twins import twins_sentence
from ...format import fmt_pct
from ...rundata import why_not_measured
from .reads import engine_spans


def headline(result: RunResult) -> str:
    """The verdict in one sentence, after the native twins asked for that did not load, if any."""
    fallback = fallback_sentence(result.config or {})
    sentence = _verdict_sentence(result)
    sentence = f"{fallback}. {sentence}" if fallback else sentence
    # The run's own distortion (a starved engine thread, a saturated engine) comes before anything it measured,
    # and a server that died during the load before that: every figure after it is about a dead server.
    twins = twins_sentence(result.config or {})
    death = ((result.target or {}).get("death") or {}).get("headline")
    return " ".join(
        [*([death] if death else []), *health_warnings(result), sentence, *([twins] if twins else [])]
    )


def health_warnings(result: RunResult) -> list[str]:
    """The run's health lines (profiler.analysis.health wrote them into result.json): empty for a healthy run."""
    return [str(line) for line in (getattr(result, "health", None) or {}).get("lines", [])]


def _verdict_sentence(result: RunResult) -> str:
    verdict = result.verdict
    if not verdict:
        return f"No verdict: the time split was not measured ({why_not_measured(result, 'verdict')})."
    if (
        verdict.get("rule") is None
    ):  # a split without spans or native stacks (a served run's Python-only samples)
        return "No verdict: " + str((verdict.get("reasons") or ["no split could name a bottleneck"])[0])
    spans = engine_spans(result)
    categories = spans.get("categories", {})
    category = verdict.get("category")
    category_share = (
        f" ({fmt_pct(categories[category])} of the engine thread)" if category in categories else ""
    )
    rule = str(verdict.get("rule") or "no rule recorded")
    component = verdict.get("component")
    interval = verdict.get("interpreter_interval") or {}
    bounds = (
        f" [{fmt_pct(interval['low'])}, {fmt_pct(interval['high'])}]"
        if interval.get("low") is not None and interval.get("high") is not None
        else ""
    )
    sentence = (
        f"{rule[:1].upper()}{rule[1:]}: interpreter (Python) time is {fmt_pct(verdict.get('interpreter_share'))}"
        f"{bounds} of the engine's busy time; most time goes to {CATEGORY_WORDS.get(str(category), category)}{category_share}"
        + (f", mostly in {component}" if component else "")
    )
    control = {
        name: share
        for name, share in (spans.get("components") or {}).items()
        if name in CONTROL_PATHS and isinstance(share, (int, float))
    }
    if (
        "largest_control_path" in verdict
    ):  # the verdict's pick: Python control paths only (profiler.analysis.diagnose)
        largest = verdict["largest_control_path"]
        control = {largest["name"]: largest["share"]} if largest else {}
    if control:
        biggest = max(control, key=lambda name: control[name])
        sentence += f"; the largest control path is the {biggest} ({fmt_pct(control[biggest])})"
    gpu = verdict.get("gpu") or {}
    return sentence + "." + (f" {gpu['sentence']}" if gpu.get("sentence") else "")


# Categories whose one word would mislead in a sentence (another engine's loop "waiting" is on its model worker).
CATEGORY_WORDS = {"waiting": "waiting on the model worker"}


# Components that are per-token control flow (what a native rewrite could speed up), not compute or waiting: where
# the verdict names no largest control path of its own, the model's glue counts too.
CONTROL_PATHS = (*PER_TOKEN_CONTROL, "model_glue")


def reasons(result: RunResult) -> list[str]:
    return [str(reason) for reason in (result.verdict or {}).get("reasons", [])]


def blind_spots(result: RunResult) -> list[str]:
    return [str(spot) for spot in (result.verdict or {}).get("blind_spots", [])]
