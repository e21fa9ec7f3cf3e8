"""Time to a resolved verdict on the built-in engine (issue #61): each row's run, its wall time, the interpreter share's interval and whether it resolved.

    python benchmarks/bench_time_to_verdict.py --out runs/ttv/after                 # this tree, one run a row
    python benchmarks/bench_time_to_verdict.py --out DIR --tree /path/to/other/checkout --label before
    python benchmarks/bench_time_to_verdict.py --out DIR --only c30 --repeats 5     # the spread of five runs
    python benchmarks/bench_time_to_verdict.py --out DIR --until 300 --hog 1        # --until resolved, one hog

`--tree` runs another checkout's infer_prof (its .pkg folder first on PYTHONPATH, its built extensions in
place), so two revisions are timed on one machine in one sitting. A row resolves when the verdict's interval
holds neither threshold (1% and 30%). A hog is `python -c 'while 1: pass'`, started before the run and killed
after it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from run_beside import run_cli

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Row:
    name: str
    args: tuple[str, ...]


ROWS = [
    Row("chat", ("-s", "chat")),
    Row("c30", ("-m", "synthetic:tiny", "-s", "concurrency-30", "-r", "90", "--seed", "777")),
    Row(
        "c30-deep",
        ("-m", "synthetic:tiny", "-s", "concurrency-30", "-r", "90", "--seed", "777", "--profile", "deep"),
    ),
    Row("c30-smollm2", ("-s", "concurrency-30")),
    Row(
        "heavy-verify",
        ("-m", "synthetic:tiny", "-s", str(ROOT / "benchmarks/scenarios/sampler-heavy.toml"), "--verify"),
    ),
]


def run_row(row: Row, run_dir: Path, tree: Path | None, hogs: int, until: float | None) -> dict:
    args = [*row.args, "--no-report", "-o", str(run_dir)]
    if until is not None:
        args += ["--until", "resolved", "--max-time", str(until)]
    done, seconds = run_cli(args, hogs=hogs, tree=tree)
    record: dict = {
        "row": row.name,
        "hogs": hogs,
        "until": until,
        "seconds": round(seconds, 1),
        "rc": done.returncode,
    }
    if done.returncode != 0 or not (run_dir / "result.json").exists():
        record["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return record
    result = json.loads((run_dir / "result.json").read_text())
    verdict = result.get("verdict") or {}
    interval = verdict.get("interpreter_interval") or {}
    kernels = (result.get("collectors") or {}).get("kernels") or {}
    stopping = verdict.get("stopping") or {}
    metrics = result.get("metrics") or {}
    record.update(
        share=verdict.get("interpreter_share"),
        low=interval.get("low"),
        high=interval.get("high"),
        widest=interval.get("widest"),
        windows=interval.get("windows"),
        straddles=verdict.get("straddles"),
        resolved=bool(interval) and not verdict.get("straddles"),
        rule=verdict.get("rule"),
        load_s=metrics.get("duration_s"),
        stopping={k: stopping.get(k) for k in ("stopped_by", "rounds", "looks", "held_by") if k in stopping},
        health=(result.get("health") or {}).get("void"),
        kernel_status=kernels.get("status"),
        model_kernel_fraction=(
            (((result.get("breakdown") or {}).get("methods") or {}).get("spans") or {}).get(
                "kernel_fraction_by_span"
            )
            or {}
        ).get("model"),
        kernels_cost=((result.get("overhead") or {}).get("collectors") or {}).get("kernels"),
    )
    return record


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def table(records: list[dict]) -> str:
    lines = [
        "| label | row | hogs | until | wall s | interpreter share [95%] | windows | held by | resolved | health |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(
                f"| {r.get('label')} | {r['row']} | {r['hogs']} | {r['until']} | {r['seconds']} | error: {r['error']} | | | | |"
            )
            continue
        interval = f"{_pct(r['share'])} [{_pct(r['low'])}, {_pct(r['high'])}]"
        lines.append(
            f"| {r.get('label')} | {r['row']} | {r['hogs']} | {r['until'] or '–'} | {r['seconds']} | {interval} | "
            f"{r['windows'] if r['windows'] is not None else '–'} | {r['widest'] or '–'} | "
            f"{'yes' if r['resolved'] else 'no'} | {r['health'] or 'ok'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the run directories and rows.jsonl"
    )
    parser.add_argument("--tree", type=Path, default=None, help="another checkout's infer_prof to run")
    parser.add_argument("--label", default="this tree", help="the revision's name in the table")
    parser.add_argument("--only", default="", help="comma-separated row names (default: every row)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--hog", type=int, default=0, help="CPU hogs beside each run")
    parser.add_argument("--until", type=float, default=None, help="--until resolved with this --max-time")
    parser.add_argument("--table", action="store_true", help="print OUT/rows.jsonl as a table and stop")
    args = parser.parse_args()
    rows_file = args.out / "rows.jsonl"
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        wanted = {name for name in args.only.split(",") if name}
        for row in ROWS:
            if wanted and row.name not in wanted:
                continue
            for repeat in range(args.repeats):
                name = f"{args.label.replace(' ', '-')}-{row.name}-hog{args.hog}-{'until' if args.until else 'once'}-{repeat}"
                print(f"{name} ...", file=sys.stderr, flush=True)
                record = run_row(row, args.out / name, args.tree, args.hog, args.until)
                record["label"] = args.label
                with rows_file.open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
    records = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    print(table(records))


if __name__ == "__main__":
    main()
