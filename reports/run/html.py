"""The HTML report of one run: a single self-contained file with inline SVG charts and inline CSS."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from markupsafe import Markup

from ...profiler.rundir.atomic import write_text_atomic
from ...profiler.rundir.results import RunData, RunResult
from ..format import flatten, fmt_ms
from ..rundata import LATENCY_LABELS, ReportData, prepare, why_not_measured
from ..templating import render
from . import charts, flamegraph, gantt, step_path, summary
from .frames import top_frames_table
from .processes import processes_table
from .summary import Table

REPORT_NAME = "report.html"
# Files a reader may want next to the report, with what each one is for.
LINKED_FILES = (
    ("trace", "trace.json", "Chrome/Perfetto trace: open in ui.perfetto.dev"),
    (
        "speedscope",
        "speedscope.json",
        "the py-spy profile per thread group, engine thread first: open in speedscope.app",
    ),
    ("samples", "samples.txt", "py-spy's raw stacks"),
    ("sample_labels", "sample_labels.csv", "each stack's category and component"),
    ("spans", "spans.csv", "the engine thread's spans at their real times"),
    ("kernel_events", "kernel_events.csv", "torch ops of the deep profile's windows (--profile deep)"),
    ("steps", "steps.csv", "one row per engine step"),
    ("requests", "requests.csv", "one row per request"),
    ("result", "result.json", "the run's result (schema v1)"),
)
_VERDICT_CLASSES = {
    "stay in python": "stay",
    "targeted native paths": "targeted",
    "native rewrite pays": "rewrite",
}


def write_html_report(run_dir: str | Path | RunData | ReportData) -> Path:
    """Write report.html into the run directory and return its path."""
    data = prepare(run_dir)
    html = render_html(data)
    return write_text_atomic(data.path / REPORT_NAME, html)


def render_html(data: ReportData) -> str:
    result = data.result
    config = result.config
    rule = str((result.verdict or {}).get("rule", "")).lower()
    return render(
        "report.html.j2",
        title=f"{config.get('model', 'unknown model')} · {config.get('scenario') or result.scenario.get('name', 'scenario')}",
        created_at=result.created_at,
        run_name=data.path.name or str(data.path),
        schema_version=result.schema_version,
        version=result.environment.get("infer_prof_version", ""),
        verdict_class=_VERDICT_CLASSES.get(rule, "none"),
        headline=summary.headline(result),
        warnings=summary.headline_warnings(result),
        reasons=summary.reasons(result),
        blind_spots=[spot for spot in summary.blind_spots(result) if not summary.machine_spot(result, spot)],
        skipped=summary.applicable_skipped_collectors(result),
        not_applicable=summary.not_applicable(result),
        figures=summary.key_figures(result, data.slo),
        charts=_charts(data),
        why_breakdown=why_not_measured(result, "breakdown"),
        time_split=summary.time_split_table(result),
        time_split_about=_time_split_about(result),
        target=summary.target_table(result),
        processes=processes_table(result),
        replicas=summary.replicas_table(result),
        replica_lines=summary.replica_lines(result),
        gpu=summary.gpu_table(result),
        latency=summary.latency_table(result),
        throughput=summary.throughput_table(result),
        predictions=_without_note(summary.predictions_table(result))
        if summary.noise_warning(result)
        else summary.predictions_table(result),
        noise_warning=summary.noise_warning(result),
        slo_text=", ".join(
            f"{LATENCY_LABELS[name]} {fmt_ms(value)}" for name, value in data.slo.targets.items()
        ),
        engine=summary.engine_table(result),
        collectors=summary.collectors_table(result),
        config=_key_value_table("Configuration", config),
        environment=_key_value_table("Environment", result.environment),
        scenario=_key_value_table("Scenario", result.scenario),
        files=_files(data),
        flamegraph=flamegraph.render_flamegraph(data.threads) if data.threads else None,
        flame_script=flamegraph.script()[0],
        script_sources=[Markup(flamegraph.script()[1])],
        top_frames=top_frames_table(data.engine_thread),
        why_samples=why_not_measured(result, "samples"),
    )


def _charts(data: ReportData) -> dict[str, str | None]:
    """Each chart as inline SVG, or None when its data is missing (the template says why)."""
    result = data.result
    predictions = (result.verdict or {}).get("predictions") or {}
    has_latency = any(values.size for values in data.latencies.values())
    requests = gantt.request_timeline(data.run, data.start_ns)
    probe = (result.target or {}).get("probe")
    return {
        "requests": charts.draw_with(
            gantt.draw_request_timeline, requests, width=10, height=6.2, label="request timeline"
        )
        if requests
        else None,
        "time_split": charts.draw_with(
            charts.draw_time_split,
            result.breakdown,
            width=10,
            height=3.4,
            label="time split by component and category",
        )
        if result.breakdown
        else None,
        "step_path": charts.draw_with(
            step_path.draw_step_path,
            probe,
            width=10,
            height=1.2 + 0.55 * len(step_path.step_lanes(probe)),
            label="a step's critical path across the server's processes",
        )
        if probe and step_path.step_lanes(probe)
        else None,
        "timeline": charts.draw_with(
            charts.draw_timeline,
            data.timeline,
            requests.end_s if requests else None,
            width=10,
            height=5.6,
            label="per-step timeline",
        )
        if not data.timeline.empty
        else None,
        "latency": charts.draw_with(
            charts.draw_latency_cdfs,
            data.latencies,
            data.slo.targets,
            width=10,
            height=5.6,
            label="latency distributions",
        )
        if has_latency
        else None,
        "predictions": charts.draw_with(
            charts.draw_predictions,
            predictions,
            summary.verify_noise(result),
            width=10,
            height=0.8 + 0.42 * len(predictions),
            label="predicted versus measured native gains",
        )
        if predictions
        else None,
    }


def _time_split_about(result: RunResult) -> str | None:
    """Which process the time split is about, for a server of several processes (None for the built-in engine)."""
    foreign = (result.verdict or {}).get("foreign") or {}
    pid = foreign.get("engine_pid")
    if pid is None:
        return None
    role = next(
        (row.get("role_words") for row in foreign.get("processes") or [] if row.get("pid") == pid), None
    )
    threads = ", ".join(str(tid) for tid in foreign.get("engine_threads") or [])
    return (
        f"the engine thread{'s' if ',' in threads else ''} {threads} of pid {pid}"
        + (f" ({role})" if role else "")
        + "; the other processes are in the step's picture below and the flame graph's tabs"
    )


def _without_note(table: Table) -> Table:
    # The note is shown as a warning above the chart instead: gains must not read as facts first.
    table.note = None
    return table


def _key_value_table(title: str, section: Mapping[str, object] | None) -> Table:
    table = Table(title, ["key", "value"], rows=[list(row) for row in flatten(section)])
    if not table.rows:
        table.note = "not recorded"
    return table


def _files(data: ReportData) -> list[tuple[str, str | None, str]]:
    """(label, relative href or None, note) for each file; missing ones are listed, not linked."""
    recorded = data.result.files or {}
    entries = []
    for key, default, note in LINKED_FILES:
        name = recorded.get(key, default)
        exists = (data.path / name).exists()
        entries.append((name, name if exists else None, note if exists else "not written for this run"))
    return entries
