"""`infer-prof bench native`: the twin microbenchmarks as a table or JSON rows."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table


def bench_native_command(*, as_json: bool, repeats: int) -> int:
    from native_paths.bench import run_native_bench
    from profiler.session.options import OptionError

    if repeats < 1:
        raise OptionError(f"--repeats={repeats} must be at least 1")
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
