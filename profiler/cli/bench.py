"""`infer-prof bench native`: the twin microbenchmarks as a table or JSON rows."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from profiler.cli.app import bench_app


@bench_app.command("native")
def bench_native(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of rows instead of a table.")] = False,
    repeats: Annotated[int, typer.Option("--repeats", help="Interleaved repeats per row (medians are reported).")] = 5,
) -> None:
    """Per-step time of each Python/C twin pair at batch 1, 32 and 256 (vocab 49,152), with the speedup."""
    raise typer.Exit(bench_native_command(as_json=as_json, repeats=repeats))


def bench_native_command(*, as_json: bool, repeats: int) -> int:
    from native_paths.bench import run_native_bench
    from profiler.session.options import OptionError

    if not 1 <= repeats <= 1000:
        raise OptionError(f"--repeats={repeats} is impossible: use 1 to 1,000")
    err = Console(stderr=True)
    with err.status("benchmarking Python vs C twins (interleaved, medians)"):
        rows = run_native_bench(repeats=repeats)
    if as_json:
        print(json.dumps(rows))
        return 0
    table = Table("component", "batch", "mix", "python µs/step", "native µs/step", "speedup", "native / memory floor",
                  title="Python vs C twins, per engine step (medians of interleaved repeats)")  # fmt: skip
    for row in rows:
        floor = row.get("native_floor_ratio")
        table.add_row(row["component"], str(row["batch"]), str(row.get("mix", "")), f"{row['python_us']:,.1f}",
                      f"{row['native_us']:,.1f}", f"{row['speedup']:,.1f}x", "" if floor is None else f"{floor:.2f}x")  # fmt: skip
    Console().print(table)
    return 0
