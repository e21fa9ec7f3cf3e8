"""The words and tables of a run's summary, built once and rendered by the terminal, HTML and PDF reports."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infer_prof.profiler.rundir.native import fallback_sentence
from infer_prof.profiler.rundir.results import CATEGORIES, COMPONENTS, RunResult
from infer_prof.profiler.rundir.schema import Split, latency
from infer_prof.profiler.rundir.twins import twins_sentence
from infer_prof.reports.format import NOT_RECORDED, fmt_gain, fmt_ms, fmt_number, fmt_pct, fmt_pp
from infer_prof.reports.rundata import LATENCY_LABELS, why_not_measured
from infer_prof.reports.slo import SloCheck, describe_breaches, slo_targets


@dataclass
class Table:
    """A titled table of printable cells; `note` explains an empty or partial table."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)  # row indices that start a new group
    note: str | None = None
    text: bool = False  # a column of sentences, not numbers: left-aligned
    left_columns: tuple[int, ...] = ()  # columns of names among numbers: left-aligned too


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
    spans = _spans(result)
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


def probe_lines(result: RunResult) -> list[str]:
    """`--probe`: what it timed per step, whether the samples agree, what it cost (the Amdahl lines: --verbose), and
    with --what-if what each slowdown measured."""
    probe = (result.target or {}).get("probe") or {}
    return [
        str(line)
        for line in [*(probe.get("lines") or []), *((probe.get("what_if") or {}).get("lines") or [])]
    ]


def queued_line(result: RunResult) -> str | None:
    """Another engine whose requests queued behind one another (profiler.analysis.foreign.queueing_reason)."""
    queued = ((result.verdict or {}).get("foreign") or {}).get("queueing")
    return str(queued) if queued else None


# Components that are per-token control flow (what a native rewrite could speed up), not compute or waiting.
CONTROL_PATHS = ("scheduler", "sampler", "kv_alloc", "prepare", "tokenizer", "detokenizer", "model_glue")


def reasons(result: RunResult) -> list[str]:
    return [str(reason) for reason in (result.verdict or {}).get("reasons", [])]


def blind_spots(result: RunResult) -> list[str]:
    return [str(spot) for spot in (result.verdict or {}).get("blind_spots", [])]


@dataclass
class KeyFigure:
    """One tile next to the verdict: a figure, a line under it, and whether it needs the reader's eye."""

    label: str
    value: str
    detail: str | None = None
    alarm: bool = False


def key_figures(result: RunResult, slo: SloCheck | None = None) -> list[KeyFigure]:
    """The handful of numbers a reader wants next to the verdict; with `slo`, breaches and goodput."""
    metrics = result.metrics
    slo = slo or SloCheck(targets={})
    figures = [
        KeyFigure("Output tokens/s", fmt_number(metrics.get("output_token_throughput"))),
        KeyFigure("Requests/s", fmt_number(metrics.get("request_throughput"))),
    ]
    for name, label in (("ttft_ms", "TTFT p50 / p99"), ("tpot_ms", "TPOT p50 / p99")):
        detail = describe_breaches(slo, name)
        figures.append(
            KeyFigure(
                label,
                _pair_ms(metrics, name),
                f"SLO: {detail}" if detail else None,
                alarm=bool(slo.breaches.get(name)),
            )
        )
    if slo.targets:
        good = slo.good_fraction
        figures.append(
            KeyFigure(
                "Goodput",
                fmt_number(metrics.get("goodput"), "req/s"),
                f"{fmt_pct(good)} of requests within every SLO" if good is not None else None,
                alarm=good is not None and good < 1.0,
            )
        )
    if result.verdict:
        figures.append(KeyFigure("Interpreter share", fmt_pct(result.verdict.get("interpreter_share"))))
    failed = metrics.get("failed")
    figures.append(
        KeyFigure(
            "Completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(failed)}",
            alarm=isinstance(failed, (int, float)) and failed > 0,
        )
    )
    return figures


def _pair_ms(metrics: Mapping[str, Any], name: str) -> str:
    # "22.3 / 29.6 ms": one unit for the pair keeps a figure card on one line.
    low, high = _p(metrics, name, "p50"), _p(metrics, name, "p99")
    if low is None or high is None:
        return NOT_RECORDED
    return f"{_short(low)} / {_short(high)} ms"


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _p(metrics: Mapping[str, Any], name: str, stat: str) -> Any:
    return (metrics.get(name) or {}).get(stat)


def _spans(result: RunResult) -> Split:
    return ((result.breakdown or {}).get("methods") or {}).get("spans") or {}


def time_split_table(result: RunResult) -> Table:
    """Categories and components by method, with the two methods' disagreement in percentage points."""
    table = Table(
        "Time split (share of engine-thread wall time)", ["", "spans", "samples", "samples - spans"]
    )
    breakdown = result.breakdown
    if not breakdown:
        table.note = f"not measured ({why_not_measured(result, 'breakdown')})"
        return table
    methods = breakdown.get("methods") or {}
    # Read by category and component name below: plain mappings (the names are CATEGORIES and COMPONENTS).
    spans: Mapping[str, Any] = methods.get("spans") or {}
    samples: Mapping[str, Any] | None = methods.get("samples")
    client: Mapping[str, Any] | None = breakdown.get("client_threads")
    if client:
        # In a served run they are the server's (its event loop); in-process, the load driver and the collectors'.
        table.columns.append("other server threads" if result.target else "other threads")
    # Signed, samples minus spans (the breakdown's own convention): which method saw more matters.
    recorded_gaps = {
        "categories": breakdown.get("disagreement") or {},
        "components": breakdown.get("component_disagreement") or {},
    }
    # Older results carry no noise test (None): their gaps are printed as recorded.
    beyond: dict[str, Any] = {
        "categories": breakdown.get("beyond_noise"),
        "components": breakdown.get("components_beyond_noise"),
    }
    for group, names in (("categories", CATEGORIES), ("components", COMPONENTS)):
        table.sections.append(len(table.rows))
        for name in names:
            span_value = (spans.get(group) or {}).get(name)
            sample_value = ((samples or {}).get(group) or {}).get(name)
            noise_tested = beyond[group] is not None and span_value is not None and sample_value is not None
            if noise_tested and name not in beyond[group] and span_value != sample_value:
                gap = WITHIN_NOISE
            elif name in recorded_gaps[group]:
                gap = fmt_pp(recorded_gaps[group][name])
            elif span_value is not None and sample_value is not None:
                gap = fmt_pp((sample_value - span_value) * 100)
            else:
                gap = NOT_RECORDED
            spans_cell = fmt_pct(span_value)
            if (
                name in ASSUMED_WITHOUT_WINDOWS
                and spans.get("kernel_source") == "assumed"
                and span_value is not None
            ):
                spans_cell += " (assumed)"  # no kernel window ran and no native samples: not a measurement
            row = [name, spans_cell, fmt_pct(sample_value), gap]
            if client:
                row.append(fmt_pct((client.get(group) or {}).get(name)))
            table.rows.append(row)
    whole = ((samples or {}).get("components") or {}).get("model")
    if whole is not None:  # python-only samples see the forward pass whole; the spans split it in two
        glue_and_kernels = _sum(spans, ("model_glue", "model_kernels")) if spans else None
        table.rows.append(
            [
                "model (whole)",
                fmt_pct(glue_and_kernels),
                fmt_pct(whole),
                fmt_pp((whole - glue_and_kernels) * 100) if glue_and_kernels is not None else NOT_RECORDED,
            ]
            + ([fmt_pct((client.get("components") or {}).get("model"))] if client else [])
        )
    dispatch = [
        "dispatch",
        fmt_pct(spans.get("dispatch")),
        fmt_pct((samples or {}).get("dispatch")),
        NOT_RECORDED,
    ]
    table.rows.append(dispatch + ([fmt_pct(client.get("dispatch"))] if client else []))
    table.rows.append(
        ["evidence", evidence(spans, "spans"), evidence(samples, "samples"), NOT_RECORDED]
        + ([evidence(client, "samples")] if client else [])
    )
    if spans.get("kernel_source"):
        resolved = (samples or {}).get("categories", {}).get("kernel") is not None  # native frames only
        table.rows.append(
            [
                "kernel share from",
                spans["kernel_source"],
                "native frames" if resolved else NOT_RECORDED,
                NOT_RECORDED,
            ]
            + ([NOT_RECORDED] if client else [])
        )
    if samples is None:
        table.note = f"samples not measured ({why_not_measured(result, 'samples')})"
    elif beyond["categories"] is not None:
        table.note = (
            f"'{WITHIN_NOISE}': the spans share lies inside the samples share's 95% Wilson interval "
            f"({fmt_count(samples.get('samples'))} engine-thread samples): no disagreement beyond sampling noise"
        )
    return table


WITHIN_NOISE = "within noise"
# The spans rows that rest on the model span's kernel share: marked when that share was assumed.
ASSUMED_WITHOUT_WINDOWS = ("interpreter", "kernel", "model_glue", "model_kernels")


def fmt_count(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else NOT_RECORDED


def evidence(split: Mapping[str, Any] | None, method: str) -> str:
    """What a method's shares rest on: spans timed (over steps), or stack samples taken."""
    if not split:
        return NOT_RECORDED
    if method == "spans":
        if split.get("spans") is None:
            return (
                f"{fmt_count(split.get('steps'))} steps" if split.get("steps") is not None else NOT_RECORDED
            )
        return f"{fmt_count(split['spans'])} spans, {fmt_count(split.get('steps'))} steps"
    return f"{fmt_count(split.get('samples'))} samples" if split.get("samples") is not None else NOT_RECORDED


def latency_table(result: RunResult) -> Table:
    table = Table(
        "Serving latency (measured requests, warm-up excluded)", ["metric", "mean", "p50", "p90", "p99"]
    )
    for name, label in LATENCY_LABELS.items():
        stats = latency(result.metrics, name)
        table.rows.append(
            [
                label,
                fmt_ms(stats.get("mean")),
                fmt_ms(stats.get("p50")),
                fmt_ms(stats.get("p90")),
                fmt_ms(stats.get("p99")),
            ]
        )
    return table


def throughput_table(result: RunResult) -> Table:
    metrics = result.metrics
    table = Table("Throughput", ["metric", "value"])
    table.rows = [
        ["request throughput", fmt_number(metrics.get("request_throughput"), "req/s")],
        ["output token throughput", fmt_number(metrics.get("output_token_throughput"), "tok/s")],
        ["total token throughput", fmt_number(metrics.get("total_token_throughput"), "tok/s")],
        ["goodput (within SLO)", fmt_number(metrics.get("goodput"), "req/s")],
        [
            "completed / failed",
            f"{fmt_number(metrics.get('completed'))} / {fmt_number(metrics.get('failed'))}",
        ],
        ["duration", fmt_number(metrics.get("duration_s"), "s")],
    ]
    return table


def gpu_table(result: RunResult) -> Table | None:
    """A GPU run's device timeline: busy, idle waiting for the host (by host work), idle with no work."""
    gpu = result.gpu_time
    if not gpu:
        return None
    table = Table("GPU time", ["figure", "value"])
    table.rows += [
        ["device busy (CUDA events)", fmt_pct(gpu.get("busy_share"))],
        ["idle, waiting for the host", fmt_pct(gpu.get("idle_host_share"))],
        ["idle, no work", fmt_pct(gpu.get("idle_no_work_share"))],
    ]
    waited = sorted((gpu.get("idle_host_by_component") or {}).items(), key=lambda item: -(item[1] or 0.0))
    table.sections.append(len(table.rows))
    table.rows += [[f"  of the wait: {name.replace('_', ' ')}", fmt_pct(part)] for name, part in waited]
    table.sections.append(len(table.rows))
    figures: Mapping[str, Any] = gpu  # read by the names below
    for name, label in (
        ("window_gpu_idle_fraction", "idle between kernels (profiler windows)"),
        ("kernels_per_step", "kernels per step"),
        ("launches_per_step", "launches per step"),
        ("busy_ns_per_step", "device time per step (ms)"),
    ):
        value = figures.get(name)
        if name == "busy_ns_per_step" and isinstance(value, (int, float)):
            value = value / 1e6
        table.rows.append([label, fmt_pct(value) if name.endswith("fraction") else fmt_number(value)])
    nvml = gpu.get("nvml")
    if nvml:
        table.sections.append(len(table.rows))
        table.rows += nvml_rows(nvml)
    return table


def nvml_rows(nvml: Mapping[str, Any]) -> list[list[str]]:
    """NVML's view beside the events': this process's device memory and SM time, and the whole device's
    utilization (every process on it); a figure the driver did not report reads "not reported"."""
    if nvml.get("status", "ok") != "ok":
        return [["NVML", f"{nvml.get('status')}: {nvml.get('reason') or 'no reason given'}"]]
    process = nvml.get("process") or {}

    def stat(stats: Any, key: str, unit: str) -> str:
        value = stats.get(key) if isinstance(stats, Mapping) else None
        return fmt_number(value, unit) if value is not None else "not reported"

    memory = process.get("memory_used_mib")
    return [
        [
            "this process's device memory, mean / max (NVML)",
            f"{stat(memory, 'mean', 'MiB')} / {stat(memory, 'max', 'MiB')}",
        ],
        ["this process's SM time, mean (NVML)", stat(process.get("sm_utilization_pct"), "mean", "%")],
        ["whole device utilization, mean (NVML)", stat(nvml.get("utilization_pct"), "mean", "%")],
    ]


def engine_table(result: RunResult) -> Table:
    engine = result.engine or {}
    table = Table("Engine", ["figure", "value"])
    for name in ("steps", "preemptions", "blocks_total", "blocks_free_at_end"):
        if name in engine:
            table.rows.append([name.replace("_", " "), fmt_number(engine[name])])
    for name in ("batch_size", "kv_utilization", "fragmentation_slots"):
        stats = engine.get(name)
        if isinstance(stats, dict):
            show = fmt_pct if name == "kv_utilization" else fmt_number
            table.rows.append(
                [
                    f"{name.replace('_', ' ')} mean / max",
                    f"{show(stats.get('mean'))} / {show(stats.get('max'))}",
                ]
            )
    threads = engine.get("threads")
    if isinstance(threads, dict) and threads.get("threads"):
        table.rows.append(["torch threads", threads_text(threads)])
    for name, value in (result.counters or {}).items():
        table.rows.append([name.replace("_", " "), fmt_number(value)])
    overhead = result.overhead or {}
    if overhead.get("throughput_ratio") is not None:
        table.rows.append(["profiling overhead (throughput ratio)", fmt_number(overhead["throughput_ratio"])])
    if not table.rows:
        table.note = "the run recorded no engine figures"
    return table


def threads_text(threads: Mapping[str, Any]) -> str:
    """engine.thread_governor's record in words: '2', or '2, 1 for 3.2 s in 2 switches (other work wanted the cores)'."""
    text = fmt_number(threads.get("threads"))
    if threads.get("switches"):
        text += (
            f", 1 for {fmt_number(threads.get('one_thread_s'), 's')} in {fmt_number(threads['switches'])} "
            "switches (other work wanted the cores)"
        )
    return text


def predictions_table(result: RunResult) -> Table:
    """Amdahl predictions per component, and the measured gain when a verify run switched the twin on."""
    table = Table(
        "Predicted native gains (end to end)",
        ["component", "share", "native speedup", "predicted", "measured", "gap"],
    )
    predictions = (result.verdict or {}).get("predictions") or {}
    if not predictions:
        table.note = f"no predictions ({why_not_measured(result, 'verdict')})"
    else:
        table.note = noise_warning(result)
    noise = verify_noise(result)
    verified = ((result.verdict or {}).get("verify") or {}).get("components") or {}
    for component, prediction in predictions.items():
        if prediction.get("twin_on"):  # its C twin ran: nothing to predict (profiler.analysis.diagnose)
            table.rows.append(
                [
                    component,
                    fmt_pct(prediction.get("share")),
                    "C twin on",
                    "nothing to predict",
                    NOT_RECORDED,
                    NOT_RECORDED,
                ]
            )
            continue
        predicted, measured = prediction.get("predicted_gain"), prediction.get("measured_gain")
        if prediction.get(
            "void"
        ):  # a busy machine's prediction (profiler.analysis.diagnose): no figure to act on
            table.rows.append(
                [
                    component,
                    fmt_pct(prediction.get("share")),
                    _speedup_text(prediction),
                    f"void: {prediction['void']}",
                    _measured_text(measured, noise, verified.get(component)),
                    NOT_RECORDED,
                ]
            )
            continue
        gap = (
            fmt_pp((measured - predicted) * 100)
            if predicted is not None and measured is not None
            else NOT_RECORDED
        )
        table.rows.append(
            [
                component,
                fmt_pct(prediction.get("share")),
                _speedup_text(prediction),
                fmt_gain(predicted)
                + _between(
                    prediction.get("predicted_gain_low"),
                    prediction.get("predicted_gain_high"),
                    lambda value: f"{value * 100:.1f}",
                ),
                _measured_text(measured, noise, verified.get(component)),
                gap,
            ]
        )
    if any(prediction.get("speedup_source") == "replay" for prediction in predictions.values()):
        replay = result.replay or {}
        table.note = " ".join(
            filter(
                None,
                [
                    table.note,
                    (
                        f"Speedups: both twins replaying this run's own work ({replay.get('steps_recorded', 0):,} of "
                        f"{replay.get('steps_in_run', 0):,} steps recorded), median with its 95% interval."
                    ),
                ],
            )
        )
    return table


def _speedup_text(prediction: Mapping[str, Any]) -> str:
    speedup = prediction.get("native_speedup")
    if speedup is None:
        return NOT_RECORDED
    text = f"{speedup:.1f}x" + _between(
        prediction.get("native_speedup_low"),
        prediction.get("native_speedup_high"),
        lambda value: f"{value:.1f}",
    )
    return text if prediction.get("speedup_source") == "replay" else f"{text} (microbenchmark)"


def obtained(name: str, measured: float | None, result: RunResult) -> list[str]:
    """How a prediction was obtained: verified (twin on), slowdown-measured (the run's --what-if), or a bound only."""
    how = [f"verified {fmt_gain(measured)} (twin on)"] if measured is not None else []
    slowdown = ((result.what_if or {}).get("components") or {}).get(name) or {}
    sensitivity = slowdown.get("sensitivity")
    if isinstance(sensitivity, (int, float)):
        interval = _between(slowdown.get("low"), slowdown.get("high"), lambda value: f"{value:.2f}")
        gain = (slowdown.get("gain") or {}).get("gain")
        run_void = (result.what_if or {}).get("void")
        if slowdown.get("void"):  # measured, but too noisy to act on
            how.append(f"slowdown unresolved (sensitivity {sensitivity:.2f}{interval})")
        else:
            how.append(
                f"slowdown-measured (sensitivity {sensitivity:.2f}{interval}"
                + ("" if slowdown.get("linear", True) else ", levels disagree: a curve")
                + (f") -> {fmt_gain(gain)}" if isinstance(gain, (int, float)) else ")")
                + (f", its run void: {run_void}" if run_void else "")
            )
    return how or [
        "bound only"
    ]  # the heading names Amdahl; a line that wraps would push the summary off a screen


def slowdown_lines(result: RunResult, skip: Any = ()) -> list[str]:
    """A line per --what-if component with no prediction line of its own: its sensitivity and the most it could give."""
    lines = []
    for name, slowdown in ((result.what_if or {}).get("components") or {}).items():
        if name in skip:
            continue
        sensitivity = slowdown.get("sensitivity")
        if not isinstance(sensitivity, (int, float)):
            lines.append(
                f"  {name}: slowdown gave no sensitivity ({slowdown.get('void') or 'no reason recorded'})"
            )
            continue
        free = slowdown.get("gain_if_free") or {}
        lines.append(
            f"  {name}: {fmt_pct(slowdown.get('share'))} of the step; "
            + "; ".join(obtained(name, None, result))
            + f"; if it cost nothing -> {fmt_gain(free.get('gain'))} (Amdahl's bound: {fmt_gain(slowdown.get('share'))})"
        )
    return lines


def _between(low: float | None, high: float | None, fmt: Any) -> str:
    """' [low, high]' for an interval both of whose ends were measured, else ''."""
    return f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else ""


def verify_noise(result: RunResult) -> float | None:
    """How far --verify's Python runs differ in busy time per token (max/min - 1): the noise floor of
    its measured gains, or None when there was no verify run or only one Python run."""
    spread = ((result.verdict or {}).get("verify") or {}).get("python_spread")
    return float(spread) if isinstance(spread, (int, float)) and not isinstance(spread, bool) else None


def within_noise(measured: float | None, noise: float | None) -> bool:
    return measured is not None and noise is not None and abs(measured) < noise


def noise_warning(result: RunResult) -> str | None:
    """What a reader must know before reading --verify's measured gains as facts (None: no verify run)."""
    verify = (result.verdict or {}).get("verify")
    if not verify:
        return None
    noise = verify_noise(result)
    entries = (verify.get("components") or {}).values()
    in_run = [entry for entry in entries if entry.get("method") == "in-run"]
    # Said whatever else ran: an in-run prediction too wide to judge is void at that precision.
    unresolved = [f"{note}." for note in unresolved_notes(result)]
    if in_run and len(in_run) == len(entries):
        first = (
            f"--verify measured with the twins taking turns in {runs_text(in_run[0])} ({turns_text(in_run[0])}), at "
            "the same kinds of step: [low, high] is the measured gain's 95% interval over "
            f"{interval_unit_text(in_run[0])}."
        )
    elif noise is None:
        first = (
            "--verify ran the Python twins once: how much its measured gains move from run to run is unknown, so "
            "read them as one sample each."
        )
    else:
        first = (
            f"--verify's {verify.get('python_runs') or 2} Python runs differ by {fmt_pct(noise)} in busy time per "
            "token: a measured gain smaller than that (marked 'within noise') is noise, not the C twin's effect."
        )
    # Sentences joined; the last one's period is left to the caller (the HTML adds its own).
    return " ".join([first, *unresolved]).removesuffix(".")


def unresolved_notes(result: RunResult) -> list[str]:
    """unresolved_note() of every twin --verify measured in-run (empty without --verify)."""
    components = ((result.verdict or {}).get("verify") or {}).get("components") or {}
    return [
        note
        for name, entry in components.items()
        if entry.get("method") == "in-run" and (note := unresolved_note(name, entry))
    ]


def unresolved_note(name: str, entry: dict[str, Any]) -> str | None:
    """Why an in-run measured gain cannot judge its prediction (profiler.checks.verify.resolution), and what its
    own phase's part says meanwhile; or why the prediction itself is too wide to be judged; None when neither."""
    if not entry.get("predicted_gain"):
        return None
    void = _unjudgeable_prediction(name, entry)
    if entry.get("resolves") is not False:
        return void
    # When both are too wide, both reasons: a narrower measurement alone would still judge nothing.
    subject = f"{name}: its interval" if void is None else f"{void}. Its measured interval too"
    note = (
        f"{subject} (±{entry['half_width'] * 100:.1f} points) is wider than "
        f"±{entry['band'] / abs(entry['predicted_gain']):.0%} of its prediction (±{entry['band'] * 100:.1f}), so "
        f"{_these_runs(entry)} cannot say whether the end-to-end prediction holds; more measured requests (-r) "
        "narrow it while the machine holds steady"
    )
    own = own_part_text(entry)
    if own:
        note += (
            f"; its own span saved {entry['own_gain'] * 100:+.1f} points{own}, an interval the other spans' "
            "noise does not widen"
        )
    return note


def _runs_pooled(entry: dict[str, Any]) -> int:
    """How many switched runs an in-run entry pooled (results before pooling: one)."""
    return len(entry.get("run_dirs") or []) or 1


def runs_text(entry: dict[str, Any]) -> str:
    """'one run', or '3 runs, pooled ...' when fewer switched runs were too noisy to judge (verify)."""
    runs = _runs_pooled(entry)
    return "one run" if runs == 1 else f"{runs} runs, pooled because fewer could not judge the prediction"


def _unjudgeable_prediction(name: str, entry: dict[str, Any]) -> str | None:
    """Why a prediction cannot be checked to the band however narrow the measurement (its own interval is wider)."""
    if entry.get("prediction_resolves") is not False:
        return None
    band = f"±{entry['band'] / abs(entry['predicted_gain']):.0%}"
    speedup = entry.get("native_speedup")
    faster = f" with a C twin only {speedup:.2f}x faster," if speedup else ""
    return (
        f"{name}: its prediction's own interval (±{entry['predicted_half_width'] * 100:.1f} points) is wider than "
        f"{band} of it,{faster} so no run can check it to {band}: the prediction is void at that precision, "
        "and the measured gain is the figure to act on"
    )


def _these_runs(entry: dict[str, Any]) -> str:
    runs = _runs_pooled(entry)
    return "this run" if runs == 1 else f"these {runs} runs"


def turns_text(entry: dict[str, Any]) -> str:
    """'413 pairs of blocks of 1 step, 826 switches' for an in-run entry (results before block_steps: 'of steps')."""
    size = entry.get("block_steps")
    blocks = f"blocks of {size} step{'s' if size != 1 else ''}" if size else "blocks of steps"
    switches = f", {entry['switches']} switches" if entry.get("switches") is not None else ""
    taken = entry.get("switch_ms") or {}
    if taken:  # a switch's own time (the twin taking over registering the live sequences), taken out
        each = ", ".join(f"{TWIN_NAMES.get(twin, twin)} {ms:.2f} ms" for twin, ms in taken.items())
        switches += f", each switch's own time taken out ({each} a switch)"
    return f"{entry.get('pairs')} pairs of {blocks}{switches}"


TWIN_NAMES = {"python": "Python", "native": "C"}


def interval_unit_text(entry: dict[str, Any]) -> str:
    """What an in-run entry's intervals resampled: 'units of 8 neighbouring steps', or 'the pairs' (older results)."""
    size, unit_blocks = entry.get("block_steps"), entry.get("unit_blocks")
    return f"units of {size * unit_blocks} neighbouring steps" if size and unit_blocks else "the pairs"


def own_part_text(entry: dict[str, Any]) -> str:
    """' [low, high] (0.99x its prediction)' for an in-run entry's own-phase part (points of step time), or ''."""
    low, high, agreement = entry.get("own_low"), entry.get("own_high"), entry.get("own_agreement")
    if entry.get("own_gain") is None or low is None or high is None:
        return ""
    ratio = f" ({agreement:.2f}x its prediction)" if agreement is not None else ""
    return f" [{low * 100:.1f}, {high * 100:.1f}]{ratio}"


def _measured_text(
    measured: float | None, noise: float | None, verified: dict[str, Any] | None = None
) -> str:
    if measured is None:
        return "not measured"
    if (verified or {}).get("method") == "in-run":  # at the same steps, its interval from units of blocks
        low, high = verified.get("measured_low"), verified.get("measured_high")  # type: ignore[union-attr]
        return fmt_gain(measured) + _between(low, high, lambda value: f"{value * 100:.1f}") + " in-run"
    return fmt_gain(measured) + (" (within noise)" if within_noise(measured, noise) else "")


def collectors_table(result: RunResult) -> Table:
    table = Table("Collectors", ["collector", "status", "reason"])
    for name, status in (result.collectors or {}).items():
        status = status or {}
        table.rows.append([name, str(status.get("status", "unknown")), status.get("reason") or ""])
    if not table.rows:
        table.note = "the run recorded no collector statuses"
    return table


def skipped_collectors(result: RunResult) -> list[tuple[str, str, str]]:
    """(names, status, reason) of the collectors that did not run; one entry per shared status and reason."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, status in (result.collectors or {}).items():
        status = status or {}
        if status.get("status") != "ok":
            key = (str(status.get("status")), status.get("reason") or "no reason recorded")
            groups.setdefault(key, []).append(name)
    return [(", ".join(names), status, reason) for (status, reason), names in groups.items()]


def target_table(result: RunResult) -> Table | None:
    """A `run --target` run's server, whether its split was measured, each thread's split and GIL waits,
    and the client's own CPU use; None for an in-process run."""
    target = result.target
    if not target:
        return None
    server = target.get("server") or {}
    split = target.get("split") or {}
    client = target.get("client") or {}
    table = Table("Target server (metrics measured client-side, over HTTP)", ["", "value"], text=True)
    name = " ".join(str(part) for part in (server.get("name"), server.get("version")) if part) or "unknown"
    table.rows.append(["server", f"{name} at {target.get('url')} (from {server.get('source')})"])
    table.rows.append(["model", str(server.get("model"))])
    if split.get("available"):
        where = f"pid {target.get('pid')} ({target.get('pid_source')})" if target.get("pid") else "its spans"
        table.rows.append(["time split", f"measured by {', '.join(split.get('methods') or [])}; {where}"])
    else:
        table.rows.append(["time split", f"unavailable: {split.get('reason') or 'no reason recorded'}"])
    for thread, row in (target.get("threads") or {}).items():
        categories = ", ".join(
            f"{key} {fmt_pct(value)}"
            for key, value in sorted(row["categories"].items(), key=lambda kv: -kv[1])[:3]
        )
        components = ", ".join(
            f"{key} {fmt_pct(value)}"
            for key, value in sorted(row["components"].items(), key=lambda kv: -kv[1])[:3]
        )
        gil_wait = f"; GIL wait {fmt_pct(row['gil_wait'])}" if row.get("gil_wait") is not None else ""
        table.rows.append(
            [f"thread {thread}", f"{row['samples']} samples: {categories} | {components}{gil_wait}"]
        )
    gil = target.get("gil") or {}
    for thread, entry in (gil.get("spans_off_cpu") or {}).items():
        if entry:
            table.rows.append(
                [
                    f"off-CPU in Python spans, {thread.replace('_', ' ')}",
                    f"{fmt_pct(entry['off_cpu_share'])} of wall time ({fmt_pct(entry['off_cpu_fraction_of_spans'])} "
                    "of those spans: GIL waits plus waiting for a core)",
                ]
            )
    samples = gil.get("samples") or {}
    if samples:
        table.rows.append(
            [
                "GIL wait (native samples)",
                f"engine thread {fmt_pct(samples.get('engine_thread'))}, "
                f"API thread {fmt_pct(samples.get('api_thread'))}",
            ]
        )
    if client:
        table.rows.append(["client", str(client.get("note"))])
    return table


# ---- The default (short) summary: each piece a function of the result, so every face can reuse it. ----


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
    idle = (_spans(result).get("categories") or {}).get("idle")
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


# Collectors that measure a GPU: skipped on a machine without one, which is no blind spot of the run.
GPU_COLLECTORS = ("gpu", "nvml", "device_time")


def machine_has_gpu(result: RunResult) -> bool:
    environment = result.environment or {}
    return bool(result.gpu_time or environment.get("gpu") or environment.get("cuda_available"))


def not_applicable(result: RunResult) -> str | None:
    """One line for what does not apply to this machine (GPU figures on a CPU run), or None."""
    if machine_has_gpu(result):
        return None
    skipped = [
        name
        for name in GPU_COLLECTORS
        if ((result.collectors or {}).get(name) or {}).get("status") == "skipped"
    ]
    if not skipped:
        return None
    return "No GPU on this machine: GPU figures do not apply."


def machine_spot(result: RunResult, spot: str) -> bool:
    return not machine_has_gpu(result) and spot.startswith("No GPU utilization")


# Blind spots every run of the default profile has (prefix -> a few words), said once as its limits.
PROFILE_LIMITS = {
    "py-spy ran without --native": "native frames",
    "Spans see only locks taken through the tracer": "untraced locks",
    "GC pauses were not timed": "GC pauses",
}


def _profile_limit(spot: str) -> str | None:
    return next((words for prefix, words in PROFILE_LIMITS.items() if spot.startswith(prefix)), None)


def reading_blind_spots(result: RunResult) -> list[str]:
    """The blind spots that change how to read this run: not the machine's, not the profile's standing limits."""
    return [
        spot
        for spot in blind_spots(result)
        if not machine_spot(result, spot) and _profile_limit(spot) is None
    ]


def profile_limits(result: RunResult) -> str | None:
    """The profile's standing limits as one line ('Not seen: native frames, ... (--profile deep)'), or None."""
    limits = [words for spot in blind_spots(result) if (words := _profile_limit(spot))]
    return f"Not seen by this profile: {', '.join(limits)} (--profile deep)." if limits else None


def applicable_skipped_collectors(result: RunResult) -> list[tuple[str, str, str]]:
    """skipped_collectors without the ones this machine cannot run (those are not_applicable's one line)."""
    gpu_ok = machine_has_gpu(result)
    return [
        (names, status, reason)
        for names, status, reason in skipped_collectors(result)
        if gpu_ok or status != "skipped" or not set(names.split(", ")) <= set(GPU_COLLECTORS)
    ]


# Components under this share of the busy step are folded into one line of the short summary's split.
SPLIT_COMPONENT_MIN = 0.005
# A prediction for a component under this share of the step is folded into one line: it cannot pay.
PREDICTION_SHARE_MIN = 0.001


def compact_split(result: RunResult) -> Table | None:
    """Categories and components side by side, one column per method that measured them; None without a split."""
    breakdown = result.breakdown or {}
    methods = breakdown.get("methods") or {}
    present: list[tuple[str, Mapping[str, Any]]] = [
        (name, split)
        for name, split in (("spans", methods.get("spans")), ("samples", methods.get("samples")))
        if split
    ]
    if not present:
        return None
    mixed = any(name == "samples" and split.get("resolution") == "python" for name, split in present)

    def shares(group: str, name: str) -> list[Any]:
        return [(split.get(group) or {}).get(name) for _, split in present]

    def shown(values: list[Any]) -> bool:
        return any(isinstance(value, (int, float)) and value >= 0.0005 for value in values)

    categories = [
        [name, *shares("categories", name)] for name in CATEGORIES if shown(shares("categories", name))
    ]
    components, folded = [], [0.0] * len(present)
    names = list(COMPONENTS) + (
        ["model"]
        if any(
            (split.get("components") or {}).get("model") is not None
            and not (split.get("components") or {}).get("model_kernels")
            for _, split in present
        )
        else []
    )
    for name in names:
        values = shares("components", name)
        if name == "model":  # python-only samples: the forward pass whole; spans give it as glue + kernels
            values = [
                value if value is not None else _sum(split, ("model_glue", "model_kernels"))
                for value, (_, split) in zip(values, present)
            ]
        if any(isinstance(value, (int, float)) and value >= SPLIT_COMPONENT_MIN for value in values):
            components.append([name if name != "model" else "model (whole)", *values])
        else:
            folded = [total + (value or 0.0) for total, value in zip(folded, values)]
    if any(value >= 0.0005 for value in folded):
        components.append(["the rest", *folded])
    columns = [name for name, _ in present]
    table = Table(
        f"{_thread_title(result)} ({'; '.join(METHOD_WORDS[name] for name in columns)})",
        ["category", *columns, "component", *columns],
        left_columns=(len(columns) + 1,),
    )
    blank: list[Any] = [""] + [None] * len(columns)
    for index in range(max(len(categories), len(components))):
        left = categories[index] if index < len(categories) else blank
        right = components[index] if index < len(components) else blank
        row = []
        for name, *values in (left, right):
            row += [str(name), *[_cell(value, str(name)) for value in values]]
        table.rows.append(row)
    notes = []
    if mixed:
        notes.append("samples: a Python line and the native code it calls count as one")
    if (methods.get("spans") or {}).get("kernel_source") == "assumed":
        notes.append("the spans' kernel share is assumed: no profiler window ran")
    table.note = "; ".join(notes) or None
    return table


METHOD_WORDS = {"spans": "spans: timed in-process", "samples": "samples: py-spy stacks"}


def _thread_title(result: RunResult) -> str:
    """Whose time the split is: the engine thread, or a foreign server's thread that stood in for it."""
    thread = ((result.target or {}).get("split") or {}).get("engine_thread")
    return (
        f"Time of the server's thread {thread}"
        if thread and thread != "infer-prof-engine"
        else "Engine thread's time"
    )


def _sum(split: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    values = [(split.get("components") or {}).get(name) for name in names]
    return sum(values) if all(isinstance(value, (int, float)) for value in values) else None  # type: ignore[arg-type]


def _cell(value: Any, name: str) -> str:
    return "" if not name else fmt_pct(value)


def load_line(result: RunResult) -> str:
    """The load in one line: requests, throughput, typical latencies, failures."""
    metrics = result.metrics or {}
    completed, failed = metrics.get("completed"), metrics.get("failed")
    parts = [
        f"{fmt_number(completed)} requests in {fmt_number(metrics.get('duration_s'), 's')}",
        f"{fmt_number(metrics.get('output_token_throughput'), 'tok/s')} out",
        f"TTFT p50 {fmt_ms(_p(metrics, 'ttft_ms', 'p50'))}",
        f"TPOT p50 {fmt_ms(_p(metrics, 'tpot_ms', 'p50'))}",
    ]
    if isinstance(failed, (int, float)) and failed:
        parts.append(f"{fmt_number(failed)} failed")
    return "Load: " + ", ".join(parts) + "."


def slo_lines(result: RunResult, check: SloCheck | None = None) -> list[str]:
    """One line per latency target that measured requests broke (counted with `check` when given, else its p99
    against the target); one line saying they were all met; nothing when the scenario set no target."""
    targets = check.targets if check is not None else slo_targets(result)
    if not targets:
        return []
    lines = []
    for name, target in targets.items():
        label = LATENCY_LABELS.get(name, name)
        stats: Mapping[str, Any] = (result.metrics or {}).get(name) or {}  # type: ignore[assignment]  # a latency entry
        spread = f" (p50 {fmt_ms(stats.get('p50'))}, p99 {fmt_ms(stats.get('p99'))})"
        if check is not None and check.breaches.get(name):
            lines.append(f"SLO breached: {label} {describe_breaches(check, name)}{spread}.")
        elif check is None and isinstance(stats.get("p99"), (int, float)) and stats["p99"] > target:
            lines.append(
                f"SLO breached: {label} p99 {fmt_ms(stats['p99'])} is over its {_target_ms(target)} target."
            )
    if not lines:
        met = ", ".join(
            f"{LATENCY_LABELS.get(name, name)} {_target_ms(target)}" for name, target in targets.items()
        )
        lines.append(f"SLOs met by every measured request ({met}).")
    return lines


def gpu_line(result: RunResult) -> str | None:
    """A GPU run's device time in one line: busy, idle waiting for the host (and for what most), idle with no work."""
    gpu = result.gpu_time
    if not gpu:
        return None
    waited = {
        name: share for name, share in (gpu.get("idle_host_by_component") or {}).items() if share is not None
    }
    most = f" (most for the {max(waited, key=lambda name: waited[name]).replace('_', ' ')})" if waited else ""
    return (
        f"GPU: busy {fmt_pct(gpu.get('busy_share'))}, idle waiting for the host {fmt_pct(gpu.get('idle_host_share'))}"
        f"{most}, idle with no work {fmt_pct(gpu.get('idle_no_work_share'))}."
    )


def _target_ms(value: float) -> str:
    return f"{value:,.0f} ms" if abs(value) >= 1 else f"{value:g} ms"


def target_line(result: RunResult) -> str | None:
    """A --target run's server and what measured its split, in one line; None for an in-process run."""
    target = result.target
    if not target:
        return None
    server = target.get("server") or {}
    name = (
        " ".join(str(part) for part in (server.get("name"), server.get("version")) if part)
        or "unknown server"
    )
    split = target.get("split") or {}
    measured = (
        f"split by {', '.join(split.get('methods') or [])}"
        + (f" of pid {target['pid']}" if target.get("pid") else "")
        if split.get("available")
        else f"no split ({split.get('reason') or 'no reason recorded'})"
    )
    return f"Target server: {name} at {target.get('url')}, model {server.get('model')}; {measured}."


def prediction_lines(result: RunResult) -> list[str]:
    """A line per native path worth one (at least PREDICTION_SHARE_MIN of the step), the rest folded into one."""
    predictions = (result.verdict or {}).get("predictions") or {}
    if not predictions:
        return []
    twins_on = [name for name, entry in predictions.items() if entry.get("twin_on")]
    worth = {
        name: entry
        for name, entry in predictions.items()
        if name not in twins_on
        and isinstance(entry.get("share"), (int, float))
        and entry["share"] >= PREDICTION_SHARE_MIN
    }
    ranked = sorted(worth, key=lambda name: -(worth[name].get("predicted_gain") or 0.0))
    unmeasured = "C speedup not measured" + (
        " (a stopped run is not replayed)" if result.partial and result.replay is None else ""
    )
    lines = ["Native gains if a path were C (Amdahl's law, end to end):"]
    for name in ranked:
        entry = worth[name]
        gain = fmt_gain(entry.get("predicted_gain")) + _between(
            entry.get("predicted_gain_low"),
            entry.get("predicted_gain_high"),
            lambda value: f"{value * 100:.1f}",
        )
        measured = entry.get("measured_gain")
        speedup = entry.get("native_speedup")
        faster = f"C {speedup:.1f}x faster" if isinstance(speedup, (int, float)) else unmeasured
        lines.append(
            f"  {name}: {fmt_pct(entry['share'])} of the step, {faster} -> {gain}; "
            + "; ".join(obtained(name, measured, result))
        )
    lines += slowdown_lines(result, skip=ranked)
    rest = [name for name in predictions if name not in worth and name not in twins_on]
    if rest:
        lines.append(
            f"  {', '.join(rest)}: under {fmt_pct(PREDICTION_SHARE_MIN)} of the step each, nothing to gain."
        )
    if twins_on:  # a C twin that ran is native code already (profiler.analysis.diagnose): no prediction
        lines.append(f"  {', '.join(twins_on)}: C twin on in this run, nothing to predict.")
    return lines
