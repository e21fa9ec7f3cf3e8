"""Slowdown-predicted against twin-measured gains on the built-in engine: issue #59's proof table, one run per row.

    python benchmarks/bench_slowdown_vs_twin.py --out runs/slowdown-proof            # every row, quiet
    python benchmarks/bench_slowdown_vs_twin.py --out DIR --only tiny-heavy --hog 1  # one row beside one CPU hog
    python benchmarks/bench_slowdown_vs_twin.py --out DIR --tree /path/to/checkout   # another checkout's code

Each row is `infer-prof run ... --what-if COMPONENT --verify --ledger LEDGER`: a slowdown run measures the
component's sensitivity, and the C twin switched on measures the gain the prediction is judged by. Two
predictions are printed for each: the slowdown's own (sensitivity x share x (1 - 1/k), k the twin's
replayed speedup: the figure a user gets before any rewrite) and the sensitivity applied to the time the
twin saved in its own span in the verify run (which tests the sensitivity alone, with the replay's error
taken out). A hog is `python -c 'while 1: pass'`, started before the run and killed after it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from run_beside import run_cli

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "benchmarks" / "scenarios"


@dataclass(frozen=True)
class Row:
    name: str
    model: str
    scenario: str
    components: str
    requests: int
    dtype: str | None = None  # the model's weights (`--dtype`): None is the model's own


ROWS = [
    Row("tiny-heavy", "synthetic:tiny", str(SCENARIOS / "sampler-heavy.toml"), "sampler", 48),
    Row("tiny-wide", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-wide.toml"), "sampler", 64),
    Row("tiny-mix", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-mix.toml"), "sampler", 48),
    Row("tiny-topk-mix", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-topk-mix.toml"), "sampler", 64),
    Row(
        "tiny-topk-steady", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-topk-steady.toml"), "sampler", 96
    ),
    Row(
        "tiny-half-greedy", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-half-greedy.toml"), "sampler", 48
    ),
    Row(
        "tiny-widest-control",
        "synthetic:tiny",
        str(SCENARIOS / "sampler-heavy-widest.toml"),
        "prepare,scheduler",
        128,
    ),
    Row("tiny-greedy-mix", "synthetic:tiny", str(SCENARIOS / "sampler-heavy-greedy-mix.toml"), "sampler", 48),
    Row("smollm2-heavy", "smollm2-135m", str(SCENARIOS / "sampler-heavy.toml"), "sampler", 48),
    # SmolLM2 on its 4-bit C kernel: a shorter forward, so a larger sampler share than on float32 weights
    Row(
        "smollm2-q4-wide", "smollm2-135m", str(SCENARIOS / "sampler-heavy-wide.toml"), "sampler", 128, "q4_1"
    ),
    Row(
        "smollm2-q4-mix-wider",
        "smollm2-135m",
        str(SCENARIOS / "sampler-heavy-mix-wider.toml"),
        "sampler",
        112,
        "q4_1",
    ),
    Row("smollm2-chat", "smollm2-135m", "concurrency-30", "sampler", 120),
]


def run_row(
    row: Row, out: Path, ledger: Path, hogs: int, tree: Path | None = None, threads: int | None = None
) -> dict:
    run_dir = out / (f"{row.name}-hog{hogs}" + ("" if threads is None else f"-threads{threads}"))
    args = ["-m", row.model, "-s", row.scenario, "-r", str(row.requests), "--what-if", row.components]
    args += ["--dtype", row.dtype] if row.dtype else []
    args += ["--threads", str(threads)] if threads is not None else []
    args += ["--verify", "--ledger", str(ledger), "--no-report", "-o", str(run_dir)]
    done, seconds = run_cli(args, hogs=hogs, tree=tree)
    if done.returncode != 0:
        return {
            "row": row.name,
            "hogs": hogs,
            "error": done.stderr.strip().splitlines()[-1:],
            "seconds": seconds,
        }
    result = json.loads((run_dir / "result.json").read_text())
    verify = ((result.get("verdict") or {}).get("verify") or {}).get("components") or {}
    health = result.get("health") or {}
    figures = []
    what_if = result.get("what_if") or {}
    for component, entry in (what_if.get("components") or {}).items():
        measured = verify.get(component) or {}
        gain = entry.get("gain") or {}
        sensitivity = entry.get("sensitivity")
        own = measured.get("own_gain")
        figures.append(
            {
                "component": component,
                "share": entry.get("share"),
                "k": entry.get("speedup"),
                # the share of the delay spent with the GIL released (None: a tree from before 2026-12-07)
                "released": (what_if.get("released") or {}).get(component),
                "gil_release": what_if.get("gil_release"),
                "sensitivity": sensitivity,
                # the slowdown's runs pooled (what_if's rounds; None: a tree from before its rounds)
                "rounds": len(what_if["rounds"]) if "rounds" in what_if else None,
                "s_low": entry.get("low"),
                "s_high": entry.get("high"),
                "linear": entry.get("linear"),
                "predicted": gain.get("gain"),
                "p_low": gain.get("low"),
                "p_high": gain.get("high"),
                "amdahl": entry.get("amdahl_gain"),
                "measured": measured.get("measured_gain"),
                "m_low": measured.get("measured_low"),
                "m_high": measured.get("measured_high"),
                "own_saving": own,
                "predicted_from_own": sensitivity * own
                if sensitivity is not None and own is not None
                else None,
                "delay_within_5pct": (entry.get("accuracy") or {}).get("within_5pct"),
                "slowdown_void": entry.get("void") or (result.get("what_if") or {}).get("void"),
                "verify_void": measured.get("void"),
                # the pair's own void (what_if.pair_with_verify: e.g. a measurement too wide for the ±20% band),
                # which the ledger's slowdown record carries
                "pair_void": (entry.get("measured") or {}).get("void"),
            }
        )
    return {
        "row": row.name,
        "model": row.model if row.dtype is None else f"{row.model} {row.dtype}",
        "scenario": Path(row.scenario).stem,
        "hogs": hogs,
        "threads": threads,
        "seconds": round(seconds, 1),
        "health_void": health.get("void"),
        "core_share": (health.get("engine_thread") or {}).get("core_share"),
        "figures": figures,
    }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


def _released(fig: dict) -> str:
    released = fig.get("released")
    if released is None:
        return "–"
    return f"{released:.0%}" + ("" if fig.get("gil_release") == "released" else " (held: no C wait)")


def _threads(record: dict) -> str:
    return "" if record.get("threads") is None else f" ({record['threads']} threads, fixed)"


def table(records: list[dict]) -> str:
    lines = [
        "| row | hogs | component | share | k | GIL released | sensitivity [95%] | slowdown-predicted | Amdahl | measured (twin on) "
        "| measured / predicted | s x own saving | measured / that | delay within 5% | health |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        if "error" in record:
            lines.append(f"| {record['row']} | {record['hogs']} | error: {record['error']} |" + " |" * 12)
            continue
        health = record["health_void"] or f"ok ({record['core_share']:.0%} of a core)"
        for fig in record["figures"]:
            sens = fig["sensitivity"]
            sens_text = "–" if sens is None else f"{sens:.2f} [{fig['s_low']:.2f}, {fig['s_high']:.2f}]"
            if (fig.get("rounds") or 1) > 1:
                sens_text += f" ({fig['rounds']} runs)"
            ratio = (
                fig["measured"] / fig["predicted"]
                if fig["measured"] is not None and fig["predicted"]
                else None
            )
            own = fig["predicted_from_own"]
            own_ratio = fig["measured"] / own if fig["measured"] is not None and own else None
            void = fig.get("pair_void") or fig["slowdown_void"] or fig["verify_void"]
            delay = fig["delay_within_5pct"]
            lines.append(
                f"| {record['row']} | {record['hogs']}{_threads(record)} | {fig['component']} | {fig['share']:.1%} | "
                f"{fig['k']:.2f} | {_released(fig)} | {sens_text} | {_pct(fig['predicted'])} | {_pct(fig['amdahl'])} | "
                f"{_pct(fig['measured'])} [{_pct(fig['m_low'])}, {_pct(fig['m_high'])}] | "
                f"{'–' if ratio is None else f'{ratio:.2f}'} | {_pct(own)} | "
                f"{'–' if own_ratio is None else f'{own_ratio:.2f}'} | "
                f"{'–' if delay is None else f'{delay:.0%}'} | "
                f"{void or health} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the run directories and rows.jsonl"
    )
    parser.add_argument("--only", default="", help="comma-separated row names (default: every row)")
    parser.add_argument("--hog", type=int, default=0, help="CPU hogs beside each run (0 or 1)")
    parser.add_argument("--ledger", type=Path, default=None, help="default: OUT/ledger.jsonl")
    parser.add_argument("--tree", type=Path, default=None, help="another checkout's infer_prof to run")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch's threads, fixed for every run of a row (default: the engine's choice, which its thread "
        "governor moves with the machine's load)",
    )
    parser.add_argument("--table", action="store_true", help="print OUT/rows.jsonl as a table and stop")
    args = parser.parse_args()
    rows_file = args.out / "rows.jsonl"
    if not args.table:
        args.out.mkdir(parents=True, exist_ok=True)
        wanted = {name for name in args.only.split(",") if name}
        for row in ROWS:
            if wanted and row.name not in wanted:
                continue
            print(f"{row.name} (hogs {args.hog}) ...", file=sys.stderr, flush=True)
            record = run_row(
                row, args.out, args.ledger or args.out / "ledger.jsonl", args.hog, args.tree, args.threads
            )
            with rows_file.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
    records = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    print(table(records))


if __name__ == "__main__":
    main()
