"""Another engine's server (`run --target`, `--launch`): its line, its table, the probe's lines."""

from __future__ import annotations

from ....profiler.rundir.results import RunResult
from ...format import fmt_pct
from .table import Table


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
