"""The words and tables of a run's summary, built once and rendered by the terminal, HTML and PDF reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiler.rundir.native import fallback_sentence
from profiler.rundir.results import CATEGORIES, COMPONENTS, RunResult
from profiler.rundir.twins import twins_sentence
from reports.format import NOT_RECORDED, fmt_gain, fmt_ms, fmt_number, fmt_pct, fmt_pp
from reports.rundata import LATENCY_LABELS, why_not_measured
from reports.slo import SloCheck, describe_breaches


@dataclass
class Table:
    """A titled table of printable cells; `note` explains an empty or partial table."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    sections: list[int] = field(default_factory=list)  # row indices that start a new group
    note: str | None = None
    text: bool = False  # a column of sentences, not numbers: left-aligned


def headline(result: RunResult) -> str:
    """The verdict in one sentence, after the native twins asked for that did not load, if any."""
    fallback = fallback_sentence(result.config or {})
    sentence = _verdict_sentence(result)
    sentence = f"{fallback}. {sentence}" if fallback else sentence
    # The run's own distortion (a starved engine thread, a saturated engine) comes before anything it measured.
    twins = twins_sentence(result.config or {})
    return " ".join([*health_warnings(result), sentence, *([twins] if twins else [])])


def health_warnings(result: RunResult) -> list[str]:
    """The run's health lines (profiler.analysis.health wrote them into result.json): empty for a healthy run."""
    return [str(line) for line in (getattr(result, "health", None) or {}).get("lines", [])]


def _verdict_sentence(result: RunResult) -> str:
    verdict = result.verdict
    if not verdict:
        return f"No verdict: the time split was not measured ({why_not_measured(result, 'verdict')})."
    if verdict.get("rule") is None:  # a split without spans or native stacks (a served run's Python-only samples)
        return "No verdict: " + str((verdict.get("reasons") or ["no split could name a bottleneck"])[0])
    spans = _spans(result)
    categories = spans.get("categories", {})
    category = verdict.get("category")
    category_share = f" ({fmt_pct(categories[category])} of the engine thread)" if category in categories else ""
    rule = str(verdict.get("rule") or "no rule recorded")
    sentence = (
        f"{rule[:1].upper()}{rule[1:]}: interpreter (Python) time is {fmt_pct(verdict.get('interpreter_share'))} "
        f"of the engine's busy time; most time goes to {category}{category_share}, mostly in {verdict.get('component')}"
    )
    control = {name: share for name, share in (spans.get("components") or {}).items()
               if name in CONTROL_PATHS and isinstance(share, (int, float))}  # fmt: skip
    if "largest_control_path" in verdict:  # the verdict's pick: Python control paths only (profiler.analysis.diagnose)
        largest = verdict["largest_control_path"]
        control = {largest["name"]: largest["share"]} if largest else {}
    if control:
        biggest = max(control, key=lambda name: control[name])
        sentence += f"; the largest control path is the {biggest} ({fmt_pct(control[biggest])})"
    gpu = verdict.get("gpu") or {}
    return sentence + "." + (f" {gpu['sentence']}" if gpu.get("sentence") else "")


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
        figures.append(KeyFigure(label, _pair_ms(metrics, name), f"SLO: {detail}" if detail else None,
                                 alarm=bool(slo.breaches.get(name))))  # fmt: skip
    if slo.targets:
        good = slo.good_fraction
        figures.append(KeyFigure(
            "Goodput", fmt_number(metrics.get("goodput"), "req/s"),
            f"{fmt_pct(good)} of requests within every SLO" if good is not None else None,
            alarm=good is not None and good < 1.0,
        ))  # fmt: skip
    if result.verdict:
        figures.append(KeyFigure("Interpreter share", fmt_pct(result.verdict.get("interpreter_share"))))
    failed = metrics.get("failed")
    figures.append(KeyFigure("Completed / failed", f"{fmt_number(metrics.get('completed'))} / {fmt_number(failed)}",
                             alarm=isinstance(failed, (int, float)) and failed > 0))  # fmt: skip
    return figures


def _pair_ms(metrics: dict[str, Any], name: str) -> str:
    # "22.3 / 29.6 ms": one unit for the pair keeps a figure card on one line.
    low, high = _p(metrics, name, "p50"), _p(metrics, name, "p99")
    if low is None or high is None:
        return NOT_RECORDED
    return f"{_short(low)} / {_short(high)} ms"


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _p(metrics: dict[str, Any], name: str, stat: str) -> Any:
    return (metrics.get(name) or {}).get(stat)


def _spans(result: RunResult) -> dict[str, Any]:
    return ((result.breakdown or {}).get("methods") or {}).get("spans") or {}


def time_split_table(result: RunResult) -> Table:
    """Categories and components by method, with the two methods' disagreement in percentage points."""
    table = Table("Time split (share of engine-thread wall time)", ["", "spans", "samples", "samples - spans"])
    breakdown = result.breakdown
    if not breakdown:
        table.note = f"not measured ({why_not_measured(result, 'breakdown')})"
        return table
    methods = breakdown.get("methods") or {}
    spans, samples = methods.get("spans") or {}, methods.get("samples")
    client = breakdown.get("client_threads")
    if client:
        # In a served run the other threads are the server's (its event loop), not load-generator clients.
        table.columns.append("other server threads" if result.target else "client threads")
    # Signed, samples minus spans (the breakdown's own convention): which method saw more matters.
    recorded_gaps = {"categories": breakdown.get("disagreement") or {},
                     "components": breakdown.get("component_disagreement") or {}}  # fmt: skip
    # Older results carry no noise test (None): their gaps are printed as recorded.
    beyond = {"categories": breakdown.get("beyond_noise"), "components": breakdown.get("components_beyond_noise")}
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
            if name in ASSUMED_WITHOUT_WINDOWS and spans.get("kernel_source") == "assumed" and span_value is not None:
                spans_cell += " (assumed)"  # no kernel window ran and no native samples: not a measurement
            row = [name, spans_cell, fmt_pct(sample_value), gap]
            if client:
                row.append(fmt_pct((client.get(group) or {}).get(name)))
            table.rows.append(row)
    dispatch = [
        "dispatch",
        fmt_pct(spans.get("dispatch")),
        fmt_pct((samples or {}).get("dispatch")),
        NOT_RECORDED,
    ]
    table.rows.append(dispatch + ([fmt_pct(client.get("dispatch"))] if client else []))
    table.rows.append(["evidence", evidence(spans, "spans"), evidence(samples, "samples"), NOT_RECORDED]
                      + ([evidence(client, "samples")] if client else []))  # fmt: skip
    if spans.get("kernel_source"):
        resolved = (samples or {}).get("categories", {}).get("kernel") is not None  # native frames only
        table.rows.append(["kernel share from", spans["kernel_source"], "native frames" if resolved else NOT_RECORDED,
                           NOT_RECORDED] + ([NOT_RECORDED] if client else []))  # fmt: skip
    if samples is None:
        table.note = f"samples not measured ({why_not_measured(result, 'samples')})"
    elif beyond["categories"] is not None:
        table.note = (f"'{WITHIN_NOISE}': the spans share lies inside the samples share's 95% Wilson interval "
                      f"({fmt_count(samples.get('samples'))} engine-thread samples): no disagreement beyond sampling noise")  # fmt: skip
    return table


WITHIN_NOISE = "within noise"
# The spans rows that rest on the model span's kernel share: marked when that share was assumed.
ASSUMED_WITHOUT_WINDOWS = ("interpreter", "kernel", "model_glue", "model_kernels")


def fmt_count(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else NOT_RECORDED


def evidence(split: dict[str, Any] | None, method: str) -> str:
    """What a method's shares rest on: spans timed (over steps), or stack samples taken."""
    if not split:
        return NOT_RECORDED
    if method == "spans":
        if split.get("spans") is None:
            return f"{fmt_count(split.get('steps'))} steps" if split.get("steps") is not None else NOT_RECORDED
        return f"{fmt_count(split['spans'])} spans, {fmt_count(split.get('steps'))} steps"
    return f"{fmt_count(split.get('samples'))} samples" if split.get("samples") is not None else NOT_RECORDED


def latency_table(result: RunResult) -> Table:
    table = Table(
        "Serving latency (measured requests, warm-up excluded)", ["metric", "mean", "p50", "p90", "p99"]
    )
    for name, label in LATENCY_LABELS.items():
        stats = result.metrics.get(name) or {}
        table.rows.append([label] + [fmt_ms(stats.get(stat)) for stat in ("mean", "p50", "p90", "p99")])
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
    waited = sorted((gpu.get("idle_host_by_component") or {}).items(), key=lambda item: -item[1])
    table.sections.append(len(table.rows))
    table.rows += [[f"  of the wait: {name.replace('_', ' ')}", fmt_pct(part)] for name, part in waited]
    table.sections.append(len(table.rows))
    for name, label in (("window_gpu_idle_fraction", "idle between kernels (profiler windows)"),
                        ("kernels_per_step", "kernels per step"), ("launches_per_step", "launches per step"),
                        ("busy_ns_per_step", "device time per step (ms)")):  # fmt: skip
        value = gpu.get(name)
        if name == "busy_ns_per_step" and isinstance(value, (int, float)):
            value = value / 1e6
        table.rows.append([label, fmt_pct(value) if name.endswith("fraction") else fmt_number(value)])
    return table


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
    for name, value in (result.counters or {}).items():
        table.rows.append([name.replace("_", " "), fmt_number(value)])
    overhead = result.overhead or {}
    if overhead.get("throughput_ratio") is not None:
        table.rows.append(["profiling overhead (throughput ratio)", fmt_number(overhead["throughput_ratio"])])
    if not table.rows:
        table.note = "the run recorded no engine figures"
    return table


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
            table.rows.append([component, fmt_pct(prediction.get("share")), "C twin on", "nothing to predict",
                               NOT_RECORDED, NOT_RECORDED])  # fmt: skip
            continue
        predicted, measured = prediction.get("predicted_gain"), prediction.get("measured_gain")
        if prediction.get("void"):  # a busy machine's prediction (profiler.analysis.diagnose): no figure to act on
            table.rows.append([component, fmt_pct(prediction.get("share")), _speedup_text(prediction),
                               f"void: {prediction['void']}", _measured_text(measured, noise, verified.get(component)),
                               NOT_RECORDED])  # fmt: skip
            continue
        gap = (
            fmt_pp((measured - predicted) * 100)
            if predicted is not None and measured is not None
            else NOT_RECORDED
        )
        table.rows.append([
            component, fmt_pct(prediction.get("share")), _speedup_text(prediction),
            fmt_gain(predicted) + _between(prediction.get("predicted_gain_low"), prediction.get("predicted_gain_high"),
                                           lambda value: f"{value * 100:.1f}"),
            _measured_text(measured, noise, verified.get(component)), gap,
        ])  # fmt: skip
    if any(prediction.get("speedup_source") == "replay" for prediction in predictions.values()):
        replay = result.replay or {}
        table.note = " ".join(filter(None, [table.note, (
            f"Speedups: both twins replaying this run's own work ({replay.get('steps_recorded', 0):,} of "
            f"{replay.get('steps_in_run', 0):,} steps recorded), median with its 95% interval."
        )]))  # fmt: skip
    return table


def _speedup_text(prediction: dict[str, Any]) -> str:
    speedup = prediction.get("native_speedup")
    if speedup is None:
        return NOT_RECORDED
    text = f"{speedup:.1f}x" + _between(prediction.get("native_speedup_low"), prediction.get("native_speedup_high"),
                                        lambda value: f"{value:.1f}")  # fmt: skip
    return text if prediction.get("speedup_source") == "replay" else f"{text} (microbenchmark)"


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
    if in_run and len(in_run) == len(entries):
        unresolved = [note for name, entry in (verify.get("components") or {}).items()
                      if (note := unresolved_note(name, entry))]  # fmt: skip
        return " ".join([f"--verify measured with the twins taking turns in one run ({turns_text(in_run[0])}), at the "
                         "same kinds of step: [low, high] is the measured gain's 95% interval over "
                         f"{interval_unit_text(in_run[0])}.", *(f"{note}." for note in unresolved)])  # fmt: skip
    if noise is None:
        return ("--verify ran the Python twins once: how much its measured gains move from run to run is "
                "unknown, so read them as one sample each")  # fmt: skip
    runs = verify.get("python_runs") or 2
    return (f"--verify's {runs} Python runs differ by {fmt_pct(noise)} in busy time per token: a measured gain "
            f"smaller than that (marked 'within noise') is noise, not the C twin's effect")  # fmt: skip


def unresolved_note(name: str, entry: dict[str, Any]) -> str | None:
    """Why an in-run measured gain cannot judge its prediction (profiler.checks.verify.resolution), and what its
    own phase's part says meanwhile; None when it can, or when the entry has no such figures."""
    if entry.get("resolves") is not False or not entry.get("predicted_gain"):
        return None
    note = (f"{name}: its interval (±{entry['half_width'] * 100:.1f} points) is wider than "
            f"±{entry['band'] / abs(entry['predicted_gain']):.0%} of its prediction (±{entry['band'] * 100:.1f}), so "
            "this run cannot say whether the end-to-end prediction holds; more measured requests (-r) narrow it "
            "while the machine holds steady")  # fmt: skip
    own = own_part_text(entry)
    if own:
        note += (f"; its own span saved {entry['own_gain'] * 100:+.1f} points{own}, an interval the other spans' "
                 "noise does not widen")  # fmt: skip
    return note


def turns_text(entry: dict[str, Any]) -> str:
    """'413 pairs of blocks of 1 step, 826 switches' for an in-run entry (results before block_steps: 'of steps')."""
    size = entry.get("block_steps")
    blocks = f"blocks of {size} step{'s' if size != 1 else ''}" if size else "blocks of steps"
    switches = f", {entry['switches']} switches" if entry.get("switches") is not None else ""
    return f"{entry.get('pairs')} pairs of {blocks}{switches}"


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


def _measured_text(measured: float | None, noise: float | None, verified: dict[str, Any] | None = None) -> str:
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
        categories = ", ".join(f"{key} {fmt_pct(value)}" for key, value in sorted(row["categories"].items(), key=lambda kv: -kv[1])[:3])
        components = ", ".join(f"{key} {fmt_pct(value)}" for key, value in sorted(row["components"].items(), key=lambda kv: -kv[1])[:3])
        gil = f"; GIL wait {fmt_pct(row['gil_wait'])}" if row.get("gil_wait") is not None else ""
        table.rows.append([f"thread {thread}", f"{row['samples']} samples: {categories} | {components}{gil}"])
    gil = target.get("gil") or {}
    for thread, entry in ((gil.get("spans_off_cpu") or {}).items()):
        if entry:
            table.rows.append([f"off-CPU in Python spans, {thread.replace('_', ' ')}",
                               f"{fmt_pct(entry['off_cpu_share'])} of wall time ({fmt_pct(entry['off_cpu_fraction_of_spans'])} "
                               "of those spans: GIL waits plus waiting for a core)"])  # fmt: skip
    samples = gil.get("samples") or {}
    if samples:
        table.rows.append(["GIL wait (native samples)", f"engine thread {fmt_pct(samples.get('engine_thread'))}, "
                                                         f"API thread {fmt_pct(samples.get('api_thread'))}"])  # fmt: skip
    if client:
        table.rows.append(["client", str(client.get("note"))])
    return table
