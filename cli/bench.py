"""`infer-prof bench native`: the twin microbenchmarks as a table or JSON rows."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from .app import bench_app

if TYPE_CHECKING:
    from ..native_paths.bench_rows import BenchRow


@bench_app.command("native")
def bench_native(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of rows instead of a table.")
    ] = False,
    repeats: Annotated[
        int, typer.Option("--repeats", help="Interleaved repeats per row (medians are reported).")
    ] = 5,
) -> None:
    """Per-step time of each Python/C twin pair (sampler, kv_alloc, scheduler, prepare) and of the fused core at batch 1, 32 and 256, with the speedup."""
    raise typer.Exit(bench_native_command(as_json=as_json, repeats=repeats))


def bench_native_command(*, as_json: bool, repeats: int) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..native_paths.bench import run_native_bench
    from ..profiler.session.options import OptionError

    if not 1 <= repeats <= 1000:
        raise OptionError(f"--repeats={repeats} is impossible: use 1 to 1,000")
    err = Console(stderr=True)
    with err.status("benchmarking Python vs C twins (interleaved, medians)"):
        rows = run_native_bench(repeats=repeats)
    if as_json:
        print(json.dumps(rows))
        return 0
    table = Table(
        "component",
        "batch",
        "mix",
        "python µs/step",
        "native µs/step",
        "speedup",
        "notes",
        title="Python vs C twins, per engine step (interleaved repeats)",
    )
    for row in rows:
        table.add_row(
            row["component"],
            str(row["batch"]),
            str(row.get("mix", "")),
            f"{row['python_us']:,.1f}",
            f"{row['native_us']:,.1f}",
            f"{row['speedup']:,.1f}x",
            _notes(row),
        )
    console = Console()
    console.print(table)
    console.print(
        "[dim]core: one fused C call for scheduler + kv_alloc + prepare, against the three Python twins; "
        "separately = the three C twins called one by one[/dim]"
    )
    variants = sorted({row["pass_f"] for row in rows if "pass_f" in row})
    if variants:
        console.print(
            f"[dim]sampler: its fast softmax sum ran as the {', '.join(variants)} build "
            "(the widest this CPU has; top-p rows depend on it)[/dim]"
        )
    agreed = all(row.get(check, True) for row in rows for check in CHECKS)
    if not agreed:
        console.print("[red]the twins' outputs differed in some row (see notes)[/red]")
    return 0 if agreed else 1


CHECKS = ("tokens_match", "tables_match", "plans_match", "inputs_match")


def _notes(row: BenchRow) -> str:
    notes = []
    if row.get("native_floor_ratio") is not None:
        notes.append(f"{row['native_floor_ratio']:.2f}x the memory floor")
    if row.get("separate_us") is not None:
        notes.append(f"separately {row['separate_us']:,.1f} µs: one call {row['one_call_gain']:.2f}x")
    notes += [f"{check.split('_')[0]} DIFFER" for check in CHECKS if row.get(check) is False]
    return "; ".join(notes)
